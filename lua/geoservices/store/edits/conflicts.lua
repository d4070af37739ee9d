--- Conflicts kept: a local edit that lost to, or was held back from, the
-- server's version of its feature, in the table geoservices_conflicts.
--
-- Two ways in. Before an edit is sent, the store merges it with the
-- server's version (geoservices.store.sync.rebase, geoservices.sync.merge), and a
-- conflict is kept by the policy that decided it: `held` (manual: nothing
-- of the edit sent, the server's version in the table), `server_kept` (the
-- server's values kept for the conflicting fields), `local_kept` (ours sent
-- over the server's). And when a download changes or deletes a feature
-- that has a local edit not sent (queued, or sent in this synchronization
-- and not applied), the server's version goes into the feature table, the
-- local edit leaves the queue and is kept here ("server_kept").
--
-- What a conflict row holds, readable without JSON (QGIS, GDAL, the sqlite3
-- shell): the layer's name, the kind (field, move, update_delete,
-- delete_update), the policy and outcome, `differences` ("OWNER: base
-- "Jane", here "Ann", server "Bob"; ..."), and the local version's geometry
-- in `geom` (the table is a GeoPackage features table of type GEOMETRY, so
-- QGIS draws it); one row per differing field in geoservices_conflict_fields
-- (base, local and server values side by side, and whether both sides
-- changed it). The JSON columns (feature, base, server) keep every value
-- for the library (`st:conflicts()`, `st:resolve`: geoservices.store.edits.resolve).
--
-- Which features the download changed is told by comparing each one's
-- local version before and after the download is applied, in the commit's
-- transaction: that also covers an edit made while the synchronization ran.
-- A queued delete of a feature the server deleted too simply leaves the
-- queue. Internal (geoservices.store.sync.commit, .queue, .rebase, .resolve).
-- @module geoservices.store.edits.conflicts
-- @local
local core = require "geoservices.core"
local json = require "geoservices.base.json"
local merge = require "geoservices.sync.merge"
local outgoing = require "geoservices.store.edits.outgoing"
local shared = require "geoservices.store.shared"

local conflicts = {}

local DESCRIPTION = "the server changed this feature while a local edit of it was not sent: the server's version is "
  .. "in the table, the local one kept here"
local DELETED = "the server deleted this feature while a local edit of it was not sent: it is gone from the table, "
  .. "the local version kept here"

--- The local version of the feature of each queued edit not sent, or sent
-- in `attempt_id`, before the download is applied.
-- @param st the store (in the commit's transaction)
-- @int ?attempt_id this synchronization's attempt
-- @return the list of queue rows with `before` (the feature, or false), or nil, err
function conflicts.before(st, attempt_id)
  local rows, msg, code = st.db:rows("SELECT seq, layer_id, op, global_id, attempt_id, feature, base "
    .. "FROM gpkgext_geoservices_edits ORDER BY seq")
  if not rows then return nil, shared.db_error(st.path, msg, code) end
  local list = {}
  for _, q in ipairs(rows) do
    if q.attempt_id == nil or q.attempt_id == attempt_id then
      local f, err = st:get(q.layer_id, q.global_id)
      if f == nil and err then return nil, err end
      q.before = f or false
      list[#list + 1] = q
    end
  end
  return list
end

local function entry(q, after, description)
  return { seq = q.seq, layer = q.layer_id, op = q.op, globalId = q.global_id, feature = q.before or nil,
           server = after or json.null, description = description, outcome = "server_kept" }
end

--- After the download: each edit whose feature it changed is kept as a
-- conflict (an edit sent in this attempt and not applied through
-- `by_seq`, which end_attempt keeps; one not sent here and now).
-- @param st the store (in the commit's transaction)
-- @tparam table list from @{before}
-- @tparam table c `attempt_id`, `by_seq` (the attempt's outcomes, completed here), `touched`
--   (`[feature key] = true` of the features the download changed, as far as they were watched),
--   `key(layer, gid)`, `held` (the set of seqs of the attempt's edits held in it: a download does not
--   settle them)
-- @return the conflicts for the result (`seq`, `layer`, `op`, `globalId`, `feature` (the local
--   version), `server`, `description`, `outcome`, and `sent` for one that was sent), or nil, err
function conflicts.after(st, list, c)
  local kept = {}
  for _, q in ipairs(list) do
    local after, err = st:get(q.layer_id, q.global_id)
    if after == nil and err then return nil, err end
    after = after or false
    local changed = not outgoing.same(q.before or nil, after or nil)
    local description = after and DESCRIPTION or DELETED
    if q.attempt_id ~= nil then
      -- sent, not applied: never again over the newer value; but an edit HELD in its attempt (a lost
      -- answer's: geoservices.sync.attempt's late window) may still land over another crew's values:
      -- it stays there, and the read after the window settles it (geoservices.store.sync.late); a
      -- feature the server deleted it cannot bring back
      if changed and c.by_seq[q.seq] == nil and not (c.held and c.held[q.seq] and after) then
        c.by_seq[q.seq] = { conflict = true, server = after or json.null, description = description }
        local e = entry(q, after, description)
        e.sent = q.feature and json.decode(q.feature) or nil
        kept[#kept + 1] = e
      end
    elseif changed then
      local ok, m, code = conflicts.keep(st, { seq = q.seq, layer = q.layer_id, op = q.op, gid = q.global_id,
        feature = q.before and json.encode(q.before) or nil, base = q.base,
        server = json.encode(after or json.null), description = description })
      if ok then ok, m, code = st.db:run("DELETE FROM gpkgext_geoservices_edits WHERE seq = ?", q.seq) end
      if not ok then return nil, shared.db_error(st.path, m, code) end
      kept[#kept + 1] = entry(q, after, description)
    elseif q.op == "delete" and not after and c.touched[c.key(q.layer_id, q.global_id)] then
      -- the server deleted it too: nothing is left to send, nothing lost
      local ok, m, code = st.db:run("DELETE FROM gpkgext_geoservices_edits WHERE seq = ?", q.seq)
      if not ok then return nil, shared.db_error(st.path, m, code) end
    end
  end
  return kept
end

-- ---- the table: its layout (format 5) and its rows --------------------------

--- What format 5 adds: the readable columns, the local geometry (the
-- table becomes a features table of type GEOMETRY in the CRS of the first
-- layer with a geometry), the table of differing fields. Run in the
-- transaction of a migration or of store.create, once gpkgext_geoservices_layers
-- is filled.
-- @param db the connection
-- @return true, or nil, msg, code
function conflicts.layout(db)
  local columns, m, c = db:rows("PRAGMA table_info(geoservices_conflicts)")
  if not columns then return nil, m, c end
  local has = {}
  for _, col in ipairs(columns) do has[col.name] = true end
  local statements = {}
  -- (a store that has them already, written by this version, is left as it is)
  for _, col in ipairs{ "layer_name TEXT", "kind TEXT", "policy TEXT", "differences TEXT", "geom GEOMETRY" } do
    if not has[col:match("^%S+")] then
      statements[#statements + 1] = "ALTER TABLE geoservices_conflicts ADD COLUMN " .. col
    end
  end
  for _, sql in ipairs{
    [[CREATE TABLE IF NOT EXISTS geoservices_conflict_fields (id INTEGER PRIMARY KEY AUTOINCREMENT,
      conflict_seq INTEGER NOT NULL, layer_name TEXT, global_id TEXT NOT NULL, field TEXT NOT NULL, base_value TEXT,
      local_value TEXT, server_value TEXT, both_changed INTEGER NOT NULL)]],
    "CREATE INDEX IF NOT EXISTS geoservices_conflict_fields_seq ON geoservices_conflict_fields (conflict_seq)",
    [[INSERT OR IGNORE INTO gpkg_contents (table_name, data_type, identifier, description)
      VALUES ('geoservices_conflict_fields', 'attributes', 'geoservices_conflict_fields',
      'the fields of each conflict: base, local and server values side by side (lua-geoservices)')]],
  } do statements[#statements + 1] = sql end
  for _, sql in ipairs(statements) do
    local ok
    ok, m, c = db:exec(sql)
    if not ok then return nil, m, c end
  end
  local rows
  rows, m, c = db:rows("SELECT srs_id FROM gpkgext_geoservices_layers WHERE geometry_column IS NOT NULL "
    .. "AND srs_id IS NOT NULL ORDER BY layer_id LIMIT 1")
  if not rows then return nil, m, c end
  local srs = rows[1] and rows[1].srs_id or 0
  local ok
  ok, m, c = db:run("UPDATE gpkg_contents SET data_type = 'features', srs_id = ?, description = ? "
    .. "WHERE table_name = 'geoservices_conflicts'", srs, "local edits that conflict with the server's version: "
    .. "the local geometry, base, local and server values, the policy and what became of each (lua-geoservices)")
  if ok then
    ok, m, c = db:run("INSERT OR IGNORE INTO gpkg_geometry_columns (table_name, column_name, geometry_type_name, "
      .. "srs_id, z, m) VALUES ('geoservices_conflicts', 'geom', 'GEOMETRY', ?, 2, 2)", srs)
  end
  if not ok then return nil, m, c end
  return true
end

local function attrs(f) return type(f) == "table" and type(f.attributes) == "table" and f.attributes or nil end

local function iso(ms)
  local ok, text = pcall(os.date, "!%Y-%m-%dT%H:%M:%S", ms // 1000)
  return ok and ("%s.%03dZ"):format(text, ms % 1000) or tostring(ms)
end

-- A value as a person reads it (text as it is, a date in ISO 8601, a
-- geometry as its kind and first position).
local function text_of(v, column)
  if v == nil or v == json.null then return nil end
  if type(v) == "table" then
    if v.x then return ("point %s %s"):format(tostring(v.x), tostring(v.y)) end
    for _, member in ipairs{ "points", "paths", "rings", "curvePaths", "curveRings" } do
      if v[member] then return ("%s (%d parts)"):format(member, #v[member]) end
    end
    return "(a value)"
  end
  if column and column.type == "date" and math.type(v) == "integer" then return iso(v) end
  return tostring(v)
end
conflicts.text_of = text_of

--- The fields in which the three versions of a conflict differ, in the
-- layer's column order, the geometry last: `{field =, base =, ["local"] =,
-- server =, conflict =}` (`conflict`: both sides changed it, to different
-- values, or one side changed it and the other deleted the feature:
-- `deleted_here`, `deleted_there`). A side that deleted the feature
-- changed no field; a field a local version does not carry (an edit that
-- sent some fields only) counts as not changed there.
-- @tparam table spec the layer's spec
-- @tparam ?table base the feature before both edits (`{attributes =, geometry =}`)
-- @tparam ?table mine the local version (nil: deleted here)
-- @tparam ?table theirs the server's version (nil: deleted there)
-- @treturn table the list
function conflicts.differences(spec, base, mine, theirs)
  local list = {}
  local b, m, t = attrs(base), attrs(mine), attrs(theirs)
  -- a side that deleted the feature changed no field: the other side's changes are what it conflicts with
  local gone_here, gone_there = base ~= nil and mine == nil, base ~= nil and theirs == nil
  local function one(name, kind, bv, mv, tv, column)
    local mine_changed = not gone_here and not merge.same(kind, bv, mv)
    local theirs_changed = not gone_there and not merge.same(kind, bv, tv)
    if mine_changed or theirs_changed then
      list[#list + 1] = { field = name, base = bv, ["local"] = mv, server = tv, column = column,
                          deleted_here = gone_here or nil, deleted_there = gone_there or nil,
                          conflict = (mine_changed and theirs_changed and not merge.same(kind, mv, tv))
                            or (mine_changed and gone_there) or (theirs_changed and gone_here) }
    end
  end
  for _, c in ipairs(spec and spec.columns or {}) do
    if c.name ~= spec.oid and c.name ~= spec.globalid then
      local bv = b and b[c.name]
      local mv = m and m[c.name]
      if m and mv == nil and b then mv = bv end -- not carried: not changed here
      one(c.name, merge.kind_of(c), bv, mv, t and t[c.name], c)
    end
  end
  if spec and spec.geometry_column then
    local bg = base and base.geometry
    local mg = mine and mine.geometry
    if mine and mg == nil and base then mg = bg end
    one("geometry", "geometry", bg, mg, theirs and theirs.geometry)
  end
  return list
end

-- "OWNER: base "Jane", here "Ann", server "Bob"; ..."
local function differences_text(list)
  local parts = {}
  for _, d in ipairs(list) do
    local function show(v)
      local t = text_of(v, d.column)
      if t == nil then return "null" end
      return type(v) == "string" and ("%q"):format(t) or t
    end
    parts[#parts + 1] = ("%s: base %s, here %s, server %s%s"):format(d.field, show(d.base),
      d.deleted_here and "deleted" or show(d["local"]), d.deleted_there and "deleted" or show(d.server),
      d.conflict and " (both changed)" or "")
  end
  return table.concat(parts, "; ")
end
conflicts.differences_text = differences_text

local function decoded(text)
  if type(text) ~= "string" then return nil end
  local v = json.decode(text)
  return type(v) == "table" and v or nil
end

-- The first kind of conflict among the differences (for a conflict kept without one).
local function kind_of(op, theirs, list)
  if op == "delete" then return "delete_update" end
  if theirs == nil then return op == "update" and "update_delete" or "add" end
  for _, d in ipairs(list) do
    if d.conflict and d.field == "geometry" then return "move" end
  end
  return "field"
end

--- Keeps a conflict (or replaces the one of its seq): its row with the
-- readable columns and the local geometry, and its differing fields.
-- @param st the store (in a transaction)
-- @tparam table k `seq`, `layer`, `op`, `gid`, `feature` (JSON text: the local version; nil for a
--   delete), `base` (JSON text), `server` (JSON text, "null" when the server deleted it),
--   `description`, `attempt`, `outcome` (default "server_kept"), `kind`, `policy`
-- @return true, or nil, msg, code
function conflicts.keep(st, k)
  local spec = st.layers[k.layer]
  local base = decoded(k.base)
  if base and spec then base = outgoing.base(spec, k.base) or nil end
  local mine, theirs = decoded(k.feature), decoded(k.server)
  local list = conflicts.differences(spec, base, mine, theirs)
  local kind = k.kind or kind_of(k.op, theirs, list)
  local db = st.db
  local ok, m, c = db:run("INSERT OR REPLACE INTO geoservices_conflicts (seq, layer_id, op, global_id, feature, base, "
    .. "server, description, attempt_id, detected_at, outcome, layer_name, kind, policy, differences) "
    .. "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", k.seq, k.layer, k.op, k.gid, k.feature, k.base,
    k.server, k.description, k.attempt, shared.now(), k.outcome or "server_kept", spec and spec.table or nil, kind,
    k.policy, differences_text(list))
  if ok then ok, m, c = db:run("DELETE FROM geoservices_conflict_fields WHERE conflict_seq = ?", k.seq) end
  for _, d in ipairs(list) do
    if not ok then break end
    ok, m, c = db:run("INSERT INTO geoservices_conflict_fields (conflict_seq, layer_name, global_id, field, "
      .. "base_value, local_value, server_value, both_changed) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", k.seq,
      spec and spec.table or nil, k.gid, d.field, text_of(d.base, d.column),
      d.deleted_here and "(deleted)" or text_of(d["local"], d.column),
      d.deleted_there and "(deleted)" or text_of(d.server, d.column), d.conflict and 1 or 0)
  end
  if not ok then return nil, m, c end
  -- the local geometry (a delete's: where it was) for QGIS, in the table's CRS
  local geometry = (mine and mine.geometry) or (base and base.geometry)
  local srs = db:rows("SELECT srs_id FROM gpkg_geometry_columns WHERE table_name = 'geoservices_conflicts'")
  srs = srs and srs[1] and srs[1].srs_id
  if type(geometry) == "table" and srs and spec and spec.srs_id == srs then
    local made, blob = pcall(core.gpkg_geometry, geometry, srs)
    if made and type(blob) == "string" then
      local hex = blob:gsub(".", function(ch) return ("%02X"):format(ch:byte()) end)
      ok, m, c = db:run(("UPDATE geoservices_conflicts SET geom = X'%s' WHERE seq = ?"):format(hex), k.seq)
      if not ok then return nil, m, c end
    end
  end
  return true
end

return conflicts
