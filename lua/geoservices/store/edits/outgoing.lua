--- What a queued edit sends: the feature of an add or an update is read
-- from the feature table when it is sent (the capture triggers keep only
-- which feature changed, how, and its values before: geoservices.store.edits.capture).
--
-- * an add sends the row's attributes that have a value (not the OBJECTID:
--   the server gives it) and its geometry;
-- * an update sends the GlobalID and what differs from its base (the values
--   before the first unsent change): the changed attributes, the geometry
--   when it moved. An update kept without a base (made by a store of format
--   1) sends every attribute and the geometry;
-- * a delete sends its GlobalID alone.
--
-- What the server cannot take is refused here, per edit, naming the rule
-- (@{refusal}): the edit is not sent and stays queued until the feature is
-- fixed; a trigger never refuses the user's edit itself.
--
-- Internal: geoservices.store.edits.queue reads the queue with it.
-- @module geoservices.store.edits.outgoing
-- @local
local capture = require "geoservices.store.edits.capture"
local compare = require "geoservices.sync.compare"
local domains = require "geoservices.store.edits.domains"
local json = require "geoservices.base.json"
local schema = require "geoservices.store.file.schema"
local shared = require "geoservices.store.shared"
local unrepresentable = require "geoservices.store.file.unrepresentable"

local outgoing = {}

local db_error = shared.db_error

local function is_null(v) return v == nil or v == json.null end

-- Doubles read back from a trigger's JSON keep 15 significant digits.
local STORED = 1e-12

--- Whether two values (attributes or geometries) are the same: null and
-- absent alike, numbers to 12 significant digits, tables member by member
-- (geoservices.sync.compare.same).
function outgoing.same(a, b)
  return compare.same(a, b, STORED)
end

--- The base of a queue row (its JSON text) as a feature, or nil.
-- @return the feature (nil when none), or false, why it cannot be read
function outgoing.base(spec, text)
  if text == nil then return nil end
  local value, msg, offset = json.decode(text)
  if type(value) ~= "table" then
    return false, value == nil and ("not JSON (%s at byte %s)"):format(tostring(msg), tostring(offset))
      or "not a JSON object"
  end
  return spec and capture.feature_of(spec, value) or value
end

--- The feature an unsent add or update sends, read from the table now.
-- @param st the store
-- @tparam table spec the layer's spec
-- @string op "add" or "update"
-- @string gid the GlobalID
-- @tparam ?table base the update's base feature
-- @treturn[1] table the feature
-- @treturn[1] boolean whether it changes anything (an update whose values all came back to its
--   base changes nothing)
-- @treturn[1] ?string the rule it breaks (@{refusal}): then it is not sent
-- @return[2] nil
-- @treturn[2] string why it cannot be sent (its feature is not in the table)
-- @treturn[2] ?table err a database error instead
-- The rules of what a layer takes ----------------------------------------------

local GUID = "^{%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x}$"
local KIND_MEMBER = { point = "x", multipoint = "points", polyline = "paths", polygon = "rings" }
local TAKES = { integer = "an integer", real = "a number", date = "a date (DATETIME text, 2023-11-14T22:13:20.000Z)",
                text = "text", guid = "a GUID ({XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX})", blob = "bytes" }

outgoing.GUID = GUID

local function shown(v)
  if type(v) == "string" then
    return #v > 40 and ("text %q..."):format(v:sub(1, 40)) or ("text %q"):format(v)
  end
  if type(v) == "number" then return ("the number %s"):format(tostring(v)) end
  return "a value of another kind"
end

