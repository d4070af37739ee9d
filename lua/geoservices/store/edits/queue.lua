--- The replica store's queue of local edits and what became of them: the
-- edits not yet committed by the server (`st:pending`), those it rejected
-- (`st:failed`), the attempts in flight (`st:begin_attempt`,
-- `st:attempt_job`, `st:attempt`, `st:end_attempt`). The queue is the
-- journal: an edit leaves it only in the transaction that commits the
-- server's result for it. These are methods of the Store
-- (geoservices.store), which attaches them (its METHODS): call them on a store,
-- `st:pending()`. The edits are queued by the capture triggers of the
-- feature tables (geoservices.store.edits.capture), whoever makes them.
-- @module geoservices.store.edits.queue
local attachment_edits = require "geoservices.store.edits.attachment_edits"
local conflicts = require "geoservices.store.edits.conflicts"
local edit_list = require "geoservices.store.edits.edit_list"
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"
local outgoing = require "geoservices.store.edits.outgoing"
local schema = require "geoservices.store.file.schema"
local shared = require "geoservices.store.shared"
local unrepresentable = require "geoservices.store.file.unrepresentable"

local db_error, normalize_gid, now = shared.db_error, shared.normalize_gid, shared.now

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
-- give it, JSON columns decoded, the base as a feature; `what` names such a
-- row in errors. The feature of a queued add or update not sent yet is read
-- from the feature table (geoservices.store.edits.outgoing), with `changes`
-- (false: its values all came back to its base); one in flight holds what
-- was sent, and must hold a feature.
local function edit_row(st, r, what, tbl)
  local out = {
    kind = "feature", seq = r.seq, op = r.op, layer = r.layer_id, globalId = r.global_id, attempt = r.attempt_id,
    created = r.created_at, code = r.code, description = r.description, failed = r.failed_at,
    detected = r.detected_at, outcome = r.outcome,
  }
  local spec = st.layers[r.layer_id]
  local why
  local base, bad_base = outgoing.base(spec, r.base)
  if base == false then why = ("its base is %s"):format(bad_base) end
  out.base = base or nil
  if base and spec and spec.geometry_column then -- the server's Z and M a 2D column cannot hold (issue 41)
    base.geometry = unrepresentable.with_server_ordinates(st, spec, r.global_id,
      base.geometry)
  end
  local server, bad_server = decode_column(r.server)
  if bad_server then why = ("its server is %s"):format(bad_server) end
  out.server = server
  local queued = tbl == "gpkgext_geoservices_edits"
  if not why and queued and not spec then
    why = ("its layer %s is not in this store"):format(tostring(r.layer_id))
  elseif not why and queued and r.attempt_id == nil and SENDS_FEATURE[r.op] then
    local feature, changes_or_why, err_or_rule = outgoing.feature(st, spec, r.op, r.global_id, out.base)
    if not feature and err_or_rule then return nil, err_or_rule end
    if feature then
      out.feature, out.changes, out.refused = feature, changes_or_why, err_or_rule
    else
      why = changes_or_why
    end
  else
    local value, bad = decode_column(r.feature)
    if bad then why = ("its feature is %s"):format(bad) end
    out.feature = value
    if not why and queued and SENDS_FEATURE[r.op]
      and (type(out.feature) ~= "table" or type(out.feature.attributes) ~= "table") then
      why = ("it is an %s without a feature ({\"attributes\": {...}}) to send"):format(r.op)
    end
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
  return edit_list.of(list, what) -- a one-line summary in a REPL (geoservices.store.edits.edit_list)
end
queue.edit_rows = edit_rows -- the conflicts' too (geoservices.store.edits.resolve)

--- The methods of a replica store (geoservices.store) that read its
-- queue of local edits and record the synchronizations that send them.
-- @type Store

