--- The emulator's feature service and layer resources
-- (`{service}/FeatureServer?f=json`, `{service}/FeatureServer/{id}?f=json`)
-- in the vendor's shapes: the service's layers and tables, whether sync is
-- enabled and its sync capabilities, each layer's fields with their types,
-- geometry type, extent and spatial reference, object id and global id
-- fields.
--
-- What the world file says wins: per service `spatialReference`,
-- `syncCapabilities` (each member overrides the defaults below: a service
-- without per-replica sync says `"supportsPerReplicaSync": false`),
-- `description`; per layer `geometryType`, `fields`, `displayField`,
-- `type` ("Table" for a table), `hasAttachments`, `relationships`, `hasZ`, `hasM`, `editFieldsInfo` (the
-- editor tracking fields: creationDateField, creatorField, editDateField, editorField). A layer without `fields`
-- gets them from its features (OBJECTID, GlobalID, then each attribute with
-- the type its values have); one without `geometryType` from its first
-- geometry; one without `hasZ` / `hasM` from what its geometries hold
-- (metadata.zm).
local answers = require "geoservices.emulator.answers"
local auth = require "geoservices.emulator.auth"
local json = require "geoservices.base.json"
local world = require "geoservices.emulator.world"

local metadata = {}

metadata.VERSION = 11.3

--- The sync capabilities of a service that does not state them.
metadata.DEFAULT_SYNC_CAPABILITIES = {
  supportsRegisteringExistingData = true, supportsSyncDirectionControl = true, supportsPerLayerSync = true,
  supportsPerReplicaSync = true, supportsSyncModelNone = true, supportsRollbackOnFailure = true,
  supportsAsync = true, supportsAttachmentsSyncDirection = true, supportsBiDirectionalSyncForServer = true,
}

local DEFAULT_SR = { wkid = 4326, latestWkid = 4326 }

local error_body = answers.error_body

--- A token is optional for feature services, but one that is sent must be valid.
function metadata.check_token(emu, request)
  local form = request.form or {}
  if auth.token_of(form, request) == nil then return nil end
  local _, denied = auth.user(emu.world, form, request)
  return denied
end

--- The feature service a request names, its token checked first (@{check_token}).
-- @return the service, or nil and the answer: the token's refusal, or 404 naming the service
function metadata.service(emu, request, service_name)
  local denied = metadata.check_token(emu, request)
  if denied then return nil, denied end
  local svc = emu.world.feature_services[service_name]
  if not svc then return nil, error_body(404, ("Service %s/FeatureServer not found."):format(service_name)) end
  return svc
end

--- The user of the request's token, or nil.
function metadata.user_of(emu, request)
  if auth.token_of(request.form or {}, request) == nil then return nil end
  return (auth.user(emu.world, request.form or {}, request))
end

local function has_capability(svc, cap)
  for c in (svc.capabilities or ""):gmatch("[^,%s]+") do
    if c:lower() == cap:lower() then return true end
  end
  return false
end
metadata.has_capability = has_capability

-- Settings that set one sync capability of every service (emulator.settings).
local CAPABILITY_SETTINGS = {
  supports_per_replica_sync = "supportsPerReplicaSync", supports_per_layer_sync = "supportsPerLayerSync",
  supports_async = "supportsAsync", supports_sync_direction_control = "supportsSyncDirectionControl",
}

--- The service's sync capabilities: the defaults, overridden by the world
-- file's, overridden by the emulator's settings `s` (optional): the
-- capability set the emulator then honours (replicas.plan, create.plan).
-- supports_rollback_on_failure only turns supportsRollbackOnFailure off.
function metadata.sync_capabilities(svc, s)
  local caps = {}
  for k, v in pairs(metadata.DEFAULT_SYNC_CAPABILITIES) do caps[k] = v end
  for k, v in pairs(svc.meta and svc.meta.syncCapabilities or {}) do caps[k] = v end
  if s and s.supports_rollback_on_failure == false then caps.supportsRollbackOnFailure = false end
  for name, cap in pairs(CAPABILITY_SETTINGS) do
    if s and s[name] ~= nil then caps[cap] = s[name] end
  end
  return caps
end

function metadata.spatial_reference(svc)
  return world.deep_copy(svc.meta and svc.meta.spatialReference or DEFAULT_SR)
end

-- ------------------------------------------------------------- geometry

local GEOMETRY_OF = { x = "esriGeometryPoint", points = "esriGeometryMultipoint", paths = "esriGeometryPolyline",
                      rings = "esriGeometryPolygon" }

