--- The client object: connection settings, the token, one driver (so
-- connections are reused), and the request/response handling that every
-- operation shares: form encoding, JSON decoding, error classification and
-- the one-time token refresh on code 498.
local core = require "geoservices.core"
local errors = require "geoservices.errors"
local json = require "geoservices.json"
local params = require "geoservices.params"
local transport = require "geoservices.transport"

local client = {}

local Client = {}
Client.__index = Client
Client.__name = "geoservices.Client"

local DEFAULT_TIMEOUT = 30

local function check_option(opts, name, expected, default)
  local value = opts[name]
  if value == nil then return default end
  if type(value) ~= expected then
    error(("geoservices.client: option '%s' must be a %s, got %s"):format(name, expected, type(value)), 3)
  end
  return value
end

local known_options = {
  url = true, admin_path = true, token = true, timeout = true, ca_file = true, insecure = true,
  user_agent = true, max_response_bytes = true, max_host_connections = true, enum_prefix = true,
}

--- Creates a client. Raises on misuse (wrong option types, missing url).
-- opts: url (required, the {base_url}), admin_path ("admin"), token (string
-- or function returning one), timeout (seconds per request, 30), ca_file,
-- insecure (skip TLS verification; explicit opt-in), user_agent,
-- max_response_bytes, max_host_connections, enum_prefix (the vendor prefix of
-- enumerated values such as svcTransportTypeUrl; default "svc").
function client.new(opts)
  if type(opts) ~= "table" then error("geoservices.client: expected an options table", 2) end
  for name in pairs(opts) do
    if not known_options[name] then error(("geoservices.client: unknown option '%s'"):format(tostring(name)), 2) end
  end
  local url = check_option(opts, "url", "string")
  if not url or not (url:match("^https?://[^/]") or url:match("^file://")) then
    error("geoservices.client: option 'url' must be an http(s):// address", 2)
  end
  local token = opts.token
  if token ~= nil and type(token) ~= "string" and type(token) ~= "function" then
    error("geoservices.client: option 'token' must be a string or a function", 2)
  end
  local timeout = check_option(opts, "timeout", "number", DEFAULT_TIMEOUT)
  if timeout <= 0 then error("geoservices.client: option 'timeout' must be positive", 2) end
  local admin_path = check_option(opts, "admin_path", "string", "admin"):gsub("^/+", ""):gsub("/+$", "")
  local self = setmetatable({
    url = url:gsub("/+$", ""),
    admin_path = admin_path,
    timeout = timeout,
    ca_file = check_option(opts, "ca_file", "string"),
    insecure = check_option(opts, "insecure", "boolean", false),
    user_agent = check_option(opts, "user_agent", "string"),
    max_response_bytes = check_option(opts, "max_response_bytes", "number"),
    enum_prefix = check_option(opts, "enum_prefix", "string", "svc"),
  }, Client)
  -- The token lives in a closure, not a field, so printing or dumping the
  -- client (pp, inspect, error reports) can never reveal it.
  local provider = type(token) == "function" and token or nil
  local current = type(token) == "string" and token or nil
  self.has_token = token ~= nil
  self.token_provider = provider ~= nil
  function self._token(refresh)
    if provider and (refresh or current == nil) then
      local fresh = provider(refresh and "refresh" or "initial")
      if type(fresh) ~= "string" or fresh == "" then
        return nil, errors.new("auth", "token provider returned no token")
      end
      current = fresh
    end
    return current
  end
  self.driver = core.driver{ max_host_connections = check_option(opts, "max_host_connections", "number") }
  return self
end

function Client:__tostring()
  local token = self.token_provider and "token provider" or (self.has_token and "token" or "no token")
  return ("geoservices.Client <%s> (admin path '%s', %s, timeout %g s)"):format(
    self.url, self.admin_path, token, self.timeout)
end

--- Address of an administrative resource, `{base_url}/{admin_path}/{path}`.
function Client:admin_url(path)
  if self.admin_path == "" then return self.url .. "/" .. path end
  return self.url .. "/" .. self.admin_path .. (path ~= "" and ("/" .. path) or "")
end

local function strip_html(body)
  local text = body:gsub("<[^>]*>", " "):gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
  if #text > 120 then text = text:sub(1, 117) .. "..." end
  return text
end