--- The local edits not yet committed by the server, in order:
-- `{seq =, op = "add"|"update"|"delete", layer =, globalId =, feature =, base =, attempt =, created =}`.
-- `feature` is what is sent (geoservices.store.edits.outgoing: an add's values,
-- an update's changed attributes and geometry), read from the feature table
-- until the edit is sent, then what was sent; `base` the feature
-- (`{attributes =, geometry =}`) as it was before the first unsent local
-- change of its GlobalID: an update's and a delete's (nor an edit queued by
-- a store of format 1); an add's only once it went back to the queue after a
-- request: the feature that request carried, which the server may still apply.
-- @return the list, or nil, err: kind "io", code "damaged" when a row cannot be decoded (the
--   message names the file and the row; nothing is changed)
function Store:pending()
  local rows, msg, code = self:_db():rows("SELECT * FROM gpkgext_geoservices_edits ORDER BY seq")
  if not rows then return nil, db_error(self.path, msg, code) end
  return edit_rows(self, rows, "queued edit", "gpkgext_geoservices_edits")
end

--- The local edits the server rejected, with its `code` and `description`
-- (and `kind` "feature", `seq`, `op`, `layer`, `globalId`, `feature`, `base`, `attempt`, `failed`
-- time), then the attachment edits it rejected (`kind` "attachment", `seq`, `op`, `layer`,
-- `globalId`, `parentGlobalId`, `name`, `code`, `description`, `failed`:
-- geoservices.store.edits.attachment_edits). Each stays until it is discarded (or, for an
-- attachment, edited again).
-- @return the list, or nil, err (as @{pending})
function Store:failed()
  local rows, msg, code = self:_db():rows("SELECT * FROM gpkgext_geoservices_failed_edits ORDER BY seq")
  if not rows then return nil, db_error(self.path, msg, code) end
  local list, err = edit_rows(self, rows, "failed edit", "gpkgext_geoservices_failed_edits")
  if not list then return nil, err end
  for _, a in ipairs(attachment_edits.failed(self)) do list[#list + 1] = a end
  return list
end

-- An add whose GlobalID is a GUID spelled otherwise than "{UPPER}" (typed
-- in QGIS or GDAL) gets the canonical spelling in its table and the queue,
-- uncaptured; when another feature has that one, the rule refuses it.
local function canonical_gid(st, r)
  local spec = st.layers[r.layer_id]
  if r.op ~= "add" or not spec or r.global_id:match(outgoing.GUID) then return end
  local canonical = normalize_gid(r.global_id)
  if canonical == r.global_id or not canonical:match(outgoing.GUID) then return end
  local done = st:_uncaptured(function()
    local t, g = (spec.table:gsub('"', '""')), (spec.globalid:gsub('"', '""'))
    local ok, m, c = st.db:run(('UPDATE "%s" SET "%s" = ?1 WHERE %s'):format(t, g,
      schema.gid_match('"' .. g .. '"', "?2")), canonical, r.global_id)
    if ok then
      ok, m, c = st.db:run("UPDATE gpkgext_geoservices_edits SET global_id = ? WHERE seq = ?", canonical, r.seq)
    end
    if not ok then return nil, db_error(st.path, m, c) end
    return true
  end)
  if done then r.global_id = canonical end
end

--- Records an attempt before it is sent: the queued edits not yet in
-- flight (or those of `opts.seqs`) are marked with it, what each sends is
-- kept with it (read from the feature table now), and its GlobalIDs kept.
-- An update whose values all came back to its base is dropped from the
-- queue: it has nothing to send. An edit the server could not take (a rule
-- of geoservices.store.edits.outgoing) is left out and stays queued, unsent; an
-- add whose GlobalID is a GUID in another spelling (lower case, no braces)
-- gets the canonical one. For the synchronization half.
-- @tparam[opt] table opts `seqs` (the queue rows sent), `params` (kept as JSON), `status_url`, `into` (the
--   id of the attempt in hand, Store:attempt(): the rows join it and its parameters become `params`,
--   its own rows staying in it: geoservices.store.sync.held)
-- @treturn[1] integer the attempt id
-- @treturn[1] table the queue rows it holds (as @{pending})
-- @treturn[1] table the edits refused: `{seq, op, layer, layer_name, globalId, rule}`
-- @return[2] nil
-- @treturn[2] table err: as @{pending} (a damaged row: no attempt is recorded), "busy", "io"
function Store:begin_attempt(opts)
  opts = opts or {}
  return self:transaction(function()
    local db = self.db
    local rows, msg, code = db:rows("SELECT * FROM gpkgext_geoservices_edits WHERE attempt_id IS NULL ORDER BY seq")
    if not rows then return nil, db_error(self.path, msg, code) end
    local wanted
    if opts.seqs then
      wanted = {}
      for _, s in ipairs(opts.seqs) do wanted[s] = true end
    end
    local chosen, gids, refused = {}, json.array(), {}
    for _, r in ipairs(rows) do
      if not wanted or wanted[r.seq] then
        canonical_gid(self, r)
        local row, err = edit_row(self, r, "queued edit", "gpkgext_geoservices_edits")
        if not row then return nil, err end -- nothing recorded: the edits stay queued, unsent
        if row.refused then
          local spec = self.layers[r.layer_id]
          refused[#refused + 1] = { seq = r.seq, op = r.op, layer = r.layer_id, layer_name = spec and spec.table,
                                    globalId = r.global_id, rule = row.refused }
        elseif row.changes == false then
          local ok, m, c = db:run("DELETE FROM gpkgext_geoservices_edits WHERE seq = ?", r.seq)
          if not ok then return nil, db_error(self.path, m, c) end
        else
          chosen[#chosen + 1] = row
          gids[#gids + 1] = r.global_id
        end
      end
    end
    local changes, id, icode
    if opts.into then
      -- joined to the attempt in hand (its rows held: geoservices.store.sync.held), its parameters replaced
      local found, m, c = db:rows("SELECT global_ids FROM gpkgext_geoservices_attempts WHERE attempt_id = ?", opts.into)
      if not found then return nil, db_error(self.path, m, c) end
      if not found[1] then return nil, errors.new("io", ("replica store %s: attempt %s is gone"):format(self.path,
        tostring(opts.into))) end
      local before = decode_column(found[1].global_ids)
      for _, g in ipairs(type(before) == "table" and before or {}) do gids[#gids + 1] = g end
      changes, m, c = db:run("UPDATE gpkgext_geoservices_attempts SET state = 'sending', status_url = NULL, "
        .. "global_ids = ?, params = ? WHERE attempt_id = ?", json.encode(gids),
        opts.params and json.encode(opts.params) or nil, opts.into)
      if not changes then return nil, db_error(self.path, m, c) end
      id = opts.into
    else
      changes, id, icode = db:run("INSERT INTO gpkgext_geoservices_attempts (started_at, state, status_url, "
        .. "global_ids, params) VALUES (?, 'sending', ?, ?, ?)", now(), opts.status_url, json.encode(gids),
        opts.params and json.encode(opts.params) or nil)
      if not changes then return nil, db_error(self.path, id, icode) end
    end
    for _, r in ipairs(chosen) do
      local ok, m, c = db:run("UPDATE gpkgext_geoservices_edits SET attempt_id = ?, feature = ? WHERE seq = ?", id,
        r.feature ~= nil and json.encode(r.feature) or nil, r.seq)
      if not ok then return nil, db_error(self.path, m, c) end
      r.attempt, r.changes = id, nil
    end
    return id, chosen, refused
  end)
end

--- Adds the async job's status address to an attempt.
-- @int attempt_id the attempt
-- @string status_url the address
-- @return true, or nil, err
function Store:attempt_job(attempt_id, status_url)
  local ok, msg, code = self:_db():run("UPDATE gpkgext_geoservices_attempts SET status_url = ?, state = 'job' "
    .. "WHERE attempt_id = ?", status_url, attempt_id)
  if not ok then return nil, db_error(self.path, msg, code) end
  return true
end

--- The attempt in flight, if any: `{id =, started =, state =, status_url =, globalIds =, params =}`.
-- @return the attempt, false when there is none, or nil, err: kind "io", code "damaged" when its
--   record cannot be decoded (the message names the file and the attempt; its edits stay queued,
--   in flight, until the record is repaired)
function Store:attempt()
  local rows, msg, code = self:_db():rows("SELECT * FROM gpkgext_geoservices_attempts ORDER BY attempt_id DESC LIMIT 1")
  if not rows then return nil, db_error(self.path, msg, code) end
  local r = rows[1]
  if not r then return false end
  local attempt = { id = r.attempt_id, started = r.started_at, state = r.state, status_url = r.status_url }
  for column, field in pairs{ global_ids = "globalIds", params = "params" } do
    local value, why = decode_column(r[column])
    if why then
      local err = damaged(self, ("synchronization attempt %d"):format(r.attempt_id), ("its %s is %s"):format(
        column, why), ("the row attempt_id = %d of gpkgext_geoservices_attempts (a NULL %s is read as none)"):format(
        r.attempt_id, column))
      err.attempt = r.attempt_id
      return nil, err
    end
    attempt[field] = value
  end
  return attempt
end

--- Keeps a local edit that lost to the server's version in
-- geoservices_conflicts (internal: end_attempt and the commit of a download).
-- @param st the store
-- @tparam table k `seq`, `layer`, `op`, `gid`, `feature` and `base` (JSON text: the local
--   version, its base), `server` (JSON text), `description`, `attempt`, `outcome` (default "server_kept"),
--   `kind`, `policy` (geoservices.store.edits.conflicts.keep)
-- @return true, or nil, msg, code
function queue.keep_conflict(st, k)
  return conflicts.keep(st, k)
end

-- An edit that goes back to the queue meets the edit of its feature made
-- while it was in flight (the triggers queued that one apart): the two
-- become one, as the triggers fold edits ("requeued newer" -> the op the
-- requeued row keeps, false when both go).
local FOLD = {
  ["add update"] = "add", ["add delete"] = false, ["update update"] = "update",
  ["update delete"] = "delete", ["delete add"] = "update",
}

-- An add keeps what it carried as its base (the first time it goes back):
-- that send may still be applied late, and the add, joined meanwhile to an
-- edit of its feature, then goes with other values (geoservices.sync.verify's
-- "applied_before": the rest goes as an update from that base).
local function requeue(st, r)
  local db = st.db
  local ok, m, c = db:run("UPDATE gpkgext_geoservices_edits SET attempt_id = NULL, feature = NULL, base = CASE WHEN "
    .. "op = 'add' AND base IS NULL THEN feature ELSE base END WHERE seq = ?", r.seq)
  if not ok then return nil, m, c end
  local newer
  newer, m, c = db:rows("SELECT seq, op FROM gpkgext_geoservices_edits WHERE layer_id = ? AND global_id = ? AND "
    .. "attempt_id IS NULL AND seq > ? ORDER BY seq", r.layer_id, r.global_id, r.seq)
  if not newer then return nil, m, c end
  local n = newer[1]
  local fold = n and FOLD[r.op .. " " .. n.op]
  if fold == nil then return true end
  ok, m, c = db:run("DELETE FROM gpkgext_geoservices_edits WHERE seq = ?", n.seq)
  if ok and fold == false then ok, m, c = db:run("DELETE FROM gpkgext_geoservices_edits WHERE seq = ?", r.seq) end
  if ok and fold then ok, m, c = db:run("UPDATE gpkgext_geoservices_edits SET op = ? WHERE seq = ?", fold, r.seq) end
  return ok, m, c
end

--- Resolves an attempt (in the transaction that commits its result), each
-- queue row of it by `outcomes[seq]`:
--
-- * `true`: applied by the server; it leaves the queue;
-- * `{code =, description =}`: rejected; it moves to the failed edits (@{failed});
-- * `{conflict = true, server = <feature table>, description =}`: the server holds other values
--   (another replica's newer edit); it moves to the conflicts (`st:conflicts()`), never sent again;
-- * nil: not applied (or not known to be); it returns to the queue, unsent, and goes with the
--   next synchronization (folded with an edit of its feature made meanwhile, and sending what
--   the feature table holds then);
-- * `"update"`: an add an earlier send of it made on the server (applied late), while this one
--   carried an edit joined to it since: it returns to the queue as an update from what that
--   earlier send carried (its base), merged with the server's version before it goes.
--
-- The attempt is forgotten; with `opts.keep_unsettled`, the rows without an
-- outcome stay in it instead (read back right after a sync's own failure:
-- the server may still apply them, the next sync reads them again), and
-- the attempt with them; with `opts.keep_attempt` the attempt stays even
-- without rows (it carries an uploaded edits file whose outcome is not known
-- yet: geoservices.sync.attempt). With `opts.keep_seqs` (a set of seqs)
-- those rows stay in it whatever else goes (rows held while the sync sent
-- others: geoservices.store.sync.held), and `opts.params` become the
-- parameters of the attempt that stays.
-- @int attempt_id the attempt
-- @tparam table outcomes seq -> outcome
-- @tparam[opt] table opts `keep_unsettled`, `keep_attempt`, `keep_seqs`, `params`
-- @return true, or nil, err
function Store:end_attempt(attempt_id, outcomes, opts)
  local keep = opts and opts.keep_unsettled
  local keep_seqs = opts and opts.keep_seqs
  if (keep or keep_seqs) and opts.keep_attempt then keep = "some" end
  return self:transaction(function()
    local db = self.db
    local rows, msg, code = db:rows("SELECT * FROM gpkgext_geoservices_edits WHERE attempt_id = ? ORDER BY seq",
      attempt_id)
    if not rows then return nil, db_error(self.path, msg, code) end
    for _, r in ipairs(rows) do
      local o = outcomes and outcomes[r.seq]
      local ok, m, c = true, nil, nil
      if type(o) == "table" and o.conflict then
        local server = o.server ~= nil and json.encode(o.server) or nil
        ok, m, c = queue.keep_conflict(self, { seq = r.seq, layer = r.layer_id, op = r.op, gid = r.global_id,
          feature = r.feature, base = r.base, server = server, description = o.description, attempt = attempt_id,
          outcome = o.outcome })
      elseif type(o) == "table" then
        ok, m, c = db:run("INSERT OR REPLACE INTO gpkgext_geoservices_failed_edits (seq, layer_id, op, "
          .. "global_id, feature, base, code, description, attempt_id, failed_at) "
          .. "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", r.seq, r.layer_id, r.op, r.global_id, r.feature, r.base,
          math.tointeger(o.code), o.description, attempt_id, now())
      end
      local left = false
      if ok and (o == true or type(o) == "table") then
        ok, m, c = db:run("DELETE FROM gpkgext_geoservices_edits WHERE seq = ?", r.seq)
      elseif ok and o == "update" then
        ok, m, c = db:run("UPDATE gpkgext_geoservices_edits SET op = 'update', base = COALESCE(base, feature) "
          .. "WHERE seq = ?",
          r.seq)
        r.op = "update"
        if ok then ok, m, c = requeue(self, r) end
      elseif ok and (keep or (keep_seqs and keep_seqs[r.seq])) then
        left = true
      elseif ok then
        ok, m, c = requeue(self, r)
      end
      if not ok then return nil, db_error(self.path, m, c) end
      if left then keep = "some" end
    end
    if keep == "some" then
      if not (opts and opts.params) then return true end
      local ok, m, c = db:run("UPDATE gpkgext_geoservices_attempts SET params = ?, status_url = NULL "
        .. "WHERE attempt_id = ?", json.encode(opts.params), attempt_id)
      if not ok then return nil, db_error(self.path, m, c) end
      return true
    end
    local ok, m, c = db:run("DELETE FROM gpkgext_geoservices_attempts WHERE attempt_id = ?", attempt_id)
    if not ok then return nil, db_error(self.path, m, c) end
    return true
  end)
end

return queue
