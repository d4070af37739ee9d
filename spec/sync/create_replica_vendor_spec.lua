-- createReplica, the service and layer resources, replica info and
-- unRegisterReplica against the shapes the vendor's servers really send,
-- from a scripted server (spec/support/scripted_server.py): esri-prefixed
-- enumerations, `responseUrl` / `URL` / `resultUrl`, a first answer without
-- replicaID or responseType, `replicaID: ""` in a job's status,
-- generations that are epoch milliseconds, layerServerGens as a JSON text,
-- results without generations, HTTP 500 to synchronous requests.
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local REPLICA = "{A2B4C6D8-1234-4ABC-9DEF-0123456789AB}"
local BASE = "/server/Parcels/FeatureServer"
local GEN = 1700000000123 -- ArcGIS Online's generations are epoch milliseconds

-- The service resource of a hosted feature service, as ArcGIS Online sends it (abridged).
local function service_doc(caps)
  return {
    currentVersion = 11.2, serviceItemId = "9b2c1f0e8d7a4c3b", serviceDescription = "", hasVersionedData = false,
    supportsDisconnectedEditing = true, hasStaticData = false, hasSharedDomains = false, maxRecordCount = 2000,
    supportedQueryFormats = "JSON", supportsVCSProjection = false,
    capabilities = "Create,Delete,Query,Sync,Update,Uploads,Editing",
    description = "", copyrightText = "", spatialReference = { wkid = 102100, latestWkid = 3857 },
    initialExtent = { xmin = -13046000, ymin = 4036000, xmax = -13045000, ymax = 4037000,
                      spatialReference = { wkid = 102100, latestWkid = 3857 } },
    allowGeometryUpdates = true, units = "esriMeters", size = 114688, syncEnabled = true,
    syncCapabilities = caps or {
      supportsAsync = true, supportsRegisteringExistingData = true, supportsSyncDirectionControl = true,
      supportsPerLayerSync = true, supportsPerReplicaSync = true, supportsSyncModelNone = true,
      supportsRollbackOnFailure = false, supportsAttachmentsSyncDirection = true,
      supportsBiDirectionalSyncForServer = true,
    },
    editorTrackingInfo = { enableEditorTracking = false, enableOwnershipAccessControl = false },
    xssPreventionInfo = { xssPreventionEnabled = true, xssPreventionRule = "InputOnly",
                          xssInputRule = "rejectInvalid" },
    layers = { { id = 0, name = "Parcels", parentLayerId = -1, defaultVisibility = true, subLayerIds = json.null,
                 minScale = 0, maxScale = 0, geometryType = "esriGeometryPolygon" },
               { id = 1, name = "Hydrants", parentLayerId = -1, defaultVisibility = true, subLayerIds = json.null,
                 minScale = 0, maxScale = 0, geometryType = "esriGeometryPoint" } },
    tables = json.array(),
  }
end

local FEATURE = { attributes = { OBJECTID = 1, GlobalID = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}", APN = "101",
                                 Shape__Area = 1250.5 },
                  geometry = { rings = { { { -13045900, 4036100 }, { -13045900, 4036200 }, { -13045800, 4036200 },
                                           { -13045900, 4036100 } } } } }

local function result_file(fields)
  local doc = { replicaName = "crew-1", replicaID = REPLICA, replicaServerGen = GEN,
                transportType = "esriTransportTypeUrl", responseType = "esriReplicaResponseTypeData",
                layers = { { id = 0, features = { FEATURE }, attachments = {
                  { id = 1, globalId = "{AA000000-0000-4000-8000-000000000001}",
                    parentGlobalId = FEATURE.attributes.GlobalID, name = "photo.jpg", contentType = "image/jpeg",
                    size = 51234 } } },
                  { id = 1, features = json.array(), attachments = json.array() } } }
  for k, v in pairs(fields or {}) do doc[k] = v ~= json.null and v or nil end
  return doc
end

