--- Error values returned as the second result of every operation.
-- An error is a table with `kind`, `message` and, where known, `code`,
-- `details`, `status` (HTTP) and `url`; `tostring(err)` is one readable line.
-- Kinds: "invalid" (refused before sending), "network", "timeout", "http",
-- "server", "auth", "protocol", "cancelled" (the task was cancelled), "task"
-- (a task raised an error; see geoservices.loop).
local errors = {}

local Error = {}
Error.__index = Error
Error.__name = "geoservices.Error"

function Error.__tostring(e)
  local parts = { e.kind, ": ", e.message }
  if e.code ~= nil and e.kind ~= "invalid" then parts[#parts + 1] = " (code " .. tostring(e.code) .. ")" end
  if e.status and e.status ~= 200 and e.kind ~= "http" then parts[#parts + 1] = " [HTTP " .. e.status .. "]" end
  if e.url then parts[#parts + 1] = " <" .. e.url .. ">" end
  return table.concat(parts)
end

--- Makes an error table. `fields` may carry code, details, status, url...
function errors.new(kind, message, fields)
  local e = { kind = kind, message = message }
  if fields then
    for k, v in pairs(fields) do e[k] = v end
  end
  return setmetatable(e, Error)
end

function errors.is(value)
  return getmetatable(value) == Error
end

--- A refusal before anything is sent: names the parameter and the rule.
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
}

function errors.from_transfer(message, code, url)
  return errors.new(kind_of_transfer_code[code] or "network", message, { code = code, url = url })
end

-- Codes the REST interface uses for token problems: 498 invalid or expired
-- token, 499 token required; plus the HTTP statuses with the same meaning.
local auth_codes = { [401] = true, [403] = true, [498] = true, [499] = true }

function errors.is_auth_code(code)
  return auth_codes[code] == true
end

return errors
