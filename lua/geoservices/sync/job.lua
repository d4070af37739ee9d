--- Asynchronous synchronization jobs: the operation object returned with
-- `async = true, wait = false`, and the polling loop behind `wait`.
-- Waiting is the one polling engine (geoservices.poll); what to do with the
-- ended job (download and build its result) is the `finish` function
-- geoservices.sync hands each operation, so this module does no result I/O.
--
--     local op = client:synchronize_replica("Parcels", { replicaID = id, replicaServerGen = 12,
--                                                        async = true }, { wait = false })
--     save(op:to_json())                     -- to re-attach after a restart
--     local result, err = op:wait{ on_status = function(s) print(s.status) end }
-- @module geoservices.sync.job
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"
local poll = require "geoservices.base.poll"
local transport = require "geoservices.net.transport"

local jobs = {}

local MAX_INTERVAL = 5        -- seconds: the backoff never waits longer between polls
local BACKOFF = 1.5
local DEFAULT_INTERVAL = 0.5
--- Seconds a job is waited for when the caller gives no timeout (an hour):
-- a job that never ends must not hold a script forever. `opts.timeout` raises it.
jobs.DEFAULT_WAIT = 3600
-- failures of a poll worth another poll after a pause
local TRANSIENT = { network = true, timeout = true, http = true }

local TERMINAL = { completed = "Completed", completedwitherrors = "CompletedWithErrors", failed = "Failed" }

-- A status value compared without case, spaces or underscores: "Completed
-- With Errors" ends a job as CompletedWithErrors does.
local function terminal_of(status)
  return TERMINAL[status:lower():gsub("[%s_]", "")]
end

local Operation = { __name = "geoservices.SyncOperation" }
Operation.__index = Operation

--- Makes an operation. Internal: client:synchronize_replica and
-- client:resume_sync make them.
-- @param client the client that polls
-- @tparam table fields status_url, service, replicaID, strict, output...
-- @tparam function finish `finish(op, status, opts)` -> result or nil, err: what to do with the
--   ended job (download its result, build it, advance the replica state)
-- @treturn Operation the operation
-- @local
function jobs.operation(client, fields, finish)
  local op = setmetatable({ client = client, finish = finish }, Operation)
  for k, v in pairs(fields) do op[k] = v end
  return op
end

--- An asynchronous synchronization job (`async = true, wait = false`).
-- Fields: `status_url`, `service`, `replicaID`, `status` (the last status
-- resource read, 2.4, or nil), `output`; `tostring(op)` is a one-line summary
-- with the job's state.
-- @type Operation

-- One line: service, replica, last status.
function Operation:__tostring()
  local state = self.status and self.status.status or "submitted"
  return ("geoservices.SyncOperation %s/%s replica %s: %s"):format(
    tostring(self.service), self.operation or "synchronizeReplica", tostring(self.replicaID or self.replicaName),
    state)
end

--- Reads the job's status resource once (retried as a read) and keeps it in `op.status`.
-- @tparam[opt] table opts request options of client:post (timeout)
-- @treturn[1] table the status resource: `status` ("Pending", "InProgress", "Completed",
--   "CompletedWithErrors", "Failed"...), `resultUrl` when done...
-- @return[2] nil
-- @treturn[2] table err: kind "job" with code "job_not_found" (the status resource is gone: the
--   server no longer knows the job), "protocol" (no status field), or the request's errors
--   ("network", "timeout", "cancelled", "http", "server", "auth")
-- @raise never
function Operation:poll(opts)
  local call = { retry = "read" } -- reading a status resource is always safe to repeat
  for k, v in pairs(opts or {}) do call[k] = v end
  local status, err = self.client:post(self.status_url, {}, call)
  if not status then
    if err.status == 404 or err.code == 404 then
      -- the server does not know the job (restarted without its state, or the
      -- job expired): say what it means for the caller
      err = errors.new("job", ("the job's status resource is gone (HTTP 404): the server no longer knows this "
        .. "job; %s"):format(self.gone_hint or ("the replica state is unchanged, synchronize again"
          .. (self.carried_edits and " (client:sync and store:sync read its edits' outcome back from the server)"
            or ""))),
        { code = "job_not_found", status = 404, url = self.status_url, cause = err })
    end
    return nil, err
  end
  if type(status.status) ~= "string" then
    return nil, errors.new("protocol", "job status resource has no status field", { url = self.status_url })
  end
  self.status = status
  return status
end

--- True once the last status read (@{Operation:poll}) is Completed,
-- CompletedWithErrors or Failed. Sends nothing.
-- @treturn boolean whether the job has ended
-- @raise never
function Operation:done()
  return self.status ~= nil and terminal_of(self.status.status) ~= nil
end

