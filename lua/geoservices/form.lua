--- Turns an operation's parameter table into form fields.
-- Booleans go as true/false, integers as integers, floats with 17
-- significant digits, tables as JSON (all three in C); strings unchanged.
local core = require "geoservices.core"
local json = require "geoservices.json"

local params = {}

local function form_value(name, value)
  local t = type(value)
  if t == "string" or t == "number" or t == "boolean" then return value end
  if t == "table" then
    if getmetatable(value) and getmetatable(value).__form then return getmetatable(value).__form(value) end
    return value -- encoded to JSON by the C form encoder, straight into the body
  end
  if value == json.null then return "null" end
  error(("parameter '%s': cannot send a %s"):format(name, t), 3)
end

--- Returns an array of {name, value} pairs with `f = "json"` first and the
-- other parameters in sorted order (stable requests are easier to debug).
-- `token`, when given, is added last; it is never part of a URL.
function params.to_form(fields, token)
  local names = {}
  for name, value in pairs(fields) do
    if type(name) ~= "string" then error("parameter names must be strings, got " .. type(name), 2) end
    if value ~= nil and name ~= "f" and name ~= "token" then names[#names + 1] = name end
  end
  table.sort(names)
  local form = { { "f", fields.f or "json" } }
  for _, name in ipairs(names) do
    form[#form + 1] = { name, form_value(name, fields[name]) }
  end
  if token then form[#form + 1] = { "token", token } end
  return form
end

--- The text a form value of to_form is sent as (what a dry run shows and a
-- multipart part carries): tables as JSON, numbers exactly.
function params.text(value)
  if type(value) == "table" then return json.encode(value) end
  return core.form_text(value)
end

return params
