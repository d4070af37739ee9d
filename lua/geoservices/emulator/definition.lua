--- A feature service layer's schema changed at run time, as its owner or an
-- administrator changes it: the administrative layer resource's
-- addToDefinition, deleteFromDefinition and updateDefinition operations
-- (the vendor's "Add To Definition (Feature Layer)",
-- https://developers.arcgis.com/rest/services-reference/enterprise/add-to-definition-feature-layer/,
-- "Delete From Definition (Feature Layer)" .../delete-from-definition-feature-layer/ and
-- "Update Definition (Feature Layer)" .../update-definition-feature-layer/), at
-- `{admin}/services/<service>.FeatureServer/<layer>/<operation>` (ArcGIS
-- Server's spelling) and `{admin}/services/<service>/FeatureServer/<layer>/<operation>`
-- (a hosted service's). The form parameter of the operation's own name holds
-- the JSON: `{"fields": [...]}`, a field whole to add, a field's name to
-- delete, a field's name and the properties to change (alias, domain,
-- length, nullable, editable, defaultValue); other members of an update
-- (displayField, drawingInfo...) replace the layer resource's. The answer
-- is `{"success": true}`, an error body otherwise. An administrator's token
-- is required (as getServicesById).
--
-- Effects: the layer resource (`<service>/FeatureServer/<layer>`, and the
-- service's `layers` resource) describes the new fields; each feature gets
-- an added field (its defaultValue, else null) or loses a deleted one;
-- query, sync and edits use the new definition from then on (an edit
-- carrying a deleted field does not bring it back; an add without an added
-- field gets its default: emulator.import).
--
-- Existing replicas: the vendor's pages on these operations and on sync
-- (sync overview, createReplica, synchronizeReplica) say nothing of
-- replicas made before a schema change; a replica stays registered and
-- keeps synchronizing. The emulator does the same, and a change of schema
-- is not a change of data: it moves no generation and a sync's download
-- carries only the features edited since the client's generation — with
-- every field the layer now has (a feature export is the feature's
-- attributes as they are). A client learns of the change from the layer
-- resource and reads an added field's values for the features it did not
-- download with `query` (geoservices.store.sync.server_schema does).
-- @module geoservices.emulator.definition
-- @local
local answers = require "geoservices.emulator.answers"
local auth = require "geoservices.emulator.auth"
local json = require "geoservices.base.json"
local metadata = require "geoservices.emulator.metadata"
local world = require "geoservices.emulator.world"

local definition = {}

local error_body = answers.error_body

local function refuse(detail)
  return error_body(400, "Unable to update feature service layer definition.", { detail })
end

local function is_null(v) return v == nil or v == json.null end

-- The layer's declared fields, made explicit first when they were inferred
-- from its features (metadata.fields), so that a change has a list to change.
local function declared(layer)
  layer.meta = layer.meta or {}
  if type(layer.meta.fields) ~= "table" then
    local list = {}
    for i, f in ipairs(metadata.fields(layer)) do list[i] = f end
    layer.meta.fields = list
  end
  return layer.meta.fields
end

local function index_of(fields, name)
  for i, f in ipairs(fields) do
    if type(f.name) == "string" and f.name:lower() == name:lower() then return i end
  end
end

-- Each feature's attributes changed by `fn(attrs)`: entries replaced, never
-- changed in place (the state file finds changes by identity).
local function each_feature(layer, fn)
  local replaced = {}
  for gid, f in pairs(layer.features) do
    local copy = world.deep_copy(f)
    copy.attributes = copy.attributes or {}
    fn(copy.attributes)
    replaced[gid] = copy
  end
  for gid, f in pairs(replaced) do layer.features[gid] = f end
end

local SYSTEM = { esriFieldTypeOID = true, esriFieldTypeGlobalID = true }

local function add(layer, def)
  local fields, names = declared(layer), {}
  for _, f in ipairs(def.fields or {}) do
    if type(f) ~= "table" or type(f.name) ~= "string" or f.name == "" or type(f.type) ~= "string" then
      return refuse("A field to add needs a name and a type.")
    end
    if index_of(fields, f.name) or names[f.name:lower()] then
      return refuse(("Field %s already exists."):format(f.name))
    end
    names[f.name:lower()] = true
  end
  for _, f in ipairs(def.fields or {}) do
    local copy = world.deep_copy(f)
    if copy.alias == nil then copy.alias = copy.name end
    if copy.nullable == nil then copy.nullable = true end
    if copy.editable == nil then copy.editable = true end
    fields[#fields + 1] = copy
    local value = f.defaultValue
    if is_null(value) or type(value) == "string" and value:find("^GetDate%(") then value = json.null end
    each_feature(layer, function(attrs) attrs[f.name] = world.deep_copy(value) end)
  end
  return true
end

local function delete(layer, def)
  local fields = declared(layer)
  for _, f in ipairs(def.fields or {}) do
    local i = type(f) == "table" and type(f.name) == "string" and index_of(fields, f.name)
    if not i then return refuse(("Field %s does not exist."):format(tostring(type(f) == "table" and f.name))) end
    if SYSTEM[fields[i].type] then
      return refuse(("Field %s cannot be deleted: a sync-enabled layer needs it."):format(fields[i].name))
    end
  end
  for _, f in ipairs(def.fields or {}) do
    local i = index_of(fields, f.name)
    local name = fields[i].name
    table.remove(fields, i)
    each_feature(layer, function(attrs) attrs[name] = nil end)
  end
  return true
end

-- The properties of an existing field an update changes. Its type is not one
-- of them: the vendor's "Update Definition (Feature Layer)" page
-- (https://developers.arcgis.com/rest/services-reference/enterprise/update-definition-feature-layer/)
-- shows a field's domain and alias ("Example six") and its other properties
-- changed, never its type, and the vendor's own clients say so outright ("You
-- cannot update an existing field's field type", ArcGIS for AutoCAD's
-- FieldDefinition.Set and esri_fielddef_set,
-- https://doc.arcgis.com/en/arcgis-for-autocad/latest/commands-api/fielddefinitionset-net.htm); a
-- text field's length is changed (the same client sets "the field length for
-- text fields only"; the emulator takes it for any field, and keeps the
-- values: a shorter one cuts none). A type is changed by deleting the field and adding it again with
-- the new type (its values then gone: each feature gets the new field's
-- default), as administrators of hosted layers do; a store takes either
-- (geoservices.store.sync.server_schema).
local CHANGEABLE = { alias = true, domain = true, length = true, nullable = true, editable = true, defaultValue = true }

local function update(layer, def)
  local fields = declared(layer)
  for _, f in ipairs(type(def.fields) == "table" and def.fields or {}) do
    if type(f) ~= "table" or type(f.name) ~= "string" or not index_of(fields, f.name) then
      return refuse(("Field %s does not exist."):format(tostring(type(f) == "table" and f.name)))
    end
    for k in pairs(f) do
      if k ~= "name" and not CHANGEABLE[k] then
        return refuse(("Property %s of field %s cannot be updated."):format(tostring(k), f.name))
      end
    end
  end
  for _, f in ipairs(type(def.fields) == "table" and def.fields or {}) do
    local i = index_of(fields, f.name)
    local copy = world.deep_copy(fields[i])
    for k, v in pairs(f) do
      if k ~= "name" then copy[k] = world.deep_copy(v) end
    end
    fields[i] = copy
  end
  for k, v in pairs(def) do
    if k ~= "fields" and k ~= "id" and k ~= "name" then layer.meta[k] = world.deep_copy(v) end
  end
  return true
end

local OPERATIONS = { addToDefinition = add, deleteFromDefinition = delete, updateDefinition = update }
definition.OPERATIONS = OPERATIONS

--- The handler of `{admin}/services/<service>[./]FeatureServer/<layer>/<operation>`.
function definition.handler(emu, request, service_name, id_text, operation)
  local user, denied = auth.user(emu.world, request.form, request)
  if not user then return denied end
  if not auth.is_administrator(user) then return auth.forbidden() end
  local apply = OPERATIONS[operation]
  if not apply then return error_body(404, ("Operation %s does not exist."):format(operation)) end
  local svc = emu.world.feature_services[service_name]
  if not svc then return error_body(404, ("Service %s.FeatureServer does not exist."):format(service_name)) end
  local layer = svc.layers[math.tointeger(tonumber(id_text)) or -1]
  if not layer then return refuse(("Layer %s does not exist."):format(id_text)) end
  local text = request.form[operation]
  if text == nil or text == "" then return refuse(("'%s' parameter is required."):format(operation)) end
  local def = json.decode(text)
  if type(def) ~= "table" or (def.fields ~= nil and type(def.fields) ~= "table") then
    return refuse(("'%s' is not a JSON object with a fields list."):format(operation))
  end
  -- checked whole before anything changes: a refused request changes nothing
  local before = world.deep_copy(layer.meta)
  local ok, err = pcall(apply, layer, def)
  if not ok or ok and err ~= true then
    layer.meta = before
    if not ok then error(err, 0) end
    return err
  end
  -- edits follow the new definition from now on (emulator.import)
  layer.meta.definition_changed = true
  if emu.settings.schema_change_touches_features and operation ~= "updateDefinition" then
    -- the other answer (emulator.settings): every feature updated in a new generation
    svc.gen = svc.gen + 1
    local gids = {}
    for gid, f in pairs(layer.features) do
      if not f.deleted then gids[#gids + 1] = gid end
    end
    table.sort(gids)
    for _, gid in ipairs(gids) do
      svc.log[#svc.log + 1] = { gen = svc.gen, layer = layer.id, target = "features", globalId = gid, op = "update",
                                origin = "schema" }
    end
  end
  return { success = true }
end

return definition
