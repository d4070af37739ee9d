-- The crash torture of store:sync (`lua5.4 spec/torture/run.lua RUNS SEED store`).
-- Each run: two local adds and an update of an earlier add are queued in
-- store A, a child process (spec/support/store_child.lua) runs A's sync,
-- sync or async at random, and is killed with SIGKILL at a random moment;
-- then A syncs again until it succeeds (a job still running refuses a
-- re-send: busy, try again). Store B downloads after every run. At the end:
-- every add is on the server exactly once, in A and in B, A's queue and
-- failed edits are empty, and every update reached B.
local geoservices = require "geoservices"
local helper = require "spec.helper"

local q = helper.shell_quote
local RUNS = tonumber(arg[1]) or 50
local SEED = tonumber(arg[2]) or os.time()
math.randomseed(SEED)

local dir = helper.tmp_dir() -- in spec/helper.lua's scratch directory: gone when the state closes, even on an error
local emu = helper.start_emulator()
emu:control("settings", { job_step_ms = 40 })
local client = geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 }
local a = assert(geoservices.store.create(client, dir .. "/a.gpkg", { service = "Parcels", layers = { 0 },
  replicaName = "a", syncModel = "perReplica" }, { poll_interval = 0.05 }))
local b = assert(geoservices.store.create(client, dir .. "/b.gpkg", { service = "Parcels", layers = { 0 },
  replicaName = "b", syncModel = "perLayer" }, { poll_interval = 0.05 }))
local base = a:count(0)
a:close()

local tally = { runs = 0, killed = 0, exited = 0, resolved = 0, retries = 0 }
local gids = {}
for run = 1, RUNS do
  local st = assert(geoservices.store.open(dir .. "/a.gpkg"))
  for i = 1, 2 do
    gids[#gids + 1] = assert(st:add(0, { attributes = { OWNER = ("t%d.%d"):format(run, i) },
                                          geometry = { x = run, y = i } }))
  end
  if run > 1 then assert(st:update(0, { attributes = { GlobalID = gids[#gids - 2], ACRES = run } })) end
  st:close()
  local log = dir .. "/child.log"
  local out = io.popen(("LUA_PATH=%s LUA_CPATH=%s lua5.4 spec/support/store_child.lua %s %s %s > %s 2>&1 & "
    .. "echo $!"):format(q(package.path), q(package.cpath), q(emu.url), q(dir .. "/a.gpkg"),
    math.random() < 0.5 and "async" or "sync", q(log))):read("a")
  local pid = assert(tonumber(out:match("%d+")))
  helper.sleep(math.random() * 0.2) -- a store sync here takes 0.1 to 0.3 s, the process start included
  if helper.process_alive(pid) then tally.killed = tally.killed + 1 else tally.exited = tally.exited + 1 end
  os.execute("kill -9 " .. pid .. " 2>/dev/null")
  helper.wait_for("child exit", function() return not helper.process_alive(pid) end, 30)
  st = assert(geoservices.store.open(dir .. "/a.gpkg"))
  local result, err
  for _ = 1, 100 do
    result, err = st:sync(client, { poll_interval = 0.05, timeout = 30 })
    if result then break end
    tally.retries = tally.retries + 1
    helper.sleep(0.1)
  end
  assert(result, err and tostring(err))
  if result.resolved then tally.resolved = tally.resolved + 1 end
  assert(#st:pending() == 0 and #st:failed() == 0, "queue not empty after run " .. run)
  st:close()
  assert(b:sync(client, { poll_interval = 0.05 }))
  tally.runs = run
end

local problems = {}
local fresh = assert(geoservices.store.create(client, dir .. "/fresh.gpkg", { service = "Parcels", layers = { 0 },
  replicaName = "fresh" }, { poll_interval = 0.05 }))
local st = assert(geoservices.store.open(dir .. "/a.gpkg"))
for _, s in ipairs{ st, b, fresh } do
  if s:count(0) ~= base + #gids then
    problems[#problems + 1] = ("%s: %d features, expected %d"):format(s.path, s:count(0), base + #gids)
  end
  for i, gid in ipairs(gids) do
    local f = s:get(0, gid)
    if not f then problems[#problems + 1] = ("%s: add %d (%s) lost"):format(s.path, i, gid) end
  end
end
for i = 1, #gids - 2, 2 do -- every update reached B as the server has it
  local fa, fb = fresh:get(0, gids[i]), b:get(0, gids[i])
  if fa.attributes.ACRES ~= fb.attributes.ACRES then
    problems[#problems + 1] = ("update of %s: server %s, b %s"):format(gids[i], tostring(fa.attributes.ACRES),
      tostring(fb.attributes.ACRES))
  end
end
print(("store torture seed %d: %d runs, %d children killed mid-sync, %d had finished, %d interrupted attempts "
  .. "resolved by the next sync, %d busy retries; %d adds, %d problems"):format(SEED, tally.runs, tally.killed,
  tally.exited, tally.resolved, tally.retries, #gids, #problems))
for _, p in ipairs(problems) do print("  " .. p) end
st:close()
b:close()
fresh:close()
emu:stop()
os.execute("rm -rf " .. q(dir))
os.exit(#problems == 0 and 0 or 1, true) -- closing the state removes the scratch directory
