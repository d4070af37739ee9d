--- Tokens, users, roles and privileges of the emulator (section 5).
local auth = {}

auth.NOTEBOOK_PRIVILEGE = "premium:user:createNotebooks"

local function error_body(code, message, details)
  return { error = { code = code, message = message, details = details or {} } }
end
auth.error_body = error_body

--- Resolves the form's token to a user: returns user or nil, error body.
-- 499: no token; 498: unknown or expired token.
function auth.user(world, form)
  local token = form.token
  if token == nil or token == "" then return nil, error_body(499, "Token Required.") end
  local entry = world.tokens[token]
  if not entry or entry.expired then return nil, error_body(498, "Invalid token.") end
  local user = world.users[entry.user]
  return setmetatable({ name = entry.user }, { __index = user })
end

function auth.has_privilege(user, privilege)
  for _, p in ipairs(user.privileges or {}) do
    if p == privilege or p == "*" then return true end
  end
  return false
end

function auth.forbidden()
  return error_body(403, "You do not have permissions to access this resource or perform this operation.")
end

function auth.is_administrator(user)
  return user.role == "administrator"
end

return auth
