--- Reading the organization root resource: overall state, stages,
-- failures and a one-line summary. Tolerant of what the spec leaves open:
-- state names are compared case-insensitively and a state containing
-- "fail" or "error" counts as a failure (the spec names no failure state).
--
-- States seen in the field are not_configured, in_progress, configured,
-- failed and ready; configured and ready both mean done (@{is_done}). The
-- vendor's published ready document has no state at all: a status without
-- a state whose stages are all completed (or not applicable), or a root
-- with resources and no status, reads as "ready". A real server lists a
-- stage only once it has started, so a list can be shorter than the
-- @{STAGE_NAMES}: the summary then says "so far".
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

--- The stages of 2.5 in the spec's order (the root resource's spelling).
-- @table STAGE_NAMES
organization.STAGE_NAMES = {
  "License validation", "Configuration store", "Relational store", "Cloud Native Storage", "Queue store",
  "In-memory store", "Object store", "Spatiotemporal and index store", "Portal REST API", "Services REST API",
  "Service lifecycle manager", "Usage statistics", "System and utility services", "Pod replicas",
}

--- Organization states this client knows; any other is the server's own
-- word, treated as still running until the deadline.
-- @table STATES
organization.STATES = { not_configured = true, in_progress = true, configured = true, failed = true, ready = true }

--- Whether a state means the configuration is done: "ready" or "configured".
-- @tparam string state a state as @{state} returns it
-- @treturn boolean
-- @raise never
function organization.is_done(state)
  return state == "ready" or state == "configured"
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
  if type(root) ~= "table" then return "unknown" end
  local status = type(root.status) == "table" and root.status or nil
  local state = norm(status and status.state)
  if state == "ready" then return "ready" end
  if organization.is_failure(state) then return "failed" end
  if state:gsub("[^%a]", "") == "notconfigured" then return "not_configured" end
  local stages = organization.stages(root)
  for _, stage in ipairs(stages) do
    if organization.is_failure(stage.state) then return "failed" end
  end
  if state ~= "" then return state end
  -- no state: the published ready document, or a resource still reporting
  if not status then
    return type(root.resources) == "table" and #root.resources > 0 and "ready" or "unknown"
  end
  if #stages == 0 then return "unknown" end
  for _, stage in ipairs(stages) do
    local s = norm(stage.state)
    if s ~= "completed" and s ~= "not_applicable" then return "in_progress" end
  end
  return "ready"
end

--- Whether the root resource names every stage of @{STAGE_NAMES} (the
-- configure response does; a root resource read while the configuration
-- runs lists only the stages that have started).
-- @tparam table root the root resource
-- @treturn boolean
-- @raise never
function organization.complete_list(root)
  local listed = {}
  for _, stage in ipairs(organization.stages(root)) do listed[organization.key(stage.name)] = true end
  for _, name in ipairs(organization.STAGE_NAMES) do
    if not listed[organization.key(name)] and name ~= "Cloud Native Storage" then return false end
  end
  return true
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
-- While the server lists only the stages started so far, it says so
-- instead of pretending the list is whole:
-- `organization in_progress: 3 of the 4 stages started so far completed, Relational store in progress
-- (server: "Creating the organization.")`.
-- @tparam table root the root resource
-- @treturn string the summary
-- @raise never
function organization.summary(root)
  local state = organization.state(root)
  if state == "not_configured" then return "organization not configured" end
  local done, total, running = 0, 0, {}
  for _, stage in ipairs(organization.stages(root)) do
    local s = norm(stage.state)
    if s ~= "not_applicable" then
      total = total + 1
      if s == "completed" then done = done + 1 end
      if s == "in_progress" then running[#running + 1] = stage.name end
    end
  end
  local partial = not organization.is_done(state) and state ~= "failed" and not organization.complete_list(root)
  local text
  if partial and total == 0 then
    text = ("organization %s: no stage started yet"):format(state)
  elseif partial then
    text = ("organization %s: %d of the %d stage%s started so far completed"):format(state, done, total,
      total == 1 and "" or "s")
  else
    text = ("organization %s: %d of %d stages completed"):format(state, done, total)
  end
  if state == "in_progress" and #running > 0 then
    text = text .. ", " .. table.concat(running, " and ") .. " in progress"
  end
  local status = type(root) == "table" and type(root.status) == "table" and root.status or {}
  if (partial or not organization.STATES[state]) and type(status.message) == "string" and status.message ~= "" then
    text = text .. (" (server: %q)"):format(status.message)
  end
  if not organization.STATES[state] and state ~= "unknown" then
    text = text .. "; this client does not know that state and waits"
  end
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