--- Polls until the job ends, downloads its result at once (servers delete
-- result files about ten minutes after the job ends) and returns the
-- normalized result; a job started by client:sync also advances its
-- replica state file. A few failed polls in a row (a server restarting) are
-- ridden over.
-- @tparam[opt] table opts
-- @tparam[opt=0.5] number opts.poll_interval first seconds between polls (backoff x1.5 up to 5 s)
-- @tparam[opt] number opts.timeout overall seconds (default: the operation's own deadline, if any)
-- @tparam[opt] function opts.on_status `on_status(status)` on each new status
-- @tparam[opt] function opts.on_change `on_change(layer_id, kind, record)` for each downloaded change
-- @tparam[opt] function opts.on_progress `on_progress(received, total)` while the result file downloads
-- @tparam[opt] number opts.request_timeout seconds for the result download
-- @treturn[1] geoservices.sync.result.Result the result
-- @return[2] nil
-- @treturn[2] table err: kind "job" (the job ended Failed: `err.status_resource`; or it is gone),
--   "timeout" (still running at the deadline: `err.operation`, resume with
--   `client:resume_sync(op:to_json())`), "edits" (strict), "io", "protocol", or the requests' errors;
--   `err.edits_applied` when the job applied uploaded edits but the result was lost; `err.resolved`
--   when an operation of client:resume_sync read its edits back (the job failed or is gone)
-- @raise never
function Operation:wait(opts)
  opts = opts or {}
  local interval = opts.poll_interval or self.poll_interval or DEFAULT_INTERVAL
  local on_status = opts.on_status or self.on_status
  local last
  local result, err = poll.run{
    interval = interval, backoff = BACKOFF, max_interval = math.max(MAX_INTERVAL, opts.poll_interval or 0),
    deadline = opts.timeout and (transport.now() + opts.timeout) or self.deadline
      or (transport.now() + jobs.DEFAULT_WAIT),
    transient = TRANSIENT, now = transport.now,
    sleep = function(seconds) return self.client:sleep(seconds) end,
    step = function()
      -- the poll itself retried; a few more failed polls in a row are ridden
      -- over (a server restarting in the middle of the job), a missing job is not
      local status, err = self:poll()
      if not status then return "failed", err end
      if status.status ~= last then
        last = status.status
        if on_status then on_status(status) end
      end
      local terminal = terminal_of(status.status)
      if terminal == "Failed" then
        local detail
        for _, m in ipairs(type(status.messages) == "table" and status.messages or {}) do
          if type(m) == "table" and m.description then detail = m.description end
        end
        return "done", nil, errors.new("job", ("%s job failed%s"):format(
          self.operation == "createReplica" and "createReplica" or "synchronization",
          detail and (": " .. detail) or ""), { status_resource = status, url = self.status_url })
      elseif terminal then
        -- fetch at once: servers delete result files after about ten minutes
        return "done", self.finish(self, status, opts)
      end
      return "running", status
    end,
    on_deadline = function(status)
      return errors.new("timeout", ("job still %s when the deadline passed; resume it with "
        .. "client:%s(op:to_json())"):format(status and status.status or "unreachable",
          self.operation == "createReplica" and "resume_create_replica" or "resume_sync"),
        { url = self.status_url, operation = self })
    end,
  }
  -- a job that will never give its result: the edits it carried are read back (op.on_over,
  -- client:resume_sync's: geoservices.sync.attempt.on_over)
  if result == nil and err and self.on_over and jobs.over(err, true) then return self.on_over(err) end
  return result, err
end

--- Whether a wait's error means the job will never give its result: it
-- failed, or its result file expired; when `reattaching` (a later sync),
-- also a job the server no longer knows (during the first wait a 404 may be
-- a server restarting).
-- @tparam table err the error of Operation:wait
-- @tparam[opt] boolean reattaching
-- @treturn boolean
-- @local
function jobs.over(err, reattaching)
  return err.code == "result_gone" or (err.kind == "job" and (err.status_resource ~= nil
    or (reattaching and err.code == "job_not_found")))
end

--- Marks a wait's error as pending: the job may still run and apply its
-- edits, so its attempt stays where `kept` says and the next sync re-attaches.
-- @tparam table err the error
-- @string kept where the edits stay ("journaled", "in the store's attempt")
-- @tparam ?string status_url the job's status address
-- @treturn table err, with `pending = true`
-- @local
function jobs.pending(err, kept, status_url)
  err.pending = true
  if not err.message:find("outcome is pending", 1, true) then
    err.message = err.message .. ("; the job's outcome is pending: its edits stay %s and the next sync re-attaches "
      .. "to it (%s)"):format(kept, tostring(status_url))
  end
  return err
end

--- A JSON text from which client:resume_sync re-attaches after a restart.
-- It holds the status address, the service, the replica id and path, and
-- the options that matter to the result; never a token.
-- @treturn string the JSON text
-- @raise never
function Operation:to_json()
  return json.encode{
    status_url = self.status_url,
    service = self.service,
    replicaID = self.replicaID,
    strict = self.strict or nil,
    output = self.output,
    replica_path = self.replica_path,
    carried_edits = self.carried_edits or nil,
    sent = self.sent, -- the edits it carries, and how they were sent: to classify their outcomes
    rollback = self.rollback, direction = self.direction,
    operation = self.operation, -- "createReplica" (nil: synchronizeReplica)
    create = self.create,       -- a createReplica's request: replicaName, model, layers, direction
  }
end

jobs.Operation = Operation
return jobs
