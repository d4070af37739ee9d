--- Brings a replica store of an older format up to schema.FORMAT, in one
-- write transaction: a failure leaves the file as it was, and another
-- process opening the same store meanwhile waits for the lock, then finds
-- the format current and does nothing. Internal (geoservices.store.open).
--
-- * 1 -> 2: the base of queued and failed edits, the conflicts table;
-- * 2 -> 3: each feature table whose INTEGER PRIMARY KEY was the layer's
--   OBJECTID is rebuilt with a local fid (schema.layer_sql): a downloaded
--   row keeps its number as fid and OBJECTID, a local add (a negative
--   OBJECTID) gets the next fid and a NULL OBJECTID, the R-tree is filled
--   again from the fids; then the capture triggers on every feature table
--   and their control table (geoservices.store.edits.capture); the queued edits
--   not sent yet read what they send from the feature table from now on;
--   the conflicts get their outcome and are listed in gpkg_contents;
-- * 3 -> 4 (geoservices.store.file.migrate4): the attachment queue rebuilt to
--   take updates (every row kept) with today's attachment triggers, so the
--   store's attachment edits are sent; PROJ's WKT for the CRS rows written
--   'undefined'; the service's relationships from the layers' kept metadata;
-- * 4 -> 5: conflicts readable and drawn (geoservices.store.edits.conflicts.layout).
-- * 5 -> 6: each layer's GlobalID index made again on the whole GlobalID
--   (schema.gid_index_sql): formats 4 and 5 held its first 8 hex digits, and a
--   lookup scanned every GUID sharing them (sequential GUIDs: all of them).
-- * 6 -> 7: the media table's global_id nullable, made by a trigger when
--   left out (to_format_7), so an attachment added without one (QGIS's
--   form, GDAL, SQL) is taken.
-- * 7 -> 8: the queue and the refused edits as views GDAL and QGIS load
--   (schema.EDIT_VIEWS_SQL).
-- * 8 -> 9: the service's styles and the QGIS project in the file.
-- * 9 -> 10: the library's own tables named and registered as a GeoPackage
--   extension's (geoservices.store.file.extension), so QGIS does not offer
--   them as layers. The renaming comes first, before any other step of an
--   older store's migration: every step reads today's names.
-- * 10 -> 11: the layers' default styles written again with the fields the
--   service fills in read-only in QGIS's forms (geoservices.store.qgis.layer_styles).
-- @module geoservices.store.file.migrate
-- @local
local capture = require "geoservices.store.edits.capture"
local conflicts = require "geoservices.store.edits.conflicts"
local extension = require "geoservices.store.file.extension"
local json = require "geoservices.base.json"
local layer_styles = require "geoservices.store.qgis.layer_styles"
local migrate4 = require "geoservices.store.file.migrate4"
local project = require "geoservices.store.qgis.project"
local schema = require "geoservices.store.file.schema"
local shared = require "geoservices.store.shared"

local migrate = {}

-- The layer specs of the file (the columns as gpkgext_geoservices_layers keeps them).
local function layer_specs(db)
  local rows, m, c = db:rows("SELECT * FROM gpkgext_geoservices_layers ORDER BY layer_id")
  if not rows then return nil, m, c end
  local specs = {}
  for _, r in ipairs(rows) do
    specs[#specs + 1] = { id = r.layer_id, table = r.table_name, geometry_column = r.geometry_column,
                          oid = r.object_id_field, globalid = r.global_id_field, columns = json.decode(r.columns) }
  end
  return specs
end

local q = schema.ident

local exec_all = shared.exec_all

