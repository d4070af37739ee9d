--- The vendor's error answer, as the emulated operations give it:
-- `{error: {code, message, details: [...]}}`, details an array (empty
-- when there are none). The token routes (geoservices.emulator.auth) keep
-- their own, whose details stay a plain table.
-- @module geoservices.emulator.answers
-- @local
local json = require "geoservices.base.json"

local answers = {}

--- The error answer.
-- @int code the error's code (an HTTP status as the vendor gives it)
-- @string message
-- @tparam[opt] {string,...} details
-- @treturn table `{error = {code =, message =, details =}}`
function answers.error_body(code, message, details)
  return { error = { code = code, message = message, details = json.array(details or {}) } }
end

return answers
