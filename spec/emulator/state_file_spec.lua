-- The emulator's --state-file with a large world (issue 39: the README's
-- example timed clients out): a change costs the state file what changed,
-- not the whole world. It used to write the whole world (every feature of
-- every layer) after every change and every job step, tens of seconds per
-- request at 100,000 features, past a client's timeout. Measured in bytes
-- the emulator process writes (/proc/PID/io wchar: files and sockets), not
-- in seconds. And the state still survives a SIGKILL whole: every
-- acknowledged edit is there after a restart, none twice.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote

local FEATURES = 20000

local function written(pid)
  local io_text = assert(helper.read_all(("/proc/%d/io"):format(pid)))
  return tonumber(io_text:match("wchar:%s*(%d+)"))
end

local function size(path)
  local f = io.open(path, "rb")
  if not f then return 0 end
  local n = f:seek("end")
  f:close()
  return n
end

describe("emulator --state-file with a large world", function()
  local dir, data, state, emu

  local function start(port)
    local args = { "--state-file", state }
    if port then
      args[#args + 1] = "--port"
      args[#args + 1] = tostring(port)
    end
    return helper.start_emulator{ data = data, args = args }
  end

  setup(function()
    dir = helper.tmp_dir()
    local world = json.decode(helper.read_all(helper.ROOT .. "/examples/data/world.json"))
    local features = {}
    for i = 1, FEATURES do
      features[i] = { attributes = { GlobalID = ("{%08X-3A4B-4C5D-8E6F-0A1B2C3D4E01}"):format(i),
                                     FACILITYID = ("H-%05d"):format(i), STATUS = "In service" },
                      geometry = { x = -117.19 + i * 1e-6, y = 34.05 } }
    end
    world.featureServices.Parcels.layers[2].features = features
    data = dir .. "/world.json"
    helper.write_file(data, json.encode(world))
    state = dir .. "/emu-state"
    emu = start()
  end)
  teardown(function()
    if emu then emu:stop() end
    os.execute("rm -rf " .. q(dir))
  end)

  local function client(e)
    return geoservices.client{ url = e.url, token = "alice-token", timeout = 120 }
  end

  -- the hydrants the server answers for `where` (the query route, no geometry)
  local function hydrant_count(e, where)
    local out = dir .. "/query.json"
    local ok = os.execute(("curl -s -o %s %s --data-urlencode %s --data-urlencode returnGeometry=false "
      .. "--data-urlencode f=json"):format(q(out), q(e.url .. "/Parcels/FeatureServer/1/query"), q("where=" .. where)))
    assert(ok, "curl")
    local res = assert(json.decode(assert(helper.read_all(out))))
    assert.is_table(res.features, helper.read_all(out))
    return #res.features
  end

  it("a sync of one edit writes what changed, not the world; a SIGKILL and a restart keep every edit once", function()
    local path = dir .. "/crew.gpkg"
    local st = assert(geoservices.store.create(client(emu), path,
      { service = "Parcels", layers = { 1 }, replicaName = "big", syncModel = "perReplica" },
      { poll_interval = 0.05, timeout = 120 }))
    local whole = size(state) -- the world as the state file holds it
    assert.truthy(whole > 2000000, "the state file holds the world: " .. whole)
    local costs = {}
    for i = 1, 3 do
      assert(st:add(1, { attributes = { FACILITYID = "NEW-" .. i, STATUS = "Planned" },
                         geometry = { x = -117.2, y = 34.06 } }))
      local before = written(emu.pid)
      assert(st:sync(client(emu), { poll_interval = 0.05 }))
      costs[i] = written(emu.pid) - before
    end
    st:close()
    for i, cost in ipairs(costs) do
      -- the answers and a few state records: a hundredth of the world at most
      assert.truthy(cost < whole / 100, ("sync %d wrote %d bytes; the world is %d"):format(i, cost, whole))
    end
    local port = emu.port
    os.execute("kill -9 " .. emu.pid)
    helper.wait_for("the emulator to die", function() return not helper.process_alive(emu.pid) end, 5)
    emu.pid = nil
    emu.driver:close()
    emu = helper.wait_for("a restart on the same port", function()
      local ok, e = pcall(start, port)
      return ok and e
    end, 30)
    for i = 1, 3 do assert.equal(1, hydrant_count(emu, ("FACILITYID = 'NEW-%d'"):format(i))) end
    assert.equal(FEATURES + 3, hydrant_count(emu, "1=1"))
    -- and the restarted emulator goes on: a fourth edit, another restart
    st = assert(geoservices.store.open(path))
    assert(st:add(1, { attributes = { FACILITYID = "NEW-4", STATUS = "Planned" }, geometry = { x = 1, y = 2 } }))
    assert(st:sync(client(emu), { poll_interval = 0.05 }))
    st:close()
    emu:stop()
    emu = start(port)
    assert.equal(FEATURES + 4, hydrant_count(emu, "1=1"))
  end)
end)
