--- The journal of a replica store (store:sync): the attempt engine's
-- journal interface (geoservices.sync.attempt) kept in the store's own
-- tables. The attempt is a row of gpkgext_geoservices_attempts (its parameters and
-- the job's status address); the queue rows it carries (gpkgext_geoservices_edits)
-- are marked with it, with what each sends. Its result is committed in ONE
-- transaction with the downloaded data and the generations
-- (geoservices.store.sync.commit); edits read back settle through
-- Store:end_attempt (applied ones leave the queue, rejected ones go to the
-- failed edits, conflicts to geoservices_conflicts, the others back to the
-- queue, or, read back right after this sync's own failure, stay in the
-- attempt to be read again by the next sync). While rows of a lost answer
-- are held in their attempt, the queued edits of other features go with
-- the sync's request, joined to that attempt (geoservices.store.sync.held).
-- @module geoservices.store.sync.journal
-- @local
local attachment_edits = require "geoservices.store.edits.attachment_edits"
local commit = require "geoservices.store.sync.commit"
local held = require "geoservices.store.sync.held"
local integrity = require "geoservices.store.sync.integrity"
local json = require "geoservices.base.json"
local outcome = require "geoservices.sync.outcome"
local paths = require "geoservices.store.paths"
local rebase = require "geoservices.store.sync.rebase"
local server_schema = require "geoservices.store.sync.server_schema"

local M = {}

local Journal = {}
Journal.__index = Journal

local feature_key = commit.feature_key
local db_fail = commit.db_fail

local UPLOADS = { bidirectional = true, upload = true }

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

--- A journal of the store `st` (open, under its lock) for one store:sync.
-- @param st the store
-- @param client the client
-- @tparam table rep the store's replica
-- @tparam table opts the sync's options (`on_fill`)
-- @treturn table the journal
function M.new(st, client, rep, opts)
  return setmetatable({ st = st, client = client, rep = rep, service = rep.service, fields = commit.fields(st),
    what = st.path, kept_in = "in the attempt recorded in " .. st.path, tmp = integrity.result_file(st),
    rows = {}, on_fill = opts.on_fill, model = rep.syncModel }, Journal)
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

function Journal:pending()
  local a, err = self.st:attempt()
  if a == nil then return nil, err end
  if not a then return false end
  local rows, all = rows_of(self.st, a.id)
  if not rows then return nil, all end
  self.id, self.rows, self.queue = a.id, rows, all
  self.params = type(a.params) == "table" and a.params or {}
  -- (a hold is this sync's once it read the attempt: settle_read)
  self.holding, self.held_rows, self.held_info = nil, nil, nil
  local _, directions = request_params(self.st, self.rep, {}, self.params)
  self.directions = directions
  self.touched, self.on_change = watcher(self.st, all)
  -- an attempt that carries held rows (geoservices.store.sync.held), left by a process killed: its rows
  -- are read back together, held from the later of their loss and the request's leaving
  local carried = held.of(self.params)
  return { status_url = a.status_url, params = self.params, edits = #rows > 0 and edits_of(rows) or nil,
           provisional = self.params.provisional == true or carried ~= nil,
           held_once = self.params.held_once == true or carried ~= nil,
           lost_at = math.tointeger(self.params.lost_at) or carried and math.tointeger(carried.lost_at),
           sent_at = math.tointeger(self.params.sent_at), uploaded = self:uploaded() }
end

-- Marks the attempt in hand provisional (and held once): geoservices.sync.attempt's requeue rule.
function Journal:mark(flags)
  local params = self.params or {}
  local carried = held.of(params)
  if carried then -- all its rows read back together: one lost answer's now
    params.held, params.uploaded = nil, params.uploaded or carried.uploaded
  end
  for k, v in pairs(flags) do params[k] = v end
  self.params = params
  local ok, m, c = self.st:_db():run("UPDATE gpkgext_geoservices_attempts SET params = ?, status_url = NULL "
    .. "WHERE attempt_id = ?", json.encode(params), self.id)
  if not ok then return nil, db_fail(self.st, m, c) end
  return true
end

function Journal:entries()
  return commit.entries(self.rows)
end

function Journal:job_fields()
  return { replicaID = self.rep.replicaID, output = self.tmp, on_change = self.on_change,
           layer_directions = self.directions, expect = expectation(self.rep) }
end

function Journal.enough() return false end

-- The replica as it is now (an attempt resolved may have moved it), and
-- the copy check (geoservices.store.sync.integrity) before anything is sent.
function Journal:request(opts)
  local rep, err = self.st:replica()
  if not rep then return nil, err end
  self.rep = rep
  local params, directions = request_params(self.st, rep, opts, nil)
  self.directions = directions
  -- a damaged queue is refused before anything is asked of the server (the copy check reads it)
  local queue, qerr = self.st:pending()
  if not queue then return nil, qerr end
  local ok, copied = integrity.check_copy(self.st, self.client, rep, opts)
  if not ok then return nil, copied end
  -- a schema change on the server taken in place before the edits are taken (once a sync)
  if not self.schema_notes then
    local notes, changes = server_schema.take(self.st, self.client, rep, opts)
    if not notes then return nil, changes end
    self.schema_notes, self.schema_changes = notes, changes
  end
  return params
end

-- The service's syncCapabilities, kept in the replica's info.
function Journal:capabilities()
  local info = type(self.rep.info) == "table" and self.rep.info or {}
  return type(info.sync_capabilities) == "table" and info.sync_capabilities or nil
end

function Journal:keep_capabilities(caps)
  local info = type(self.rep.info) == "table" and self.rep.info or {}
  info.sync_capabilities = caps
  self.rep.info = info
  local ok, m, c = self.st:_db():run("UPDATE gpkgext_geoservices_replica SET info = ? WHERE id = 1", json.encode(info))
  if not ok then return nil, db_fail(self.st, m, c) end
  return true
end

function Journal:keys()
  local keys = {}
  for _, e in ipairs(commit.entries(self.rows)) do keys[#keys + 1] = e.key end
  return keys
end

-- The queue rows of layers that upload this time (a download or snapshot
-- layer's stay queued), marked with a new attempt; the attachment edits
-- with them, marked sent. With `opts.only` (a part of a split): only those
-- rows, no attachment edit (those of the refused request go again with the
-- next sync: geoservices.store.edits.attachment_edits). While this sync
-- holds rows of an earlier attempt: only rows of other features, joined to
-- that attempt, no attachment edit (geoservices.store.sync.held).
function Journal:take(params, _, opts)
  local st, directions = self.st, self.directions
  local only = opts and opts.only
  local queue, qerr = st:pending()
  if not queue then return nil, qerr end
  -- edits held (geoservices.sync.attempt, read by this sync: settle_read): those of their features stay
  -- queued; the others go, joined to the held attempt (geoservices.store.sync.held)
  local busy = self.holding and held.features(self.held_rows) or {}
  local seqs = {}
  for _, r in ipairs(queue) do
    if r.attempt == nil and UPLOADS[directions[r.layer] or ""] and (not only or only[commit.row_key(r)])
       and held.free(busy, r) then
      seqs[#seqs + 1] = r.seq
    end
  end
  if self.holding then
    self.rows = {}
    self.touched, self.on_change = watcher(st, queue)
    if #seqs == 0 then return { edits = nil, entries = {} } end -- a download under the held attempt
    local id, rows, refused = st:begin_attempt{ seqs = seqs, into = self.id, params = {
      syncDirection = params.syncDirection, async = params.async == true, held = held.record(self.held_info) } }
    if not id then return nil, rows end
    self.rows = rows -- (self.params: the held attempt's until j:begin journals the request)
    if not only then self.refused = refused end
    -- (local attachment edits wait until nothing is held: their parent may be a held add)
    return { edits = #rows > 0 and edits_of(rows) or nil, entries = commit.entries(rows) }
  end
  local id, rows, refused = st:begin_attempt{ seqs = seqs, params = { syncDirection = params.syncDirection,
    async = params.async == true } }
  if not id then return nil, rows end
  self.id, self.rows, self.params = id, rows, nil
  if not only then self.refused = refused end
  local edits = #rows > 0 and edits_of(rows) or nil
  if only then
    if self.attachments then self.attachments.split = true end
    self.touched, self.on_change = watcher(st, queue)
    return { edits = edits, entries = commit.entries(rows) }
  end
  -- local attachment edits: their bytes uploaded, then sent with the rest, marked sent first
  local function uploads(layer) return UPLOADS[directions[layer] or ""] end
  local att, att_seqs, not_uploaded = attachment_edits.outgoing(st, self.client, self.rep, uploads)
  self.attachments = { not_uploaded = not_uploaded }
  if #att_seqs > 0 then
    edits = attachment_edits.merge(edits, att)
    local marked, merr = attachment_edits.mark_sent(st, att_seqs)
    if not marked then
      st:end_attempt(id, {})
      return nil, merr
    end
  end
  -- every queued edit is watched: the download may overwrite one not sent too
  self.touched, self.on_change = watcher(st, queue)
  return { edits = edits, entries = commit.entries(rows) }
end

-- THE REBASE HOOK (geoservices.sync.attempt): the updates and deletes about to
-- go merged with the server's versions of their features (geoservices.store.sync.rebase).
function Journal:rebase(client, taken, opts)
  return rebase.hook(self, client, taken, opts)
end

function Journal:call_opts(opts)
  return { output = self.tmp, on_change = self.on_change, on_status = opts.on_status, on_progress = opts.on_progress,
           poll_interval = opts.poll_interval, timeout = opts.timeout, enum_prefix = prefix_of(self.rep) }
end

-- The parameters that matter to the outcome, as sent.
function Journal:begin(fields)
  local journal = { syncDirection = fields.syncDirection, transportType = fields.transportType,
                    rollbackOnFailure = fields.rollbackOnFailure == true or fields.rollbackOnFailure == "true",
                    async = fields.async == true }
  if fields.editsUploadId ~= nil then journal.uploaded = tostring(fields.editsUploadId) end
  if not self.holding then
    journal.sent_at = os.time() -- the request carrying the edits: it may run late (attempt's late window)
  elseif #self.rows > 0 then
    -- edits of other features, joined to the held attempt: it carries the held rows' hold
    journal.sent_at, journal.held = os.time(), held.record(self.held_info)
  else
    -- a download under the held attempt: the held edits' window goes on from their loss
    journal.provisional, journal.held_once = true, true
    -- the held attempt's uploaded edits file and late window
    journal.uploaded, journal.lost_at = self.held_info.uploaded, self.held_info.lost_at
  end
  if self.rep.syncModel == "perLayer" then
    journal.directions = {}
    for id, dir in pairs(self.directions) do journal.directions[tostring(id)] = dir end
  end
  self.params = journal
  local ok, m, c = self.st:_db():run("UPDATE gpkgext_geoservices_attempts SET params = ? WHERE attempt_id = ?",
    json.encode(journal), self.id)
  if not ok then return nil, db_fail(self.st, m, c) end
  return true
end

function Journal:record_job(status_url)
  -- a held attempt's edits are not this job's: its download is asked again if it is lost
  if self.holding then return true end
  return self.st:attempt_job(self.id, status_url)
end

function Journal:discard_output()
  os.remove(self.tmp)
end

-- The one transaction of a result (geoservices.store.sync.commit).
function Journal:commit(result, settled)
  local by_seq, summary = commit.outcomes(self.rows, settled.verdicts)
  self.by_seq = by_seq -- each row's fate, for the result's summary (geoservices.store.sync.rebase)
  local file = paths.exists(self.tmp) and self.tmp or nil
  local done, err = commit.result(self.st, self.rep, { attempt_id = self.id, rows = self.rows, result = result,
    file = file, touched = self.touched, directions = self.directions, on_fill = self.on_fill, by_seq = by_seq,
    summary = summary, object_ids = settled.object_ids, gens = settled.gens, held = self:held_rest(),
    keep_attempt = self.holding and self.held_info.uploaded ~= nil })
  if not done then return nil, err end
  return true
end

-- The uploaded edits file (editsUploadId) the attempt in hand carries, or nil.
function Journal:uploaded()
  if self.holding then return self.held_info.uploaded end
  local p = type(self.params) == "table" and self.params or {}
  return p.uploaded or (held.of(p) or {}).uploaded
end

-- While this sync holds rows: what stays of the attempt once its own rows left it
-- (geoservices.store.sync.held): `seqs` (the held rows) and its `params` then (`lost`: the
-- sync's own request lost too, at that time); nil otherwise.
function Journal:held_rest(lost)
  if not self.holding then return nil end
  return { seqs = held.seqs(self.held_rows), params = held.params(self.params, self.held_info, lost) }
end

function Journal:settle_read(verdicts, object_ids, how)
  local rows = self.rows
  local keep = how.provisional or how.hold
  local by_seq, summary = commit.outcomes(rows, verdicts)
  -- an uploaded edits file stays in the attempt while the engine keeps it (geoservices.sync.attempt:
  -- UPLOADED EDITS FILES), as rows not shown do
  local item = how.uploaded and how.uploaded.kept
  -- a lost request that may still land moves the replica's generation late (the copy check waits:
  -- geoservices.store.sync.integrity): one without edits (nothing shows it landed), or one whose edits
  -- are not all shown settled; edits shown applied or refused tell it has run
  local open = #rows == 0 or item
  for _, r in ipairs(rows) do open = open or by_seq[r.seq] == nil end
  local left, resent = {}, {}
  for _, r in ipairs(rows) do
    if by_seq[r.seq] == nil then
      if keep then left[#left + 1] = r else resent[commit.row_key(r)] = true end
    end
  end
  -- this sync's own rows read back while it holds others: those stay, the attempt a held one again
  local rest = self:held_rest(#left > 0 and how.provisional and how.lost_at or nil)
  local ok, err = commit.verified(self.st, self.id, by_seq, object_ids, rows, summary, { keep_unsettled = keep,
    keep_attempt = item, lost_at = open and how.lost_at or nil, keep_seqs = rest and rest.seqs,
    params = rest and rest.params })
  if not ok then return nil, err end
  summary.requeued = #rows - summary.applied - #summary.rejected - #summary.conflicts
  summary.unsettled = keep and summary.requeued or 0
  summary.held = how.hold and #left or 0
  summary.resent = resent
  if how.hold then summary.unsettled = 0 end
  self.rows = left
  if rest then
    -- (the rows left stay with the held ones: the next sync reads them all back)
    self.params = rest.params
    if #left > 0 then
      for _, r in ipairs(left) do self.held_rows[#self.held_rows + 1] = r end
      self.held_info = { lost_at = rest.params.lost_at, uploaded = self.held_info.uploaded }
    end
  elseif (#left > 0 or item) and (how.provisional or how.hold) then
    ok, err = self:mark{ provisional = true, held_once = how.hold or nil, lost_at = how.lost_at }
    if not ok then return nil, err end
  end
  if how.hold and (#left > 0 or item) then
    -- held by this sync (geoservices.sync.attempt): its own request carries edits of other features only
    local id = item and self:uploaded() or nil
    self.holding, self.held_rows = true, left
    self.held_info = { lost_at = self.params.lost_at, uploaded = id }
  end
  return outcome.resolution(summary)
end

function Journal:abandon()
  if self.holding then
    -- the held edits stay in their attempt; those this request carried go back to the queue
    local rest = self:held_rest()
    return self.st:end_attempt(self.id, {}, { keep_seqs = rest.seqs, keep_attempt = self.held_info.uploaded ~= nil,
      params = rest.params })
  end
  return self.st:end_attempt(self.id, {})
end

function Journal.note_read(_, err, summary)
  err.verified = summary
  err.message = err.message .. ("; read back from the server: %d applied, %d rejected, %d conflict(s), %d not "
    .. "shown applied yet (read again by the next sync before they are sent)"):format(summary.applied,
    #summary.rejected, #summary.conflicts, summary.requeued)
end

function Journal.fold_read(_, result, summary)
  result.conflicts = result.conflicts or {}
  for _, k in ipairs(summary.conflicts or {}) do result.conflicts[#result.conflicts + 1] = k end
  for _, k in ipairs(summary.late or {}) do result.conflicts[#result.conflicts + 1] = k end
end

return M
