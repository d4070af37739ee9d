--- The one list of secrets, and the scrubber every printing path uses.
--
-- Every secret the library holds is registered here as it comes into use:
-- a client's token (given, returned by a provider or generated), the
-- password a token is generated with, the secret members of any request's
-- parameters (`password`, `securityQuestionAns`, `secretKey`, `accessKey`,
-- `token`, and the names a caller adds with @{mark_secret_name}), and any
-- value a caller registers itself (`geoservices.redact.register(value)`).
--
-- @{text} then removes every registered secret from a text in every form it
-- takes on the wire and in output, in any mix, up to two layers deep (a
-- percent-encoded JSON text, a double percent-encoding):
--
--  * raw;
--  * percent-encoded, upper or lower hex, a space as `%20` or `+` (and `%uXXXX`);
--  * JSON- or C-escaped: `\/`, `\"`, `\\`, `\uXXXX` in either case, `\xXX`;
--  * HTML entities: `&amp;`, `&quot;`, `&#38;`, `&#x26;`...;
--  * base64 (standard or URL alphabet, at any alignment inside a longer
--    base64 text), so a credential in a `Basic` or `Bearer` header is found;
--    a `Basic` credential is always redacted, being a user and a password;
--  * cut short: before "..." when at least half of it (and six bytes)
--    shows, at the very end of a text when two thirds (and eight) do:
--    a message shortened to fit.
--
-- Errors are scrubbed where they are made (geoservices.errors), and so are
-- the command's output (every line, `--json` event and dry run), the
-- pretty-printer's text and the store's sync log, which is written from
-- errors. It sits in the shared base rather than in configure/ because the
-- client registers its own secrets and must not depend on an operation;
-- users reach it as the façade's field `geoservices.redact`.
-- @module geoservices.redact
local redact = {}

local byte, char, find, sub = string.byte, string.char, string.find, string.sub
local concat = table.concat

