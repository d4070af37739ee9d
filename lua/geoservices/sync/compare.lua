--- Whether the server holds a value, at the precision its field keeps.
-- Reading an edit back (geoservices.sync.verify) asks whether the feature
-- the server holds now is the one the edit sent; a server gives back what
-- it stored, not what it was sent:
--
-- * a float32 field (`esriFieldTypeSingle`) keeps about 7 digits: the same
--   to 1e-6, relative;
-- * a double (`esriFieldTypeDouble`, and a number of an unknown field):
--   the same to 1e-9, relative (as before);
-- * integers (`esriFieldTypeSmallInteger`, `Integer`, `BigInteger`, `OID`):
--   exactly;
-- * a date (`esriFieldTypeDate`, epoch milliseconds) to the millisecond
--   when the service keeps milliseconds, else to the second. What the
--   service keeps is what it says (`rules(..., {date_unit = "ms" | "s"})`,
--   from the layer's description), else what it reports: a value it gives
--   back with a millisecond part shows the field keeps them; a whole second
--   where a sent value had milliseconds is the same date to the second;
-- * a GUID (`esriFieldTypeGUID`, `GlobalID`): whatever its case and braces;
-- * a geometry: coordinates within the layer's xy tolerance (else its
--   resolution, else 1e-9 relative), z and m within theirs; a polygon's
--   rings in any order, each in either orientation and from any start point
--   (a server re-orients rings, starts them elsewhere and puts the outer
--   ring first); paths and points in their order; the spatial reference and
--   hasZ/hasM are not part of the shape;
-- * null and absent are the same; anything else exactly.
--
-- @{same} is the walk every comparison of values shares (null and absent
-- alike, numbers to a relative tolerance, tables member by member): the
-- merge (geoservices.sync.merge) and the store's outgoing edits
-- (geoservices.store.edits.outgoing) compare with it at their own tolerance.
--
-- Pure: tables in, booleans out.
-- @module geoservices.sync.compare
-- @local
local json = require "geoservices.base.json"

local compare = {}

local SINGLE, DOUBLE = 1e-6, 1e-9

local KIND_OF_TYPE = {
  esriFieldTypeSingle = "single", esriFieldTypeDouble = "double", esriFieldTypeDate = "date",
  esriFieldTypeSmallInteger = "integer", esriFieldTypeInteger = "integer", esriFieldTypeBigInteger = "integer",
  esriFieldTypeOID = "integer", esriFieldTypeGUID = "guid", esriFieldTypeGlobalID = "guid",
}

local function is_null(v) return v == nil or v == json.null end

local function relative(a, b, tol, floor)
  if a == b then return true end
  return math.abs(a - b) <= tol * math.max(floor, math.abs(a), math.abs(b))
end

local function positive(v)
  v = tonumber(v)
  return v and v > 0 and v or nil
end

-- The absolute tolerance of coordinates `name` ("xy", "z", "m") of a
-- spatial reference: its tolerance, else its resolution (`xyResolution`, or
-- 1 / `xyUnits`, the grid it stores on), else nil (1e-9 relative).
local function tolerance(sr, name)
  if type(sr) ~= "table" then return nil end
  local units = positive(sr[name .. "Units"])
  return positive(sr[name .. "Tolerance"]) or positive(sr[name .. "Resolution"]) or (units and 1 / units) or nil
end

