--- Error values returned as the second result of every operation.
-- An error is a table with `kind`, `message` and, where known, `code`,
-- `details`, `status` (HTTP) and `url`; `tostring(err)` is one readable line.
-- Kinds: "invalid" (refused before sending), "network", "timeout", "http",
-- "server", "auth", "protocol", "cancelled" (the task was cancelled), "task"
-- (a task raised an error; see geoservices.loop).
-- @module geoservices.errors
local redact = require "geoservices.base.redact"

local errors = {}

local Error = {}
Error.__index = Error
Error.__name = "geoservices.Error"

--- An error value (`geoservices.Error`): a table returned as the second
-- result of a failed call, never raised by the library. `tostring(err)` is
-- `kind: message (code C) [HTTP S] <url>`; it concatenates as that line too.
-- @table Error
-- @field kind "invalid" (refused before anything was sent; `parameter` names it), "network"
--   (connection refused, reset, TLS, truncated transfer; `code` is a stable string such as
--   "couldnt_connect", "empty_reply", "partial", "tls_verify"), "timeout" (the deadline passed),
--   "cancelled" (the task was cancelled), "http" (an error status without a JSON error body),
--   "server" (a JSON error body, even with HTTP 200), "auth" (codes 498/499, HTTP 401/403),
--   "protocol" (not the JSON expected; `offset`), "job" (an async job failed or is gone), "edits"
--   (strict mode: some edits failed), "io" (a local file), "task" (a task raised), "emulator"
-- @field message one readable sentence (never a secret)
-- @field code the server's error code, or the transfer's code string
-- @field details the server's error details (a list), when given
-- @field status the HTTP status, when there was one
-- @field url the address of the failed request
-- @field parameter the refused parameter (kind "invalid")
-- @field ambiguous true when the request may have reached the server (edits may have been applied)
-- @field attempts how many attempts were made, when more than one

-- One line: kind, message, code, HTTP status, address.
function Error.__tostring(e)
  local parts = { e.kind, ": ", e.message }
  if e.code ~= nil and e.kind ~= "invalid" then parts[#parts + 1] = " (code " .. tostring(e.code) .. ")" end
  if e.status and e.status ~= 200 and e.kind ~= "http" then parts[#parts + 1] = " [HTTP " .. e.status .. "]" end
  if e.url then parts[#parts + 1] = " <" .. e.url .. ">" end
  return redact.text(table.concat(parts))
end

-- `"sync failed: " .. err` and `err .. "!"`: the one line of @{Error.__tostring}
-- (string.format's %s gives it too).
function Error.__concat(a, b)
  return tostring(a) .. tostring(b)
end

--- Makes an error table. `fields` may carry code, details, status, url...
-- @string kind the kind (see @{Error})
-- @string message the message
-- @tparam[opt] table fields more members, copied into the error
-- @treturn Error the error
-- @raise never
function errors.new(kind, message, fields)
  local e = { kind = kind, message = message }
  if fields then
    for k, v in pairs(fields) do e[k] = v end
  end
  -- made here, scrubbed here: no registered secret (geoservices.redact)
  -- reaches a message, whatever a server reflected
  return setmetatable(redact.scrub(e), Error)
end

--- Whether `value` is an error made by this module.
-- @param value any value
-- @treturn boolean
-- @raise never
function errors.is(value)
  return getmetatable(value) == Error
end

--- A refusal before anything is sent: names the parameter and the rule.
-- @string parameter the parameter's name
-- @string rule what the parameter must be (never its value: it may be a secret)
-- @treturn Error an error of kind "invalid", message "parameter: rule"
-- @raise when parameter or rule is neither a string nor a number
function errors.invalid(parameter, rule)
  return errors.new("invalid", parameter .. ": " .. rule, { parameter = parameter })
end

-- Transfer failure codes of the C core that mean "the deadline passed" or
-- "the response did not fit"; every other transfer failure is a network error.
local kind_of_transfer_code = {
  timeout = "timeout",
  cancelled = "cancelled", -- the task was cancelled (geoservices.loop)
  too_large = "protocol",
  bad_encoding = "protocol",
  save_failed = "io", -- the answer could not be written to its file: the local disk's failure (issue 39)
}

--- The error of a transfer failure of the C core.
-- @string message the core's message
-- @tparam ?string code the core's code: "timeout" and "cancelled" give those kinds, "too_large" and
--   "bad_encoding" kind "protocol", "save_failed" kind "io", anything else kind "network"
-- @tparam ?string url the address
-- @treturn Error the error
-- @raise never
function errors.from_transfer(message, code, url)
  return errors.new(kind_of_transfer_code[code] or "network", message, { code = code, url = url })
end

-- Codes the REST interface uses for token problems: 498 invalid or expired
-- token, 499 token required; plus the HTTP statuses with the same meaning.
local auth_codes = { [401] = true, [403] = true, [498] = true, [499] = true }

--- Whether a code (of an error body, or an HTTP status) means a token
-- problem: 498, 499, 401, 403.
-- @param code the code
-- @treturn boolean
-- @raise never
function errors.is_auth_code(code)
  return auth_codes[code] == true
end

return errors
