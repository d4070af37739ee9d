--- client:sync: synchronizeReplica run from a replica state file, with a
-- journal and a lock, so that every edit reaches the server exactly once.
--
-- An OS lock on `<state>.lock` keeps a second process (or task) out: kind
-- "busy" at once, or a wait of `opts.lock_timeout` seconds. Under it, the
-- attempt engine (geoservices.sync.attempt, the same as the store's) runs
-- with the state file's journal (geoservices.sync.state_journal,
-- `<state>.journal`): an attempt an earlier sync left is resolved first (its
-- job re-attached to and finished, or its edits read back from the server:
-- adds found and deletes gone are applied, an update is applied when the
-- server holds what it sent, not applied when it still holds the values
-- from before, a conflict otherwise, reported in `result.conflicts` and
-- never sent again over a newer value; an update held after a lost answer
-- and applied late over another crew's values the caller had downloaded is
-- handed to on_change as the server holds it and reported there too, outcome
-- `local_kept`: geoservices.sync.state_journal); only edits shown not applied are
-- sent again, in this call's request; the changes are downloaded from the
-- generation the state still holds. A job still running past the wait, or
-- whose polls fail, keeps the attempt: `err.pending`, and the next sync
-- re-attaches. `opts.journal` wraps the journal (a test's, for example).
-- @module geoservices.sync.state
-- @local
local attempt = require "geoservices.sync.attempt"
local errors = require "geoservices.base.errors"
local jobs = require "geoservices.sync.job"
local json = require "geoservices.base.json"
local replica_mod = require "geoservices.sync.replica"
local state_journal = require "geoservices.sync.state_journal"
local synchronize = require "geoservices.sync.synchronize"

local state_sync = {}

-- Replicas with a synchronization in flight in this process: a second one
-- is refused at once (the OS lock does the same across processes).
local active = {}

-- One synchronization under the lock: the attempt engine with the state
-- file's journal.
local function sync_locked(self, r, edits, opts)
  if r.state.closed then
    return nil, errors.invalid("replica", ("%s was %s"):format(r.replicaID,
      r.state.unregistered and "unregistered (replica unregister)" or "closed by an earlier sync"))
  end
  return attempt.run(self, state_journal.new(self, r, edits, opts.on_change), opts)
end

-- client:sync (documented at geoservices.sync.sync).
function state_sync.sync(self, r, edits, opts)
  opts = opts or {}
  local path = type(r) == "string" and r or (getmetatable(r) == replica_mod.Replica and r.path)
  if not path then error("client:sync: expected a replica or a state file path", 2) end
  if opts.lock_timeout ~= nil and (type(opts.lock_timeout) ~= "number"
                                   or not (opts.lock_timeout > 0 and opts.lock_timeout < math.huge)) then
    return nil, errors.invalid("lock_timeout", "must be a positive number of seconds")
  end
  if opts.late_window ~= nil and (type(opts.late_window) ~= "number"
                                  or not (opts.late_window >= 0 and opts.late_window < math.huge)) then
    return nil, errors.invalid("late_window", "must be a number of seconds, 0 or more")
  end
  if active[path] then
    return nil, errors.invalid("replica", ("a synchronization of %s is already running"):format(
      type(r) == "string" and path or r.replicaID))
  end
  local lock, lock_err = replica_mod.lock(path, opts.lock_timeout, function(s) return self:sleep(s) end)
  if not lock then return nil, lock_err end
  -- under the lock, the state as it is now: another process may have moved it
  local loaded, err = replica_mod.open(path)
  if not loaded then
    lock:close()
    return nil, err
  end
  if type(r) ~= "string" then
    r.state = loaded.state
    rawset(r, "attempt", rawget(loaded, "attempt"))
  else
    r = loaded
  end
  active[path] = true
  local ok, result, sync_err = pcall(sync_locked, self, r, edits, opts)
  active[path] = nil
  lock:close()
  if not ok then error(result, 0) end
  return result, sync_err
end

-- client:resume_sync (documented at geoservices.sync.resume_sync).
function state_sync.resume_sync(self, text)
  local saved, msg = json.decode(text)
  if type(saved) ~= "table" or type(saved.status_url) ~= "string" then
    return nil, errors.invalid("operation", "not a saved sync operation: " .. tostring(msg or "no status_url"))
  end
  local fields = {
    status_url = saved.status_url, service = saved.service, replicaID = saved.replicaID,
    strict = saved.strict, output = saved.output, replica_path = saved.replica_path,
    carried_edits = saved.carried_edits, sent = saved.sent, rollback = saved.rollback,
    direction = saved.direction,
  }
  if saved.replica_path then
    local r, err = replica_mod.open(saved.replica_path)
    if not r then return nil, err end
    fields.expect = state_journal.expectation(r)
    local j = state_journal.new(self, r, nil)
    local a, perr = j:pending()
    if a == nil then return nil, perr end
    -- the state is this job's to advance unless the journal holds another attempt (a later sync's:
    -- edits or an uploaded edits file whose answer was lost): then the result is given as it is and
    -- the state and its journal stay for the next client:sync, which resolves that attempt (holds
    -- it, reports it; geoservices.sync.attempt)
    if not a or a.status_url == saved.status_url then
      fields.on_done = attempt.on_done(self, j)
      if a then fields.on_over = attempt.on_over(self, j) end
    end
  end
  return jobs.operation(self, fields, synchronize.finish_job)
end

return state_sync
