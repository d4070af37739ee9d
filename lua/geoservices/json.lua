--- JSON at the boundary, exact both ways.
-- Debian's lua-cjson 2.1.0 decodes every number as a float and encodes with
-- 14 significant digits; both lose information (OBJECTIDs, generations,
-- coordinates), so decoding and encoding go through the C core instead.
-- `json.null` is `cjson.null` (a NULL light userdata), so values from either
-- library compare equal.
local core = require "geoservices.core"

local json = {}

json.null = core.json_null or require("cjson").null

--- Metatable marking a table as a JSON array, so an empty one encodes as `[]`.
-- Decoded arrays carry it too, so decode → encode round-trips.
local array_mt = { __jsontype = "array", __name = "geoservices.json.array" }
local object_mt = { __jsontype = "object", __name = "geoservices.json.object" }
debug.getregistry()["geoservices.json.array"] = array_mt

--- Marks `t` (default a new table) as an array.
function json.array(t)
  return setmetatable(t or {}, array_mt)
end

--- Marks `t` (default a new table) as an object, even when empty or 1..n keyed.
function json.object(t)
  return setmetatable(t or {}, object_mt)
end

function json.is_array(t)
  return getmetatable(t) == array_mt
end

--- Decodes a JSON text. Returns the value, or nil, message, byte offset.
function json.decode(text, opts)
  return core.json_decode(text, opts)
end

--- Encodes a value; raises on values JSON cannot hold (functions, NaN...).
function json.encode(value)
  return core.json_encode(value)
end

return json
