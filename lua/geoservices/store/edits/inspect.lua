--- Inspecting a replica store and discarding local edits: `st:status()`
-- (the replica, its generation, the last sync, the edits waiting by layer
-- and kind, the failed ones, the conflicts) and `st:discard(...)` (drops a
-- local edit and puts the server's version back). What they return
-- prints as one readable line (`tostring`, a REPL's echo), as the lists of
-- `st:pending()`, `st:failed()` and `st:conflicts()` do
-- (geoservices.store.edits.edit_list). These are methods of the Store
-- (geoservices.store), which attaches them (its METHODS).
-- @module geoservices.store.edits.inspect
local attachment_discard = require "geoservices.store.edits.attachment_discard"
local attachment_edits = require "geoservices.store.edits.attachment_edits"
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"
local outgoing = require "geoservices.store.edits.outgoing"
local shared = require "geoservices.store.shared"
local srs = require "geoservices.store.file.srs"
local unrepresentable = require "geoservices.store.file.unrepresentable"

local db_error, normalize_gid = shared.db_error, shared.normalize_gid

local inspect = {}

--- The methods of a replica store (geoservices.store) that inspect it and discard local edits.
-- @type Store
local Store = {}
inspect.Store = Store

local function plural(n, word)
  return ("%d %s%s"):format(n, word, n == 1 and "" or "s")
end

local OPS = { "add", "update", "delete" }

-- "1 add, 2 updates" of counts by op (nothing for an op with none).
local function by_op(counts)
  local parts = {}
  for _, op in ipairs(OPS) do
    if (counts[op] or 0) > 0 then parts[#parts + 1] = plural(counts[op], op) end
  end
  return table.concat(parts, ", ")
end

--- What a store holds and waits for (@{status}); `tostring` gives one line.
-- @table Status
local Status = { __name = "geoservices.store.Status" }
Status.__index = Status

local function generation_text(s)
  if s.generation then return "generation " .. tostring(s.generation) end
  local parts = {}
  for _, l in ipairs(s.layerGenerations or {}) do parts[#parts + 1] = ("%s:%s"):format(l.id, tostring(l.serverGen)) end
  return "generations " .. (#parts > 0 and table.concat(parts, " ") or "none")
end

local unrepresentable_summary = unrepresentable.summary

function Status:__tostring()
  local layers = {}
  for _, l in ipairs(self.pending.layers) do layers[#layers + 1] = ("%s: %s"):format(l.name, by_op(l)) end
  local last = self.lastSync
  local last_text = last and ("last %s %s %s"):format(last.operation, last.at, last.outcome) or "never synchronized"
  return ("%s: replica %s %s of %s (%s, %s), %s, %s; %s%s%s, %s, %s"):format(self.path,
    tostring(self.replicaName or "-"), tostring(self.replicaID), tostring(self.service), tostring(self.syncModel),
    tostring(self.syncDirection), generation_text(self), last_text, plural(self.pending.total, "local edit"),
    #layers > 0 and (" (" .. table.concat(layers, "; ") .. ")") or "",
    (self.pending.in_flight > 0 and (", %d in flight"):format(self.pending.in_flight) or "")
    .. ((self.refused or 0) > 0 and (", %d refused here (geoservices pending %s)"):format(self.refused,
      shared.shell_word(self.path))
      or "")
    .. ((self.pending.attachments or 0) > 0 and (", " .. plural(self.pending.attachments, "attachment edit")) or ""),
    ("%d failed"):format(self.failed), plural(self.conflicts, "conflict"))
    .. srs.unknown_text(self.unknownCrs)
    .. (self.unrepresentable.count > 0 and ", " .. unrepresentable_summary(self.unrepresentable) or "")
end

--- The store's state: `path`, `service`, `replicaID`, `replicaName`, `syncModel`, `syncDirection`,
-- `generation` (perReplica) or `layerGenerations` (perLayer), `lastSync` (`{at, operation,
-- outcome, uploaded, failed, downloaded, message}` of the sync log's last line, or nil),
-- `pending` (`{total, in_flight, attachments, layers = {{id, name, add, update, delete}, ...}}`:
-- `attachments` the attachment edits waiting), `failed` (feature and attachment edits the server
-- refused) and `conflicts` (counts), `refused` (queued edits refused here before sending, a rule
-- of geoservices.store.edits.outgoing broken: they stay queued), `unknownCrs` (the layers whose CRS
-- the file cannot define, geoservices.store.file.srs.unknown). It reads counts only, so a damaged
-- queue row does not hide it.
-- @treturn[1] Status the state (prints as one line)
-- @return[2] nil
-- @treturn[2] table err
function Store:status()
  local db = self:_db()
  local rep, err = self:replica()
  if not rep then return nil, err end
  local s = setmetatable({ path = self.path, service = rep.service, replicaID = rep.replicaID,
    replicaName = rep.replicaName, syncModel = rep.syncModel, syncDirection = rep.syncDirection,
    generation = rep.replicaServerGen, layerGenerations = rep.layerServerGens,
    unregistered = type(rep.info) == "table" and rep.info.unregistered == true or nil,
    pending = { total = 0, in_flight = 0, layers = {} } }, Status)
  local rows, msg, code = db:rows("SELECT layer_id, op, count(*) AS n, count(attempt_id) AS flying "
    .. "FROM gpkgext_geoservices_edits GROUP BY layer_id, op ORDER BY layer_id")
  if not rows then return nil, db_error(self.path, msg, code) end
  local by_layer = {}
  for _, r in ipairs(rows) do
    local l = by_layer[r.layer_id]
    if not l then
      local spec = self.layers[r.layer_id]
      l = { id = r.layer_id, name = spec and spec.table or tostring(r.layer_id), add = 0, update = 0, delete = 0 }
      by_layer[r.layer_id] = l
      s.pending.layers[#s.pending.layers + 1] = l
    end
    l[r.op] = (l[r.op] or 0) + r.n
    s.pending.total = s.pending.total + r.n
    s.pending.in_flight = s.pending.in_flight + r.flying
  end
  for field, tbl in pairs{ failed = "gpkgext_geoservices_failed_edits", conflicts = "geoservices_conflicts" } do
    rows, msg, code = db:rows("SELECT count(*) AS n FROM " .. tbl)
    if not rows then return nil, db_error(self.path, msg, code) end
    s[field] = rows[1].n
  end
  -- the queued edits refused here before sending (a rule of geoservices.store.edits.outgoing: a
  -- domain, a type, a length...): they stay queued; a damaged row leaves the count out
  local queued = self:pending()
  s.refused = 0
  for _, e in ipairs(queued or {}) do
    if e.refused then s.refused = s.refused + 1 end
  end
  -- the attachment edits: waiting, and refused (counted with the failed edits)
  local att = attachment_edits.counts(self)
  s.pending.attachments, s.failed = att.pending, s.failed + att.failed
  rows, msg, code = db:rows("SELECT * FROM geoservices_sync_log ORDER BY id DESC LIMIT 1")
  if not rows then return nil, db_error(self.path, msg, code) end
  local last = rows[1]
  if last then
    s.lastSync = { at = last.at, operation = last.operation, outcome = last.outcome, uploaded = last.uploaded,
                   failed = last.failed, downloaded = last.downloaded, message = last.message }
  end
  s.unknownCrs, msg = srs.unknown(db, self.path) -- layers whose CRS the file cannot define
  if not s.unknownCrs then return nil, msg end
  s.unrepresentable, msg, code = unrepresentable.list(self) -- kept as the server sent
  if not s.unrepresentable then return nil, db_error(self.path, msg, code) end
  return s
end

--- What @{discard} did; `tostring` gives one line.
-- @table Discarded
local Discarded = { __name = "geoservices.store.Discarded" }
Discarded.__index = Discarded

function Discarded:__tostring()
  local parts = {}
  if self.removed > 0 then parts[#parts + 1] = plural(self.removed, "add") .. " removed" end
  if self.restored > 0 then
    parts[#parts + 1] = ("%s restored"):format(by_op{ update = self.updates, delete = self.deletes })
  end
  local features = self.count - self.attachments
  local text = ("%s discarded%s"):format(plural(features, "local edit"),
    #parts > 0 and (": " .. table.concat(parts, ", ")) or "")
  if self.attachments == 0 then return text end
  local notes = {}
  if self.refetch > 0 then
    notes[#notes + 1] = ("the server's bytes of %d fetched again by the next sync"):format(self.refetch)
  end
  if #self.bytesKept > 0 then
    notes[#notes + 1] = ("%d keep%s the local bytes (no address of the server's known)"):format(#self.bytesKept,
      #self.bytesKept == 1 and "s" or "")
  end
  if #self.bytesMissing > 0 then
    notes[#notes + 1] = ("%d restored without bytes (none kept, no address of the server's known)")
      :format(#self.bytesMissing)
  end
  local att = ("%s discarded%s"):format(plural(self.attachments, "attachment edit"),
    #notes > 0 and (" (" .. table.concat(notes, "; ") .. ")") or "")
  return features > 0 and (text .. "; " .. att) or att
end

-- Undoes one queued edit not sent: an add's feature removed, an update's
-- or a delete's base written back.
local function undo(st, r)
  local db = st.db
  local spec = st.layers[r.layer_id]
  if r.op == "add" then
    local n, m, c = db:remove(r.layer_id, r.global_id)
    if not n then return nil, db_error(st.path, m, c) end
  else
    local base, why = outgoing.base(spec, r.base)
    if not base then
      return nil, errors.invalid("global_id", ("the %s of %s in layer %d kept no values from before it (%s): the "
        .. "server's version is not known here"):format(r.op, r.global_id, r.layer_id,
        base == false and why or "made by an older version of the store"))
    end
    local ok, m, c = db:put(r.layer_id, { attributes = base.attributes, geometry = base.geometry })
    if not ok then return nil, db_error(st.path, m, c) end
  end
  local ok, m, c = db:run("DELETE FROM gpkgext_geoservices_edits WHERE seq = ?", r.seq)
  if not ok then return nil, db_error(st.path, m, c) end
  return true
end

--- Discards local edits not sent yet: each one's feature is put back as
-- the server had it (an add removed, an update's and a delete's values from
-- before the edit written back), and it leaves the queue. A GlobalID of an
-- attachment discards its attachment edits, queued or refused by the server
-- (geoservices.store.edits.attachment_discard); `{all = true}` takes those too. All of them, or
-- none: in one transaction. An edit in flight cannot be discarded (its
-- outcome is being settled: synchronize first).
-- @param ... GlobalIDs (strings, or one list of them), or `{all = true}`
-- @treturn[1] Discarded what was done (prints as one line): `count`, `removed`, `restored`,
--   `updates`, `deletes`, `globalIds`; `attachments` (of `count`: attachment edits discarded,
--   geoservices.store.edits.attachment_discard), `refetch` (attachments whose server bytes the next sync
--   fetches again), `bytesKept`, `bytesMissing` (GlobalIDs of attachments whose server bytes
--   could not be put back)
-- @return[2] nil
-- @treturn[2] table err: kind "invalid" (no local edit of a GlobalID, one in flight, one without
--   the values from before it), "busy", "io"
-- @raise when given neither GlobalIDs nor `{all = true}`
function Store:discard(...)
  local db = self:_db()
  local first = ...
  local all = type(first) == "table" and first.all == true
  local gids = {}
  if not all then
    gids = type(first) == "table" and first or { ... }
    if #gids == 0 then error("store:discard: give GlobalIDs, or {all = true}", 2) end
    for _, g in ipairs(gids) do
      if type(g) ~= "string" then error("store:discard: GlobalIDs must be strings", 2) end
    end
  end
  return self:_uncaptured(function()
    local rows, msg, code
    local att_rows, aerr = attachment_discard.rows(self, gids, all)
    if not att_rows then return nil, aerr end
    local att_gids = {}
    for _, r in ipairs(att_rows) do att_gids[normalize_gid(r.global_id)] = true end
    if all then
      rows, msg, code = db:rows("SELECT * FROM gpkgext_geoservices_edits WHERE attempt_id IS NULL ORDER BY seq")
      if not rows then return nil, db_error(self.path, msg, code) end
    else
      rows = {}
      for _, g in ipairs(gids) do
        local gid = normalize_gid(g)
        local found
        found, msg, code = db:rows("SELECT * FROM gpkgext_geoservices_edits WHERE global_id = ? ORDER BY seq", gid)
        if not found then return nil, db_error(self.path, msg, code) end
        if #found == 0 and not att_gids[gid] then
          return nil, errors.invalid("global_id", ("no local edit of %s in %s"):format(gid, self.path))
        end
        for _, r in ipairs(found) do
          if r.attempt_id then
            return nil, errors.invalid("global_id", ("the %s of %s is in flight (attempt %d): synchronize to settle "
              .. "it first"):format(r.op, gid, r.attempt_id))
          end
          rows[#rows + 1] = r
        end
      end
    end
    local out = setmetatable({ count = 0, removed = 0, restored = 0, updates = 0, deletes = 0, attachments = 0,
                               refetch = 0, bytesKept = json.array(), bytesMissing = json.array(),
                               globalIds = json.array() }, Discarded)
    for _, r in ipairs(att_rows) do
      local done, err = attachment_discard.undo(self, r)
      if not done then return nil, err end
      out.count, out.attachments = out.count + 1, out.attachments + 1
      out.globalIds[#out.globalIds + 1] = r.global_id
      if done.refetch then out.refetch = out.refetch + 1 end
      if done.bytes_kept then out.bytesKept[#out.bytesKept + 1] = r.global_id end
      if done.bytes_missing then out.bytesMissing[#out.bytesMissing + 1] = r.global_id end
    end
    for _, r in ipairs(rows) do
      local ok, err = undo(self, r)
      if not ok then return nil, err end
      out.count = out.count + 1
      out.globalIds[#out.globalIds + 1] = r.global_id
      if r.op == "add" then
        out.removed = out.removed + 1
      else
        out.restored = out.restored + 1
        if r.op == "update" then out.updates = out.updates + 1 else out.deletes = out.deletes + 1 end
      end
    end
    return out
  end)
end

return inspect
