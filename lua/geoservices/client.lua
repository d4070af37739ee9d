--- The client object: connection settings, the token, one driver (so
-- connections are reused), and the request/response handling that every
-- operation shares: form encoding, JSON decoding, error classification and
-- the one-time token refresh on code 498.
--
-- Users make a client with `geoservices.client{...}` (which calls @{new});
-- the four operations are methods added by the `geoservices` module:
-- `get_services_by_id`, `list_snapshots` (geoservices.admin),
-- `synchronize_replica`, `sync`, `resume_sync` (geoservices.sync) and
-- `configure`, `configure_status`, `wait_configured` (geoservices.configure).
-- The methods documented here are the shared machinery under them.
--
-- Runtime failures are returned as `nil, err` (a geoservices.errors table);
-- misuse (wrong option types, unknown options) raises.
-- @module geoservices.client
local core = require "geoservices.core"
local errors = require "geoservices.errors"
local json = require "geoservices.json"
local params = require "geoservices.form"
local retry = require "geoservices.net.retry"
local transport = require "geoservices.net.transport"

local client = {}

local Client = {}
Client.__index = Client
Client.__name = "geoservices.Client"

local DEFAULT_TIMEOUT = 30
local DEFAULT_DOWNLOAD_CHUNK = 8 * 1024 * 1024

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
  retry = true, max_json_depth = true, download_chunk = true,
}

--- Creates a client (`geoservices.client(opts)`). Nothing is sent: the
-- first request opens the first connection.
-- @tparam table opts the options (an unknown option raises):
-- @tparam string opts.url the server's {base_url}, `http://` or `https://` (required)
-- @tparam[opt="admin"] string opts.admin_path the administrative context path
-- @tparam[opt] string|function opts.token a token, or a token provider
--   `function(reason) -> token` called with "initial" and, after an expired token (code 498),
--   with "refresh"; the token is kept in a closure, never in a field
-- @tparam[opt=30] number opts.timeout seconds per request (positive)
-- @tparam[opt] string opts.ca_file PEM file of the certificate authorities to trust
-- @tparam[opt=false] boolean opts.insecure skip TLS certificate verification (explicit opt-in)
-- @tparam[opt] string opts.user_agent the User-Agent header
-- @tparam[opt] number opts.max_response_bytes a larger response (or result file) fails with kind "protocol"
-- @tparam[opt] number opts.max_host_connections connections kept open per host by the driver
-- @tparam[opt="svc"] string opts.enum_prefix the vendor prefix of enumerated values
--   (svcTransportTypeUrl...)
-- @tparam[opt] table|false opts.retry false (never retry) or a table overriding some of
--   geoservices.net.retry.DEFAULTS (attempts, base_delay, max_delay, max_retry_after)
-- @tparam[opt=1000] number opts.max_json_depth nesting limit of decoded responses
-- @tparam[opt=8 MiB] number|false opts.download_chunk bytes per Range request of a result file
--   (false: one plain GET)
-- @treturn Client the client; `tostring(client)` is a one-line summary without the token
-- @raise when opts is not a table, an option is unknown or of the wrong type, `url` is missing
--   or not an http(s) address, `timeout` is not positive, or `retry` is malformed
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
    retry_policy = retry.policy(opts.retry),
    max_json_depth = check_option(opts, "max_json_depth", "number"),
    download_chunk = opts.download_chunk == false and false
      or check_option(opts, "download_chunk", "number", DEFAULT_DOWNLOAD_CHUNK),
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

--- A client made by @{new}: connection settings, the token provider and one
-- driver of the C core (connections are reused across calls).
-- Fields (read only): `url`, `admin_path`, `timeout`, `has_token`,
-- `token_provider` (booleans), `retry_policy`, `driver`.
-- @type Client

-- One line: address, admin path, whether a token is set, timeout; never the token.
function Client:__tostring()
  local token = self.token_provider and "token provider" or (self.has_token and "token" or "no token")
  return ("geoservices.Client <%s> (admin path '%s', %s, timeout %g s)"):format(
    self.url, self.admin_path, token, self.timeout)
end

--- Address of an administrative resource, `{base_url}/{admin_path}/{path}`.
-- @string path the resource's path under the administrative context ("" for the root resource)
-- @treturn string the address
-- @raise when path is not a string
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