-- The statements of schema.layer_sql that start with `prefix`: the R-tree
-- triggers and the OBJECTID index of a rebuilt table.
local function layer_statements(db, spec, prefix)
  local rows, m, c = db:rows("SELECT geometry_type_name, srs_id, z, m FROM gpkg_geometry_columns WHERE table_name = ?",
    spec.table)
  if not rows then return nil, m, c end
  local g = rows[1] or {}
  local full = { id = spec.id, table = spec.table, name = spec.table, data_type = "features", description = "",
                 columns = spec.columns, oid = spec.oid, globalid = spec.globalid, fid_column = spec.fid_column,
                 geometry_column = spec.geometry_column, geometry_type = g.geometry_type_name,
                 has_z = g.z == 1, has_m = g.m == 1 }
  local list = {}
  for _, sql in ipairs(schema.layer_sql(full, g.srs_id or -1)) do
    if sql:sub(1, #prefix) == prefix then list[#list + 1] = sql end
  end
  return list
end

-- Rebuilds a table whose INTEGER PRIMARY KEY is the layer's OBJECTID with
-- a local fid before it (the table's own text, that one definition changed).
local function rebuild(db, spec)
  local info, m, c = db:rows(("PRAGMA table_info(%s)"):format(q(spec.table)))
  if not info then return nil, m, c end
  local names, taken, pk = {}, {}, nil
  for _, col in ipairs(info) do
    names[#names + 1] = col.name
    taken[col.name:lower()] = true
    if col.pk == 1 then pk = col.name end
  end
  if not spec.oid or pk ~= spec.oid then return true end -- a local fid already
  local fid = "fid"
  while taken[fid] do fid = "_" .. fid end
  spec.fid_column = fid
  local rows
  rows, m, c = db:rows("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", spec.table)
  if not rows then return nil, m, c end
  local create, key = rows[1].sql, q(spec.oid) .. " INTEGER PRIMARY KEY"
  local head = ("CREATE TABLE %s ("):format(q(spec.table))
  local at, stop = create:find(key, 1, true)
  if not at or create:find(key, stop + 1, true) or create:sub(1, #head) ~= head then
    return nil, ("table %s is not as this library made it: it cannot be rebuilt with a local fid"):format(spec.table),
      "format"
  end
  local tmp = spec.table .. "_geoservices_rebuilt"
  local new = ("CREATE TABLE %s ("):format(q(tmp)) .. create:sub(#head + 1, at - 1) .. q(fid)
    .. " INTEGER PRIMARY KEY AUTOINCREMENT, " .. q(spec.oid) .. " INTEGER" .. create:sub(stop + 1)
  local oid = q(spec.oid)
  local server_oid = ("CASE WHEN %s > 0 THEN %s END"):format(oid, oid)
  local columns, values = {}, {}
  for i, name in ipairs(names) do
    columns[i] = q(name)
    values[i] = name == spec.oid and server_oid or q(name)
  end
  -- the server's rows first, keeping their numbers; local adds after them, in the order they were made
  local steps = {
    new,
    ("INSERT INTO %s (%s, %s) SELECT %s, %s FROM %s ORDER BY %s < 0, abs(%s)"):format(q(tmp), q(fid),
      table.concat(columns, ", "), server_oid, table.concat(values, ", "), q(spec.table), oid, oid),
    ("DROP TABLE %s"):format(q(spec.table)),
    ("ALTER TABLE %s RENAME TO %s"):format(q(tmp), q(spec.table)),
  }
  local ok
  ok, m, c = exec_all(db, steps)
  if not ok then return nil, m, c end
  local extra
  extra, m, c = layer_statements(db, spec, "CREATE INDEX")
  if not extra then return nil, m, c end
  if spec.geometry_column then
    local triggers
    triggers, m, c = layer_statements(db, spec, "CREATE TRIGGER")
    if not triggers then return nil, m, c end
    local rtree, g = q(("rtree_%s_%s"):format(spec.table, spec.geometry_column)), q(spec.geometry_column)
    for _, sql in ipairs(triggers) do extra[#extra + 1] = sql end
    extra[#extra + 1] = "DELETE FROM " .. rtree
    extra[#extra + 1] = ("INSERT INTO %s SELECT %s, ST_MinX(%s), ST_MaxX(%s), ST_MinY(%s), ST_MaxY(%s) FROM %s "
      .. "WHERE %s NOT NULL AND NOT ST_IsEmpty(%s)"):format(rtree, q(fid), g, g, g, g, q(spec.table), g, g)
  end
  return exec_all(db, extra)
end

local function to_format_3(db)
  local specs, sm, sc = layer_specs(db)
  if not specs then return nil, sm, sc end
  for _, spec in ipairs(specs) do
    local ok, m, c = rebuild(db, spec)
    if not ok then return nil, m, c end
  end
  local ok, m, c = exec_all(db, schema.CONFLICTS_FORMAT_3)
  if not ok then return nil, m, c end
  ok, m, c = exec_all(db, capture.CONTROL_SQL)
  if not ok then return nil, m, c end
  for _, spec in ipairs(specs) do
    ok, m, c = exec_all(db, capture.layer_sql(spec, specs))
    if not ok then return nil, m, c end
  end
  -- an edit not sent yet sends what its feature holds when it goes
  return db:exec("UPDATE gpkgext_geoservices_edits SET feature = NULL WHERE attempt_id IS NULL")
end

-- The statements that make a layer's GlobalID index today's (none when it is).
local function gid_index(have, spec)
  local name = spec.table .. "_" .. spec.globalid
  if schema.is_gid_index(have[name], spec) then return {} end
  return { "DROP INDEX IF EXISTS " .. q(name), schema.gid_index_sql(spec) }
end

-- The name -> sql of the file's indexes and triggers.
local function schema_objects(db)
  local rows, m, c = db:rows("SELECT name, sql FROM sqlite_master WHERE type IN ('index', 'trigger')")
  if not rows then return nil, m, c end
  local have = {}
  for _, r in ipairs(rows) do have[r.name] = r.sql end
  return have
end

local function to_format_6(db)
  local specs, have, m, c
  specs, m, c = layer_specs(db)
  if specs then have, m, c = schema_objects(db) end
  if not have then return nil, m, c end
  for _, spec in ipairs(specs) do
    local ok
    ok, m, c = exec_all(db, gid_index(have, spec))
    if not ok then return nil, m, c end
  end
  return true
end

-- Format 7: the media table's global_id nullable (schema.ATTACHMENT_GID_COLUMN),
-- by SQLite's documented writable_schema procedure for removing a NOT NULL
-- (the stored rows do not change meaning; schema_version bumped so that
-- every connection reads the schema again; undone by a rollback with the
-- rest), and the trigger that makes the GlobalID of an attachment added
-- without one. A table declared otherwise keeps its declaration.
local function to_format_7(db)
  local old = "global_id TEXT NOT NULL UNIQUE,"
  local rows, m, c = db:rows("SELECT instr(sql, ?) > 0 AS found, (SELECT schema_version FROM pragma_schema_version) "
    .. "AS version FROM sqlite_master WHERE type = 'table' AND name = 'geoservices_attachments'", old)
  if not rows then return nil, m, c end
  if not rows[1] then return true end
  local ok = true
  if rows[1].found == 1 then
    ok, m, c = db:exec("PRAGMA writable_schema = ON")
    if ok then
      ok, m, c = db:run("UPDATE sqlite_master SET sql = replace(sql, ?, ?) WHERE type = 'table' "
        .. "AND name = 'geoservices_attachments'", old, schema.ATTACHMENT_GID_COLUMN .. ",")
      if ok then ok, m, c = db:exec(("PRAGMA schema_version = %d"):format(rows[1].version + 1)) end
      db:exec("PRAGMA writable_schema = OFF")
    end
  end
  if not ok then return nil, m, c end
  local trigger
  trigger, m, c = db:rows("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?",
    "geoservices_attachments_global_id")
  if not trigger then return nil, m, c end
  if trigger[1] and trigger[1].sql == schema.ATTACHMENT_GID_TRIGGER then return true end
  ok, m, c = db:exec("DROP TRIGGER IF EXISTS geoservices_attachments_global_id")
  if ok then ok, m, c = db:exec(schema.ATTACHMENT_GID_TRIGGER) end
  return ok, m, c
end

-- The layers' default styles as `replica create` writes them now (the
-- service's symbols, labels, aliases and read-only fields from the stored
-- layer resource): a style geoservices wrote before is updated, a user's own
-- default style is kept.
local function restyle(db)
  local rows, m, c = db:rows("SELECT layer_id, table_name, metadata FROM gpkgext_geoservices_layers ORDER BY layer_id")
  if not rows then return nil, m, c end
  for _, r in ipairs(rows) do
    local meta = json.decode(r.metadata or "null")
    local spec = type(meta) == "table" and schema.layer_spec(meta, {})
    if spec then
      spec.table = r.table_name
      local ok
      ok, m, c = layer_styles.rewrite(db, spec, meta)
      if not ok then return nil, m, c end
    end
  end
  return true
end

-- Format 8 -> 9: the layers' default styles (@{restyle}), then the QGIS
-- project in the file (issue 37). A store that has one already is left as it is.
local function to_format_9(db, path)
  local ok, m, c = restyle(db)
  if not ok then return nil, m, c end
  -- a project already in the file (a store made by this version) is left as it is
  local have
  have, m, c = db:rows("SELECT 1 AS x FROM sqlite_master WHERE name = 'qgis_projects'")
  if not have then return nil, m, c end
  if have[1] then
    have, m, c = db:rows("SELECT count(*) AS n FROM qgis_projects")
    if not have then return nil, m, c end
    if have[1].n > 0 then return true end
  end
  return project.write(db, path)
end

-- MIGRATIONS[n]: what turns format n - 1 into n (SQL statements, or a function(db)).
local STEPS = {
  [2] = schema.MIGRATIONS[2],
  [3] = to_format_3,
  [4] = migrate4,
  [5] = conflicts.layout,
  [6] = to_format_6,
  [7] = to_format_7,
  [8] = schema.EDIT_VIEWS_SQL,
  [9] = to_format_9,
  [10] = extension.register,
  [11] = restyle,
}

--- Migrates an open store's file.
-- @param db the connection (outside a transaction)
-- @tparam string path the store's path (its project names the file)
-- @return true, or nil, msg, code (nothing changed)
function migrate.run(db, path)
  local ok, m, c = db:begin()
  if not ok then return nil, m, c end
  local function abort(msg, code)
    db:rollback()
    return nil, msg, code
  end
  -- today's table names first (format 10): the steps below read them
  ok, m, c = extension.rename_old(db)
  if not ok then return abort(m, c) end
  local rows
  rows, m, c = db:rows("SELECT format FROM gpkgext_geoservices_replica WHERE id = 1")
  if not rows then return abort(m, c) end
  for n = rows[1].format + 1, schema.FORMAT do
    local step = STEPS[n]
    if type(step) == "function" then
      ok, m, c = step(db, path)
      if not ok then return abort(m, c) end
    else
      for _, sql in ipairs(step) do
        ok, m, c = db:exec(sql)
        if not ok then return abort(m, c) end
      end
    end
  end
  ok, m, c = db:run("UPDATE gpkgext_geoservices_replica SET format = ? WHERE id = 1", schema.FORMAT)
  if ok then ok, m, c = db:commit() end
  if not ok then return abort(m, c) end
  return true
end

--- Keeps an opened store's per-layer SQL as this version writes it: the
-- GlobalID index (a store made before it found GlobalIDs through a UNIQUE
-- index, which stays, gets it too) and the capture triggers (one is replaced only when its
-- text differs, so an up-to-date store is only read). Changes no data.
-- @param db the connection (outside a transaction)
-- @tparam table specs the layers' specs (id, table, columns, globalid, oid, geometry_column)
-- @return true, or nil, msg, code (nothing changed)
function migrate.refresh(db, specs)
  local have, m, c = schema_objects(db)
  if not have then return nil, m, c end
  -- the extension's tables made since (a download's original geometries) registered
  local todo
  todo, m, c = extension.unregistered(db)
  if not todo then return nil, m, c end
  -- the index of the photos not linked yet (schema.ATTACHMENT_UNLINKED_INDEX)
  if not have[schema.ATTACHMENT_UNLINKED_NAME] then
    local media
    media, m, c = db:rows("SELECT 1 AS x FROM sqlite_master WHERE type = 'table' AND name = 'geoservices_attachments'")
    if not media then return nil, m, c end
    if media[1] then todo[#todo + 1] = schema.ATTACHMENT_UNLINKED_INDEX end
  end
  local list = {}
  for _, spec in pairs(specs) do list[#list + 1] = spec end
  table.sort(list, function(a, b) return a.id < b.id end)
  for _, spec in ipairs(list) do
    for _, sql in ipairs(gid_index(have, spec)) do todo[#todo + 1] = sql end
    local names, sqls = capture.trigger_names(spec), capture.layer_sql(spec, list)
    local differs = false
    for i, name in ipairs(names) do differs = differs or have[name] ~= sqls[i] end
    if differs then
      -- made again together, in their order: the guard of the fields (its
      -- words in a refused DROP COLUMN) before the triggers that read each field
      for _, name in ipairs(names) do todo[#todo + 1] = "DROP TRIGGER IF EXISTS " .. q(name) end
      for _, sql in ipairs(sqls) do todo[#todo + 1] = sql end
    end
  end
  if #todo == 0 then return true end
  local ok
  ok, m, c = db:begin()
  if not ok then return nil, m, c end
  ok, m, c = exec_all(db, todo)
  if not ok then
    db:rollback()
    return nil, m, c
  end
  return db:commit()
end

return migrate
