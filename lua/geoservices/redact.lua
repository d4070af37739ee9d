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

return redact