-- Classifies a raw response: returns the decoded JSON body or nil, err.
local decode_response

-- A streamed response (records mode): a successful body went to the
-- extractor, so only its top-level fields (in `sink.fields`) are checked
-- here; an error page never reached it and is classified from its bytes.
local function streamed_response(response, url, sink, max_depth)
  if response.status >= 300 then return decode_response(response, url, max_depth) end
  if response.json_error then
    return nil, errors.new("protocol", "invalid JSON response: " .. response.json_error,
      { status = response.status, url = url, offset = response.json_offset })
  end
  local done, msg, offset = sink.records:finish()
  if not done then
    return nil, errors.new("protocol", "invalid JSON response: " .. msg,
      { status = response.status, url = url, offset = offset })
  end
  sink.records:drain(sink.deliver)
  if sink.fields.error ~= nil then return nil, body_error(sink.fields, response.status, url) end
  return sink.fields
end

function decode_response(response, url, max_depth)
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

--- The options of the C core's request shared by every request of this
-- client (address, method, timeout, TLS settings, size limit). Used by
-- @{Client:post} and @{Client:download}; a user rarely needs it.
-- @string url the address
-- @string method "GET" or "POST"
-- @number deadline absolute deadline (geoservices.transport.now clock): the request's timeout
-- @treturn table the request options
-- @raise never
function Client:request_spec(url, method, deadline)
  return {
    url = url,
    method = method,
    timeout_ms = math.max(1, math.floor((deadline - transport.now()) * 1000)),
    ca_file = self.ca_file,
    insecure = self.insecure,
    user_agent = self.user_agent,
    max_response_bytes = self.max_response_bytes,
  }
end

