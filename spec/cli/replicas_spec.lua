-- The replicas of a feature service (issue 29): client:list_replicas
-- (`<service>/FeatureServer/replicas?f=json`, a JSON array of replicaName and
-- replicaID as the vendor documents it: every replica for an administrator,
-- a user's own otherwise), with `details` each replica's resource too; and
-- `geoservices replicas SERVICE` (name, id, owner, model, last sync,
-- generation; --json), against the emulator.
local geoservices = require "geoservices"
local helper = require "spec.helper"

local q = helper.shell_quote
local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local OFFICE = "{5E1A0C2B-3333-4A5B-9C8D-000000000003}"

describe("the replicas of a service", function()
  local emu, dir
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    emu:control("settings", { job_step_ms = 20 })
    dir = helper.tmp_dir()
  end)
  after_each(function() os.execute("rm -rf " .. q(dir)) end)

  local function client(token)
    return geoservices.client{ url = emu.url, token = token }
  end

  local function names(list)
    local out = {}
    for i, r in ipairs(list) do out[i] = r.replicaName end
    table.sort(out)
    return out
  end

  it("client:list_replicas: every replica for an administrator, as the server lists them", function()
    local c <close> = client("admin-token")
    local list, err = c:list_replicas("Parcels")
    assert.is_table(list, tostring(err))
    assert.same({ "crew-1", "crew-2", "office" }, names(list))
    for _, r in ipairs(list) do assert.matches("^{[%x-]+}$", r.replicaID) end
    assert.equal("Parcels", list.service)
    assert.equal("3 replicas of Parcels: crew-1, crew-2, office", tostring(list))
    assert.equal(1, emu:count("replicas"))
  end)

  it("a user sees the replicas she created; details reads each one's resource", function()
    local alice <close> = client("alice-token")
    assert.same({}, names(assert(alice:list_replicas("Parcels"))))
    assert(alice:create_replica("Parcels", { replicaName = "alice-1", layers = { 0 }, async = false }))
    local bob <close> = client("bob-token")
    assert(bob:create_replica("Parcels", { replicaName = "bob-1", layers = { 0 }, async = false }))
    local list = assert(alice:list_replicas("Parcels", { details = true }))
    assert.same({ "alice-1" }, names(list))
    local r = list[1]
    assert.equal("alice", r.replicaOwner)
    assert.equal("perReplica", r.syncModel)
    assert.equal("integer", math.type(r.replicaServerGen))
    assert.equal("integer", math.type(r.lastSyncDate))
    assert.matches("^replica alice%-1 ", tostring(r))
    local admin <close> = client("admin-token")
    assert.same({ "alice-1", "bob-1", "crew-1", "crew-2", "office" }, names(assert(admin:list_replicas("Parcels"))))
  end)

  it("fails with the server's error for an unknown service, and refuses a bad name before sending", function()
    local c <close> = client("admin-token")
    local list, err = c:list_replicas("NoSuchService")
    assert.is_nil(list)
    assert.equal("server", err.kind)
    assert.equal(404, err.code)
    local before = emu:requests().total
    list, err = c:list_replicas("../admin")
    assert.is_nil(list)
    assert.equal("invalid", err.kind)
    assert.equal(before, emu:requests().total)
  end)

  describe("geoservices replicas SERVICE", function()
    local function run(...)
      return helper.run_cli({ "--url", emu.url, "--token", "admin-token", ... }, { XDG_CONFIG_HOME = dir })
    end

    it("prints one row per replica: name, id, owner, model, last sync, generation", function()
      local r = run("replicas", "Parcels")
      assert.equal(0, r.code, r.out .. r.err)
      assert.truthy(r.out:find("3 replicas of Parcels", 1, true), r.out)
      for _, header in ipairs{ "NAME", "ID", "OWNER", "MODEL", "LAST SYNC", "GENERATION" } do
        assert.truthy(r.out:find(header, 1, true), header)
      end
      local crew = r.out:match("[^\n]*" .. CREW1:gsub("%p", "%%%0") .. "[^\n]*")
      assert.truthy(crew and crew:find("crew-1", 1, true) and crew:find("perReplica", 1, true), r.out)
      local office = r.out:match("[^\n]*" .. OFFICE:gsub("%p", "%%%0") .. "[^\n]*")
      assert.truthy(office and office:find("perLayer", 1, true) and office:find("0:", 1, true), r.out)
    end)

    it("--json: one replica event each, then the result", function()
      local r = run("--json", "replicas", "Parcels")
      assert.equal(0, r.code, r.out .. r.err)
      local events = helper.events(r.out)
      local listed = helper.find_events(events, "replica")
      assert.equal(3, #listed)
      local by_id = {}
      for _, ev in ipairs(listed) do by_id[ev.replicaID] = ev end
      assert.same({ "crew-1", "perReplica", "Parcels" },
        { by_id[CREW1].replicaName, by_id[CREW1].model, by_id[CREW1].service })
      assert.equal("integer", math.type(by_id[CREW1].generation))
      assert.equal(2, #by_id[OFFICE].layerServerGens)
      assert.same({ "result", 0, 3 }, { events[#events].event, events[#events].exit, events[#events].count })
    end)

    it("exits 1 for a service the server does not have, 2 for a name that cannot be one", function()
      local r = run("replicas", "NoSuchService")
      assert.equal(1, r.code)
      assert.truthy(r.err:find("NoSuchService", 1, true), r.err)
      r = run("replicas", "no such")
      assert.equal(2, r.code)
      r = run("replicas")
      assert.equal(2, r.code)
      assert.truthy(r.err:find("Usage: geoservices replicas", 1, true), r.err)
    end)
  end)
end)
