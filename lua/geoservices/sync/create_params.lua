--- Validation and encoding of createReplica's parameters
-- (`{service}/FeatureServer/createReplica`). Every rule refuses bad input
-- before anything is sent, naming the parameter; unknown parameters pass
-- through unchanged. Pure: no I/O. Internal (geoservices.sync.create uses it).
--
-- Enumerated values follow synchronizeReplica's rule (geoservices.sync.params):
-- a bare value ("url", "envelope") or the interface's neutral "svc..." form
-- takes the client's vendor prefix; a vendor's own spelling is sent verbatim.
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"
local sync_params = require "geoservices.sync.params"

local create_params = {}

local invalid = errors.invalid

local BOOLEANS = { "returnAttachments", "returnAttachmentsDataByUrl", "async" }
local MODELS = { perreplica = "perReplica", perlayer = "perLayer" }
local DIRECTIONS = { bidirectional = true, upload = true, download = true }
local TARGETS = { client = true, server = true }
local QUERY_OPTIONS = { all = "all", usefilter = "useFilter", none = "none" }
-- geometry types by their lowercase suffix, and their canonical suffix
local GEOMETRY_TYPES = {
  point = "Point", multipoint = "Multipoint", polyline = "Polyline", polygon = "Polygon", envelope = "Envelope",
}

local function finite(n)
  return type(n) == "number" and n == n and n ~= math.huge and n ~= -math.huge
end

--- "point", "multipoint", "polyline", "polygon", "envelope" for any
-- spelling of a geometry type (esriGeometryPolygon, svcGeometryPolygon,
-- polygon), or nil.
-- @param value the value
-- @treturn ?string the geometry type
function create_params.geometry_type_of(value)
  if type(value) ~= "string" then return nil end
  local v = value:lower()
  local suffix = v:match("geometry(%a+)$") or v
  return GEOMETRY_TYPES[suffix] and suffix or nil
end

-- The geometry type a geometry object's members imply.
local function implied_type(g)
  if g.xmin ~= nil or g.ymin ~= nil or g.xmax ~= nil or g.ymax ~= nil then return "envelope" end
  if g.rings ~= nil then return "polygon" end
  if g.paths ~= nil then return "polyline" end
  if g.points ~= nil then return "multipoint" end
  if g.x ~= nil or g.y ~= nil then return "point" end
  return nil
end

-- Every number of a coordinate array (any nesting) is finite; returns the
-- position of the first bad one, or nil.
local function bad_coordinate(v, path)
  if type(v) == "number" then return (not finite(v)) and path or nil end
  if type(v) ~= "table" then return path end
  for i, x in ipairs(v) do
    local bad = bad_coordinate(x, ("%s[%d]"):format(path, i))
    if bad then return bad end
  end
  return nil
end

-- A geometry object: the members its type needs, finite coordinates.
local function check_geometry_object(g, gtype)
  if gtype == "envelope" then
    for _, k in ipairs{ "xmin", "ymin", "xmax", "ymax" } do
      if not finite(g[k]) then return invalid("geometry", ("an envelope needs a finite number %s"):format(k)) end
    end
    if g.xmin > g.xmax or g.ymin > g.ymax then
      return invalid("geometry", "an envelope needs xmin <= xmax and ymin <= ymax")
    end
  elseif gtype == "point" then
    if not finite(g.x) or not finite(g.y) then return invalid("geometry", "a point needs finite numbers x and y") end
  else
    local member = ({ multipoint = "points", polyline = "paths", polygon = "rings" })[gtype]
    local list = g[member]
    if type(list) ~= "table" or #list == 0 then
      return invalid("geometry", ("a %s needs a non-empty array %s"):format(gtype, member))
    end
    local bad = bad_coordinate(list, member)
    if bad then return invalid("geometry", ("%s: coordinates must be finite numbers"):format(bad)) end
  end
  return nil
end

