--- Asynchronous synchronization jobs of the emulator. A job's status moves
-- through the section 3 values as time passes (computed when read, so no
-- timers are needed); its result file is written when it is submitted and
-- becomes visible (resultUrl) once the job has completed.
local core = require "geoservices.core"

local jobs = {}

local PROGRESS = { "Pending", "InProgress", "ImportChanges", "ExportChanges" }

local Jobs = {}
Jobs.__index = Jobs

function jobs.new()
  return setmetatable({ by_id = {}, next_id = 1 }, Jobs)
end

local function epoch_ms()
  -- os.time() has whole seconds; the monotonic fraction only makes ids unique
  return os.time() * 1000 + math.floor((core.monotonic() % 1) * 1000)
end
jobs.epoch_ms = epoch_ms

--- Registers a job. `outcome` is "Completed", "CompletedWithErrors" or
-- "Failed"; `step_ms` the time each progress status lasts.
function Jobs:submit(fields, outcome, step_ms)
  local id = ("j%04d%06x"):format(self.next_id, math.random(0, 0xffffff))
  self.next_id = self.next_id + 1
  local job = {
    id = id,
    fields = fields,       -- status fields known at submission (2.4)
    outcome = outcome,
    step = step_ms / 1000,
    started = core.monotonic(),
    submission_ms = epoch_ms(),
  }
  self.by_id[id] = job
  return job
end

--- Re-attaches the methods to jobs reloaded from a state file.
function jobs.restore(t)
  return setmetatable(t, Jobs)
end

function Jobs:get(id)
  return self.by_id[id]
end

--- The job's current status value.
function jobs.status(job)
  local elapsed = core.monotonic() - job.started
  local i = math.floor(elapsed / job.step) + 1
  if i > #PROGRESS then return job.outcome, true end
  return PROGRESS[i], false
end

function jobs.finished(job)
  local _, done = jobs.status(job)
  return done
end

--- The status resource (2.4); resultUrl only once the job succeeded.
function jobs.resource(job, result_url)
  local status, done = jobs.status(job)
  local r = {}
  for k, v in pairs(job.fields) do r[k] = v end
  r.status = status
  r.submissionTime = tostring(job.submission_ms)
  local elapsed_steps = math.min(#PROGRESS, math.floor((core.monotonic() - job.started) / job.step))
  r.lastUpdatedTime = tostring(job.submission_ms + math.floor(elapsed_steps * job.step * 1000))
  r.resultUrl = (done and status ~= "Failed") and result_url or ""
  if done and status == "Failed" then
    r.messages = { { type = "error", description = "The synchronization job failed." } }
  end
  return r
end

return jobs
