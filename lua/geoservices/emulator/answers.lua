--- The shapes of the emulator's answers: an HTTP answer of JSON, and the
-- vendor's error answer, as the emulated operations give it:
-- `{error: {code, message, details: [...]}}`, details an array (empty
-- when there are none). The token routes (geoservices.emulator.auth) keep
-- their own error, whose details stay a plain table.
-- @module geoservices.emulator.answers
-- @local
local json = require "geoservices.base.json"

local answers = {}

--- An HTTP answer of JSON: `value` encoded, with its content type.
-- @int status the HTTP status
-- @param value what the body encodes
-- @treturn table `{status =, headers =, body =}`
function answers.json(status, value)
  return { status = status, headers = { ["Content-Type"] = "application/json; charset=utf-8" },
           body = json.encode(value) }
end

--- The error answer.
-- @int code the error's code (an HTTP status as the vendor gives it)
-- @string message
-- @tparam[opt] {string,...} details
-- @treturn table `{error = {code =, message =, details =}}`
function answers.error_body(code, message, details)
  return { error = { code = code, message = message, details = json.array(details or {}) } }
end

return answers
