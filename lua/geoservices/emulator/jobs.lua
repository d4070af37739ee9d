--- Asynchronous synchronization jobs of the emulator. A job's status moves
-- through the section 3 values as time passes: Pending, InProgress,
-- ImportChanges, ExportChanges, then its outcome, each lasting the job step
-- time or its own (settings job_step_ms, job_phase_ms). The work follows the clock (emulator.sync.advance, run by the
-- emulator's loop and before every request): the edits are imported when the
-- job enters ImportChanges, the result file is written when it enters
-- ExportChanges and becomes visible (resultUrl) once the job has completed.
-- `imported` and `exported` say what was done; they are saved with the
-- state file together with the state they changed (one atomic write), so an
-- emulator killed at any moment and restarted with the same --state-file
-- carries the job on from there: a job killed before its import still runs
-- and imports exactly once (its clock kept running: a job overdue imports
-- and exports at once on restart); one killed after it never imports again.
-- Without the state file the job is gone (404), and nothing of it was
-- applied unless its import had happened.
local core = require "geoservices.core"

local jobs = {}

local PROGRESS = { "Pending", "InProgress", "ImportChanges", "ExportChanges" }
jobs.IMPORT = 3 -- phase index of ImportChanges
jobs.EXPORT = 4 -- phase index of ExportChanges

local Jobs = {}
Jobs.__index = Jobs

function jobs.new()
  return setmetatable({ by_id = {}, next_id = 1, active = {} }, Jobs)
end

local function epoch_ms()
  -- os.time() has whole seconds; the monotonic fraction only makes ids unique
  return os.time() * 1000 + math.floor((core.monotonic() % 1) * 1000)
end
jobs.epoch_ms = epoch_ms

local function phase_steps(phase_ms)
  if not phase_ms or next(phase_ms) == nil then return nil end
  local out = {}
  for name, ms in pairs(phase_ms) do out[name] = ms / 1000 end
  return out
end

--- Registers a job. `outcome` is "Completed", "CompletedWithErrors" or
-- "Failed"; `step_ms` the time each progress status lasts, `phase_ms` (a
-- table status name -> ms, optional) the time of the statuses that differ.
function Jobs:submit(fields, outcome, step_ms, phase_ms)
  local id = ("j%04d%06x"):format(self.next_id, math.random(0, 0xffffff))
  self.next_id = self.next_id + 1
  local job = {
    id = id,
    seq = self.next_id - 1, -- submission order
    fields = fields,       -- status fields known at submission (2.4)
    outcome = outcome,
    step = step_ms / 1000,
    phase_steps = phase_steps(phase_ms),
    started = core.monotonic(),
    submission_ms = epoch_ms(),
    imported = false,      -- the edits were imported (ImportChanges)
    exported = false,      -- the result was exported (ExportChanges)
  }
  self.by_id[id] = job
  self.active[id] = true
  return job
end

--- Re-attaches the methods to jobs reloaded from a state file. A job saved
-- before jobs imported in their own phase did all its work at submission.
function jobs.restore(t)
  t.active = t.active or {}
  for id, job in pairs(t.by_id) do
    if job.imported == nil then job.imported, job.exported = true, true end
    if not job.exported then t.active[id] = true end
  end
  return setmetatable(t, Jobs)
end

--- The jobs whose work is not done yet, in submission order.
function Jobs:pending()
  local out = {}
  for id in pairs(self.active) do
    local job = self.by_id[id]
    if job and not job.exported then out[#out + 1] = job else self.active[id] = nil end
  end
  table.sort(out, function(a, b) return (a.seq or 0) < (b.seq or 0) end)
  return out
end

function Jobs:get(id)
  return self.by_id[id]
end

-- How long status `name` lasts in this job, seconds.
local function duration(job, name)
  return job.phase_steps and job.phase_steps[name] or job.step
end

-- Seconds from the job's start to the start of phase `i`.
local function phase_start(job, progress, i)
  local t = 0
  for k = 1, math.min(i - 1, #progress) do t = t + duration(job, progress[k]) end
  return t
end

--- The index of the job's current phase: 1 Pending ... 4 ExportChanges, 5 finished
-- (a job with its own `phases`, such as createReplica's, counts those).
function jobs.phase(job)
  local progress = job.phases or PROGRESS
  local elapsed = core.monotonic() - job.started
  if elapsed < 0 then -- saved before a reboot (the monotonic clock restarted): the job starts again
    job.started, elapsed = core.monotonic(), 0
  end
  local ends = 0
  for i, name in ipairs(progress) do
    ends = ends + duration(job, name)
    if elapsed < ends then return i end
  end
  return #progress + 1
end

--- The job's current status value.
function jobs.status(job)
  local progress = job.phases or PROGRESS
  local i = jobs.phase(job)
  if i > #progress then return job.outcome, true end
  return progress[i], false
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
  local progress = job.phases or PROGRESS
  r.lastUpdatedTime = tostring(job.submission_ms
    + math.floor(phase_start(job, progress, jobs.phase(job)) * 1000))
  r.resultUrl = (done and status ~= "Failed") and result_url or ""
  if done and status == "Failed" then
    r.messages = job.messages or { { type = "error", description = "The synchronization job failed." } }
  end
  return r
end

return jobs
