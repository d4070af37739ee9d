-- The crash torture of client:sync (`make torture`; a short version runs in
-- `make test` through spec/torture_spec.lua).
--
-- Each run: a client process synchronizes replica A with new edits (adds
-- with GlobalIDs and an update of an earlier feature), sync or async at
-- random, and is killed with SIGKILL at a random moment; in a share of the
-- runs the emulator is killed too and restarted with its --state-file on
-- the same port. Then the same sync runs again until it succeeds. Replica B
-- downloads after every run. At the end: every edit is on the server
-- exactly once, A and B are at the server's generation, and B downloaded
-- every add of A exactly once.
--
--   lua5.4 spec/torture/run.lua [RUNS] [SEED]        (env LUA_PATH/LUA_CPATH as for the specs)
--   lua5.4 spec/torture/run.lua RUNS SEED store      (the replica store: spec/torture/store.lua)
-- Prints the tally; exits 1 when anything was duplicated or lost.
if arg[3] == "store" then -- the store mode: spec/torture/store.lua
  return dofile("spec/torture/store.lua")
end
local core = require "geoservices.core"
local geoservices = require "geoservices"
local json = require "geoservices.json"
local helper = require "spec.helper"

local q = helper.shell_quote
local RUNS = tonumber(arg[1]) or 200
local SEED = tonumber(arg[2]) or os.time()
local EMULATOR_KILL_SHARE = 0.2
local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local CREW2 = "{5E1A0C2B-2222-4A5B-9C8D-000000000002}"

math.randomseed(SEED)

local dir = helper.tmp_dir() -- in spec/helper.lua's scratch directory: gone when the state closes, even on an error

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- The emulator, restartable on the same port with its state file.
local emu = { port = 0, state_file = dir .. "/emulator-state.json" }

function emu.start()
  local log, pidfile = dir .. "/emulator.log", dir .. "/emulator.pid"
  os.remove(log)
  local cmd = ("LUA_PATH=%s LUA_CPATH=%s lua5.4 lua/geoservices/emulator/main.lua --port %d --data %s "
    .. "--state-file %s --exit-with %d > %s 2>&1 & echo $! > %s"):format(q(package.path), q(package.cpath),
      emu.port, q("examples/data/world.json"), q(emu.state_file), helper.own_pid(), q(log), q(pidfile))
  assert(os.execute(cmd))
  emu.pid = helper.wait_for("emulator pid", function() return tonumber(helper.read_all(pidfile)) end, 5)
  emu.url = helper.wait_for("emulator start-up", function()
    local text = helper.read_all(log) or ""
    if not helper.process_alive(emu.pid) then error("emulator exited: " .. text) end
    return text:match("listening on (http://127%.0%.0%.1:%d+/server)")
  end, 15)
  emu.port = tonumber(emu.url:match(":(%d+)/"))
  emu.root = emu.url:match("^(http://[^/]+)")
end

function emu.kill()
  os.execute("kill -9 " .. emu.pid .. " 2>/dev/null")
  helper.wait_for("emulator exit", function() return not helper.process_alive(emu.pid) end, 10)
end

function emu.control(path, body)
  local drv = core.driver()
  local spec = { url = emu.root .. "/_emulator/" .. path, timeout_ms = 10000 }
  if body then spec.method, spec.body, spec.content_type = "POST", json.encode(body), "application/json" end
  local transport = require "geoservices.net.transport"
  local resp = assert(transport.perform(drv, spec))
  drv:close()
  assert(resp.status == 200, path .. ": HTTP " .. resp.status)
  return json.decode(resp.body)
end

local tally = { runs = 0, kills = 0, emulator_kills = 0, retries = 0, edits = 0, duplicates = 0, lost = 0,
                skipped = 0, downloaded_twice = 0, journals = 0, jobs_reattached = 0 }

local function child(state, edits_path, mode)
  local out, pidfile = dir .. "/child.out", dir .. "/child.pid"
  os.remove(out)
  local cmd = ("LUA_PATH=%s LUA_CPATH=%s lua5.4 spec/support/sync_child.lua %s %s %s %s 30 > %s 2>&1 & echo $! > %s")
    :format(q(package.path), q(package.cpath), q(emu.url), q(state), q(edits_path), mode, q(out), q(pidfile))
  assert(os.execute(cmd))
  local pid = helper.wait_for("child pid", function() return tonumber(helper.read_all(pidfile)) end, 5)
  return pid, out
end

local function finished(out)
  local line = (helper.read_all(out) or ""):match("({.-})%s*$")
  return line and json.decode(line)
end

emu.start()
emu.control("settings", { job_step_ms = 15 })
local state_a, state_b = dir .. "/crew-1.json", dir .. "/crew-2.json"
write(state_a, json.encode{ service = "Parcels", replicaID = CREW1, model = "perReplica", replicaServerGen = 1 })
write(state_b, json.encode{ service = "Parcels", replicaID = CREW2, model = "perReplica", replicaServerGen = 1 })

local expected = {}   -- GlobalID -> the value of its latest update
local order = {}
local seen_by_b = {}  -- GlobalID -> times replica B downloaded its add

