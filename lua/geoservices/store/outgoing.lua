--- What a queued edit sends: the feature of an add or an update is read
-- from the feature table when it is sent (the capture triggers keep only
-- which feature changed, how, and its values before: geoservices.store.capture).
--
-- * an add sends the row's attributes that have a value (not the OBJECTID:
--   the server gives it) and its geometry;
-- * an update sends the GlobalID and what differs from its base (the values
--   before the first unsent change): the changed attributes, the geometry
--   when it moved. An update kept without a base (made by a store of format
--   1) sends every attribute and the geometry;
-- * a delete sends its GlobalID alone.
--
-- Internal: geoservices.store.queue reads the queue with it.
-- @module geoservices.store.outgoing
-- @local
local capture = require "geoservices.store.capture"
local json = require "geoservices.json"
local shared = require "geoservices.store.shared"

local outgoing = {}

local db_error = shared.db_error

local function is_null(v) return v == nil or v == json.null end

-- Doubles read back from a trigger's JSON keep 15 significant digits.
local function near(a, b)
  return math.abs(a - b) <= 1e-12 * math.max(1, math.abs(a), math.abs(b))
end

--- Whether two values (attributes or geometries) are the same: null and
-- absent alike, numbers to 12 significant digits, tables member by member.
function outgoing.same(a, b)
  if is_null(a) and is_null(b) then return true end
  if is_null(a) or is_null(b) then return false end
  if type(a) == "number" and type(b) == "number" then return a == b or near(a, b) end
  if type(a) == "table" and type(b) == "table" then
    for k, v in pairs(a) do
      if not outgoing.same(v, b[k]) then return false end
    end
    for k, v in pairs(b) do
      if a[k] == nil and not is_null(v) then return false end
    end
    return true
  end
  return a == b
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
-- @return[2] nil
-- @treturn[2] string why it cannot be sent (its feature is not in the table)
-- @treturn[2] ?table err a database error instead
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
  elseif spec.geometry_column and (not base or not outgoing.same(current.geometry, base.geometry)) then
    f.geometry = current.geometry or json.null
    changed = true
  end
  return f, changed
end

return outgoing