--- The bounding box of a geometry: xmin, ymin, xmax, ymax, or nil (none, or empty).
function metadata.bbox(g)
  if type(g) ~= "table" then return nil end
  local xmin, ymin, xmax, ymax
  local function add(x, y)
    if type(x) ~= "number" or type(y) ~= "number" then return end
    if not xmin then xmin, ymin, xmax, ymax = x, y, x, y return end
    if x < xmin then xmin = x end
    if y < ymin then ymin = y end
    if x > xmax then xmax = x end
    if y > ymax then ymax = y end
  end
  if g.xmin ~= nil then
    add(g.xmin, g.ymin)
    add(g.xmax, g.ymax)
  elseif g.x ~= nil then
    add(g.x, g.y)
  else
    local function walk(list)
      for _, v in ipairs(type(list) == "table" and list or {}) do
        if type(v) == "table" and type(v[1]) == "number" then add(v[1], v[2]) else walk(v) end
      end
    end
    walk(g.points or g.paths or g.rings)
  end
  if not xmin then return nil end
  return xmin, ymin, xmax, ymax
end

--- The geometry type of a layer (the world file's, else its first geometry's).
function metadata.geometry_type(layer)
  local meta = layer.meta or {}
  if meta.type == "Table" then return nil end
  if meta.geometryType then return meta.geometryType end
  for _, f in pairs(layer.features) do
    if type(f.geometry) == "table" then
      for member, gtype in pairs(GEOMETRY_OF) do
        if f.geometry[member] ~= nil then return gtype end
      end
    end
  end
  return "esriGeometryPoint"
end

