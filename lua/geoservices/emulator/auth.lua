--- Tokens, users, roles and privileges of the emulator (section 5), and
-- generateToken: tokens that expire (`--token-seconds` makes them short,
-- so tests can watch a client refresh one in the middle of a long wait).
--
-- A token comes in the `token` form field or an `Authorization: Bearer`
-- header. A token bound to a referer is accepted only with that `Referer`
-- header, as a real server does.
local core = require "geoservices.core"

local auth = {}

auth.NOTEBOOK_PRIVILEGE = "premium:user:createNotebooks"

--- Seconds a generated token lives at most (the expiration asked for, in
-- minutes, is honoured when shorter).
auth.DEFAULT_TOKEN_SECONDS = 3600

local function error_body(code, message, details)
  return { error = { code = code, message = message, details = details or {} } }
end
auth.error_body = error_body

--- The administrative endpoints' other error dialect:
-- `{"status": "error", "messages": [...], "code": N}`.
function auth.admin_error(code, messages)
  return { status = "error", messages = messages, code = code }
end

--- The token a request carries: the form's, else a Bearer header's.
function auth.token_of(form, request)
  local token = form.token
  if (token == nil or token == "") and request and request.headers then
    local header = request.headers.authorization or ""
    token = header:match("^[Bb]earer%s+(%S+)%s*$")
  end
  if token == "" then token = nil end
  return token
end

--- Resolves the request's token to a user: returns user, or nil and the
-- code (499 no token, 498 unknown, expired or used from another referer)
-- and the message.
function auth.check(world, form, request)
  local token = auth.token_of(form, request)
  if token == nil then return nil, 499, "Token Required." end
  local entry = world.tokens[token]
  if not entry or entry.expired then return nil, 498, "Invalid token." end
  if entry.expires_at and core.monotonic() >= entry.expires_at then return nil, 498, "Token Expired." end
  if entry.referer and request and request.headers and request.headers.referer ~= entry.referer then
    return nil, 498, "Invalid token."
  end
  local user = world.users[entry.user]
  return setmetatable({ name = entry.user }, { __index = user })
end

--- Resolves the form's token (or the request's Bearer header) to a user:
-- returns user or nil, error body. 499: no token; 498: unknown or expired
-- token. `dialect` "admin" answers in the status/messages dialect.
function auth.user(world, form, request, dialect)
  local user, code, message = auth.check(world, form, request)
  if user then return user end
  if dialect == "admin" then return nil, auth.admin_error(code, { message }) end
  return nil, error_body(code, message)
end

function auth.has_privilege(user, privilege)
  for _, p in ipairs(user.privileges or {}) do
    if p == privilege or p == "*" then return true end
  end
  return false
end

auth.FORBIDDEN = "You do not have permissions to access this resource or perform this operation."

function auth.forbidden()
  return error_body(403, auth.FORBIDDEN)
end

function auth.is_administrator(user)
  return user.role == "administrator"
end

-- The world shares the data file's users and tokens tables (a reset
-- rebuilds it from them): copy one before adding to it.
local function own(world, name)
  local mark = "own_" .. name
  if not world[mark] then
    local copy = {}
    for k, v in pairs(world[name]) do copy[k] = v end
    world[name], world[mark] = copy, true
  end
  return world[name]
end

local function new_token_text()
  return (core.random_bytes(24):gsub(".", function(c) return ("%02x"):format(c:byte()) end))
end

local function cannot(detail)
  return error_body(400, "Unable to generate token.", { detail })
end

--- Handler of {base}/tokens/generateToken and {base}/sharing/rest/generateToken:
-- username and password of a user of the data file (its `password`) or of
-- the administrator configure created; `client` referer (with `referer`),
-- ip (with `ip`) or requestip; `expiration` in minutes. Answers
-- `{token =, expires = epoch ms, ssl = false}`.
function auth.generate_token(emu, request)
  local form = request.form
  if request.method ~= "POST" then
    return error_body(405, "Unable to generate token.", { "generateToken must be called with POST." })
  end
  local name, password = form.username, form.password
  if not name or name == "" or not password or password == "" then
    return cannot("Username and password are required.")
  end
  local user = emu.world.users[name]
  if not user or type(user.password) ~= "string" or user.password ~= password then
    return cannot("Invalid username or password.")
  end
  local client = form.client or "requestip"
  if client == "referer" and (form.referer == nil or form.referer == "") then
    return cannot("'referer' must be specified when client is referer.")
  elseif client == "ip" and (form.ip == nil or form.ip == "") then
    return cannot("'ip' must be specified when client is ip.")
  elseif client ~= "referer" and client ~= "ip" and client ~= "requestip" then
    return cannot("'client' must be referer, ip or requestip.")
  end
  local minutes = tonumber(form.expiration or "60")
  if not minutes or minutes <= 0 then return cannot("'expiration' must be a positive number of minutes.") end
  local seconds = math.min(minutes * 60, emu.token_seconds or auth.DEFAULT_TOKEN_SECONDS)
  local value = new_token_text()
  own(emu.world, "tokens")[value] = { user = name, expires_at = core.monotonic() + seconds,
                              referer = client == "referer" and form.referer or nil }
  emu.tokens_generated = (emu.tokens_generated or 0) + 1
  return { token = value, expires = math.floor(os.time() * 1000 + seconds * 1000), ssl = false }
end

--- Adds a user who can sign in (configure's first administrator).
function auth.add_user(world, name, password, role)
  own(world, "users")[name] = { role = role, privileges = { "*" }, password = password }
end

return auth