--- The comparison rules of a layer.
-- @tparam ?table fields the layer's (or a query answer's) `fields`: `{ {name =, type =}, ... }`
-- @tparam ?table sr its spatial reference (`xyTolerance`, `zTolerance`, `mTolerance`, `xyUnits`,
--   `zUnits`, `mUnits`, `xyResolution`... whichever it gives)
-- @tparam[opt] table opts `date_unit` ("ms" or "s": what the layer's date fields keep, when it says)
-- @treturn table the rules, for @{value} and @{holds}
function compare.rules(fields, sr, opts)
  opts = opts or {}
  local kinds = {}
  for _, f in ipairs(type(fields) == "table" and fields or {}) do
    local kind = type(f) == "table" and KIND_OF_TYPE[f.type]
    if kind and type(f.name) == "string" then
      kinds[f.name] = kind
      kinds[f.name:lower()] = kinds[f.name:lower()] or kind
    end
  end
  return { kinds = kinds, date_unit = opts.date_unit, xy = tolerance(sr, "xy"), z = tolerance(sr, "z"),
           m = tolerance(sr, "m") }
end

--- The comparison kind of a field: "single", "double", "integer", "date", "guid" or nil.
-- @tparam table rules from @{rules}
-- @string name the field
function compare.kind(rules, name)
  local kinds = rules and rules.kinds
  if not kinds or type(name) ~= "string" then return nil end
  return kinds[name] or kinds[name:lower()]
end

local function guid_key(s) return (s:upper():gsub("[{}]", "")) end

local function same_date(sent, held, unit)
  if sent == held then return true end
  unit = unit or ((held % 1000 ~= 0) and "ms" or "s")
  if unit == "ms" then return math.abs(sent - held) < 1 end
  return math.abs(sent - held) < 1000
end

-- The walk: null and absent alike, numbers within `abs` (absolute) when
-- given, else to `rel` relative (1e-9 when nil), tables member by member,
-- anything else exactly.
local function walk(a, b, rel, abs)
  if is_null(a) and is_null(b) then return true end
  if is_null(a) or is_null(b) then return false end
  if type(a) == "number" and type(b) == "number" then
    if abs then return math.abs(a - b) <= abs end
    return relative(a, b, rel or DOUBLE, 1)
  end
  if type(a) == "table" and type(b) == "table" then
    for k, v in pairs(a) do
      if not walk(v, b[k], rel, abs) then return false end
    end
    for k, v in pairs(b) do
      if a[k] == nil and not is_null(v) then return false end
    end
    return true
  end
  return a == b
end

--- Whether two values are the same: null and absent alike, numbers to a
-- relative tolerance, tables member by member (at that tolerance), anything
-- else exactly.
-- @param a a value
-- @param b a value
-- @tparam[opt] number tol the relative tolerance of numbers (1e-9: a double read back)
-- @treturn boolean
function compare.same(a, b, tol)
  return walk(a, b, tol, nil)
end

--- Whether the server's value `held` is the value `sent`, for a field of `kind`.
-- @tparam ?string kind from @{kind} (nil: unknown)
-- @param sent the value sent
-- @param held the value the server holds
-- @tparam[opt] table rules from @{rules} (the date unit); `double`, the relative tolerance of a
--   number of a double or unknown field, and of the numbers in a table (1e-9: a value read back)
-- @treturn boolean
function compare.value(kind, sent, held, rules)
  if type(sent) == "number" and type(held) == "number" then
    if kind == "integer" then return sent == held end
    if kind == "single" then return relative(sent, held, SINGLE, 1e-30) end
    if kind == "date" then return same_date(sent, held, rules and rules.date_unit) end
  end
  if kind == "guid" and type(sent) == "string" and type(held) == "string" then
    return guid_key(sent) == guid_key(held)
  end
  return compare.same(sent, held, rules and rules.double)
end

-- A coordinate within `tol` (absolute), else at 1e-9 relative.
local function near(a, b, tol)
  if type(a) ~= "number" or type(b) ~= "number" then return is_null(a) and is_null(b) or a == b end
  if tol then return math.abs(a - b) <= tol end
  return relative(a, b, DOUBLE, 1)
end

-- A vertex `[x, y, (z), (m)]`; which of z and m a third value is follows
-- the geometry's hasZ/hasM.
local function same_vertex(p, q, rules, has_z)
  if type(p) ~= "table" or type(q) ~= "table" then return false end
  if #p ~= #q then return false end
  for i = 1, #p do
    local tol = i <= 2 and rules.xy or ((i == 3 and has_z) and rules.z or rules.m)
    if not near(p[i], q[i], tol) then return false end
  end
  return true
end

local function same_sequence(a, b, rules, has_z)
  if type(a) ~= "table" or type(b) ~= "table" or #a ~= #b then return false end
  for i = 1, #a do
    if not same_vertex(a[i], b[i], rules, has_z) then return false end
  end
  return true
end

-- A ring without its closing vertex (the first repeated at the end).
local function open_ring(ring, rules, has_z)
  local n = #ring
  if n > 1 and same_vertex(ring[1], ring[n], rules, has_z) then n = n - 1 end
  local out = {}
  for i = 1, n do out[i] = ring[i] end
  return out
end

-- The same ring from any start point, in either orientation.
local function same_ring(a, b, rules, has_z)
  if type(a) ~= "table" or type(b) ~= "table" then return false end
  local p, q = open_ring(a, rules, has_z), open_ring(b, rules, has_z)
  local n = #p
  if n ~= #q then return false end
  if n == 0 then return true end
  for start = 1, n do
    if same_vertex(p[1], q[start], rules, has_z) then
      for _, step in ipairs{ 1, -1 } do
        local all = true
        for i = 2, n do
          local j = (start - 1 + step * (i - 1)) % n + 1
          if not same_vertex(p[i], q[j], rules, has_z) then
            all = false
            break
          end
        end
        if all then return true end
      end
    end
  end
  return false
end

-- Every ring of `a` matches a ring of `b` of its own, in any order.
local function same_rings(a, b, rules, has_z)
  if type(a) ~= "table" or type(b) ~= "table" or #a ~= #b then return false end
  local used = {}
  for _, ring in ipairs(a) do
    local found = false
    for j, other in ipairs(b) do
      if not used[j] and same_ring(ring, other, rules, has_z) then
        used[j], found = true, true
        break
      end
    end
    if not found then return false end
  end
  return true
end

local function same_list(a, b, rules, has_z)
  if type(a) ~= "table" or type(b) ~= "table" or #a ~= #b then return false end
  for i = 1, #a do
    if not same_sequence(a[i], b[i], rules, has_z) then return false end
  end
  return true
end

-- Members that are not the shape.
local NOT_SHAPE = { spatialReference = true, hasZ = true, hasM = true }

-- Any other member (curves, an envelope): member by member, numbers as
-- coordinates (within the xy tolerance, else at 1e-9 relative).
local function same_member(a, b, rules)
  return walk(a, b, nil, rules.xy)
end

--- Whether the server's geometry `held` is the geometry `sent`, at the
-- layer's tolerance (see the module's notes).
-- @tparam table sent the geometry sent
-- @tparam table held the geometry the server holds
-- @tparam[opt] table rules from @{rules}
-- @treturn boolean
function compare.geometry(sent, held, rules)
  rules = rules or {}
  if is_null(sent) and is_null(held) then return true end
  if type(sent) ~= "table" or type(held) ~= "table" then return false end
  local has_z = sent.hasZ == true or held.hasZ == true or (sent.hasM ~= true and held.hasM ~= true)
  for k, v in pairs(sent) do
    if not NOT_SHAPE[k] then
      local w = held[k]
      local same
      if k == "x" or k == "y" then same = near(v, w, rules.xy)
      elseif k == "z" then same = near(v, w, rules.z)
      elseif k == "m" then same = near(v, w, rules.m)
      elseif k == "rings" then same = same_rings(v, w, rules, has_z)
      elseif k == "paths" then same = same_list(v, w, rules, has_z)
      elseif k == "points" then same = same_sequence(v, w, rules, has_z)
      else same = same_member(v, w, rules) end
      if not same then return false end
    end
  end
  for k, w in pairs(held) do
    if not NOT_SHAPE[k] and sent[k] == nil and not is_null(w) then return false end
  end
  return true
end

--- Whether the server's feature holds what `edit` sent, on the fields it
-- carries (and its geometry when it carries one).
-- @tparam table held the server's feature (`attributes`, `geometry`)
-- @tparam table edit the feature sent (or the values from before it)
-- @tparam[opt] table skip `[name] = true`: fields not compared (the server owns OBJECTID)
-- @tparam[opt] table rules from @{rules}
-- @treturn boolean
function compare.holds(held, edit, skip, rules)
  skip = skip or {}
  local attrs = type(held.attributes) == "table" and held.attributes or {}
  local lower -- field names are not case-sensitive on the server: built when one is missing
  for k, v in pairs(type(edit.attributes) == "table" and edit.attributes or {}) do
    local value = attrs[k]
    if value == nil and type(k) == "string" then
      if not lower then
        lower = {}
        for name, w in pairs(attrs) do
          if type(name) == "string" then lower[name:lower()] = w end
        end
      end
      value = lower[k:lower()]
    end
    if not skip[k] and not compare.value(compare.kind(rules, k), v, value, rules) then return false end
  end
  if not is_null(edit.geometry) and not compare.geometry(edit.geometry, held.geometry, rules) then return false end
  return true
end

return compare