-- The ordinates one Esri JSON geometry holds beyond x and y: z, m (booleans).
-- A point names them (`z`, `m`); other geometries say so with their own
-- `hasZ` / `hasM`, else their coordinates show it: `[x, y, z, m]` in that
-- order, a third number alone being the Z (the vendor's Geometry objects,
-- https://developers.arcgis.com/documentation/common-data-types/geometry-objects.htm).
local function geometry_zm(g)
  if type(g) ~= "table" then return false, false end
  if g.x ~= nil then return type(g.z) == "number", type(g.m) == "number" end
  if g.hasZ ~= nil or g.hasM ~= nil then return g.hasZ == true, g.hasM == true end
  local most = 0
  local function walk(list)
    for _, v in ipairs(type(list) == "table" and list or {}) do
      if type(v) == "table" and type(v[1]) == "number" then
        local n = 2
        for i = 3, 4 do if type(v[i]) == "number" then n = i end end
        if n > most then most = n end
      elseif type(v) == "table" then
        walk(v)
      end
    end
  end
  walk(g.points or g.paths or g.rings)
  return most >= 3, most >= 4
end

--- Whether a layer's geometries have Z and M values: the world file's
-- `hasZ` / `hasM` for the layer when it gives them (a service may declare
-- less than its data holds), else whether any of its features' geometries
-- holds them. A table has neither.
-- @treturn boolean hasZ
-- @treturn boolean hasM
function metadata.zm(layer)
  local meta = layer.meta or {}
  if meta.type == "Table" then return false, false end
  local has_z, has_m = meta.hasZ, meta.hasM
  if has_z == nil or has_m == nil then
    local any_z, any_m = false, false
    for _, f in pairs(layer.features) do
      local z, m = geometry_zm(f.geometry)
      any_z, any_m = any_z or z, any_m or m
    end
    if has_z == nil then has_z = any_z end
    if has_m == nil then has_m = any_m end
  end
  return has_z == true, has_m == true
end

local function is_table(layer)
  return (layer.meta and layer.meta.type == "Table") or false
end
metadata.is_table = is_table

-- The extent of a layer's live features (or of every layer of a service).
local function extent(layers, sr)
  local xmin, ymin, xmax, ymax
  for _, layer in ipairs(layers) do
    for _, f in pairs(layer.features) do
      if not f.deleted then
        local a, b, c, d = metadata.bbox(f.geometry)
        if a then
          xmin, ymin = math.min(xmin or a, a), math.min(ymin or b, b)
          xmax, ymax = math.max(xmax or c, c), math.max(ymax or d, d)
        end
      end
    end
  end
  if not xmin then xmin, ymin, xmax, ymax = 0, 0, 0, 0 end
  return { xmin = xmin, ymin = ymin, xmax = xmax, ymax = ymax, spatialReference = sr }
end

-- ------------------------------------------------------------- fields

local function field(name, ftype, extra)
  local f = { name = name, type = ftype, alias = name, domain = json.null, editable = true, nullable = true,
              defaultValue = json.null, modelName = name }
  for k, v in pairs(extra or {}) do f[k] = v end
  return f
end

--- The fields of a layer: the world file's, else inferred from its features.
function metadata.fields(layer)
  local meta = layer.meta or {}
  if type(meta.fields) == "table" then
    local out = json.array()
    for i, f in ipairs(meta.fields) do
      local copy = field(f.name, f.type)
      for k, v in pairs(f) do copy[k] = v end
      out[i] = copy
    end
    return out
  end
  local kinds = {}
  for _, f in pairs(layer.features) do
    for k, v in pairs(f.attributes or {}) do
      if k ~= "OBJECTID" and k ~= "GlobalID" then
        local kind = kinds[k]
        if math.type(v) == "integer" then kind = (kind == nil or kind == "integer") and "integer" or kind
        elseif type(v) == "number" then
          kind = (kind == nil or kind == "integer" or kind == "double") and "double" or kind
        elseif type(v) == "string" then kind = "string"
        elseif type(v) == "boolean" then kind = kind or "boolean" end
        kinds[k] = kind
      end
    end
  end
  local names = {}
  for k in pairs(kinds) do names[#names + 1] = k end
  table.sort(names)
  local out = json.array{
    field("OBJECTID", "esriFieldTypeOID", { editable = false, nullable = false }),
    field("GlobalID", "esriFieldTypeGlobalID", { length = 38, editable = false, nullable = false }),
  }
  local TYPES = { integer = "esriFieldTypeInteger", double = "esriFieldTypeDouble", string = "esriFieldTypeString",
                  boolean = "esriFieldTypeSmallInteger" }
  for _, name in ipairs(names) do
    local kind = kinds[name] or "string"
    out[#out + 1] = field(name, TYPES[kind], kind == "string" and { length = 255 } or nil)
  end
  return out
end

local function field_of_type(fields, ftype, default)
  for _, f in ipairs(fields) do
    if f.type == ftype then return f.name end
  end
  return default
end

-- ------------------------------------------------------------- resources

local function sorted_layers(svc)
  local out = {}
  for _, id in ipairs(svc.layer_ids) do out[#out + 1] = svc.layers[id] end
  return out
end

--- The service resource.
function metadata.service_resource(emu, request, service_name)
  local svc, refused = metadata.service(emu, request, service_name)
  if not svc then return refused end
  local sr = metadata.spatial_reference(svc)
  local layers, tables = json.array(), json.array()
  for _, layer in ipairs(sorted_layers(svc)) do
    local entry = { id = layer.id, name = layer.name, parentLayerId = -1, defaultVisibility = true,
                    subLayerIds = json.null, minScale = 0, maxScale = 0 }
    if is_table(layer) then
      tables[#tables + 1] = { id = layer.id, name = layer.name }
    else
      entry.geometryType = metadata.geometry_type(layer)
      layers[#layers + 1] = entry
    end
  end
  local sync_enabled = has_capability(svc, "Sync")
  local full = extent(sorted_layers(svc), sr)
  local doc = {
    currentVersion = metadata.VERSION,
    serviceDescription = svc.meta and svc.meta.description or "",
    description = svc.meta and svc.meta.description or "",
    copyrightText = "",
    hasVersionedData = false,
    supportsDisconnectedEditing = sync_enabled,
    supportsApplyEditsWithGlobalIds = true,
    syncEnabled = sync_enabled,
    supportedQueryFormats = "JSON",
    maxRecordCount = 2000,
    capabilities = svc.capabilities,
    spatialReference = sr,
    initialExtent = full,
    fullExtent = world.deep_copy(full),
    allowGeometryUpdates = true,
    units = (sr.wkid == 4326) and "esriDecimalDegrees" or "esriMeters",
    syncRowsMovedOutsideFilter = false,
    documentInfo = { Title = service_name, Author = "", Comments = "", Subject = "", Category = "", Keywords = "" },
    layers = layers,
    tables = tables,
    enableZDefaults = false,
    zDefault = 0,
  }
  if sync_enabled then doc.syncCapabilities = metadata.sync_capabilities(svc, emu.settings) end
  return doc
end

-- The relationship classes a layer or table takes part in, as its resource
-- lists them: one entry per relationship, on both sides (the origin with
-- role esriRelRoleOrigin and its own key field, the destination with
-- esriRelRoleDestination and its foreign key), each with id, name,
-- relatedTableId, cardinality, role, keyField and composite (the vendor's
-- "Layer / Table" resource of the feature service REST API,
-- https://developers.arcgis.com/rest/services-reference/enterprise/layer-feature-service/,
-- and the members the ArcGIS Maps SDK's Relationship class reads from it,
-- Esri/arcgis-js-api layers/support/Relationship.js). The world file gives
-- them per layer as `relationships`; a layer without has none.
local function relationships(meta)
  local out = json.array()
  for i, r in ipairs(type(meta.relationships) == "table" and meta.relationships or {}) do
    out[i] = world.deep_copy(r)
  end
  return out
end

--- The layer (or table) resource.
function metadata.layer_resource(emu, request, service_name, id_text)
  local svc, refused = metadata.service(emu, request, service_name)
  if not svc then return refused end
  local id = math.tointeger(tonumber(id_text))
  local layer = id and svc.layers[id]
  if not layer then
    return error_body(400, "Invalid or missing input parameters.", { ("Layer %s does not exist."):format(id_text) })
  end
  local meta = layer.meta or {}
  local fields = metadata.fields(layer)
  local sr = metadata.spatial_reference(svc)
  local table_ = is_table(layer)
  local has_attachments = meta.hasAttachments
  if has_attachments == nil then has_attachments = next(layer.attachments) ~= nil end
  local doc = {
    currentVersion = metadata.VERSION,
    id = layer.id,
    name = layer.name,
    type = table_ and "Table" or "Feature Layer",
    description = meta.description or "",
    copyrightText = "",
    parentLayer = json.null,
    subLayers = json.array(),
    minScale = 0, maxScale = 0,
    defaultVisibility = true,
    hasAttachments = has_attachments,
    htmlPopupType = "esriServerHTMLPopupTypeAsHTMLText",
    displayField = meta.displayField or "",
    typeIdField = json.null,
    fields = fields,
    indexes = json.array(),
    relationships = relationships(meta),
    capabilities = svc.capabilities,
    maxRecordCount = 2000,
    supportedQueryFormats = "JSON",
    isDataVersioned = false,
    supportsRollbackOnFailureParameter = metadata.sync_capabilities(svc, emu.settings).supportsRollbackOnFailure,
    syncCanReturnChanges = true,
    allowGeometryUpdates = true,
    objectIdField = field_of_type(fields, "esriFieldTypeOID", "OBJECTID"),
    globalIdField = field_of_type(fields, "esriFieldTypeGlobalID", "GlobalID"),
    types = json.array(),
    templates = json.array(),
  }
  doc.hasZ, doc.hasM = metadata.zm(layer)
  -- editor tracking, as a layer resource that keeps it names its fields (null without)
  doc.editFieldsInfo = type(meta.editFieldsInfo) == "table" and world.deep_copy(meta.editFieldsInfo) or json.null
  if not table_ then
    -- the spatial reference is the extent's (and the source's), as real layer resources give it
    doc.geometryType = metadata.geometry_type(layer)
    doc.extent = extent({ layer }, sr)
    doc.sourceSpatialReference = world.deep_copy(sr)
    doc.geometryField = { name = "Shape", type = "esriFieldTypeGeometry", alias = "Shape" }
    -- the world's own drawingInfo where it gives one (its renderer and labels, as a
    -- real layer resource serves them), else a simple renderer without symbol
    doc.drawingInfo = type(meta.drawingInfo) == "table" and world.deep_copy(meta.drawingInfo)
      or { renderer = { type = "simple" }, transparency = 0, labelingInfo = json.null }
  end
  return doc
end

--- The service's `layers` resource ("All Layers and Tables",
-- `{service}/FeatureServer/layers`: every layer's and table's resource in
-- one answer, `{layers = [...], tables = [...]}`, as the vendor documents
-- it, https://developers.arcgis.com/rest/services-reference/enterprise/all-layers-and-tables/
-- and as ArcGIS REST JS's getAllLayersAndTables reads it).
function metadata.layers_resource(emu, request, service_name)
  local svc, refused = metadata.service(emu, request, service_name)
  if not svc then return refused end
  local layers, tables = json.array(), json.array()
  for _, layer in ipairs(sorted_layers(svc)) do
    local doc = metadata.layer_resource(emu, request, service_name, tostring(layer.id))
    if is_table(layer) then tables[#tables + 1] = doc else layers[#layers + 1] = doc end
  end
  return { layers = layers, tables = tables }
end

return metadata
