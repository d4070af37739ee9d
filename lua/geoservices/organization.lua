--- Reading the organization root resource (2.5): overall state, stages,
-- failures and a one-line summary. Tolerant of what the spec leaves open:
-- state names are compared case-insensitively and a state containing
-- "fail" or "error" counts as a failure (the spec names no failure state).
local organization = {}

--- Stage names compared case-insensitively, blanks collapsed: the spec
-- spells "Usage statistics" two ways.
function organization.key(name)
  return (tostring(name):lower():gsub("%s+", " "):gsub("^ ", ""):gsub(" $", ""))
end

local function norm(state)
  return type(state) == "string" and state:lower() or ""
end

function organization.is_failure(state)
  state = norm(state)
  return state:find("fail", 1, true) ~= nil or state:find("error", 1, true) ~= nil
end

--- The stages of a root resource that carry a name, in reported order.
function organization.stages(root)
  local status = type(root) == "table" and type(root.status) == "table" and root.status or {}
  local list = {}
  for _, stage in ipairs(type(status.stages) == "table" and status.stages or {}) do
    if type(stage) == "table" and type(stage.name) == "string" then list[#list + 1] = stage end
  end
  return list
end

--- Overall state: "ready", "in_progress", "failed", "not_configured", or
-- the server's own word (lower case) for anything else.
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
function organization.progress_mark(root)
  local parts = { norm(type(root.status) == "table" and root.status.state) }
  for _, stage in ipairs(organization.stages(root)) do
    parts[#parts + 1] = ("%s=%s@%s"):format(organization.key(stage.name), norm(stage.state),
      tostring(stage.lastUpdated))
  end
  return table.concat(parts, ";")
end

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

--- Gives a root resource its summary `__tostring`; returns it.
function organization.wrap(root)
  return setmetatable(root, Root)
end

return organization
