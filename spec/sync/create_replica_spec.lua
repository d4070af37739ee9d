-- A replica's lifecycle against the emulator: the service and layer
-- resources, createReplica (async by default, synchronous, URL or embedded,
-- per replica or per layer, filtered, with attachments), the replica it
-- registers synchronizing afterwards, its resource, unRegisterReplica, and
-- everything surviving a restart with --state-file.
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local VALVE1 = "{3C5E7A90-1B2D-4F60-8A1C-000000000301}"

local function tmp_path()
  local p = helper.tmp_name()
  os.remove(p)
  return p
end

describe("a replica's lifecycle against the emulator", function()
  local emu, client
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    emu:control("settings", { job_step_ms = 30 })
    client = geoservices.client{ url = emu.url, token = "alice-token" }
  end)

  local function live_features(service, layer)
    local n = 0
    for _ in pairs(emu:control("state").featureServices[service].layers[tostring(layer)].features) do n = n + 1 end
    return n
  end

  describe("service and layer metadata", function()
    it("describe the layers, sync and its capabilities, per service", function()
      local parcels = assert(client:service_info("Parcels"))
      assert.is_true(parcels.syncEnabled)
      assert.is_true(parcels.syncCapabilities.supportsPerReplicaSync)
      assert.is_true(parcels.syncCapabilities.supportsAsync)
      assert.equal("service Parcels: 2 layers (0 Parcels, 1 Hydrants), sync enabled: perReplica, perLayer, async, "
        .. "direction control", tostring(parcels))
      local utilities = assert(client:service_info("Utilities"))
      assert.is_false(utilities.syncCapabilities.supportsPerReplicaSync)
      assert.is_true(utilities.syncCapabilities.supportsPerLayerSync)
      assert.equal("esriGeometryPolyline", utilities:layer(0).geometryType)
      assert.equal("Inspections", utilities.tables[1].name)
      local viewer = assert(client:service_info("Viewer"))
      assert.is_false(viewer.syncEnabled)
      local _, err = client:service_info("Nope")
      assert.equal("server", err.kind)
      assert.equal(404, err.code)
    end)

    it("give each layer its fields with their types, geometry type and spatial reference", function()
      local parcels = assert(client:layer_info("Parcels", 0))
      assert.equal("esriGeometryPoint", parcels.geometryType)
      assert.equal(4326, parcels.spatialReference.wkid) -- from the extent, as real layer resources give it
      assert.is_nil(rawget(json.decode(json.encode(parcels.extent)), "x"))
      assert.equal("OBJECTID", parcels.objectIdField)
      assert.equal("GlobalID", parcels.globalIdField)
      assert.equal("esriFieldTypeDate", parcels:field("UPDATED").type)
      assert.equal("esriFieldTypeDouble", parcels:field("ACRES").type)
      assert.equal(20, parcels:field("APN").length)
      assert.equal("layer 0 Parcels of Parcels: esriGeometryPoint, wkid 4326, 7 fields (OBJECTID, GlobalID)",
        tostring(parcels))
      local zones = assert(client:layer_info("Utilities", 1))
      assert.equal("esriGeometryPolygon", zones.geometryType)
      local valves = assert(client:layer_info("Utilities", 2))
      assert.is_true(valves.hasAttachments)
      local table_ = assert(client:layer_info("Utilities", 3))
      assert.is_true(table_.is_table)
      assert.equal("Table", table_.type)
      assert.is_nil(table_.geometryType)
      local _, err = client:layer_info("Parcels", 9)
      assert.equal("server", err.kind)
      _, err = client:layer_info("Parcels", -1)
      assert.equal("invalid", err.kind)
    end)
  end)

  describe("createReplica", function()
    it("runs as a job by default through its phases, registers the replica and downloads its data", function()
      -- each phase lasts long enough for a poll to see it on a loaded machine (30 ms did not, at load
      -- 20); the polls back off (x1.5 a poll), 0.3-0.45 s apart when the job reaches its two create
      -- phases (0.6 s together), so a poll stalled a few tenths of a second misses both: the job runs
      -- again with longer phases (a job that skips them fails at every length)
      local result, statuses
      helper.within_window("a poll during the create phases", { 300, 1200, 4800 }, function(step_ms)
        emu:reset()
        emu:control("settings", { job_step_ms = step_ms })
        statuses = {}
        result = assert(client:create_replica("Parcels", { replicaName = "crew-9", layers = { 0, 1 } }, {
          poll_interval = 0.01, on_status = function(s) statuses[#statuses + 1] = s.status end,
        }))
        assert.equal("Completed", statuses[#statuses])
        local seen = table.concat(statuses, " ")
        return (seen:find("ProvisioningReplica", 1, true) or seen:find("ExportingData", 1, true)) ~= nil
      end)
      assert.equal("crew-9", result.replicaName)
      assert.matches("^{%x+%-%x+%-%x+%-%x+%-%x+}$", result.replicaID)
      assert.equal("perReplica", result.syncModel)
      assert.equal("integer", math.type(result.replicaServerGen))
      assert.same({ 0, 1 }, result.layers)
      assert.same({ features = 3, attachments = 0 }, result.counts[0])
      assert.same({ features = 1, attachments = 0 }, result.counts[1])
      assert.equal("url", result.transport)
      assert.equal("esriReplicaResponseTypeData", result.responseType)
      local first = result.data[1].features[1]
      assert.equal(PARCEL1, first.attributes.GlobalID)
      assert.equal(1, first.attributes.OBJECTID)
      assert.equal(1700000000000, first.attributes.UPDATED)
      assert.equal(-117.19584274291992, first.geometry.x)
      assert.equal("createReplica crew-9 " .. result.replicaID .. " of Parcels: perReplica, layers 0,1, 4 features, "
        .. "0 attachments, via url, generation " .. result.replicaServerGen, tostring(result))
      assert.equal(1, emu:count("createReplica"))
      assert.equal(1, emu:count("serviceInfo")) -- the capabilities, read first
      local reps = emu:control("state").featureServices.Parcels.replicas
      assert.same({ closed = false, model = "perReplica", gen = result.replicaServerGen }, reps[result.replicaID])
    end)

    it("gives a replica that synchronizes from its generation: later changes arrive once, the data never again",
      function()
      local result = assert(client:create_replica("Parcels", { replicaName = "crew-9", layers = { 0, 1 } },
                                                  { poll_interval = 0.01 }))
      local path = tmp_path() .. ".json"
      local r = assert(geoservices.replica(path, result:replica_state()))
      local other = geoservices.client{ url = emu.url, token = "bob-token" }
      local e = geoservices.edits()
      local gid = e:add(1, { attributes = { FACILITYID = "H-0002", STATUS = "New" }, geometry = { x = 1, y = 2 } })
      assert(other:synchronize_replica("Parcels", { replicaID = "{5E1A0C2B-2222-4A5B-9C8D-000000000002}",
                                                    replicaServerGen = 1, edits = e }))
      local s = assert(client:sync(r))
      assert.equal(1, s.downloaded)
      local adds = {}
      for _, entry in ipairs(s.edits) do
        for _, f in ipairs(entry.features.adds) do adds[#adds + 1] = entry.id .. " " .. f.attributes.GlobalID end
      end
      assert.same({ "1 " .. gid }, adds)
      s = assert(client:sync(path))
      assert.equal(0, s.downloaded)
      local info = assert(client:replica_info("Parcels", result.replicaID))
      assert.equal(s.replicaServerGen, info.replicaServerGen) -- the server's view moved with the syncs
      os.remove(path)
    end)

    it("answers a synchronous URL request tersely: the replica's id and generation come from the file", function()
      local result = assert(client:create_replica("Parcels", { replicaName = "sync-url", layers = "0", async = false }))
      assert.equal("url", result.transport)
      assert.matches("^{", result.replicaID)
      assert.same({ 0 }, result.layers)
      assert.equal(3, result.features)
      assert.truthy(result.result_url:find("/replicafiles/", 1, true))
    end)

    it("embeds the data with transportType embedded, streaming each feature to on_change", function()
      local seen = {}
      local result = assert(client:create_replica("Parcels", { replicaName = "emb", layers = { 1 }, async = false,
                                                                transportType = "embedded" },
        { on_change = function(layer, kind, f) seen[#seen + 1] = { layer, kind, f.attributes.FACILITYID } end }))
      assert.equal("embedded", result.transport)
      assert.same({ { 1, "add", "H-0001" } }, seen)
      assert.is_nil(result.data)
      assert.equal(1, result.downloaded)
    end)

    it("makes a perLayer replica of every geometry, a table and attachments' metadata", function()
      local result = assert(client:create_replica("Utilities", { replicaName = "crew-u", layers = { 0, 1, 2, 3 },
                                                                  returnAttachments = true }, { poll_interval = 0.01 }))
      assert.equal("perLayer", result.syncModel) -- what the service supports when nothing is asked
      assert.equal(4, #result.layerServerGens)
      assert.same({ features = 3, attachments = 0 }, result.counts[0])
      assert.same({ features = 2, attachments = 0 }, result.counts[1])
      assert.same({ features = 2, attachments = 2 }, result.counts[2])
      assert.same({ features = 2, attachments = 0 }, result.counts[3])
      local by_id = {}
      for _, l in ipairs(result.data) do by_id[l.id] = l end
      assert.equal(2, #by_id[1].features[1].geometry.rings) -- the zone with its hole
      assert.equal(2, #by_id[0].features[3].geometry.paths)
      assert.is_nil(by_id[3].features[1].geometry)
      local photo = by_id[2].attachments[1]
      assert.equal(VALVE1, photo.parentGlobalId)
      assert.equal("image/jpeg", photo.contentType)
      assert.equal(24817, photo.size)
      local state = result:replica_state()
      assert.equal("perLayer", state.model)
      assert.same({ id = 2, serverGen = result.generations[2] }, state.layers[3])
      for id = 0, 3 do assert.equal(live_features("Utilities", id), result.counts[id].features) end
    end)

    it("filters by an extent and by layerQueries", function()
      local result = assert(client:create_replica("Utilities", {
        replicaName = "east", layers = { 0, 1, 2, 3 }, async = false,
        geometry = { xmin = -117.1895, ymin = 34.049, xmax = -117.179, ymax = 34.06,
                     spatialReference = { wkid = 4326 } },
        layerQueries = { [0] = { queryOption = "all" }, [1] = { queryOption = "useFilter", where = "PRESSURE < 60" },
                         [3] = { queryOption = "none" } },
      }))
      assert.equal(3, result.counts[0].features)  -- all: the extent does not apply
      assert.equal(1, result.counts[1].features)  -- Z-East, in the extent and under 60
      assert.equal(1, result.counts[2].features)  -- V-2 only
      assert.equal(0, result.counts[3].features)  -- none: the table's schema only
      local info = assert(client:replica_info("Utilities", result.replicaID))
      assert.equal(-117.1895, info.queryGeometry.xmin)
      assert.equal("all", info.layerQueries["0"].queryOption)
    end)

    it("reads where clauses of comparisons joined by AND, and refuses the rest", function()
      local function count(where)
        local result, err = client:create_replica("Utilities", { layers = { 0 }, async = false,
          layerQueries = { [0] = { queryOption = "useFilter", where = where } } })
        if not result then return nil, err end
        return result.counts[0].features
      end
      assert.equal(1, count("MATERIAL = 'PVC'"))
      assert.equal(1, count("INSTALLED IS NULL"))
      assert.equal(2, count("installed is not null"))
      assert.equal(1, count("DIAMETER >= 8 AND MATERIAL <> 'PVC'"))
      assert.equal(3, count("1=1"))
      local _, err = count("DIAMETER > 6 OR MAINID = 'M-3'")
      assert.equal("server", err.kind)
      assert.truthy(tostring(err):find("comparisons joined by AND", 1, true), tostring(err))
    end)

    it("gives a perLayer replica that synchronizes layer by layer", function()
      local result = assert(client:create_replica("Utilities", { replicaName = "layers", layers = { 1, 2 } },
                                                  { poll_interval = 0.01 }))
      local path = tmp_path() .. ".json"
      assert(geoservices.replica(path, result:replica_state()))
      local e = geoservices.edits()
      e:update(2, { attributes = { GlobalID = VALVE1, TURNS = 22 } })
      local s = assert(client:sync(path, e))
      assert.equal(1, s.succeeded)
      local saved = json.decode(helper.read_all(path))
      assert.equal(2, #saved.layers)
      assert.is_true(saved.layers[2].serverGen > result.generations[2])
      local info = assert(client:replica_info("Utilities", result.replicaID))
      assert.equal(saved.layers[1].serverGen, info.generations[1])
      assert.equal(22, emu:control("state").featureServices.Utilities.layers["2"].features[VALVE1].attributes.TURNS)
      os.remove(path)
    end)

    it("saves the result file to opts.output, byte for byte, and keeps no table of it", function()
      local out = tmp_path()
      local n = 0
      local result = assert(client:create_replica("Parcels", { replicaName = "saved", layers = { 0, 1 } },
        { output = out, poll_interval = 0.01, on_change = function() n = n + 1 end }))
      assert.equal(out, result.output)
      assert.is_nil(result.data)
      assert.equal(4, n)
      local saved = json.decode(assert(helper.read_all(out)))
      assert.equal(result.replicaID, saved.replicaID)
      assert.equal(3, #saved.layers[1].features)
      assert.truthy(tostring(result):find("saved to " .. out, 1, true))
      os.remove(out)
    end)

    it("refuses before sending what the service cannot do: a perReplica replica where only perLayer syncs", function()
      local result, err = client:create_replica("Utilities", { replicaName = "x", layers = { 0 },
                                                               syncModel = "perReplica" })
      assert.is_nil(result)
      local _
      assert.equal("invalid", err.kind)
      assert.equal("syncModel", err.parameter)
      assert.equal("supportsPerReplicaSync", err.capability)
      assert.equal(0, emu:count("createReplica"))
      _, err = client:create_replica("Viewer", { layers = { 0 } })
      assert.equal("service", err.parameter)
      _, err = client:create_replica("Parcels", { layers = { 0, 7 } })
      assert.equal("layers", err.parameter)
      _, err = client:create_replica("Parcels", { layers = { 0 } }, { poll_interval = -1 })
      assert.equal("poll_interval", err.parameter)
      assert.equal(0, emu:count("createReplica"))
    end)

    it("answers the same refusal from the emulator itself when the client does not check", function()
      local refused, err = client:create_replica("Utilities", { layers = { 0 }, syncModel = "perReplica" },
                                                 { check = false })
      assert.is_nil(refused)
      assert.equal("server", err.kind)
      assert.truthy(tostring(err):find("perReplica", 1, true), tostring(err))
      assert.equal(1, emu:count("createReplica"))
      assert.equal(0, emu:count("serviceInfo"))
    end)

    it("calls on_send before the request and on_job with the job; resume_create_replica re-attaches", function()
      local order = {}
      local op = assert(client:create_replica("Parcels", { replicaName = "resumed", layers = { 0 } }, {
        wait = false,
        on_send = function(fields) order[#order + 1] = "send " .. fields.replicaName return true end,
        on_job = function(o) order[#order + 1] = "job " .. tostring(o.status_url ~= nil) return true end,
      }))
      assert.same({ "send resumed", "job true" }, order)
      assert.truthy(tostring(op):find("createReplica", 1, true))
      local saved = op:to_json()
      local other = geoservices.client{ url = emu.url }
      local again = assert(other:resume_create_replica(saved))
      local result = assert(again:wait{ poll_interval = 0.01 })
      assert.equal("resumed", result.replicaName)
      assert.equal(3, result.features)
      assert.equal("perReplica", result.syncModel)
      -- resume_sync knows a saved createReplica too
      local via_sync = assert(other:resume_sync(saved))
      assert.equal("createReplica", via_sync.operation)
      local _, refused = client:create_replica("Parcels", { layers = { 0 } },
        { on_send = function() return nil, geoservices.errors.new("io", "journal full") end })
      assert.equal("io", refused.kind)
      assert.equal(1, emu:count("createReplica"))
    end)

    it("ends a Failed job with kind job and registers nothing", function()
      emu:control("settings", { job_outcome = "Failed" })
      local result, err = client:create_replica("Parcels", { replicaName = "doomed", layers = { 0 } },
                                                { poll_interval = 0.01 })
      assert.is_nil(result)
      assert.equal("job", err.kind)
      assert.truthy(err.message:find("createReplica job failed", 1, true), err.message)
      local count = 0
      for _ in pairs(emu:control("state").featureServices.Parcels.replicas) do count = count + 1 end
      assert.equal(3, count) -- the three of the world file
    end)
  end)

  describe("replica info and unRegisterReplica", function()
    it("report a seeded replica, then forget an unregistered one: it can no longer synchronize", function()
      local seeded = assert(client:replica_info("Parcels", "{5E1A0C2B-3333-4A5B-9C8D-000000000003}"))
      assert.equal("office", seeded.replicaName)
      assert.equal("perLayer", seeded.syncModel)
      assert.same({ 0, 1 }, seeded.layers)
      assert.equal(0, seeded.layerServerGens[1].serverSibGen)
      local created = assert(client:create_replica("Parcels", { replicaName = "gone", layers = { 0 },
                                                                 returnAttachments = true }, { poll_interval = 0.01 }))
      local info = assert(client:replica_info("Parcels", created.replicaID))
      assert.equal(created.replicaServerGen, info.replicaServerGen)
      assert.is_true(info.returnAttachments)
      assert.is_true(info.returnsAttachments)
      assert.equal(0, info.replicaServerSibGen)
      assert.equal("alice", info.replicaOwner)
      assert.is_true(info.creationDate > 1600000000000)
      local done = assert(client:unregister_replica("Parcels", created.replicaID))
      assert.is_true(done.success)
      assert.equal("replica " .. created.replicaID .. " of Parcels unregistered", tostring(done))
      local _, err = client:synchronize_replica("Parcels", { replicaID = created.replicaID,
                                                             replicaServerGen = created.replicaServerGen })
      assert.equal("server", err.kind)
      assert.equal(404, err.code)
      assert.truthy(err.message:find("does not exist", 1, true), err.message)
      _, err = client:replica_info("Parcels", created.replicaID)
      assert.equal("server", err.kind)
      _, err = client:unregister_replica("Parcels", created.replicaID)
      assert.equal("server", err.kind)
      _, err = client:unregister_replica("Parcels", "../../admin")
      assert.equal("invalid", err.kind)
    end)
  end)

  describe("with --state-file", function()
    local state_file, emus = nil, {}
    after_each(function()
      for _, e in ipairs(emus) do e:stop() end
      emus = {}
      if state_file then os.execute("rm -rf " .. helper.shell_quote(state_file) .. "*") end
    end)
    local function start(port)
      local args = { "--state-file", state_file }
      if port then args[#args + 1], args[#args + 2] = "--port", tostring(port) end
      local e = helper.start_emulator{ args = args }
      emus[#emus + 1] = e
      return e
    end
    local function kill(e)
      os.execute("kill -9 " .. e.pid)
      helper.wait_for("the emulator to die", function() return not helper.process_alive(e.pid) end)
      e.pid = nil
      e.driver:close()
    end

    it("keeps created replicas, their generations and a createReplica job across a kill", function()
      state_file = tmp_path()
      local first = start()
      first:control("settings", { job_step_ms = 200 })
      local c = geoservices.client{ url = first.url, token = "alice-token" }
      local made = assert(c:create_replica("Parcels", { replicaName = "kept", layers = { 0 } },
                                           { poll_interval = 0.01 }))
      local op = assert(c:create_replica("Utilities", { replicaName = "mid-job", layers = { 1, 2 } }, { wait = false }))
      kill(first)
      local port = first.port
      local second = helper.wait_for("a restart on the same port", function()
        local ok, e = pcall(start, port)
        return ok and e
      end, 10)
      local c2 = geoservices.client{ url = second.url, token = "alice-token" }
      local info = assert(c2:replica_info("Parcels", made.replicaID))
      assert.equal(made.replicaServerGen, info.replicaServerGen)
      local resumed = assert(c2:resume_create_replica(op:to_json()))
      local result = assert(resumed:wait{ poll_interval = 0.02, timeout = helper.TEST_TIMEOUT })
      assert.equal("mid-job", result.replicaName)
      assert.equal(4, result.features)
      assert(c2:replica_info("Utilities", result.replicaID))
      assert(c2:unregister_replica("Parcels", made.replicaID))
      kill(second)
      local third = helper.wait_for("a second restart", function()
        local ok, e = pcall(start, port)
        return ok and e
      end, 10)
      local _, err = geoservices.client{ url = third.url }:replica_info("Parcels", made.replicaID)
      assert.equal("server", err.kind)
      -- refused at once, not tried again (counted: a duration bound here counted the restart's time too)
      assert.equal(1, third:count("replicaInfo"))
    end)
  end)
end)
