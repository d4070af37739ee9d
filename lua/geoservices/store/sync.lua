--- The synchronization half of the replica store: `store:sync(client, opts)`
-- and `store:unregister(client)`.
--
-- A sync takes the store's OS lock (`<store>.lock`: a second process gets
-- kind "busy" at once, or waits `opts.lock_timeout` seconds), then:
--
-- 0. removes the result file a killed sync left, refuses a damaged file
--    (quick_check) and a copy of the store another copy synchronized
--    (geoservices.store.integrity), sending nothing;
-- 1. resolves an attempt left in flight by an earlier sync (it crashed, its
--    answer was lost, or its job outlived the wait): re-attaches to its job
--    when its status address was recorded and finishes it; a job that is
--    gone or failed, an expired result file and an attempt without a job are
--    resolved by reading the server (geoservices.sync.verify): adds found and
--    deletes gone are applied, an update is applied when the server holds
--    what it sent, not applied when it still holds the values from before
--    the edit (`base`), and a conflict otherwise (kept in store:conflicts(),
--    never sent again over the newer value). Only edits shown not applied
--    go back to the queue, and are sent in this sync's request;
-- 2. records a new attempt holding the queued edits (durable before anything
--    is sent), the job's address as soon as it is known;
-- 3. sends synchronizeReplica with the edits and the store's generations
--    (perReplica replicaServerGen, perLayer syncLayers), always stating
--    transportType and rollbackOnFailure (geoservices.sync) in the prefix its
--    server answers in;
-- 4. settles each sent edit: the answer's verdict (geoservices.sync.outcome),
--    and for those it leaves unknown, the server's (read back);
-- 5. applies the result in ONE transaction (geoservices.store.commit):
--    snapshot layers cleared, the downloaded changes, the new generations,
--    each sent edit's fate, a line of the sync log. The server's state wins
--    for a feature changed on both sides: `result.overwritten`; a local edit
--    not sent (or not applied) whose feature the download changed is kept
--    as a conflict (geoservices.store.conflicts), named in `result.conflicts`.
-- A job still running when the wait ends, or whose polls fail, keeps the
-- attempt: `err.pending`, and the next sync re-attaches to it.
-- @module geoservices.store.sync
-- @local
local attachment_edits = require "geoservices.store.attachment_edits"
local attachments = require "geoservices.store.attachments"
local commit = require "geoservices.store.commit"
local errors = require "geoservices.errors"
local integrity = require "geoservices.store.integrity"
local jobs = require "geoservices.sync.job"
local json = require "geoservices.json"
local options = require "geoservices.sync.options"
local outcome = require "geoservices.sync.outcome"
local paths = require "geoservices.store.paths"
local replica_mod = require "geoservices.sync.replica"
local sync = require "geoservices.sync"
local verify = require "geoservices.sync.verify"

local M = {}

local feature_key = commit.feature_key
local db_fail = commit.db_fail
local file_exists = paths.exists

local temp_output = integrity.result_file

