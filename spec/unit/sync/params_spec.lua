-- synchronizeReplica's parameters: what encode sends and what it refuses,
-- beyond the refusals spec/edits_spec.lua already lists.
local edits_mod = require "geoservices.sync.edits"
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"
local sync_params = require "geoservices.sync.params"

local R = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"

local function refused(params, parameter, rule, prefix)
  local fields, err = sync_params.encode(params, prefix or "svc")
  assert.is_nil(fields)
  assert.is_true(errors.is(err))
  assert.equal("invalid", err.kind)
  assert.equal(parameter, err.parameter)
  assert.equal(parameter .. ": " .. rule, err.message)
end

describe("sync params.encode", function()
  it("raises when params is not a table", function()
    assert.has_error(function() sync_params.encode("replicaID=x", "svc") end,
      "synchronize_replica: params must be a table")
  end)

  it("returns a copy: the caller's table is never changed", function()
    local params = { replicaID = R, syncDirection = "Upload", transportType = "url", replicaServerGen = 4.0 }
    local fields = assert(sync_params.encode(params, "svc"))
    assert.are_not.equal(params, fields)
    assert.same({ replicaID = R, syncDirection = "Upload", transportType = "url", replicaServerGen = 4.0 }, params)
    assert.equal("upload", fields.syncDirection)
    assert.equal("svcTransportTypeUrl", fields.transportType)
    assert.equal(4, fields.replicaServerGen)
    assert.equal("integer", math.type(fields.replicaServerGen))
  end)

  it("names the parameter and the rule in every refusal", function()
    refused({ replicaID = 7 }, "replicaID", "is required: the identifier of the replica, a non-empty string")
    refused({ replicaID = R, rollbackOnFailure = "false" }, "rollbackOnFailure", "must be true or false, got string")
    refused({ replicaID = R, replicaServerSibGen = "3" }, "replicaServerSibGen", "must be an integer generation number")
    refused({ replicaID = R, syncDirection = 1 }, "syncDirection",
      "must be bidirectional, upload, download or snapshot, got 1")
    refused({ replicaID = R, dataFormat = "geojson" }, "dataFormat", "must be json or sqlite, got geojson")
    refused({ replicaID = R, edits = 5 }, "edits", "must be an array of layer entries")
    refused({ replicaID = R, edits = { { features = {} } } }, "edits", "entry #1 needs an integer layer id")
    refused({ replicaID = R, edits = { { id = 0.5 } } }, "edits", "entry #1 needs an integer layer id")
    refused({ replicaID = R, edits = { { id = 2, features = "x" } } }, "edits", "layer 2 features must be an object")
    refused({ replicaID = R, syncLayers = "0" }, "syncLayers", "must be an array of entries")
    refused({ replicaID = R, syncLayers = { { id = 1, serverGen = "9" } } }, "syncLayers",
      "entry for layer 1: serverGen must be an integer")
    refused({ replicaID = R, syncLayers = { { id = 1 } } }, "syncLayers",
      "entry for layer 1 needs serverGen: direction bidirectional downloads changes")
  end)

  it("uses the vendor prefix in the transportType rule", function()
    refused({ replicaID = R, transportType = "pigeon" }, "transportType",
      "must be acmeTransportTypeUrl or acmeTransportTypeEmbedded, got pigeon", "acme")
    local fields = assert(sync_params.encode({ replicaID = R, transportType = "svcTransportTypeEmbedded" }, "esri"))
    assert.equal("esriTransportTypeEmbedded", fields.transportType)
  end)

  it("accepts both data formats, and editsUploadFormat with editsUploadId", function()
    assert.equal("json", assert(sync_params.encode({ replicaID = R, dataFormat = "json" }, "svc")).dataFormat)
    assert.equal("sqlite", assert(sync_params.encode({ replicaID = R, dataFormat = "sqlite" }, "svc")).dataFormat)
    local fields = assert(sync_params.encode({ replicaID = R, editsUploadId = "u1", editsUploadFormat = "sqlite" },
      "svc"))
    assert.equal("u1", fields.editsUploadId)
    assert.equal("sqlite", fields.editsUploadFormat)
  end)

  it("sends an edits builder as its 2.1 table, a JSON string as it is", function()
    local e = edits_mod.new()
    local gid = e:add(1, { attributes = { NAME = "x" } })
    local fields = assert(sync_params.encode({ replicaID = R, edits = e }, "svc"))
    assert.is_false(edits_mod.is(fields.edits))
    assert.equal(1, fields.edits[1].id)
    assert.equal(gid, fields.edits[1].features.adds[1].attributes.GlobalID)
    local text = '[{"id":1,"features":{"deleteIds":["{D}"]}}]'
    fields = assert(sync_params.encode({ replicaID = R, edits = text }, "svc"))
    assert.equal(text, fields.edits)
    local list = { { id = 0, features = { updates = { { attributes = { GlobalID = "{U}" } } } } } }
    fields = assert(sync_params.encode({ replicaID = R, edits = list }, "svc"))
    assert.equal(list, fields.edits)
  end)

  it("lets empty edits pass with a direction that only downloads", function()
    local empty = { { id = 0, features = { adds = {}, updates = {}, deleteIds = {} } } }
    assert.truthy(sync_params.encode({ replicaID = R, edits = empty, syncDirection = "download" }, "svc"))
    assert.truthy(sync_params.encode({ replicaID = R, edits = edits_mod.new(), syncDirection = "snapshot" }, "svc"))
  end)

  it("copies syncLayers entries, lower-casing their directions, as a JSON array", function()
    local layers = { { id = 0, serverGen = 5, syncDirection = "Download" }, { id = 1, serverGen = 6, extra = true } }
    local fields = assert(sync_params.encode({ replicaID = R, syncLayers = layers }, "svc"))
    assert.is_true(json.is_array(fields.syncLayers))
    assert.same({ { id = 0, serverGen = 5, syncDirection = "download" }, { id = 1, serverGen = 6, extra = true } },
      fields.syncLayers)
    assert.equal("Download", layers[1].syncDirection)
    assert.are_not.equal(layers[1], fields.syncLayers[1])
  end)

  it("lets a layer inherit the top-level direction: no serverGen needed when it only uploads", function()
    assert.truthy(sync_params.encode({ replicaID = R, syncDirection = "upload", syncLayers = { { id = 4 } } }, "svc"))
    refused({ replicaID = R, syncDirection = "download", syncLayers = { { id = 4 } } }, "syncLayers",
      "entry for layer 4 needs serverGen: direction download downloads changes")
  end)

  it("refuses a nil hole inside the length of every list, {a, nil, b} with #t == 3, naming it", function()
    local a, b = { attributes = { GlobalID = "{A}" } }, { attributes = { GlobalID = "{B}" } }
    local function holed(x, y)
      local t = { x, nil, y }
      assert.equal(3, #t) -- the case a check of the keys beyond #t cannot see
      return t
    end
    local layer = { id = 0, features = { adds = { a } } }
    refused({ replicaID = R, edits = holed(layer, layer) }, "edits",
      "the list of layer entries has a nil hole at #2: every item up to the last must be present")
    for _, part in ipairs{ "features", "attachments" } do
      for _, name in ipairs{ "adds", "updates", "deleteIds" } do
        local list = name == "deleteIds" and holed("{A}", "{B}") or holed(a, b)
        if part == "attachments" and name ~= "deleteIds" then
          list = holed({ globalId = "{A}" }, { globalId = "{B}" })
        end
        refused({ replicaID = R, edits = { { id = 4, [part] = { [name] = list } } } }, "edits",
          ("layer 4 %s %s has a nil hole at #2: every item up to the last must be present"):format(part, name))
      end
    end
    local entry = { id = 1, serverGen = 3 }
    refused({ replicaID = R, syncLayers = holed(entry, { id = 2, serverGen = 3 }) }, "syncLayers",
      "the list has a nil hole at #2: every item up to the last must be present")
    -- the same lists without a hole pass
    assert(sync_params.encode({ replicaID = R, syncLayers = { entry, { id = 2, serverGen = 3 } },
      edits = { { id = 4, features = { adds = { a, b }, updates = { a, b }, deleteIds = { "{A}", "{B}" } } } } },
      "svc"))
  end)

  it("checks edits against each layer's own direction", function()
    local edits = { { id = 0, features = { deleteIds = { "{D}" } } } }
    local layers = { { id = 0, serverGen = 1, syncDirection = "upload" },
                     { id = 1, serverGen = 1, syncDirection = "download" } }
    assert.truthy(sync_params.encode({ replicaID = R, edits = edits, syncLayers = layers }, "svc"))
    refused({ replicaID = R, edits = edits, syncDirection = "upload",
              syncLayers = { { id = 0, serverGen = 1, syncDirection = "snapshot" } } }, "edits",
      "layer 0 has edits but its syncLayers direction is snapshot: the server would ignore them")
  end)
end)

describe("sync params enumerations", function()
  it("transport_of knows only url and embedded, in any spelling", function()
    assert.equal("url", sync_params.transport_of("URL"))
    assert.equal("embedded", sync_params.transport_of("Embedded"))
    assert.equal("embedded", sync_params.transport_of("esriTransportTypeEMBEDDED"))
    assert.is_nil(sync_params.transport_of("svcTransportTypeUrlx"))
    assert.is_nil(sync_params.transport_of("urls"))
    assert.is_nil(sync_params.transport_of(nil))
    assert.is_nil(sync_params.transport_of(1))
  end)

  it("response_of matches the longest suffix and bare names", function()
    assert.equal("edits", sync_params.response_of("edits"))
    assert.equal("no_edits", sync_params.response_of("NoEdits"))
    assert.equal("edits_and_data", sync_params.response_of("editsanddata"))
    assert.equal("replacement_data", sync_params.response_of("ReplacementData"))
    assert.equal("no_edits", sync_params.response_of("esriReplicaResponseTypeNoEdits"))
    assert.is_nil(sync_params.response_of("data"))
    assert.is_nil(sync_params.response_of("svcReplicaResponseTypeEditsX"))
    assert.is_nil(sync_params.response_of(false))
  end)
end)