-- The form fields of a logged urlencoded body.
local function form_of(body)
  local out = {}
  for pair in (body or ""):gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=(.*)$")
    local function decode(s)
      return (s:gsub("+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
    end
    out[decode(k)] = decode(v)
  end
  return out
end

local rss_kib = helper.rss_kib

describe("createReplica against the vendor's shapes", function()
  local serve, stop_all = helper.scripted_servers()
  after_each(stop_all)
  local function requests_to(s, suffix)
    local out = {}
    for _, r in ipairs(s:requests()) do
      if r.path:sub(-#suffix) == suffix then out[#out + 1] = r end
    end
    return out
  end

  it("follows an async job whose status says replicaID \"\" and takes the id and generation from the file", function()
    local s = serve{
      { method = "POST", path = BASE, responses = { { json = service_doc() } } },
      { method = "POST", path = BASE .. "/createReplica", responses = { { json = {
        statusUrl = "{ROOT}" .. BASE .. "/jobs/5f1d2e3c" } } } },
      { method = "POST", path = BASE .. "/jobs/5f1d2e3c", responses = {
        { json = { status = "Pending", replicaName = "crew-1", replicaID = "", submissionTime = "1700000000000",
                   lastUpdatedTime = "1700000000000" } },
        { json = { status = "ExportingData", replicaName = "crew-1", replicaID = "" } },
        { json = { transportType = "esriTransportTypeUrl", responseType = "esriReplicaResponseTypeData",
                   replicaName = "crew-1", replicaID = "", targetType = "client", status = "Completed",
                   resultUrl = "{ROOT}/files/r1.json", submissionTime = "1700000000000",
                   lastUpdatedTime = "1700000004000" } } } },
      { method = "GET", path = "/files/r1.json", responses = { { json = result_file() } } },
    }
    local c = geoservices.client{ url = s.url, token = "t", enum_prefix = "esri" }
    local statuses = {}
    local result = assert(c:create_replica("Parcels", { replicaName = "crew-1", layers = { 0, 1 },
                                                         returnAttachments = true },
      { poll_interval = 0.01, on_status = function(st) statuses[#statuses + 1] = st.status end }))
    assert.same({ "Pending", "ExportingData", "Completed" }, statuses)
    assert.equal(REPLICA, result.replicaID)
    assert.equal(GEN, result.replicaServerGen)
    assert.equal("integer", math.type(result.replicaServerGen))
    assert.equal("esriReplicaResponseTypeData", result.responseType)
    assert.same({ features = 1, attachments = 1 }, result.counts[0])
    assert.equal(51234, result.data[1].attachments[1].size)
    local sent = form_of(requests_to(s, "/createReplica")[1].body)
    assert.equal("true", sent.async) -- real servers answer HTTP 500 to large synchronous requests
    assert.equal("perReplica", sent.syncModel)
    assert.equal("0,1", sent.layers)
    assert.equal("esriTransportTypeUrl", sent.transportType)
    assert.equal("json", sent.dataFormat)
    assert.equal("true", sent.returnAttachments)
    assert.equal("t", sent.token)
    assert.is_nil(requests_to(s, "/files/r1.json")[1].headers.Authorization)
  end)

  it("takes a synchronous answer with URL and esriTransportTypeURL, and per-layer generations as a JSON text",
    function()
    local s = serve{
      { method = "POST", path = BASE, responses = { { json = service_doc() } } },
      { method = "POST", path = BASE .. "/createReplica", responses = { { json = {
        transportType = "esriTransportTypeURL", URL = "{ROOT}/files/r2.json" } } } },
      { method = "GET", path = "/files/r2.json", responses = { { json = result_file{
        replicaServerGen = json.null, layerServerGens = '[{"id":0,"serverGen":41},{"id":1,"serverGen":41}]' } } } },
    }
    local c = geoservices.client{ url = s.url, enum_prefix = "esri" }
    local result = assert(c:create_replica("Parcels", { replicaName = "crew-1", layers = "0,1", async = false,
                                                         syncModel = "perLayer", syncDirection = "download" }))
    assert.equal("url", result.transport)
    assert.same({ { id = 0, serverGen = 41 }, { id = 1, serverGen = 41 } }, result.layerServerGens)
    assert.same({ id = 1, serverGen = 41 }, result:replica_state().layers[2])
    assert.equal("download", result:replica_state().syncDirection)
    local sent = form_of(requests_to(s, "/createReplica")[1].body)
    assert.equal("false", sent.async)
    assert.equal("download", sent.syncDirection)
  end)

  it("reads the generation from the replica's resource when the result carries none", function()
    local s = serve{
      { method = "POST", path = BASE, responses = { { json = service_doc() } } },
      { method = "POST", path = BASE .. "/createReplica", responses = { { json = {
        transportType = "esriTransportTypeUrl", responseUrl = "{ROOT}/files/r3.json" } } } },
      { method = "GET", path = "/files/r3.json",
        responses = { { json = result_file{ replicaServerGen = json.null } } } },
      { method = "POST", path = BASE .. "/replicas/*", responses = { { json = {
        replicaName = "crew-1", replicaID = REPLICA, replicaOwner = "alice", layers = { 0, 1 },
        replicaServerGen = GEN + 7, serverSibGen = -1, syncModel = "perReplica", targetType = "client",
        creationDate = 1700000000000, lastSyncDate = 1700000000000, returnsAttachments = false,
        spatialRel = "esriSpatialRelIntersects" } } } },
    }
    local c = geoservices.client{ url = s.url }
    local result = assert(c:create_replica("Parcels", { replicaName = "crew-1", layers = { 0, 1 }, async = false }))
    assert.equal(GEN + 7, result.replicaServerGen)
    local info_request = requests_to(s, "%7D")[1]
    assert.equal(BASE .. "/replicas/%7BA2B4C6D8-1234-4ABC-9DEF-0123456789AB%7D", info_request.path)
  end)

  it("embeds the data in the first answer when asked, and streams it", function()
    local doc = result_file{ transportType = "esriTransportTypeEmbedded" }
    local s = serve{
      { method = "POST", path = BASE, responses = { { json = service_doc() } } },
      { method = "POST", path = BASE .. "/createReplica", responses = { { json = doc } } },
    }
    local c = geoservices.client{ url = s.url }
    local kinds = {}
    local result = assert(c:create_replica("Parcels",
      { layers = { 0, 1 }, async = false, transportType = "embedded" },
      { on_change = function(layer, kind) kinds[#kinds + 1] = layer .. " " .. kind end }))
    table.sort(kinds)
    assert.same({ "0 add", "0 add_attachment" }, kinds)
    assert.equal("embedded", result.transport)
    assert.equal("crew-1", result.replicaName) -- the server's, when none was asked
  end)

  it("fails a result that names no replica with kind protocol, saying the replica may exist", function()
    local s = serve{
      { method = "POST", path = BASE, responses = { { json = service_doc() } } },
      { method = "POST", path = BASE .. "/createReplica", responses = { { json = {
        transportType = "esriTransportTypeUrl", responseUrl = "{ROOT}/files/r4.json" } } } },
      { method = "GET", path = "/files/r4.json", responses = { { json = result_file{ replicaID = json.null } } } },
    }
    local c = geoservices.client{ url = s.url }
    local result, err = c:create_replica("Parcels", { replicaName = "crew-x", layers = { 0 }, async = false })
    assert.is_nil(result)
    assert.equal("protocol", err.kind)
    assert.equal("no_replica_id", err.code)
    assert.is_true(err.created)
    assert.truthy(err.message:find("crew-x may exist on the server", 1, true), err.message)
    assert.equal(1, err.result.features) -- the data that did arrive
  end)

  it("says a synchronous request answered HTTP 500 may have created the replica", function()
    local s = serve{
      { method = "POST", path = BASE, responses = { { json = service_doc() } } },
      { method = "POST", path = BASE .. "/createReplica", responses = { { status = 500,
        headers = { ["Content-Type"] = "text/html" }, body = "<html><body>Error: 500</body></html>" } } },
    }
    local c = geoservices.client{ url = s.url, retry = { attempts = 3, base_delay = 0.01 } }
    local result, err = c:create_replica("Parcels", { replicaName = "big", layers = { 0, 1 }, async = false })
    assert.is_nil(result)
    assert.equal("http", err.kind)
    assert.equal(500, err.status)
    assert.is_true(err.ambiguous)
    assert.truthy(err.message:find("big may exist on the server", 1, true), err.message)
    assert.equal(1, #requests_to(s, "/createReplica")) -- never sent twice: it may have created one
  end)

  it("fails a job Completed with resultUrl \"\" and no data: nothing to keep, the replica named", function()
    local s = serve{
      { method = "POST", path = BASE, responses = { { json = service_doc() } } },
      { method = "POST", path = BASE .. "/createReplica", responses = { { json = {
        statusUrl = "{ROOT}" .. BASE .. "/jobs/j9" } } } },
      { method = "POST", path = BASE .. "/jobs/j9", responses = { { json = {
        status = "Completed", resultUrl = "", replicaName = "crew-1", replicaID = REPLICA,
        transportType = "esriTransportTypeUrl", responseType = "esriReplicaResponseTypeData" } } } },
    }
    local result, err = geoservices.client{ url = s.url }:create_replica("Parcels", { replicaName = "crew-1",
      layers = { 0 } }, { poll_interval = 0.01 })
    assert.is_nil(result)
    assert.equal("protocol", err.kind)
    assert.equal("no_result_url", err.code)
    assert.is_true(err.created)
    assert.truthy(err.message:find("crew-1 " .. REPLICA .. " may exist", 1, true), err.message)
  end)

  it("refuses to follow a file:// status address, saying the replica may exist", function()
    local s = serve{
      { method = "POST", path = BASE, responses = { { json = service_doc() } } },
      { method = "POST", path = BASE .. "/createReplica", responses = { { json = {
        statusUrl = "file:///etc/passwd" } } } },
    }
    local _, err = geoservices.client{ url = s.url, token = "secret" }:create_replica("Parcels", { layers = { 0 },
      replicaName = "far" })
    assert.equal("protocol", err.kind)
    assert.equal("refused_url", err.code)
    assert.is_true(err.created)
    assert.truthy(err.message:find("far may exist", 1, true), err.message)
    assert.equal(2, #s:requests())
  end)

  it("turns an error body with HTTP 200 into kind server", function()
    local s = serve{
      { method = "POST", path = BASE, responses = { { json = service_doc() } } },
      { method = "POST", path = BASE .. "/createReplica", responses = { { json = { error = { code = 400,
        message = "Unable to create replica.", details = { "Invalid or missing input parameters." } } } } } },
    }
    local _, err = geoservices.client{ url = s.url }:create_replica("Parcels", { layers = { 0 } })
    assert.equal("server", err.kind)
    assert.equal(400, err.code)
    assert.truthy(err.message:find("Unable to create replica.", 1, true))
  end)

  it("refuses what the service resource rules out, and sends nothing", function()
    local s = serve{
      { method = "POST", path = BASE, responses = { { json = service_doc{ supportsPerReplicaSync = false,
        supportsPerLayerSync = true, supportsSyncDirectionControl = false, supportsAsync = false } } } },
      { method = "POST", path = BASE .. "/createReplica",
        responses = { { status = 500, body = "must not be reached" } } },
    }
    local c = geoservices.client{ url = s.url }
    local _, err = c:create_replica("Parcels", { layers = { 0 }, syncModel = "perReplica" })
    assert.equal("syncModel", err.parameter)
    _, err = c:create_replica("Parcels", { layers = { 0 }, syncDirection = "upload" })
    assert.equal("syncDirection", err.parameter)
    _, err = c:create_replica("Parcels", { layers = { 0 }, async = true })
    assert.equal("async", err.parameter)
    _, err = c:create_replica("Parcels", { layers = { 5 } })
    assert.equal("layers", err.parameter)
    assert.equal(0, #requests_to(s, "/createReplica"))
    assert.equal(4, #requests_to(s, "/FeatureServer"))
  end)

  it("asks a service that runs createReplica synchronously only for a synchronous one, as perLayer", function()
    local s = serve{
      { method = "POST", path = BASE, responses = { { json = service_doc{ supportsPerReplicaSync = false,
        supportsAsync = false } } } },
      { method = "POST", path = BASE .. "/createReplica", responses = { { json = {
        transportType = "esriTransportTypeUrl", responseUrl = "{ROOT}/files/r5.json" } } } },
      { method = "GET", path = "/files/r5.json", responses = { { json = result_file{ replicaServerGen = json.null,
        layerServerGens = { { id = 0, serverGen = 3 } } } } } },
    }
    local result = assert(geoservices.client{ url = s.url }:create_replica("Parcels", { layers = { 0 } }))
    assert.equal("perLayer", result.syncModel)
    local sent = form_of(requests_to(s, "/createReplica")[1].body)
    assert.equal("false", sent.async)
    assert.equal("perLayer", sent.syncModel)
  end)

  it("holds nothing against an old server that states no sync capabilities", function()
    local doc = service_doc()
    doc.syncCapabilities = nil
    local s = serve{
      { method = "POST", path = BASE, responses = { { json = doc } } },
      { method = "POST", path = BASE .. "/createReplica", responses = { { json = result_file{
        transportType = "esriTransportTypeEmbedded" } } } },
    }
    assert(geoservices.client{ url = s.url }:create_replica("Parcels", { layers = { 0 }, syncModel = "perLayer",
                                                                        transportType = "embedded" }))
  end)

  it("streams a 20 MB result file with memory flat, never decoding it whole", function()
    local path = helper.tmp_name()
    local f = assert(io.open(path, "wb"))
    f:write('{"replicaName":"big","replicaID":"', REPLICA, '","replicaServerGen":', GEN,
            ',"transportType":"esriTransportTypeUrl","responseType":"esriReplicaResponseTypeData","layers":[{"id":0,',
            '"features":[')
    local n = 100000
    local buf = {}
    for i = 1, n do
      buf[#buf + 1] = ('%s{"attributes":{"OBJECTID":%d,"GlobalID":"{%08X-0000-4000-8000-000000000000}",'
        .. '"NAME":"parcel number %d","AREA":%d.25},"geometry":{"x":%d.5,"y":4036100.75}}'):format(
          i > 1 and "," or "", i, i, i, i, -13045900 + i)
      if #buf == 1000 then f:write(table.concat(buf)) buf = {} end
    end
    f:write(table.concat(buf), '],"attachments":[]}]}')
    f:close()
    local s = serve{
      { method = "POST", path = BASE, responses = { { json = service_doc() } } },
      { method = "POST", path = BASE .. "/createReplica", responses = { { json = {
        transportType = "esriTransportTypeUrl", responseUrl = "{ROOT}/files/big.json" } } } },
      { method = "GET", path = "/files/big.json", responses = { { file = path } } },
    }
    collectgarbage()
    local before, peak, count = rss_kib(), 0, 0
    local c = geoservices.client{ url = s.url }
    local result = assert(c:create_replica("Parcels", { layers = { 0 }, async = false },
      { on_change = function()
          count = count + 1
          if count % 5000 == 0 then peak = math.max(peak, rss_kib() - before) end
        end }))
    assert.equal(n, count)
    assert.equal(n, result.features)
    -- under `make asan` freed memory sits in ASan's quarantine: RSS says nothing there
    if not (os.getenv("LD_PRELOAD") or ""):match("asan") then
      assert.is_true(peak < 24 * 1024, ("memory grew by %d KiB for a %d KiB file"):format(peak,
        (io.open(path):seek("end")) // 1024))
    end
    os.remove(path)
  end)

  describe("replica info and unRegisterReplica", function()
    it("unregisters once even when the first answer is lost: a re-sent request that finds it gone succeeds",
      function()
      local s = serve{
        { method = "POST", path = BASE .. "/unRegisterReplica", responses = {
          { status = 502, body = "Bad Gateway" },
          { json = { error = { code = 400, message = "Unable to unregister replica.",
                               details = { "Replica " .. REPLICA .. " does not exist." } } } } } },
      }
      local c = geoservices.client{ url = s.url, retry = { attempts = 3, base_delay = 0.01 } }
      local done = assert(c:unregister_replica("Parcels", REPLICA))
      assert.is_true(done.already)
      assert.equal("replica " .. REPLICA .. " of Parcels unregistered (by an earlier attempt of this call)",
        tostring(done))
      local sent = s:requests()
      assert.equal(2, #sent)
      assert.equal(REPLICA, form_of(sent[2].body).replicaID)
    end)

    it("reports an unknown replica as the server says, and a plain success as success", function()
      local s = serve{
        { method = "POST", path = BASE .. "/unRegisterReplica", responses = {
          { json = { error = { code = 400, message = "Unable to unregister replica.",
                               details = { "Replica does not exist." } } } },
          { json = { success = true } } } },
      }
      local c = geoservices.client{ url = s.url }
      local _, err = c:unregister_replica("Parcels", REPLICA)
      assert.equal("server", err.kind)
      local done = assert(c:unregister_replica("Parcels", REPLICA))
      assert.is_true(done.success)
      assert.is_nil(done.already)
    end)
  end)
end)
