--- The checks a store's synchronization makes before it sends anything:
--
-- * the file is sound: SQLite's `quick_check` (every page of every b-tree
--   read and its structure checked, without the index-to-table cross
--   checks of `integrity_check`: linear in the file's size). A damaged page
--   would otherwise hide its features from the sync and from QGIS alike;
-- * the store is the replica's only copy: the server's generation of the
--   replica (its resource, `client:replica_info`) is not ahead of the one
--   the store last committed, or last saw in an answer. A copy of the file
--   (crew-1.gpkg copied to a laptop) that synchronized would otherwise
--   make each copy miss the other's edits for good, the server sending a
--   replica none of its own changes. When the store moved the server's
--   generation without learning it (an answer lost), the sync that reads
--   the lost attempt's outcome back reads the server's generation too, once
--   the attempt is settled (@{learn_generation}): it then holds the lost
--   sync's own move, and the next check compares with it, so a copy that
--   synchronizes later is still refused. Only while that read cannot be
--   made (the attempt still unresolved, the server unreachable, an
--   upload-only answer without a generation) is the check skipped; and
--   while THE LATE WINDOW of a lost request lasts (geoservices.sync.attempt:
--   the server may still run it, a download too, and move the generation
--   after the store learnt it), after which the server's generation is
--   learnt again. A copy that synchronizes within that window is missed.
--   `opts.adopt_copy` takes this copy as the replica's on purpose;
-- * the result file a killed sync left beside the store is removed (its
--   name is fixed per store: one sync runs at a time, under the store's lock).
--
-- Internal: geoservices.store.sync.
-- @module geoservices.store.sync.integrity
-- @local
local attempt = require "geoservices.sync.attempt"
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"

local integrity = {}

--- The temporary result file of a store's synchronization.
function integrity.result_file(st)
  return st.path .. ".sync.json"
end

--- Removes what a killed synchronization left beside the store.
function integrity.remove_leftovers(st)
  os.remove(integrity.result_file(st))
end

--- SQLite's quick_check of the store's file.
-- @return true, or nil, err (kind "io", code "corrupt")
function integrity.check_file(st)
  local rows, msg = st.db:rows("PRAGMA quick_check")
  local problems = {}
  if not rows then
    problems[1] = msg
  else
    for i, r in ipairs(rows) do
      if r.quick_check ~= "ok" and i <= 3 then problems[#problems + 1] = r.quick_check end
    end
  end
  if #problems == 0 then return true end
  return nil, errors.new("io", ("replica store %s is damaged (SQLite's quick_check: %s): nothing was sent; "
    .. "restore the file from a backup, or create the store again (its queued edits can be read with "
    .. "`sqlite3 %s .recover`)"):format(st.path, table.concat(problems, "; "), st.path),
    { code = "corrupt", path = st.path })
end

-- The generations the store holds: [layer id or -1] = generation, the
-- highest of the committed one and the one last seen in an answer.
local function held(rep)
  local gens = {}
  if rep.replicaServerGen then gens[-1] = rep.replicaServerGen end
  for _, l in ipairs(rep.layerServerGens or {}) do gens[l.id] = l.serverGen end
  local seen = type(rep.info) == "table" and type(rep.info.server_gens) == "table" and rep.info.server_gens or {}
  for id, g in pairs(seen) do
    local k = math.tointeger(tonumber(id))
    if k and math.type(g) == "integer" and (not gens[k] or g > gens[k]) then gens[k] = g end
  end
  return gens
end

-- Keeps the server's generations of the replica (its resource) as the ones
-- the store last saw, in a transaction of its own: true when kept.
local function keep_seen(st, rep, server)
  local ok = st:transaction(function()
    local done, msg = integrity.record_generation(st, rep, { seen = server })
    if not done then return nil, msg end
    return true
  end)
  return ok == true
end

--- Refuses to synchronize a copy of the store that another copy has
-- synchronized since (see the module's description).
-- @param st the store
-- @param client the client
-- @tparam table rep the store's replica
-- @tparam table opts the sync's options (`adopt_copy`, `timeout`)
-- @return true, or nil, err (kind "invalid", code "copied")
function integrity.check_copy(st, client, rep, opts)
  local info = type(rep.info) == "table" and rep.info or {}
  if opts.adopt_copy or info.generation_unknown then return true end
  local ends = attempt.window_end({ lost_at = math.tointeger(info.lost_at) }, opts.late_window)
  if ends and os.time() < ends then return true end -- a lost request of ours may still move it (below)
  local server = client:replica_info(rep.service, rep.replicaID, { timeout = opts.timeout })
  if not server then return true end -- unreadable: the synchronization itself says why
  if ends then
    -- THE LATE WINDOW of a lost request is over: what the server holds now counts as the store's
    -- own (that request may have landed after the store's last sync); from here on a move is a copy's
    info.lost_at = nil
    keep_seen(st, rep, server) -- (not recorded: the next sync learns it again)
    return true
  end
  local mine = held(rep)
  local ahead
  if rep.syncModel == "perLayer" then
    for _, l in ipairs(server.layerServerGens or {}) do
      if mine[l.id] and math.type(l.serverGen) == "integer" and l.serverGen > mine[l.id] then
        ahead = { server = l.serverGen, store = mine[l.id], layer = l.id }
      end
    end
  elseif math.type(server.replicaServerGen) == "integer" and mine[-1] and server.replicaServerGen > mine[-1] then
    ahead = { server = server.replicaServerGen, store = mine[-1] }
  end
  if not ahead then return true end
  return nil, errors.new("invalid", ("replica %s of %s was synchronized by another copy of this store since it "
    .. "last synchronized (the server's generation%s is %d, the store's %d): nothing was sent, the copies would "
    .. "miss each other's edits. Keep one copy; to go on with this one (the other copy is then refused), "
    .. "synchronize it with opts.adopt_copy = true (--adopt-copy): what the other copy uploaded is not "
    .. "downloaded into it"):format(tostring(rep.replicaID), st.path, ahead.layer and (" of layer " .. ahead.layer)
    or "", ahead.server, ahead.store), { code = "copied", parameter = "adopt_copy", path = st.path })
end

--- After a synchronization whose outcome had to be read back (an answer
-- lost: `generation_unknown`), reads the server's generation of the replica
-- once no attempt is in flight any more, and keeps it as the one the store
-- last saw: the lost sync's own move of the generation is then the
-- store's, and a later move is another copy's. Does nothing otherwise, or
-- when the server cannot be read (the next sync tries again).
-- @param st the store
-- @param client the client
-- @tparam table opts the sync's options (`timeout`)
-- @return true when the generation was learnt
function integrity.learn_generation(st, client, opts)
  if not st.db then return false end
  local rep = st:replica()
  if not (rep and type(rep.info) == "table" and rep.info.generation_unknown) then return false end
  if st:attempt() ~= false then return false end -- its outcome is not known yet
  local server = client:replica_info(rep.service, rep.replicaID, { timeout = opts and opts.timeout })
  if not server then return false end
  return keep_seen(st, rep, server)
end

--- Records in the replica's info (in the caller's transaction) what a
-- synchronization taught the store of the server's generation: `gens`
-- committed (the store is level with the server), the generations an
-- upload-only answer carried, or nothing known (`unknown`: the next copy
-- check is skipped).
-- @param st the store
-- @tparam table rep its replica
-- @tparam table how `committed` (true), `seen` (the answer's generations), `unknown` (true), `lost_at`
--   (with `unknown`: the answer was lost, os.time; until THE LATE WINDOW after it is over the copy check
--   waits: the request may still land and move the generation, geoservices.sync.attempt)
-- @return true, or nil, msg, code
function integrity.record_generation(st, rep, how)
  local info = type(rep.info) == "table" and rep.info or {}
  info.server_gens, info.generation_unknown = nil, nil
  if math.type(how.lost_at) == "integer" then info.lost_at = math.max(how.lost_at, info.lost_at or 0) end
  if how.unknown then
    info.generation_unknown = true
  elseif how.seen then
    local gens, any = {}, false
    if math.type(how.seen.replicaServerGen) == "integer" then
      gens["-1"], any = how.seen.replicaServerGen, true
    end
    for _, l in ipairs(type(how.seen.layerServerGens) == "table" and how.seen.layerServerGens or {}) do
      if math.type(l.serverGen) == "integer" then gens[tostring(l.id)], any = l.serverGen, true end
    end
    if any then info.server_gens = gens else info.generation_unknown = true end
  end
  rep.info = info
  return st.db:run("UPDATE gpkgext_geoservices_replica SET info = ? WHERE id = 1", json.encode(info))
end

return integrity
