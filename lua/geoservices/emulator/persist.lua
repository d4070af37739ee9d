--- Saving and reloading the emulator's mutable state (feature services,
-- replicas, jobs, result files, settings, the organization), so that a
-- restarted emulator (`--state-file`) carries on where it stopped, as a real
-- server does across a restart. The format is a Lua chunk that rebuilds the
-- table graph (shared references and JSON array/object marks included); it
-- is loaded with an empty environment plus three constructors, so a state
-- file can build tables and nothing else.
--
-- `externals` (a table -> name map) leaves tables out: each is written as
-- X(name), which the loader's `X` resolves (emulator.state_file: the large
-- maps of features, written once and then changed by journal records).
local json = require "geoservices.base.json"

local persist = {}

local ARRAY_MT = getmetatable(json.array())
local OBJECT_MT = getmetatable(json.object())

local function literal(v, ids, externals)
  local t = type(v)
  if t == "string" then return ("%q"):format(v) end
  if t == "boolean" then return tostring(v) end
  if t == "number" then
    if math.type(v) == "integer" then
      if v == math.mininteger then return "(-9223372036854775807-1)" end
      return ("%d"):format(v)
    end
    if v ~= v then return "(0/0)" end
    if v == math.huge then return "(1/0)" end
    if v == -math.huge then return "(-1/0)" end
    return ("%a"):format(v)
  end
  if t == "table" then
    if externals and externals[v] then return ("X(%q)"):format(externals[v]) end
    return ("T[%d]"):format(ids[v])
  end
  if v == json.null then return "N" end
  error("persist: cannot save a value of type " .. t)
end

--- Returns the text of a chunk that rebuilds `root`; the tables of
-- `externals` (optional) are named, not written.
function persist.dump(root, externals)
  local ids, order = {}, {}
  local function visit(t)
    if ids[t] or (externals and externals[t]) then return end
    order[#order + 1] = t
    ids[t] = #order
    for k, v in pairs(t) do
      if type(k) == "table" then visit(k) end
      if type(v) == "table" then visit(v) end
    end
  end
  visit(root)
  local out = { "local T = {}\n" }
  for i, t in ipairs(order) do
    local mt = getmetatable(t)
    out[#out + 1] = ("T[%d] = %s\n"):format(i, mt == ARRAY_MT and "A()" or mt == OBJECT_MT and "O()" or "{}")
  end
  for i, t in ipairs(order) do
    for k, v in pairs(t) do
      out[#out + 1] = ("T[%d][%s] = %s\n"):format(i, literal(k, ids, externals), literal(v, ids, externals))
    end
  end
  out[#out + 1] = "return T[1]\n"
  return table.concat(out)
end

--- Rebuilds the value saved by dump; returns it or nil, message. `X`
-- (optional): the function that gives the named tables back.
function persist.load(text, X)
  local env = { A = json.array, O = json.object, N = json.null, X = X }
  local chunk, err = load(text, "=emulator state", "t", env)
  if not chunk then return nil, err end
  local ok, value = pcall(chunk)
  if not ok then return nil, value end
  return value
end

return persist