--- POSTs `fields` (plus f=json and the token) form-encoded to `url` and
-- returns the decoded JSON object. Every operation goes through here: the
-- retry policy (geoservices.net.retry) and the one-time token refresh on code
-- 498 (with a token provider) apply. A JSON `{"error": ...}` body is an error
-- whatever the HTTP status; redirects are not followed.
-- @string url the address
-- @tparam table fields the parameters (strings, numbers, booleans; tables are sent as JSON)
-- @tparam[opt] table opts
-- @tparam[opt] number opts.timeout seconds for the whole call, retries included (default the client's)
-- @tparam[opt] number opts.deadline absolute deadline (geoservices.transport.now clock)
-- @tparam[opt="once"] string opts.retry "once", "read" or "edits" (see geoservices.net.retry):
--   "once" repeats only a request that never left
-- @tparam[opt] boolean opts.multipart send as multipart/form-data
-- @tparam[opt] table opts.files file parts of a multipart request (`{name =, file = path | data =, filename =}`)
-- @tparam[opt] function opts.on_retry `on_retry(err, delay, attempts)` before each retry
-- @tparam[opt] function opts.stream a function returning a fresh result sink per attempt (synchronizeReplica)
-- @treturn[1] table the decoded JSON object
-- @treturn[1] nil
-- @treturn[1] table how the call went: `{attempts = n, ambiguous = true}` when an earlier attempt
--   may have reached the server
-- @return[2] nil
-- @treturn[2] table err, kind "network", "timeout", "cancelled", "http", "server", "auth" or
--   "protocol" (after the retries the policy allows; `err.attempts`, `err.retry_after` tell them)
-- @treturn[2] table how the call went, as above
-- @raise when a field cannot be sent (a function, a userdata) or its name is not a string
function Client:post(url, fields, opts)
  opts = opts or {}
  local deadline = opts.deadline or (transport.now() + (opts.timeout or self.timeout))
  local mode = opts.retry or "once"
  local policy = self.retry_policy
  local refreshed = false
  local info = { attempts = 0, ambiguous = opts.ambiguous == true }
  local counted = 0 -- failed attempts that count against policy.attempts
  while true do
    local token, token_err = self._token(false)
    if token_err then return nil, token_err, info end
    local spec = self:request_spec(url, "POST", deadline)
    local form = params.to_form(fields, token)
    if opts.multipart then
      local parts = {}
      for i, pair in ipairs(form) do parts[i] = { name = pair[1], value = params.text(pair[2]) } end
      for _, part in ipairs(opts.files or {}) do parts[#parts + 1] = part end
      spec.multipart = parts
    else
      spec.form = form
    end
    info.attempts = info.attempts + 1
    -- opts.stream(): a fresh sink per attempt (sync results), fed by the C
    -- core while the body arrives instead of decoding it whole at the end
    local sink = opts.stream and opts.stream()
    if sink then spec.records = sink.records end
    local response, msg, code = transport.perform(self.driver, spec, sink and sink.deliver)
    local decoded, err, retry_after
    if response and sink then
      decoded, err = streamed_response(response, url, sink, self.max_json_depth)
      retry_after = retry.parse_retry_after(response.headers["retry-after"])
    elseif response then
      decoded, err = decode_response(response, url, self.max_json_depth)
      retry_after = retry.parse_retry_after(response.headers["retry-after"])
    else
      err = errors.from_transfer(msg, code, url)
    end
    if not err then return decoded, nil, info end
    -- An expired token (498) is worth exactly one more try with a fresh one
    -- from the provider; a static token cannot be refreshed. The server
    -- refused the request, so this is safe for every operation.
    if err.kind == "auth" and err.code == 498 and self.token_provider and not refreshed then
      refreshed = true
      local _, refresh_err = self._token(true)
      if refresh_err then return nil, refresh_err, info end
    else
      local again, ambiguous = retry.should_retry(mode, err, info)
      if ambiguous then info.ambiguous = true end
      if not again then
        if info.attempts > 1 then retry.annotate(err, info.attempts, ("after %d attempts"):format(info.attempts)) end
        return nil, err, info
      end
      -- "busy" with our own lost job is waited out until the deadline; the
      -- other failures count against the attempts
      local busy = retry.is_busy(err)
      if not busy then counted = counted + 1 end
      local delay, why = retry.next_delay(policy, busy and 1 or counted, deadline, retry_after,
                                          busy and math.min(info.attempts, 6) or nil)
      if not delay then return nil, retry.annotate(err, info.attempts, why, retry_after), info end
      if opts.on_retry then opts.on_retry(err, delay, info.attempts) end
      transport.sleep(self.driver, delay)
    end
  end
end

local function http_download_error(status, url, offset)
  local kind = (status == 401 or status == 403) and "auth" or "http"
  local message = ("HTTP %d while downloading the result file"):format(status)
  if status == 404 or status == 410 then
    message = message .. ": it is gone (servers delete result files about ten minutes after the job ends); "
      .. "the replica state is unchanged, synchronize again"
  end
  return errors.new(kind, message, { status = status, url = url, offset = offset })
end

--- GETs a file (a sync result) and returns its bytes. No token
-- is sent: result addresses are self-contained, and a token never goes in a
-- URL. The file is fetched in Range requests of `download_chunk` bytes, so
-- a reset or a failed chunk is resumed where it stopped instead of starting
-- over; a server that ignores Range simply answers 200 with the whole file.
-- Failures are retried as reads (see geoservices.net.retry).
-- @string url the result file's address
-- @tparam[opt] table opts
-- @tparam[opt] number opts.timeout seconds for the whole download (default the client's timeout)
-- @tparam[opt] number opts.deadline absolute deadline (geoservices.transport.now clock)
-- @tparam[opt] table opts.stream a result sink (`{records =, deliver =}`): the body is fed to
--   the record extractor as it arrives and nothing is kept, so memory stays bounded
-- @tparam[opt] function opts.on_progress `on_progress(received, total)` while the file arrives:
--   bytes of the whole file so far, and its size (nil until the server announces it)
-- @tparam[opt] function opts.on_retry `on_retry(err, delay, attempts)` before each retry
-- @treturn[1] string|boolean the file's bytes, or true with `opts.stream`
-- @return[2] nil
-- @treturn[2] table err: kind "network", "timeout", "cancelled" (transfer failures, after the
--   retries), "http" or "auth" (an error status; 404/410 say the file is gone), "protocol" (a
--   wrong Content-Range, an incomplete chunk, a file larger than max_response_bytes, broken JSON
--   while streaming)
-- @raise never
function Client:download(url, opts)
  opts = opts or {}
  -- opts.stream = {records =, deliver =}: the body is fed to the record
  -- extractor by the C core as it arrives (nothing is kept here), and a
  -- resumed chunk starts at the first byte the extractor has not seen
  local stream = opts.stream
  local function broken(response)
    return errors.new("protocol", "result file: " .. response.json_error, { url = url, offset = response.json_offset })
  end
  local deadline = opts.deadline or (transport.now() + (opts.timeout or self.timeout))
  local chunk = self.download_chunk
  local policy = self.retry_policy
  local parts, offset = {}, 0
  local file_size -- from Content-Range, for on_progress
  local failures = 0 -- consecutive failed attempts of the current chunk
  local state = { ambiguous = false }
  while true do
    local spec = self:request_spec(url, "GET", deadline)
    if stream then
      spec.records = stream.records
      offset = stream.records:fed()
    end
    if chunk then
      spec.headers = { ("Range: bytes=%d-%d"):format(offset, offset + chunk - 1) }
    end
    local progress = opts.on_progress and function(received, total)
      -- whole-file figures across Range chunks: the size is known from the
      -- first chunk's Content-Range
      -- (until then a Range answer's length is the chunk's, not the file's: unknown)
      opts.on_progress(offset + received, file_size or (not chunk and total and offset + total) or nil)
    end
    local response, msg, code = transport.perform(self.driver, spec, stream and stream.deliver, progress)
    local err, retry_after
    if not response then
      err = errors.from_transfer(msg, code, url)
    elseif stream and response.json_error and response.status < 300 then
      return nil, broken(response)
    else
      retry_after = retry.parse_retry_after(response.headers["retry-after"])
      local status, body = response.status, response.body
      local received = stream and response.bytes or #body
      if status == 200 then
        -- the whole file: the server does not do ranges (or changed its mind
        -- after the first chunks: skip what was already taken)
        if stream then
          if offset > 0 then -- the extractor has seen these bytes already: cannot skip them now
            return nil, errors.new("protocol", "the server ignored the Range request of a resumed download",
              { url = url })
          end
          return true
        end
        if offset > 0 then body = body:sub(offset + 1) end
        parts[#parts + 1] = body
        return table.concat(parts)
      elseif status == 206 then
        local first, last, size = (response.headers["content-range"] or ""):match("^bytes (%d+)%-(%d+)/(%d+)")
        first, last, size = tonumber(first), tonumber(last), tonumber(size)
        file_size = size
        if first ~= offset or not last or last < first then
          err = errors.new("protocol", ("the server answered range %s to a request from byte %d"):format(
            tostring(response.headers["content-range"]), offset), { url = url })
          return nil, err
        elseif received ~= last - first + 1 then
          err = errors.new("protocol", ("result file is not complete: the chunk at byte %d has %d of %d bytes"):format(
            offset, received, last - first + 1), { code = "short_body", url = url, offset = offset + received })
        else
          if self.max_response_bytes and size > self.max_response_bytes then
            return nil, errors.new("protocol", ("result file of %d bytes is larger than the limit of %d bytes"):format(
              size, self.max_response_bytes), { code = "too_large", url = url })
          end
          if not stream then parts[#parts + 1] = body end
          offset = last + 1
          failures = 0
          if opts.on_progress then opts.on_progress(offset, size) end -- the chunk is in: exact figures
          if offset >= size then return stream and true or table.concat(parts) end
        end
      elseif status == 416 and offset == 0 then
        return stream and true or "" -- an empty file has no byte 0
      else
        err = http_download_error(status, url, offset)
      end
    end
    if err then
      failures = failures + 1
      local again = retry.should_retry("read", err, state) or err.code == "short_body"
      if not again then
        if failures > 1 then retry.annotate(err, failures, ("after %d attempts"):format(failures)) end
        return nil, err
      end
      local delay, why = retry.next_delay(policy, failures, deadline, retry_after)
      if not delay then return nil, retry.annotate(err, failures, why, retry_after) end
      if opts.on_retry then opts.on_retry(err, delay, failures) end
      transport.sleep(self.driver, delay)
    end
  end
end

--- Closes the client's driver and its connections; requests still in flight
-- fail with code "closed". Also the `__close` metamethod: `local c <close> = geoservices.client{...}`.
-- @return nothing
-- @raise never
function Client:close()
  self.driver:close()
end

Client.__close = Client.close

client.Client = Client
return client
