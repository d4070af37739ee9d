--- Fault injection: per route and per attempt number, so a test can say
-- "fail the first call, succeed the second". A fault is a table:
--   route     operation name ("getServicesById", "snapshots/list", ...) or "*"
--   attempts  list of attempt numbers it applies to (default: every attempt)
--   kind      "status"    answer `status` with `body` (default an HTML page), `headers`
--             "error"     a JSON error body {code, message} (HTTP 200, as the server does)
--             "delay"     answer normally after `delay_ms`
--             "reset"     close the connection before any response byte
--             "reset_mid_body"  send the headers and half of the body, then close
--             "truncate"  a complete response whose body is the first half of the real one
--             "invalid_json"  a 200 response whose body is not JSON
--   phase     "before": the request is refused before the operation runs
--             (nothing changes on the server); "after": the operation runs and
--             only its response is replaced or cut (the edits are applied, the
--             answer is lost). Default: "before" for "error" and for statuses
--             401, 403, 404, 429 and 503 (refusals), "after" for the rest.
local faults = {}

local REFUSING_STATUS = { [401] = true, [403] = true, [404] = true, [429] = true, [503] = true }

--- Whether the operation runs before the fault is applied.
function faults.runs_operation(fault)
  if fault.phase == "before" then return false end
  if fault.phase == "after" then return true end
  if fault.kind == "error" then return false end
  if fault.kind == "status" and REFUSING_STATUS[fault.status or 500] then return false end
  return true
end

local Faults = {}
Faults.__index = Faults

function faults.new()
  return setmetatable({ list = {} }, Faults)
end

local KINDS = {
  status = true, error = true, delay = true, reset = true, reset_mid_body = true,
  truncate = true, invalid_json = true,
}

--- Adds a fault; returns true or nil, message.
function Faults:add(fault)
  if type(fault) ~= "table" then return nil, "a fault is an object" end
  if type(fault.route) ~= "string" then return nil, "fault.route is required" end
  if not KINDS[fault.kind] then return nil, "fault.kind must be one of the known kinds" end
  if fault.attempts ~= nil and type(fault.attempts) ~= "table" then return nil, "fault.attempts is a list" end
  if fault.phase ~= nil and fault.phase ~= "before" and fault.phase ~= "after" then
    return nil, "fault.phase must be before or after"
  end
  self.list[#self.list + 1] = fault
  return true
end

function Faults:clear()
  self.list = {}
end

--- The fault that applies to this attempt of this route, if any.
function Faults:match(route, attempt)
  for _, fault in ipairs(self.list) do
    if fault.route == route or fault.route == "*" then
      if fault.attempts == nil then return fault end
      for _, n in ipairs(fault.attempts) do
        if n == attempt then return fault end
      end
    end
  end
  return nil
end

return faults
