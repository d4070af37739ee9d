--- The replica store's features: reading them (`st:get`, `st:count`) and
-- the local edits (`st:add`, `st:update`, `st:delete`), each written to the
-- feature table, where its capture triggers queue it
-- (geoservices.store.edits.capture) exactly as they queue an edit made in QGIS.
-- These are methods of the Store (geoservices.store), which attaches them
-- (its METHODS): call them on a store, `st:add(0, feature)`.
-- @module geoservices.store.edits.features
local edits = require "geoservices.sync.edits"
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"
local schema = require "geoservices.store.file.schema"
local shared = require "geoservices.store.shared"
local unrepresentable = require "geoservices.store.file.unrepresentable"

local db_error, layer_of, normalize_gid = shared.db_error, shared.layer_of, shared.normalize_gid

--- The methods of a replica store (geoservices.store) that read its
-- features and make local edits.
-- @type Store
local Store = {}

--- The feature of a GlobalID: `{attributes = {...}, geometry = {...}}`
-- (NULL attributes are `geoservices.null`, dates epoch milliseconds).
-- @int layer_id the layer
-- @string global_id the GlobalID (any spelling of it)
-- @return the feature; nil when there is none; nil, err on failure
-- @raise when layer_id is not an integer or global_id not a string
function Store:get(layer_id, global_id)
  if type(global_id) ~= "string" then error("store:get: the GlobalID must be a string", 2) end
  local spec, err = layer_of(self, layer_id)
  if not spec then return nil, err end
  local f, msg, code = self:_db():get(layer_id, global_id)
  if f == nil and msg then return nil, db_error(self.path, msg, code) end
  if f and type(f.attributes) == "table" then
    -- the layer's fields: not the table's local fid (GDAL's and QGIS's id of the row)
    local fields = {}
    for _, c in ipairs(spec.columns) do fields[c.name] = true end
    for k in pairs(f.attributes) do
      if not fields[k] then f.attributes[k] = nil end
    end
  end
  if f and spec.geometry_column then -- the server's Z and M a 2D column cannot hold (issue 41)
    f.geometry = unrepresentable.with_server_ordinates(self, spec, global_id,
      f.geometry)
  end
  return f
end

--- The number of features of a layer.
-- @int layer_id the layer
-- @return the count, or nil, err
function Store:count(layer_id)
  local spec, err = layer_of(self, layer_id)
  if not spec then return nil, err end
  local rows, msg, code = self:_db():rows("SELECT count(*) AS n FROM " .. schema.ident(spec.table))
  if not rows then return nil, db_error(self.path, msg, code) end
  return rows[1].n
end

local KIND_MEMBER = { point = "x", multipoint = "points", polyline = "paths", polygon = "rings" }
-- true curves are polylines and polygons too (stored as curve types: csrc/store/geom.h)
local CURVE_MEMBER = { polyline = "curvePaths", polygon = "curveRings" }

local function check_geometry(spec, geometry)
  if geometry == nil or geometry == json.null then return true end
  if type(geometry) ~= "table" then return nil, errors.invalid("geometry", "an Esri geometry table") end
  if spec.geometry_kind == "none" then
    return nil, errors.invalid("geometry", ("layer %d has no geometry"):format(spec.id))
  end
  local member, curves = KIND_MEMBER[spec.geometry_kind], CURVE_MEMBER[spec.geometry_kind]
  if geometry[member] == nil and (not curves or geometry[curves] == nil) then
    return nil, errors.invalid("geometry", ("layer %d holds %s geometries (with %s)"):format(spec.id,
      spec.geometry_kind, member))
  end
  return true
end

-- The position of the first byte where `s` stops being UTF-8, or nil.
-- Lua's utf8.len is strict: overlong forms, surrogates and code points
-- above U+10FFFF are refused too.
local function not_utf8_at(s)
  local n, at = utf8.len(s)
  if n then return nil end
  return at
end

local UTF8_RULE = "text must be UTF-8, and byte %d is not (text from a file in another encoding, such as a "
  .. "Latin-1 CSV, must be converted first)"

