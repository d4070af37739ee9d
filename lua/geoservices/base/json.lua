--- JSON at the boundary, exact both ways.
-- Debian's lua-cjson 2.1.0 decodes every number as a float and encodes with
-- 14 significant digits; both lose information (OBJECTIDs, generations,
-- coordinates), so decoding and encoding go through the C core instead.
-- `json.null` is `cjson.null` (a NULL light userdata), so values from either
-- library compare equal (also `geoservices.null`; `geoservices.json` is this module).
-- @module geoservices.json
local core = require "geoservices.core"

local json = {}

json.null = core.json_null or require("cjson").null

--- Metatable marking a table as a JSON array, so an empty one encodes as `[]`.
-- Decoded arrays carry it too, so decode → encode round-trips. The C core owns
-- it (`{ __jsontype = "array", __name = "geoservices.json.array" }`).
local array_mt = core.json_array_mt
local object_mt = { __jsontype = "object", __name = "geoservices.json.object" }

--- Marks `t` (default a new table) as an array.
-- @tparam[opt] table t the table
-- @treturn table t (or the new table)
-- @raise when t is not a table (or nil), or has a protected metatable
function json.array(t)
  return setmetatable(t or {}, array_mt)
end

--- Marks `t` (default a new table) as an object, even when empty or 1..n keyed.
-- @tparam[opt] table t the table
-- @treturn table t (or the new table)
-- @raise when t is not a table (or nil), or has a protected metatable
function json.object(t)
  return setmetatable(t or {}, object_mt)
end

--- Whether `t` is marked as an array (by @{array}, or by @{decode}).
-- @param t any value
-- @treturn boolean
-- @raise never
function json.is_array(t)
  return getmetatable(t) == array_mt
end

--- Decodes a JSON text. Integers stay integers; arrays carry the array mark.
-- @string text the JSON text
-- @tparam[opt] table opts `max_depth` (nesting limit)
-- @return[1] the value (`json.null` for null)
-- @return[2] nil
-- @treturn[2] string the message
-- @treturn[2] integer the byte offset of the error
-- @raise when text is not a string
function json.decode(text, opts)
  return core.json_decode(text, opts)
end

--- Encodes a value; raises on values JSON cannot hold (functions, NaN...).
-- Doubles keep 17 significant digits; a table is an array when marked so
-- or when its keys are exactly 1..n, else an object (integer keys of an
-- object are written as strings).
-- @param value the value
-- @treturn string the JSON text
-- @raise on values JSON cannot hold: functions, userdata other than null, NaN and infinities,
--   keys that are neither strings nor 1..n integers, nesting deeper than 1000 (a cycle)
function json.encode(value)
  return core.json_encode(value)
end

return json
