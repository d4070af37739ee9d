--- The connection to one server: options, the token, one driver (so
-- connections are reused), an observer hook, and the requests every
-- operation shares (form POSTs decoded as JSON, file downloads). It knows
-- no operation: the operations (geoservices.services, geoservices.sync,
-- geoservices.configure) take a client and use only its methods, and the
-- `geoservices` façade gives the client returned by `geoservices.client{...}`
-- one method per operation.
--
-- Runtime failures are returned as `nil, err` (a geoservices.errors table);
-- misuse (wrong option types, unknown options) raises.
-- @module geoservices.net.client
local client_options = require "geoservices.net.client_options"
local core = require "geoservices.core"
local errors = require "geoservices.base.errors"
local download = require "geoservices.net.download"
local origin = require "geoservices.net.origin"
local post_attempt_mod = require "geoservices.net.post_attempt"
local redact = require "geoservices.base.redact"
local retry = require "geoservices.net.retry"
local token_mod = require "geoservices.net.token"
local transport = require "geoservices.net.transport"

local client = {}

local Client = {}
Client.__index = Client
Client.__name = "geoservices.Client"

local DEFAULT_TIMEOUT = 30
local DEFAULT_DOWNLOAD_CHUNK = 8 * 1024 * 1024
-- A response held in memory whole (a decoded JSON answer, a job status, a
-- result file returned as bytes) larger than this is refused: an endless or
-- decompressing body must not take the process's memory. Streamed results
-- are not held and have no size bound unless max_response_bytes says so.
local DEFAULT_MAX_HELD_BYTES = 64 * 1024 * 1024

-- The options' checks (geoservices.net.client_options).
local check_option, check_count = client_options.check, client_options.count
local known_options = client_options.KNOWN

