-- The extra cost of the rebase step (issue 36): the queued updates' features
-- read from the server by GlobalID before they are sent, at 1, 1k and 100k
-- queued updates, against the emulator, beside the whole sync.
--
--   LUA_PATH='lua/?.lua;lua/?/init.lua;./?.lua;;' LUA_CPATH='build/?.so;;' lua5.4 spec/bench/rebase_cost.lua [N...]
--
-- Prints per N: the reads (requests), their seconds, the sync's seconds.
local core = require "geoservices.core"
local geoservices = require "geoservices"
local helper = require "spec.helper"
local verify = require "geoservices.sync.verify"

local sizes = {}
for _, a in ipairs(arg) do sizes[#sizes + 1] = tonumber(a) end
if #sizes == 0 then sizes = { 1, 1000, 100000 } end

local emu = helper.start_emulator()
local dir = helper.tmp_dir()
local client = geoservices.client{ url = emu.url, token = "alice-token", timeout = 600 }
for _, n in ipairs(sizes) do
  emu:reset()
  local function create(name)
    return assert(geoservices.store.create(client, ("%s/%s-%d.gpkg"):format(dir, name, n), { service = "Parcels",
      layers = { 0 }, replicaName = name .. n, syncModel = "perReplica" }, { poll_interval = 0.05, timeout = 600 }))
  end
  local seed = create("seed")
  local gids = {}
  assert(seed:transaction(function()
    for i = 1, n do gids[i] = assert(seed:add(0, { attributes = { APN = "b" .. i }, geometry = { x = i, y = 1 } })) end
    return true
  end))
  assert(seed:sync(client, { timeout = 600 }))
  seed:close()
  local st = create("crew")
  assert(st:transaction(function()
    for i = 1, n do assert(st:update(0, { attributes = { GlobalID = gids[i], OWNER = "o" .. i } })) end
    return true
  end))
  -- the rebase's read, alone: what the hook asks before the upload
  local t0 = core.monotonic()
  local found = assert(verify.query(client, "Parcels", 0, gids, { geometry = true }))
  local read_s = core.monotonic() - t0
  local count = 0
  for _ in pairs(found) do count = count + 1 end
  t0 = core.monotonic()
  local result = assert(st:sync(client, { timeout = 600 }))
  local sync_s = core.monotonic() - t0
  print(("%d queued updates: the read %d requests, %.2f s (%d features); the whole sync %.2f s (%s)"):format(n,
    (n + 99) // 100, read_s, count, sync_s, tostring(result.summary)))
  st:close()
  os.execute(("rm -f %s/*-%d.gpkg*"):format(dir, n))
end
emu:stop()
os.execute("rm -rf " .. helper.shell_quote(dir))
