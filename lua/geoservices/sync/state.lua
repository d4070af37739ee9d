--- client:sync: synchronizeReplica run from a replica state file, with a
-- journal and a lock, so that every edit reaches the server exactly once.
--
-- Before edits (or an async job) are sent, the attempt is written durably
-- to `<state>.journal`, with the job's status address once it is known; it
-- goes away with the state write that moves the generation, or when the
-- request provably never left. An OS lock on `<state>.lock` keeps a second
-- process (or task) out: kind "busy" at once, or a wait of
-- `opts.lock_timeout` seconds.
--
-- The next client:sync of a replica with a journaled attempt first resolves
-- it. A job is re-attached to and finished (its result downloaded, its
-- edits' outcomes settled). A job that is gone, failed, or whose result file
-- expired, and a synchronous attempt whose answer was lost, are resolved by
-- reading the server (geoservices.sync.verify): adds found and deletes gone
-- are applied, an update is applied when the server holds what it sent and
-- a conflict otherwise (reported in `result.conflicts`, never sent again over
-- a newer value); only the adds and deletes shown not applied are sent again,
-- in this call's request. The changes are then downloaded from the
-- generation the state still holds. A job still running past the wait, or
-- whose polls fail, keeps the attempt: `err.pending`, and the next sync
-- re-attaches.
-- @module geoservices.sync.state
-- @local
local edits_mod = require "geoservices.sync.edits"
local errors = require "geoservices.errors"
local jobs = require "geoservices.sync.job"
local json = require "geoservices.json"
local options = require "geoservices.sync.options"
local outcome = require "geoservices.sync.outcome"
local replica_mod = require "geoservices.sync.replica"
local sync = require "geoservices.sync"
local verify = require "geoservices.sync.verify"

local state_sync = {}

-- Replicas with a synchronization in flight in this process: a second one
-- is refused at once (the OS lock does the same across processes).
local active = {}

local PARTS = { features = "feature", attachments = "attachment" }
local LISTS = { adds = "add", updates = "update", deleteIds = "delete" }

local function gid_of(part, item)
  if type(item) ~= "table" then return item end
  if part == "features" then return type(item.attributes) == "table" and item.attributes.GlobalID or nil end
  return item.globalId
end

-- Calls fn(key, layer, target, op, gid, item) for each edit of a 2.1 list.
local function each_edit(list, fn)
  for _, entry in ipairs(type(list) == "table" and list or {}) do
    local layer = math.tointeger(entry.id) or entry.id
    for part, target in pairs(PARTS) do
      local p = entry[part]
      for name, op in pairs(LISTS) do
        for _, item in ipairs(type(p) == "table" and p[name] or {}) do
          local gid = gid_of(part, item)
          fn(outcome.key(op, layer, target, gid), layer, target, op, gid, item)
        end
      end
    end
  end
end

-- The 2.1 list of the edits for which keep(key) is true (nil when none).
local function select_edits(list, keep)
  local out, by_layer, n = json.array(), {}, 0
  each_edit(list, function(key, layer, target, op, _, item)
    if not keep(key) then return end
    local entry = by_layer[layer]
    if not entry then
      entry = { id = layer }
      by_layer[layer] = entry
      out[#out + 1] = entry
    end
    local part = target == "feature" and "features" or "attachments"
    local name = op == "add" and "adds" or op == "update" and "updates" or "deleteIds"
    entry[part] = entry[part] or {}
    entry[part][name] = entry[part][name] or json.array()
    local l = entry[part][name]
    l[#l + 1] = item
    n = n + 1
  end)
  return n > 0 and out or nil
end

-- The union of two 2.1 lists; an edit both carry is sent once.
local function merged_edits(first, second)
  if first == nil then return second end
  if second == nil then return first end
  local both = json.array()
  for _, e in ipairs(first) do both[#both + 1] = e end
  for _, e in ipairs(second) do both[#both + 1] = e end
  local taken = {}
  return select_edits(both, function(key)
    if taken[key] then return false end
    taken[key] = true
    return true
  end)
end

-- The edits of a call as a 2.1 table (what the journal keeps); nil when none.
local function journaled_edits(edits)
  if edits == nil or (edits_mod.is(edits) and edits:is_empty()) then return nil end
  if edits_mod.is(edits) then return edits:to_table() end
  if type(edits) == "string" then
    local list = json.decode(edits)
    if type(list) == "table" then return list end
  end
  return edits -- refused with its message by the validation
end

-- The feature edits of a list as verification entries; `bases` the
-- server's values of updated features read just before they were sent.
local function entries_of(list, bases)
  local out = {}
  each_edit(list, function(key, layer, target, op, gid, item)
    if target == "feature" and type(gid) == "string" then
      out[#out + 1] = { key = key, layer = layer, op = op, globalId = gid,
                        feature = type(item) == "table" and item or nil, base = bases and bases[key] }
    end
  end)
  return out
end

-- The server's values of the features a request updates, read before it
-- is sent and journaled with it: if its answer is lost, an update the
-- server does not hold is told apart from one someone else overwrote (the
-- first is sent again, the second is a conflict). A failed read leaves
-- them unknown (such an update then counts as a conflict).
local function read_bases(self, r, edits)
  local by_layer = {}
  each_edit(edits, function(key, layer, target, op, gid)
    if target == "feature" and op == "update" and type(gid) == "string" then
      by_layer[layer] = by_layer[layer] or {}
      by_layer[layer][#by_layer[layer] + 1] = { key = key, gid = gid }
    end
  end)
  local bases
  for layer, list in pairs(by_layer) do
    local gids = {}
    for i, e in ipairs(list) do gids[i] = e.gid end
    local found = verify.query(self, r.service, layer, gids, { geometry = true })
    if not found then return bases end
    for _, e in ipairs(list) do
      bases = bases or {}
      -- false: the server had no such feature when the update left
      bases[e.key] = found[outcome.normalize_gid(e.gid)] or false
    end
  end
  return bases
end

-- Folds verification verdicts into a result (or a resolution record):
-- conflicts and skipped edits reported, counts kept.
local function record_verdicts(into, verdicts, entries)
  into.conflicts = into.conflicts or {}
  into.failed_edits = into.failed_edits or {}
  into.verified = (into.verified or 0)
  into.applied, into.requeued = into.applied or 0, into.requeued or 0
  for _, e in ipairs(entries) do
    local v = verdicts[e.key]
    if v ~= nil then
      into.verified = into.verified + 1
      if v == outcome.APPLIED then into.applied = into.applied + 1 end
      if v == "not_applied" then into.requeued = into.requeued + 1 end
      if into.outcomes then into.outcomes[e.key] = v end
      if type(v) == "table" and v.conflict then
        into.conflicts[#into.conflicts + 1] = { layer = e.layer, op = e.op, globalId = e.globalId,
          sent = e.feature, server = v.server, description = v.description }
      elseif type(v) == "table" then
        into.failed_edits[#into.failed_edits + 1] = { layer = e.layer, op = e.op, target = "feature",
          globalId = e.globalId, code = v.code, description = v.description }
      end
    end
  end
end

-- The on_done of a request: settles what the answer left unknown by
-- reading the server, then advances the state (which drops the journal).
local function settle(self, r, params, sent_edits)
  return function(result)
    if params.closeReplica then result.closed = true end
    if result.unknown and #result.unknown > 0 then
      local entries, wanted = {}, {}
      for _, u in ipairs(result.unknown) do wanted[u.key] = true end
      for _, e in ipairs(entries_of(sent_edits)) do
        if wanted[e.key] then entries[#entries + 1] = e end
      end
      local verdicts, err = verify.edits(self, r.service, entries, { completed = true })
      if not verdicts then return nil, err end
      record_verdicts(result, verdicts, entries)
    end
    return r:advance(result)
  end
end

local function expectation(r)
  local layers
  if r.state.model == "perLayer" then
    layers = {}
    for _, l in ipairs(r.state.layers or {}) do layers[l.id] = math.tointeger(l.serverGen) end
  end
  return { replicaID = r.replicaID, replicaServerGen = math.tointeger(r.state.replicaServerGen), layer_gens = layers }
end


--- Resolves the attempt an earlier sync left in the journal. Returns
-- `{result =}` (a job re-attached to and finished), or `{verified =,
-- conflicts =, failed_edits =, resend = <2.1 list of the edits to send
-- again>, settled = {[key] = true}, from_failed_job =}`; or nil, err.
-- `job_over`: the error that ended this call's own job (failed, or its
-- result gone): the job is not waited for again.
local function resolve_attempt(self, r, opts, job_over)
  local attempt = r.attempt
  local jp = type(attempt.params) == "table" and attempt.params or {}
  local failed_job = job_over ~= nil and job_over.kind == "job" and job_over.status_resource ~= nil
  if attempt.status_url and not job_over then
    local op = jobs.operation(self, {
      status_url = attempt.status_url, service = r.service, replicaID = r.replicaID, replica_path = r.path,
      output = opts.output and (opts.output .. ".resolved.json") or nil, on_change = opts.on_change,
      on_progress = opts.on_progress, carried_edits = attempt.edits ~= nil and #attempt.edits > 0,
      sent = outcome.sent_edits{ edits = attempt.edits }, rollback = jp.rollbackOnFailure == true,
      direction = jp.syncDirection, expect = expectation(r),
    }, sync.finish_job)
    op.on_done = settle(self, r, {}, attempt.edits)
    local result, err = op:wait{ poll_interval = opts.poll_interval, on_status = opts.on_status,
                                 timeout = opts.timeout }
    if result then
      result.reattached = true -- the interrupted sync's own job, finished
      return { result = result }
    end
    if not jobs.over(err, true) then return nil, jobs.pending(err, "journaled", attempt.status_url) end
    failed_job = err.kind == "job" and err.status_resource ~= nil
  end
  local entries = entries_of(attempt.edits, jp.bases)
  local verdicts, err = verify.edits(self, r.service, entries, { completed = false, timeout = opts.timeout })
  if not verdicts then
    err.message = "an earlier synchronization of this replica was interrupted and its edits' outcome could not "
      .. "be read from the server yet (they stay journaled, nothing was sent again): " .. err.message
    return nil, err
  end
  local resolution = outcome.resolution{ settled = {}, from_failed_job = failed_job }
  record_verdicts(resolution, verdicts, entries)
  for key, v in pairs(verdicts) do
    if v ~= "not_applied" then resolution.settled[key] = true end
  end
  resolution.resend = select_edits(attempt.edits, function(key)
    return verdicts[key] == "not_applied" or verdicts[key] == nil -- attachments cannot be read: kept
  end)
  return resolution
end

local sync_locked

function sync_locked(self, r, edits, opts)
  if r.state.closed then
    return nil, errors.invalid("replica", ("%s was %s"):format(r.replicaID,
      r.state.unregistered and "unregistered (replica unregister)" or "closed by an earlier sync"))
  end
  local resolution
  local attempt = r.attempt
  if attempt and not attempt.status_url and #(attempt.edits or {}) == 0 then
    -- an async sync without edits that never got its job's address: nothing to resolve
    r:clear_attempt()
    attempt = nil
  end
  if attempt then
    local err
    resolution, err = resolve_attempt(self, r, opts)
    if not resolution then return nil, err end
    if resolution.result and (r.state.closed or edits == nil) then return resolution.result end
  end
  local params = r:request_params()
  for k, v in pairs(opts.params or {}) do params[k] = v end
  local mine = journaled_edits(edits)
  if resolution and resolution.settled and mine then
    -- the caller passed again edits the journal already settled: never twice
    mine = select_edits(mine, function(key) return not resolution.settled[key] end)
  end
  params.edits = merged_edits(resolution and resolution.resend, mine)
  if (opts.after_failed_job or (resolution and resolution.from_failed_job)) and params.edits then
    -- an all-or-nothing job failed: the edits go in a synchronous request
    -- whose per-edit results name the one the server refuses
    params.async, params.transportType, params.rollbackOnFailure = nil, nil, nil
  end
  local call_opts = {}
  for k, v in pairs(opts) do call_opts[k] = v end
  call_opts.params, call_opts.lock_timeout, call_opts.discard = nil, nil, nil
  call_opts.after_failed_job = nil
  call_opts.on_done = settle(self, r, params, params.edits)
  call_opts.replica_path = r.path
  -- edits, and any async job (its changes are downloaded once it ends), are
  -- journaled: durable before anything is sent; the job's address as soon
  -- as it is known
  local journaling = type(params.edits) == "table" or params.async == true
  local job_started = false
  if journaling then
    call_opts.on_send = function(fields)
      if not options.journal_enabled() then return true end -- the torture's mutation check
      -- after the parameters were checked, before anything of them leaves
      local bases = type(fields.edits) == "table" and read_bases(self, r, fields.edits) or nil
      return r:begin_attempt(type(fields.edits) == "table" and fields.edits or json.array(), {
        syncDirection = fields.syncDirection, transportType = fields.transportType,
        rollbackOnFailure = fields.rollbackOnFailure == true or fields.rollbackOnFailure == "true",
        async = fields.async == true, bases = bases })
    end
    call_opts.on_job = function(op)
      job_started = true
      return r:attempt_job(op.status_url)
    end
  elseif r.attempt then
    r:clear_attempt() -- settled above, and nothing of it is sent again
  end
  local result, err = sync.synchronize_replica(self, r.service, params, call_opts)
  if result and resolution then
    result.resolved = resolution.result or resolution
  end
  if result or not r.attempt or not journaling then return result, err end
  if job_started and not jobs.over(err) then return nil, jobs.pending(err, "journaled", r.attempt.status_url) end
  if not err.outcome_unknown and not job_started then
    r:clear_attempt() -- it never left, or the server refused it whole: nothing applied
    return nil, err
  end
  -- the outcome is unknown (or a job failed: not waited for again): read the server now
  local settled, verr = resolve_attempt(self, r, opts, job_started and err or nil)
  if not settled then return nil, err end
  if settled.resend then
    r:begin_attempt(settled.resend, r.attempt.params) -- what is left to send, still journaled
  else
    r:clear_attempt()
  end
  err.verified, err.conflicts = settled.verified, settled.conflicts
  if settled.resend and err.kind == "job" and err.status_resource and not opts.after_failed_job then
    -- an all-or-nothing job failed on one edit and applied none: the edits
    -- go again at once in a synchronous request whose per-edit results name
    -- the one the server refuses and let the others through
    local again = {}
    for k, v in pairs(opts) do again[k] = v end
    again.after_failed_job = true
    local retried, err2 = sync_locked(self, r, nil, again)
    if retried then
      -- what reading back settled is part of this call's outcome
      retried.failed_job, retried.resolved = err, settled
      retried.conflicts = retried.conflicts or {}
      for _, c in ipairs(settled.conflicts or {}) do retried.conflicts[#retried.conflicts + 1] = c end
      for _, f in ipairs(settled.failed_edits or {}) do retried.failed_edits[#retried.failed_edits + 1] = f end
    end
    return retried, err2
  end
  err.message = err.message .. ("; read back from the server: %d edit(s) settled, %d to send again at the next "
    .. "sync"):format(settled.verified - #(settled.resend and entries_of(settled.resend) or {}),
      settled.resend and #entries_of(settled.resend) or 0)
  return nil, err, verr
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
    fields.expect = expectation(r)
    fields.on_done = settle(self, r, {}, r.attempt and r.attempt.edits)
  end
  return jobs.operation(self, fields, sync.finish_job)
end

return state_sync