-- The 2.1 edits array of queue rows, by layer.
local function edits_of(rows)
  local by_layer, order = {}, {}
  for _, r in ipairs(rows) do
    local e = by_layer[r.layer]
    if not e then
      e = { id = r.layer, features = { adds = json.array(), updates = json.array(), deleteIds = json.array() } }
      by_layer[r.layer] = e
      order[#order + 1] = r.layer
    end
    local f = e.features
    if r.op == "add" then f.adds[#f.adds + 1] = r.feature
    elseif r.op == "update" then f.updates[#f.updates + 1] = r.feature
    else f.deleteIds[#f.deleteIds + 1] = r.globalId end
  end
  table.sort(order)
  local list = json.array()
  for _, id in ipairs(order) do list[#list + 1] = by_layer[id] end
  return list
end

-- The direction of each layer for this sync (per layer: its own, else the
-- replica's), and the request's parameters.
local function request_params(st, rep, opts, journaled)
  local direction = (journaled and journaled.syncDirection) or opts.direction or rep.syncDirection
  -- the server's OBJECTIDs of the adds it takes replace the local (negative) ones
  local params = { replicaID = rep.replicaID, syncDirection = direction, returnIdsForAdds = true,
                   returnAttachmentDatabyURL = true } -- fetched into their blobs (store.attachments)
  local directions = {}
  if rep.syncModel == "perLayer" then
    local gens = {}
    for _, l in ipairs(rep.layerServerGens or {}) do gens[l.id] = l.serverGen end
    local layers = json.array()
    for _, id in ipairs(rep.layers) do
      local spec = st.layers[id]
      local dir = (opts.directions and opts.directions[id]) or (journaled and journaled.directions
        and journaled.directions[tostring(id)]) or (not opts.direction and spec and spec.sync_direction)
        or direction
      directions[id] = dir
      layers[#layers + 1] = { id = id, serverGen = gens[id], syncDirection = dir }
    end
    params.syncLayers = layers
  else
    params.replicaServerGen = rep.replicaServerGen
    for _, id in ipairs(rep.layers) do directions[id] = direction end
  end
  if journaled and journaled.transportType then params.transportType = journaled.transportType end
  for k, v in pairs(opts.params or {}) do params[k] = v end
  return params, directions
end

-- Collects, while the result arrives, the local edits' features that the
-- download changes (only those: memory stays bounded by the queue).
local function watcher(st, rows)
  local mine, touched = {}, {}
  for _, r in ipairs(rows) do mine[feature_key(r.layer, r.globalId)] = true end
  return touched, function(layer, kind, value)
    local gid
    if kind == "delete" then gid = value
    elseif kind == "add" or kind == "update" then
      local spec = st.layers[layer]
      local a = type(value) == "table" and value.attributes
      gid = type(a) == "table" and spec and a[spec.globalid]
    end
    if type(gid) == "string" then
      local k = feature_key(layer, gid)
      if mine[k] then touched[k] = true end
    end
  end
end



-- Where a pending job's edits stay.
local function kept_in(st)
  return "in the attempt recorded in " .. st.path
end

-- The queue rows of an attempt, and the whole queue.
local function rows_of(st, attempt_id)
  local all, err = st:pending()
  if not all then return nil, err end
  local rows = {}
  for _, r in ipairs(all) do
    if r.attempt == attempt_id then rows[#rows + 1] = r end
  end
  return rows, all
end

local function expectation(rep)
  local layers
  if rep.syncModel == "perLayer" then
    layers = {}
    for _, l in ipairs(rep.layerServerGens or {}) do layers[l.id] = math.tointeger(l.serverGen) end
  end
  return { replicaID = rep.replicaID, replicaServerGen = math.tointeger(rep.replicaServerGen), layer_gens = layers }
end

local function prefix_of(rep)
  return type(rep.info) == "table" and type(rep.info.enum_prefix) == "string" and rep.info.enum_prefix or nil
end

-- The verdict of every row: the answer's where it tells, the server's
-- (read back) where it does not. nil, err when the server cannot be read.
local function verdicts_of(st, client, rep, rows, result, opts)
  local verdicts = {}
  for k, v in pairs(result.outcomes or {}) do verdicts[k] = v end
  local unknown = {}
  for _, e in ipairs(commit.entries(rows)) do
    local v = verdicts[e.key]
    if v == nil or v == outcome.UNKNOWN then unknown[#unknown + 1] = e end
  end
  if #unknown == 0 then return verdicts, {} end
  local read, oids = verify.edits(client, rep.service, unknown, { completed = true, fields = commit.fields(st),
                                                               timeout = opts.timeout })
  if not read then return nil, oids end
  for k, v in pairs(read) do verdicts[k] = v end
  return verdicts, oids
end

-- Settles an attempt whose result will not come by reading the server.
-- Returns the summary (and whether its edits came from a failed job).
local function settle_by_reading(st, client, rep, attempt_id, rows, opts)
  local entries = commit.entries(rows)
  local verdicts, oids = verify.edits(client, rep.service, entries, { completed = false, fields = commit.fields(st),
                                                                     timeout = opts.timeout })
  if not verdicts then
    local err = oids
    err.message = ("the outcome of %d edit(s) of %s could not be read from the server yet (they stay in the "
      .. "store's attempt; nothing is sent again until it is known): %s"):format(#rows, st.path, err.message)
    return nil, err
  end
  local by_seq, summary = commit.outcomes(rows, verdicts)
  local ok, err = commit.verified(st, attempt_id, by_seq, oids, rows, summary)
  if not ok then return nil, err end
  return summary
end

local function sub_opts(opts, tmp, on_change, rep)
  return { output = tmp, on_change = on_change, on_status = opts.on_status, on_progress = opts.on_progress,
           poll_interval = opts.poll_interval, timeout = opts.timeout, enum_prefix = prefix_of(rep) }
end

-- Resolves the attempt an earlier sync left in flight. Returns a table
-- (`result` when its job was finished; `summary`, `from_failed_job` when it
-- was read back), or nil, err.
-- Ends an interrupted attempt that carried no edits. Its request (or job)
-- may have moved the server's generation of the replica all the same (a
-- download answered, then the process killed): the store marks it unknown,
-- so the copy check does not take that move for another copy's, and the
-- sync learns the server's generation once it is through (integrity).
local function end_without_edits(st, attempt_id)
  return st:_uncaptured(function()
    local rep, err = st:replica()
    if not rep then return nil, err end
    local ok, m, c = integrity.record_generation(st, rep, { unknown = true })
    if not ok then return nil, db_fail(st, m, c) end
    return st:end_attempt(attempt_id, {})
  end)
end

local function resolve(st, client, rep, attempt, opts)
  local rows, all = rows_of(st, attempt.id)
  if not rows then return nil, all end
  local err
  if #rows == 0 and not attempt.status_url then
    local ok, eerr = end_without_edits(st, attempt.id)
    if not ok then return nil, eerr end
    return {}
  end
  local journaled = type(attempt.params) == "table" and attempt.params or {}
  local failed_job = false
  if attempt.status_url then
    local _, directions = request_params(st, rep, {}, journaled)
    local edits = #rows > 0 and edits_of(rows) or nil
    local touched, on_change = watcher(st, all)
    local tmp = temp_output(st)
    local op = jobs.operation(client, {
      status_url = attempt.status_url, service = rep.service, replicaID = rep.replicaID, output = tmp,
      on_change = on_change, carried_edits = edits ~= nil, sent = edits and outcome.sent_edits{ edits = edits },
      rollback = journaled.rollbackOnFailure == true, direction = journaled.syncDirection,
      layer_directions = directions, expect = expectation(rep),
    }, sync.finish_job)
    local result
    result, err = op:wait{ on_status = opts.on_status, on_progress = opts.on_progress,
                           poll_interval = opts.poll_interval, timeout = opts.timeout }
    if result then
      local verdicts, oids = verdicts_of(st, client, rep, rows, result, opts)
      if not verdicts then
        os.remove(tmp)
        return nil, oids
      end
      local by_seq, summary = commit.outcomes(rows, verdicts)
      local file = file_exists(tmp) and tmp or nil
      result, err = commit.result(st, rep, { attempt_id = attempt.id, rows = rows, result = result, file = file,
        touched = touched, directions = directions, on_fill = opts.on_fill, by_seq = by_seq, summary = summary,
        object_ids = oids })
      if not result then return nil, err end
      return { result = result }
    end
    os.remove(tmp)
    if not jobs.over(err, true) then return nil, jobs.pending(err, kept_in(st), attempt.status_url) end
    failed_job = err.kind == "job" and err.status_resource ~= nil
    if #rows == 0 then
      local ok, eerr = end_without_edits(st, attempt.id)
      if not ok then return nil, eerr end
      return {}
    end
  end
  local summary
  summary, err = settle_by_reading(st, client, rep, attempt.id, rows, opts)
  if not summary then return nil, err end
  summary.requeued = #rows - summary.applied - #summary.rejected - #summary.conflicts
  return { summary = outcome.resolution(summary), from_failed_job = failed_job }
end

local UPLOADS = { bidirectional = true, upload = true }

local Refused = { __name = "geoservices.store.Refused" }
function Refused:__tostring()
  if #self == 0 then return "no local edit refused" end
  local first = self[1]
  return ("%d local edit%s refused, not sent (fix the feature; it stays queued): %s %s of %s: %s%s"):format(#self,
    #self == 1 and "" or "s", first.layer_name or first.layer, first.op, first.globalId, first.rule,
    #self > 1 and ("; and %d more (geoservices pending)"):format(#self - 1) or "")
end

-- What the result says beyond the server's answer: the local edits refused
-- before sending (`refused`, a list printing as one line; the result is
-- then partial), and `store_notes`, lines for a reader (refused, conflicts).
local function notes(result, refused)
  result.refused = setmetatable(refused or {}, Refused)
  local lines = {}
  for _, r in ipairs(result.refused) do
    lines[#lines + 1] = ("refused, not sent: %s %s of %s: %s"):format(tostring(r.layer_name or r.layer), r.op,
      r.globalId, r.rule)
  end
  for _, k in ipairs(result.conflicts or {}) do
    lines[#lines + 1] = ("conflict: the %s of %s in layer %s lost to the server's version (%s); kept in "
      .. "geoservices_conflicts"):format(k.op, tostring(k.globalId), tostring(k.layer), tostring(k.description))
  end
  result.store_notes = lines
  if #result.refused > 0 then result.partial = true end
end

local SYNC_OPTS = { on_status = "function", on_progress = "function", on_fill = "function", timeout = "number",
                    poll_interval = "number", lock_timeout = "number", direction = "string", directions = "table",
                    params = "table", busy_timeout = "number", adopt_copy = "boolean" }

local sync_locked

-- what sync_locked tells M.sync of the attachment edits it sent (by store)
local attachment_report = setmetatable({}, { __mode = "k" })

-- Reads back the outcome of the attachment edits sent (geoservices.store.attachment_edits).
local function settle_attachments(st, client, succeeded, failed_edits)
  local rep = st:replica()
  if not rep then return nil end
  return attachment_edits.settle(st, client, rep, succeeded, failed_edits)
end

function sync_locked(st, client, opts)
  integrity.remove_leftovers(st)
  local sound, bad = integrity.check_file(st)
  if not sound then return nil, bad end
  local rep, err = st:replica()
  if not rep then return nil, err end
  if type(rep.info) == "table" and rep.info.unregistered then
    return nil, errors.invalid("replica", ("replica %s of store %s was unregistered"):format(
      tostring(rep.replicaID), st.path))
  end
  local resolved
  local attempt
  attempt, err = st:attempt()
  if attempt == nil then return nil, err end
  if attempt then
    resolved, err = resolve(st, client, rep, attempt, opts)
    if not resolved then
      err.message = "an earlier synchronization of this store was interrupted and is not resolved yet: " .. err.message
      return nil, err
    end
    rep, err = st:replica() -- the generations may have moved
    if not rep then return nil, err end
  end
  local params, directions = request_params(st, rep, opts, nil)
  -- the edits of layers that upload this time (a download or snapshot layer's stay queued)
  local queue, qerr = st:pending()
  if not queue then return nil, qerr end
  local only_copy, copied = integrity.check_copy(st, client, rep, opts)
  if not only_copy then return nil, copied end
  local seqs = {}
  for _, r in ipairs(queue) do
    if r.attempt == nil and UPLOADS[directions[r.layer] or ""] then seqs[#seqs + 1] = r.seq end
  end
  if #seqs > 0 and (opts.after_failed_job or (resolved and resolved.from_failed_job)) then
    -- an all-or-nothing job failed: the edits go in a synchronous request
    -- whose per-edit results name the one the server refuses
    params.async, params.transportType, params.rollbackOnFailure = nil, nil, nil
  end
  -- what the request states itself (geoservices.sync does the same): kept
  -- in the attempt, so that its outcome can be read after a crash
  local async = params.async == true
  -- attachment edits ask for per-edit results too: one the server refuses is named, the others go
  local edits_go = #seqs > 0
    or attachment_edits.waiting(st, function(layer) return UPLOADS[directions[layer] or ""] end)
  if params.transportType == nil then params.transportType = (edits_go and not async) and "embedded" or "url" end
  if params.rollbackOnFailure == nil then params.rollbackOnFailure = not edits_go or async end
  local journal = { syncDirection = params.syncDirection, transportType = params.transportType,
                    rollbackOnFailure = params.rollbackOnFailure, async = async }
  if rep.syncModel == "perLayer" then
    journal.directions = {}
    for id, dir in pairs(directions) do journal.directions[tostring(id)] = dir end
  end
  local id, rows, refused = st:begin_attempt{ params = journal, seqs = seqs }
  if not id then return nil, rows end
  if #rows > 0 then params.edits = edits_of(rows) end
  -- local attachment edits: their bytes uploaded, then sent with the rest, marked sent first
  local att, att_seqs, not_uploaded = attachment_edits.outgoing(st, client, rep,
    function(layer) return UPLOADS[directions[layer] or ""] end)
  attachment_report[st] = { not_uploaded = not_uploaded }
  if #att_seqs > 0 then
    params.edits = attachment_edits.merge(params.edits, att)
    local marked, merr = attachment_edits.mark_sent(st, att_seqs)
    if not marked then
      st:end_attempt(id, {})
      return nil, merr
    end
  end
  -- every queued edit is watched: the download may overwrite one not sent too
  local touched, on_change = watcher(st, queue)
  local tmp = temp_output(st)
  local o = sub_opts(opts, tmp, on_change, rep)
  if not options.journal_enabled() then
    -- the torture's mutation check: the attempt is forgotten as it leaves
    o.on_send = function() return st:end_attempt(id, {}) end
  end
  local job_started = false
  o.on_job = function(op)
    job_started = true
    return st:attempt_job(id, op.status_url)
  end
  local result
  result, err = sync.synchronize_replica(client, rep.service, params, o)
  if not result then
    os.remove(tmp)
    local current = st:attempt()
    if job_started and not jobs.over(err) then
      return nil, jobs.pending(err, kept_in(st), current and current.status_url)
    end
    if not err.outcome_unknown and not job_started then
      st:end_attempt(id, {}) -- it never left, or the server refused it whole: nothing applied
      return nil, err
    end
    if #rows == 0 then
      st:end_attempt(id, {})
      return nil, err
    end
    -- the edits' outcome is unknown: read the server now
    local summary, verr = settle_by_reading(st, client, rep, id, rows, opts)
    if not summary then return nil, verr end
    err.verified = summary
    local requeued = #rows - summary.applied - #summary.rejected - #summary.conflicts
    err.message = err.message .. ("; read back from the server: %d applied, %d rejected, %d conflict(s), %d "
      .. "queued again"):format(summary.applied, #summary.rejected, #summary.conflicts, requeued)
    if requeued > 0 and err.kind == "job" and err.status_resource and not opts.after_failed_job then
      -- an all-or-nothing job failed on one edit and applied none: the
      -- edits go again at once in a synchronous request, whose per-edit
      -- results name the one the server refuses and let the others through
      local again = {}
      for k, v in pairs(opts) do again[k] = v end
      again.after_failed_job = true
      local retried, err2 = sync_locked(st, client, again)
      if retried then retried.failed_job = err end
      return retried, err2
    end
    return nil, err
  end
  local verdicts, oids = verdicts_of(st, client, rep, rows, result, opts)
  if not verdicts then
    os.remove(tmp)
    return nil, oids -- the attempt stays: the next sync reads the outcome back
  end
  local by_seq, summary = commit.outcomes(rows, verdicts)
  local file = file_exists(tmp) and tmp or nil
  result, err = commit.result(st, rep, { attempt_id = id, rows = rows, result = result, file = file,
    touched = touched, directions = directions, on_fill = opts.on_fill, by_seq = by_seq, summary = summary,
    object_ids = oids })
  if result and resolved then result.resolved = resolved.result or resolved.summary end
  if result then notes(result, refused) end
  return result, err
end

--- Synchronizes a store (`store:sync(client, opts)`).
-- @param st the store
-- @param client a geoservices client
-- @tparam[opt] table opts `on_status`, `on_progress` (the download), `on_fill(bytes, total, records)`
--   (the result file being applied: see store.create_from), `timeout`, `poll_interval`, `lock_timeout`
--   (seconds to wait for another sync of this store), `busy_timeout` (seconds to wait for another
--   writer of the file, QGIS saving its edits: the store's own by default), `direction` (this
--   sync's syncDirection), `adopt_copy` (true: go on with this copy of the store although
--   another copy synchronized the replica since: geoservices.store.integrity), `directions`
--   (`[layer id] = direction`, perLayer), `params` (extra synchronizeReplica parameters: async,
--   transportType...)
-- @return the synchronization result, plus `uploaded` (edits applied), `rejected` (the queue rows
--   the server refused, now in store:failed()), `conflicts` (edits not applied because the server
--   holds newer values, and local edits not sent whose feature the download changed or deleted:
--   `feature` the local version, `server`, `outcome`; now in store:conflicts()), `overwritten`
--   (`{seq, layer, op, globalId, sent}` of the local edits whose feature the server's state
--   replaced), `applied` (records written),
--   `resolved` (an interrupted attempt resolved first); or nil, err (`err.pending` when a job's
--   outcome is not known yet: the next sync re-attaches)
-- @raise on misuse
function M.sync(st, client, opts)
  opts = opts or {}
  if type(client) ~= "table" then error("store:sync: client must be a geoservices client", 3) end
  if type(opts) ~= "table" then error("store:sync: opts must be a table", 3) end
  for k, v in pairs(opts) do
    if not SYNC_OPTS[k] then error(("store:sync: unknown option '%s'"):format(tostring(k)), 3) end
    if type(v) ~= SYNC_OPTS[k] then error(("store:sync: option '%s' must be a %s"):format(k, SYNC_OPTS[k]), 3) end
  end
  if opts.busy_timeout and not (opts.busy_timeout >= 0 and opts.busy_timeout < math.huge) then
    error("store:sync: option 'busy_timeout' must be a number of seconds, 0 or more", 3)
  end
  st:_db()
  local lock, lerr = replica_mod.lock(st.path, opts.lock_timeout, function(s) return client:sleep(s) end)
  if not lock then
    if lerr.kind == "busy" then
      lerr.message = ("replica store %s: another process (or task) is synchronizing it; try again when it "
        .. "ends, or give opts.lock_timeout to wait"):format(st.path)
    end
    return nil, lerr
  end
  -- this sync's wait for another writer of the file (QGIS saving its edits...)
  local restore
  if opts.busy_timeout then
    local current = st.db:rows("PRAGMA busy_timeout")
    restore = current and current[1] and current[1].timeout
    st.db:exec(("PRAGMA busy_timeout = %d"):format(math.floor(opts.busy_timeout * 1000 + 0.5)))
  end
  -- attachment edits an interrupted sync sent: read back before anything goes
  local early_ok, early, early_err = pcall(settle_attachments, st, client, false)
  if not early_ok then
    lock:close()
    error(early, 0)
  end
  local ok, result, err
  if early == nil and early_err then
    ok, result, err = true, nil, early_err
  else
    ok, result, err = pcall(sync_locked, st, client, opts)
  end
  local report = attachment_report[st]
  attachment_report[st] = nil
  if ok and report then
    local settled, serr = settle_attachments(st, client, result ~= nil, result and result.failed_edits)
    if result then
      result.attachment_edits = settled or { unknown = true, error = serr }
      result.attachment_edits.not_uploaded = report.not_uploaded
    end
  end
  if ok and result then
    -- the bytes of attachments downloaded now, and of those an earlier sync could not fetch
    local fetched
    ok, fetched = pcall(attachments.fetch, st, client, { timeout = opts.timeout })
    if ok then result.attachments = fetched else result = fetched end
  end
  -- an answer lost and read back: the server's generation now holds that sync (integrity)
  if ok then pcall(integrity.learn_generation, st, client, opts) end
  if restore and st.db then st.db:exec(("PRAGMA busy_timeout = %d"):format(restore)) end
  lock:close()
  if not ok then error(result, 0) end
  if not result and err.kind == "busy" and err.path == st.path then
    err.message = err.message .. "; another program is writing the file: the sync waits for it up to "
      .. "opts.busy_timeout seconds (--busy-timeout)"
  end
  if not result and err.kind ~= "busy" and st.db then
    st:log{ operation = "sync", outcome = "error", message = tostring(err.message) }
  end
  return result, err
end

--- Unregisters the store's replica on the server and marks the store so:
-- later syncs are refused (kind "invalid"); the data stays readable.
-- @param st the store
-- @param client a geoservices client
-- @tparam[opt] table opts `timeout`
-- @return the server's outcome, or nil, err
function M.unregister(st, client, opts)
  if type(client) ~= "table" then error("store:unregister: client must be a geoservices client", 3) end
  opts = opts or {}
  local rep, err = st:replica()
  if not rep then return nil, err end
  local out
  out, err = client:unregister_replica(rep.service, rep.replicaID, { timeout = opts.timeout })
  if not out then return nil, err end
  local info = type(rep.info) == "table" and rep.info or {}
  info.unregistered = true
  local ok, e2 = st:transaction(function()
    local done, m, c = st.db:run("UPDATE geoservices_replica SET info = ? WHERE id = 1", json.encode(info))
    if not done then return nil, db_fail(st, m, c) end
    return st:log{ operation = "unregister", outcome = "ok" }
  end)
  if not ok then return nil, e2 end
  return out
end

return M
