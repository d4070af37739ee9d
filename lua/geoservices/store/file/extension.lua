--- The library's own tables as a GeoPackage extension (issue 37): the
-- replica, its layers' mapping, the queue, the journal, the capture switch...
-- are tables an extension defines (12-128r18 2.3: an Extended GeoPackage
-- registers each extension's tables in gpkg_extensions, requirements 59 and
-- 60), named as extension tables are, `gpkgext_` (as the Related Tables
-- Extension's gpkgext_relations). GDAL lists every other table as a layer
-- when a GeoPackage is opened with LIST_ALL_TABLES=YES, as QGIS 3.22 opens
-- one (GDAL 3.6 leaves out only names like gpkg_%, rtree_% and sqlite_%, where
-- `_` matches any character); a user opening the store sees the service's
-- layers and the tables meant for them (conflicts, pending and refused
-- edits, the sync log, the photos), and GDAL's validator finds the file valid.
--
-- A store made before (format 9 and older) named them `geoservices_*`: they
-- are renamed first when it is migrated (@{rename_old}), so that every step
-- of the migration reads today's names; SQLite rewrites the triggers and
-- views that name them. Opened read-only, an older store is read through
-- temporary views of today's names (@{alias_old}), the file untouched.
-- docs/gpkg-extension.md describes the extension.
-- @module geoservices.store.file.extension
-- @local
local extension = {}

extension.NAME = "geoservices_replica_store"
extension.DEFINITION = "https://github.com/lua-geoservices/lua-geoservices/blob/main/docs/gpkg-extension.md"
extension.PREFIX = "gpkgext_geoservices_"

--- The tables of the extension, by their name after the prefix (the
-- original geometries' table is made when first needed by a download,
-- csrc/store/apply_originals.c, and registered at the next open for writing:
-- geoservices.store.file.migrate.refresh).
extension.TABLES = { "replica", "layers", "generations", "edits", "failed_edits", "attempts", "capture",
                     "attachment_edits", "attachments_added", "relationships", "original_geometries" }

-- the mapping tables of the Related Tables Extension a store made before named
-- geoservices_attachments_<layer> and geoservices_relation_<origin>_<destination>_<id>
local OLD_MAPPINGS = { "geoservices\\_attachments\\_%", "geoservices\\_relation\\_%" }

--- The statement registering one of the extension's tables (run again, it adds nothing).
-- @string name the table's name (with the prefix)
function extension.register_sql(name)
  local lit = "'" .. name:gsub("'", "''") .. "'"
  return ("INSERT INTO gpkg_extensions (table_name, column_name, extension_name, definition, scope) "
    .. "SELECT %s, NULL, '%s', '%s', 'write-only' WHERE NOT EXISTS (SELECT 1 FROM gpkg_extensions "
    .. "WHERE table_name = %s AND extension_name = '%s')"):format(lit, extension.NAME, extension.DEFINITION, lit,
      extension.NAME)
end

local function exists(db, name)
  local rows, m, c = db:rows("SELECT 1 AS yes FROM sqlite_master WHERE type = 'table' AND name = ?", name)
  if not rows then return nil, m, c end
  return rows[1] ~= nil
end

--- The statements registering the extension's tables the file has and
-- gpkg_extensions does not name yet (none when all are: only read).
-- @param db the connection
-- @return a list of SQL statements, or nil, msg, code
function extension.unregistered(db)
  local rows, m, c = db:rows("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE "
    .. "'gpkgext\\_geoservices\\_%' ESCAPE '\\' AND name NOT IN (SELECT table_name FROM gpkg_extensions "
    .. "WHERE extension_name = ?)", extension.NAME)
  if not rows then return nil, m, c end
  local ours = {}
  for _, t in ipairs(extension.TABLES) do ours[extension.PREFIX .. t] = true end
  local list = {}
  for _, r in ipairs(rows) do
    if ours[r.name] then list[#list + 1] = extension.register_sql(r.name) end
  end
  return list
end

--- Registers every table of the extension the file has.
-- @param db the connection, in a write transaction
-- @return true, or nil, msg, code
function extension.register(db)
  local list, m, c = extension.unregistered(db)
  if not list then return nil, m, c end
  for _, sql in ipairs(list) do
    local ok
    ok, m, c = db:exec(sql)
    if not ok then return nil, m, c end
  end
  return true
end

-- The mapping tables a store made before named as its own: {old, new}.
local function old_mappings(db)
  local has, m, c = exists(db, "gpkgext_relations")
  if not has then return has == false and {} or nil, m, c end
  local list = {}
  for _, pattern in ipairs(OLD_MAPPINGS) do
    local rows
    rows, m, c = db:rows("SELECT mapping_table_name AS name FROM gpkgext_relations WHERE mapping_table_name LIKE ? "
      .. "ESCAPE '\\' ORDER BY mapping_table_name", pattern)
    if not rows then return nil, m, c end
    for _, r in ipairs(rows) do list[#list + 1] = { old = r.name, new = "gpkgext_" .. r.name } end
  end
  return list
end

local function q(name) return '"' .. name:gsub('"', '""') .. '"' end

--- Renames the tables of a store made before format 10 (`geoservices_*`)
-- to today's names, and its mapping tables where the Related Tables
-- Extension and the relationships' table name them. A table already
-- renamed is left; run on a current store, it changes nothing.
-- @param db the connection, in a write transaction
-- @return true, or nil, msg, code
function extension.rename_old(db)
  for _, t in ipairs(extension.TABLES) do
    local old, new = "geoservices_" .. t, extension.PREFIX .. t
    local has_old, m, c = exists(db, old)
    if has_old == nil then return nil, m, c end
    local has_new
    if has_old then has_new, m, c = exists(db, new) end
    if has_new == nil and has_old then return nil, m, c end
    if has_old and not has_new then
      local ok
      ok, m, c = db:exec(("ALTER TABLE %s RENAME TO %s"):format(q(old), q(new)))
      if not ok then return nil, m, c end
    end
  end
  local maps, m, c = old_mappings(db)
  if not maps then return nil, m, c end
  local relationships
  relationships, m, c = exists(db, extension.PREFIX .. "relationships")
  if relationships == nil then return nil, m, c end
  for _, map in ipairs(maps) do
    local ok
    ok, m, c = db:exec(("ALTER TABLE %s RENAME TO %s"):format(q(map.old), q(map.new)))
    if ok then
      ok, m, c = db:run("UPDATE gpkgext_relations SET mapping_table_name = ? WHERE mapping_table_name = ?", map.new,
        map.old)
    end
    if ok then ok, m, c = db:run("UPDATE gpkg_extensions SET table_name = ? WHERE table_name = ?", map.new, map.old) end
    if ok and relationships then
      ok, m, c = db:run("UPDATE " .. extension.PREFIX .. "relationships SET mapping_table = ? WHERE mapping_table = ?",
        map.new, map.old)
    end
    if not ok then return nil, m, c end
  end
  return true
end

--- On a read-only connection to a store made before format 10: a temporary
-- view of today's name over each of its tables, so that it is read as it is.
-- @param db the connection
-- @return true, or nil, msg, code
function extension.alias_old(db)
  for _, t in ipairs(extension.TABLES) do
    local has, m, c = exists(db, "geoservices_" .. t)
    if has == nil then return nil, m, c end
    if has then
      local ok
      ok, m, c = db:exec(("CREATE TEMP VIEW IF NOT EXISTS %s AS SELECT * FROM main.%s"):format(
        q(extension.PREFIX .. t), q("geoservices_" .. t)))
      if not ok then return nil, m, c end
    end
  end
  return true
end

return extension