-- Every string of a geometry (a spatialReference's wkt...), at any depth.
local function geometry_text_ok(value, depth)
  if type(value) == "string" then
    local at = not_utf8_at(value)
    if at then return nil, errors.invalid("geometry", UTF8_RULE:format(at)) end
  elseif type(value) == "table" and depth < 8 then
    for k, v in pairs(value) do
      local ok, err = geometry_text_ok(k, depth + 1)
      if ok then ok, err = geometry_text_ok(v, depth + 1) end
      if not ok then return nil, err end
    end
  end
  return true
end

-- Refuses text that is not UTF-8 before anything is written: the queue
-- keeps each edit as JSON, and JSON that is not UTF-8 could not be read
-- back to be sent. The error names the field, never its value.
local function check_text(attributes, geometry)
  for k, v in pairs(attributes) do
    local at = type(k) == "string" and not_utf8_at(k)
    if at then
      return nil, errors.invalid("attributes", ("a field name is not UTF-8: " .. UTF8_RULE):format(at))
    end
    at = type(v) == "string" and not_utf8_at(v)
    if at then return nil, errors.invalid(k, UTF8_RULE:format(at)) end
  end
  return geometry_text_ok(geometry, 0)
end

local function copy_attributes(attributes)
  local a = json.object()
  for k, v in pairs(attributes or {}) do a[k] = v end
  return a
end

local function put(self, spec, attributes, geometry)
  local ok, msg, code = unrepresentable.kept_across(self, spec,
    attributes[spec.globalid],
    function() return self.db:put(spec.id, { attributes = attributes, geometry = geometry }) end)
  if not ok then return nil, db_error(self.path, msg, code) end
  return true
end

--- Adds a feature locally; the table's capture trigger queues it for
-- upload in the same transaction. It gets a new GlobalID unless it has
-- one, and a new local fid; its OBJECTID stays NULL until the
-- synchronization that sends it records the server's.
-- @int layer_id the layer
-- @tparam table feature `{attributes = {...}, geometry = {...}}` (copied)
-- @treturn[1] string the GlobalID
-- @return[2] nil
-- @treturn[2] table err: "invalid" (unknown layer, a geometry of another kind, the GlobalID
--   exists, text that is not UTF-8: `err.parameter` names the field), "busy", "io"
-- @raise when layer_id is not an integer or feature not a table
function Store:add(layer_id, feature)
  if type(feature) ~= "table" then error("store:add: the feature must be a table", 2) end
  self:_db()
  local spec, err = layer_of(self, layer_id)
  if not spec then return nil, err end
  local ok, gerr = check_geometry(spec, feature.geometry)
  if not ok then return nil, gerr end
  local attributes = copy_attributes(feature.attributes)
  local text_ok, terr = check_text(attributes, feature.geometry)
  if not text_ok then return nil, terr end
  local gid = attributes[spec.globalid]
  if gid == nil or gid == json.null then gid = edits.new_global_id() end
  if type(gid) ~= "string" then return nil, errors.invalid("GlobalID", "a string") end
  gid = normalize_gid(gid)
  attributes[spec.globalid] = gid
  if spec.oid then attributes[spec.oid] = nil end
  return self:transaction(function()
    local exists, msg, code = self.db:get(layer_id, gid)
    if exists then return nil, errors.invalid("GlobalID", gid .. " already exists in layer " .. layer_id) end
    if msg then return nil, db_error(self.path, msg, code) end
    local okp, perr = put(self, spec, attributes, feature.geometry)
    if not okp then return nil, perr end
    return gid
  end)
end

--- Updates a feature locally: the attributes given replace those of the
-- row, a geometry given replaces its geometry. The table's capture trigger
-- queues the update with its base (the feature as it was before), or folds
-- it into the feature's add or update not sent yet, which keeps its base.
-- @int layer_id the layer
-- @tparam table feature `{attributes = {GlobalID = ..., changed fields}, geometry = ...}`
-- @treturn[1] boolean true
-- @return[2] nil
-- @treturn[2] table err: "invalid" (unknown layer or GlobalID, a geometry of another kind, text
--   that is not UTF-8: `err.parameter` names the field), "busy", "io"
-- @raise when layer_id is not an integer, feature not a table, or without a GlobalID
function Store:update(layer_id, feature)
  if type(feature) ~= "table" then error("store:update: the feature must be a table", 2) end
  self:_db()
  local spec, err = layer_of(self, layer_id)
  if not spec then return nil, err end
  local changes = copy_attributes(feature.attributes)
  local gid = changes[spec.globalid]
  if type(gid) ~= "string" or gid == "" then error("store:update needs attributes." .. spec.globalid, 2) end
  gid = normalize_gid(gid)
  changes[spec.globalid] = gid
  if spec.oid then changes[spec.oid] = nil end -- the local row keeps its own
  local ok, gerr = check_geometry(spec, feature.geometry)
  if not ok then return nil, gerr end
  local text_ok, terr = check_text(changes, feature.geometry)
  if not text_ok then return nil, terr end
  return self:transaction(function()
    local current, msg, code = self.db:get(layer_id, gid)
    if not current then
      if msg then return nil, db_error(self.path, msg, code) end
      return nil, errors.invalid("GlobalID", ("no feature %s in layer %d"):format(gid, layer_id))
    end
    local attributes = current.attributes
    for k, v in pairs(changes) do attributes[k] = v end
    local geometry = feature.geometry
    if geometry == nil then geometry = current.geometry end
    local okp, perr = put(self, spec, attributes, geometry)
    if not okp then return nil, perr end
    return true
  end)
end

--- Deletes a feature locally. The table's capture trigger queues the
-- delete with its base (the feature before its first unsent change); a
-- feature whose add was never sent is simply forgotten, and an unsent
-- update gives way to the delete.
-- @int layer_id the layer
-- @string global_id the GlobalID
-- @treturn[1] boolean true
-- @return[2] nil
-- @treturn[2] table err: "invalid" (unknown layer or GlobalID), "busy", "io"
-- @raise when layer_id is not an integer or global_id not a string
function Store:delete(layer_id, global_id)
  if type(global_id) ~= "string" or global_id == "" then error("store:delete needs a GlobalID string", 2) end
  self:_db()
  local spec, err = layer_of(self, layer_id)
  if not spec then return nil, err end
  local gid = normalize_gid(global_id)
  return self:transaction(function()
    local n, m, c = self.db:remove(layer_id, gid)
    if not n then return nil, db_error(self.path, m, c) end
    if n == 0 then return nil, errors.invalid("GlobalID", ("no feature %s in layer %d"):format(gid, spec.id)) end
    return true
  end)
end

return Store