--- Members whose values are secrets, at any depth (2.7 HMAC keys and the
-- database password share names with configure's top-level password).
-- @table SECRET_KEYS
redact.SECRET_KEYS = {
  token = true, password = true, securityQuestionAns = true, secretKey = true, accessKey = true,
}
local BUILT_IN = {}
for k in pairs(redact.SECRET_KEYS) do BUILT_IN[k] = true end

--- What a secret is replaced with.
redact.MARK = "<redacted>"

--- A shorter registered value is ignored: it would blank ordinary words.
redact.MIN_LENGTH = 4

--- Secrets kept at most; past this the oldest registered goes first (a
-- long-running process replaces its token every hour).
redact.MAX_SECRETS = 256

--- Whether a member name holds a secret.
-- @param name a member name
-- @treturn boolean
function redact.is_secret(name)
  return redact.SECRET_KEYS[name] == true
end

--- Makes `name` a secret member name too (a parameter the caller marks
-- secret): its values are redacted from dry runs and printouts, and
-- registered when a request carries them.
-- @string name the member name
-- @raise when name is not a non-empty string
function redact.mark_secret_name(name)
  if type(name) ~= "string" or name == "" then error("redact.mark_secret_name: expected a name", 2) end
  redact.SECRET_KEYS[name] = true
end

--- Undoes @{mark_secret_name} (the built-in names stay).
-- @string name the member name
function redact.unmark_secret_name(name)
  if not BUILT_IN[name] then redact.SECRET_KEYS[name] = nil end
end

---------------------------------------------------------------------------
-- The registry. Each secret brings its needles: itself (matched in every
-- encoding, and cut short at the end of a text) and the parts of its base64
-- forms that do not depend on the bytes around it.

local registered = {} -- secret -> true
local order = {}      -- secrets, oldest first
local needles -- built on demand: { {text =, partial =, base64 =}, ... }

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

local function base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = byte(s, i, i + 2)
    local n = (a << 16) | ((b or 0) << 8) | (c or 0)
    for k = 3, 0, -1 do
      local v = (n >> (6 * k)) & 63
      out[#out + 1] = sub(B64, v + 1, v + 1)
    end
  end
  return concat(out)
end

-- The base64 characters made only of the secret's bits when it starts
-- `offset` bytes into a group of three: the same inside any base64 text
-- that holds the secret at that alignment.
local function base64_cores(secret)
  local cores = {}
  for offset = 0, 2 do
    local first = (8 * offset + 5) // 6               -- first character wholly inside the secret
    local last = (8 * offset + 8 * #secret) // 6 - 1  -- last one
    if last - first + 1 >= 6 then
      local encoded = base64(("\0"):rep(offset) .. secret .. "\0\0")
      local core = sub(encoded, first + 1, last + 1)
      cores[#cores + 1] = core
      local url = core:gsub("[+/]", { ["+"] = "-", ["/"] = "_" })
      if url ~= core then cores[#cores + 1] = url end
    end
  end
  return cores
end

local function changed()
  needles = nil
end

local function build()
  local list = {}
  for _, secret in ipairs(order) do
    -- cut before "...": half of it shows; at the very end of a text two
    -- thirds (a word that begins a secret, "expired" of "expired-token",
    -- often ends a message)
    local partial = math.max(6, (#secret + 1) // 2)
    list[#list + 1] = { text = secret, partial = partial, partial_end = math.max(8, (2 * #secret + 2) // 3),
                        head = sub(secret, 1, partial) }
    for _, core in ipairs(base64_cores(secret)) do list[#list + 1] = { text = core, base64 = true } end
  end
  needles = list
end

--- Registers a secret: from now on @{text} removes it in every form.
-- Strings shorter than @{MIN_LENGTH} and other values are ignored.
-- @param value the secret
-- @return value, unchanged (so a call can wrap the value where it is used)
-- @raise never
function redact.register(value)
  if type(value) == "string" and #value >= redact.MIN_LENGTH and not registered[value] then
    registered[value] = true
    order[#order + 1] = value
    while #order > redact.MAX_SECRETS do registered[table.remove(order, 1)] = nil end
    changed()
  end
  return value
end

--- Removes a secret from the list (a test's own; a value no longer secret).
-- @param value the secret
function redact.forget(value)
  if not registered[value] then return end
  registered[value] = nil
  for i, s in ipairs(order) do
    if s == value then table.remove(order, i) break end
  end
  changed()
end

--- How many secrets are registered.
-- @treturn integer
function redact.count()
  return #order
end

-- Parameters can be large (a sync's edits): the walk looks this deep, and
-- at this many items of an array.
local MAX_DEPTH, MAX_ITEMS = 6, 32

local function register_walk(value, depth)
  if depth > MAX_DEPTH then return end
  local n = 0
  for k, v in next, value do
    if type(k) == "string" and redact.SECRET_KEYS[k] then
      if type(v) == "string" then redact.register(v) end
    elseif type(v) == "table" then
      register_walk(v, depth + 1)
    end
    n = n + 1
    if n >= MAX_ITEMS and value[1] ~= nil then break end
  end
end

--- Registers the values of every secret member of `fields` (at any depth,
-- the first items of each array): what a request is about to carry.
-- @tparam table fields the parameters
-- @raise never
function redact.register_fields(fields)
  if type(fields) == "table" then register_walk(fields, 1) end
end

---------------------------------------------------------------------------
-- Finding the needles. The text is decoded one layer at a time (every
-- escape of every kind in one pass: %XX, %uXXXX, + as a space or not,
-- \-escapes, HTML entities), each decoded view keeping a map back to the
-- bytes it came from; the needles are then plain searches in each view, so
-- a text without secrets costs a few passes in C. Two layers cover a
-- percent-encoded JSON text and a double percent-encoding.

local ESCAPE_START = "[%%+\\&]"
local SIMPLE_ESCAPES = { ["/"] = "/", ['"'] = '"', ["\\"] = "\\", ["'"] = "'", n = "\n", t = "\t", r = "\r",
                         b = "\b", f = "\f" }
local ENTITIES = { amp = "&", lt = "<", gt = ">", quot = '"', apos = "'", plus = "+", sol = "/", num = "#",
                   percnt = "%", equals = "=", excl = "!", nbsp = " " }

local function code_point(code)
  if code > 0x10FFFF or (code >= 0xD800 and code <= 0xDFFF) then return nil end
  return utf8.char(code)
end

-- The escape at byte i of text: its decoded bytes and its length, or nil.
local function escape_at(text, i, plus)
  local c = byte(text, i)
  if c == 37 then -- %
    local hex = text:match("^%x%x", i + 1)
    if hex then return char(tonumber(hex, 16)), 3 end
    hex = text:match("^[uU](%x%x%x%x)", i + 1)
    if hex then return code_point(tonumber(hex, 16)), 6 end
  elseif c == 43 then -- +
    if plus then return " ", 1 end
  elseif c == 92 then -- \
    local e = sub(text, i + 1, i + 1)
    if SIMPLE_ESCAPES[e] then return SIMPLE_ESCAPES[e], 2 end
    local hex = text:match("^[uU](%x%x%x%x)", i + 1)
    if hex then
      local high = tonumber(hex, 16)
      local low = high >= 0xD800 and high <= 0xDBFF and text:match("^\\[uU]([dD][c-fC-F]%x%x)", i + 6)
      if low then return utf8.char(0x10000 + ((high - 0xD800) << 10) + (tonumber(low, 16) - 0xDC00)), 12 end
      return code_point(high), 6
    end
    hex = text:match("^x(%x%x)", i + 1)
    if hex then return char(tonumber(hex, 16)), 4 end
  elseif c == 38 then -- &
    local name = text:match("^#?%w+;", i + 1)
    if name and #name <= 9 then
      name = name:sub(1, -2)
      local code = name:match("^#(%d+)$")
      code = code and tonumber(code) or (name:match("^#[xX]%x+$") and tonumber(name:sub(3), 16))
      local decoded
      if code then decoded = code_point(code) else decoded = ENTITIES[name] end
      if decoded then return decoded, #name + 2 end
    end
  end
  return nil
end

-- One layer decoded: the view, and its map (parallel arrays: where each
-- replaced escape starts in the view and in the text, and both lengths).
local function decode_layer(text, plus)
  local out, map = {}, { view = {}, from = {}, view_len = {}, from_len = {} }
  local flushed, search, at = 1, 1, 1 -- at: where the next view byte goes
  while true do
    local i = find(text, ESCAPE_START, search)
    if not i then break end
    local decoded, len = escape_at(text, i, plus)
    if decoded then
      out[#out + 1] = sub(text, flushed, i - 1)
      at = at + (i - flushed)
      out[#out + 1] = decoded
      local n = #map.view + 1
      map.view[n], map.from[n], map.view_len[n], map.from_len[n] = at, i, #decoded, len
      at = at + #decoded
      flushed, search = i + len, i + len
    else
      search = i + 1
    end
  end
  if #map.view == 0 then return nil end
  out[#out + 1] = sub(text, flushed)
  return concat(out), map
end

-- Where byte d of a view came from: the first byte of its escape (edge
-- "first") or the last (edge "last").
local function map_back(map, d, edge)
  local lo, hi, k = 1, #map.view, 0
  while lo <= hi do -- the last escape starting at or before d
    local mid = (lo + hi) // 2
    if map.view[mid] <= d then k, lo = mid, mid + 1 else hi = mid - 1 end
  end
  if k == 0 then return d end
  local view_end = map.view[k] + map.view_len[k]
  if d < view_end then
    return edge == "first" and map.from[k] or map.from[k] + map.from_len[k] - 1
  end
  return map.from[k] + map.from_len[k] + (d - view_end)
end

-- The decoded views of a text: { {text =, maps = {layer 1 map, layer 2 map}} }.
local function views_of(text)
  local views = { { text = text, maps = {} } }
  if not find(text, ESCAPE_START) then return views end
  local seen = { [text] = true }
  local function add(from, plus)
    local decoded, map = decode_layer(from.text, plus)
    if not decoded or seen[decoded] then return nil end
    seen[decoded] = true
    local maps = { table.unpack(from.maps) }
    maps[#maps + 1] = map
    local view = { text = decoded, maps = maps }
    views[#views + 1] = view
    return view
  end
  local first = { add(views[1], false), find(text, "+", 1, true) and add(views[1], true) or nil }
  for _, v in ipairs(first) do
    if find(v.text, ESCAPE_START) then
      add(v, false)
      add(v, true)
    end
  end
  return views
end

-- A span [first, last] of a view, in the bytes of the original text.
local function span_back(view, first, last)
  for k = #view.maps, 1, -1 do
    first, last = map_back(view.maps[k], first, "first"), map_back(view.maps[k], last, "last")
  end
  return first, last
end

local B64_CHAR = "[%w+/_%-]"

-- A base64 core is widened to the characters around it that mix its bits
-- with its neighbours', and the padding.
local function widen_base64(text, first, last)
  for _ = 1, 3 do
    if first > 1 and find(sub(text, first - 1, first - 1), B64_CHAR) then first = first - 1 end
  end
  for _ = 1, 3 do
    if find(sub(text, last + 1, last + 1), B64_CHAR) then last = last + 1 end
  end
  while true do
    if sub(text, last + 1, last + 1) == "=" then last = last + 1
    elseif sub(text, last + 1, last + 3):upper() == "%3D" then last = last + 3
    else break end
  end
  return first, last
end

-- Where a cut needle may end in a view: its end, before half an escape at
-- its end, or before a "..." (to_end: the cut runs to the end of the text).
local function cut_points(view)
  local points = { { #view + 1, true } }
  local half = sub(view, -5):match("()[%%\\&][^%%\\&]*$") -- an escape cut in half
  if half then points[2] = { #view - math.min(#view, 5) + half, true } end
  local dots = find(view, "...", 1, true)
  while dots do
    points[#points + 1] = { dots, false }
    dots = find(view, "...", dots + 3, true)
  end
  return points
end

-- A needle cut short: at least `partial` of its first bytes just before a
-- "...", `partial_end` before the end. Returns where they start and end in
-- the view, and to_end.
local function cut_short(view, needle, points)
  local s, head = needle.text, needle.head
  for _, point in ipairs(points) do
    local stop = point[1]
    local before = sub(view, math.max(1, stop - #s), stop - 1)
    if find(before, head, 1, true) then
      for k = #s - 1, point[2] and needle.partial_end or needle.partial, -1 do
        if stop - k >= 1 and sub(view, stop - k, stop - 1) == sub(s, 1, k) then return stop - k, stop - 1, point[2] end
      end
    end
  end
  return nil
end

local function scrub_needles(text)
  if not needles then build() end
  if #needles == 0 then return text end
  local spans = {}
  for _, view in ipairs(views_of(text)) do
    local v = view.text
    local points = cut_points(v)
    for _, n in ipairs(needles) do
      local from = 1
      while true do
        local i, j = find(v, n.text, from, true)
        if not i then break end
        local first, last = span_back(view, i, j)
        if n.base64 then first, last = widen_base64(text, first, last) end
        spans[#spans + 1] = { first, last }
        from = j + 1
      end
      if n.partial then
        local i, j, to_end = cut_short(v, n, points)
        if i then
          local first, last = span_back(view, i, j)
          spans[#spans + 1] = { first, to_end and #text or last }
        end
      end
    end
  end
  if #spans == 0 then return text end
  table.sort(spans, function(a, b) return a[1] < b[1] end)
  local parts, last = {}, 0
  for _, s in ipairs(spans) do
    if s[1] > last then
      parts[#parts + 1] = sub(text, last + 1, s[1] - 1)
      parts[#parts + 1] = redact.MARK
      last = s[2]
    elseif s[2] > last then
      last = s[2]
    end
  end
  parts[#parts + 1] = sub(text, last + 1)
  return concat(parts)
end

local B64_VALUE = {}
for i = 1, 64 do B64_VALUE[byte(B64, i)] = i - 1 end
B64_VALUE[byte("-")], B64_VALUE[byte("_")] = 62, 63

local function unbase64(s)
  s = s:gsub("=+$", "")
  local out = {}
  local bits, n = 0, 0
  for i = 1, #s do
    local v = B64_VALUE[byte(s, i)]
    if not v then return nil end
    bits, n = (bits << 6) | v, n + 6
    if n >= 8 then
      n = n - 8
      out[#out + 1] = char((bits >> n) & 255)
    end
  end
  return concat(out)
end

-- Credentials after "Basic" or "Bearer" (and a space, "%20" or "+"): a
-- Basic one is always a user and a password; a Bearer one is redacted when
-- it holds a registered secret, raw or base64-encoded.
local SEPARATORS = { " ", "\t", "%20", "+" }

local function scrub_credentials(text)
  local lower = text:lower()
  if not find(lower, "basic", 1, true) and not find(lower, "bearer", 1, true) then return text end
  local parts, last, pos = {}, 1, 1
  while true do
    local s, e, word = find(lower, "%f[%a](b[ae][sa][ir][ce]r?)%f[^%a]", pos)
    if not s then break end
    pos = e + 1
    if word == "basic" or word == "bearer" then
      local at = e + 1
      local moved = true
      while moved do -- the separators: spaces, "%20" or "+"
        moved = false
        for _, sep in ipairs(SEPARATORS) do
          if sub(text, at, at + #sep - 1) == sep then at, moved = at + #sep, true end
        end
      end
      local cred = at > e + 1 and text:match("^[%w+/=%%_%-]+", at)
      if cred and #cred >= 8 then
        local decoded = unbase64((cred:gsub("%%(%x%x)", function(h) return char(tonumber(h, 16)) end)))
        local secret
        if word == "basic" then
          secret = decoded ~= nil and find(decoded, ":", 1, true) ~= nil
        else
          secret = decoded ~= nil and scrub_needles(decoded) ~= decoded
        end
        if secret then
          parts[#parts + 1] = sub(text, last, at - 1)
          parts[#parts + 1] = redact.MARK
          last = at + #cred
          pos = last
        end
      end
    end
  end
  if #parts == 0 then return text end
  parts[#parts + 1] = sub(text, last)
  return concat(parts)
end

--- A copy of `text` with every registered secret, in every form, and every
-- Basic credential replaced by "<redacted>"; anything else as it was.
-- @param text a string (other values are returned as they are)
-- @return the scrubbed text
-- @raise never
function redact.text(text)
  if type(text) ~= "string" or text == "" then return text end
  return scrub_credentials(scrub_needles(text))
end

--- A deep copy of `value` with every secret member replaced by
-- "<redacted>" (metatables kept); non-tables are returned as they are. The
-- other strings are copied as they are: a request's edits can hold a
-- million of them, and what prints the copy (a dry run, a log) scrubs its
-- text (@{text}).
-- @param value any value
-- @return the copy
-- @raise never
function redact.copy(value)
  if type(value) ~= "table" then return value end
  local out = setmetatable({}, getmetatable(value))
  for k, v in pairs(value) do
    out[k] = redact.SECRET_KEYS[k] and v ~= nil and redact.MARK or redact.copy(v)
  end
  return out
end

local function scrub_table(t, depth)
  for k, v in pairs(t) do
    if type(v) == "string" then
      t[k] = redact.text(v)
    elseif type(v) == "table" and depth < 3 and (k == "details" or k == "cause" or type(k) == "number") then
      scrub_table(v, depth + 1)
    end
  end
end

--- Removes every registered secret (and the given ones, registered first)
-- from an error's strings: message, url, code, details, cause. A server
-- that reflects the request must not put a secret into `tostring(err)`.
-- @tparam table err the error (changed in place)
-- @tparam[opt] table secrets more secret strings
-- @treturn table err
-- @raise never
function redact.scrub(err, secrets)
  for _, s in ipairs(secrets or {}) do redact.register(s) end
  if type(err) ~= "table" or #order == 0 then return err end
  scrub_table(err, 1)
  return err
end

return redact
