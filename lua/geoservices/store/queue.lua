--- The replica store's queue of local edits and what became of them: the
-- edits not yet committed by the server (`st:pending`), those it rejected
-- (`st:failed`), the attempts in flight (`st:begin_attempt`,
-- `st:attempt_job`, `st:attempt`, `st:end_attempt`). The queue is the
-- journal: an edit leaves it only in the transaction that commits the
-- server's result for it. These are methods of the Store
-- (geoservices.store), which mixes them in: call them on a store,
-- `st:pending()`. geoservices.store.features queues through
-- `queue.unsent` and `queue.enqueue` (internal).
-- @module geoservices.store.queue
local errors = require "geoservices.errors"
local json = require "geoservices.json"
local shared = require "geoservices.store.shared"

local db_error, now = shared.db_error, shared.now

local queue = {}

-- The Store's methods of this module (mixed into geoservices.store's Store).
local Store = {}
queue.Store = Store

-- The error of a row that cannot be read (written by another tool, or a
-- disk that lost bytes): it names the file and the row, so nothing is sent,
-- dropped or reported as done in its place. `row_name` says what the row
-- is ("queued edit 7"), `why` what is wrong, `where` which row of which
-- table to repair.
local function damaged(st, row_name, why, where)
  return errors.new("io", ("replica store %s: %s is damaged: %s; it stays where it is and nothing was sent or "
    .. "changed: repair or delete %s"):format(st.path, row_name, why, where), { code = "damaged", path = st.path })
end

-- The JSON text of a column decoded (nil for NULL), or nil, why not.
local function decode_column(text)
  if text == nil then return nil end
  local value, msg, offset = json.decode(text)
  if value ~= nil then return value end
  return nil, ("not JSON (%s at byte %s)"):format(tostring(msg), tostring(offset))
end

local SENDS_FEATURE = { add = true, update = true }

-- A row of a table of edits (queued, failed or in conflict) as the methods
-- give it, JSON columns decoded; `what` names such a row in errors. A
-- queued add or update must hold a feature: it is what would be sent.
local function edit_row(st, r, what, tbl)
  local out = {
    seq = r.seq, op = r.op, layer = r.layer_id, globalId = r.global_id, attempt = r.attempt_id,
    created = r.created_at, code = r.code, description = r.description, failed = r.failed_at,
    detected = r.detected_at,
  }
  local why
  for _, column in ipairs{ "feature", "base", "server" } do
    local value, bad = decode_column(r[column])
    if bad then why = ("its %s is %s"):format(column, bad) end
    out[column] = value
  end
  if not why and tbl == "geoservices_edits" and SENDS_FEATURE[r.op]
    and (type(out.feature) ~= "table" or type(out.feature.attributes) ~= "table") then
    why = ("it is an %s without a feature ({\"attributes\": {...}}) to send"):format(r.op)
  end
  if why then
    local err = damaged(st, ("%s %d"):format(what, r.seq), why, ("the row seq = %d of %s"):format(r.seq, tbl))
    err.seq = r.seq
    return nil, err
  end
  return out
end

local function edit_rows(st, rows, what, tbl)
  local list = {}
  for i, r in ipairs(rows) do
    local row, err = edit_row(st, r, what, tbl)
    if not row then return nil, err end
    list[i] = row
  end
  return list
end

-- The one queued edit of a GlobalID not yet sent (queue compaction keeps at
-- most one) as Store:pending gives it, plus `feature_text` and
-- `base_text` (the JSON as stored); false when there is none; nil, err.
function queue.unsent(st, spec, gid)
  local rows, msg, code = st.db:rows("SELECT * FROM geoservices_edits WHERE layer_id = ? AND "
    .. "global_id = ? AND attempt_id IS NULL ORDER BY seq DESC", spec.id, gid)
  if not rows then return nil, db_error(st.path, msg, code) end
  if not rows[1] then return false end
  local row, err = edit_row(st, rows[1], "queued edit", "geoservices_edits")
  if not row then return nil, err end
  row.feature_text, row.base_text = rows[1].feature, rows[1].base
  return row
end

-- Queues an edit: `feature_text` the JSON sent (nil for a delete),
-- `base_text` the JSON of the feature before the first unsent change (nil
-- for an add).
function queue.enqueue(st, spec, op, gid, feature_text, base_text)
  local ok, msg, code = st.db:run("INSERT INTO geoservices_edits (layer_id, op, global_id, feature, base, "
    .. "created_at) VALUES (?, ?, ?, ?, ?, ?)", spec.id, op, gid, feature_text, base_text, now())
  if not ok then return nil, db_error(st.path, msg, code) end
  return true
