-- A createReplica in flight is recorded beside the target path (issue 27,
-- item 5), so that a rerun of the same create after a kill or a lost answer
-- unregisters what the first one made before the server answered, and the
-- service ends with exactly one replica for the store, never two.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

describe("a store's createReplica whose answer never came", function()
  local emu, dir

  local world = helper.store_world()
  setup(function()
    world.start()
    emu, dir = world.emu, world.dir
  end)
  teardown(world.stop)
  before_each(function() emu:reset() end)

  local function client() return geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 } end

  local function params(name)
    return { service = "Parcels", layers = { 0 }, replicaName = name, syncModel = "perReplica", async = false }
  end

  -- the replicas of Parcels on the server: {id = name}
  local function server_replicas()
    local out = {}
    for _, r in ipairs(assert(client():list_replicas("Parcels"))) do out[r.replicaID] = r.replicaName end
    return out
  end

  local function count(t)
    local n = 0
    for _ in pairs(t) do n = n + 1 end
    return n
  end

  -- what the service holds in layer 0, to compare a store with
  local function server_features()
    local n = 0
    for _ in pairs(emu:control("state").featureServices.Parcels.layers["0"].features) do n = n + 1 end
    return n
  end

  -- Runs a create in a child process, kills it (-9) once the emulator has
  -- made the replica and before its answer leaves (the answer is delayed).
  local function killed_create(path, name)
    emu:fault{ route = "createReplica", kind = "delay", delay_ms = 20000, attempts = { 1 } }
    local script = dir .. "/create_child.lua"
    helper.write_file(script, ([[
      local geoservices = require "geoservices"
      local c = geoservices.client{ url = %q, token = "alice-token" }
      local p = { service = "Parcels", layers = { 0 }, syncModel = "perReplica", async = false }
      p.replicaName = %s
      assert(geoservices.store.create(c, arg[1], p, { poll_interval = 0.05 }))
    ]]):format(emu.url, name and ("%q"):format(name) or "nil"))
    local before = count(server_replicas())
    local out = helper.run_shell(("LUA_PATH=%s LUA_CPATH=%s lua5.4 %s %s > %s 2>&1 & echo $!"):format(
      q(package.path), q(package.cpath), q(script), q(path), q(dir .. "/create_child.log")))
    local pid = assert(tonumber(out:match("(%d+)")), out)
    helper.wait_for("the server to make the replica", function() return count(server_replicas()) > before end, 10)
    os.execute("kill -9 " .. pid)
    helper.wait_for("the child to die", function() return not helper.process_alive(pid) end, 5)
    emu:control("faults/clear", {})
    assert.is_false(exists(path))
    assert.is_true(exists(path .. ".create.json"), "the journal of the create in flight")
    return before
  end

  it("named by the user, killed before the answer: a rerun leaves one replica of that name", function()
    local path = dir .. "/killed.gpkg"
    local before = killed_create(path, "killed")
    local st = assert(geoservices.store.create(client(), path, params("killed"), { poll_interval = 0.05 }))
    local now = server_replicas()
    assert.equal(before + 1, count(now))
    assert.equal("killed", now[st:replica().replicaID])
    assert.equal(server_features(), st:count(0))
    assert.is_false(exists(path .. ".create.json"))
    st:close()
  end)

  it("without a name, killed before the answer: a rerun leaves one replica for the store", function()
    local path = dir .. "/unnamed.gpkg"
    local before = killed_create(path, nil)
    local p = params(nil)
    local st = assert(geoservices.store.create(client(), path, p, { poll_interval = 0.05 }))
    local now = server_replicas()
    assert.equal(before + 1, count(now), "replicas on the server: " .. json.encode(now))
    assert.is_string(now[st:replica().replicaID])
    assert.equal(server_features(), st:count(0))
    st:close()
  end)

  it("whose connection closed after the server made the replica: a rerun leaves one", function()
    local path = dir .. "/reset.gpkg"
    local before = count(server_replicas())
    emu:fault{ route = "createReplica", kind = "reset", phase = "after", attempts = { 1 } }
    local st, err = geoservices.store.create(client(), path, params("reset"), { poll_interval = 0.05 })
    assert.is_nil(st)
    assert.is_true(err.ambiguous, tostring(err.message))
    assert.equal(before + 1, count(server_replicas()))
    st = assert(geoservices.store.create(client(), path, params("reset"), { poll_interval = 0.05 }))
    local now = server_replicas()
    assert.equal(before + 1, count(now))
    assert.equal("reset", now[st:replica().replicaID])
    assert.equal(server_features(), st:count(0))
    st:close()
  end)

  it("that never reached the server: a rerun unregisters nothing and makes the one replica", function()
    local path = dir .. "/never.gpkg"
    local before = count(server_replicas())
    emu:fault{ route = "createReplica", kind = "reset", phase = "before", attempts = { 1 } }
    local st = geoservices.store.create(client(), path, params("never"), { poll_interval = 0.05 })
    assert.is_nil(st)
    assert.equal(before, count(server_replicas()))
    st = assert(geoservices.store.create(client(), path, params("never"), { poll_interval = 0.05 }))
    assert.equal(before + 1, count(server_replicas()))
    assert.equal(0, emu:count("unRegisterReplica"))
    st:close()
  end)

  it("is refused at the rerun, naming the journal, when the server's replicas cannot be listed", function()
    local path = dir .. "/unlisted.gpkg"
    killed_create(path, "unlisted")
    local creates, unregisters = emu:count("createReplica"), emu:count("unRegisterReplica")
    emu:fault{ route = "replicas", kind = "status", status = 500 }
    local st, err = geoservices.store.create(client(), path, params("unlisted"), { poll_interval = 0.05 })
    assert.is_nil(st)
    assert.truthy(err.message:find(path .. ".create.json", 1, true), err.message)
    assert.truthy(err.message:find("geoservices replicas Parcels", 1, true), err.message)
    assert.equal(creates, emu:count("createReplica"))
    assert.equal(unregisters, emu:count("unRegisterReplica"))
    assert.is_true(exists(path .. ".create.json"))
    emu:control("faults/clear", {})
  end)
end)
