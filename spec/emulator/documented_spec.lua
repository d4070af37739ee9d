-- The emulator answers as the vendor documents by default (issue 26), and
-- each kinder answer is one named setting away: URL transport when none is
-- asked for (always for a job), per-edit results only in embedded answers,
-- rollbackOnFailure true unless asked otherwise (an error naming the failed
-- edit, nothing applied), supportsRollbackOnFailure and the sync model's
-- fixed behaviour, result files deleted after their lifetime, NoEdits
-- answers without a file, the vendor's esri prefix; plus the layer query
-- operation and the change log of every attempted edit. Everything here
-- talks to a real emulator process over HTTP, as a client would.
local core = require "geoservices.core"
local json = require "geoservices.base.json"
local transport = require "geoservices.net.transport"
local helper = require "spec.helper"

local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local OFFICE = "{5E1A0C2B-3333-4A5B-9C8D-000000000003}" -- perLayer, layers 0 and 1
local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local PARCEL2 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}"
local NEW1 = "{D0C0DE00-0000-4000-8000-000000000001}"
local NEW2 = "{D0C0DE00-0000-4000-8000-000000000002}"
local SYNC_PATH = "/Parcels/FeatureServer/synchronizeReplica"

-- Section 3's status values (INTERFACE.md), in its order.
local SECTION_3 = { "Pending", "InProgress", "Completed", "Failed", "ImportChanges", "ExportChanges", "ExportingData",
  "ExportingSnapshot", "ExportAttachments", "ImportAttachments", "ProvisioningReplica", "UnRegisteringReplica",
  "CompletedWithErrors" }