-- A JSON {"error": {...}} body is a server error whatever the HTTP status.
local function body_error(decoded, status, url)
  local e = decoded.error
  if type(e) ~= "table" then e = { message = tostring(e) } end
  local code = math.tointeger(e.code) or e.code
  local message = type(e.message) == "string" and e.message or "server reported an error"
  local details = type(e.details) == "table" and e.details or nil
  if details and #details > 0 then
    local texts = {}
    for _, d in ipairs(details) do texts[#texts + 1] = tostring(d) end
    message = message .. ": " .. table.concat(texts, "; ")
  end
  local kind = (errors.is_auth_code(code) or errors.is_auth_code(status)) and "auth" or "server"
  return errors.new(kind, message, { code = code, details = details, status = status, url = url })
end

--- Classifies a raw response: returns the decoded JSON body or nil, err.
local function decode_response(response, url, max_depth)
  local status, body = response.status, response.body
  local decoded, msg, offset
  if body ~= "" then decoded, msg, offset = json.decode(body, { max_depth = max_depth }) end
  if type(decoded) == "table" and decoded.error ~= nil then
    return nil, body_error(decoded, status, url)
  end
  if status >= 300 then -- redirects are not followed: a POST must not silently become a GET
    local kind = (status == 401 or status == 403) and "auth" or "http"
    local detail = decoded == nil and body ~= "" and (": " .. strip_html(body)) or ""
    return nil, errors.new(kind, ("HTTP %d%s"):format(status, detail), { status = status, url = url })
  end
  if decoded == nil then
    if body == "" then return nil, errors.new("protocol", "empty response body", { status = status, url = url }) end
    local ctype = response.headers["content-type"] or "unknown content type"
    return nil, errors.new("protocol", ("invalid JSON response (%s, %d bytes) at byte %s: %s"):format(
      ctype, #body, tostring(offset), tostring(msg)), { status = status, url = url, offset = offset })
  end
  if type(decoded) ~= "table" then
    return nil, errors.new("protocol", "expected a JSON object, got " .. type(decoded), { status = status, url = url })
  end
  return decoded
end

--- POSTs `fields` (plus f=json and the token) form-encoded to `url` and
-- returns the decoded JSON object, or nil, err. opts: timeout (seconds),
-- multipart (send as multipart/form-data instead; `files` adds file parts).
function Client:post(url, fields, opts)
  opts = opts or {}
  local timeout = opts.timeout or self.timeout
  local refreshed = false
  while true do
    local token, token_err = self._token(false)
    if token_err then return nil, token_err end
    local spec = {
      url = url,
      method = "POST",
      timeout_ms = math.max(1, math.floor(timeout * 1000)),
      ca_file = self.ca_file,
      insecure = self.insecure,
      user_agent = self.user_agent,
      max_response_bytes = self.max_response_bytes,
    }
    local form = params.to_form(fields, token)
    if opts.multipart then
      local parts = {}
      for i, pair in ipairs(form) do parts[i] = { name = pair[1], value = tostring(pair[2]) } end
      for _, part in ipairs(opts.files or {}) do parts[#parts + 1] = part end
      spec.multipart = parts
    else
      spec.form = form
    end
    local response, msg, code = transport.perform(self.driver, spec)
    if not response then return nil, errors.from_transfer(msg, code, url) end
    local decoded, err = decode_response(response, url)
    -- An expired token (498) is worth exactly one more try with a fresh one
    -- from the provider; a static token cannot be refreshed.
    if err and err.kind == "auth" and err.code == 498 and self.token_provider and not refreshed then
      refreshed = true
      local _, refresh_err = self._token(true)
      if refresh_err then return nil, refresh_err end
    else
      return decoded, err
    end
  end
end

--- GETs a file (a sync result) and returns its bytes, or nil, err. No token
-- is sent: result addresses are self-contained, and a token never goes in a URL.
function Client:download(url, opts)
  opts = opts or {}
  local response, msg, code = transport.perform(self.driver, {
    url = url,
    method = "GET",
    timeout_ms = math.max(1, math.floor((opts.timeout or self.timeout) * 1000)),
    ca_file = self.ca_file,
    insecure = self.insecure,
    user_agent = self.user_agent,
    max_response_bytes = self.max_response_bytes,
  })
  if not response then return nil, errors.from_transfer(msg, code, url) end
  if response.status >= 300 then
    local kind = (response.status == 401 or response.status == 403) and "auth" or "http"
    return nil, errors.new(kind, ("HTTP %d while downloading the result file"):format(response.status),
      { status = response.status, url = url })
  end
  return response.body
end

function Client:close()
  self.driver:close()
end

Client.__close = Client.close

client.Client = Client
return client
