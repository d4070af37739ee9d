--- Emulator handlers of synchronizeReplica (4.1), its async job status
-- resource (2.4) and the result files of URL transport (which answer 404
-- once the emulator has deleted them: setting result_lifetime_s).
local core = require "geoservices.core"
local answers = require "geoservices.emulator.answers"
local auth = require "geoservices.emulator.auth"
local export = require "geoservices.emulator.export"
local import = require "geoservices.emulator.import"
local jobs = require "geoservices.emulator.jobs"
local json = require "geoservices.base.json"
local replicas = require "geoservices.emulator.replicas"
local uploads = require "geoservices.emulator.uploads"

local sync = {}

-- A token is optional for feature services (their access is the service's
-- Sync capability, section 5.3), but one that is sent must be valid.
local function check_token(emu, form)
  if form.token == nil or form.token == "" then return nil end
  local _, denied = auth.user(emu.world, form)
  return denied
end

local function service_url(emu, name)
  return ("%s/%s/FeatureServer"):format(emu:url(), name)
end

-- An error with its own HTTP status (400 for malformed input), JSON body.
local http_error = answers.json

--- The value of returnAttachmentDatabyURL, the spelling of the vendor's
-- synchronizeReplica page and form, or of returnAttachmentsDataByUrl (its
-- createReplica's): any letter case; nil when absent.
function sync.by_url_param(form)
  for name, value in pairs(form) do
    local key = type(name) == "string" and name:lower()
    if key == "returnattachmentdatabyurl" or key == "returnattachmentsdatabyurl" then return value end
  end
  return nil
end

function sync.synchronize(emu, request, service_name)
  local form = request.form
  local denied = check_token(emu, form)
  if denied then return denied end
  local svc = emu.world.feature_services[service_name]
  if not svc then return answers.error_body(404, ("Service %s/FeatureServer not found."):format(service_name)) end
  -- edits uploaded before (editsUploadId with editsUploadFormat): read now, as the edits parameter
  local uploaded, upload_err = uploads.sync_edits(service_name, form)
  if upload_err then return nil, http_error(400, upload_err) end
  local plan, err, http_status = replicas.plan(svc, form, emu.settings, uploaded)
  if not plan then
    if http_status then return nil, http_error(http_status, err) end
    return err
  end
  plan.arrived = request.arrived -- kept in the change log (emulator.import)
  local prefix = emu.settings.enum_prefix
  -- attachments' content by URL unless the request asks for it embedded
  -- (returnAttachmentsDataByUrl, default true: emulator.attachments)
  plan.service_url = service_url(emu, service_name)
  plan.attachments_by_url = tostring(sync.by_url_param(form) or "true"):lower() ~= "false"
  if plan.flags.async then
    -- The job imports the edits in its ImportChanges phase and exports in
    -- ExportChanges (sync.advance); nothing is applied at submission.
    local outcome = emu.settings.job_outcome or "Completed"
    local job = emu.jobs:submit({
      transportType = prefix .. "TransportTypeUrl",
      responseType = outcome == "Failed" and (prefix .. "ReplicaResponseTypeNoEdits")
        or export.response_type(plan, prefix),
      replicaName = plan.replica.replicaName,
      replicaID = plan.replica.replicaID,
      targetType = plan.replica.targetType,
    }, outcome, emu.settings.job_step_ms, emu.settings.job_phase_ms)
    job.service = service_name
    job.plan = plan
    job.prefix = prefix
    plan.replica.busy_job = job
    return { statusUrl = service_url(emu, service_name) .. "/jobs/" .. job.id }
  end
  plan.at = core.monotonic()
  local imported, import_err = import.run(plan)
  if not imported then return import_err end
  local doc = export.document(plan, prefix)
  if export.no_edits(plan) then return doc end -- no edits, no results, no file
  if plan.transport == "url" then
    return export.url_answer(doc, emu:store_result(service_name, json.encode(doc)))
  end
  return export.add_results(doc, imported, emu.settings.edit_results)
end

--- Moves an async job's work to where its clock is: entering ImportChanges
-- imports its edits (once: `job.imported`), entering ExportChanges exports
-- the changes and writes the result file (once: `job.exported`). A job whose
-- outcome is Failed applies nothing; a rollbackOnFailure import with a
-- failed edit (or an import that raised) turns the job Failed with nothing
-- applied. Returns true when the state changed (to be saved).
function sync.advance(emu, job)
  if job.kind == "createReplica" then return require("geoservices.emulator.create").advance(emu, job) end
  if job.exported then return false end
  local phase = jobs.phase(job)
  local changed = false
  if phase >= jobs.IMPORT and not job.imported then
    job.imported = true
    changed = true
    if job.outcome ~= "Failed" then
      job.plan.at = core.monotonic()
      local ok, imported, err = pcall(import.run, job.plan)
      if ok and imported then
        job.import = imported
      else
        job.outcome = "Failed"
        local details = ok and err.error and err.error.details or { tostring(imported) }
        job.messages = { { type = "error", description = (ok and err.error.message or "The import failed.")
          .. (#details > 0 and (" " .. table.concat(details, "; ")) or "") } }
      end
    end
  end
  if phase >= jobs.EXPORT and not job.exported then
    job.exported = true
    changed = true
    if job.outcome ~= "Failed" then
      local doc = export.document(job.plan, job.prefix)
      job.fields.replicaServerGen = doc.replicaServerGen and tostring(doc.replicaServerGen) or nil
      -- NoEdits: no file (its resultUrl stays ""); a file never carries per-edit results
      if not export.no_edits(job.plan) then job.result = emu:store_result(job.service, json.encode(doc)) end
    end
    job.plan, job.import = nil, nil -- done with: the state file need not carry them
  end
  return changed
end

function sync.job_status(emu, request, service_name, job_id)
  local denied = check_token(emu, request.form)
  if denied then return denied end
  local job = emu.jobs:get(job_id)
  if not job or job.service ~= service_name then
    return nil, emu.not_found()
  end
  if sync.advance(emu, job) then emu:save_state() end
  return jobs.resource(job, job.result)
end

-- The route's pattern admits only "<letters, digits, _ and ->.json" and the
-- name is looked up in the table of files this emulator wrote: no request
-- path ever reaches the file system (no traversal possible).
function sync.result_file(emu, request, service_name, name)
  local path = emu:result_file(service_name .. "/" .. name) -- nil once expired (and deleted)
  if not path then return nil, emu.not_found() end
  local headers = { ["Content-Type"] = "application/json" }
  local range = emu.settings.ranges ~= false and request.headers and request.headers.range
  if not range then return nil, { status = 200, headers = headers, file = path } end
  headers["Accept-Ranges"] = "bytes"
  -- one range "bytes=first-[last]", as resumed downloads send; anything
  -- else is ignored and the whole file served (RFC 9110 allows it)
  local first, last = range:match("^bytes=(%d+)%-(%d*)$")
  first, last = tonumber(first), tonumber(last)
  if not first or (last and last < first) then return nil, { status = 200, headers = headers, file = path } end
  local f = io.open(path, "rb")
  if not f then return nil, emu.not_found() end
  local size = f:seek("end")
  if first >= size then
    f:close()
    headers["Content-Range"] = "bytes */" .. size
    return nil, { status = 416, headers = headers, body = "" }
  end
  if not last or last >= size then last = size - 1 end
  f:seek("set", first)
  local body = f:read(last - first + 1) or ""
  f:close()
  headers["Content-Range"] = ("bytes %d-%d/%d"):format(first, last, size)
  return nil, { status = 206, headers = headers, body = body }
end

return sync
