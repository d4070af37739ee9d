--- The attempt engine: one synchronization of a replica, each edit on the
-- server exactly once, written once for both places a replica's state
-- lives: a state file (client:sync, geoservices.sync.state_journal) and a
-- replica store (store:sync, geoservices.store.sync.journal). The journal keeps
-- the attempt durable; this module decides everything else, by one rule
-- for both.
--
-- A synchronization (@{run}):
--
-- 1. resolves the attempt an earlier sync left (`j:pending()`): a job whose
--    address was journaled is re-attached to and finished; a job gone or
--    failed, and an attempt without a job, are read back from the server
--    (geoservices.sync.verify): each edit applied, rejected or in conflict
--    is settled, one not applied goes with this sync's request;
-- 2. takes the edits to send (`j:take`), lets the journal rebase them
--    (`j:rebase`, below), states transportType and rollbackOnFailure
--    itself (with edits and not async: embedded and false, so that per-edit
--    results name a refused edit; otherwise url and true);
-- 3. makes the attempt durable before anything leaves (`j:begin`, called
--    from synchronizeReplica's on_send once the parameters were checked),
--    and the job's address as soon as it is known (`j:record_job`);
-- 4. settles each sent edit: the answer's verdict (geoservices.sync.outcome),
--    and for those the answer leaves unknown, the server's (read back), then
--    commits in one step (`j:commit`): each edit's fate, the generations,
--    the journal cleared. THE GENERATION RULE (@{generations}): the
--    generations move only with downloaded data; an upload-only answer
--    (responseType no_edits) moves none;
-- 5. on failure: a job still running stays pending (`err.pending`: the
--    next sync re-attaches); a request that never left, or that the server
--    refused whole, applied nothing (`j:abandon`); any other failure leaves
--    the outcome unknown and it is read back at once: edits applied,
--    rejected or in conflict settle; THE REQUEUE RULE: an edit the server
--    does not show stays in the attempt, PROVISIONAL (a gateway's 504, a
--    dropped answer or a lost async kick-off: the server may still apply it
--    late). The next sync reads it again and, if it still does not show,
--    HOLDS it one sync more, and longer while THE LATE WINDOW (@{holds})
--    lasts (kept in the attempt, not sent; the sync sends the edits of
--    other features, and those of a held feature wait: client:sync's
--    journal, `params.waiting`; the store's, geoservices.store.sync.held), so that a late
--    application is seen before anything is sent again; the sync after
--    that sends it again when the server still does not show it (an update
--    only where the server still holds its base: geoservices.sync.verify).
--    While an attempt is provisional the replica's generation may move by
--    our own late request: the store does not take that for another copy.
--    A refusal of an edit sent again is read back before it is reported:
--    the late application may have made it (an add already there).
--    An all-or-nothing job that failed is followed at once by a synchronous
--    request whose per-edit results name the edit the server refuses.
--
-- The journal interface (`j`; each method returns nil, err on failure):
--
--   j.service, j.fields (verify's `[layer] = {global_id =, object_id =}` or nil),
--   j.kept_in (where a pending job's edits stay, for messages)
--   j:pending()           the attempt an earlier sync left: `{status_url =, params =, edits =,
--                         provisional =, held_once =, lost_at =, sent_at =, uploaded =}` (params:
--                         syncDirection, rollbackOnFailure... as journaled; edits: the 2.1 list it carries;
--                         sent_at: when j:begin journaled the request carrying its edits (os.time);
--                         uploaded: the editsUploadId it carries), or false
--   j:uploaded()          the editsUploadId the attempt in hand carries (journaled by j:begin from the
--                         request's field, given back by pending()), or nil
--   j.holding             true while this sync holds an earlier attempt (optional)
--   j:entries()           the feature edits of the attempt in hand, as verify entries
--                         `{key =, layer =, op =, globalId =, feature =, base =}`
--   j:job_fields(a, opts) the fields of a job operation re-attached to (output, on_change,
--                         layer_directions, expect...)
--   j:enough(resolution)  true when a re-attached job's result is the whole answer
--   j:request(opts)       the request's parameters (generations, directions); may refuse
--   j:take(params, resolution, opts)  the edits this request sends: `{edits = 2.1 list | nil}`
--                         (a store marks its queue rows with a new attempt: durable)
--   j:call_opts(opts)     synchronizeReplica's options (output, on_change...)
--   j:begin(fields)       durable before the request leaves (fields: the encoded request), with the
--                         time (`sent_at`; not for a download made while edits are held)
--   j:record_job(url)     the job's status address
--   j:commit(result, settled)  `settled`: `verdicts` (every sent edit's), `read` (those read back),
--                         `object_ids`, `gens` (@{generations}: nil = keep)
--   j:settle_read(verdicts, object_ids, how)  an attempt read back (`how.provisional`: after this
--                         sync's own failure, `how.lost_at`: when its answer was lost (os.time), kept
--                         with the attempt and given back by pending(),
--                         `how.hold`: a provisional attempt read again: edits not
--                         applied stay in the attempt, not sent by this sync; `how.uploaded`: the
--                         uploaded edits file's outcome (outcome.uploaded_item), kept in the
--                         attempt when `kept`, else forgotten); returns a summary
--                         with `unsettled` (edits left to send), `held`, `resent` (set of keys sent again)
--   j:abandon()           nothing of the attempt was applied: its edits go back where they came from
--   j:note_read(err, summary), j:fold_read(result, summary)  what reading back found, told
--   j:note_resolved(err, summary)  optional: what resolving the earlier attempt settled, told by the
--                         error of a sync whose own request then failed
--   j:rebase(client, taken, opts)  optional, see below
--   j:capabilities(), j:keep_capabilities(caps)  the service's syncCapabilities kept with the
--                         replica (read once from the service's resource); j.model its sync model
--   j:keys()              the keys of every edit the attempt in hand carries (for a split)
--   `opts.only` (a set of keys) to j:take: only those edits, from the ones a refused request carried
--
-- OUTCOMES FROM WHAT THE SERVER PROMISES: the service's syncCapabilities
-- decide whether an upload is all or nothing (outcome.rollback_in_effect):
-- an edit the answer does not list counts as applied only where that makes
-- it certain; otherwise it is read back. Where rollback is in effect and
-- the server refuses a request with edits as a whole, THE SPLIT finds the
-- refused edits without giving up the rest: a request without edits first
-- (it downloads, and shows the refusal is the edits'), then the edits in
-- halves, each part its own journaled, all-or-nothing attempt, down to the
-- single edits the server refuses: failed, with the server's words. The
-- result is the last part's, with the others' counts and lists folded in.
--
-- UPLOADED EDITS FILES: a request with `editsUploadId` carries edits the
-- client cannot read back one by one (they are no journaled edits, and the
-- server does not give an uploaded file back). It is sent once, never again
-- by the engine. When its answer is lost it is kept in the attempt as an
-- edit not shown is (a journal's `pending().uploaded`, its settle_read's
-- summary `uploaded`, geoservices.sync.outcome.uploaded_item): provisional,
-- held one sync, then settled with its outcome unknown and reported in
-- `result.resolved.uploaded`. While it is kept the store takes a move of
-- the replica's generation for its own late request. While an earlier
-- attempt is unresolved (held: its edits or its uploaded file; or a job
-- still to re-attach to, which may carry the same file) a request with
-- `editsUploadId` (`opts.params`) is refused, naming it, before anything
-- is read or sent (the hold is still to come): the same file passed again
-- would be applied twice, another could reach the server before the held
-- edits. One rule for both journals (@{run}, read_back);
-- the journals only keep the item.
--
-- THE REBASE HOOK: when the journal has `j:rebase`, the engine calls it with
-- the rows about to be sent, after `j:take` and before anything is journaled
-- as sent or leaves: `taken.edits` (the 2.1 list) and `taken.entries`
-- (verify entries, each with its `base`). It may hold edits back (settling
-- them as conflicts in its own journal) and change others, and returns the
-- taken table to send (or nil, err: nothing is sent, the attempt is
-- abandoned). Only edits it returns are sent.
--
-- A journal can be wrapped (`opts.journal`, a function given the journal
-- and returning the one to use): the torture's mutation check wraps it in
-- one that forgets (spec/torture/forgetful.lua).
-- @module geoservices.sync.attempt
-- @local
local errors = require "geoservices.base.errors"
local jobs = require "geoservices.sync.job"
local outcome = require "geoservices.sync.outcome"
local retry = require "geoservices.net.retry"
local synchronize = require "geoservices.sync.synchronize"
local verify = require "geoservices.sync.verify"

local M = {}

--- THE GENERATION RULE: the generations a result lets a journal commit;
-- nil when the answer counts no downloaded data (an upload-only answer,
-- responseType no_edits): the replica then keeps its generations, so a
-- later download misses nothing other crews changed before it.
-- @tparam table result a synchronization result
-- @treturn ?table `{replicaServerGen =, layerServerGens =}`
function M.generations(result)
  if result.response == "no_edits" then return nil end
  return { replicaServerGen = result.replicaServerGen, layerServerGens = result.layerServerGens }
end

-- Reads back the outcome of the journal's attempt and lets it settle.
local function read_back(client, j, how, opts)
  local entries = j:entries()
  local verdicts, object_ids = verify.edits(client, j.service, entries, { completed = how.completed,
    fields = j.fields, timeout = opts.timeout })
  if not verdicts then
    local err = object_ids
    err.message = ("the outcome of %d edit(s) of %s could not be read from the server yet (they stay %s; nothing "
      .. "is sent again until it is known): %s"):format(#entries, j.what, j.kept_in, err.message)
    return nil, err
  end
  if how.provisional or how.hold then
    -- THE LATE WINDOW: while the server may still apply the lost request, another crew's values
    -- found now are no conflict yet: that request landing late would overwrite them (a conflict
    -- called now would leave this replica holding the other values while the server holds ours).
    -- Read again once the window is over. A feature the server deleted stays a conflict: no late
    -- update brings it back.
    for k, v in pairs(verdicts) do
      if type(v) == "table" and v.conflict and type(v.server) == "table" then verdicts[k] = "not_applied" end
    end
  end
  -- an uploaded edits file (UPLOADED EDITS FILES): kept while the attempt's edits would be
  -- (a lost answer's, or held), else settled with its outcome unknown; never sent again
  local item = j:uploaded()
  how.uploaded = item and outcome.uploaded_item(item, how.provisional or how.hold or j.holding) or nil
  local summary, serr = j:settle_read(verdicts, object_ids, how)
  if not summary then return nil, serr end
  if how.uploaded then
    summary.uploaded = how.uploaded
    if how.hold then summary.held = (summary.held or 0) + 1 end
  end
  return summary
end

-- Every sent edit's verdict: the answer's where it tells, the server's
-- (read back) where it does not. nil, err when the server cannot be read.
-- `resent`: the keys of edits sent again (their refusal may be a late
-- application's doing: read back too).
local function settle_answer(client, j, result, opts, resent)
  local verdicts = {}
  for k, v in pairs(result.outcomes or {}) do verdicts[k] = v end
  local unknown = {}
  for _, e in ipairs(j:entries()) do
    local v = verdicts[e.key]
    local refused_again = resent and resent[e.key] and type(v) == "table" and not v.conflict
    if v == nil or v == outcome.UNKNOWN or refused_again then unknown[#unknown + 1] = e end
  end
  local read, object_ids = {}, {}
  if #unknown > 0 then
    read, object_ids = verify.edits(client, j.service, unknown, { completed = true, fields = j.fields,
      timeout = opts.timeout })
    if not read then return nil, object_ids end
    for k, v in pairs(read) do verdicts[k] = v end
    -- a refusal the server's state belies is no failure
    local kept = {}
    for _, f in ipairs(result.failed_edits or {}) do
      local k = outcome.key(f.op, f.layer, f.target, f.globalId)
      if read[k] == nil or (type(read[k]) == "table" and not read[k].conflict) then kept[#kept + 1] = f end
    end
    if result.failed_edits then result.failed_edits = kept end
    if result.outcomes then
      for k, v in pairs(read) do result.outcomes[k] = v end
    end
  end
  return { verdicts = verdicts, read = read, read_entries = unknown, object_ids = object_ids }
end

--- The on_done of a request or job of an attempt: settles its edits and
-- commits (the generation rule). client:resume_sync uses it too.
-- @return function(result) -> true | nil, err
-- `resent`: as settle_answer's.
function M.on_done(client, j, opts, resent)
  return function(result)
    local settled, err = settle_answer(client, j, result, opts or {}, resent)
    if not settled then return nil, err end
    settled.gens = M.generations(result)
    return j:commit(result, settled)
  end
end

--- The on_over of a job client:resume_sync re-attached to, when it will never
-- give its result (failed, its result file or the job gone): reads its
-- attempt back as a sync re-attaching does (its edits settle; an uploaded
-- edits file is settled with its outcome unknown: `err.resolved.uploaded`,
-- never sent again), and tells it in the error.
-- @return function(err) -> nil, err
function M.on_over(client, j, opts)
  return function(err)
    local summary, verr = read_back(client, j, { completed = false }, opts or {})
    if not summary then return nil, err, verr end
    j:note_read(err, summary)
    if summary.uploaded then err.message = err.message .. "; " .. summary.uploaded.message end
    err.resolved = summary
    return nil, err
  end
end

-- The service's syncCapabilities, kept with the replica: read once from
-- the service's resource. nil when it cannot be read (outcomes then go by
-- what was sent; the next sync reads them again).
local function capabilities(client, j, opts)
  local caps = j:capabilities()
  if caps then return caps end
  local info = client:service_info(j.service, { timeout = opts.timeout })
  if not info then return nil end
  caps = outcome.capabilities_of(info.syncCapabilities)
  j:keep_capabilities(caps)
  return caps
end

-- Re-attaches to the job of the attempt an earlier sync left, and finishes it.
local function reattach(client, j, a, opts)
  local jp = type(a.params) == "table" and a.params or {}
  local fields = j:job_fields(a, opts)
  fields.status_url, fields.service = a.status_url, j.service
  fields.carried_edits = type(a.edits) == "table" and #a.edits > 0
  fields.sent = fields.carried_edits and outcome.sent_edits{ edits = a.edits } or nil
  j.caps = j.caps or capabilities(client, j, opts)
  fields.rollback = outcome.rollback_in_effect(jp.rollbackOnFailure == true, j.caps)
  fields.direction = jp.syncDirection
  local op = jobs.operation(client, fields, synchronize.finish_job)
  op.on_done = M.on_done(client, j, opts)
  return op:wait{ poll_interval = opts.poll_interval, on_status = opts.on_status, on_progress = opts.on_progress,
                  timeout = opts.timeout }
end

--- THE LATE WINDOW, by default: how long after a lost answer the server
-- may still apply the request, in seconds. The vendor's server runs a
-- request for at most "the maximum time a client can use a service" (600 s
-- by default), after waiting at most "the maximum time a client will wait to
-- get a service" (60 s by default): ArcGIS Server's service settings,
-- Pooling and processes, Timeouts (resourcesbeta.arcgis.com/en/help/main/10.2/
-- 0154/01540000054t000000.htm; the administrator API's maxUsageTime and
-- maxWaitTime, createService). A read inside the window settles only what it
-- shows applied; an edit it does not show is sent again only after it.
-- A sync's `late_window` option sets it (0: one sync, as a server whose work
-- ends with its answer).
M.LATE_WINDOW = 660

--- The end of THE LATE WINDOW of an attempt whose answer was lost (`lost_at`,
-- os.time) for this sync's `late_window` (seconds, @{LATE_WINDOW} by
-- default): the window is measured at each sync, so a later sync given a
-- shorter one ends the wait. nil when the attempt has no time of loss.
-- @tparam table a the pending attempt (`lost_at`)
-- @tparam[opt] number window this sync's `late_window`
-- @treturn ?integer seconds since the epoch
function M.window_end(a, window)
  if math.type(a.lost_at) ~= "integer" then return nil end
  return a.lost_at + math.floor(window or M.LATE_WINDOW)
end

--- Whether a provisional attempt (`j:pending()`) is held by this sync: always
-- once (`held_once` not yet set), and again while THE LATE WINDOW
-- (@{window_end}) has not passed, so that a server still working on the
-- request (a job submitted late) shows it before anything is sent again.
-- @tparam table a the pending attempt
-- @tparam[opt] number window this sync's `late_window`
-- @treturn boolean
function M.holds(a, window)
  if a.provisional ~= true then return false end
  if not a.held_once then return true end
  local ends = M.window_end(a, window)
  return ends ~= nil and os.time() < ends
end

--- Resolves the attempt an earlier sync left. Returns `{}` (none),
-- `{result =}` (its job re-attached to and finished) or `{summary =,
-- from_failed_job =}` (read back); or nil, err (`err.pending`: its job
-- still runs).
-- @local
local function resolve(client, j, opts)
  local a, err = j:pending()
  if a == nil then return nil, err end
  if not a then return {} end
  if type(opts.params) == "table" and opts.params.editsUploadId ~= nil then
    -- UPLOADED EDITS FILES: none is sent while an earlier attempt is unresolved (held, or its job
    -- to re-attach to: that job may carry this very file); refused before anything is read or sent,
    -- so the hold still comes
    local why = a.status_url and ("its job %s is still to be finished"):format(a.status_url)
      or a.provisional and "its answer was lost; the server may still apply it"
      or "edits journaled with it are still to be sent"
    local item = a.uploaded and (", with the uploaded edits file %s"):format(a.uploaded) or ""
    return nil, errors.invalid("editsUploadId", ("the outcome of an earlier synchronization of %s%s is not "
      .. "known yet (%s): synchronize without editsUploadId until a synchronization reports it resolved "
      .. "(result.resolved: while the server may still apply it, a synchronization holds it and reads it again; "
      .. "its uploaded edits are never sent again), then send this file if the server does not hold its "
      .. "edits"):format(j.what, item, why))
  end
  local failed_job = false
  if a.status_url then
    local result, werr = reattach(client, j, a, opts)
    if result then
      result.reattached = true -- the interrupted sync's own job, finished
      return { result = result }
    end
    if not jobs.over(werr, true) then return nil, jobs.pending(werr, j.kept_in, a.status_url) end
    failed_job = werr.kind == "job" and werr.status_resource ~= nil
  end
  -- THE LATE WINDOW runs from the answer's loss, or from when the request left (`sent_at`) when a
  -- process died waiting for it (INTERRUPTED: not provisional, no job): the server may still be
  -- running that request too. Its edits are held while the window lasts (no sync's "once" first:
  -- without a window an interrupted attempt is read and what it did not apply goes at once), and
  -- the generation it may move late is not taken for another copy's (a download alone too).
  local lost_at = a.lost_at
  if not a.status_url and math.type(a.sent_at) == "integer" and (lost_at == nil or a.sent_at > lost_at) then
    lost_at = a.sent_at -- (a job's own status tells its outcome: re-attached to above)
  end
  -- (an interrupted attempt has no "once": it is held only while the window lasts)
  local hold = M.holds({ provisional = true, held_once = a.held_once or not a.provisional, lost_at = lost_at },
    opts.late_window)
  local summary
  summary, err = read_back(client, j, { completed = false, hold = hold, lost_at = lost_at }, opts)
  if not summary then return nil, err end
  return { summary = summary, from_failed_job = failed_job }
end

-- What the request states itself (geoservices.sync does the same): kept in
-- the journal, so that an outcome can be read after a crash.
local function explicit(params, carries)
  local async = params.async == true
  if params.transportType == nil then params.transportType = (carries and not async) and "embedded" or "url" end
  if params.rollbackOnFailure == nil then params.rollbackOnFailure = not carries or async end
end

-- A request the server refused as a whole (an error answer), or a job that
-- ended Failed while all or nothing: nothing of it applied. A replica busy
-- with another synchronization (409) refused it whatever its edits: that
-- refusal is not theirs (a split would blame the last edit for it).
local function refused_whole(err, sent)
  if err.outcome_unknown or sent.answered or retry.is_busy(err) then return false end
  if err.kind == "server" and not sent.job then return true end
  return err.kind == "job" and err.status_resource ~= nil and sent.rollback == true
end

local split, request

-- The edits of `entries` a refusal names (its details, or its message, hold
-- their GlobalID): key -> the server's words of it.
local function named_in(err, entries)
  local texts = {}
  for _, d in ipairs(type(err.details) == "table" and err.details or {}) do texts[#texts + 1] = tostring(d) end
  local status = type(err.status_resource) == "table" and err.status_resource or {}
  for _, m in ipairs(type(status.messages) == "table" and status.messages or {}) do
    if type(m) == "table" and m.description then texts[#texts + 1] = tostring(m.description) end
  end
  if #texts == 0 then texts[1] = tostring(err.message) end
  local named = {}
  for _, e in ipairs(entries) do
    local gid = outcome.normalize_gid(e.globalId)
    for _, t in ipairs(texts) do
      if t:upper():find(gid, 1, true) then named[e.key] = t end
    end
  end
  return named
end

-- A part of a split that is one edit, refused as a whole: that edit is the
-- one the server refuses, failed with its words.
local function refuse_one(j, err)
  local entries = j:entries()
  local verdicts = {}
  verdicts[entries[1].key] = { code = math.tointeger(err.code) or err.code, description = err.message }
  local summary, serr = j:settle_read(verdicts, {}, { provisional = false })
  if not summary then return nil, serr end
  err.refused_edit = summary
  return nil, err
end

-- After a failed request or job: pending, split, abandoned, or read back now.
-- `resent`: as settle_answer's.
local function after_failure(client, j, err, sent, opts, resent)
  if sent.job and not jobs.over(err) then return nil, jobs.pending(err, j.kept_in, sent.job) end
  if refused_whole(err, sent) and sent.rollback ~= false and #j:keys() > 0 then
    local named = named_in(err, j:entries())
    -- a failed job that names no edit goes again as a synchronous request (below)
    if next(named) or not (opts.splitting or sent.job) then return split(client, j, err, opts, named, resent) end
    if #j:keys() == 1 and #j:entries() == 1 then return refuse_one(j, err) end
  end
  local nothing_applied = not err.outcome_unknown and not sent.job and not sent.answered
  -- err.generation_unknown: the server answered (the result then failed: a file gone or cut,
  -- a full disk) or its answer was lost: it ran the sync, its generation may have moved; read
  -- back (nothing to read: the journal marks the generation unknown, as after a lost answer)
  if nothing_applied and not err.generation_unknown then
    j:abandon() -- it never left, or the server refused it whole: nothing applied
    return nil, err
  end
  -- the server may still run the request (its answer lost on the way back), edits or not: a download
  -- landing late moves the replica's generation too (the store's copy check waits: `lost_at`)
  -- (GATEWAYS: geoservices.net.retry.may_run_late); `err.lost_at`: an earlier request of this call,
  -- repeated, was lost so
  local lost = not sent.job and not sent.answered and retry.may_run_late(err)
  local late = err.outcome_unknown == true and lost
  local summary, verr = read_back(client, j, { completed = false, provisional = late,
    lost_at = lost and os.time() or err.lost_at }, opts)
  if not summary then return nil, err, verr end
  if not nothing_applied then
    j:note_read(err, summary)
    if summary.uploaded then err.message = err.message .. "; " .. summary.uploaded.message end
  end
  if summary.unsettled > 0 and err.kind == "job" and err.status_resource and not opts.after_failed_job then
    -- an all-or-nothing job failed on one edit and applied none: the edits
    -- go again at once in a synchronous request whose per-edit results name
    -- the one the server refuses and let the others through
    local again = {}
    for k, v in pairs(opts) do again[k] = v end
    again.after_failed_job = true
    local retried, err2 = M.run(client, j, again)
    if retried then
      retried.failed_job = err
      j:fold_read(retried, summary)
    end
    return retried, err2
  end
  return nil, err
end

-- Sends the request of an attempt, journaled.
local function send(client, j, params, opts, resent)
  local call = j:call_opts(opts)
  local sent = {}
  call.on_send = function(fields)
    -- the parameters were checked: the service's promises, read once, then the journal
    j.caps = j.caps or capabilities(client, j, opts)
    call.capabilities = j.caps
    sent.rollback = outcome.rollback_in_effect(fields.rollbackOnFailure == true
      or fields.rollbackOnFailure == "true", j.caps)
    return j:begin(fields)
  end
  call.on_job = function(op)
    sent.job = op.status_url
    return j:record_job(op.status_url)
  end
  local on_done = M.on_done(client, j, opts, resent)
  call.on_done = function(result)
    sent.answered = true -- the server answered: its generation may have moved
    return on_done(result)
  end
  local result, err = synchronize.synchronize_replica(client, j.service, params, call)
  if result then return result end
  if j.discard_output then j:discard_output() end
  return after_failure(client, j, err, sent, opts, resent)
end

-- The counts and lists of a split's parts, folded into its last result.
local SUMS = { "uploaded", "succeeded", "applied", "downloaded" }
local LISTS = { "rejected", "failed_edits", "conflicts", "overwritten", "edits" }

local function fold(into, part)
  for _, k in ipairs(SUMS) do
    if type(part[k]) == "number" then into[k] = (into[k] or 0) + part[k] end
  end
  for _, k in ipairs(LISTS) do
    if type(part[k]) == "table" and #part[k] > 0 then
      local list = {}
      for _, v in ipairs(part[k]) do list[#list + 1] = v end
      for _, v in ipairs(type(into[k]) == "table" and into[k] or {}) do list[#list + 1] = v end
      into[k] = list
    end
  end
end

-- Options of a part of a split: only the edits of `only` (a set of keys).
local function part_opts(opts, only)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.splitting, o.only = true, only
  return o
end

local function set_of(list)
  local set = {}
  for _, k in ipairs(list) do set[k] = true end
  return set
end

-- The edits a refusal named, settled as failed with the server's words
-- without sending them again. One sent again (`resent`) is read back first,
-- as settle_answer does: an earlier request of it may have been applied late
-- (an add refused as a copy of itself), and what the server shows settles it.
local function refuse_named(client, j, named, opts, resent)
  local params, err = j:request(opts)
  if not params then return nil, err end
  local taken
  taken, err = j:take(params, {}, { only = named })
  if not taken then return nil, err end
  local verdicts, object_ids, again = {}, {}, {}
  for key, words in pairs(named) do verdicts[key] = { code = "refused", description = words } end
  for _, e in ipairs(j:entries()) do
    if resent and resent[e.key] and named[e.key] then again[#again + 1] = e end
  end
  if #again > 0 then
    local read, ids = verify.edits(client, j.service, again, { completed = true, fields = j.fields,
      timeout = opts.timeout })
    if not read then return nil, ids end -- the attempt stays: the next sync reads it back
    for k, v in pairs(read) do
      if not (type(v) == "table" and not v.conflict) then verdicts[k] = v end
    end
    object_ids = ids
  end
  return j:settle_read(verdicts, object_ids, { provisional = false })
end

-- The parts of a split, down to the single edits the server refuses.
local function bisect(client, j, list, opts, parts, refused)
  local result, e = M.run(client, j, part_opts(opts, set_of(list)))
  if result then
    parts[#parts + 1] = result
    return true
  end
  if e.refused_edit then
    refused[#refused + 1] = e.refused_edit
    return true
  end
  if not (e.kind == "server" and #list > 1) then return nil, e end
  local half = #list // 2
  local ok, e2 = bisect(client, j, table.move(list, 1, half, 1, {}), opts, parts, refused)
  if not ok then return nil, e2 end
  return bisect(client, j, table.move(list, half + 1, #list, 1, {}), opts, parts, refused)
end

-- The split's result: the last part's, the others' folded in.
local function folded(parts, refused, err)
  local last = parts[#parts]
  for i = #parts - 1, 1, -1 do fold(last, parts[i]) end
  for _, r in ipairs(refused) do
    fold(last, { failed_edits = r.failed_edits, rejected = r.rejected, conflicts = r.conflicts })
  end
  last.split = { parts = #parts, refused = #refused, refusal = err }
  return last
end

-- THE SPLIT (see the module's description). `err`: the whole request's
-- refusal; `named`: the edits it names (they fail at once, with its words,
-- and the others go again together).
function split(client, j, err, opts, named, resent)
  local keys = j:keys()
  j:abandon() -- nothing of it applied: its edits go back where they came from
  local parts, refused, rest = {}, {}, {}
  if next(named) then
    local summary, serr = refuse_named(client, j, named, opts, resent)
    if not summary then return nil, serr end
    refused[1] = summary
    for _, k in ipairs(keys) do
      if not named[k] then rest[#rest + 1] = k end
    end
    local result, e = M.run(client, j, part_opts(opts, set_of(rest)))
    if result then return folded({ result }, refused, err) end
    if e.kind ~= "server" or e.refused_edit then return nil, e end
  else
    -- without edits: the changes download, and a refusal now is not the edits'
    local probe, perr = M.run(client, j, part_opts(opts, {}))
    if not probe then return nil, err, perr end
    parts[1], rest = probe, keys
    if #rest == 1 then
      -- the one edit of a refused request: refused (the request without it went through)
      local summary, serr = refuse_named(client, j, { [rest[1]] = err.message }, opts, resent)
      if not summary then return nil, serr end
      return folded(parts, { summary }, err)
    end
  end
  local half = #rest // 2
  local ok, e = bisect(client, j, table.move(rest, 1, half, 1, {}), opts, parts, refused)
  if ok then ok, e = bisect(client, j, table.move(rest, half + 1, #rest, 1, {}), opts, parts, refused) end
  if #parts == 0 then return nil, e or err end
  local result = folded(parts, refused, err)
  if not ok then return nil, e end
  return result
end

--- One synchronization of a replica through its journal (see the module's
-- description).
-- @param client the client
-- @tparam table j the journal
-- @tparam table opts the sync's options (`timeout`, `poll_interval`, `on_status`, `on_progress`,
--   `journal` (a wrapper of the journal), ...); the journal reads its own
-- @return the result (`resolved`: what resolving an earlier attempt found), or nil, err (`err.resolved`
--   too when the sync fails after that: the attempt it settled is not read again, and what the read
--   found, an update applied late over another crew's values among it, is told here)
function M.run(client, j, opts)
  if opts.journal and not opts.journal_wrapped then
    j = opts.journal(j)
    local again = {}
    for k, v in pairs(opts) do again[k] = v end
    again.journal_wrapped = true
    opts = again
  end
  j.caps = j:capabilities() -- read from the service when a request or a job first needs them
  local resolution, err = resolve(client, j, opts)
  if not resolution then return nil, err end
  if resolution.result and j:enough(resolution) then return resolution.result end
  local result, serr, verr = request(client, j, opts, resolution)
  local found = resolution.result or resolution.summary
  if result and type(result) == "table" and getmetatable(result) ~= jobs.Operation then
    result.resolved = result.resolved or found
  elseif not result and type(serr) == "table" and serr.resolved == nil then
    serr.resolved = found
    -- the message (what the CLI prints) names the conflicts and rejections the read settled
    if found and j.note_resolved then j:note_resolved(serr, found) end
  end
  return result, serr, verr
end

-- This sync's own request, once the attempt an earlier one left is resolved
-- (`resolution`, @{run}).
function request(client, j, opts, resolution)
  local params, err = j:request(opts)
  if not params then return nil, err end
  if params.async == true and j:capabilities() and j:capabilities().supportsAsync == false then
    return nil, errors.invalid("async", "the service does not run synchronizations asynchronously "
      .. "(syncCapabilities.supportsAsync is false): synchronize without async")
  end
  local taken
  taken, err = j:take(params, resolution, opts)
  if not taken then return nil, err end
  if j.rebase and taken.edits then
    taken, err = j:rebase(client, taken, opts)
    if not taken then
      j:abandon()
      return nil, err
    end
  end
  params.edits = taken.edits
  local carries = taken.edits ~= nil
  if carries and (opts.after_failed_job or opts.splitting or resolution.from_failed_job) then
    -- an all-or-nothing job failed (or a split goes on): the edits go in a
    -- synchronous request whose per-edit results name the one the server refuses
    params.async, params.transportType, params.rollbackOnFailure = nil, nil, nil
  end
  explicit(params, carries)
  return send(client, j, params, opts, resolution.summary and resolution.summary.resent)
end

return M
