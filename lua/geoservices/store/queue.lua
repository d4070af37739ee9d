--- The replica store's queue of local edits and what became of them: the
-- edits not yet committed by the server (`st:pending`), those it rejected
-- (`st:failed`), the attempts in flight (`st:begin_attempt`,
-- `st:attempt_job`, `st:attempt`, `st:end_attempt`). The queue is the
-- journal: an edit leaves it only in the transaction that commits the
-- server's result for it. The methods belong to the Store
-- (geoservices.store); geoservices.store.features queues through
-- `queue.unsent` and `queue.enqueue`.
-- @module geoservices.store.queue
-- @local
local json = require "geoservices.json"
local shared = require "geoservices.store.shared"

local db_error, now = shared.db_error, shared.now

local queue = {}

--- The Store's methods of this module (mixed into geoservices.store's Store).
local Store = {}
queue.Store = Store

-- The one queued edit of a GlobalID not yet sent (queue compaction keeps at
-- most one), or nil.
function queue.unsent(self, spec, gid)
  local rows, msg, code = self.db:rows("SELECT seq, op, feature FROM geoservices_edits WHERE layer_id = ? AND "
    .. "global_id = ? AND attempt_id IS NULL ORDER BY seq DESC", spec.id, gid)
  if not rows then return nil, db_error(self.path, msg, code) end
  return rows[1] or false
end

function queue.enqueue(self, spec, op, gid, feature_text)
  local ok, msg, code = self.db:run("INSERT INTO geoservices_edits (layer_id, op, global_id, feature, created_at) "
    .. "VALUES (?, ?, ?, ?, ?)", spec.id, op, gid, feature_text, now())
  if not ok then return nil, db_error(self.path, msg, code) end
  return true
end

local function queue_row(r)
  return {
    seq = r.seq, op = r.op, layer = r.layer_id, globalId = r.global_id,
    feature = r.feature and json.decode(r.feature) or nil, attempt = r.attempt_id, created = r.created_at,
    code = r.code, description = r.description, failed = r.failed_at,
  }
end

--- The local edits not yet committed by the server, in order:
-- `{seq =, op = "add"|"update"|"delete", layer =, globalId =, feature =, attempt =, created =}`.
-- @return the list, or nil, err
function Store:pending()
  local rows, msg, code = self:_db():rows("SELECT * FROM geoservices_edits ORDER BY seq")
  if not rows then return nil, db_error(self.path, msg, code) end
  local list = {}
  for i, r in ipairs(rows) do list[i] = queue_row(r) end
  return list
end

--- The local edits the server rejected, with its `code` and `description`
-- (and `seq`, `op`, `layer`, `globalId`, `feature`, `failed` time).
-- @return the list, or nil, err
function Store:failed()
  local rows, msg, code = self:_db():rows("SELECT * FROM geoservices_failed_edits ORDER BY seq")
  if not rows then return nil, db_error(self.path, msg, code) end
  local list = {}
  for i, r in ipairs(rows) do list[i] = queue_row(r) end
  return list
end

--- Records an attempt before it is sent: the queued edits not yet in
-- flight (or those of `opts.seqs`) are marked with it, and its GlobalIDs
-- kept. For the synchronization half.
-- @tparam[opt] table opts `seqs` (the queue rows sent), `params` (kept as JSON), `status_url`
-- @treturn[1] integer the attempt id
-- @treturn[1] table the queue rows it holds (as @{pending})
-- @return[2] nil
-- @treturn[2] table err
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
        chosen[#chosen + 1] = queue_row(r)
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
-- @return the attempt, false when there is none, or nil, err
function Store:attempt()
  local rows, msg, code = self:_db():rows("SELECT * FROM geoservices_attempts ORDER BY attempt_id DESC LIMIT 1")
  if not rows then return nil, db_error(self.path, msg, code) end
  local r = rows[1]
  if not r then return false end
  return { id = r.attempt_id, started = r.started_at, state = r.state, status_url = r.status_url,
           globalIds = r.global_ids and json.decode(r.global_ids), params = r.params and json.decode(r.params) }
end

--- Resolves an attempt (in the transaction that commits its result): each
-- queue row of it leaves the queue when `outcomes[seq]` is true, moves to
-- the failed edits with `{code =, description =}` when it is a table, and
-- returns to the queue (not sent) when absent. The attempt is forgotten.
-- @int attempt_id the attempt
-- @tparam table outcomes seq -> true | {code =, description =}
-- @return true, or nil, err
function Store:end_attempt(attempt_id, outcomes)
  return self:transaction(function()
    local db = self.db
    local rows, msg, code = db:rows("SELECT * FROM geoservices_edits WHERE attempt_id = ?", attempt_id)
    if not rows then return nil, db_error(self.path, msg, code) end
    for _, r in ipairs(rows) do
      local o = outcomes and outcomes[r.seq]
      local ok, m, c
      if o == true then
        ok, m, c = db:run("DELETE FROM geoservices_edits WHERE seq = ?", r.seq)
      elseif type(o) == "table" then
        ok, m, c = db:run("INSERT OR REPLACE INTO geoservices_failed_edits (seq, layer_id, op, global_id, feature, "
          .. "code, description, attempt_id, failed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", r.seq, r.layer_id,
          r.op, r.global_id, r.feature, math.tointeger(o.code), o.description, attempt_id, now())
        if ok then ok, m, c = db:run("DELETE FROM geoservices_edits WHERE seq = ?", r.seq) end
      else
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
