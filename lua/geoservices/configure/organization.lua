--- Reading the organization root resource (2.5): overall state, stages,
-- failures and a one-line summary. Tolerant of what the spec leaves open:
-- state names are compared case-insensitively and a state containing
-- "fail" or "error" counts as a failure (the spec names no failure state).
--
-- Every function takes a root resource as client:configure_status() returns
-- it (`{status = {state =, message =, stages = { {name =, state =,
-- lastUpdated =, message =}, ... }}}`), tolerates missing members and
-- returns plain values.
-- @module geoservices.configure.organization
local organization = {}

--- Stage names compared case-insensitively, blanks collapsed: the spec
-- spells "Usage statistics" two ways.
-- @param name a stage name (anything is converted with tostring)
-- @treturn string the key: lower case, single blanks, trimmed
-- @raise never
function organization.key(name)
  return (tostring(name):lower():gsub("%s+", " "):gsub("^ ", ""):gsub(" $", ""))
end

local function norm(state)
  return type(state) == "string" and state:lower() or ""
end

--- Whether a state (of the organization or a stage) is a failure: it
-- contains "fail" or "error", in any case.
-- @param state the state (non-strings are not failures)
-- @treturn boolean
-- @raise never
function organization.is_failure(state)
  state = norm(state)
  return state:find("fail", 1, true) ~= nil or state:find("error", 1, true) ~= nil
end

--- The stages of a root resource that carry a name, in reported order.
-- @tparam table root the root resource
-- @treturn {table,...} the stages, `{name =, state =, ...}` as the server reported them (possibly empty)
-- @raise never
function organization.stages(root)
  local status = type(root) == "table" and type(root.status) == "table" and root.status or {}
  local list = {}
  for _, stage in ipairs(type(status.stages) == "table" and status.stages or {}) do
    if type(stage) == "table" and type(stage.name) == "string" then list[#list + 1] = stage end
  end
  return list
end

--- Overall state: "ready", "in_progress", "failed", "not_configured", or
-- the server's own word (lower case) for anything else. A failed stage
-- makes the organization "failed".
-- @tparam table root the root resource
-- @treturn string the state ("unknown" when the resource has none)
-- @raise never
function organization.state(root)
  local status = type(root) == "table" and type(root.status) == "table" and root.status or {}
  local state = norm(status.state)
  if state == "ready" then return "ready" end
  if organization.is_failure(state) then return "failed" end
  if state:gsub("[^%a]", "") == "notconfigured" then return "not_configured" end
  for _, stage in ipairs(organization.stages(root)) do
    if organization.is_failure(stage.state) then return "failed" end
  end
  return state ~= "" and state or "unknown"
end

--- Failed stages as {name =, state =, message =} (message from the stage,
-- else the overall status message).
-- @tparam table root the root resource
-- @treturn {table,...} the failed stages (possibly empty)
-- @raise when root is not a table
function organization.failures(root)
  local out = {}
  local overall = type(root.status) == "table" and root.status.message or nil
  for _, stage in ipairs(organization.stages(root)) do
    if organization.is_failure(stage.state) then
      out[#out + 1] = { name = stage.name, state = stage.state, message = stage.message or overall }
    end
  end
  return out
end

--- The stage a stall is blamed on: the one in progress, else the first one
-- not started.
-- @tparam table root the root resource
-- @treturn ?table the stage, or nil when none is in progress or waiting
-- @raise never
function organization.current_stage(root)
  local first_waiting
  for _, stage in ipairs(organization.stages(root)) do
    local state = norm(stage.state)
    if state == "in_progress" then return stage end
    if state == "not_started" and not first_waiting then first_waiting = stage end
  end
  return first_waiting
end

--- A text that changes whenever any stage reports progress (a new state or
-- a new lastUpdated), used to detect a stall.
-- @tparam table root the root resource
-- @treturn string the mark
-- @raise when root is not a table
function organization.progress_mark(root)
  local parts = { norm(type(root.status) == "table" and root.status.state) }
  for _, stage in ipairs(organization.stages(root)) do
    parts[#parts + 1] = ("%s=%s@%s"):format(organization.key(stage.name), norm(stage.state),
      tostring(stage.lastUpdated))
  end
  return table.concat(parts, ";")
end

--- The one-line summary a root resource prints as:
-- `organization in_progress: 5 of 13 stages completed, Object store in progress`.
-- @tparam table root the root resource
-- @treturn string the summary
-- @raise never
function organization.summary(root)
  local state = organization.state(root)
  if state == "not_configured" then return "organization not configured" end
  local done, total = 0, 0
  for _, stage in ipairs(organization.stages(root)) do
    local s = norm(stage.state)
    if s ~= "not_applicable" then
      total = total + 1
      if s == "completed" then done = done + 1 end
    end
  end
  local text = ("organization %s: %d of %d stages completed"):format(state, done, total)
  local current = state == "in_progress" and organization.current_stage(root)
  if current and norm(current.state) == "in_progress" then text = text .. ", " .. current.name .. " in progress" end
  if state == "failed" then
    local names = {}
    for _, f in ipairs(organization.failures(root)) do names[#names + 1] = f.name end
    if #names > 0 then text = text .. ", failed: " .. table.concat(names, ", ") end
  end
  return text
end

local Root = { __name = "geoservices.OrganizationRoot", __tostring = organization.summary }

--- Gives a root resource its summary `__tostring` (@{summary}).
-- @tparam table root the root resource
-- @treturn table root itself
-- @raise when root is not a table
function organization.wrap(root)
  return setmetatable(root, Root)
end

return organization
