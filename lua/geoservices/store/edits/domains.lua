--- The domains of a store's layers, as the service describes them (coded
-- values and ranges on its fields, kept in the layer's metadata), and the
-- rule a value breaks. geoservices.store.edits.outgoing refuses, before it is
-- sent, an add or update whose value lies outside its field's domain,
-- naming the layer, the GlobalID, the field and the rule; the edit stays
-- queued (listed by `pending` and `status`) and nothing else is held back.
-- A subtype's own domains (the layer's `types`) are not checked: the
-- server decides those.
-- Internal (geoservices.store.edits.outgoing).
-- @module geoservices.store.edits.domains
-- @local
local json = require "geoservices.base.json"

local domains = {}

-- [store][layer id] = { [field] = domain } (weak: a closed store goes)
local cache = setmetatable({}, { __mode = "k" })

local function number_text(v)
  local i = math.tointeger(v)
  return i and tostring(i) or ("%.17g"):format(v)
end

local function shown(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) == "number" then return number_text(v) end
  return tostring(v)
end

-- A field's domain as checked: `{name =, codes = {[code] = name}, list =}` or `{name =, min =, max =}`.
local function domain_of(d)
  if type(d) ~= "table" then return nil end
  local name = type(d.name) == "string" and d.name or "(unnamed)"
  if d.type == "codedValue" and type(d.codedValues) == "table" then
    local codes, list = {}, {}
    for _, cv in ipairs(d.codedValues) do
      if type(cv) == "table" and (type(cv.code) == "number" or type(cv.code) == "string") then
        codes[cv.code] = cv.name or cv.code
        if #list < 8 then list[#list + 1] = ("%s %s"):format(shown(cv.code), tostring(cv.name or "")) end
      end
    end
    if #d.codedValues > #list then list[#list + 1] = "..." end
    if next(codes) == nil then return nil end
    return { name = name, codes = codes, list = table.concat(list, ", ") }
  elseif d.type == "range" and type(d.range) == "table" then
    local min, max = d.range[1], d.range[2]
    if type(min) ~= "number" or type(max) ~= "number" or min ~= min or max ~= max then return nil end
    return { name = name, min = min, max = max }
  end
end

--- The domains of a layer's fields, `[field] = domain` (read once a store).
-- @param st the store
-- @tparam table spec the layer's spec
-- @treturn table
function domains.of(st, spec)
  local by_store = cache[st]
  if not by_store then
    by_store = {}
    cache[st] = by_store
  end
  if by_store[spec.id] then return by_store[spec.id] end
  local found = {}
  local rows = st.db:rows("SELECT metadata FROM gpkgext_geoservices_layers WHERE layer_id = ?", spec.id)
  local meta = rows and rows[1] and type(rows[1].metadata) == "string" and json.decode(rows[1].metadata)
  for _, f in ipairs(type(meta) == "table" and type(meta.fields) == "table" and meta.fields or {}) do
    if type(f) == "table" and type(f.name) == "string" then found[f.name] = domain_of(f.domain) end
  end
  by_store[spec.id] = found
  return found
end

--- Forgets the domains read of a store (its layers' definitions changed:
-- geoservices.store.sync.server_schema); the next check reads them again.
function domains.forget(st)
  cache[st] = nil
end

--- The rule a value of a field breaks, or nil.
-- @tparam table d the field's domain (from @{of})
-- @string field the field's name
-- @param v the value (not null)
-- @treturn ?string the rule, in words
function domains.rule(d, field, v)
  if not d then return nil end
  if d.codes then
    local ok = d.codes[v] ~= nil
    if not ok and type(v) == "number" then
      for code in pairs(d.codes) do
        if type(code) == "number" and code == v then ok = true end
      end
    end
    if not ok then
      return ("field %s holds %s, not a code of its domain %s (%s)"):format(field, shown(v), d.name, d.list)
    end
  elseif type(v) == "number" and (v < d.min or v > d.max) then
    return ("field %s holds %s, outside the range %s to %s of its domain %s"):format(field, number_text(v),
      number_text(d.min), number_text(d.max), d.name)
  end
end

return domains