-- geometry (an object, its JSON text, or "xmin,ymin,xmax,ymax") and
-- geometryType: returns the geometry to send, its type, or nil, err.
local function encode_geometry(geometry, given_type)
  if geometry == nil then
    if given_type ~= nil then return nil, nil, invalid("geometryType", "is only used with geometry") end
    return nil
  end
  local gtype
  if given_type ~= nil then
    gtype = create_params.geometry_type_of(given_type)
    if not gtype then
      return nil, nil, invalid("geometryType", "must be a point, multipoint, polyline, polygon or envelope type, "
        .. "e.g. esriGeometryEnvelope, got " .. tostring(given_type))
    end
  end
  if type(geometry) == "string" then
    local a, b, c, d = geometry:match("^%s*([^,%s]+)%s*,%s*([^,%s]+)%s*,%s*([^,%s]+)%s*,%s*([^,%s]+)%s*$")
    if a then -- the simple envelope syntax
      local box = { xmin = tonumber(a), ymin = tonumber(b), xmax = tonumber(c), ymax = tonumber(d) }
      if gtype and gtype ~= "envelope" then
        return nil, nil, invalid("geometryType", "must be an envelope type with the xmin,ymin,xmax,ymax syntax")
      end
      local err = check_geometry_object(box, "envelope")
      if err then return nil, nil, err end
      return geometry:gsub("%s", ""), "envelope"
    end
    local decoded = json.decode(geometry)
    if type(decoded) ~= "table" then
      return nil, nil, invalid("geometry", "must be a geometry object, its JSON text, or xmin,ymin,xmax,ymax")
    end
    geometry = decoded
  end
  if type(geometry) ~= "table" or json.is_array(geometry) then
    return nil, nil, invalid("geometry", "must be a geometry object, its JSON text, or xmin,ymin,xmax,ymax")
  end
  local implied = implied_type(geometry)
  if not implied then
    return nil, nil, invalid("geometry", "has none of xmin/ymin/xmax/ymax, x/y, points, paths or rings")
  end
  if gtype and gtype ~= implied then
    return nil, nil, invalid("geometryType", ("says %s but the geometry is a %s"):format(gtype, implied))
  end
  local err = check_geometry_object(geometry, implied)
  if err then return nil, nil, err end
  return geometry, implied
end

-- inSR / replicaSR: a wkid (integer or its text), `{wkid =}` / `{latestWkid =}`
-- / `{wkt =}` or its JSON text.
local function encode_sr(value, name)
  if value == nil then return nil end
  if math.type(value) == "integer" or (type(value) == "number" and math.tointeger(value)) then
    if value <= 0 then return nil, invalid(name, "must be a positive wkid") end
    return math.tointeger(value)
  end
  if type(value) == "string" then
    if value:match("^%d+$") then return math.tointeger(tonumber(value)) end
    local decoded = json.decode(value)
    if type(decoded) ~= "table" then
      return nil, invalid(name, "must be a wkid or a spatial reference object ({wkid =} or {wkt =})")
    end
    value = decoded
  end
  if type(value) ~= "table" then
    return nil, invalid(name, "must be a wkid or a spatial reference object ({wkid =} or {wkt =})")
  end
  local wkid = value.wkid or value.latestWkid
  if wkid ~= nil and math.tointeger(wkid) == nil then return nil, invalid(name, "wkid must be an integer") end
  if wkid == nil and (type(value.wkt) ~= "string" or value.wkt == "") then
    return nil, invalid(name, "a spatial reference object needs wkid, latestWkid or wkt")
  end
  return value
end