local function sync_b()
  for _ = 1, 20 do
    local c = geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 }
    local r, err = c:sync(state_b, nil, { discard = true, lock_timeout = 30, timeout = 60,
      on_change = function(_, kind, record)
        if kind == "add" and type(record.attributes) == "table" then
          local gid = record.attributes.GlobalID
          if expected[gid] ~= nil then seen_by_b[gid] = (seen_by_b[gid] or 0) + 1 end
        end
      end })
    c:close()
    if r then return end
    io.stderr:write("replica B: ", tostring(err), "\n")
    helper.sleep(0.2)
  end
  error("replica B could not synchronize")
end

local started = core.monotonic()
for run = 1, RUNS do
  tally.runs = run
  local e = geoservices.edits()
  for i = 1, 2 do
    local gid = e:add(0, { attributes = { APN = ("torture-%d-%d"):format(run, i), ACRES = run },
                           geometry = { x = -117 - run / 1000, y = 34 } })
    expected[gid] = ("torture-%d-%d"):format(run, i)
    order[#order + 1] = gid
    tally.edits = tally.edits + 1
  end
  if #order > 2 then
    local gid = order[math.random(#order - 2)]
    local value = ("updated-%d"):format(run)
    e:update(0, { attributes = { GlobalID = gid, APN = value } })
    expected[gid] = value
    tally.edits = tally.edits + 1
  end
  local edits_path = dir .. "/edits.json"
  write(edits_path, e:encode())
  local mode = math.random() < 0.5 and "async" or "sync"
  local pid, out = child(state_a, edits_path, mode)
  helper.sleep(math.random() * 0.15) -- a typical sync here takes 0.05 to 0.2 s
  if helper.process_alive(pid) then
    os.execute("kill -9 " .. pid .. " 2>/dev/null")
    tally.kills = tally.kills + 1
  end
  helper.wait_for("child exit", function() return not helper.process_alive(pid) end, 30)
  if math.random() < EMULATOR_KILL_SHARE then
    emu.kill()
    tally.emulator_kills = tally.emulator_kills + 1
    emu.start()
    emu.control("settings", { job_step_ms = 15 })
  end
  -- the same sync again (same edits, as a re-send) until it succeeds
  local attempts = 0
  while true do
    local r = finished(out)
    if r and r.ok then break end
    attempts = attempts + 1
    if attempts > 30 then error("run " .. run .. ": the sync never succeeded: " .. tostring(r and r.message)) end
    tally.retries = tally.retries + 1
    local journal = helper.read_all(state_a .. ".journal")
    if journal then
      tally.journals = tally.journals + 1
      if json.decode(journal).status_url then tally.jobs_reattached = tally.jobs_reattached + 1 end
    end
    local again
    again, out = child(state_a, edits_path, mode .. "-resend")
    helper.wait_for("child exit", function() return not helper.process_alive(again) end, 120)
  end
  sync_b()
  if run % 25 == 0 then
    io.stderr:write(("torture: %d/%d runs, %.0f s\n"):format(run, RUNS, core.monotonic() - started))
  end
end

-- The verdict, from the server's own state: B catches up, then A syncs last
-- (every sync moves the server's generation), so A must hold the server's.
sync_b()
do
  local c = geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 }
  assert(c:sync(state_a, nil, { discard = true, lock_timeout = 30 }))
  c:close()
end
local svc = emu.control("state").featureServices.Parcels
local features = svc.layers["0"].features
local count_by_origin_apn = {}
for _, f in pairs(features) do
  local apn = f.attributes.APN
  if type(apn) == "string" and apn:match("^torture%-") then
    count_by_origin_apn[apn] = (count_by_origin_apn[apn] or 0) + 1
  end
end
for _, n in pairs(count_by_origin_apn) do
  if n > 1 then tally.duplicates = tally.duplicates + n - 1 end
end
for _, gid in ipairs(order) do
  local f = features[gid]
  if not f then
    tally.lost = tally.lost + 1
  elseif f.attributes.APN ~= expected[gid] then
    tally.lost = tally.lost + 1 -- its latest update did not arrive
  end
  local n = seen_by_b[gid] or 0
  if n == 0 then
    tally.skipped = tally.skipped + 1
  elseif n > 1 then
    tally.downloaded_twice = tally.downloaded_twice + 1
  end
end
local gen_a = json.decode(helper.read_all(state_a)).replicaServerGen
local gen_b = json.decode(helper.read_all(state_b)).replicaServerGen
local journal_left = helper.read_all(state_a .. ".journal") ~= nil
print(("torture: runs %d, kills %d (emulator %d), retries %d (journals resolved %d, of them jobs re-attached %d), "
  .. "edits %d, duplicates %d, lost %d, skipped by B %d, downloaded twice by B %d, generations A %s B %s server %s, "
  .. "journal left %s, seed %d, %.0f s")
  :format(tally.runs, tally.kills, tally.emulator_kills, tally.retries, tally.journals, tally.jobs_reattached,
    tally.edits, tally.duplicates, tally.lost,
    tally.skipped, tally.downloaded_twice, tostring(gen_a), tostring(gen_b), tostring(svc.gen),
    tostring(journal_left), SEED, core.monotonic() - started))
os.execute("kill " .. emu.pid .. " 2>/dev/null")
os.execute("rm -rf " .. q(dir))
local ok = tally.duplicates == 0 and tally.lost == 0 and tally.skipped == 0 and tally.downloaded_twice == 0
  and not journal_left and gen_a == svc.gen and gen_b < gen_a
os.exit(ok and 0 or 1, true) -- closing the state removes the scratch directory
