-- synchronizeReplica end to end against the emulator: directions, models,
-- transports, async jobs, rollback, replica state that never loses data.
local core = require "geoservices.core"
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local CREW2 = "{5E1A0C2B-2222-4A5B-9C8D-000000000002}"
local OFFICE = "{5E1A0C2B-3333-4A5B-9C8D-000000000003}"
local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local PARCEL2 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}"

local function tmp_path()
  local p = helper.tmp_name()
  os.remove(p)
  return p
end

describe("synchronizeReplica against the emulator", function()
  local emu, client
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    emu:control("settings", { job_step_ms = 30 })
    client = geoservices.client{ url = emu.url, token = "alice-token" }
  end)

  local function state()
    return emu:control("state").featureServices.Parcels
  end

  local function sync(params, opts)
    return client:synchronize_replica("Parcels", params, opts)
  end

  describe("per-replica model", function()
    it("bidirectional: uploads edits, returns per-edit results and a new generation", function()
      local e = geoservices.edits()
      local gid = e:add(0, { attributes = { APN = "101-200-99", ACRES = 0.5 }, geometry = { x = -117.2, y = 34.1 } })
      e:update(0, { attributes = { GlobalID = PARCEL1, OWNER = "Jane Smith-Doe" } })
      e:delete(0, PARCEL2)
      local r = assert(sync{ replicaID = CREW1, replicaServerGen = 1, edits = e })
      assert.equal("integer", math.type(r.replicaServerGen))
      assert.is_true(r.replicaServerGen > 1)
      assert.equal("edits", r.response)
      assert.equal("embedded", r.transport)
      assert.equal("esriTransportTypeEmbedded", r.transportType) -- the vendor's prefix, sent and answered
      assert.equal(CREW1, r.replicaID)
      assert.same({}, r.failed_edits)
      assert.equal(3, r.succeeded)
      assert.same({ succeeded = 3, failed = 0 }, r.counts[0])
      local s = state()
      assert.equal("101-200-99", s.layers["0"].features[gid].attributes.APN)
      assert.equal("Jane Smith-Doe", s.layers["0"].features[PARCEL1].attributes.OWNER)
      assert.is_nil(s.layers["0"].features[PARCEL2])
    end)

    it("upload: applies edits and downloads nothing", function()
      local e = geoservices.edits()
      e:add(1, { attributes = { FACILITYID = "H-0002" } })
      local r = assert(sync{ replicaID = CREW1, syncDirection = "upload", edits = e })
      assert.equal("no_edits", r.response)
      assert.equal(0, r.downloaded)
      -- a NoEdits answer "does not contain edits or edit results": the
      -- edit's outcome is unknown to the bare operation (client:sync and the
      -- store read it back from the server)
      assert.equal(0, r.succeeded)
      assert.equal(1, #r.unknown)
      assert.equal("add", r.unknown[1].op)
    end)

    it("download: returns the changes made by others since the generation", function()
      local e = geoservices.edits()
      local gid = e:add(0, { attributes = { APN = "from-crew-2" } })
      assert(sync{ replicaID = CREW2, replicaServerGen = 1, edits = e })
      local r = assert(sync{ replicaID = CREW1, replicaServerGen = 1, syncDirection = "download" })
      assert.equal(1, r.downloaded)
      local layer0 = r.edits[1]
      assert.equal(0, layer0.id)
      assert.equal(gid, layer0.features.adds[1].attributes.GlobalID)
      assert.equal("integer", math.type(layer0.features.adds[1].attributes.OBJECTID))
    end)

    it("snapshot: returns replacement data with every row", function()
      local r = assert(sync{ replicaID = CREW1, syncDirection = "snapshot" })
      assert.equal("replacement_data", r.response)
      local rows = 0
      for _, l in ipairs(r.edits) do rows = rows + #l.features.adds end
      assert.equal(4, rows) -- 3 parcels and 1 hydrant in the example data
      assert.equal(-117.19584274291992, r.edits[1].features.adds[1].geometry.x) -- 17 digits survive
    end)

    it("returnIdsForAdds returns the new OBJECTIDs", function()
      local e = geoservices.edits()
      e:add(0, { attributes = { APN = "a" } })
      local r = assert(sync{ replicaID = CREW1, replicaServerGen = 1, edits = e, returnIdsForAdds = true })
      local add = r.edits[1].features.addResults[1]
      assert.is_true(add.success)
      assert.equal("integer", math.type(add.objectId))
      r = assert(sync{ replicaID = CREW1, replicaServerGen = r.replicaServerGen, edits = (function()
        local e2 = geoservices.edits(); e2:add(0, { attributes = { APN = "b" } }); return e2 end)() })
      assert.is_nil(r.edits[1].features.addResults[1].objectId)
    end)
  end)

  describe("rollbackOnFailure", function()
    local function mixed_edits()
      local e = geoservices.edits()
      local good = e:add(0, { attributes = { APN = "good" } })
      e:update(0, { attributes = { GlobalID = "{00000000-0000-4000-8000-000000000000}", OWNER = "nobody" } })
      return e, good
    end

    it("true: one failing edit undoes all and the call fails", function()
      local e, good = mixed_edits()
      local before = state().gen
      local r, err = sync{ replicaID = CREW1, replicaServerGen = 1, edits = e, rollbackOnFailure = true }
      assert.is_nil(r)
      assert.equal("server", err.kind)
      assert.matches("rolled back", err.message)
      assert.is_nil(state().layers["0"].features[good])
      assert.equal(before, state().gen)
    end)

    it("false: failed edits are skipped and reported, the others applied", function()
      local e, good = mixed_edits()
      local r = assert(sync{ replicaID = CREW1, replicaServerGen = 1, edits = e, rollbackOnFailure = false })
      assert.equal(1, #r.failed_edits)
      local f = r.failed_edits[1]
      assert.same({ layer = 0, op = "update", target = "feature", globalId = "{00000000-0000-4000-8000-000000000000}",
                    code = 1019, description = "Object is missing." }, f)
      assert.same({ succeeded = 1, failed = 1 }, r.counts[0])
      assert.is_not_nil(state().layers["0"].features[good])
    end)

    it("strict turns any failed edit into an error of kind edits", function()
      local e = mixed_edits()
      local r, err = sync({ replicaID = CREW1, replicaServerGen = 1, edits = e }, { strict = true })
      assert.is_nil(r)
      assert.equal("edits", err.kind)
      assert.equal(1, #err.failed_edits)
      assert.matches("^edits: 1 edit%(s%) failed; first: layer 0 update feature", tostring(err))
    end)

    it("an add whose GlobalID already exists fails", function()
      local e = geoservices.edits()
      e:add(0, { attributes = { GlobalID = PARCEL1, APN = "dup" } })
      local r = assert(sync{ replicaID = CREW1, replicaServerGen = 1, edits = e })
      assert.equal(-2147217395, r.failed_edits[1].code)
      assert.equal("integer", math.type(r.failed_edits[1].code))
    end)
  end)

  describe("per-layer model", function()
    it("mixed directions give edits and data, with a generation per layer", function()
      local r = assert(sync{ replicaID = OFFICE, syncLayers = {
        { id = 0, serverGen = 1, syncDirection = "download" },
        { id = 1, syncDirection = "snapshot" },
      } })
      assert.equal("edits_and_data", r.response)
      assert.is_nil(r.replicaServerGen)
      assert.equal(2, #r.layerServerGens)
      assert.equal(0, r.layerServerGens[1].id)
      assert.equal("integer", math.type(r.layerServerGens[1].serverGen))
      assert.equal(1, #r.edits[2].features.adds) -- the snapshot of layer 1
    end)

    it("all layers snapshot give replacement data", function()
      local r = assert(sync{ replicaID = OFFICE, syncDirection = "snapshot", syncLayers = { { id = 0 }, { id = 1 } } })
      assert.equal("replacement_data", r.response)
    end)
  end)

  describe("transports and async jobs give one normalized result", function()
    local function run(transport, async, pending_ms)
      emu:reset()
      -- Pending lasts long enough that the first poll sees it (at 20 ms a slow first poll found
      -- InProgress); the rest stay short
      emu:control("settings", { job_step_ms = 20, job_phase_ms = { Pending = pending_ms or 300 } })
      local e = geoservices.edits()
      e:add(0, { attributes = { APN = "t" } })
      assert(sync{ replicaID = CREW2, replicaServerGen = 1, edits = e })
      local statuses, first_at = {}, nil
      local started = core.monotonic()
      local r = assert(sync({ replicaID = CREW1, replicaServerGen = 1, transportType = transport, async = async },
        { poll_interval = 0.02, on_status = function(s)
          statuses[#statuses + 1] = s.status
          first_at = first_at or core.monotonic()
        end }))
      return r, statuses, first_at and first_at - started
    end

    it("sync embedded, sync URL, async embedded and async URL", function()
      local shapes = {}
      for _, case in ipairs{ { "embedded", false }, { "url", false }, { "embedded", true }, { "url", true } } do
        local r, statuses
        if case[2] then
          -- only a first poll answered after Pending ended may miss it (a loaded machine's): the
          -- job runs again with a longer Pending
          helper.within_window("the first poll while Pending", { 300, 3000, 20000 }, function(pending_ms)
            local first_after
            r, statuses, first_after = run(case[1], case[2], pending_ms)
            if statuses[1] == "Pending" then return true end
            assert.is_true(first_after >= pending_ms / 1000, ("first status %s %.2f s after the kick-off")
              :format(tostring(statuses[1]), first_after or -1))
            return false
          end)
        else
          r, statuses = run(case[1], case[2])
        end
        assert.equal(case[2] and "url" or case[1], r.transport)
        assert.equal("edits", r.response)
        assert.equal("integer", math.type(r.replicaServerGen))
        assert.equal(1, r.downloaded)
        if case[2] then
          assert.equal("Pending", statuses[1])
          assert.equal("Completed", statuses[#statuses])
          assert.is_string(r.result_url)
        end
        shapes[#shapes + 1] = json.encode(r.edits[1].features.adds[1].attributes.APN)
      end
      assert.same({ '"t"', '"t"', '"t"', '"t"' }, shapes)
    end)

    it("a Failed job returns kind job with the status resource; nothing is applied", function()
      emu:control("settings", { job_outcome = "Failed" })
      local e = geoservices.edits()
      local gid = e:add(0, { attributes = { APN = "lost?" } })
      local r, err = sync({ replicaID = CREW1, replicaServerGen = 1, edits = e, async = true },
        { poll_interval = 0.02 })
      assert.is_nil(r)
      assert.equal("job", err.kind)
      assert.equal("Failed", err.status_resource.status)
      assert.is_nil(state().layers["0"].features[gid])
    end)

    it("CompletedWithErrors returns the result marked partial", function()
      emu:control("settings", { job_outcome = "CompletedWithErrors" })
      local r = assert(sync({ replicaID = CREW1, replicaServerGen = 1, async = true }, { poll_interval = 0.02 }))
      assert.is_true(r.partial)
    end)

    it("wait = false returns an operation that can be resumed by a new client", function()
      emu:control("settings", { job_step_ms = 100 })
      local op = assert(sync({ replicaID = CREW1, replicaServerGen = 1, async = true }, { wait = false }))
      assert.matches("/jobs/", op.status_url)
      local status = assert(op:poll())
      assert.is_string(status.status)
      assert.matches("^geoservices%.SyncOperation Parcels/synchronizeReplica replica " .. CREW1:gsub("%p", "%%%0"),
        tostring(op))
      local saved = op:to_json()
      local other = geoservices.client{ url = emu.url, token = "alice-token" }
      local resumed = assert(other:resume_sync(saved))
      local r = assert(resumed:wait{ poll_interval = 0.05 })
      assert.equal("integer", math.type(r.replicaServerGen))
      local _, err = other:resume_sync("{}")
      assert.equal("invalid", err.kind)
    end)

    it("an overall timeout while the job runs is kind timeout and leaves the job resumable", function()
      -- the timeout covers the kick-off too: an emulator slower than it to
      -- answer (a loaded machine) leaves no job to resume, and the timeout is
      -- tried again longer; the job outlasts every one of them
      helper.within_window("the kick-off answered within the timeout", { 300, 1500, 6000 }, function(ms)
        emu:reset()
        emu:control("settings", { job_step_ms = 2000, job_phase_ms = { Pending = 60000 } })
        local r, err = sync({ replicaID = CREW1, replicaServerGen = 1, async = true },
          { poll_interval = 0.05, timeout = ms / 1000 })
        assert.is_nil(r)
        assert.equal("timeout", err.kind)
        if not err.operation then return false end -- the kick-off's own timeout
        assert.matches("resume_sync", err.message)
        return true
      end)
    end)

    it("output saves the result file instead of parsing it", function()
      local path = tmp_path()
      local r = assert(sync({ replicaID = CREW1, replicaServerGen = 1, transportType = "url" }, { output = path }))
      assert.equal(path, r.output)
      assert.is_nil(r.edits)
      local saved = json.decode(helper.read_all(path))
      assert.equal(CREW1, saved.replicaID)
      os.remove(path)
      local _, err = sync({ replicaID = CREW1, replicaServerGen = 1, dataFormat = "sqlite" })
      assert.equal("output", err.parameter)
    end)
  end)

  describe("enumerations with another vendor prefix", function()
    it("are sent with the client's prefix and understood in responses", function()
      emu:control("settings", { enum_prefix = "acme" })
      local c = geoservices.client{ url = emu.url, enum_prefix = "acme" }
      local r = assert(c:synchronize_replica("Parcels", { replicaID = CREW1, replicaServerGen = 1,
        transportType = "url" }))
      assert.equal("acmeTransportTypeUrl", r.transportType)
      assert.equal("url", r.transport)
      assert.equal("edits", r.response)
    end)
  end)

  describe("errors from the server", function()
    it("an unknown replica, a closed replica and a service without Sync", function()
      local _, err = sync{ replicaID = "{NOPE}", replicaServerGen = 1 }
      assert.equal("server", err.kind)
      assert.equal(404, err.code)
      assert(sync{ replicaID = CREW1, replicaServerGen = 1, closeReplica = true })
      _, err = sync{ replicaID = CREW1, replicaServerGen = 1 }
      assert.matches("unregistered", err.message)
      _, err = client:synchronize_replica("Viewer", { replicaID = "{5E1A0C2B-4444-4A5B-9C8D-000000000004}",
        replicaServerGen = 1 })
      assert.matches("Sync", err.message)
    end)

    it("bad input is refused before anything is sent", function()
      local _, err = sync{ replicaServerGen = 1 }
      assert.equal("replicaID", err.parameter)
      _, err = client:synchronize_replica("../admin", { replicaID = CREW1 })
      assert.equal("service", err.parameter)
      assert.equal(0, emu:requests().total)
    end)
  end)
end)

describe("client:sync with replica state files", function()
  local emu, client
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    emu:control("settings", { job_step_ms = 30 })
    client = geoservices.client{ url = emu.url }
  end)

  local function replica_for(id, extra)
    local init = { service = "Parcels", replicaID = id, model = "perReplica", replicaServerGen = 1,
                   syncDirection = "bidirectional" }
    for k, v in pairs(extra or {}) do init[k] = v end
    return assert(geoservices.replica(tmp_path(), init))
  end

  it("creates, loads and prints a state file", function()
    local r = replica_for(CREW1)
    local again = assert(geoservices.replica(r.path))
    assert.equal(CREW1, again.replicaID)
    assert.equal(1, again.replicaServerGen)
    assert.matches("^geoservices%.Replica .* of Parcels %(perReplica, generation 1%)", tostring(again))
    local _, err = geoservices.replica("/nonexistent/state.json")
    assert.equal("io", err.kind)
    os.remove(r.path)
  end)

  it("two replicas exchange changes over several rounds, each change downloaded exactly once", function()
    local a, b = replica_for(CREW1), replica_for(CREW2)
    local downloaded_by_b = {}
    for round = 1, 3 do
      local e = geoservices.edits()
      local gid = e:add(0, { attributes = { APN = "round-" .. round } })
      local ra = assert(client:sync(a, e))
      assert.same({}, ra.failed_edits)
      local rb = assert(client:sync(b, nil))
      for _, layer in ipairs(rb.edits) do
        for _, f in ipairs(layer.features.adds) do
          local g = f.attributes.GlobalID
          downloaded_by_b[g] = (downloaded_by_b[g] or 0) + 1
        end
      end
      assert.equal(1, downloaded_by_b[gid])
      -- b edits what a created; a receives the update once, not its own add
      local eb = geoservices.edits()
      eb:update(0, { attributes = { GlobalID = gid, OWNER = "b" } })
      assert(client:sync(b, eb))
      local ra2 = assert(client:sync(a, nil))
      assert.equal(1, #ra2.edits[1].features.updates)
      assert.equal(0, #ra2.edits[1].features.adds)
    end
    for _, n in pairs(downloaded_by_b) do assert.equal(1, n) end
    local gens = json.decode(helper.read_all(a.path)).replicaServerGen
    assert.equal(a.replicaServerGen, gens)
    os.remove(a.path)
    os.remove(b.path)
  end)

  it("an upload-only sync keeps the state's generation: the next two-way sync downloads what others changed",
    function()
      -- issue 34 F5: the store keeps its generation on an upload-only
      -- answer; client:sync saved the answer's and never downloaded the
      -- other crew's change made before it
      local a, b = replica_for(CREW1), replica_for(CREW2)
      local before = a.replicaServerGen
      local eb = geoservices.edits()
      local theirs = eb:add(0, { attributes = { APN = "before-the-upload" } })
      assert(client:sync(b, eb))
      local ea = geoservices.edits()
      ea:add(0, { attributes = { APN = "uploaded-only" } })
      local up = assert(client:sync(a, ea, { params = { syncDirection = "upload" } }))
      assert.equal("no_edits", up.response)
      assert.equal(before, json.decode(helper.read_all(a.path)).replicaServerGen)
      local down = assert(client:sync(a, nil))
      local got = {}
      for _, layer in ipairs(down.edits) do
        for _, f in ipairs(layer.features.adds) do got[f.attributes.GlobalID] = true end
      end
      assert.is_true(got[theirs], "the other crew's add, made before the upload-only sync, was not downloaded")
      os.remove(a.path)
      os.remove(b.path)
    end)

  it("per-layer state sends syncLayers and records each layer's generation", function()
    local r = replica_for(OFFICE, { model = "perLayer", replicaServerGen = json.null,
      layers = { { id = 0, serverGen = 1, syncDirection = "bidirectional" }, { id = 1, serverGen = 1 } } })
    local result = assert(client:sync(r, nil))
    local saved = json.decode(helper.read_all(r.path))
    assert.equal(result.layerServerGens[1].serverGen, saved.layers[1].serverGen)
    assert.equal(result.layerServerGens[2].serverGen, saved.layers[2].serverGen)
    assert.is_true(saved.layers[1].serverGen > 1)
    os.remove(r.path)
  end)

  it("leaves the state file byte-identical after a failed or interrupted sync", function()
    local r = replica_for(CREW1)
    local before = helper.read_all(r.path)
    for _, fault in ipairs{ { kind = "reset_mid_body" }, { kind = "truncate" }, { kind = "status", status = 502 },
                            { kind = "reset" }, { kind = "error", code = 500 } } do
      emu:reset()
      fault.route = "synchronizeReplica"
      emu:fault(fault)
      local result, err = client:sync(r, nil)
      assert.is_nil(result, fault.kind)
      assert.is_not_nil(err)
      assert.equal(before, helper.read_all(r.path), fault.kind)
      assert.equal(1, r.replicaServerGen)
    end
    -- a result file that cannot be downloaded leaves the state alone too
    emu:reset()
    emu:fault{ route = "results", kind = "truncate" }
    local result, err = client:sync(r, nil, { params = { transportType = "url" } })
    assert.is_nil(result)
    assert.equal("protocol", err.kind)
    assert.equal(before, helper.read_all(r.path))
    os.remove(r.path)
  end)

  it("refuses a second sync of the same replica while one is running", function()
    local r = replica_for(CREW1)
    local inner_err
    emu:control("settings", { job_step_ms = 50 })
    local result = assert(client:sync(r, nil, { params = { async = true }, poll_interval = 0.02,
      on_status = function()
        if inner_err == nil then
          local _, e = client:sync(r, nil)
          inner_err = e
        end
      end }))
    assert.equal("invalid", inner_err.kind)
    assert.matches("already running", inner_err.message)
    assert.equal(result.replicaServerGen, r.replicaServerGen)
    -- the server refuses too while its job runs (Pending outlasts any stall of the spec)
    emu:control("settings", { job_step_ms = 1000, job_phase_ms = { Pending = 60000 } })
    local op = assert(client:sync(r, nil, { params = { async = true }, wait = false }))
    local _, err = client:sync(replica_for(CREW1, { replicaServerGen = r.replicaServerGen }), nil)
    assert.equal(409, err.code)
    assert(op) -- the first job is still there to be awaited
    os.remove(r.path)
  end)

  it("closeReplica marks the state closed and later syncs are refused", function()
    local r = replica_for(CREW1)
    assert(client:sync(r, nil, { params = { closeReplica = true } }))
    assert.is_true(json.decode(helper.read_all(r.path)).closed)
    local _, err = client:sync(r, nil)
    assert.equal("invalid", err.kind)
    os.remove(r.path)
  end)

  it("async with wait = false advances the state when the operation completes", function()
    local r = replica_for(CREW1)
    local op = assert(client:sync(r, nil, { params = { async = true }, wait = false }))
    assert.equal(1, json.decode(helper.read_all(r.path)).replicaServerGen)
    local resumed = assert(geoservices.client{ url = emu.url }:resume_sync(op:to_json()))
    local result = assert(resumed:wait{ poll_interval = 0.02 })
    assert.equal(result.replicaServerGen, json.decode(helper.read_all(r.path)).replicaServerGen)
    os.remove(r.path)
  end)
end)
