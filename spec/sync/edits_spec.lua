-- The edits builder and the validation of synchronizeReplica's parameters
-- (no server needed: everything here is refused or built before sending).
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local sync_params = require "geoservices.sync.params"

describe("edits builder", function()
  it("gives adds a new uppercase version-4 GlobalID in braces", function()
    local e = geoservices.edits()
    local seen = {}
    for _ = 1, 200 do
      local gid = e:add(0, { attributes = { A = 1 } })
      assert.matches("^{%x%x%x%x%x%x%x%x%-%x%x%x%x%-4%x%x%x%-[89AB]%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x}$", gid)
      assert.equal(gid:upper(), gid)
      assert.is_nil(seen[gid])
      seen[gid] = true
    end
  end)

  it("keeps a GlobalID the feature already has and does not modify the caller's table", function()
    local e = geoservices.edits()
    local feature = { attributes = { GlobalID = "{ABC}", NAME = "x" } }
    assert.equal("{ABC}", e:add(3, feature))
    local other = { attributes = { NAME = "y" } }
    e:add(3, other)
    assert.is_nil(other.attributes.GlobalID)
  end)

  it("counts and encodes to the 2.1 array with [] for empty lists and exact numbers", function()
    local e = geoservices.edits()
    e:add(0, { attributes = { GlobalID = "{A}", OBJECTS = 9007199254740993, WHEN = geoservices.date(1700000000) },
               geometry = { x = -117.19584274291992, y = 34.056789012345678 } })
    e:update(0, { attributes = { GlobalID = "{B}", NAME = "Zoë" } })
    e:delete(2, "{C}")
    local att = e:add_attachment(0, { parentGlobalId = "{A}", name = "photo.jpg", contentType = "image/jpeg",
                                      uploadId = "u1" })
    assert.same({ adds = 2, updates = 1, deletes = 1, total = 4 }, e:counts())
    local text = e:encode()
    local back = json.decode(text)
    assert.equal(2, #back)
    assert.equal(0, back[1].id)
    assert.equal(9007199254740993, back[1].features.adds[1].attributes.OBJECTS)
    assert.equal("integer", math.type(back[1].features.adds[1].attributes.WHEN))
    assert.equal(-117.19584274291992, back[1].features.adds[1].geometry.x)
    assert.equal(34.056789012345678, back[1].features.adds[1].geometry.y)
    assert.equal(att, back[1].attachments.adds[1].globalId)
    assert.matches('"deleteIds":%[%]', text)
    assert.matches('"adds":%[%],"deleteIds":%["{C}"%]', text) -- layer 2: no adds, one delete
    assert.equal("geoservices.Edits (2 layers: 2 adds, 1 updates, 1 deletes)", tostring(e))
  end)

  it("raises on misuse at once", function()
    local e = geoservices.edits()
    assert.has_error(function() e:update(0, { attributes = {} }) end, "edits: update needs attributes.GlobalID")
    assert.has_error(function() e:delete(0, "") end, "edits: delete needs a GlobalID string")
    assert.has_error(function() e:add(-1, {}) end, "edits: layer id must be a non-negative integer, got -1")
    assert.has_error(function() e:add_attachment(0, { name = "x" }) end, "edits: add_attachment needs parentGlobalId")
  end)

  it("converts dates to epoch milliseconds in UTC", function()
    assert.equal(1700000000000, geoservices.date(1700000000))
    assert.equal(1700000000000, geoservices.date{ year = 2023, month = 11, day = 14, hour = 22, min = 13, sec = 20 })
    assert.equal(0, geoservices.date{ year = 1970, month = 1, day = 1 })
    assert.equal(951782400000, geoservices.date{ year = 2000, month = 2, day = 29 })
  end)
end)

describe("synchronizeReplica parameters", function()
  local function refused(params, parameter, pattern)
    local fields, err = sync_params.encode(params, "svc")
    assert.is_nil(fields)
    assert.equal("invalid", err.kind)
    assert.equal(parameter, err.parameter)
    if pattern then assert.matches(pattern, err.message) end
  end

  local R = "{R}"

  it("requires replicaID", function()
    refused({}, "replicaID", "is required")
    refused({ replicaID = "" }, "replicaID")
  end)

  it("refuses enumerated values outside the spec's lists", function()
    refused({ replicaID = R, transportType = "ftp" }, "transportType",
      "svcTransportTypeUrl or svcTransportTypeEmbedded")
    refused({ replicaID = R, syncDirection = "sideways" }, "syncDirection",
      "bidirectional, upload, download or snapshot")
    refused({ replicaID = R, dataFormat = "xml" }, "dataFormat", "json or sqlite")
    refused({ replicaID = R, editsUploadId = "u", editsUploadFormat = "zip" }, "editsUploadFormat",
      "must be SQLITE or JSON")
    refused({ replicaID = R, syncLayers = { { id = 0, serverGen = 1, syncDirection = "up" } } },
      "syncLayers (layer 0) syncDirection")
  end)

  it("refuses wrong types for booleans and generations", function()
    refused({ replicaID = R, async = "yes" }, "async", "must be true or false")
    refused({ replicaID = R, closeReplica = 1 }, "closeReplica")
    refused({ replicaID = R, replicaServerGen = "12" }, "replicaServerGen", "integer")
    refused({ replicaID = R, replicaServerGen = 1.5 }, "replicaServerGen")
  end)

  it("refuses edits together with editsUploadId, and editsUploadFormat alone", function()
    refused({ replicaID = R, edits = {}, editsUploadId = "u1" }, "edits", "cannot be combined with editsUploadId")
    refused({ replicaID = R, editsUploadFormat = "sqlite" }, "editsUploadFormat", "only used with editsUploadId")
  end)

  it("refuses edits the server would silently ignore", function()
    local e = geoservices.edits()
    e:add(0, { attributes = { A = 1 } })
    refused({ replicaID = R, edits = e, syncDirection = "download" }, "edits", "ignored by the server")
    refused({ replicaID = R, edits = e, syncDirection = "snapshot" }, "edits", "ignored by the server")
    refused({ replicaID = R, edits = e, syncLayers = { { id = 0, serverGen = 3, syncDirection = "download" } } },
      "edits", "layer 0 has edits but its syncLayers direction is download")
  end)

  it("refuses syncLayers entries without id, or without serverGen where they download", function()
    refused({ replicaID = R, syncLayers = { { serverGen = 1 } } }, "syncLayers", "entry #1 needs an integer id")
    refused({ replicaID = R, syncLayers = { { id = 2 } } }, "syncLayers", "layer 2 needs serverGen")
    refused({ replicaID = R, syncLayers = { { id = 2, syncDirection = "download" } } }, "syncLayers")
    assert.truthy(sync_params.encode({ replicaID = R, syncLayers = { { id = 2, syncDirection = "upload" } } }, "svc"))
    assert.truthy(sync_params.encode({ replicaID = R, syncLayers = { { id = 2, syncDirection = "snapshot" } } }, "svc"))
  end)

  it("refuses updates and deletes without a GlobalID", function()
    refused({ replicaID = R, edits = { { id = 0, features = { updates = { { attributes = { A = 1 } } } } } } },
      "edits", "layer 0 features update #1 has no GlobalID")
    refused({ replicaID = R, edits = { { id = 1, features = { deleteIds = { "" } } } } }, "edits", "delete #1")
    refused({ replicaID = R, edits = { { id = 1, attachments = { updates = { { name = "x" } } } } } }, "edits",
      "attachments update #1")
    refused({ replicaID = R, edits = "[{\"id\": 0, \"features\": {\"updates\": [{}]}}]" }, "edits")
    refused({ replicaID = R, edits = "[not json" }, "edits", "not valid JSON")
  end)

  it("sends enumerations with the configured prefix and passes unknown parameters through", function()
    local fields = assert(sync_params.encode({ replicaID = R, transportType = "svcTransportTypeURL",
      futureParameter = "x", async = true, timeReferenceUnknownClient = true }, "acme"))
    assert.equal("acmeTransportTypeUrl", fields.transportType)
    assert.equal("x", fields.futureParameter)
    assert.is_true(fields.timeReferenceUnknownClient)
    fields = assert(sync_params.encode({ replicaID = R, transportType = "embedded" }, "svc"))
    assert.equal("svcTransportTypeEmbedded", fields.transportType)
  end)

  it("matches response enumerations on their suffix, case-insensitively", function()
    for _, v in ipairs{ "svcTransportTypeUrl", "esriTransportTypeURL", "TransportTypeUrl", "xTRANSPORTTYPEURL" } do
      assert.equal("url", sync_params.transport_of(v))
    end
    assert.equal("embedded", sync_params.transport_of("fooTransportTypeEmbedded"))
    assert.equal("edits_and_data", sync_params.response_of("svcReplicaResponseTypeEditsAndData"))
    assert.equal("edits", sync_params.response_of("acmeReplicaResponseTypeEDITS"))
    assert.equal("no_edits", sync_params.response_of("svcReplicaResponseTypeNoEdits"))
    assert.equal("replacement_data", sync_params.response_of("svcReplicaResponseTypeReplacementData"))
    assert.is_nil(sync_params.response_of("svcSomethingElse"))
  end)
end)