--- The layer ids of a `layers` value: an integer, a list of integers, or
-- their text ("0,1" or "[0,1]").
-- @param value the value
-- @treturn[1] table the ids, in the order given
-- @return[2] nil
-- @treturn[2] table err of kind "invalid"
function create_params.layer_ids(value)
  local list = value
  if math.type(value) == "integer" or (type(value) == "number" and math.tointeger(value)) then
    list = { value }
  elseif type(value) == "string" then
    local text = value:match("^%s*%[(.*)%]%s*$") or value
    list = {}
    for item in (text .. ","):gmatch("([^,]*),") do
      local id = item:match("^%s*(%-?%d+)%s*$")
      if not id then
        return nil, invalid("layers", "must be layer ids separated by commas, such as 0,1")
      end
      list[#list + 1] = math.tointeger(tonumber(id))
    end
  elseif type(value) ~= "table" then
    return nil, invalid("layers", "is required: the ids of the layers and tables to replicate, e.g. {0, 1}")
  end
  local n = #list
  for k in pairs(list) do
    if math.type(k) ~= "integer" or k < 1 or k > n then
      return nil, invalid("layers", "must be a list of layer ids without holes")
    end
  end
  for i = 1, n do -- {0, nil, 2} has #t == 3: ipairs would stop at the hole
    if list[i] == nil then return nil, invalid("layers", "must be a list of layer ids without holes") end
  end
  if n == 0 then return nil, invalid("layers", "must name at least one layer") end
  local ids, seen = {}, {}
  for i, id in ipairs(list) do
    local v = math.tointeger(id)
    if v == nil or v < 0 then
      return nil, invalid("layers", ("entry #%d must be a layer id (an integer of at least 0)"):format(i))
    end
    if seen[v] then return nil, invalid("layers", ("layer %d is listed twice"):format(v)) end
    seen[v] = true
    ids[#ids + 1] = v
  end
  return ids
end

-- layerQueries: per layer id, how its rows are chosen.
local function encode_layer_queries(value, layer_set)
  if value == nil then return nil end
  if type(value) == "string" then
    local decoded, msg = json.decode(value)
    if decoded == nil then return nil, invalid("layerQueries", "is not valid JSON: " .. tostring(msg)) end
    value = decoded
  end
  if type(value) ~= "table" or (json.is_array(value) and next(value) ~= nil) then
    return nil, invalid("layerQueries", "must be an object keyed by layer id, e.g. {[0] = {queryOption = \"all\"}}")
  end
  local out = json.object()
  for key, q in pairs(value) do
    local id = math.tointeger(key) or (type(key) == "string" and key:match("^%d+$") and math.tointeger(tonumber(key)))
    if not id then return nil, invalid("layerQueries", ("key %s is not a layer id"):format(tostring(key))) end
    if not layer_set[id] then
      return nil, invalid("layerQueries", ("layer %d is not in layers"):format(id))
    end
    if type(q) ~= "table" then return nil, invalid("layerQueries", ("layer %d: must be an object"):format(id)) end
    local copy = {}
    for k, v in pairs(q) do copy[k] = v end
    if q.queryOption ~= nil then
      local option = type(q.queryOption) == "string" and QUERY_OPTIONS[q.queryOption:lower()]
      if not option then
        return nil, invalid("layerQueries", ("layer %d: queryOption must be all, useFilter or none"):format(id))
      end
      copy.queryOption = option
    end
    if q.where ~= nil and type(q.where) ~= "string" then
      return nil, invalid("layerQueries", ("layer %d: where must be a string"):format(id))
    end
    for _, flag in ipairs{ "useGeometry", "includeRelated" } do
      if q[flag] ~= nil and type(q[flag]) ~= "boolean" then
        return nil, invalid("layerQueries", ("layer %d: %s must be true or false"):format(id, flag))
      end
    end
    out[tostring(id)] = copy
  end
  return out
end

--- Validates `params` and returns the form fields to send and what the
-- operation needs to know, or nil, err.
-- @tparam table params createReplica's parameters
-- @string prefix the vendor prefix of enumerated values ("svc" by default)
-- @treturn[1] table the fields (a copy; unknown parameters as given)
-- @treturn[1] table `{layers = {ids}, model =, direction =, async =, transport =, data_format =}`
--   (nil members where the caller did not say)
-- @return[2] nil
-- @treturn[2] table err of kind "invalid" naming the parameter
-- @raise when params is not a table
function create_params.encode(params, prefix)
  if type(params) ~= "table" then error("create_replica: params must be a table", 3) end
  local fields = {}
  for k, v in pairs(params) do fields[k] = v end
  local plan = {}

  if params.replicaName ~= nil and (type(params.replicaName) ~= "string" or params.replicaName == "") then
    return nil, invalid("replicaName", "must be a non-empty string")
  end
  local ids, err = create_params.layer_ids(params.layers)
  if not ids then return nil, err end
  plan.layers = ids
  local set = {}
  for _, id in ipairs(ids) do set[id] = true end
  local text = {}
  for i, id in ipairs(ids) do text[i] = tostring(id) end
  fields.layers = table.concat(text, ",")

  for _, name in ipairs(BOOLEANS) do
    if params[name] ~= nil and type(params[name]) ~= "boolean" then
      return nil, invalid(name, "must be true or false, got " .. type(params[name]))
    end
  end
  plan.async = params.async

  if params.syncModel ~= nil then
    local model = type(params.syncModel) == "string" and MODELS[params.syncModel:lower()]
    if not model then
      return nil, invalid("syncModel", ("must be perReplica or perLayer, got %s (a replica of model none "
        .. "cannot be synchronized)"):format(tostring(params.syncModel)))
    end
    fields.syncModel, plan.model = model, model
  end
  if params.syncDirection ~= nil then
    local dir = type(params.syncDirection) == "string" and params.syncDirection:lower()
    if not DIRECTIONS[dir] then
      return nil, invalid("syncDirection", ("must be bidirectional, upload or download, got %s (snapshot is a "
        .. "direction of synchronizeReplica)"):format(tostring(params.syncDirection)))
    end
    fields.syncDirection, plan.direction = dir, dir
  end
  if params.targetType ~= nil then
    if type(params.targetType) ~= "string" or not TARGETS[params.targetType:lower()] then
      return nil, invalid("targetType", "must be client or server, got " .. tostring(params.targetType))
    end
    fields.targetType = params.targetType:lower()
  end

  local transport = sync_params.transport_of(params.transportType or "url")
  if not transport then
    return nil, invalid("transportType", ("must be %sTransportTypeUrl or %sTransportTypeEmbedded, got %s"):format(
      prefix, prefix, tostring(params.transportType)))
  end
  plan.transport = transport
  local given = (params.transportType or "url"):lower()
  if given == transport or given:sub(1, 3) == "svc" then
    fields.transportType = prefix .. (transport == "url" and "TransportTypeUrl" or "TransportTypeEmbedded")
  end

  local data_format = params.dataFormat or "json"
  if data_format ~= "json" and data_format ~= "sqlite" then
    return nil, invalid("dataFormat", "must be json or sqlite, got " .. tostring(params.dataFormat))
  end
  fields.dataFormat, plan.data_format = data_format, data_format

  local geometry, gtype, geom_err = encode_geometry(params.geometry, params.geometryType)
  if geom_err then return nil, geom_err end
  fields.geometry = geometry
  if gtype then
    local given_type = params.geometryType
    if type(given_type) == "string" and given_type:lower():match("geometry%a+$")
      and given_type:lower():sub(1, 3) ~= "svc" then
      fields.geometryType = given_type -- a vendor's own spelling, verbatim
    else
      fields.geometryType = prefix .. "Geometry" .. GEOMETRY_TYPES[gtype]
    end
  end
  for _, name in ipairs{ "inSR", "replicaSR" } do
    local sr, sr_err = encode_sr(params[name], name)
    if sr_err then return nil, sr_err end
    fields[name] = sr
  end
  if params.inSR ~= nil and geometry == nil then return nil, invalid("inSR", "is only used with geometry") end

  local queries, q_err = encode_layer_queries(params.layerQueries, set)
  if q_err then return nil, q_err end
  fields.layerQueries = queries
  return fields, plan
end

return create_params
