-- createReplica's parameters: what encode sends, what it understands, and
-- what it refuses (naming the parameter) before anything is sent.
local create_params = require "geoservices.sync.create_params"
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"

local function refused(params, parameter, rule, prefix)
  local fields, err = create_params.encode(params, prefix or "svc")
  assert.is_nil(fields)
  assert.is_true(errors.is(err))
  assert.equal("invalid", err.kind)
  assert.equal(parameter, err.parameter)
  if rule then assert.equal(parameter .. ": " .. rule, err.message) end
  return err
end

describe("createReplica params.encode", function()
  it("raises when params is not a table", function()
    assert.has_error(function() create_params.encode("layers=0", "svc") end, "create_replica: params must be a table")
  end)

  it("sends the layers as ids separated by commas, defaults made explicit, the caller's table untouched", function()
    local params = { layers = { 1, 0 }, replicaName = "crew-1" }
    local fields, plan = assert(create_params.encode(params, "svc"))
    assert.same({ layers = { 1, 0 }, replicaName = "crew-1" }, params)
    assert.equal("1,0", fields.layers)
    assert.equal("crew-1", fields.replicaName)
    assert.equal("svcTransportTypeUrl", fields.transportType)
    assert.equal("json", fields.dataFormat)
    assert.same({ 1, 0 }, plan.layers)
    assert.equal("url", plan.transport)
    assert.is_nil(plan.model)  -- the operation picks it from the service's capabilities
    assert.is_nil(plan.async)  -- likewise (async unless the service cannot)
  end)

  it("reads layers as an integer, a list, \"0,1\" or \"[0, 1]\"", function()
    for _, v in ipairs{ 3, 3.0, { 3 }, "3" } do
      assert.same({ 3 }, select(2, create_params.encode({ layers = v }, "svc")).layers)
    end
    assert.same({ 0, 1 }, create_params.layer_ids("0,1"))
    assert.same({ 0, 1 }, create_params.layer_ids(" [0, 1] "))
    assert.same({ 2, 0 }, create_params.layer_ids({ 2.0, 0 }))
  end)

  it("names the parameter and the rule in every refusal", function()
    refused({}, "layers", "is required: the ids of the layers and tables to replicate, e.g. {0, 1}")
    refused({ layers = {} }, "layers", "must name at least one layer")
    refused({ layers = { 0, 0 } }, "layers", "layer 0 is listed twice")
    refused({ layers = { 0, -1 } }, "layers", "entry #2 must be a layer id (an integer of at least 0)")
    refused({ layers = { 0, 1.5 } }, "layers", "entry #2 must be a layer id (an integer of at least 0)")
    refused({ layers = { [1] = 0, [3] = 1 } }, "layers", "must be a list of layer ids without holes")
    local holed = { 0, nil, 2 }
    assert.equal(3, #holed) -- a hole inside the length: ipairs would stop at it and drop layer 2
    refused({ layers = holed }, "layers", "must be a list of layer ids without holes")
    refused({ layers = "0;1" }, "layers", "must be layer ids separated by commas, such as 0,1")
    refused({ layers = 0, replicaName = "" }, "replicaName", "must be a non-empty string")
    refused({ layers = 0, async = "true" }, "async", "must be true or false, got string")
    refused({ layers = 0, returnAttachments = 1 }, "returnAttachments", "must be true or false, got number")
    refused({ layers = 0, syncModel = "none" }, "syncModel",
      "must be perReplica or perLayer, got none (a replica of model none cannot be synchronized)")
    refused({ layers = 0, syncDirection = "snapshot" }, "syncDirection",
      "must be bidirectional, upload or download, got snapshot (snapshot is a direction of synchronizeReplica)")
    refused({ layers = 0, targetType = "phone" }, "targetType", "must be client or server, got phone")
    refused({ layers = 0, transportType = "pigeon" }, "transportType",
      "must be svcTransportTypeUrl or svcTransportTypeEmbedded, got pigeon")
    refused({ layers = 0, dataFormat = "shapefile" }, "dataFormat", "must be json or sqlite, got shapefile")
    refused({ layers = 0, geometryType = "esriGeometryEnvelope" }, "geometryType", "is only used with geometry")
    refused({ layers = 0, inSR = 4326 }, "inSR", "is only used with geometry")
    refused({ layers = 0, geometry = { xmin = 1, ymin = 0, xmax = 0, ymax = 1 } }, "geometry",
      "an envelope needs xmin <= xmax and ymin <= ymax")
    refused({ layers = 0, geometry = { xmin = 0, ymin = 0, xmax = 0 / 0, ymax = 1 } }, "geometry",
      "an envelope needs a finite number xmax")
    refused({ layers = 0, geometry = { x = 1 } }, "geometry", "a point needs finite numbers x and y")
    refused({ layers = 0, geometry = { rings = {} } }, "geometry", "a polygon needs a non-empty array rings")
    refused({ layers = 0, geometry = { paths = { { { 0, 0 }, { 1, math.huge } } } } }, "geometry",
      "paths[1][2][2]: coordinates must be finite numbers")
    refused({ layers = 0, geometry = { z = 1 } }, "geometry",
      "has none of xmin/ymin/xmax/ymax, x/y, points, paths or rings")
    refused({ layers = 0, geometry = { x = 1, y = 2 }, geometryType = "esriGeometryPolygon" }, "geometryType",
      "says polygon but the geometry is a point")
    refused({ layers = 0, geometry = "1,2,3,4", geometryType = "polygon" }, "geometryType",
      "must be an envelope type with the xmin,ymin,xmax,ymax syntax")
    refused({ layers = 0, geometry = { x = 1, y = 2 }, geometryType = "esriGeometryCircle" }, "geometryType")
    refused({ layers = 0, geometry = { x = 1, y = 2 }, inSR = { name = "x" } }, "inSR",
      "a spatial reference object needs wkid, latestWkid or wkt")
    refused({ layers = 0, geometry = { x = 1, y = 2 }, inSR = -5 }, "inSR", "must be a positive wkid")
    refused({ layers = 0, replicaSR = "web mercator" }, "replicaSR",
      "must be a wkid or a spatial reference object ({wkid =} or {wkt =})")
    refused({ layers = { 0 }, layerQueries = { [1] = { queryOption = "all" } } }, "layerQueries",
      "layer 1 is not in layers")
    refused({ layers = { 0 }, layerQueries = { [0] = { queryOption = "some" } } }, "layerQueries",
      "layer 0: queryOption must be all, useFilter or none")
    refused({ layers = { 0 }, layerQueries = { [0] = { where = 1 } } }, "layerQueries",
      "layer 0: where must be a string")
    refused({ layers = { 0 }, layerQueries = { [0] = { useGeometry = "yes" } } }, "layerQueries",
      "layer 0: useGeometry must be true or false")
    refused({ layers = { 0 }, layerQueries = "{" }, "layerQueries")
    refused({ layers = { 0 }, layerQueries = { { queryOption = "all" } } }, "layerQueries")
  end)

  it("implies geometryType from the geometry and prefixes bare enumerations; a vendor's own goes verbatim", function()
    local box = { xmin = 0, ymin = 0, xmax = 1, ymax = 1 }
    local fields = assert(create_params.encode({ layers = 0, geometry = box }, "esri"))
    assert.equal("esriGeometryEnvelope", fields.geometryType)
    assert.equal("esriTransportTypeUrl", fields.transportType)
    local ring = { { 0, 0 }, { 0, 1 }, { 1, 1 }, { 0, 0 } }
    fields = assert(create_params.encode({ layers = 0, geometry = { rings = { ring } },
                                           transportType = "svcTransportTypeEmbedded" }, "acme"))
    assert.equal("acmeGeometryPolygon", fields.geometryType)
    assert.equal("acmeTransportTypeEmbedded", fields.transportType)
    fields = assert(create_params.encode({ layers = 0, geometry = { x = 1, y = 2 }, geometryType = "esriGeometryPoint",
                                           transportType = "esriTransportTypeURL" }, "svc"))
    assert.equal("esriGeometryPoint", fields.geometryType)
    assert.equal("esriTransportTypeURL", fields.transportType)
  end)

  it("takes the simple envelope syntax and a geometry's JSON text", function()
    local fields, plan = assert(create_params.encode({ layers = 0, geometry = " -117.2, 34.05, -117.19 ,34.06 " },
      "svc"))
    assert.equal("-117.2,34.05,-117.19,34.06", fields.geometry)
    assert.equal("svcGeometryEnvelope", fields.geometryType)
    assert.equal("url", plan.transport)
    fields = assert(create_params.encode({ layers = 0, inSR = "3857",
                                           geometry = '{"x": 1, "y": 2, "spatialReference": {"wkid": 3857}}' }, "svc"))
    assert.equal(1, fields.geometry.x)
    assert.equal("svcGeometryPoint", fields.geometryType)
    assert.equal(3857, fields.inSR)
    assert.equal("integer", math.type(fields.inSR))
  end)

  it("normalizes the model, direction, target and queries, and lets unknown parameters through", function()
    local fields, plan = assert(create_params.encode({
      layers = "0,2", syncModel = "PERLAYER", syncDirection = "Download", targetType = "Server", async = false,
      layerQueries = { [2] = { queryOption = "usefilter", where = "STATUS = 'open'", useGeometry = false },
                       ["0"] = { queryOption = "None" } },
      replicaSR = { wkid = 102100, latestWkid = 3857 }, transformations = "[1]", attachmentsSyncDirection = "upload",
    }, "svc"))
    assert.equal("perLayer", fields.syncModel)
    assert.equal("perLayer", plan.model)
    assert.equal("download", fields.syncDirection)
    assert.equal("server", fields.targetType)
    assert.is_false(fields.async)
    assert.is_false(plan.async)
    assert.equal("useFilter", fields.layerQueries["2"].queryOption)
    assert.equal("none", fields.layerQueries["0"].queryOption)
    assert.equal('{"0":{"queryOption":"none"},"2":{"queryOption":"useFilter","useGeometry":false,'
      .. '"where":"STATUS = \'open\'"}}', json.encode(fields.layerQueries))
    assert.equal(102100, fields.replicaSR.wkid)
    assert.equal("[1]", fields.transformations)
    assert.equal("upload", fields.attachmentsSyncDirection)
  end)

  it("reads layerQueries given as JSON text", function()
    local fields = assert(create_params.encode({ layers = { 0, 1 }, layerQueries = '{"1": {"queryOption": "all"}}' },
      "svc"))
    assert.equal("all", fields.layerQueries["1"].queryOption)
  end)
end)
