--- The emulator's organization: not configured until a configure request
-- arrives, then its stages (2.5) advance one at a time, `stage_seconds`
-- each, until it is ready. Progress is computed from the elapsed time
-- whenever the root resource is read, so no timers are needed. A stage can
-- be told to fail (it runs its slot, then reports "failed") or to stall (it
-- stays in progress and its lastUpdated stops changing).
local core = require "geoservices.core"
local json = require "geoservices.json"
local auth = require "geoservices.emulator.auth"
local rules = require "geoservices.emulator.configure_rules"

local organization = {}

-- Stage names in order; `initial` is the spelling of the configure response.
local STAGES = {
  { name = "License validation" },
  { name = "Configuration store" },
  { name = "Relational store" },
  { name = "Cloud Native Storage", cloud = true },
  { name = "Queue store" },
  { name = "In-memory store" },
  { name = "Object store" },
  { name = "Spatiotemporal and index store" },
  { name = "Portal REST API" },
  { name = "Services REST API" },
  { name = "Service lifecycle manager" },
  { name = "Usage statistics", initial = "Usage Statistics" },
  { name = "System and utility services" },
  { name = "Pod replicas" },
}
organization.STAGES = STAGES

local DEFAULT_STAGE_SECONDS = 0.5
local REPORTS_PER_STAGE = 4 -- an in-progress stage updates lastUpdated this often

local Org = {}
Org.__index = Org

local function key(name)
  return (tostring(name):lower():gsub("%s+", " "))
end

--- settings: stage_seconds (0.5).
function organization.new(settings)
  settings = settings or {}
  return setmetatable({
    configured = false,
    stage_seconds = settings.stage_seconds or DEFAULT_STAGE_SECONDS,
    fail = {},  -- stage key -> message
    stall = {}, -- stage key -> true
  }, Org)
end

--- Re-attaches the methods to an organization reloaded from a state file.
function organization.restore(t)
  return setmetatable(t, Org)
end

local function stage_key(name)
  if type(name) ~= "string" then return nil end
  for _, s in ipairs(STAGES) do
    if key(s.name) == key(name) then return key(s.name) end
  end
  return nil
end

--- Applies a control request body: {stage_seconds =, fail = name,
-- fail_message =, stall = name}. Returns true or nil, message.
function Org:control(body)
  if body.stage_seconds ~= nil then
    if type(body.stage_seconds) ~= "number" or body.stage_seconds <= 0 then
      return nil, "stage_seconds must be a positive number"
    end
    self.stage_seconds = body.stage_seconds
  end
  for _, what in ipairs{ "fail", "stall" } do
    if body[what] ~= nil then
      local k = stage_key(body[what])
      if not k then return nil, what .. " must name a configuration stage" end
      self[what][k] = what == "fail" and (body.fail_message or "The stage reported an error.") or true
    end
  end
  return true
end

function Org:settings()
  local fail, stall = json.object(), json.array()
  for k, m in pairs(self.fail) do fail[k] = m end
  for k in pairs(self.stall) do stall[#stall + 1] = k end
  return { stage_seconds = self.stage_seconds, configured = self.configured, fail = fail, stall = stall }
end

local function resource(status)
  return {
    fullVersion = "11.4.0",
    currentVersion = 11.4,
    resources = status.state == "not_configured" and json.array()
      or json.array{ "orgs", "logs", "system", "datastores", "uploads", "services" },
    info = { build = "11.4.0.5200" },
    status = status,
  }
end

-- The stages as they stand `elapsed` seconds after configure. Stage k of the
-- applicable ones runs from (k+1)*d to (k+2)*d: slot 0 stands for deploying
-- the containers before the first stage reports.
function Org:status(elapsed, initial)
  local d = self.stage_seconds
  local tick = d / REPORTS_PER_STAGE
  local ms = function(offset) return self.epoch_ms + math.floor(offset * 1000 + 0.5) end
  local reported = elapsed >= d -- startTime is absent before the first progress report
  local stages, halted, failed, done = json.array(), false, nil, true
  local k = 0
  for _, s in ipairs(STAGES) do
    local entry = { name = initial and s.initial or s.name }
    local start = nil
    if s.cloud and not self.cloud_storage then
      entry.state, entry.lastUpdated = "not_applicable", ms(0)
    else
      k = k + 1
      start = k * d
      local sk = key(s.name)
      if halted or elapsed < start then
        entry.state, entry.lastUpdated, start = "not_started", ms(0), nil
      elseif self.stall[sk] then
        entry.state, entry.lastUpdated, halted = "in_progress", ms(start), true
      elseif elapsed < start + d then
        entry.state = "in_progress"
        entry.lastUpdated = ms(start + math.floor((elapsed - start) / tick) * tick)
      elseif self.fail[sk] then
        entry.state, entry.lastUpdated, entry.message, halted = "failed", ms(start + d), self.fail[sk], true
        failed = entry
      else
        entry.state, entry.lastUpdated = "completed", ms(start + d)
      end
      done = done and entry.state == "completed"
    end
    if reported then entry.startTime = start and ms(start) or 0 end
    stages[#stages + 1] = entry
  end
  local status = { state = "in_progress", message = "Creating the organization. This may take a while.",
                   warnings = json.array(), stages = stages }
  if failed then
    status.state = "failed"
    status.message = ("Configuration failed at stage '%s': %s"):format(failed.name, failed.message)
  elseif done then
    status.state, status.message = "ready", "The organization has been configured."
  end
  return status
end

--- The root resource (2.5) as of now.
function Org:root()
  if not self.configured then
    return resource{ state = "not_configured", warnings = json.array(), stages = json.array(),
      message = "The organization has not been configured. Use the configure operation to create it." }
  end
  return resource(self:status(core.monotonic() - self.started))
end

--- Handler of {admin}: any caller may read it; a token, when given, must be valid.
function organization.root_handler(emu, request)
  if request.form.token and request.form.token ~= "" then
    local _, err = auth.user(emu.world, request.form)
    if err then return err end
  end
  return emu.organization:root()
end

--- Handler of {admin}/configure: the default administrator only, once.
function organization.configure_handler(emu, request)
  local org = emu.organization
  local user, err = auth.user(emu.world, request.form)
  if not user then return err end
  if not auth.is_administrator(user) then return auth.forbidden() end
  if not request.files then
    return auth.error_body(400, "configure expects a multipart/form-data body", { "licenseFile: is required" })
  end
  if org.configured then
    local state = org:root().status.state
    return auth.error_body(400, state == "ready" and "The organization has already been configured."
      or "The organization is already being configured.", json.array())
  end
  local problem = rules.check(request.form, request.files)
  if problem then return auth.error_body(400, "Unable to configure the organization", { problem }) end
  org.configured = true
  org.started = core.monotonic()
  org.epoch_ms = os.time() * 1000
  org.cloud_storage = rules.has_cloud_storage(request.form)
  return resource(org:status(0, true))
end

return organization