end

--- The methods of a replica store (geoservices.store) that read its
-- queue of local edits and record the synchronizations that send them.
-- @type Store

--- The local edits not yet committed by the server, in order:
-- `{seq =, op = "add"|"update"|"delete", layer =, globalId =, feature =, base =, attempt =, created =}`.
-- `feature` is what is sent (an update's changed attributes and geometry);
-- `base` the feature (`{attributes =, geometry =}`) as it was before the
-- first unsent local change of its GlobalID: an update's and a delete's,
-- never an add's (nor an edit queued by a store of format 1).
-- @return the list, or nil, err: kind "io", code "damaged" when a row cannot be decoded (the
--   message names the file and the row; nothing is changed)
function Store:pending()
  local rows, msg, code = self:_db():rows("SELECT * FROM geoservices_edits ORDER BY seq")
  if not rows then return nil, db_error(self.path, msg, code) end
  return edit_rows(self, rows, "queued edit", "geoservices_edits")
end

--- The local edits the server rejected, with its `code` and `description`
-- (and `seq`, `op`, `layer`, `globalId`, `feature`, `base`, `attempt`, `failed` time).
-- @return the list, or nil, err (as @{pending})
function Store:failed()
  local rows, msg, code = self:_db():rows("SELECT * FROM geoservices_failed_edits ORDER BY seq")
  if not rows then return nil, db_error(self.path, msg, code) end
  return edit_rows(self, rows, "failed edit", "geoservices_failed_edits")
end

--- The local edits the server holds other values for (another replica
-- changed the feature since): they are never sent again, and stay listed
-- until @{discard_conflict}. Each: `seq`, `op`, `layer`, `globalId`,
-- `feature` (what was sent), `base` (the feature before the local change),
-- `server` (the server's feature, `{attributes =, geometry =}`, as the
-- synchronization read it), `description`, `attempt`, `detected` (UTC time).
-- The local feature holds what the server sent next; to keep the local
-- values, update the feature again, then discard the conflict.
-- @return the list, or nil, err (as @{pending})
function Store:conflicts()
  if self.format < 2 then return {} end -- a store of format 1 opened read-only has none
  local rows, msg, code = self:_db():rows("SELECT * FROM geoservices_conflicts ORDER BY seq")
  if not rows then return nil, db_error(self.path, msg, code) end
  return edit_rows(self, rows, "conflict", "geoservices_conflicts")
end

--- Forgets a conflict (once the user has seen it, or made the edit again).
-- @int seq the conflict's `seq`
-- @return true, or nil, err: kind "invalid" (no such conflict), "busy", "io"
-- @raise when seq is not an integer
function Store:discard_conflict(seq)
  if math.type(seq) ~= "integer" then error("store:discard_conflict: seq must be an integer", 2) end
  local changes, msg, code = self:_db():run("DELETE FROM geoservices_conflicts WHERE seq = ?", seq)
  if not changes then return nil, db_error(self.path, msg, code) end
  if changes == 0 then return nil, errors.invalid("seq", ("no conflict %d in this store"):format(seq)) end
  return true
end

--- Records an attempt before it is sent: the queued edits not yet in
-- flight (or those of `opts.seqs`) are marked with it, and its GlobalIDs
-- kept. For the synchronization half.
-- @tparam[opt] table opts `seqs` (the queue rows sent), `params` (kept as JSON), `status_url`
-- @treturn[1] integer the attempt id
-- @treturn[1] table the queue rows it holds (as @{pending})
-- @return[2] nil
-- @treturn[2] table err: as @{pending} (a damaged row: no attempt is recorded), "busy", "io"
function Store:begin_attempt(opts)
  opts = opts or {}
  return self:transaction(function()
    local db = self.db
    local rows, msg, code = db:rows("SELECT * FROM geoservices_edits WHERE attempt_id IS NULL ORDER BY seq")
    if not rows then return nil, db_error(self.path, msg, code) end
    local wanted
    if opts.seqs then
      wanted = {}
      for _, s in ipairs(opts.seqs) do wanted[s] = true end
    end
    local chosen, gids = {}, json.array()
    for _, r in ipairs(rows) do
      if not wanted or wanted[r.seq] then
        local row, err = edit_row(self, r, "queued edit", "geoservices_edits")
        if not row then return nil, err end -- nothing recorded: the edits stay queued, unsent
        chosen[#chosen + 1] = row
        gids[#gids + 1] = r.global_id
      end
    end
    local changes, id, icode = db:run("INSERT INTO geoservices_attempts (started_at, state, status_url, "
      .. "global_ids, params) VALUES (?, 'sending', ?, ?, ?)", now(), opts.status_url, json.encode(gids),
      opts.params and json.encode(opts.params) or nil)
    if not changes then return nil, db_error(self.path, id, icode) end
    for _, r in ipairs(chosen) do
      local ok, m, c = db:run("UPDATE geoservices_edits SET attempt_id = ? WHERE seq = ?", id, r.seq)
      if not ok then return nil, db_error(self.path, m, c) end
      r.attempt = id
    end
    return id, chosen
  end)
end

--- Adds the async job's status address to an attempt.
-- @int attempt_id the attempt
-- @string status_url the address
-- @return true, or nil, err
function Store:attempt_job(attempt_id, status_url)
  local ok, msg, code = self:_db():run("UPDATE geoservices_attempts SET status_url = ?, state = 'job' "
    .. "WHERE attempt_id = ?", status_url, attempt_id)
  if not ok then return nil, db_error(self.path, msg, code) end
  return true
end

--- The attempt in flight, if any: `{id =, started =, state =, status_url =, globalIds =, params =}`.
-- @return the attempt, false when there is none, or nil, err: kind "io", code "damaged" when its
--   record cannot be decoded (the message names the file and the attempt; its edits stay queued,
--   in flight, until the record is repaired)
function Store:attempt()
  local rows, msg, code = self:_db():rows("SELECT * FROM geoservices_attempts ORDER BY attempt_id DESC LIMIT 1")
  if not rows then return nil, db_error(self.path, msg, code) end
  local r = rows[1]
  if not r then return false end
  local attempt = { id = r.attempt_id, started = r.started_at, state = r.state, status_url = r.status_url }
  for column, field in pairs{ global_ids = "globalIds", params = "params" } do
    local value, why = decode_column(r[column])
    if why then
      local err = damaged(self, ("synchronization attempt %d"):format(r.attempt_id), ("its %s is %s"):format(
        column, why), ("the row attempt_id = %d of geoservices_attempts (a NULL %s is read as none)"):format(
        r.attempt_id, column))
      err.attempt = r.attempt_id
      return nil, err
    end
    attempt[field] = value
  end
  return attempt
end

--- Resolves an attempt (in the transaction that commits its result), each
-- queue row of it by `outcomes[seq]`:
--
-- * `true`: applied by the server; it leaves the queue;
-- * `{code =, description =}`: rejected; it moves to the failed edits (@{failed});
-- * `{conflict = true, server = <feature table>, description =}`: the server holds other values
--   (another replica's newer edit); it moves to the conflicts (@{conflicts}), never sent again;
-- * nil: not applied (or not known to be); it returns to the queue, unsent, and goes with the
--   next synchronization.
--
-- The attempt is forgotten.
-- @int attempt_id the attempt
-- @tparam table outcomes seq -> outcome
-- @return true, or nil, err
function Store:end_attempt(attempt_id, outcomes)
  return self:transaction(function()
    local db = self.db
    local rows, msg, code = db:rows("SELECT * FROM geoservices_edits WHERE attempt_id = ?", attempt_id)
    if not rows then return nil, db_error(self.path, msg, code) end
    for _, r in ipairs(rows) do
      local o = outcomes and outcomes[r.seq]
      local ok, m, c = true, nil, nil
      if type(o) == "table" and o.conflict then
        local server = o.server ~= nil and json.encode(o.server) or nil
        ok, m, c = db:run("INSERT OR REPLACE INTO geoservices_conflicts (seq, layer_id, op, global_id, feature, base, "
          .. "server, description, attempt_id, detected_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", r.seq, r.layer_id,
          r.op, r.global_id, r.feature, r.base, server, o.description, attempt_id, now())
      elseif type(o) == "table" then
        ok, m, c = db:run("INSERT OR REPLACE INTO geoservices_failed_edits (seq, layer_id, op, global_id, feature, "
          .. "base, code, description, attempt_id, failed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", r.seq,
          r.layer_id, r.op, r.global_id, r.feature, r.base, math.tointeger(o.code), o.description, attempt_id, now())
      end
      if ok and (o == true or type(o) == "table") then
        ok, m, c = db:run("DELETE FROM geoservices_edits WHERE seq = ?", r.seq)
      elseif ok then
        ok, m, c = db:run("UPDATE geoservices_edits SET attempt_id = NULL WHERE seq = ?", r.seq)
      end
      if not ok then return nil, db_error(self.path, m, c) end
    end
    local ok, m, c = db:run("DELETE FROM geoservices_attempts WHERE attempt_id = ?", attempt_id)
    if not ok then return nil, db_error(self.path, m, c) end
    return true
  end)
end

return queue
