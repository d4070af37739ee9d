--- The synchronization half of the replica store: `store:sync(client, opts)`
-- and `store:unregister(client)`.
--
-- A sync takes the store's OS lock (`<store>.lock`: a second process gets
-- kind "busy" at once, or waits `opts.lock_timeout` seconds), removes the
-- result file a killed sync left, refuses a damaged file (quick_check) and
-- a copy of the store another copy synchronized (geoservices.store.sync.integrity),
-- sending nothing, then runs the attempt engine (geoservices.sync.attempt)
-- with the store's journal (geoservices.store.sync.journal): an attempt left in
-- flight by an earlier sync resolved first (its job re-attached to, or its
-- edits read back from the server), the queued edits recorded in a new
-- attempt, merged with the server's versions of their features (the
-- journal's rebase hook: geoservices.store.sync.rebase) before anything is sent,
-- synchronizeReplica with the store's
-- generations, each sent edit settled and the result applied in ONE
-- transaction (geoservices.store.sync.commit): snapshot layers cleared, the
-- downloaded changes, the new generations, each sent edit's fate, a line of
-- the sync log. The server's state wins for a feature changed on both
-- sides: `result.overwritten`; a local edit not sent (or not applied) whose
-- feature the download changed is kept as a conflict
-- (geoservices.store.edits.conflicts), named in `result.conflicts`. A job still
-- running when the wait ends, or whose polls fail, keeps the attempt:
-- `err.pending`, and the next sync re-attaches to it.
-- @module geoservices.store.sync
-- @local
local attachment_edits = require "geoservices.store.edits.attachment_edits"
local attachments = require "geoservices.store.file.attachments"
local attempt = require "geoservices.sync.attempt"
local commit = require "geoservices.store.sync.commit"
local errors = require "geoservices.base.errors"
local integrity = require "geoservices.store.sync.integrity"
local journal_mod = require "geoservices.store.sync.journal"
local json = require "geoservices.base.json"
local merge = require "geoservices.sync.merge"
local rebase = require "geoservices.store.sync.rebase"
local replica_mod = require "geoservices.sync.replica"
local replicas = require "geoservices.sync.replicas"
local shared = require "geoservices.store.shared"

local M = {}

local db_fail = commit.db_fail
local shell_word = shared.shell_word