-- The rule a value of column `c` breaks, or nil.
local function value_rule(c, v)
  local t = c.type
  local ok
  if t == "integer" then ok = math.type(v) == "integer"
  elseif t == "real" then ok = type(v) == "number"
  elseif t == "date" then ok = math.type(v) == "integer"
  elseif t == "guid" then ok = type(v) == "string" and v:match(GUID) ~= nil
  else ok = type(v) == "string" end
  if not ok then
    return ("field %s takes %s (%s) and holds %s"):format(c.name, TAKES[t] or "text", tostring(c.esri_type or t),
      shown(v))
  end
  local length = t == "text" and math.tointeger(tonumber(tostring(c.sql or ""):match("^TEXT%((%d+)%)$")))
  local chars = length and (utf8.len(v) or #v)
  if chars and chars > length then
    return ("field %s holds %d characters, more than its %d"):format(c.name, chars, length)
  end
end

local function kind_of(g)
  for kind, member in pairs(KIND_MEMBER) do
    if type(g) == "table" and g[member] ~= nil then return kind end
  end
  -- true curves (csrc/store/geom.h)
  if type(g) == "table" and g.curvePaths ~= nil then return "polyline" end
  if type(g) == "table" and g.curveRings ~= nil then return "polygon" end
end

-- Whether the table holds a geometry blob for the feature (one that could not be read).
local function has_blob(st, spec, gid)
  local rows = st.db:rows(("SELECT %s IS NOT NULL AS has FROM %s WHERE %s"):format(
    '"' .. spec.geometry_column:gsub('"', '""') .. '"', '"' .. spec.table:gsub('"', '""') .. '"',
    schema.gid_match('"' .. spec.globalid:gsub('"', '""') .. '"', "?1")), gid)
  return rows and rows[1] and rows[1].has == 1
end

--- The rule an unsent add or update breaks, or nil: a GlobalID that is
-- not one, a value of the wrong type for its field or longer than it, a
-- value outside its field's domain (a code it does not list, a number out
-- of its range: geoservices.store.edits.domains), a field the layer requires left empty, a
-- geometry that cannot be read or of another kind than the layer's.
-- @param st the store
-- @tparam table spec the layer's spec
-- @string op "add" or "update"
-- @string gid the GlobalID
-- @tparam table f what the edit sends (@{feature})
-- @tparam table current the feature as the table holds it
-- @treturn ?string the rule, in words
function outgoing.refusal(st, spec, op, gid, f, current)
  if not gid:match(GUID) then
    return ("its GlobalID %q is not a GlobalID ({XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX})"):format(gid)
  end
  local values = type(current.attributes) == "table" and current.attributes or {}
  local layer_domains = domains.of(st, spec)
  for _, c in ipairs(spec.columns) do
    if c.name ~= spec.oid and c.name ~= spec.globalid then
      local sent = f.attributes[c.name]
      local v = op == "add" and values[c.name] or sent
      if not is_null(v) then
        local rule = value_rule(c, v) or domains.rule(layer_domains[c.name], c.name, v)
        if rule then return rule end
      elseif c.required and (op == "add" or sent == json.null) then
        return ("field %s is required: the layer takes no empty value there"):format(c.name)
      end
    end
  end
  if spec.geometry_column and (op == "add" or f.geometry ~= nil) then
    local g = f.geometry
    if is_null(g) then
      if has_blob(st, spec, gid) then
        return "its geometry cannot be read (not a GeoPackage geometry blob: one written by SpatiaLite's or "
          .. "another tool's own functions?)"
      end
    else
      local kind = kind_of(g)
      if kind ~= spec.geometry_kind then
        return ("a %s geometry in a %s layer"):format(tostring(kind or "unknown"), spec.geometry_kind)
      end
    end
  end
end

function outgoing.feature(st, spec, op, gid, base)
  local current, msg, code = st.db:get(spec.id, gid)
  if current == nil then
    if msg then return nil, nil, db_error(st.path, msg, code) end
    return nil, ("it is an %s of a feature that is not in table %s"):format(op, spec.table)
  end
  local attributes, changed = json.object(), op == "add" or not base
  local values = type(current.attributes) == "table" and current.attributes or {}
  local before = base and type(base.attributes) == "table" and base.attributes or {}
  for _, c in ipairs(spec.columns) do
    local v = values[c.name]
    if c.name == spec.globalid then
      attributes[c.name] = gid
    elseif c.name ~= spec.oid then
      if op == "add" then
        if not is_null(v) then attributes[c.name] = v end
      elseif not base or not outgoing.same(v, before[c.name]) then
        attributes[c.name] = is_null(v) and json.null or v
        changed = true
      end
    end
  end
  local f = { attributes = attributes }
  if op == "add" then
    f.geometry = current.geometry
  elseif spec.geometry_column and (not base or not outgoing.same(current.geometry, base.geometry))
      and not (base and unrepresentable.unchanged(st, spec, gid)) then
    f.geometry = current.geometry or json.null
    changed = true
  end
  local kept_whole = op == "update" and f.geometry ~= nil and outgoing.server_ordinates(st, spec, gid, f)
  return f, changed, kept_whole or outgoing.refusal(st, spec, op, gid, f, current)
end

--- An update never flattens the server's geometry (issue 41): where the
-- server's has Z or M values the column cannot hold, the geometry sent gets
-- them back at each vertex, or the edit is refused
-- (geoservices.store.file.unrepresentable.with_server_ordinates). Changes f.geometry.
-- @treturn ?string the rule the edit breaks
function outgoing.server_ordinates(st, spec, gid, f)
  local geometry, rule = unrepresentable.with_server_ordinates(st, spec, gid,
    f.geometry)
  f.geometry = geometry
  return rule
end

return outgoing
