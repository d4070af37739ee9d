--- The synchronization half of the replica store: `store:sync(client, opts)`
-- and `store:unregister(client)`.
--
-- A sync takes the store's OS lock (`<store>.lock`: a second process gets
-- kind "busy" at once, or waits `opts.lock_timeout` seconds), then:
--
-- 1. resolves an attempt left in flight by an earlier sync that crashed or
--    failed while its outcome was unknown: re-attaches to its job when its
--    status address was recorded, else re-sends its edits (`resend`: adds
--    and deletes found already applied count as applied);
-- 2. records a new attempt holding the queued edits (their GlobalIDs,
--    durable before anything is sent), the job's address as soon as it is
--    known;
-- 3. sends synchronizeReplica with the edits and the store's generations
--    (perReplica replicaServerGen, perLayer syncLayers), upload first;
-- 4. applies the result in ONE transaction: snapshot layers cleared, the
--    downloaded changes through the C fast path (read from a temporary
--    file chunk by chunk), the new generations, each sent edit's outcome
--    (applied: out of the queue; rejected: into the failed edits with the
--    server's code and description; unanswered: back in the queue), and a
--    line of the sync log. The server's state wins: a queued local edit of
--    a feature the download changed is dropped, and every local edit of a
--    feature the download changed is reported in `result.overwritten`.
-- @module geoservices.store.sync
-- @local
local errors = require "geoservices.errors"
local json = require "geoservices.json"
local paths = require "geoservices.store.paths"
local reconcile = require "geoservices.sync.reconcile"
local replica_mod = require "geoservices.sync.replica"
local store = require "geoservices.store"
local sync = require "geoservices.sync"

local M = {}

local normalize = store.normalize_global_id

local file_exists = paths.exists

local function temp_output(st)
  return paths.beside(st.path, "sync", ".json")
end

local function key(op, layer, gid)
  return ("%s|%s|%s"):format(op, tostring(layer), normalize(tostring(gid)))
end

local function feature_key(layer, gid)
  return ("%s|%s"):format(tostring(layer), normalize(tostring(gid)))
end

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
  local params = { replicaID = rep.replicaID, syncDirection = direction, returnIdsForAdds = true }
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

local function db_fail(st, msg, code)
  return errors.new(code == "busy" and "busy" or "io", ("replica store %s: %s"):format(st.path, msg),
    { code = code })
end

-- The one transaction that commits a result: snapshot layers cleared, the
-- downloaded changes applied, the generations, the attempt's outcomes, the
-- queued edits the server's state overwrote, the log.
local function commit(st, rep, attempt_id, rows, result, file, touched, directions, on_fill)
  local failed, unanswered = {}, {}
  for _, f in ipairs(result.failed_edits or {}) do
    if f.target ~= "attachment" then failed[key(f.op, f.layer, f.globalId)] = f end
  end
  for _, u in ipairs(result.unanswered or {}) do unanswered[key(u.op, u.layer, u.globalId)] = true end
  local outcomes, uploaded, rejected = {}, 0, {}
  for _, r in ipairs(rows) do
    local k = key(r.op, r.layer, r.globalId)
    local f = failed[k]
    if f then
      outcomes[r.seq] = { code = f.code, description = f.description }
      rejected[#rejected + 1] = r
    elseif not unanswered[k] then
      outcomes[r.seq] = true
      uploaded = uploaded + 1
    end
  end
  local snapshot = {}
  if result.response ~= "no_edits" then
    for id, dir in pairs(directions) do
      if dir == "snapshot" then snapshot[id] = true end
    end
  end
  local gens = { replicaServerGen = result.replicaServerGen, layerServerGens = result.layerServerGens }
  if rep.syncModel == "perLayer" and not gens.layerServerGens and gens.replicaServerGen then
    gens.layerServerGens = {}
    for _, id in ipairs(rep.layers) do gens.layerServerGens[#gens.layerServerGens + 1] =
      { id = id, serverGen = gens.replicaServerGen } end
    gens.replicaServerGen = nil
  end
  local overwritten = {}
  local ok, err = st:transaction(function()
    local db = st.db
    for id in pairs(snapshot) do
      local cleared, cerr = st:clear_layer(id)
      if not cleared then return nil, cerr end
    end
    local new_oids = {}
    local downloaded = 0
    if file then
      local n, aerr = store._apply_file(st, file, function(kind, layer, value)
        if kind == "add_result" and type(value) == "table" and (value.success == true or value.success == "true")
          and math.tointeger(value.objectId) and type(value.globalId) == "string" then
          new_oids[#new_oids + 1] = { layer, normalize(value.globalId), math.tointeger(value.objectId) }
        end
      end, on_fill)
      if not n then return nil, aerr end
      downloaded = n
    end
    -- local adds the server took get its OBJECTIDs
    for _, o in ipairs(new_oids) do
      local spec = st.layers[o[1]]
      if spec and spec.oid then
        local done, m, c = db:run(("UPDATE %s SET %s = ? WHERE %s = ? AND %s < 0"):format(
          '"' .. spec.table:gsub('"', '""') .. '"', '"' .. spec.oid:gsub('"', '""') .. '"',
          '"' .. spec.globalid:gsub('"', '""') .. '"', '"' .. spec.oid:gsub('"', '""') .. '"'),
          o[3], o[2])
        if not done and c ~= "constraint" then return nil, db_fail(st, m, c) end
      end
    end
    -- the server's state wins: queued edits of features the download changed
    local queue, qm, qc = db:rows("SELECT seq, layer_id, op, global_id, attempt_id FROM geoservices_edits")
    if not queue then return nil, db_fail(st, qm, qc) end
    for _, q in ipairs(queue) do
      local k = feature_key(q.layer_id, q.global_id)
      local dropped = snapshot[q.layer_id] and q.attempt_id == nil
      if touched[k] or dropped then
        overwritten[#overwritten + 1] = { seq = q.seq, layer = q.layer_id, op = q.op, globalId = q.global_id,
                                          sent = q.attempt_id == attempt_id }
        if q.attempt_id == nil then
          local d, m, c = db:run("DELETE FROM geoservices_edits WHERE seq = ?", q.seq)
          if not d then return nil, db_fail(st, m, c) end
        end
      end
    end
    for _, r in ipairs(rows) do
      if snapshot[r.layer] and outcomes[r.seq] == nil then
        outcomes[r.seq] = true -- its feature was replaced by the server's data
        overwritten[#overwritten + 1] = { seq = r.seq, layer = r.layer, op = r.op, globalId = r.globalId,
                                          sent = true }
      end
    end
    local g, gerr = st:set_generations(gens)
    if not g then return nil, gerr end
    if attempt_id then
      local e, eerr = st:end_attempt(attempt_id, outcomes)
      if not e then return nil, eerr end
    end
    local l, lerr = st:log{ operation = "sync", outcome = "ok", uploaded = uploaded, failed = #rejected,
      downloaded = downloaded, replicaServerGen = gens.replicaServerGen, layerServerGens = gens.layerServerGens }
    if not l then return nil, lerr end
    result.applied = downloaded
    return true
  end)
  if file then os.remove(file) end
  if not ok then return nil, err end
  result.uploaded, result.rejected, result.overwritten = uploaded, rejected, overwritten
  result.output, result.result_url = nil, result.result_url
  return result
end

-- A failure that proves the server applied none of the attempt's edits.
local function nothing_applied(err)
  return type(err) == "table" and not err.ambiguous and not err.edits_applied and not err.synchronized
end

local function rows_of(st, attempt_id)
  local all, err = st:pending()
  if not all then return nil, err end
  local rows = {}
  for _, r in ipairs(all) do
    if r.attempt == attempt_id then rows[#rows + 1] = r end
  end
  return rows
end

-- A result whose only fault is edits the server did not answer: the
-- replica was synchronized; those edits go back to the queue.
local function accept_unanswered(result, err)
  if not result and type(err) == "table" and err.unanswered and err.result then
    err.result.unanswered = err.unanswered
    return err.result
  end
  return result, err
end

local function sub_opts(opts, tmp, on_change)
  return { output = tmp, on_change = on_change, on_status = opts.on_status, on_progress = opts.on_progress,
           poll_interval = opts.poll_interval, timeout = opts.timeout, allow_unanswered = true }
end

-- Resolves the attempt an earlier sync left in flight.
local function resolve(st, client, rep, attempt, opts)
  local rows, err = rows_of(st, attempt.id)
  if not rows then return nil, err end
  if #rows == 0 and not attempt.status_url then
    local ok, eerr = st:end_attempt(attempt.id, {})
    if not ok then return nil, eerr end
    return false
  end
  local journaled = type(attempt.params) == "table" and attempt.params or {}
  local params, directions = request_params(st, rep, {}, journaled)
  local edits = #rows > 0 and edits_of(rows) or nil
  local touched, on_change = watcher(st, rows)
  local tmp = temp_output(st)
  local result
  if attempt.status_url then
    local op
    op, err = sync.resume_sync(client, json.encode{
      status_url = attempt.status_url, service = rep.service, replicaID = rep.replicaID, output = tmp,
      carried_edits = edits ~= nil, reissued = true, sent = edits and reconcile.sent_edits{ edits = edits } or nil,
    })
    if not op then return nil, err end
    result, err = accept_unanswered(op:wait{ on_change = on_change, on_status = opts.on_status,
      on_progress = opts.on_progress, poll_interval = opts.poll_interval, timeout = opts.timeout })
    if not result and err.code == "job_not_found" and not edits then
      os.remove(tmp)
      local ok, eerr = st:end_attempt(attempt.id, {})
      if not ok then return nil, eerr end
      return false
    end
    if not result and err.code ~= "job_not_found" then
      os.remove(tmp)
      return nil, err
    end
  end
  if not result then -- re-send the attempt's edits: the server reconciles what it already applied
    params.edits = edits
    local o = sub_opts(opts, tmp, on_change)
    o.resend = true
    o.on_job = function(op) return st:attempt_job(attempt.id, op.status_url) end
    result, err = accept_unanswered(sync.synchronize_replica(client, rep.service, params, o))
    if not result then
      os.remove(tmp)
      return nil, err
    end
  end
  local file = file_exists(tmp) and tmp or nil
  return commit(st, rep, attempt.id, rows, result, file, touched, directions, opts.on_fill)
end

local UPLOADS = { bidirectional = true, upload = true }

local SYNC_OPTS = { on_status = "function", on_progress = "function", on_fill = "function", timeout = "number",
                    poll_interval = "number", lock_timeout = "number", direction = "string", directions = "table",
                    params = "table" }

local function sync_locked(st, client, opts)
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
    if resolved == nil then
      err.message = "an earlier synchronization of this store was interrupted and could not be resolved yet "
        .. "(its edits stay queued and are sent again next time): " .. err.message
      return nil, err
    end
    rep, err = st:replica() -- the generations moved
    if not rep then return nil, err end
  end
  local params, directions = request_params(st, rep, opts, nil)
  local journal = { syncDirection = params.syncDirection, transportType = params.transportType }
  if rep.syncModel == "perLayer" then
    journal.directions = {}
    for id, dir in pairs(directions) do journal.directions[tostring(id)] = dir end
  end
  -- the edits of layers that upload this time (a download or snapshot layer's stay queued)
  local queue, qerr = st:pending()
  if not queue then return nil, qerr end
  local seqs = {}
  for _, r in ipairs(queue) do
    if r.attempt == nil and UPLOADS[directions[r.layer] or ""] then seqs[#seqs + 1] = r.seq end
  end
  local id, rows = st:begin_attempt{ params = journal, seqs = seqs }
  if not id then return nil, rows end
  if #rows > 0 then params.edits = edits_of(rows) end
  local touched, on_change = watcher(st, rows)
  local tmp = temp_output(st)
  local o = sub_opts(opts, tmp, on_change)
  o.on_job = function(op) return st:attempt_job(id, op.status_url) end
  local result
  result, err = accept_unanswered(sync.synchronize_replica(client, rep.service, params, o))
  if not result then
    os.remove(tmp)
    if nothing_applied(err) then st:end_attempt(id, {}) end
    return nil, err
  end
  local file = file_exists(tmp) and tmp or nil
  result, err = commit(st, rep, id, rows, result, file, touched, directions, opts.on_fill)
  if result and resolved then result.resolved = resolved end
  return result, err
end

--- Synchronizes a store (`store:sync(client, opts)`).
-- @param st the store
-- @param client a geoservices client
-- @tparam[opt] table opts `on_status`, `on_progress` (the download), `on_fill(bytes, total, records)`
--   (the result file being applied: see store.create_from), `timeout`, `poll_interval`, `lock_timeout`
--   (seconds to wait for another sync of this store), `direction` (this sync's syncDirection),
--   `directions` (`[layer id] = direction`, perLayer), `params` (extra synchronizeReplica
--   parameters: async, transportType...)
-- @return the synchronization result, plus `uploaded` (edits applied), `rejected` (the queue rows
--   the server refused, now in store:failed()), `overwritten` (`{seq, layer, op, globalId, sent}`
--   of the local edits whose feature the server's state replaced), `applied` (records written),
--   `resolved` (an interrupted attempt resolved first); or nil, err
-- @raise on misuse
function M.sync(st, client, opts)
  opts = opts or {}
  if type(client) ~= "table" then error("store:sync: client must be a geoservices client", 3) end
  if type(opts) ~= "table" then error("store:sync: opts must be a table", 3) end
  for k, v in pairs(opts) do
    if not SYNC_OPTS[k] then error(("store:sync: unknown option '%s'"):format(tostring(k)), 3) end
    if type(v) ~= SYNC_OPTS[k] then error(("store:sync: option '%s' must be a %s"):format(k, SYNC_OPTS[k]), 3) end
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
  local ok, result, err = pcall(sync_locked, st, client, opts)
  lock:close()
  if not ok then error(result, 0) end
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