local Refused = { __name = "geoservices.store.Refused" }
function Refused:__tostring()
  if #self == 0 then return "no local edit refused" end
  local first = self[1]
  return ("%d local edit%s refused, not sent (fix the feature; it stays queued): %s %s of %s: %s%s"):format(#self,
    #self == 1 and "" or "s", first.layer_name or first.layer, first.op, first.globalId, first.rule,
    #self > 1 and ("; and %d more (geoservices pending %s)"):format(#self - 1, shell_word(self.path)) or "")
end

-- What the result says beyond the server's answer: the local edits refused
-- before sending (`refused`, a list printing as one line; the result is
-- then partial), and `store_notes`, lines for a reader (refused, conflicts;
-- an edit held back names the command that resolves it, as it runs).
local function notes(st, result, refused, schema_notes, window)
  result.refused = setmetatable(refused or {}, Refused)
  result.refused.path = st.path
  local lines = {}
  for _, line in ipairs(schema_notes or {}) do lines[#lines + 1] = line end
  for _, r in ipairs(result.refused) do
    lines[#lines + 1] = ("refused, not sent: %s %s of %s: %s"):format(tostring(r.layer_name or r.layer), r.op,
      r.globalId, r.rule)
  end
  for _, k in ipairs(result.conflicts or {}) do
    lines[#lines + 1] = ("conflict (%s): the %s of %s in layer %s: %s; kept in geoservices_conflicts%s"):format(
      tostring(k.outcome or "server_kept"), k.op, tostring(k.globalId), tostring(k.layer), tostring(k.description),
      k.outcome == "held" and ("; `geoservices resolve %s %s --with local` sends yours (or --with server, --with base)")
        :format(shell_word(st.path), tostring(k.globalId)) or "")
  end
  -- fields the service sends that the store was not made with (added on the
  -- server since; issue 37): their values are dropped by the download, said here
  local applied = st.db:applied_layers()
  local ids = {}
  for id in pairs(applied) do ids[#ids + 1] = id end
  table.sort(ids)
  for _, id in ipairs(ids) do
    local spec = st.layers[id]
    local known = {}
    for _, c in ipairs(spec and (spec.server_columns or spec.columns) or {}) do known[c.name:lower()] = true end
    local new = {}
    for _, name in ipairs(applied[id].unknown or {}) do
      if not known[name:lower()] then new[#new + 1] = name end
    end
    if spec and #new > 0 then
      lines[#lines + 1] = ("layer %s: the service sends field%s %s, which this store was not made with (added on the "
        .. "server since): %s values are not kept here (the server keeps them); a new replica has %s (geoservices "
        .. "replica create)"):format(spec.table, #new == 1 and "" or "s", table.concat(new, ", "),
        #new == 1 and "its" or "their", #new == 1 and "it" or "them")
    end
  end
  -- edits of a lost answer held in its late window (geoservices.sync.attempt): said, with until when
  local a = st:attempt()
  local params = a and type(a.params) == "table" and a.params or {}
  local ends = attempt.window_end({ lost_at = math.tointeger(params.lost_at) }, window)
  if params.provisional and ends and ends > os.time() then
    -- counted, not read: the queue may be long and each row decoded
    -- (edits of other features go meanwhile: geoservices.store.sync.held)
    local counts = st.db:rows("SELECT count(*) AS held, (SELECT count(*) FROM gpkgext_geoservices_edits q WHERE "
      .. "q.attempt_id IS NULL AND EXISTS (SELECT 1 FROM gpkgext_geoservices_edits h WHERE h.attempt_id = ? AND "
      .. "h.layer_id = q.layer_id AND h.global_id = q.global_id)) AS waiting FROM gpkgext_geoservices_edits "
      .. "WHERE attempt_id = ?", a.id, a.id) or { { waiting = 0, held = 0 } }
    local held, waiting = counts[1].held, counts[1].waiting
    lines[#lines + 1] = ("held: %d edit(s) of a synchronization whose answer was lost: the server may still apply "
      .. "them until %s UTC; each sync reads them again, and one after that sends again those the server does not "
      .. "show applied (--late-window SECONDS shortens the wait)%s"):format(held,
        os.date("!%Y-%m-%d %H:%M:%S", ends),
        waiting > 0 and ("; the %d queued edit(s) of their features wait with them (the others are sent)")
          :format(waiting) or "")
  end
  result.store_notes = lines
  if #result.refused > 0 then result.partial = true end
end

local SYNC_OPTS = { on_status = "function", on_progress = "function", on_fill = "function", timeout = "number",
                    poll_interval = "number", lock_timeout = "number", direction = "string", directions = "table",
                    params = "table", busy_timeout = "number", adopt_copy = "boolean", journal = "function",
                    conflicts = "string", late_window = "number" }

local sync_locked

-- the journal of a store's sync: what it tells M.sync of the attachment edits it sent
local attachment_report = setmetatable({}, { __mode = "k" })

-- Reads back the outcome of the attachment edits sent (geoservices.store.edits.attachment_edits).
local function settle_attachments(st, client, succeeded, failed_edits)
  local rep = st:replica()
  if not rep then return nil end
  return attachment_edits.settle(st, client, rep, succeeded, failed_edits)
end

function sync_locked(st, client, opts)
  integrity.remove_leftovers(st)
  local sound, bad = integrity.check_file(st)
  if not sound then return nil, bad end
  -- a photo added in QGIS's form since the store was opened, queued before anything is read to send
  local linked, lerr = attachments.link_orphans(st)
  if not linked then return nil, lerr end
  local rep, err = st:replica()
  if not rep then return nil, err end
  if type(rep.info) == "table" and rep.info.unregistered then
    return nil, errors.invalid("replica", ("replica %s of store %s was unregistered"):format(
      tostring(rep.replicaID), st.path))
  end
  local j = journal_mod.new(st, client, rep, opts)
  attachment_report[st] = j
  local result
  result, err = attempt.run(client, j, opts)
  -- each edit counted once, the rebase's conflicts with the others (geoservices.store.sync.rebase)
  if result then rebase.summarize(result, j.rebased, j.rows, j.by_seq or {}, j.refused) end
  if result then
    notes(st, result, j.refused, j.schema_notes, opts.late_window)
    -- the server's schema changes taken in place (geoservices.store.sync.server_schema)
    result.schema_changes = j.schema_changes or {}
  end
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
--   another copy synchronized the replica since: geoservices.store.sync.integrity), `conflicts` (this
--   sync's conflict policy: "manual", "server" or "local"; the store's, st:conflict_policy(), by
--   default: geoservices.store.sync.rebase), `journal`
--   (`journal(j) -> j2`: wraps the store's journal, geoservices.sync.attempt), `directions`
--   (`[layer id] = direction`, perLayer), `params` (extra synchronizeReplica parameters: async,
--   transportType...), `late_window` (seconds after a lost answer during which its edits are
--   held, not sent again, beyond the one sync they always are: geoservices.sync.attempt; 660, the
--   vendor's server's limits; 0: one sync)
-- @return the synchronization result, plus `uploaded` (edits applied), `rejected` (the queue rows
--   the server refused, now in store:failed()), `conflicts` (edits not applied because the server
--   holds newer values, and local edits not sent whose feature the download changed or deleted:
--   `feature` the local version, `server`, `outcome`; now in store:conflicts()), `overwritten`
--   (`{seq, layer, op, globalId, sent}` of the local edits whose feature the server's state
--   replaced), `applied` (records written),
--   `resolved` (an interrupted attempt resolved first), `schema_changes` (`{layer, table, added, dropped,
--   changed}` per layer whose fields the server changed, taken in place before the edits were sent:
--   geoservices.store.sync.server_schema), `store_notes` (lines for a reader); or nil, err (`err.pending` when a job's
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
  if opts.conflicts and not merge.POLICIES[opts.conflicts] then
    error("store:sync: option 'conflicts' must be manual, server or local", 3)
  end
  if opts.late_window and not (opts.late_window >= 0 and opts.late_window < math.huge) then
    error("store:sync: option 'late_window' must be a number of seconds, 0 or more", 3)
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
  report = report and report.attachments
  attachment_report[st] = nil
  if ok and report then
    -- attachment edits of a request the server refused whole (then split) were not applied
    local settled, serr = settle_attachments(st, client, result ~= nil and not report.split,
      result and result.failed_edits)
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

-- The outcome of unregistering a store whose replica was unregistered
-- before (the store says so) and that the server no longer knows.
local Already = { __name = "geoservices.Unregistered" }
function Already:__tostring()
  return ("replica %s of %s was already unregistered (the server no longer knows it)"):format(
    tostring(self.replicaID), tostring(self.service))
end

--- Unregisters the store's replica on the server and marks the store so:
-- later syncs are refused (kind "invalid"); the data stays readable. A
-- store unregistered before, whose replica the server no longer knows, is
-- an outcome too (`already = true`): the second run of a clean-up succeeds.
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
  local info = type(rep.info) == "table" and rep.info or {}
  if not out and info.unregistered and replicas.not_found(err) then
    return setmetatable({ replicaID = rep.replicaID, service = rep.service, success = true, already = true }, Already)
  end
  if not out then return nil, err end
  info.unregistered = true
  local ok, e2 = st:transaction(function()
    local done, m, c = st.db:run("UPDATE gpkgext_geoservices_replica SET info = ? WHERE id = 1", json.encode(info))
    if not done then return nil, db_fail(st, m, c) end
    return st:log{ operation = "unregister", outcome = "ok" }
  end)
  if not ok then return nil, e2 end
  return out
end

return M
