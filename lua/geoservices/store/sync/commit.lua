--- The commit half of a store's synchronization: each sent edit's fate from
-- the verdicts (the answer's, then those read back from the server), and
-- the one transaction that keeps a result. Internal (geoservices.store.sync).
-- @module geoservices.store.sync.commit
-- @local
local attachments = require "geoservices.store.file.attachments"
local download_conflicts = require "geoservices.store.edits.conflicts"
local late = require "geoservices.store.sync.late"
local integrity = require "geoservices.store.sync.integrity"
local json = require "geoservices.base.json"
local outcome = require "geoservices.sync.outcome"
local relations = require "geoservices.store.file.relations"
local result_file = require "geoservices.store.sync.result_file"
local shared = require "geoservices.store.shared"
local schema = require "geoservices.store.file.schema"

local commit = {}

local normalize = shared.normalize_gid

local function feature_key(layer, gid)
  return ("%s|%s"):format(tostring(layer), normalize(tostring(gid)))
end
commit.feature_key = feature_key

--- The key of a queue row in the verdict tables.
function commit.row_key(r)
  return outcome.key(r.op, r.layer, "feature", r.globalId)
end

--- The verification entries of queue rows (geoservices.sync.verify).
function commit.entries(rows)
  local list = {}
  for _, r in ipairs(rows) do
    list[#list + 1] = { key = commit.row_key(r), layer = r.layer, op = r.op, globalId = r.globalId,
                        feature = r.feature, base = r.base }
  end
  return list
end

--- The GlobalID and OBJECTID field of each layer, for verification.
function commit.fields(st)
  local fields = {}
  for id, spec in pairs(st.layers) do fields[id] = { global_id = spec.globalid, object_id = spec.oid } end
  return fields
end

--- Each row's fate for Store:end_attempt from verdicts: true (applied), a
-- rejection `{code =, description =}`, a conflict `{conflict = true, ...}`,
-- "update" (an add an earlier send of it made: applied, and what was joined
-- to it since goes as an update of it), or nil (not applied, or unknown:
-- back in the queue). Also the lists the result reports.
function commit.outcomes(rows, verdicts)
  local by_seq, rejected, conflicts, applied = {}, {}, {}, 0
  for _, r in ipairs(rows) do
    local v = verdicts[commit.row_key(r)]
    if v == outcome.APPLIED then
      by_seq[r.seq] = true
      applied = applied + 1
    elseif v == outcome.APPLIED_BEFORE and r.op == "add" then
      by_seq[r.seq] = "update"
      applied = applied + 1
    elseif type(v) == "table" and v.conflict then
      by_seq[r.seq] = v
      conflicts[#conflicts + 1] = { seq = r.seq, layer = r.layer, op = r.op, globalId = r.globalId,
                                    sent = r.feature, server = v.server, description = v.description }
    elseif type(v) == "table" then
      by_seq[r.seq] = { code = v.code, description = v.description }
      rejected[#rejected + 1] = r
    end
  end
  return by_seq, { applied = applied, rejected = rejected, conflicts = conflicts }
end

-- The store's own error of a failed SQLite call (geoservices.store.shared).
local function db_fail(st, msg, code) return shared.db_error(st.path, msg, code) end
commit.db_fail = db_fail

local function ident(s) return '"' .. s:gsub('"', '""') .. '"' end

-- Local adds the server took get its OBJECTIDs, in their column of their
-- own (NULL until now; negative in a store rebuilt from format 2 before; a
-- number a QGIS split copied into a store made before the capture emptied it).
local function take_object_ids(st, new_oids)
  for _, o in ipairs(new_oids) do
    local spec = st.layers[o[1]]
    if spec and spec.oid then
      -- whatever the row held (nothing, a negative number of format 2, a number copied by a split) gives way
      local done, m, c = st.db:run(("UPDATE %s SET %s = ?1 WHERE %s AND %s IS NOT ?1"):format(
        ident(spec.table), ident(spec.oid), schema.gid_match(ident(spec.globalid), "?2"), ident(spec.oid)),
        o[3], o[2])
      if not done and c ~= "constraint" then return nil, db_fail(st, m, c) end
    end
  end
  return true
end

-- The prefix of the server's enumerations ("esri", or the interface's
-- "svc"), kept so later requests speak it.
local function record_prefix(st, rep, transport_type)
  local prefix = type(transport_type) == "string" and transport_type:match("^(%a-)[Tt]ransport[Tt]ype")
  if not prefix or prefix == "" then return true end
  local info = type(rep.info) == "table" and rep.info or {}
  if info.enum_prefix == prefix then return true end
  info.enum_prefix = prefix
  local done, m, c = st.db:run("UPDATE gpkgext_geoservices_replica SET info = ? WHERE id = 1", json.encode(info))
  if not done then return nil, db_fail(st, m, c) end
  return true
end

--- Settles an attempt whose result will not come (verified by reading the
-- server): the rows' fates and the OBJECTIDs of the adds found; the
-- generations do not move (no data came).
-- `opts.keep_unsettled`: the rows without a fate stay in the attempt; `opts.keep_attempt`: the attempt
-- stays even without rows (Store:end_attempt).
function commit.verified(st, attempt_id, by_seq, object_ids, rows, summary, opts)
  -- the library's own writes: never captured as local edits
  return st:_uncaptured(function()
    local oids = {}
    for _, r in ipairs(rows) do
      local oid = object_ids[commit.row_key(r)]
      if oid then oids[#oids + 1] = { r.layer, normalize(r.globalId), oid } end
    end
    local ok, err = take_object_ids(st, oids)
    if not ok then return nil, err end
    -- an update applied late over another crew's change a download brought meanwhile
    summary.late, err = late.landed(st, attempt_id, rows, by_seq)
    if not summary.late then return nil, err end
    -- the server's generation may have moved without the store learning it
    local rep
    rep, err = st:replica()
    if not rep then return nil, err end
    local m, c
    ok, m, c = integrity.record_generation(st, rep, { unknown = true, lost_at = opts and opts.lost_at })
    if not ok then return nil, db_fail(st, m, c) end
    ok, err = st:end_attempt(attempt_id, by_seq, opts)
    if not ok then return nil, err end
    if #rows == 0 then return true end
    return st:log{ operation = "sync", outcome = "verified", uploaded = summary.applied,
      failed = #summary.rejected, message = ("%d edit(s) read back from the server: %d applied, %d rejected, "
        .. "%d conflict(s), the rest queued again"):format(#rows, summary.applied, #summary.rejected,
        #summary.conflicts) }
  end)
end

-- The steps of commit.result, in their order.

-- The generations to commit (geoservices.sync.attempt's rule: nil for an
-- upload-only answer, they stay), a perLayer replica's from its replica's.
local function generations_to_keep(c, rep)
  local gens = c.gens
  if not gens then return nil end
  gens = { replicaServerGen = gens.replicaServerGen, layerServerGens = gens.layerServerGens }
  if rep.syncModel == "perLayer" and not gens.layerServerGens and gens.replicaServerGen then
    gens.layerServerGens = {}
    for _, id in ipairs(rep.layers) do
      gens.layerServerGens[#gens.layerServerGens + 1] = { id = id, serverGen = gens.replicaServerGen }
    end
    gens.replicaServerGen = nil
  end
  return gens
end

-- The result file applied (attachments and related records linked again),
-- and the object ids the server gave the adds: the answer's and the
-- file's. Returns those ids and the count of records applied, or nil, err.
local function apply_download(st, c)
  local new_oids = {}
  for _, r in ipairs(c.rows) do
    local oid = c.object_ids and c.object_ids[commit.row_key(r)]
    if oid then new_oids[#new_oids + 1] = { r.layer, normalize(r.globalId), oid } end
  end
  if not c.file then return new_oids, 0 end
  local n, aerr = result_file.apply(st, c.file, function(kind, layer, value)
    if kind == "add_result" and type(value) == "table" and (value.success == true or value.success == "true")
      and math.tointeger(value.objectId) and type(value.globalId) == "string" then
      new_oids[#new_oids + 1] = { layer, normalize(value.globalId), math.tointeger(value.objectId) }
    end
  end, c.on_fill)
  if not n then return nil, aerr end
  local linked, lerr = attachments.relink(st)
  if linked then linked, lerr = relations.relink(st) end
  if not linked then return nil, lerr end
  return new_oids, n
end

-- The local edits whose feature the server's state replaced: those the
-- download touched, and in a snapshot layer every one (a sent row of a
-- snapshot layer with no verdict is settled so, in by_seq).
local function overwritten_edits(c, before, snapshot)
  local overwritten, by_seq = {}, c.by_seq
  for _, q in ipairs(before) do
    local k = feature_key(q.layer_id, q.global_id)
    if c.touched[k] or (snapshot[q.layer_id] and q.attempt_id == nil) then
      overwritten[#overwritten + 1] = { seq = q.seq, layer = q.layer_id, op = q.op, globalId = q.global_id,
                                        sent = q.attempt_id == c.attempt_id }
    end
  end
  for _, r in ipairs(c.rows) do
    if snapshot[r.layer] and by_seq[r.seq] == nil then
      by_seq[r.seq] = true -- its feature was replaced by the server's data
      overwritten[#overwritten + 1] = { seq = r.seq, layer = r.layer, op = r.op, globalId = r.globalId,
                                        sent = true }
    end
  end
  return overwritten
end

-- The replica's state after the result: its generations (only with the
-- data they count), the generation the copy check knows, the result's
-- address prefix, the attempt ended with each edit's fate, a line of the log.
local function record_state(st, rep, c, gens, downloaded)
  local result = c.result
  if gens then
    local g, gerr = st:set_generations(gens)
    if not g then return nil, gerr end
  end
  -- edits still provisional (held) may move the server's generation by our own late request
  -- (and a request of this sync whose answer was lost, repeated, may move it late: result.lost_at)
  local how = c.held and { unknown = true }
    or gens and { committed = true }
    or { seen = { replicaServerGen = result.replicaServerGen, layerServerGens = result.layerServerGens } }
  how.lost_at = math.tointeger(result.lost_at)
  local recorded, rm, rc = integrity.record_generation(st, rep, how)
  if not recorded then return nil, db_fail(st, rm, rc) end
  local p, perr = record_prefix(st, rep, result.transportType)
  if not p then return nil, perr end
  if c.attempt_id then
    local e, eerr = st:end_attempt(c.attempt_id, c.by_seq, { keep_seqs = c.held and c.held.seqs,
      keep_attempt = c.keep_attempt, params = c.held and c.held.params })
    if not e then return nil, eerr end
  end
  local current = gens or {}
  local l, lerr = st:log{ operation = "sync", outcome = "ok", uploaded = c.summary.applied,
    failed = #c.summary.rejected, downloaded = downloaded, replicaServerGen = current.replicaServerGen,
    layerServerGens = current.layerServerGens }
  if not l then return nil, lerr end
  return true
end

--- The one transaction that commits a result: snapshot layers cleared, the
-- downloaded changes applied, the generations, each sent edit's fate, the
-- local edits the server's state overwrote kept as conflicts
-- (geoservices.store.edits.conflicts), the log.
-- @param st the store
-- @param rep its replica
-- @tparam table c `attempt_id`, `rows`, `result`, `file` (the result file, or nil), `touched`
--   (features the download changed), `directions`, `on_fill`, `by_seq`, `summary`, `object_ids`, `gens`
--   (the generations to commit: geoservices.sync.attempt's rule; nil: they stay), `held` (`seqs`: the
--   rows held in the attempt, not sent by this request, which stay there, `params`: the attempt's
--   parameters then; the server's generation is marked unknown: geoservices.store.sync.held),
--   `keep_attempt` (the attempt stays even without rows: Store:end_attempt)
function commit.result(st, rep, c)
  local result = c.result
  local snapshot = {}
  if result.response ~= "no_edits" then
    for id, dir in pairs(c.directions) do
      if dir == "snapshot" then snapshot[id] = true end
    end
  end
  local gens = generations_to_keep(c, rep)
  local overwritten, kept
  -- one transaction, the library's own writes never captured as local edits
  local ok, err = st:_uncaptured(function()
    local before, berr = download_conflicts.before(st, c.attempt_id)
    if not before then return nil, berr end
    for id in pairs(snapshot) do
      local cleared, cerr = st:clear_layer(id)
      if not cleared then return nil, cerr end
    end
    local new_oids, downloaded = apply_download(st, c)
    if not new_oids then return nil, downloaded end
    local taken, terr = take_object_ids(st, new_oids)
    if not taken then return nil, terr end
    -- the server's state wins: the local edits it overwrote are kept, and named
    local kerr
    kept, kerr = download_conflicts.after(st, before, { attempt_id = c.attempt_id, by_seq = c.by_seq,
                                                        touched = c.touched, key = feature_key,
                                                        held = c.held and c.held.seqs })
    if not kept then return nil, kerr end
    overwritten = overwritten_edits(c, before, snapshot)
    local recorded, rerr = record_state(st, rep, c, gens, downloaded)
    if not recorded then return nil, rerr end
    result.applied = downloaded
    return true
  end)
  if c.file then os.remove(c.file) end
  if not ok then return nil, err end
  result.uploaded, result.rejected, result.overwritten = c.summary.applied, c.summary.rejected, overwritten
  result.conflicts = c.summary.conflicts
  for _, k in ipairs(kept) do result.conflicts[#result.conflicts + 1] = k end
  result.output = nil
  return result
end

return commit
