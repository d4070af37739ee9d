--- Classifies a finished HTTP response: the decoded JSON object, or an
-- error of the right kind. Pure: it reads the response table the C core
-- returned and sends nothing.
--
-- A JSON `{"error": {...}}` body is a server error whatever the HTTP status;
-- redirects are not followed, so a 3xx is an error too (a POST must not
-- silently become a GET, and the token must not follow): it names where it
-- pointed (@{redirect_error}).
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"

local response = {}

local function strip_html(body)
  local text = body:gsub("<[^>]*>", " "):gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
  if #text > 120 then text = text:sub(1, 117) .. "..." end
  return text
end

--- The error of a decoded JSON error body (`{"error": {...}}`).
-- @tparam table decoded the body's top-level fields
-- @int status the HTTP status
-- @string url the address
-- @treturn table the error: kind "auth" for token codes, else "server"
function response.body_error(decoded, status, url)
  local e = decoded.error
  if type(e) ~= "table" then e = { message = tostring(e) } end
  local code = math.tointeger(e.code) or e.code
  local message = type(e.message) == "string" and e.message:find("%S") and e.message or nil
  local details = type(e.details) == "table" and e.details or nil
  if details and #details > 0 then
    local texts = {}
    for _, d in ipairs(details) do texts[#texts + 1] = tostring(d) end
    -- never an empty message: the details alone when the server gave none
    message = (message and (message .. ": ") or "") .. table.concat(texts, "; ")
  end
  message = message or "server reported an error"
  local kind = (errors.is_auth_code(code) or errors.is_auth_code(status)) and "auth" or "server"
  return errors.new(kind, message, { code = code, details = details, status = status, url = url })
end

--- The error a JSON document carries, in either dialect the server speaks
-- (`{"error": {...}}`, or the admin endpoints' `{"status": "error",
-- "messages": [...], "code": 498}`), with HTTP 200 or not; nil when it
-- carries none. Used for responses and for downloaded result files alike.
-- @tparam table fields the document's top-level fields
-- @int status the HTTP status
-- @string url the address
-- @treturn ?table the error
function response.error_of(fields, status, url)
  if fields.error ~= nil then return response.body_error(fields, status, url) end
  if type(fields.status) == "string" and fields.status:lower() == "error" then
    local messages = fields.messages
    if type(messages) == "string" then messages = { messages } end
    if type(messages) ~= "table" then messages = { fields.message } end
    local first = messages[1] ~= nil and tostring(messages[1]) or nil
    return response.body_error({ error = { code = fields.code, message = first or "server reported an error",
      details = #messages > 1 and { table.unpack(messages, 2) } or nil } }, status, url)
  end
  return nil
end

local REDIRECTS = { [301] = true, [302] = true, [303] = true, [307] = true, [308] = true }

-- `location` as an absolute address, resolved against the request's `url`.
local function absolute(location, url)
  if location:match("^%a[%w+.-]*://") then return location end
  local scheme, authority = url:match("^(%a[%w+.-]*)://([^/?#]*)")
  if not scheme then return location end
  if location:sub(1, 2) == "//" then return scheme .. ":" .. location end
  if location:sub(1, 1) == "/" then return scheme .. "://" .. authority .. location end
  return (url:gsub("[?#].*$", ""):match("^(.*/)") or (url .. "/")) .. location
end

-- The base address that gives `target` the path `url` has below `base`
-- (the server moved: http to https, another host or port, another context
-- path), or nil when the redirect does not keep that path.
local function moved_base(target, url, base)
  local function path(u) return (u:gsub("[?#].*$", "")) end
  base = path(base):gsub("/+$", "")
  local u, t = path(url), path(target)
  if u:sub(1, #base) ~= base then return nil end
  local below = u:sub(#base + 1)
  if below == "" then return (t:gsub("/+$", "")) end
  if #t > #below and t:sub(-#below) == below then return t:sub(1, #t - #below) end
  return nil
end

--- The error of a redirect (301, 302, 303, 307, 308 with a Location), or
-- nil. Redirects are never followed: a POST must not become a GET, and the
-- token goes only to the client's own address, so nothing (the token
-- least of all) reaches where it points. The error names the Location and,
-- when the redirect keeps the request's path below the client's address
-- (the server moved), the address to set instead.
-- @int status the HTTP status
-- @tparam ?string location the Location header
-- @string url the request's address
-- @tparam ?string base the client's address (nil: no advice about it)
-- @string[opt] what what was asked for ("the result file"), for the message
-- @treturn ?table err: kind "http", code "redirect", `status`, `url`, `location`
function response.redirect_error(status, location, url, base, what)
  if not REDIRECTS[status] or type(location) ~= "string" or location == "" then return nil end
  local target = absolute(location, url)
  local message = ("%sthe server redirected to %s (HTTP %d); redirects are not followed, so neither the request "
    .. "nor the token went there"):format(what and (what .. ": ") or "", target, status)
  local new_base = base and moved_base(target, url, base)
  if new_base and new_base ~= base:gsub("/+$", "") then
    message = message .. (": if the server moved, set the client's url (--url, GEOSERVICES_URL) to %s"):format(
      new_base)
  elseif base then
    message = message .. ": if the server moved, set the client's url (--url, GEOSERVICES_URL) to its new address"
  end
  return errors.new("http", message, { code = "redirect", status = status, url = url, location = target,
                                       suggested_url = new_base })
end

--- A whole response body: its decoded JSON object, or nil, err.
-- @tparam table resp the C core's response (`status`, `headers`, and `body`, or `json`: the body
--   already decoded by a request made with the `json` option, which gives a body that is not JSON
--   as `body`)
-- @string url the address
-- @tparam[opt] number max_depth nesting limit (the same as the request's when it decoded the body)
-- @tparam[opt] boolean array_ok a top-level JSON array is an answer too (a resource that lists)
-- @treturn[1] table the decoded object
-- @return[2] nil
-- @treturn[2] table err: kind "server", "auth", "http" or "protocol"
function response.decode(resp, url, max_depth, array_ok)
  -- a body decoded by the core is never looked at again (a lean result has none)
  local status, decoded = resp.status, resp.json
  local body, msg, offset
  if decoded == nil then
    body = resp.body
    if body ~= "" then decoded, msg, offset = json.decode(body, { max_depth = max_depth }) end
  end
  local object = type(decoded) == "table" and not json.is_array(decoded)
  local carried = object and response.error_of(decoded, status, url)
  if carried then return nil, carried end
  if status >= 300 then
    local kind = (status == 401 or status == 403) and "auth" or "http"
    local detail = decoded == nil and body ~= "" and (": " .. strip_html(body)) or ""
    return nil, errors.new(kind, ("HTTP %d%s"):format(status, detail), { status = status, url = url })
  end
  if decoded == nil then
    if body == "" then return nil, errors.new("protocol", "empty response body", { status = status, url = url }) end
    local ctype = resp.headers["content-type"] or "unknown content type"
    return nil, errors.new("protocol", ("invalid JSON response (%s, %d bytes) at byte %s: %s"):format(
      ctype, #body, tostring(offset), tostring(msg)), { status = status, url = url, offset = offset })
  end
  if not object and not (array_ok and json.is_array(decoded)) then
    local got = type(decoded) == "table" and "an array" or type(decoded)
    return nil, errors.new("protocol", "expected a JSON object, got " .. got, { status = status, url = url })
  end
  return decoded
end

--- A response whose body streamed into a record sink: a successful body
-- went to the extractor, so only its top-level `fields` are checked; an
-- error page never reached it and is classified from its bytes.
-- @tparam table resp the C core's response
-- @string url the address
-- @tparam userdata records the core.records extractor the body was fed to
-- @tparam function deliver receives the records still held by the extractor
-- @tparam table fields the top-level fields seen so far (filled through deliver)
-- @tparam[opt] number max_depth nesting limit
-- @treturn[1] table fields
-- @return[2] nil
-- @treturn[2] table err
function response.streamed(resp, url, records, deliver, fields, max_depth)
  if resp.status >= 300 then return response.decode(resp, url, max_depth) end
  if resp.json_error then
    return nil, errors.new("protocol", "invalid JSON response: " .. resp.json_error,
      { status = resp.status, url = url, offset = resp.json_offset })
  end
  local done, msg, offset = records:finish()
  if not done then
    return nil, errors.new("protocol", "invalid JSON response: " .. msg,
      { status = resp.status, url = url, offset = offset })
  end
  records:drain(deliver)
  local carried = response.error_of(fields, resp.status, url)
  if carried then return nil, carried end
  return fields
end

return response
