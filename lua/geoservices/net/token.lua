--- Tokens from a server's generateToken operation: a provider that asks
-- for a token with a username and password, keeps its expiry, and asks
-- again shortly before it expires (or when the server says it expired).
--
--     local geoservices = require "geoservices"
--     -- the client makes the provider itself:
--     local client = geoservices.client{ url = "https://host/server", username = "siteadmin",
--                                        password = os.getenv("GIS_PASSWORD") }
--     -- or one provider shared by several clients, against a portal:
--     local tokens = geoservices.token{ url = "https://host/portal", endpoint = "portal",
--                                       username = "siteadmin", password = read_password }
--     local client = geoservices.client{ url = "https://host/server", token = tokens }
--
-- The request is a POST of `username`, `password`, `client` (and `referer`
-- or `ip`), `expiration` (minutes) and `f=json` to `{url}/tokens/generateToken`
-- (a server) or `{url}/sharing/rest/generateToken` (a portal), or to the
-- address given as `token_url`. The password is kept in a closure: it is
-- never a field, never printed by `tostring` or `geoservices.pp`, and shows
-- as `<redacted>` to a client's observers (dry runs, logs); it and every
-- token are registered with geoservices.redact, so no error or output shows
-- them in any encoding, whatever the server reflects.
--
-- A token's lifetime is the server's (@{lifetime}: `expires` minus the Date
-- of its answer, or `expires_in`), counted on the monotonic clock from when
-- it was asked for: a local clock hours off the server's never makes it ask
-- for more than one token per lifetime.
--
-- A failure to obtain a token is an error with `reason = "generate_token"`
-- carrying the server's message: of kind "auth" when the server answered
-- (a refused password), of the transfer's kind ("network", "timeout",
-- "cancelled") when it was not reached.
-- @module geoservices.token
local core = require "geoservices.core"
local calendar = require "geoservices.base.calendar"
local errors = require "geoservices.base.errors"
local form = require "geoservices.base.form"
local origin = require "geoservices.net.origin"
local redact = require "geoservices.base.redact"

local token = {}