--- Creates a client (`geoservices.client(opts)`). Nothing is sent: the
-- first request opens the first connection.
-- @tparam table opts the options (an unknown option raises):
-- @tparam string opts.url the server's {base_url}, `http://` or `https://` (required)
-- @tparam[opt="admin"] string opts.admin_path the administrative context path
-- @tparam[opt] string|function|geoservices.token.TokenProvider opts.token a token, or a token
--   provider: a generateToken provider (geoservices.token), or `function(reason) -> token[, expires]`
--   called with "initial", after an expired token (code 498) with "refresh", and, when it gave
--   `expires` (epoch milliseconds), with "expiring" shortly before then; the token is kept in a
--   closure, never in a field
-- @tparam[opt] string opts.username with `password`: the client generates its tokens with the
--   server's generateToken (geoservices.token) instead of being given one
-- @tparam[opt] string|function opts.password the password of `username`, or a function returning it
-- @tparam[opt="server"] string opts.token_endpoint where generateToken is: "server"
--   (`{url}/tokens/generateToken`) or "portal" (`{url}/sharing/rest/generateToken`)
-- @tparam[opt] string opts.token_url the whole generateToken address instead
-- @tparam[opt=60] number opts.token_expiration minutes a generated token is asked for
-- @tparam[opt="referer"] string opts.token_client generateToken's `client`: "referer", "requestip"
--   or "ip"
-- @tparam[opt] string opts.referer with token_client "referer": the referer the token is bound to
--   (default the origin of url); it is sent as the `Referer` header with the token
-- @tparam[opt=false] boolean opts.bearer send the token in an `Authorization: Bearer` header
--   instead of the `token` form field
-- @tparam[opt=30] number opts.timeout seconds per request (positive, finite)
-- @tparam[opt=false] boolean opts.file_urls accept a `file://` url (tests against fixture files)
-- @tparam[opt] string opts.ca_file PEM file of the certificate authorities to trust
-- @tparam[opt=false] boolean opts.insecure skip TLS certificate verification (explicit opt-in)
-- @tparam[opt] string opts.user_agent the User-Agent header
-- @tparam[opt] number opts.max_response_bytes a larger response (or result file) fails with kind "protocol"
-- @tparam[opt] number opts.max_host_connections connections kept open per host by the driver
-- @tparam[opt="esri"] string opts.enum_prefix the vendor prefix of enumerated values
--   (esriTransportTypeUrl...; the interface's neutral svc… values are accepted from callers)
-- @tparam[opt] table|false opts.retry false (never retry) or a table overriding some of
--   geoservices.net.retry.DEFAULTS (attempts, base_delay, max_delay, max_retry_after)
-- @tparam[opt=1000] number opts.max_json_depth nesting limit of decoded responses
-- @tparam[opt=8 MiB] number|false opts.download_chunk bytes per Range request of a result file
--   (false: one plain GET)
-- @tparam[opt] table class the new client's metatable: the `geoservices` façade passes its own,
--   which adds one method per operation; by default the bare connection
-- @treturn Client the client; `tostring(client)` is a one-line summary without the token
-- @raise when opts is not a table, an option is unknown or of the wrong type, `url` is missing
--   or not an http(s) address, `timeout` is not positive, or `retry` is malformed
function client.new(opts, class)
  if type(opts) ~= "table" then error("geoservices.client: expected an options table", 2) end
  for name in pairs(opts) do
    if not known_options[name] then error(("geoservices.client: unknown option '%s'"):format(tostring(name)), 2) end
  end
  local url = check_option(opts, "url", "string")
  local url_problem = origin.address_problem(url, check_option(opts, "file_urls", "boolean"))
  if url_problem then error("geoservices.client: option 'url' " .. url_problem, 2) end
  local token = opts.token
  if token ~= nil and type(token) ~= "string" and type(token) ~= "function" and not token_mod.is(token) then
    error("geoservices.client: option 'token' must be a string or a function", 2)
  end
  if opts.username ~= nil or opts.password ~= nil then
    if token ~= nil then error("geoservices.client: give either 'token' or 'username' and 'password'", 2) end
    if type(opts.username) ~= "string" or opts.username == "" then
      error("geoservices.client: option 'username' is required with 'password'", 2)
    end
    local minutes = check_option(opts, "token_expiration", "number")
    if minutes ~= nil and not (minutes > 0 and minutes < math.huge) then
      error("geoservices.client: option 'token_expiration' must be a positive number of minutes", 2)
    end
    local ok, made = pcall(token_mod.new, {
      url = url:gsub("/+$", ""), token_url = check_option(opts, "token_url", "string"),
      endpoint = check_option(opts, "token_endpoint", "string"), username = opts.username,
      password = opts.password, client = check_option(opts, "token_client", "string"),
      referer = check_option(opts, "referer", "string"), expiration = check_option(opts, "token_expiration", "number"),
    })
    if not ok then
      error((tostring(made):gsub("^[^:]*:%d+: ", ""):gsub("^geoservices%.token", "geoservices.client")), 2)
    end
    token = made
  end
  local timeout = check_option(opts, "timeout", "number", DEFAULT_TIMEOUT)
  if not (timeout > 0 and timeout < math.huge) then
    error("geoservices.client: option 'timeout' must be a positive number of seconds", 2)
  end
  local admin_path = check_option(opts, "admin_path", "string", "admin"):gsub("^/+", ""):gsub("/+$", "")
  local self = setmetatable({
    url = url:gsub("/+$", ""),
    admin_path = admin_path,
    timeout = timeout,
    ca_file = check_option(opts, "ca_file", "string"),
    insecure = check_option(opts, "insecure", "boolean", false),
    user_agent = check_option(opts, "user_agent", "string"),
    max_response_bytes = check_count(opts, "max_response_bytes"),
    enum_prefix = check_option(opts, "enum_prefix", "string", "esri"),
    retry_policy = retry.policy(opts.retry),
    max_json_depth = check_count(opts, "max_json_depth"),
    -- false: one plain GET (`false and x or y` would take y: the count check)
    download_chunk = (opts.download_chunk ~= false) and check_count(opts, "download_chunk", DEFAULT_DOWNLOAD_CHUNK),
    bearer = check_option(opts, "bearer", "boolean", false),
    token_endpoint = check_option(opts, "token_endpoint", "string", "server"),
  }, class or Client)
  -- The token lives in a closure, not a field, so printing or dumping the
  -- client (pp, inspect, error reports) can never reveal it.
  local provider = type(token) == "function" and token or nil
  local generator = token_mod.is(token) and token or nil
  local current = redact.register(type(token) == "string" and token or nil) -- the one list of secrets
  local valid_until -- a function provider's token is replaced after this (monotonic clock)
  self.has_token = token ~= nil
  self.token_provider = provider ~= nil or generator ~= nil
  self.token_user = generator and generator.username or nil
  self.referer = generator and generator.referer or nil
  function self._token(refresh)
    if generator then
      local fresh, err = generator:get(self, refresh)
      if not fresh then return nil, err end
      current = fresh
    elseif provider and (refresh or current == nil or (valid_until and core.monotonic() >= valid_until)) then
      local fresh, expires = provider(refresh and "refresh" or (current == nil and "initial" or "expiring"))
      if type(fresh) ~= "string" or fresh == "" then
        return nil, errors.new("auth", "token provider returned no token", { reason = "token_provider" })
      end
      current, valid_until = redact.register(fresh), nil
      expires = math.tointeger(tonumber(expires))
      if expires then -- epoch ms: replaced a fifth of its life (at most a minute) early
        local life = expires / 1000 - (os.time() + 1)
        -- a token just given cannot have ended: the local clock is off; it
        -- is then kept until the server says 498 (never one per request)
        if life > 0 then valid_until = core.monotonic() + life - math.min(token_mod.REFRESH_MARGIN, life / 5) end
      end
    end
    return current
  end
  -- Every error this client returns passes through here: no secret it
  -- holds may reach a message, whatever a server reflected.
  function self._scrub(err)
    return redact.scrub(err) -- every secret is registered (geoservices.redact)
  end
  self.driver = core.driver{ max_host_connections = check_count(opts, "max_host_connections") }
  -- What net/ needs of the client, handed down as plain values: net never
  -- calls back into the client.
  local observers = {}
  self.observers = observers
  self.conn = {
    driver = self.driver, policy = self.retry_policy, download_chunk = self.download_chunk,
    ca_file = self.ca_file, insecure = self.insecure, user_agent = self.user_agent,
    max_response_bytes = self.max_response_bytes, max_json_depth = self.max_json_depth,
    bearer = self.bearer, referer = self.referer,
    max_held_bytes = self.max_response_bytes or DEFAULT_MAX_HELD_BYTES,
    sleep = function(seconds) return transport.sleep(self.driver, seconds) end,
    observed = function() return observers[1] ~= nil end,
    notify = function(event)
      local refusal
      for _, fn in ipairs(observers) do
        local r = fn(event)
        if refusal == nil then refusal = r end
      end
      return refusal
    end,
  }
  return self
end

--- A client made by @{new}: connection settings, the token provider and one
-- driver of the C core (connections are reused across calls). Its first
-- methods below are the operations (the `geoservices` façade gives them to
-- every client it makes); the rest is the plumbing they share.
-- Fields (read only): `url`, `admin_path`, `timeout`, `has_token`,
-- `token_provider` (booleans), `token_user` (the user of generated tokens),
-- `bearer`, `retry_policy`, `driver`.
-- @type Client

--- getServicesById: the definitions of services by id, in the order asked;
-- `list.missing` names the ids the server did not return
-- (geoservices.services.get_services_by_id).
-- @function Client:get_services_by_id
-- @param ids an array of ids, or one comma-separated string
-- @tparam[opt] table opts `timeout`
-- @return the list of service definitions (each prints as one line), or nil, err

--- notebooks/snapshots/list: the snapshots of a notebook item
-- (geoservices.services.list_snapshots).
-- @function Client:list_snapshots
-- @string item_id the notebook item's id
-- @tparam[opt] table opts `timeout`
-- @return `{snapshots =, total =, status =}` (each entry prints as one line), or nil, err

--- Synchronizes a replica state file, with optional edits; the new
-- generations are saved only once the whole result arrived (geoservices.sync.sync).
-- @function Client:sync
-- @param replica a state file path or an opened replica (geoservices.replica)
-- @param[opt] edits an edits builder (geoservices.edits), an edits table or a JSON text
-- @tparam[opt] table opts `params` (async, syncDirection, transportType...), `output`, `on_change`,
--   `on_status`, `on_progress`, `timeout`...
-- @return the result (prints as a summary), or nil, err

--- synchronizeReplica with the parameters given as they are (geoservices.sync.synchronize_replica).
-- @function Client:synchronize_replica
-- @string service the feature service's name
-- @tparam table params the parameters (replicaID, replicaServerGen or syncLayers, edits...)
-- @tparam[opt] table opts as for @{Client:sync}
-- @return the result, or nil, err

--- Re-attaches to an async synchronization job saved with `op:to_json()`
-- (geoservices.sync.resume_sync).
-- @function Client:resume_sync
-- @string text the saved operation
-- @return the operation (call `:wait()`), or nil, err

--- configure: creates the organization and waits until it is ready,
-- reporting its stages (geoservices.configure.configure). A site without an
-- organization needs no token; a client without one follows the
-- configuration as the administrator it creates.
-- @function Client:configure
-- @tparam table params the parameters (username, password, email, licenseFile, volumesConfig...)
-- @tparam[opt] table opts `wait`, `dry_run`, `on_stage`, `on_message`, `poll_interval`, `timeout`...
-- @return the ready root resource (prints as a summary), or nil, err

--- The organization root resource as it is now (geoservices.configure.status).
-- @function Client:configure_status
-- @tparam[opt] table opts `request_timeout`
-- @return the root resource (prints as a summary), or nil, err

--- Follows a configuration already running without sending configure again
-- (geoservices.configure.wait_configured).
-- @function Client:wait_configured
-- @tparam[opt] table opts as for @{Client:configure}
-- @return the ready root resource, or nil, err

--- createReplica: registers a replica of some layers of a feature service
-- and downloads its data (async by default, followed until done); the
-- result's `replica_state()` starts a replica state file, and
-- `geoservices.store.create(client, path, params)` builds a store from it
-- (geoservices.sync.create.create_replica).
-- @function Client:create_replica
-- @string service the feature service's name
-- @tparam table params `layers` (required), `replicaName`, `syncModel`, `syncDirection`, `geometry`,
--   `transportType`, `async`... (checked against the service's capabilities before sending)
-- @tparam[opt] table opts `output`, `on_change`, `on_status`, `on_progress`, `on_job`, `timeout`...
-- @return the result (prints as a summary), or nil, err

--- Follows a createReplica job saved with `op:to_json()` (geoservices.sync.create.resume_create_replica).
-- @function Client:resume_create_replica
-- @string text the saved operation
-- @return the operation (call `:wait()`), or nil, err

--- The site's services, by folder, from the administrator directory's services
-- resource and its folders, each with its folder, type and (where the folder's
-- listing gives it) its id (geoservices.services.list_services).
-- @function Client:list_services
-- @tparam[opt] table opts `search` (keep the services whose name holds this text, case ignored),
--   `timeout`
-- @return the list (prints as `2 services: Hosted/Parcels.FeatureServer, ...`), or nil, err

--- The replicas of a feature service: name and id of each (every replica for an
-- administrator, the user's own otherwise); with `details`, each one's resource
-- (geoservices.sync.replicas.list_replicas).
-- @function Client:list_replicas
-- @string service the feature service's name
-- @tparam[opt] table opts `details`, `timeout`
-- @return the list (prints as `3 replicas of Parcels: ...`), or nil, err

--- A replica's resource on the server: owner, model, generations, last sync
-- (geoservices.sync.replicas.replica_info).
-- @function Client:replica_info
-- @string service the feature service's name
-- @string id the replica's id
-- @tparam[opt] table opts `timeout`
-- @return the replica's info (prints as one line), or nil, err

--- unRegisterReplica: the server forgets the replica (geoservices.sync.replicas.unregister_replica).
-- @function Client:unregister_replica
-- @string service the feature service's name
-- @string id the replica's id
-- @tparam[opt] table opts `timeout`
-- @return the outcome (prints as one line), or nil, err

--- The feature service's resource: layers, capabilities, sync capabilities
-- (geoservices.sync.service.service_info).
-- @function Client:service_info
-- @string service the feature service's name
-- @tparam[opt] table opts `timeout`
-- @return the service's info, or nil, err

--- A layer's resource: fields, geometry type, spatial reference, id fields
-- (geoservices.sync.service.layer_info).
-- @function Client:layer_info
-- @string service the feature service's name
-- @int id the layer's id
-- @tparam[opt] table opts `timeout`
-- @return the layer's info, or nil, err

-- One line: address, admin path, whether a token is set, timeout; never the token.
function Client:__tostring()
  local token = self.token_user and ("tokens for '" .. self.token_user .. "'")
    or self.token_provider and "token provider" or (self.has_token and "token" or "no token")
  if self.bearer and self.has_token then token = token .. " as a Bearer header" end
  return ("geoservices.Client <%s> (admin path '%s', %s, timeout %g s)"):format(
    self.url, self.admin_path, token, self.timeout)
end

--- Address of an administrative resource, `{base_url}/{admin_path}/{path}`.
-- @string path the resource's path under the administrative context ("" for the root resource)
-- @treturn string the address
-- @raise when path is not a string
function Client:admin_url(path)
  -- the last answer is kept: an operation asks for the same address again
  -- and again, and each new one is a string to allocate
  if path == self._admin_path_last and self.url == self._admin_base and self.admin_path == self._admin_context then
    return self._admin_url_last
  end
  local url
  if self.admin_path == "" then
    url = self.url .. "/" .. path
  else
    url = self.url .. "/" .. self.admin_path .. (path ~= "" and ("/" .. path) or "")
  end
  self._admin_path_last, self._admin_base, self._admin_context, self._admin_url_last = path, self.url,
    self.admin_path, url
  return url
end

--- Adds an observer of this client's requests: `fn(event)` is called with
-- a table whose `type` is
--  * "request" before a request is sent (`method`, `url`, `content_type`, `fields` as
--    `{{name, text}, ...}` with every secret as "<redacted>", `files` as `{{name =, filename =,
--    source =}, ...}`); returning an error (geoservices.errors) refuses the request: nothing is
--    sent and the call fails with that error (a dry run, a test's fault);
--  * "progress" while a body arrives (`url`, `received`, `total`);
--  * "response" when a request ended (`url`, `status`, `bytes`, `seconds`, or `error`, `code`);
--  * "retry" before a retry's wait (`url`, `error`, `delay`, `attempt`);
--  * "restart" when a download resumed from `offset` got the whole file again (HTTP 200): it went on
--    from byte 0, skipping the bytes it had (`url`, `offset`, `error` saying so).
-- Observers see no token and no secret. The CLI's progress display and dry
-- run, a logger or a test attach here instead of replacing methods.
-- @func fn the observer
-- @treturn function a function that removes the observer
-- @raise when fn is not a function
function Client:observe(fn)
  if type(fn) ~= "function" then error("client:observe: expected a function", 2) end
  local list = self.observers
  list[#list + 1] = fn
  return function()
    for i, f in ipairs(list) do
      if f == fn then table.remove(list, i) return end
    end
  end
end

--- Address of a resource under the server's {base_url}, `{base_url}/{path}`.
-- @string path the resource's path, e.g. "Parcels/FeatureServer/synchronizeReplica"
-- @treturn string the address
-- @raise never
function Client:url_for(path)
  return self.url .. "/" .. path
end

--- Waits `seconds` (a poll interval): yields inside a task, blocks outside;
-- never past the current deadline.
-- @number seconds how long
-- @return true, or nil, err (the deadline or a cancellation cut it short)
-- @raise when seconds is not a number
function Client:sleep(seconds)
  return transport.sleep(self.driver, seconds)
end

--- The options of the C core's request shared by every request of this
-- client (address, method, timeout, TLS settings, size limit). Used by
-- @{Client:post} and @{Client:download}; a user rarely needs it.
-- @string url the address
-- @string method "GET" or "POST"
-- @number deadline absolute deadline (geoservices.net.transport.now clock): the request's timeout
-- @treturn table the request options
-- @raise never
function Client:request_spec(url, method, deadline)
  return transport.spec(self.conn, url, method, deadline)
end

-- One attempt of Client:post (geoservices.net.post_attempt).
local NO_OPTS = {}
local post_token, post_attempt = post_attempt_mod.token, post_attempt_mod.run

--- POSTs `fields` (plus f=json and the token) form-encoded to `url` and
-- returns the decoded JSON object. Every operation goes through here: the
-- retry policy (geoservices.net.retry) and the one-time token refresh on code
-- 498 (with a token provider) apply. A JSON error body in either dialect
-- (`{"error": ...}`, `{"status": "error", "messages": [...]}`) is an error
-- whatever the HTTP status; redirects are not followed. The token goes only
-- to the client's own origin: in the `token` field, or an `Authorization:
-- Bearer` header with the `bearer` option.
-- @string url the address
-- @tparam table fields the parameters (strings, numbers, booleans; tables are sent as JSON)
-- @tparam[opt] table opts
-- @tparam[opt] number opts.timeout seconds for the whole call, retries included (default the client's)
-- @tparam[opt] number opts.deadline absolute deadline (geoservices.net.transport.now clock)
-- @tparam[opt="once"] string opts.retry "once", "read" or "edits" (see geoservices.net.retry):
--   "once" repeats only a request that never left
-- @tparam[opt] boolean opts.multipart send as multipart/form-data
-- @tparam[opt] boolean opts.fresh_connect a new connection (a request that must reach the server at
--   most once: libcurl re-sends a body on its own when a reused connection dies before the answer)
-- @tparam[opt] boolean opts.array a top-level JSON array is an answer too (a resource that lists,
--   such as a feature service's replicas)
-- @tparam[opt] table opts.files file parts of a multipart request (`{name =, file = path | data =, filename =}`)
-- @tparam[opt] function opts.on_retry `on_retry(err, delay, attempts)` before each retry
-- @param[opt] opts.token whose token goes with this request: nil (the client's), false (none: a
--   generateToken request), "optional" (the client's when it can get one, else none: a site
--   without users yet), or `function(refresh) -> token | nil, err` (this call's own)
-- @tparam[opt] function opts.records a function returning a fresh record sink per attempt
--   (`{records = core.records(), deliver = function(kind, layer, value, key)}`): the body's records
--   are handed to it while it arrives instead of decoding the body whole at the end
-- @treturn[1] table the decoded JSON object (with opts.records: its top-level fields)
-- @treturn[1] nil
-- @treturn[1] table how the call went: `{attempts = n, ambiguous = true}` when an earlier attempt
--   may have reached the server; `date`: the answer's Date header (the server's clock)
-- @return[2] nil
-- @treturn[2] table err, kind "network", "timeout", "cancelled", "http", "server", "auth" or
--   "protocol" (after the retries the policy allows; `err.attempts`, `err.retry_after` tell them)
-- @treturn[2] table how the call went, as above
-- @raise when a field cannot be sent (a function, a userdata) or its name is not a string
function Client:post(url, fields, opts)
  opts = opts or NO_OPTS
  redact.register_fields(fields) -- a password, an answer, a key: scrubbed from whatever comes back
  local deadline = opts.deadline or (transport.now() + (opts.timeout or self.timeout))
  local info = { attempts = 0, ambiguous = opts.ambiguous == true }
  -- credentials go only to the client's own origin (scheme, host, port)
  -- (the answer for the last address is kept: parsing two URLs with patterns
  -- cost a small request about 2 µs, and a client posts to the same address
  -- again and again)
  local own_origin
  if url == self._origin_url and self.url == self._origin_base then
    own_origin = self._origin_same
  else
    own_origin = origin.same(url, self.url)
    self._origin_url, self._origin_base, self._origin_same = url, self.url, own_origin
  end
  local source = opts.token
  if source == nil and not self.has_token then source = false end
  -- The first attempt needs no retry machinery: most calls end here.
  local outcome, value, retry_after, sent_token, optional_err =
    post_attempt(self, url, fields, opts, deadline, source, own_origin, info)
  if outcome == "done" then return value, nil, info end

  local conn = self.conn
  local mode = opts.retry or "once"
  local refreshed = false
  local first = true
  local decoded, err = retry.run{
    policy = self.retry_policy, deadline = deadline, sleep = conn.sleep,
    attempt = function()
      if first then -- the attempt made above
        first = false
        return outcome, value, retry_after
      end
      local why_none
      outcome, value, retry_after, sent_token, why_none =
        post_attempt(self, url, fields, opts, deadline, source, own_origin, info)
      optional_err = why_none or optional_err
      return outcome, value, retry_after
    end,
    on_retry = function(e, delay, attempts)
      if conn.observed() then
        conn.notify{ type = "retry", url = url, error = e, delay = delay, attempt = attempts }
      end
      if opts.on_retry then opts.on_retry(e, delay, attempts) end
    end,
    classify = function(e)
      -- An expired token (498) is worth exactly one more try with a fresh one
      -- from the provider; a static token cannot be refreshed. The server
      -- refused the request, so this is safe for every operation.
      local refreshable = type(source) == "function" or (source ~= false and self.token_provider)
      if e.kind == "auth" and e.code == 498 and sent_token and refreshable and not refreshed then
        refreshed = true
        local _, refresh_err, why_none = post_token(self, source, own_origin, true)
        optional_err = why_none or optional_err
        if refresh_err then return "fatal", refresh_err end
        return "again"
      end
      -- sent without a token because none could be had: the server wanting
      -- one is best explained by why there was none
      if e.kind == "auth" and not sent_token and optional_err then return "fatal", optional_err end
      local again, ambiguous = retry.should_retry(mode, e, info)
      if ambiguous then info.ambiguous = true end
      if not again then return "stop" end
      -- "busy" with our own lost job is waited out until the deadline; the
      -- other failures count against the attempts
      return retry.is_busy(e) and "busy" or "retry"
    end,
  }
  if decoded == nil then return nil, self._scrub(err), info end
  return decoded, nil, info
end

--- GETs a file (a sync result) and returns its bytes, or feeds them to a
-- record sink while they arrive (see geoservices.net.download): Range
-- requests of `download_chunk` bytes, resumed where a failed chunk stopped,
-- retried as reads. The token goes with it to the client's own origin, in
-- the `X-Esri-Authorization` header (`Authorization` with `bearer`), never in
-- the URL; a file on another origin gets none.
-- @string url the result file's address
-- @tparam[opt] table opts
-- @tparam[opt] number opts.timeout seconds for the whole download (default the client's timeout)
-- @tparam[opt] number opts.deadline absolute deadline (geoservices.net.transport.now clock)
-- @tparam[opt] table opts.sink a record sink (`{records =, deliver =}`): the body is fed to
--   the record extractor as it arrives and nothing is kept, so memory stays bounded
-- @tparam[opt] function opts.on_progress `on_progress(received, total)` while the file arrives:
--   bytes of the whole file so far, and its size (nil until the server announces it)
-- @tparam[opt] function opts.on_retry `on_retry(err, delay, attempts)` before each retry
-- @treturn[1] string|boolean the file's bytes, or true with `opts.sink`
-- @return[2] nil
-- @treturn[2] table err: kind "network", "timeout", "cancelled" (transfer failures, after the
--   retries), "http" or "auth" (an error status; 404/410 say the file is gone), "protocol" (a
--   wrong Content-Range, an incomplete chunk, a file larger than max_response_bytes, broken JSON
--   while streaming)
-- @raise never
function Client:download(url, opts)
  opts = opts or {}
  -- servers that protect their output directory ask the token for result
  -- files too (the vendor's own clients send it): in a header, never in the
  -- URL, and only to the client's own origin
  local headers
  if self.has_token and origin.same(url, self.url) then
    local token, token_err = self._token(false)
    if token_err then return nil, self._scrub(token_err) end
    if token then
      headers = { (self.bearer and "Authorization: Bearer " or "X-Esri-Authorization: Bearer ") .. token }
    end
  end
  local value, err = download.fetch(self.conn, url, {
    deadline = opts.deadline or (transport.now() + (opts.timeout or self.timeout)),
    sink = opts.sink, file = opts.file, on_progress = opts.on_progress, on_retry = opts.on_retry,
    headers = headers,
  })
  if value == nil then return nil, self._scrub(err) end
  return value
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
