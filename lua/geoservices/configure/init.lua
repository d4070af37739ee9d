--- configure: creates the organization, then follows its stages on the
-- root resource until it is ready. The request is validated first
-- (validate_configure.lua), sent as multipart/form-data with the license
-- file streamed from disk by libcurl, and the client keeps no copy of the
-- parameters afterwards, so no secret can leak through the operation object.
--
-- `configure`, `status` and `wait_configured` are methods of the client
-- (`client:configure(params, opts)`, `client:configure_status()`,
-- `client:wait_configured(opts)`); `self` is the client. Runtime failures
-- return `nil, err` (geoservices.errors); misuse (a parameters argument that
-- is not a table, an unknown or mistyped option) raises.
--
--     local root, err = client:configure({
--       username = "siteadmin", password = os.getenv("ORG_ADMIN_PASSWORD"),
--       email = "siteadmin@example.com", fullName = "Site Administrator",
--       securityQuestionIdx = 1,            -- geoservices.SECURITY_QUESTIONS[1] (1..14)
--       securityQuestionAns = os.getenv("ORG_ADMIN_ANSWER"),
--       userLicenseTypeId = "creatorUT",
--       licenseFile = "/secure/license.prvc", -- a path (streamed by libcurl) or {filename =, data =}
--       volumesConfig = geoservices.volumes{ storage_class = "managed-premium" },
--       systemArchitectureProfile = "standard-availability",
--     }, { poll_interval = 5, stall_after = 900,
--          on_stage = function(stage, old) print(stage.name, old, "->", stage.state) end })
--
-- Refused before sending (kind "invalid", `err.parameter` names the
-- parameter, the message gives the rule, never the value): a required
-- parameter missing; a username shorter than 6 characters or with
-- characters other than letters, digits and `@ _ . -`; a password shorter
-- than 8 characters or without a letter or a digit; an email that is no
-- address; securityQuestionIdx outside 1..14; a license file missing,
-- unreadable, a directory or empty; volumesConfig without exactly eight
-- entries, one per component, each with provisioningType, a size in Gi, Mi
-- or Ti, a storageClass and string labels; a cloudConfig provider without a
-- name, an object store without a credential, a credential type other than
-- IAM-ROLE, SYSTEM-ASSIGNED-IDENTITY (with secret.storageAccountName) or
-- HMAC-KEYS (with secret.secretKey and secret.accessKey), a service whose
-- type does not match its category (objectStore with storage,
-- relationalStore with databases) or whose connection lacks its members; an
-- incomplete userManagedStores entry; an unknown architecture profile.
-- Values the vendor's own tooling sends pass (`logSettings = {logLevel =
-- ""}`, `folderPathsToRegister = {paths = {...}}`, a serverLicenseFile).
--
-- Waiting polls the organization root resource until its state is ready or
-- configured (a ready document without a state counts as ready): failed
-- ends with kind "job" (`err.stages`), an unknown state is waited on until
-- the deadline and the timeout says so. Stages appear as they start, so
-- progress is reported as "N of M stages seen so far" with the server's own
-- message; on_stage is called once per transition. A few failed polls in a
-- row are ridden over (the server's pods restart while it configures);
-- `stall_after` fails when no stage progressed for that long.
--
-- configure is never sent twice: after a failure that may have reached the
-- server it reads the root resource and follows a configuration in
-- progress (`op.reattached`), or says it is safe to send again.
-- client:wait_configured re-attaches after a crash or Ctrl-C. Requests go
-- without a token until the server asks for one (a site being configured
-- has no user yet, and its token endpoint may not answer until late), then
-- signed in: with the client's own token, or, for a client without one, as
-- the administrator configure created. A sign-in that fails because the
-- token endpoint does not answer counts as a failed poll. No secret appears in an error, a printout or a
-- dry run; the operation keeps no copy of the parameters.
-- @module geoservices.configure
local errors = require "geoservices.base.errors"
local organization = require "geoservices.configure.organization"
local params = require "geoservices.base.form"
local poll = require "geoservices.base.poll"
local redact = require "geoservices.base.redact"
local retry = require "geoservices.net.retry"
local token = require "geoservices.net.token"
local transport = require "geoservices.net.transport"
local validate = require "geoservices.configure.validate"

local configure = {}

local DEFAULT_POLL_INTERVAL = 5       -- seconds; a configuration takes tens of minutes
local DEFAULT_TIMEOUT = 3 * 60 * 60   -- seconds for the whole wait
configure.SECRET_KEYS = redact.SECRET_KEYS -- the one list (geoservices.redact)

--- The 14 secret questions in the spec's order; securityQuestionIdx is the
-- 1-based position in this list (also `geoservices.SECURITY_QUESTIONS`).
-- @table SECURITY_QUESTIONS
configure.SECURITY_QUESTIONS = {
  "What city were you born in?",
  "What was your high school mascot?",
  "What is your mother's maiden name?",
  "What was the make of your first car?",
  "What high school did you go to?",
  "What is the last name of your best friend?",
  "What is the middle name of your youngest sibling?",
  "What is the name of the street on which you grew up?",
  "What is the name of your favorite fictional character?",
  "What is the name of your favorite pet?",
  "What is the name of your favorite restaurant?",
  "What is the title of your favorite book?",
  "What is your dream job?",
  "Where did you go on your first date?",
}

--- A deep copy of `value` with every secret member (password,
-- securityQuestionAns, secretKey, accessKey, at any depth) replaced by "<redacted>".
-- @param value any value (non-tables are returned as they are)
-- @return the copy (metatables kept)
-- @raise never
function configure.redact(value)
  return redact.copy(value)
end

local function basename(path)
  return path:match("([^/]+)$") or path
end

--- Splits (already validated) parameters into form fields and the license
-- file part. Exposed so the specs can send what the client would refuse and
-- prove the emulator refuses it too.
-- @tparam table p validated parameters
-- @treturn table the form fields
-- @treturn table the file parts (the license file)
-- @local
function configure.request(p)
  local fields, files = {}, {}
  for k, v in pairs(p) do
    if not validate.FILE_PARAMS[k] then fields[k] = v end
  end
  for _, name in ipairs{ "licenseFile", "serverLicenseFile" } do
    local license = p[name]
    if type(license) == "string" then
      files[#files + 1] = { name = name, file = license, filename = basename(license),
                            type = "application/octet-stream" }
    elseif type(license) == "table" then
      files[#files + 1] = { name = name, data = license.data, filename = license.filename,
                            type = license.type or "application/octet-stream" }
    end
  end
  return fields, files
end

-- What a dry run returns: the request as it would be sent, secrets redacted.
local Preview = { __name = "geoservices.ConfigurePreview" }
function Preview.__tostring(p)
  local lines = { "POST " .. p.url .. " (multipart/form-data)" }
  for _, pair in ipairs(p.fields) do lines[#lines + 1] = ("  %s = %s"):format(pair[1], pair[2]) end
  for _, f in ipairs(p.files) do
    lines[#lines + 1] = ("  %s = file %s (%s)"):format(f.name, f.filename, f.source)
  end
  return table.concat(lines, "\n")
end

local function preview(url, fields, files)
  local described = params.describe(fields, files, true, false)
  return setmetatable({ url = url, fields = described.fields, files = described.files }, Preview)
end

local OPTION_TYPES = {
  on_stage = "function", on_message = "function", poll_interval = "number", timeout = "number",
  stall_after = "number", request_timeout = "number", wait = "boolean", dry_run = "boolean",
  max_poll_errors = "number",
}

-- Misuse raises: a misspelt option would otherwise silently change a
-- wait of hours.
local function check_opts(opts, where)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(where .. ": expected an options table", 3) end
  for name, value in pairs(opts) do
    local kind = OPTION_TYPES[name]
    if not kind then error(("%s: unknown option '%s'"):format(where, tostring(name)), 3) end
    if type(value) ~= kind then error(("%s: option '%s' must be a %s"):format(where, name, kind), 3) end
  end
  for _, name in ipairs{ "poll_interval", "timeout", "stall_after", "request_timeout" } do
    if opts[name] and not (opts[name] > 0 and opts[name] < math.huge) then -- NaN and inf too
      error(("%s: option '%s' must be positive"):format(where, name), 3)
    end
  end
  return opts
end

-- The clients a server has asked for a token (an auth answer to a request
-- of configure sent without one): from then on they sign in at once. Weak
-- keys: the mark goes away with the client.
local asked = setmetatable({}, { __mode = "k" })

-- POSTs a request of configure, signing in only when the server asks for a
-- token. `opts.token` is the token source of Client:post: "optional" (the
-- client's own) or an operation's function (the administrator configure
-- created). A site being configured answers configure and its root
-- resource without a token (no user exists yet) and its token endpoint may
-- come up only late in the configuration, so signing in before the server
-- asks would fail, or wait for an endpoint that does not answer, for
-- nothing. A client with a fixed token sends it as before: that costs no
-- request. A request refused for want of a token applied nothing, so it is
-- sent again signed in (configure included).
local function post_as_asked(client, url, fields, opts)
  local source = opts.token
  local signs_in = type(source) == "function" or client.token_provider
  if not signs_in or asked[client] then return client:post(url, fields, opts) end
  opts.token = false
  local res, err, info = client:post(url, fields, opts)
  if res or err.kind ~= "auth" then return res, err, info end
  asked[client] = true
  opts.token = source
  return client:post(url, fields, opts)
end

-- Reads the root resource once; returns it with its summary metatable.
-- Before configuration no user exists, so the root is read without a token
-- until the server asks for one (post_as_asked), then with the client's
-- token; `token_source` (an operation's own, see new_operation) replaces
-- the client's.
local function read_root(client, timeout, token_source)
  local url = client:admin_url("")
  local root, err = post_as_asked(client, url, {}, { timeout = timeout, retry = "read",
                                                     token = token_source or "optional" })
  if not root then return nil, err end
  if type(root.status) ~= "table" and type(root.resources) ~= "table" then
    return nil, errors.new("protocol", "root resource has no 'status' object", { url = url })
  end
  return organization.wrap(root)
end

local function job_error(root)
  local failed = organization.failures(root)
  local texts = {}
  for _, f in ipairs(failed) do
    texts[#texts + 1] = f.name .. (f.message and (" (" .. tostring(f.message) .. ")") or "")
  end
  local status = type(root.status) == "table" and root.status or {}
  local message = #texts > 0 and ("configuration failed at stage " .. table.concat(texts, "; "))
    or ("configuration failed: " .. tostring(status.message or status.state))
  return errors.new("job", message, { stages = failed, root = root })
end

local function not_configured_error(root)
  return errors.new("server", "the organization is not configured: nothing to wait for (call configure)",
    { state = "not_configured", root = root })
end

local reattach

-- A failed poll worth repeating: the server's pods restart while it configures.
local TRANSIENT = { network = true, timeout = true, http = true, protocol = true }

-- A sign-in that failed because the token endpoint did not answer (it may
-- come up only late in the configuration) is a failed poll like any other,
-- ridden over as the wait rides over the root resource's own failures: the
-- error takes the kind of its cause. A refused password stays "auth".
local function sign_in_failure(err)
  if err.kind == "auth" and err.reason == "generate_token" and TRANSIENT[err.cause_kind] then
    return errors.new(err.cause_kind, err.message, { code = err.code, status = err.status, url = err.url,
                                                     reason = err.reason })
  end
  return err
end

--- A configuration in progress, returned by `client:configure(params, {wait = false})`
-- (with the initial root resource). Fields: `state` ("in_progress", "ready",
-- "configured", "failed"... see geoservices.configure.organization), `root`
-- (the last root resource read, 2.5), `reattached` (true when the client
-- re-attached after a failed request). A real server lists a stage only
-- once it has started; the operation keeps every stage it has seen (the
-- configure response lists them all) in `root.status.stages`, at its last
-- known state. It keeps no parameter; when the client had no token, the
-- administrator that configure created signs in to follow it (a token
-- provider held in a closure, see geoservices.token). `tostring(op)` is a
-- one-line summary.
-- @type Operation
local Operation = {}
Operation.__index = Operation
Operation.__name = "geoservices.ConfigureOperation"

-- `root` is the first resource seen: its stage states are the baseline,
-- reported to nobody (they are not transitions).
local function new_operation(client, root, opts, token_source)
  local self = setmetatable({
    client = client,
    root = root,
    state = organization.state(root),
    on_stage = opts.on_stage,
    on_message = opts.on_message,
    request_timeout = opts.request_timeout,
    states = {},
    seen = {}, -- every stage seen so far, in the order first seen (stage tables of the server)
    mark = organization.progress_mark(root),
    progress_at = transport.now(),
  }, Operation)
  -- the operation's own way to a token, in a closure: never a field
  function self._token_source() return token_source end
  local status = type(root.status) == "table" and root.status or {}
  self.message = status.message
  for _, stage in ipairs(organization.stages(root)) do
    self.states[organization.key(stage.name)] = stage.state
    self.seen[#self.seen + 1] = stage
  end
  return self
end

-- Keeps every stage seen so far in the root's list: a stage the server
-- listed before (the configure response lists them all) and omits now
-- keeps its last known state, in its place.
local function merge_stages(self, root)
  local fresh, index = {}, {}
  for _, stage in ipairs(organization.stages(root)) do
    local key = organization.key(stage.name)
    fresh[key] = stage
  end
  local merged = {}
  for i, stage in ipairs(self.seen) do
    local key = organization.key(stage.name)
    merged[i] = fresh[key] or stage
    index[key] = i
  end
  for _, stage in ipairs(organization.stages(root)) do
    local key = organization.key(stage.name)
    if not index[key] then
      merged[#merged + 1] = stage
      index[key] = #merged
    end
  end
  self.seen = merged
  if type(root.status) == "table" and #merged > #organization.stages(root) then
    root.status.stages = setmetatable(merged, getmetatable(root.status.stages))
  end
end

-- Records a newly read root and reports every stage whose state changed,
-- in the order the server lists the stages, and a new message of the server.
function Operation:observe(root)
  local changed = {}
  for _, stage in ipairs(organization.stages(root)) do
    local key = organization.key(stage.name)
    local old = self.states[key]
    if old ~= stage.state then changed[#changed + 1] = { stage, old } end
    self.states[key] = stage.state
  end
  merge_stages(self, root)
  self.root, self.state = root, organization.state(root)
  local mark = organization.progress_mark(root)
  if mark ~= self.mark then self.mark, self.progress_at = mark, transport.now() end
  if self.on_stage then
    for _, c in ipairs(changed) do self.on_stage(c[1], c[2]) end
  end
  local message = type(root.status) == "table" and root.status.message or nil
  if message ~= self.message then
    self.message = message
    if self.on_message and type(message) == "string" and message ~= "" then self.on_message(message, root) end
  end
end

--- Reads the root resource once and reports the stage transitions to
-- `on_stage`.
-- @tparam[opt] number timeout seconds for the request (default the operation's request_timeout or the
--   client's timeout)
-- @treturn[1] table the root resource (check `op.state`: "ready", "in_progress"...)
-- @return[2] nil
-- @treturn[2] table err: kind "job" when a stage failed (`err.stages`), "server" when the
--   organization is not configured, "protocol" (no status object), or the request's errors
-- @raise never
function Operation:poll(timeout)
  local root, err = read_root(self.client, timeout or self.request_timeout, self._token_source())
  if not root then return nil, err end
  self:observe(root)
  if self.state == "failed" then return nil, job_error(root) end
  if self.state == "not_configured" then return nil, not_configured_error(root) end
  return root
end

local function stall_error(self, stall_after)
  local stage = organization.current_stage(self.root)
  local name = stage and stage.name or "unknown"
  return errors.new("timeout", ("configuration stalled: stage '%s' reported no progress for %g s"):format(
    name, stall_after), { stage = name, root = self.root })
end

--- Polls until the organization is done ("ready" or "configured"),
-- reporting each stage transition. It ends at once with kind "job" on
-- "failed"; a state this client does not know counts as still running
-- until the deadline, whose error says so. Failed polls (the server's pods
-- restart while it configures) are ridden over up to `max_poll_errors` in
-- a row; a token that expires during the wait is replaced (see
-- geoservices.token).
-- @tparam[opt] table opts
-- @tparam[opt] function opts.on_stage `on_stage(stage, old_state)` for each stage whose state changed
--   (`old_state` nil for a stage not seen before)
-- @tparam[opt] function opts.on_message `on_message(message, root)` when the server's status message
--   changes
-- @tparam[opt=5] number opts.poll_interval seconds between polls
-- @tparam[opt=10800] number opts.timeout overall seconds (3 h)
-- @tparam[opt] number opts.stall_after fail when no stage progresses for this many seconds
-- @tparam[opt=5] number opts.max_poll_errors failed polls in a row before giving up
-- @tparam[opt] number opts.request_timeout seconds per poll
-- @treturn[1] table the ready root resource (prints as a summary)
-- @return[2] nil
-- @treturn[2] table err: kind "job" (a stage failed: `err.stages`), "timeout" (the deadline passed,
--   or a stall: `err.stage`), "server" (not configured), or the last poll's error
-- @raise on misuse: an unknown option, a wrong type, a non-positive interval or timeout
function Operation:wait(opts)
  opts = check_opts(opts, "configure wait")
  if opts.on_stage then self.on_stage = opts.on_stage end
  if opts.on_message then self.on_message = opts.on_message end
  local stall_after = opts.stall_after
  local start = transport.now()
  self.progress_at = start -- a stage gets the full stall_after from the start of this wait
  if self.state == "failed" then return nil, job_error(self.root) end
  if organization.is_done(self.state) then return self.root end
  local deadline = start + (opts.timeout or DEFAULT_TIMEOUT)
  -- the operation already holds a fresh root resource: wait before the first poll
  return poll.run{
    interval = opts.poll_interval or DEFAULT_POLL_INTERVAL, deadline = deadline, sleep_first = true,
    transient = TRANSIENT, max_failures = opts.max_poll_errors, now = transport.now,
    sleep = function(seconds) return self.client:sleep(seconds) end,
    check = stall_after and function(now)
      if now - self.progress_at >= stall_after then return stall_error(self, stall_after) end
    end,
    cap_pause = stall_after and function(pause, now)
      return math.min(pause, self.progress_at + stall_after - now)
    end,
    on_deadline = function(_, elapsed)
      local unknown = not organization.STATES[self.state]
        and (" the server reported state '%s', which this client does not know, and it was treated as "
          .. "still running;"):format(self.state) or ""
      return errors.new("timeout", ("configuration not ready after %g s;%s %s"):format(
        elapsed, unknown, organization.summary(self.root)), { root = self.root, state = self.state })
    end,
    step = function()
      local left = deadline - transport.now()
      local root, err = self:poll(math.max(math.min(self.request_timeout or self.client.timeout, left), 1))
      if not root then return "failed", sign_in_failure(err) end
      if organization.is_done(self.state) then return "done", self.root end
      return "running", root
    end,
  }
end

-- One line: state and stages completed.
function Operation:__tostring()
  return "configure operation: " .. organization.summary(self.root)
end

--- Client methods.
-- `client:configure(params, opts)`, `client:configure_status(opts)` and
-- `client:wait_configured(opts)`: `self` is the client.
-- @section client_methods

-- After configure failed in a way that may have reached the server (the
-- response was lost, reset or unreadable, a 5xx, the deadline), reads the
-- root resource: an organization in progress or ready means the request was
-- received, and the client follows it as if the answer had arrived
-- (op.reattached = true); not configured means nothing happened and the
-- original error is returned, saying it is safe to call configure again.
function reattach(self, post_err, opts, token_source)
  local root, err = read_root(self, opts.request_timeout, token_source)
  if not root then
    post_err.message = post_err.message .. ("; the organization could not be checked either (%s): "
      .. "call client:wait_configured() to follow a configuration that may have started"):format(err.message)
    post_err.ambiguous = true
    return nil, post_err
  end
  local state = organization.state(root)
  if state == "not_configured" then
    post_err.message = post_err.message .. "; the organization is not configured, so the request did not take "
      .. "effect: it is safe to call configure again"
    post_err.ambiguous = false
    return nil, post_err
  end
  local op = new_operation(self, root, opts, token_source)
  op.reattached = true
  if state == "failed" then return nil, job_error(root) end
  if opts.wait == false then return root, op end
  return op:wait(opts)
end

--- Creates the organization (`client:configure(params, opts)`): validates
-- every parameter, sends the request once (multipart, the license file
-- streamed from disk) and, unless `opts.wait == false`, waits until it is
-- ready. After a failure that may have reached the server, it reads the root
-- resource and follows a configuration that started (`op.reattached`)
-- instead of sending configure twice.
-- @param self the client
-- @tparam table p the parameters by their names: username, password, email, fullName,
--   securityQuestionIdx (1..14, see @{SECURITY_QUESTIONS}), securityQuestionAns, userLicenseTypeId,
--   licenseFile (a path, or `{filename =, data =}`), volumesConfig (see geoservices.volumes),
--   systemArchitectureProfile; optional firstName, lastName, description, cloudConfig, logSettings,
--   systemProperties, folderPathsToRegister, userManagedStores; unknown ones pass through
-- @tparam[opt] table opts the options of @{Operation:wait}, plus:
-- @tparam[opt=true] boolean opts.wait false: return once the server accepted the request
-- @tparam[opt] boolean opts.dry_run validate and return the request that would be sent
-- @treturn[1] table the ready root resource (2.5; prints as a summary)
-- @treturn[2] table with `wait = false`: the initial root resource...
-- @treturn[2] Operation ... and the operation
-- @treturn[3] table with `dry_run = true`: the request it would send, `{url =, fields = {{name, text},
--   ...}, files = {...}}`, secrets redacted (prints as the request)
-- @return[4] nil
-- @treturn[4] table err: kind "invalid" (a parameter breaks a rule; `err.parameter`; nothing sent),
--   "job" (a stage failed), "timeout", "server", "auth", "network", "http", "protocol";
--   `err.ambiguous` tells whether the request may have reached the server
-- @raise when p is not a table, or on misuse of opts (unknown option, wrong type)
function configure.configure(self, p, opts)
  if type(p) ~= "table" then error("configure: expected a table of parameters, got " .. type(p), 2) end
  opts = check_opts(opts, "configure")
  local checked, err = validate.params(p)
  if not checked then return nil, err end
  local fields, files = configure.request(checked)
  local url = self:admin_url("configure")
  if opts.dry_run then return preview(url, fields, files) end
  -- A site without an organization has no user yet, so configure goes
  -- without a token unless the server asks for one (then with the
  -- client's). To follow the configuration once the server asks, a client
  -- without a token of its own signs in as the administrator configure
  -- creates.
  local source = "optional"
  if not self.has_token then source = configure.admin_token(self, checked) end
  -- configure is never sent twice: only a request that never left is
  -- repeated ("once"). After a failure that may have reached the server the
  -- client re-attaches by reading the root resource instead.
  local root, post_err = post_as_asked(self, url, fields, { multipart = true, files = files,
    timeout = opts.request_timeout, retry = "once", token = "optional" })
  if not root then
    if not retry.ambiguous(post_err) then return nil, post_err end
    return reattach(self, post_err, opts, source)
  end
  if type(root.status) ~= "table" then
    return nil, errors.new("protocol", "configure response has no 'status' object", { url = url })
  end
  organization.wrap(root)
  local op = new_operation(self, root, opts, source)
  if opts.wait == false then return root, op end
  return op:wait(opts)
end

--- A token source for following a configuration as the administrator
-- that configure creates (for a client without a token of its own): a
-- generateToken provider (geoservices.token) for the parameters' username
-- and password at the client's token endpoint, used as `token` of
-- Client:post. The password stays in the provider's closure.
-- @local
function configure.admin_token(client, p)
  local provider = token.new{ url = client.url, endpoint = client.token_endpoint or "server",
                              username = p.username, password = p.password, client = "requestip" }
  return function(refresh)
    return provider:get(client, refresh)
  end
end

--- The organization root resource as it is now (`client:configure_status(opts)`).
-- @param self the client
-- @tparam[opt] table opts `request_timeout` (seconds)
-- @treturn[1] table the root resource (2.5; prints as a summary; see geoservices.configure.organization)
-- @return[2] nil
-- @treturn[2] table err: kind "protocol" (no status object), or the request's errors
-- @raise on misuse of opts
function configure.status(self, opts)
  opts = check_opts(opts, "configure_status")
  return read_root(self, opts.request_timeout)
end

--- Re-attaches to a configuration already running (after a crash or
-- Ctrl-C) without sending configure again (`client:wait_configured(opts)`).
-- @param self the client
-- @tparam[opt] table opts the options of @{Operation:wait}
-- @treturn[1] table the ready root resource
-- @return[2] nil
-- @treturn[2] table err: as @{Operation:wait}; kind "server" when the organization is not configured
-- @raise on misuse of opts
function configure.wait_configured(self, opts)
  opts = check_opts(opts, "wait_configured")
  local root, err = read_root(self, opts.request_timeout)
  if not root then return nil, err end
  local op = new_operation(self, root, opts)
  if op.state == "not_configured" then return nil, not_configured_error(root) end
  return op:wait(opts)
end

configure.Operation = Operation
return configure
