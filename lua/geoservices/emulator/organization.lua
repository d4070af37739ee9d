--- The emulator's organization: not configured until a configure request
-- arrives, then its stages (2.5) run until it is ready. Progress is computed
-- from the elapsed time whenever the root resource is read, so no timers
-- are needed.
--
-- As on a real server, the configure response lists every stage
-- (not_started), but the root resource lists a stage only once it has
-- started, so the list grows while the configuration runs. Stages run one
-- after the other, `stage_seconds` each; with `parallel` some run side by
-- side (the stores, then the REST APIs), ending at different times. A stage
-- can be told to fail (it runs its slot, then reports "failed") or to stall
-- (it stays in progress and its lastUpdated stops changing). The finished
-- organization reports state "ready" (the spec), "configured" (seen in the
-- field) or no state at all (the vendor's published ready document), as
-- `final_state` says.
--
-- Tokens the right way round: configure on a site without an organization
-- needs no token (no user exists yet: configure creates the first
-- administrator, who can then sign in with generateToken); once configured,
-- the root resource and configure need one. Errors of these administrative
-- resources use the `{"status": "error", "messages": [...], "code": N}` dialect.
local core = require "geoservices.core"
local json = require "geoservices.base.json"
local auth = require "geoservices.emulator.auth"
local rules = require "geoservices.emulator.configure_rules"

local organization = {}

-- Stage names in order; `initial` is the spelling of the configure response;
-- `group` marks the stages that run side by side with `parallel`.
local STAGES = {
  { name = "License validation" },
  { name = "Configuration store" },
  { name = "Relational store" },
  { name = "Cloud Native Storage", cloud = true },
  { name = "Queue store", group = "stores" },
  { name = "In-memory store", group = "stores" },
  { name = "Object store", group = "stores" },
  { name = "Spatiotemporal and index store" },
  { name = "Portal REST API", group = "apis" },
  { name = "Services REST API", group = "apis" },
  { name = "Service lifecycle manager" },
  { name = "Usage statistics", initial = "Usage Statistics" },
  { name = "System and utility services" },
  { name = "Pod replicas" },
}
organization.STAGES = STAGES

local DEFAULT_STAGE_SECONDS = 0.5
local REPORTS_PER_STAGE = 4 -- an in-progress stage updates lastUpdated this often
local FINAL_STATES = { ready = true, configured = true, none = true }

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
    parallel = false,
    final_state = "ready",
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
-- fail_message =, stall = name, parallel = boolean, final_state = "ready" |
-- "configured" | "none"}. Returns true or nil, message.
function Org:control(body)
  if body.stage_seconds ~= nil then
    if type(body.stage_seconds) ~= "number" or body.stage_seconds <= 0 then
      return nil, "stage_seconds must be a positive number"
    end
    self.stage_seconds = body.stage_seconds
  end
  if body.parallel ~= nil then
    if type(body.parallel) ~= "boolean" then return nil, "parallel must be a boolean" end
    self.parallel = body.parallel
  end
  if body.final_state ~= nil then
    if not FINAL_STATES[body.final_state] then return nil, "final_state must be ready, configured or none" end
    self.final_state = body.final_state
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
  return { stage_seconds = self.stage_seconds, configured = self.configured, fail = fail, stall = stall,
           parallel = self.parallel == true, final_state = self.final_state or "ready" }
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