--- Where generateToken lives under the base address, by kind of server.
-- @table ENDPOINTS
-- @field server "tokens/generateToken" (a GIS server's token service)
-- @field portal "sharing/rest/generateToken" (a portal's)
token.ENDPOINTS = { server = "tokens/generateToken", portal = "sharing/rest/generateToken" }

--- Minutes a token is asked for when `expiration` is not given (the servers' own default).
token.DEFAULT_EXPIRATION = 60

--- At most this many seconds before its expiry a token is replaced (less for a short-lived one:
-- a fifth of its lifetime).
token.REFRESH_MARGIN = 60

local CLIENT_TYPES = { referer = true, requestip = true, ip = true }

local TokenProvider = {}
TokenProvider.__index = TokenProvider
TokenProvider.__name = "geoservices.TokenProvider"

local function check(opts, name, kind)
  local v = opts[name]
  if v ~= nil and type(v) ~= kind then
    error(("geoservices.token: option '%s' must be a %s, got %s"):format(name, kind, type(v)), 3)
  end
  return v
end

local KNOWN = {
  url = true, token_url = true, endpoint = true, username = true, password = true, client = true, referer = true,
  ip = true, expiration = true, refresh_margin = true, timeout = true, ca_file = true, insecure = true,
  user_agent = true,
}

--- The origin (scheme://host[:port]) of an address: the default referer.
local function origin_of(url)
  return url:match("^(%a[%w+.-]*://[^/?#]+)") or url
end

--- Makes a provider (`geoservices.token(opts)`). Nothing is sent until a
-- token is first needed.
-- @tparam table opts
-- @tparam string opts.url the base address the endpoint is under (`{base_url}`; required unless
--   `token_url` is given)
-- @tparam[opt] string opts.token_url the whole address of generateToken (instead of url + endpoint)
-- @tparam[opt="server"] string opts.endpoint "server" (`tokens/generateToken`) or "portal"
--   (`sharing/rest/generateToken`)
-- @string opts.username the user
-- @tparam string|function opts.password the password, or a function returning it (called for each
--   token, so it can be read from a file or a prompt when needed)
-- @tparam[opt="referer"] string opts.client "referer", "requestip" or "ip": what the token is bound to
-- @tparam[opt] string opts.referer with client "referer": the address the token is bound to (default
--   the origin of `url`); the client then sends it as the `Referer` header with the token
-- @tparam[opt] string opts.ip with client "ip": the address the token is bound to
-- @tparam[opt=60] number opts.expiration minutes the token is asked for
-- @tparam[opt] number opts.refresh_margin seconds before expiry a token is replaced (default
--   @{REFRESH_MARGIN}, at most a fifth of the lifetime)
-- @tparam[opt] number opts.timeout, opts.ca_file, opts.insecure, opts.user_agent the connection's
--   settings when the provider is used on its own (`provider:get()`); used with a client, the
--   client's connection is used
-- @tparam[opt] function connect `connect(settings) -> client`: makes the provider's own connection
--   for `provider:get()` without a client, from `{url =, timeout =, ca_file =, insecure =,
--   user_agent =}`; `geoservices.token` gives geoservices.net.client's. Handed in: this module is
--   below the client, which uses it for its own tokens
-- @treturn TokenProvider the provider
-- @raise on misuse: an unknown option, a wrong type, no url, no username or password, an unknown
--   endpoint or client type, client "ip" without `ip`
function token.new(opts, connect)
  if type(opts) ~= "table" then error("geoservices.token: expected an options table", 2) end
  if connect ~= nil and type(connect) ~= "function" then error("geoservices.token: connect must be a function", 2) end
  for name in pairs(opts) do
    if not KNOWN[name] then error(("geoservices.token: unknown option '%s'"):format(tostring(name)), 2) end
  end
  local url = check(opts, "url", "string")
  local token_url = check(opts, "token_url", "string")
  local endpoint = check(opts, "endpoint", "string") or "server"
  if not token.ENDPOINTS[endpoint] then
    error("geoservices.token: option 'endpoint' must be \"server\" or \"portal\"", 2)
  end
  if not token_url then
    if not url then error("geoservices.token: option 'url' (or 'token_url') is required", 2) end
    token_url = url:gsub("/+$", "") .. "/" .. token.ENDPOINTS[endpoint]
  end
  local problem = origin.address_problem(token_url)
  if problem then
    error(("geoservices.token: option '%s' %s"):format(opts.token_url and "token_url" or "url", problem), 2)
  end
  local username = check(opts, "username", "string")
  if not username or username == "" then error("geoservices.token: option 'username' is required", 2) end
  local password = opts.password
  if type(password) ~= "string" and type(password) ~= "function" then
    error("geoservices.token: option 'password' is required (a string or a function returning one)", 2)
  end
  local client_type = check(opts, "client", "string") or "referer"
  if not CLIENT_TYPES[client_type] then
    error("geoservices.token: option 'client' must be \"referer\", \"requestip\" or \"ip\"", 2)
  end
  local ip = check(opts, "ip", "string")
  if client_type == "ip" and not ip then error("geoservices.token: option 'ip' is required with client \"ip\"", 2) end
  local expiration = check(opts, "expiration", "number") or token.DEFAULT_EXPIRATION
  if not (expiration > 0 and expiration < math.huge) then
    error("geoservices.token: option 'expiration' must be a positive number of minutes", 2)
  end
  local margin, timeout = check(opts, "refresh_margin", "number"), check(opts, "timeout", "number")
  if margin and not (margin >= 0 and margin < math.huge) then
    error("geoservices.token: option 'refresh_margin' must be a finite number of seconds, at least 0", 2)
  end
  if timeout and not (timeout > 0 and timeout < math.huge) then
    error("geoservices.token: option 'timeout' must be a positive number of seconds", 2)
  end
  local self = setmetatable({
    url = token_url,
    username = username,
    client = client_type,
    referer = client_type == "referer" and (check(opts, "referer", "string") or origin_of(url or token_url)) or nil,
    ip = ip,
    expiration = expiration,
    refresh_margin = margin,
    expires = nil,   -- epoch milliseconds of the current token, as the server said
    count = 0,       -- tokens obtained so far
    settings = { timeout = timeout, ca_file = check(opts, "ca_file", "string"),
                 insecure = check(opts, "insecure", "boolean"), user_agent = check(opts, "user_agent", "string") },
    connect = connect,
  }, TokenProvider)
  -- The secrets live in closures: no field, print or dump reveals them.
  local current, valid_until -- the token; monotonic time after which it is replaced
  function self._password()
    local used
    if type(password) == "function" then used = password() else used = password end
    return redact.register(used) -- scrubbed from whatever the server answers
  end
  function self._held() return current, valid_until end
  function self._keep(value, until_t) current, valid_until = value, until_t end
  return self
end

--- Whether `value` is a provider made by @{new}.
-- @param value any value
-- @treturn boolean
-- @raise never
function token.is(value)
  return getmetatable(value) == TokenProvider
end

--- A generateToken provider made by @{new}. Fields (read only): `url` (the
-- generateToken address), `username`, `client`, `referer`, `expiration`
-- (minutes asked), `expires` (epoch milliseconds of the current token, nil
-- before the first), `count` (tokens obtained). `tostring(provider)` never
-- shows the token or the password.
-- @type TokenProvider

function TokenProvider:__tostring()
  local when = ""
  if self.expires then
    when = (", current token expires %s UTC"):format(os.date("!%Y-%m-%d %H:%M:%S", self.expires // 1000))
  end
  return ("geoservices.TokenProvider <%s> for user '%s' (client %s, %g min%s)"):format(
    self.url, self.username, self.client, self.expiration, when)
end

--- The form fields of the generateToken request, the password included:
-- only for the request itself (`describe` shows them redacted).
-- @local
function TokenProvider:fields()
  -- a password function may fail (a file that cannot be read): an error, not a raise
  local ok, password = pcall(self._password)
  if not ok or type(password) ~= "string" or password == "" then
    local why = not ok and (": " .. tostring(type(password) == "table" and password.message or password)) or ""
    return nil, errors.new("auth", ("no password for user '%s' to generate a token%s"):format(self.username, why),
      { reason = "generate_token", url = self.url })
  end
  return {
    username = self.username, password = password, client = self.client, referer = self.referer, ip = self.ip,
    expiration = math.tointeger(self.expiration) or self.expiration,
  }
end

--- The request a dry run shows: method, address and fields, the password
-- as "<redacted>".
-- @treturn table `{method =, url =, content_type =, fields = {{name, text}, ...}, files = {}}`
-- @raise never
function TokenProvider:describe()
  local described = form.describe({ username = self.username, password = "x", client = self.client,
                                    referer = self.referer, ip = self.ip, expiration = self.expiration },
    nil, false, false)
  return { method = "POST", url = self.url, content_type = described.content_type, fields = described.fields,
           files = described.files }
end

local MONTHS = { jan = 1, feb = 2, mar = 3, apr = 4, may = 5, jun = 6, jul = 7, aug = 8, sep = 9, oct = 10,
                 nov = 11, dec = 12 }

--- Seconds since the epoch of an HTTP date (RFC 9110: IMF-fixdate, and the
-- obsolete RFC 850 and asctime forms), or nil.
-- @string text the Date header
-- @treturn ?integer seconds
-- @raise never
function token.http_date(text)
  if type(text) ~= "string" then return nil end
  local d, mon, y, h, mi, sec = text:match("^%a+, (%d%d?) (%a%a%a) (%d%d%d%d) (%d%d):(%d%d):(%d%d) GMT")
  if not d then
    d, mon, y, h, mi, sec = text:match("^%a+, (%d%d)%-(%a%a%a)%-(%d%d) (%d%d):(%d%d):(%d%d) GMT")
    if y then y = tonumber(y) + (tonumber(y) < 70 and 2000 or 1900) end
  end
  if not d then mon, d, h, mi, sec, y = text:match("^%a+ (%a%a%a) +(%d%d?) (%d%d):(%d%d):(%d%d) (%d%d%d%d)") end
  local month = mon and MONTHS[mon:lower()]
  if not month then return nil end
  return calendar.days_from_civil(tonumber(y), month, tonumber(d)) * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60
    + tonumber(sec)
end

local function sane(seconds)
  return type(seconds) == "number" and seconds > 0 and seconds < math.huge
end

--- Seconds a token is good for from when it was received, from what the
-- server said: its `expires` (epoch milliseconds by the server's clock)
-- minus the Date of its answer (less a second: Date counts whole seconds);
-- else its `expires_in`; else `expires` by the local clock, taken only
-- within (0, asked]; else what was asked. A local clock hours off the
-- server's changes nothing but the last case, and there it gives what was
-- asked rather than a token per request (or one kept for hours): the server
-- says 498 if the token ends sooner, and it is replaced once.
-- @tparam table answer `expires`, `expires_in`, `date` (the Date header), `asked` (seconds asked for)
-- @treturn number seconds
-- @raise never
function token.lifetime(answer)
  local expires = tonumber(answer.expires)
  local server_now = token.http_date(answer.date)
  if expires and server_now then
    local life = expires / 1000 - server_now - 1
    if sane(life) then return life end
  end
  local expires_in = tonumber(answer.expires_in)
  if sane(expires_in) then return expires_in end
  if expires then
    local life = expires / 1000 - os.time() - 1
    if sane(life) and life <= answer.asked then return life end
  end
  return answer.asked
end

local function margin_for(self, lifetime)
  return math.min(self.refresh_margin or token.REFRESH_MARGIN, lifetime / 5)
end

--- Whether the current token is missing or due for replacement.
-- @treturn boolean
-- @raise never
function TokenProvider:due()
  local current, valid_until = self._held()
  return current == nil or (valid_until ~= nil and core.monotonic() >= valid_until)
end

-- The server was not reached, or not in time: the failure is the
-- transfer's (issue 39: a refused connection is no refused password).
local NOT_REACHED = { network = true, timeout = true, cancelled = true }

local function failure(self, err)
  local why = err and err.message or "no answer"
  local kind = err and NOT_REACHED[err.kind] and err.kind or "auth"
  local e = errors.new(kind, ("could not generate a token for user '%s' at %s: %s"):format(
    self.username, self.url, why), {
      reason = "generate_token", code = err and err.code, details = err and err.details, status = err and err.status,
      url = self.url, cause_kind = err and err.kind,
    })
  return e
end

--- Asks generateToken for a token through `client` (a geoservices client:
-- its connection, TLS settings, retries and observers).
-- @local
function TokenProvider:fetch(client)
  local fields, err = self:fields()
  if not fields then return nil, err end
  local started = core.monotonic()
  local body, post_err, info = client:post(self.url, fields, { token = false, retry = "read" })
  fields.password = nil
  if not body then return nil, failure(self, post_err) end
  local value = body.token or body.access_token
  if type(value) ~= "string" or value == "" then
    return nil, failure(self, errors.new("protocol", "the answer has no token"))
  end
  -- counted from when the request left (the token was made after that) on
  -- the monotonic clock, so changing or skewed wall clocks do not matter
  local lifetime = token.lifetime{ expires = body.expires, expires_in = body.expires_in,
                                   date = info and info.date, asked = self.expiration * 60 }
  self.expires = math.tointeger(tonumber(body.expires)) or (os.time() + math.floor(lifetime)) * 1000
  self._keep(redact.register(value), started + lifetime - margin_for(self, lifetime))
  self.count = self.count + 1
  self.ssl = body.ssl == true or nil
  return value
end

-- The provider's own connection, made once by the `connect` it was given.
local function own_client(self)
  if not self.client_conn then
    if not self.connect then
      error("geoservices.token: this provider has no connection of its own (token.new without connect): "
        .. "give get() a client", 3)
    end
    local s = self.settings
    self.client_conn = self.connect{ url = self.url, timeout = s.timeout, ca_file = s.ca_file, insecure = s.insecure,
                                     user_agent = s.user_agent }
  end
  return self.client_conn
end

--- The current token, generating one when there is none, it is near its
-- expiry, or `refresh` asks for a new one (the server answered 498).
-- @tparam[opt] table client the geoservices client whose connection is used (default the provider's
--   own, made from its options)
-- @tparam[opt] boolean refresh replace the current token whatever its expiry
-- @treturn[1] string the token
-- @return[2] nil
-- @treturn[2] table err: `reason = "generate_token"`, kind "auth" with the server's message, or
--   the transfer's kind ("network", "timeout", "cancelled") when it was not reached; never the password
-- @raise without a client when the provider was made without `connect` (see @{new})
function TokenProvider:get(client, refresh)
  if not refresh and not self:due() then return (self._held()) end
  return self:fetch(client or own_client(self))
end

--- Forgets the current token (the next @{get} generates one).
-- @return nothing
-- @raise never
function TokenProvider:reset()
  self._keep(nil, nil)
  self.expires = nil
end

token.TokenProvider = TokenProvider
token.Provider = TokenProvider
return token