local function request(emu, url, fields, method)
  local parts = {}
  for _, kv in ipairs(fields or {}) do parts[#parts + 1] = core.urlencode(kv[1]) .. "=" .. core.urlencode(kv[2]) end
  local body = table.concat(parts, "&")
  local spec = { url = url, timeout_ms = 10000 }
  if method == "GET" then
    spec.url = url .. (body ~= "" and ("?" .. body) or "")
  else
    spec.method, spec.body, spec.content_type = "POST", body, "application/x-www-form-urlencoded"
  end
  local resp = assert(transport.perform(emu.driver, spec))
  return resp.status, json.decode(resp.body), resp
end

-- POSTs a form ({{name, value}, ...}) to a path under the base URL.
local function post(emu, path, fields)
  return request(emu, emu.url .. path, fields)
end

local function get(emu, url)
  return request(emu, url, nil, "GET")
end

local function feature(gid, apn)
  return { attributes = { GlobalID = gid, APN = apn }, geometry = { x = -117.2, y = 34.1 } }
end

-- synchronizeReplica of CREW1 (or `replica`) uploading `features_edits`
-- (layer 0's {adds =, updates =, deleteIds =}) with the extra fields given.
local function sync(emu, features_edits, extra, replica)
  local fields = { { "f", "json" }, { "replicaID", replica or CREW1 }, { "replicaServerGen", "1" } }
  if features_edits then
    fields[#fields + 1] = { "edits", json.encode{ { id = 0, features = features_edits } } }
  end
  for _, kv in ipairs(extra or {}) do fields[#fields + 1] = kv end
  local status, body = post(emu, SYNC_PATH, fields)
  assert.equal(200, status)
  return body
end

-- One good add and one add whose GlobalID the server already has.
local function good_and_duplicate()
  return { adds = { feature(NEW1, "new-1"), feature(PARCEL1, "duplicate") } }
end

-- The layer query of layer 0 by GlobalIDs (answer decoded).
local function query(emu, where, extra)
  local fields = { { "f", "json" }, { "where", where }, { "outFields", "*" } }
  for _, kv in ipairs(extra or {}) do fields[#fields + 1] = kv end
  local status, body = post(emu, "/Parcels/FeatureServer/0/query", fields)
  assert.equal(200, status)
  return body
end

local function gids_of(answer)
  local out = {}
  for _, f in ipairs(answer.features) do out[#out + 1] = f.attributes.GlobalID end
  table.sort(out)
  return out
end

local function attribute_names(f)
  local names = {}
  for k in pairs(f.attributes) do names[#names + 1] = k end
  table.sort(names)
  return names
end

local function has_feature(emu, gid)
  return #query(emu, ("GlobalID IN ('%s')"):format(gid)).features == 1
end

local function server_gen(emu)
  return emu:control("state").featureServices.Parcels.gen
end

-- The entry of layer `id` in an answer's edits, or nil.
local function layer_entry(answer, id)
  for _, e in ipairs(answer.edits or {}) do
    if e.id == id then return e end
  end
  return nil
end

local function has_any_results(value)
  local text = json.encode(value)
  return text:find('"addResults"', 1, true) or text:find('"updateResults"', 1, true)
    or text:find('"deleteResults"', 1, true)
end

-- Polls a job's status URL until it ends; returns the statuses seen in
-- order (each once) and the last status resource.
local function wait_job(emu, status_url)
  local seen, last = {}, nil
  helper.wait_for("the job to end", function()
    local status, body = get(emu, status_url .. "?f=json")
    assert.equal(200, status)
    last = body
    if seen[#seen] ~= body.status then seen[#seen + 1] = body.status end
    return body.status == "Completed" or body.status == "Failed" or body.status == "CompletedWithErrors"
  end)
  return seen, last
end

describe("the emulator's documented defaults", function()
  local emu

  setup(function() emu = helper.start_emulator{ job_step_ms = 60 } end)
  teardown(function() if emu then emu:stop() end end)
  before_each(function() emu:reset() end)

  describe("transport", function()
    it("answers with a URL when the request names no transportType, and the file has no per-edit results",
      function()
      local answer = sync(emu, { adds = { feature(NEW1, "new-1") } })
      assert.equal("esriTransportTypeUrl", answer.transportType)
      assert.equal("esriReplicaResponseTypeEdits", answer.responseType)
      assert.is_string(answer.URL)
      assert.is_nil(answer.edits)
      assert.falsy(has_any_results(answer))
      local status, file = get(emu, answer.URL)
      assert.equal(200, status)
      assert.is_table(file.edits)
      assert.falsy(has_any_results(file))
      assert.is_true(has_feature(emu, NEW1)) -- applied all the same
    end)

    it("answers a job with a URL even when embedded is asked for", function()
      local answer = sync(emu, { adds = { feature(NEW1, "new-1") } },
        { { "async", "true" }, { "transportType", "esriTransportTypeEmbedded" } })
      assert.is_string(answer.statusUrl)
      local _, last = wait_job(emu, answer.statusUrl)
      assert.equal("Completed", last.status)
      assert.equal("esriTransportTypeUrl", last.transportType)
      local status, file = get(emu, last.resultUrl)
      assert.equal(200, status)
      assert.falsy(has_any_results(file))
    end)

    it("answers embedded by default with default_transport = embedded", function()
      emu:control("settings", { default_transport = "embedded" })
      local answer = sync(emu, { adds = { feature(NEW1, "new-1") } })
      assert.equal("esriTransportTypeEmbedded", answer.transportType)
      assert.is_nil(answer.URL)
      assert.equal(NEW1, layer_entry(answer, 0).features.addResults[1].globalId)
    end)

    it("answers createReplica with a file when no transportType is named", function()
      local status, answer = post(emu, "/Parcels/FeatureServer/createReplica",
        { { "f", "json" }, { "layers", "0" }, { "syncModel", "perReplica" }, { "replicaName", "doc-default" } })
      assert.equal(200, status)
      assert.equal("esriTransportTypeUrl", answer.transportType)
      assert.is_string(answer.responseUrl)
    end)
  end)

  describe("per-edit results", function()
    it("lists every edit's result in an embedded answer (edit_results = all)", function()
      local answer = sync(emu, { adds = { feature(NEW1, "new-1") }, deleteIds = { PARCEL2 } },
        { { "transportType", "esriTransportTypeEmbedded" } })
      local features = layer_entry(answer, 0).features
      assert.same({ NEW1 }, { features.addResults[1].globalId })
      assert.is_true(features.addResults[1].success)
      assert.equal(PARCEL2, features.deleteResults[1].globalId)
      assert.is_true(features.deleteResults[1].success)
    end)

    it("lists only the skipped edits with edit_results = failures", function()
      emu:control("settings", { edit_results = "failures" })
      local answer = sync(emu, good_and_duplicate(),
        { { "transportType", "esriTransportTypeEmbedded" }, { "rollbackOnFailure", "false" } })
      local results = layer_entry(answer, 0).features.addResults
      assert.equal(1, #results)
      assert.equal(PARCEL1, results[1].globalId)
      assert.is_false(results[1].success)
      assert.is_number(results[1].error.code)
      assert.is_true(has_feature(emu, NEW1)) -- the unlisted add was applied
    end)

    it("lists none with edit_results = none, even embedded", function()
      emu:control("settings", { edit_results = "none" })
      local answer = sync(emu, good_and_duplicate(),
        { { "transportType", "esriTransportTypeEmbedded" }, { "rollbackOnFailure", "false" } })
      assert.equal("esriReplicaResponseTypeEdits", answer.responseType)
      assert.falsy(has_any_results(answer))
      assert.is_true(has_feature(emu, NEW1))
    end)
  end)

  describe("rollbackOnFailure", function()
    it("rolls back by default: nothing applied, an error naming the failed edit's GlobalID", function()
      local gen = server_gen(emu)
      local answer = sync(emu, good_and_duplicate(), { { "transportType", "esriTransportTypeEmbedded" } })
      assert.is_table(answer.error)
      assert.equal(400, answer.error.code)
      assert.truthy(table.concat(answer.error.details, "\n"):find(PARCEL1, 1, true))
      assert.falsy(table.concat(answer.error.details, "\n"):find(NEW1, 1, true))
      assert.is_false(has_feature(emu, NEW1))
      assert.equal(gen, server_gen(emu))
    end)

    it("rolls back with rollbackOnFailure=true whatever the default", function()
      emu:control("settings", { rollback_default = false })
      local answer = sync(emu, good_and_duplicate(), { { "rollbackOnFailure", "true" } })
      assert.is_table(answer.error)
      assert.is_false(has_feature(emu, NEW1))
    end)

    it("skips the failed edit and reports it with rollback_default = false", function()
      emu:control("settings", { rollback_default = false })
      local answer = sync(emu, good_and_duplicate(), { { "transportType", "esriTransportTypeEmbedded" } })
      assert.is_nil(answer.error)
      local results = layer_entry(answer, 0).features.addResults
      local by_gid = {}
      for _, r in ipairs(results) do by_gid[r.globalId] = r end
      assert.is_true(by_gid[NEW1].success)
      assert.is_false(by_gid[PARCEL1].success)
      assert.is_true(has_feature(emu, NEW1))
      assert.equal("101-200-01", query(emu, ("GlobalID IN ('%s')"):format(PARCEL1)).features[1].attributes.APN)
    end)

    it("turns a job with a failed edit Failed with nothing applied, by default", function()
      local answer = sync(emu, good_and_duplicate(), { { "async", "true" } })
      local _, last = wait_job(emu, answer.statusUrl)
      assert.equal("Failed", last.status)
      assert.truthy(json.encode(last.messages):find(PARCEL1, 1, true))
      assert.is_false(has_feature(emu, NEW1))
    end)

    describe("with supports_rollback_on_failure = false", function()
      before_each(function() emu:control("settings", { supports_rollback_on_failure = false }) end)

      it("reports it in the service's syncCapabilities", function()
        local status, service = get(emu, emu.url .. "/Parcels/FeatureServer?f=json")
        assert.equal(200, status)
        assert.is_false(service.syncCapabilities.supportsRollbackOnFailure)
      end)

      it("ignores the parameter: a perReplica replica always rolls back", function()
        local answer = sync(emu, good_and_duplicate(), { { "rollbackOnFailure", "false" } })
        assert.is_table(answer.error)
        assert.is_false(has_feature(emu, NEW1))
      end)

      it("ignores the parameter: a perLayer replica always skips the failed edit", function()
        local answer = sync(emu, good_and_duplicate(), {
          { "rollbackOnFailure", "true" }, { "transportType", "esriTransportTypeEmbedded" },
          { "syncLayers", json.encode{ { id = 0, serverGen = 1, syncDirection = "bidirectional" },
                                       { id = 1, serverGen = 1, syncDirection = "bidirectional" } } },
        }, OFFICE)
        assert.is_nil(answer.error)
        assert.is_true(has_feature(emu, NEW1))
      end)
    end)
  end)

  describe("result files", function()
    it("are deleted once unused for result_lifetime_s: 404 afterwards", function()
      -- made and read under the default lifetime (a spec stalled past a short
      -- one between the sync and its read would find it gone), then shortened:
      -- the lifetime is counted from the last use
      local answer = sync(emu, nil)
      assert.equal(1, emu:control("state").resultFiles)
      assert.equal(200, (get(emu, answer.URL)))
      emu:control("settings", { result_lifetime_s = 0.5 })
      helper.sleep(0.8)
      assert.equal(404, (get(emu, answer.URL)))
      assert.equal(0, emu:control("state").resultFiles)
    end)

    it("live 600 s unused by default", function()
      local settings = emu:control("settings")
      assert.equal(600, settings.result_lifetime_s)
      local answer = sync(emu, nil)
      helper.sleep(0.3)
      assert.equal(200, (get(emu, answer.URL)))
    end)
  end)

  describe("NoEdits (upload only)", function()
    it("answers without a URL, a file, edits or results", function()
      local answer = sync(emu, { adds = { feature(NEW1, "new-1") } }, { { "syncDirection", "upload" } })
      assert.equal("esriReplicaResponseTypeNoEdits", answer.responseType)
      assert.equal("esriTransportTypeUrl", answer.transportType)
      assert.is_nil(answer.URL)
      assert.is_nil(answer.edits)
      assert.is_number(answer.replicaServerGen)
      assert.equal(0, emu:control("state").resultFiles)
      assert.is_true(has_feature(emu, NEW1))
    end)

    it("answers embedded without edits or results", function()
      local answer = sync(emu, { adds = { feature(NEW1, "new-1") } },
        { { "syncDirection", "upload" }, { "transportType", "esriTransportTypeEmbedded" } })
      assert.equal("esriReplicaResponseTypeNoEdits", answer.responseType)
      assert.is_nil(answer.edits)
      assert.falsy(has_any_results(answer))
    end)

    it("ends a job without a result file", function()
      local answer = sync(emu, { adds = { feature(NEW1, "new-1") } },
        { { "syncDirection", "upload" }, { "async", "true" } })
      local _, last = wait_job(emu, answer.statusUrl)
      assert.equal("Completed", last.status)
      assert.equal("esriReplicaResponseTypeNoEdits", last.responseType)
      assert.equal("", last.resultUrl)
      assert.equal(0, emu:control("state").resultFiles)
      assert.is_true(has_feature(emu, NEW1))
    end)
  end)

  describe("enumerated values", function()
    it("answer with the esri prefix and read svc, esri and bare values", function()
      for _, asked in ipairs{ "svcTransportTypeEmbedded", "esriTransportTypeEmbedded", "embedded" } do
        local answer = sync(emu, nil, { { "transportType", asked } })
        assert.equal("esriTransportTypeEmbedded", answer.transportType, asked)
        assert.equal("esriReplicaResponseTypeEdits", answer.responseType)
      end
      local answer = sync(emu, nil, { { "transportType", "svcTransportTypeUrl" } })
      assert.equal("esriTransportTypeUrl", answer.transportType)
    end)

    it("answer with the svc prefix with enum_prefix = svc", function()
      emu:control("settings", { enum_prefix = "svc" })
      local answer = sync(emu, nil)
      assert.equal("svcTransportTypeUrl", answer.transportType)
      assert.equal("svcReplicaResponseTypeEdits", answer.responseType)
    end)

    it("refuse a value that is no transport", function()
      local answer = sync(emu, nil, { { "transportType", "esriTransportTypeCarrierPigeon" } })
      assert.is_table(answer.error)
    end)
  end)

  describe("job statuses", function()
    it("move through section 3's values in order, each phase's time settable", function()
      -- the order jobs move in: Pending, InProgress, ImportChanges, ExportChanges, outcome
      local order = { Pending = 1, InProgress = 2, ImportChanges = 3, ExportChanges = 4, Completed = 5 }
      local position = {}
      for i, name in ipairs(SECTION_3) do position[name] = i end
      -- ImportChanges is seen unless two polls, one before it and one after, lay further apart
      -- than it lasts (a spec stalled that long): then it runs again, ImportChanges longer
      helper.within_window("a poll during ImportChanges", { 600, 2400, 9600 }, function(import_ms)
        emu:reset()
        emu:control("settings", { job_step_ms = 40, job_phase_ms = { ImportChanges = import_ms } })
        local started = core.monotonic()
        local answer = sync(emu, { adds = { feature(NEW1, "new-1") } }, { { "async", "true" } })
        local seen, asked, across = {}, nil, 0
        helper.wait_for("the job to end", function()
          local at = core.monotonic()
          local status, body = get(emu, answer.statusUrl .. "?f=json")
          assert.equal(200, status)
          local before = seen[#seen]
          if before ~= body.status then
            if before and order[before] and order[before] < 3 and (order[body.status] or 9) > 3 then
              across = core.monotonic() - asked -- from the poll before it to this one's answer
            end
            seen[#seen + 1] = body.status
          end
          asked = at
          return body.status == "Completed" or body.status == "Failed" or body.status == "CompletedWithErrors"
        end)
        local took = core.monotonic() - started
        for _, status in ipairs(seen) do assert.is_number(position[status], status) end
        assert.equal("Completed", seen[#seen])
        for i = 2, #seen do assert.is_true(order[seen[i - 1]] < order[seen[i]], table.concat(seen, ",")) end
        assert.is_true(took >= import_ms / 1000, "ImportChanges lasted its own time")
        if table.concat(seen, ","):find("ImportChanges", 1, true) then return true end
        assert.is_true(across >= import_ms / 1000, ("ImportChanges never seen though polled %.2f s apart: %s")
          :format(across, table.concat(seen, ",")))
        return false
      end)
    end)

    it("keep the start-up step (--job-step-ms) across a reset", function()
      emu:control("settings", { job_step_ms = 5 })
      emu:reset()
      assert.equal(60, emu:control("settings").job_step_ms)
    end)
  end)

  describe("the layer query", function()
    it("finds features by GlobalID, with or without braces and in any case", function()
      local answer = query(emu, ("GlobalID IN ('%s', '%s')"):format(PARCEL1, PARCEL2:lower():gsub("[{}]", "")))
      assert.same({ PARCEL1, PARCEL2 }, gids_of(answer))
      assert.equal("OBJECTID", answer.objectIdFieldName)
      assert.equal("GlobalID", answer.globalIdFieldName)
      assert.equal("esriGeometryPoint", answer.geometryType)
      assert.is_number(answer.features[1].geometry.x)
      assert.equal(3, #query(emu, "1=1").features)
      assert.same({ PARCEL1 }, gids_of(query(emu, ("globalid in ( '%s' )"):format(PARCEL1:lower()))))
    end)

    it("answers a batch with the features that exist, never deleted ones", function()
      sync(emu, { deleteIds = { PARCEL2 }, adds = { feature(NEW1, "new-1") } })
      local answer = query(emu, ("GlobalID IN ('%s','%s','%s','%s')"):format(PARCEL1, PARCEL2, NEW1, NEW2))
      assert.same({ PARCEL1, NEW1 }, gids_of(answer))
    end)

    it("answers the fields asked for, without geometry when told, by GET too", function()
      local status, answer = request(emu, emu.url .. "/Parcels/FeatureServer/0/query", {
        { "f", "json" }, { "where", ("GlobalID IN ('%s')"):format(PARCEL1) }, { "outFields", "apn" },
        { "returnGeometry", "false" } }, "GET")
      assert.equal(200, status)
      local attrs = answer.features[1].attributes
      assert.equal("101-200-01", attrs.APN)
      assert.equal(1, attrs.OBJECTID) -- always answered
      assert.is_nil(attrs.OWNER)
      assert.is_nil(attrs.GlobalID)
      assert.is_nil(answer.features[1].geometry)
      -- without outFields: the OBJECTID alone, as the vendor documents
      local _, bare = post(emu, "/Parcels/FeatureServer/0/query", { { "f", "json" }, { "where", "1=1" } })
      assert.equal(3, #bare.features)
      for _, f in ipairs(bare.features) do assert.same({ "OBJECTID" }, attribute_names(f)) end
    end)

    it("checks a token that is sent and refuses a where clause it cannot read", function()
      local answer = query(emu, "1=1", { { "token", "not-a-token" } })
      assert.is_table(answer.error)
      assert.is_table(query(emu, "GlobalID IN ('a'").error)
      assert.equal(3, #query(emu, "1=1", { { "token", "alice-token" } }).features)
    end)
  end)

  describe("the change log", function()
    it("lists applied edits with what they sent, and refused ones with their code", function()
      emu:control("settings", { rollback_default = false })
      local update = { attributes = { GlobalID = PARCEL2, APN = "changed" } }
      sync(emu, { adds = { feature(NEW1, "new-1"), feature(PARCEL1, "duplicate") }, updates = { update },
                  deleteIds = { NEW2 } })
      local log = emu:control("changelog?service=Parcels")
      assert.equal(server_gen(emu), log.gen)
      local by = {}
      for _, e in ipairs(log.entries) do by[e.op .. " " .. e.globalId] = e end
      local added = by["add " .. NEW1]
      assert.equal(log.gen, added.gen)
      assert.equal(CREW1, added.origin)
      assert.equal("new-1", added.attributes.APN)
      assert.is_nil(added.refused)
      local duplicate = by["add " .. PARCEL1]
      assert.is_true(duplicate.refused)
      assert.equal(-2147217395, duplicate.code)
      assert.equal("duplicate", duplicate.attributes.APN)
      assert.equal("changed", by["update " .. PARCEL2].attributes.APN)
      assert.is_true(by["delete " .. NEW2].refused)
      assert.equal(1019, by["delete " .. NEW2].code)
    end)

    it("lists a rolled-back request's edits as refused", function()
      sync(emu, good_and_duplicate())
      local entries = emu:control("changelog?service=Parcels").entries
      assert.equal(2, #entries)
      for _, e in ipairs(entries) do assert.is_true(e.refused, e.globalId) end
      assert.is_true(entries[1].rolled_back)
      assert.equal(-2147217395, entries[2].code)
    end)
  end)

  describe("settings", function()
    it("refuses an unknown setting or a value out of its range", function()
      local spec = { url = emu.root .. "/_emulator/settings", method = "POST", content_type = "application/json",
                     timeout_ms = 5000 }
      spec.body = json.encode{ edit_results = "some" }
      assert.equal(400, assert(transport.perform(emu.driver, spec)).status)
      spec.body = json.encode{ kindness = true }
      assert.equal(400, assert(transport.perform(emu.driver, spec)).status)
    end)
  end)
end)

describe("a fresh emulator's settings", function()
  it("are the documented defaults", function()
    local emulator = require "geoservices.emulator"
    local emu = assert(emulator.new{ data = "examples/data/world.json", port = 0 })
    finally(function() emu:close() end)
    assert.equal("esri", emu.settings.enum_prefix)
    assert.equal("url", emu.settings.default_transport)
    assert.equal("all", emu.settings.edit_results)
    assert.is_true(emu.settings.rollback_default)
    assert.is_true(emu.settings.supports_rollback_on_failure)
    assert.equal(600, emu.settings.result_lifetime_s)
    assert.equal(1000, emu.settings.job_step_ms)
  end)
end)

describe("the emulator's settings on its command line", function()
  it("start it with the kinder answers, which a reset keeps", function()
    local emu = helper.start_emulator{ args = { "--default-transport", "embedded", "--rollback-default", "false",
      "--edit-results", "failures", "--enum-prefix", "svc", "--result-lifetime", "30" } }
    finally(function() emu:stop() end)
    local function check()
      local answer = sync(emu, good_and_duplicate())
      assert.equal("svcTransportTypeEmbedded", answer.transportType)
      local results = layer_entry(answer, 0).features.addResults
      assert.equal(1, #results)
      assert.equal(PARCEL1, results[1].globalId)
    end
    check()
    emu:control("settings", { default_transport = "url" })
    emu:reset()
    check()
    assert.equal(30, emu:control("settings").result_lifetime_s)
  end)

  it("refuses a value out of range", function()
    local r = os.execute(("LUA_PATH=%s LUA_CPATH=%s timeout 10 lua5.4 lua/geoservices/emulator/main.lua --port 0 "
      .. "--job-phase-ms nonsense >/dev/null 2>&1"):format(helper.shell_quote(package.path),
        helper.shell_quote(package.cpath)))
    assert.is_not_true(r)
  end)

  it("keeps the change log across a restart with --state-file", function()
    local state = helper.tmp_name()
    os.remove(state)
    local emu = helper.start_emulator{ args = { "--state-file", state } }
    sync(emu, good_and_duplicate())
    os.execute("kill -9 " .. emu.pid)
    helper.wait_for("the emulator to die", function() return not helper.process_alive(emu.pid) end, 5)
    emu.pid = nil
    emu.driver:close()
    local again = helper.start_emulator{ args = { "--state-file", state } }
    finally(function() again:stop() end)
    local entries = again:control("changelog?service=Parcels").entries
    assert.equal(2, #entries)
    assert.is_true(entries[2].refused)
  end)
end)
