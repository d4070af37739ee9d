--- The one list of secrets, and the redaction every printing path uses: the
-- client's observer events (dry runs, logs), configure's preview, the
-- pretty-printer. It sits at the top level rather than in configure/
-- because the client redacts its own events and must not depend on an
-- operation.
local redact = {}

-- Members whose values are secrets, at any depth (2.7 HMAC keys and the
-- database password share names with configure's top-level password).
redact.SECRET_KEYS = {
  token = true, password = true, securityQuestionAns = true, secretKey = true, accessKey = true,
}

redact.MARK = "<redacted>"

--- Whether a member name holds a secret.
function redact.is_secret(name)
  return redact.SECRET_KEYS[name] == true
end

--- A deep copy of `value` with every secret member replaced by "<redacted>"
-- (metatables kept); non-tables are returned as they are.
function redact.copy(value)
  if type(value) ~= "table" then return value end
  local out = setmetatable({}, getmetatable(value))
  for k, v in pairs(value) do
    out[k] = redact.SECRET_KEYS[k] and v ~= nil and redact.MARK or redact.copy(v)
  end
  return out
end

local function scrub_text(text, secrets)
  for _, secret in ipairs(secrets) do
    if #secret >= 4 then -- a shorter "secret" would blank ordinary words
      local at = text:find(secret, 1, true)
      while at do
        text = text:sub(1, at - 1) .. redact.MARK .. text:sub(at + #secret)
        at = text:find(secret, at + #redact.MARK, true)
      end
    end
  end
  return text
end

--- Removes every occurrence of the given secrets (a token, a password) from
-- an error's message, details, url and cause, whatever their source: a
-- server that reflects the request must not put the token into `tostring(err)`.
-- @tparam table err the error (changed in place)
-- @tparam table secrets the secret strings
-- @treturn table err
function redact.scrub(err, secrets)
  if type(err) ~= "table" or #secrets == 0 then return err end
  for k, v in pairs(err) do
    if type(v) == "string" then
      err[k] = scrub_text(v, secrets)
    elseif type(v) == "table" and (k == "details" or k == "cause") then
      redact.scrub(v, secrets)
    end
  end
  return err
end

return redact
