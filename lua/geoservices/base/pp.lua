--- Pretty-printer for results in a REPL: `geoservices.pp(value)`.
--
-- Any table prints with a stable key order (array part first, then the other
-- keys sorted by type and value), long arrays and long strings truncated, and
-- the secrets this library knows about (`token`, `password`,
-- `securityQuestionAns`, `secretKey`, `accessKey`) shown as `<redacted>`.
--
--     > gs.pp(client:list_snapshots("nb-street-trees"))
--     geoservices.SnapshotList {
--       snapshots = { -- 3 items
--         { created = 1700000000000, ...
--
-- @module geoservices.pp
local json = require "geoservices.base.json"
local redact = require "geoservices.base.redact"

local pp = {}

--- Default options of @{format}.
-- @table DEFAULTS
-- @field max_items array items shown before "... N more" (10)
-- @field max_depth nesting shown before "{...}" (8)
-- @field max_string characters of a string shown before it is cut (200)
-- @field indent indentation string ("  ")
pp.DEFAULTS = { max_items = 10, max_depth = 8, max_string = 200, indent = "  " }

local SECRETS = redact.SECRET_KEYS -- the one list of secrets

local KEYWORDS = {}
for w in ([[and break do else elseif end false for function goto if in local nil not or repeat return then
  true until while]]):gmatch("%a+") do KEYWORDS[w] = true end

local TYPE_ORDER = { number = 1, string = 2, boolean = 3 }

local function key_less(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return (TYPE_ORDER[ta] or 9) < (TYPE_ORDER[tb] or 9) end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end

local function quote(s, max)
  local cut = ""
  if #s > max then
    cut = ("... (%d bytes)"):format(#s)
    s = s:sub(1, max)
  end
  return ("%q"):format(s):gsub("\\\n", "\\n") .. cut
end

local function scalar(v, opts)
  local t = type(v)
  if t == "string" then return quote(v, opts.max_string) end
  if v == json.null then return "null" end
  if t == "number" and math.type(v) == "float" and v == math.floor(v) and v > -1e15 and v < 1e15 then
    return ("%.1f"):format(v) -- keep floats visibly floats
  end
  if t == "number" or t == "boolean" or t == "nil" then return tostring(v) end
  if t == "function" then return "<function>" end
  return "<" .. tostring(v) .. ">"
end

local function key_text(k, opts)
  if type(k) == "string" and k:match("^[%a_][%w_]*$") and not KEYWORDS[k] then return k end
  return "[" .. scalar(k, opts) .. "]"
end

local function type_name(t)
  local mt = getmetatable(t)
  local name = type(mt) == "table" and rawget(mt, "__name")
  if type(name) == "string" and not name:match("^geoservices%.json%.") then return name .. " " end
  return ""
end

local function format_table(t, opts, depth, seen, out, prefix)
  if seen[t] then out[#out + 1] = prefix .. "<cycle>"; return end
  local name = type_name(t)
  if depth >= opts.max_depth then out[#out + 1] = prefix .. name .. "{...}"; return end
  local n = rawlen(t)
  local keys = {}
  for k in next, t do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  if n == 0 and #keys == 0 then out[#out + 1] = prefix .. name .. "{}"; return end
  table.sort(keys, key_less)
  if #keys == 0 then -- a short array of scalars fits on one line
    local parts, width = {}, #prefix + #name
    for i = 1, math.min(n, opts.max_items) do
      local v = rawget(t, i)
      if type(v) == "table" then parts = nil; break end
      parts[i] = scalar(v, opts)
      width = width + #parts[i] + 2
    end
    if parts and width <= 100 then
      if n > opts.max_items then parts[#parts + 1] = ("... %d more"):format(n - opts.max_items) end
      out[#out + 1] = prefix .. name .. "{ " .. table.concat(parts, ", ") .. " }"
      return
    end
  end
  seen[t] = true
  local pad = opts.indent:rep(depth + 1)
  local header = prefix .. name .. "{"
  if n > opts.max_items then header = header .. (" -- %d items"):format(n) end
  out[#out + 1] = header
  local function item(k_prefix, v)
    if type(v) == "table" then
      format_table(v, opts, depth + 1, seen, out, pad .. k_prefix)
      out[#out] = out[#out] .. ","
    else
      out[#out + 1] = pad .. k_prefix .. scalar(v, opts) .. ","
    end
  end
  for i = 1, math.min(n, opts.max_items) do item("", rawget(t, i)) end
  if n > opts.max_items then out[#out + 1] = pad .. ("-- ... %d more"):format(n - opts.max_items) end
  for _, k in ipairs(keys) do
    local v = rawget(t, k)
    if SECRETS[k] and v ~= nil and v ~= json.null and v ~= "" then
      out[#out + 1] = pad .. key_text(k, opts) .. " = <redacted>,"
    else
      item(key_text(k, opts) .. " = ", v)
    end
  end
  out[#out + 1] = opts.indent:rep(depth) .. "}"
  seen[t] = nil
end

--- Formats `value` as Lua-like text.
-- @param value any value; tables are walked with `rawget`/`next`, so metatables never run
-- @tparam[opt] table opts overrides of @{DEFAULTS}
-- @treturn string the text, without a trailing newline
-- @raise never: cycles print as `<cycle>`, functions and userdata as `<tostring>`
function pp.format(value, opts)
  local o = {}
  for k, v in pairs(pp.DEFAULTS) do o[k] = v end
  for k, v in pairs(opts or {}) do o[k] = v end
  -- the text is scrubbed too: a string may hold a secret in any encoding
  if type(value) ~= "table" then return redact.text(scalar(value, o)) end
  local out = {}
  format_table(value, o, 0, {}, out, "")
  return redact.text(table.concat(out, "\n"))
end

--- Prints `value` with @{format} to standard output (`geoservices.pp(value)`).
-- @param value any value
-- @tparam[opt] table opts as for @{format}
-- @return nothing
-- @raise never
function pp.print(value, opts)
  io.stdout:write(pp.format(value, opts), "\n")
end

return setmetatable(pp, { __call = function(_, value, opts) return pp.print(value, opts) end })