-- When each applicable stage starts and how long it takes, in seconds after
-- configure: {stage =, start =, length =}. Slot 0 stands for deploying the
-- containers before the first stage reports. Without `parallel` each stage
-- has its own slot; with it, a group's stages start together, the k-th of
-- them taking (1 + k/2) slots, and the next stage starts when all ended.
function Org:schedule()
  local d = self.stage_seconds
  local plan, t = {}, d
  local i = 1
  while i <= #STAGES do
    local s = STAGES[i]
    if s.cloud and not self.cloud_storage then
      i = i + 1
    elseif self.parallel and s.group then
      local longest, k = 0, 0
      while i <= #STAGES and STAGES[i].group == s.group do
        local length = d * (1 + k / 2)
        plan[#plan + 1] = { stage = STAGES[i], start = t, length = length }
        longest, k, i = math.max(longest, length), k + 1, i + 1
      end
      t = t + longest
    else
      plan[#plan + 1] = { stage = s, start = t, length = d }
      t, i = t + d, i + 1
    end
  end
  return plan
end

-- The status as it stands `elapsed` seconds after configure. `initial`:
-- the configure response, which lists every stage with its initial spelling.
function Org:status(elapsed, initial)
  local d = self.stage_seconds
  local tick = d / REPORTS_PER_STAGE
  local ms = function(offset) return self.epoch_ms + math.floor(offset * 1000 + 0.5) end
  local reported = elapsed >= d -- startTime is absent before the first progress report
  local slot = {}
  for _, p in ipairs(self:schedule()) do slot[p.stage] = p end
  local stages, failed, done = json.array(), nil, true
  -- a stage that stalls or failed: nothing starts after it
  local stalled_at, failed_at
  for _, p in ipairs(self:schedule()) do
    local sk = key(p.stage.name)
    if self.stall[sk] and elapsed >= p.start then stalled_at = math.min(stalled_at or p.start, p.start) end
    if self.fail[sk] and elapsed >= p.start + p.length then
      failed_at = math.min(failed_at or (p.start + p.length), p.start + p.length)
    end
  end
  for _, s in ipairs(STAGES) do
    local p = slot[s]
    local entry = { name = initial and s.initial or s.name }
    local start = p and p.start
    local listed = initial
    if not p then
      entry.state, entry.lastUpdated = "not_applicable", ms(0)
      listed = listed or elapsed >= d -- reported with the first progress report
    else
      local sk = key(s.name)
      local blocked = (stalled_at and p.start > stalled_at) or (failed_at and p.start >= failed_at)
      if blocked or elapsed < p.start then
        entry.state, entry.lastUpdated, start = "not_started", ms(0), nil
      elseif self.stall[sk] then
        entry.state, entry.lastUpdated, listed = "in_progress", ms(p.start), true
      elseif elapsed < p.start + p.length then
        entry.state = "in_progress"
        entry.lastUpdated = ms(p.start + math.floor((elapsed - p.start) / tick) * tick)
        listed = true
      elseif self.fail[sk] then
        entry.state, entry.lastUpdated, entry.message = "failed", ms(p.start + p.length), self.fail[sk]
        failed, listed = entry, true
      else
        entry.state, entry.lastUpdated, listed = "completed", ms(p.start + p.length), true
      end
      done = done and entry.state == "completed"
    end
    if reported then entry.startTime = start and ms(start) or 0 end
    if listed then stages[#stages + 1] = entry end
  end
  local status = { state = "in_progress", message = "Creating the organization. This may take a while.",
                   warnings = json.array(), stages = stages }
  if failed then
    status.state = "failed"
    status.message = ("Configuration failed at stage '%s': %s"):format(failed.name, failed.message)
  elseif done then
    local final = self.final_state or "ready"
    status.state = final ~= "none" and final or nil
    status.message = "The organization has been configured."
  end
  return status
end

--- The root resource (2.5) as of now.
function Org:root()
  if not self.configured then
    return resource{ state = "not_configured", warnings = json.array(), stages = json.array(),
      message = "The organization has not been configured. Use the configure operation to create it." }
  end
  local status = self:status(core.monotonic() - self.started)
  if status.state == nil then
    -- the vendor's published ready document: stages, no state, no message
    return resource{ stages = status.stages }
  end
  return resource(status)
end

--- Handler of {admin}: before configuration any caller may read it (a
-- token, when given, must be valid); afterwards it needs a token.
function organization.root_handler(emu, request)
  local form = request.form
  if emu.organization.configured or auth.token_of(form, request) then
    local _, err = auth.user(emu.world, form, request, "admin")
    if err then return err end
  end
  return emu.organization:root()
end

--- Handler of {admin}/configure. On a site without an organization it
-- needs no token (no user exists yet); a token that is sent anyway must be
-- an administrator's. Configure runs once: afterwards it needs a token and
-- is refused.
function organization.configure_handler(emu, request)
  local org = emu.organization
  local form = request.form
  if org.configured or auth.token_of(form, request) then
    local user, err = auth.user(emu.world, form, request, "admin")
    if not user then return err end
    if not auth.is_administrator(user) then return auth.admin_error(403, { auth.FORBIDDEN }) end
  end
  if not request.files then
    return auth.error_body(400, "configure expects a multipart/form-data body", { "licenseFile: is required" })
  end
  if org.configured then
    local state = org:status(core.monotonic() - org.started).state
    return auth.error_body(400, state ~= "in_progress" and "The organization has already been configured."
      or "The organization is already being configured.", json.array())
  end
  local problem = rules.check(form, request.files)
  if problem then return auth.error_body(400, "Unable to configure the organization", { problem }) end
  org.configured = true
  org.started = core.monotonic()
  org.epoch_ms = os.time() * 1000
  org.cloud_storage = rules.has_cloud_storage(form)
  org.admin = { username = form.username, password = form.password }
  auth.add_user(emu.world, form.username, form.password, "administrator")
  return resource(org:status(0, true))
end

--- Makes the administrator that configure created a user again (after a
-- restart from a state file, or a reset of the world).
function organization.restore_admin(emu)
  local admin = emu.organization.admin
  if admin and not emu.world.users[admin.username] then
    auth.add_user(emu.world, admin.username, admin.password, "administrator")
  end
end

return organization
