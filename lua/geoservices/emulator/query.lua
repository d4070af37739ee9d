--- The layer query operation, `<service>/FeatureServer/<layer>/query`
-- (GET or POST), which the real server has on every layer and a client uses
-- to learn whether an edit whose outcome it does not know reached the
-- server. What it reads:
--
-- * `where`: `1=1`; `<field> IN ('a', 'b', ...)` (any case; a GlobalID
--   matches with or without braces and in any letter case, as the server's
--   GUID fields do); or comparisons joined by AND (emulator.create's reading:
--   `FIELD op literal`, `FIELD IS [NOT] NULL`);
-- * `objectIds` (comma-separated), combined with `where` by AND;
-- * `outFields`: `*` or a comma-separated list (any case); OBJECTID is
--   always answered, and alone when outFields is absent ("If there are no
--   OutFields specified, then only the OBJECTID field will be returned. The
--   OBJECTID field is always returned", https://resources.arcgis.com/en/help/
--   windows-phone-sdk/apiref/ESRI.ArcGIS.Client~ESRI.ArcGIS.Client.FeatureLayer~OutFields.html);
-- * `returnGeometry`: true (default) or false; `f`: json.
--
-- The answer: `{objectIdFieldName, globalIdFieldName, geometryType,
-- spatialReference, fields, features: [{attributes, geometry}]}` with the
-- features in OBJECTID order; deleted features are absent. A token is
-- optional, but one that is sent must be valid (as for synchronizeReplica).
local answers = require "geoservices.emulator.answers"
local create = require "geoservices.emulator.create"
local json = require "geoservices.base.json"
local metadata = require "geoservices.emulator.metadata"
local world = require "geoservices.emulator.world"

local query = {}

local error_body = answers.error_body

local function invalid(detail)
  return error_body(400, "Unable to complete operation.", { detail })
end

-- A GUID as compared: upper case, without braces.
local function guid_key(s)
  return (tostring(s):upper():gsub("[{}]", ""))
end

-- The values of an IN list: quoted strings ('' escapes a quote) or numbers;
-- nil when it is not such a list.
local function in_values(text)
  local values, i, n = {}, 1, #text
  local function skip() i = text:find("[^%s]", i) or n + 1 end
  skip()
  if i > n then return values end
  while true do
    local value
    if text:sub(i, i) == "'" then
      local parts = {}
      i = i + 1
      while true do
        local j = text:find("'", i, true)
        if not j then return nil end
        parts[#parts + 1] = text:sub(i, j - 1)
        if text:sub(j + 1, j + 1) ~= "'" then
          i = j + 1
          break
        end
        parts[#parts + 1] = "'"
        i = j + 2
      end
      value = table.concat(parts)
    else
      local literal = text:match("^[^,%s]+", i)
      value = literal and tonumber(literal)
      if value == nil then return nil end
      i = i + #literal
    end
    values[#values + 1] = value
    skip()
    if i > n then return values end
    if text:sub(i, i) ~= "," then return nil end
    i = i + 1
    skip()
    if i > n then return nil end -- a trailing comma
  end
end

-- A where clause as a test of a feature's attributes, or nil, message.
local function parse_where(text)
  if text == nil or text:match("^%s*$") or text:match("^%s*1%s*=%s*1%s*$") then
    return function() return true end
  end
  local field, list = text:match("^%s*([%a_][%w_]*)%s+[Ii][Nn]%s*(%b())%s*$")
  if field then
    local values = in_values(list:sub(2, -2))
    if not values then return nil, "cannot read the IN list of " .. text end
    local guid = field:lower() == "globalid"
    local wanted = {}
    for _, v in ipairs(values) do wanted[guid and guid_key(v) or v] = true end
    return function(attrs)
      local v = create.attribute(attrs, field)
      if v == nil or v == json.null then return false end
      return wanted[guid and guid_key(v) or v] == true
    end
  end
  local tests, err = create.parse_where(text)
  if not tests then return nil, err end
  return function(attrs) return create.passes(tests, attrs) end
end

local function object_ids(text)
  if text == nil or text:match("^%s*$") then return nil end
  local ids = {}
  for item in (text .. ","):gmatch("([^,]*),") do
    local id = math.tointeger(tonumber(item))
    if not id then return nil, "objectIds must be integers separated by commas" end
    ids[id] = true
  end
  return ids
end

-- The attributes to answer: all for `*`, else the fields asked for (names
-- in any case) plus OBJECTID.
local function pick_fields(attrs, out_fields)
  if out_fields and out_fields:match("^%s*%*%s*$") then return json.object(world.deep_copy(attrs)) end
  local out = json.object()
  local wanted = { objectid = true }
  for name in (out_fields or ""):gmatch("[^,%s]+") do wanted[name:lower()] = true end
  for k, v in pairs(attrs) do
    if type(k) == "string" and wanted[k:lower()] then out[k] = world.deep_copy(v) end
  end
  return out
end

--- GET/POST {service}/FeatureServer/{layer}/query
function query.handler(emu, request, service_name, id_text)
  local svc, refused = metadata.service(emu, request, service_name)
  if not svc then return refused end
  local id = math.tointeger(tonumber(id_text))
  local layer = id and svc.layers[id]
  if not layer then return invalid(("Layer %s does not exist."):format(id_text)) end
  local form = request.form
  local matches, where_err = parse_where(form.where)
  if not matches then return invalid("where: " .. where_err) end
  local oids, oid_err = object_ids(form.objectIds)
  if oid_err then return invalid(oid_err) end
  local return_geometry = (form.returnGeometry or "true"):lower() ~= "false"
  local chosen = {}
  for _, f in pairs(layer.features) do
    if not f.deleted and matches(f.attributes) and (not oids or oids[f.attributes.OBJECTID]) then
      chosen[#chosen + 1] = f
    end
  end
  table.sort(chosen, function(a, b) return a.attributes.OBJECTID < b.attributes.OBJECTID end)
  local features = json.array()
  for i, f in ipairs(chosen) do
    local out = { attributes = pick_fields(f.attributes, form.outFields) }
    if return_geometry and not metadata.is_table(layer) then out.geometry = world.deep_copy(f.geometry) end
    features[i] = out
  end
  local doc = {
    objectIdFieldName = "OBJECTID",
    globalIdFieldName = "GlobalID",
    fields = metadata.fields(layer),
    features = features,
  }
  if not metadata.is_table(layer) then
    doc.geometryType = metadata.geometry_type(layer)
    doc.spatialReference = metadata.spatial_reference(svc)
  end
  return doc
end

return query
