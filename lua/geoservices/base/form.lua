--- Turns an operation's parameter table into form fields.
-- Booleans go as true/false, integers as integers, floats with 17
-- significant digits, tables as JSON (all three in C); strings unchanged.
local core = require "geoservices.core"
local json = require "geoservices.base.json"
local redact = require "geoservices.base.redact"

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

-- The usual first pair, shared: the pairs are only read (by the C encoder,
-- describe, multipart parts).
local F_JSON = { "f", "json" }

-- The names of the fields a form carries besides f and token: how many, the
-- first, and (from two on) all of them unsorted. Most requests carry one or
-- two: the first name needs no list. Raises at the form builder's caller.
local function field_names(fields)
  local first, names, n = nil, nil, 0
  for name, value in pairs(fields) do
    if type(name) ~= "string" then error("parameter names must be strings, got " .. type(name), 3) end
    if value ~= nil and name ~= "f" and name ~= "token" then
      n = n + 1
      if n == 1 then
        first = name
      elseif n == 2 then
        names = { first, name }
      else
        names[n] = name
      end
    end
  end
  return n, first, names
end

--- Returns an array of {name, value} pairs with `f = "json"` first and the
-- other parameters in sorted order (stable requests are easier to debug).
-- `token`, when given, is added last; it is never part of a URL. The pairs
-- are read only (the first one may be shared by every form).
function params.to_form(fields, token)
  local n, first, names = field_names(fields)
  local f = fields.f and { "f", fields.f } or F_JSON
  local last = token and { "token", token } or nil
  if n == 0 then return { f, last } end
  if n == 1 then return { f, { first, form_value(first, fields[first]) }, last } end
  table.sort(names)
  local form = { f }
  for i = 1, n do
    local name = names[i]
    form[i + 1] = { name, form_value(name, fields[name]) }
  end
  form[n + 2] = last
  return form
end

--- The same form as to_form, as one flat list `{"f", f, name1, value1, ...,
-- "token", token}` (the C encoder takes it as it is): one table instead of
-- one per field, for a request's body (Client:post).
function params.to_flat(fields, token)
  local n, first, names = field_names(fields)
  local f = fields.f or "json"
  if n == 1 then -- the usual: one field
    local value = form_value(first, fields[first])
    if token then return { "f", f, first, value, "token", token } end
    return { "f", f, first, value }
  end
  local form = { "f", f }
  if n > 1 then
    table.sort(names)
    for i = 1, n do
      local name = names[i]
      form[2 * i + 1], form[2 * i + 2] = name, form_value(name, fields[name])
    end
  end
  if token then form[2 * n + 3], form[2 * n + 4] = "token", token end
  return form
end

--- The text a form value of to_form is sent as (what a dry run shows and a
-- multipart part carries): tables as JSON, numbers exactly.
function params.text(value)
  if type(value) == "table" then return json.encode(value) end
  return core.form_text(value)
end

--- How a request's form looks to a person (a dry run, a log): its fields
-- as `{{name, text}, ...}` as they would be sent, every secret redacted
-- (geoservices.redact), the token as "<redacted>" when one goes with it,
-- and its file parts with where their bytes come from.
-- @tparam table fields the parameters
-- @tparam[opt] table files file parts (`{name =, file = path | data =, filename =}`)
-- @bool[opt] multipart sent as multipart/form-data
-- @bool[opt] with_token a token goes with the request
-- @treturn table `{fields =, files =, content_type =}`
function params.describe(fields, files, multipart, with_token)
  local shown = {}
  for i, pair in ipairs(params.to_form(redact.copy(fields))) do shown[i] = { pair[1], params.text(pair[2]) } end
  if with_token then shown[#shown + 1] = { "token", redact.MARK } end
  local parts = {}
  for _, f in ipairs(files or {}) do
    local source = f.file and ("streamed from " .. f.file) or (#(f.data or "") .. " bytes in memory")
    parts[#parts + 1] = { name = f.name, filename = f.filename, source = source }
  end
  return { fields = shown, files = parts,
           content_type = multipart and "multipart/form-data" or "application/x-www-form-urlencoded" }
end

return params
