--- Relationships the service describes, kept where GDAL and QGIS read them:
-- the GeoPackage Related Tables Extension (OGC 18-000).
--
-- A layer resource lists each relationship class it takes part in
-- (`relationships`: id, name, relatedTableId, cardinality, role, keyField,
-- composite; the origin with role esriRelRoleOrigin and its key field, the
-- destination with esriRelRoleDestination and its foreign key). For every
-- relationship whose two tables are in the store, once, from its origin side:
--
-- * a mapping table `gpkgext_geoservices_relation_<origin>_<destination>_<id>`
--   (base_id the origin row's fid, related_id the destination row's fid),
--   registered in gpkg_extensions and named by a gpkgext_relations row whose
--   relation_name is the destination's kind, `features` or `attributes`
--   (18-000's requirement classes for a related feature table and a related
--   attributes table). Like the attachments' mapping tables it is not in
--   gpkg_contents: GDAL finds it through gpkgext_relations, and GDAL's
--   validator would refuse an attributes table without an INTEGER PRIMARY KEY;
-- * `gpkgext_geoservices_relationships`: what the service said of it (name, layers,
--   key fields, cardinality, composite) and its mapping table, for status and
--   for users.
--
-- The mapping rows are derived data: a pair is linked when the origin's key
-- equals the destination's. They are built once the store is filled and
-- rebuilt after each download (@{relink}); in between, plain-SQL triggers
-- on both tables re-link a row inserted, deleted or whose key (or fid)
-- changed, so an edit made in QGIS, GDAL or the sqlite3 shell keeps them true
-- with nothing of ours loaded. The mapping table is not a layer of the store
-- (gpkgext_geoservices_layers): capture never queues its rows as edits to upload.
-- @module geoservices.store.file.relations
-- @local
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"
local schema = require "geoservices.store.file.schema"

local relations = {}

local q, lit = schema.ident, schema.literal

relations.TABLE = "gpkgext_geoservices_relationships"
relations.DEFINITION = "http://docs.opengeospatial.org/is/18-000/18-000.html"

--- The extension's own table and its gpkg_extensions row, once per store
-- (the attachments' media relation and these share them). gpkg_extensions'
-- UNIQUE (table_name, column_name, extension_name) does not catch a second
-- row whose column_name is NULL, hence the NOT EXISTS.
relations.EXTENSION_SQL = {
  [[CREATE TABLE IF NOT EXISTS gpkgext_relations (id INTEGER PRIMARY KEY AUTOINCREMENT,
    base_table_name TEXT NOT NULL, base_primary_column TEXT NOT NULL DEFAULT 'id',
    related_table_name TEXT NOT NULL, related_primary_column TEXT NOT NULL DEFAULT 'id',
    relation_name TEXT NOT NULL, mapping_table_name TEXT NOT NULL UNIQUE)]],
  ("INSERT INTO gpkg_extensions (table_name, column_name, extension_name, definition, scope) "
    .. "SELECT 'gpkgext_relations', NULL, 'gpkg_related_tables', %s, 'read-write' WHERE NOT EXISTS (SELECT 1 FROM "
    .. "gpkg_extensions WHERE table_name = 'gpkgext_relations' AND extension_name = 'gpkg_related_tables')")
    :format(lit(relations.DEFINITION)),
}

local DESCRIPTION_SQL = [[CREATE TABLE IF NOT EXISTS gpkgext_geoservices_relationships (
  mapping_table TEXT PRIMARY KEY, relationship_id INTEGER NOT NULL, name TEXT,
  origin_layer_id INTEGER NOT NULL, origin_key_field TEXT NOT NULL,
  destination_layer_id INTEGER NOT NULL, destination_key_field TEXT NOT NULL,
  cardinality TEXT, composite INTEGER NOT NULL DEFAULT 0, description TEXT)]]

-- The spec's column named `field` (SQLite names are case-insensitive, so is
-- the match), or nil.
local function column_of(spec, field)
  if type(field) ~= "string" then return nil end
  for _, c in ipairs(spec.columns) do
    if c.name:lower() == field:lower() then return c.name end
  end
  return nil
end

local function list(meta)
  return type(meta) == "table" and type(meta.relationships) == "table" and meta.relationships or {}
end

--- The relationships of the store's layers, once each (from the origin
-- side), whose two tables are both in the store and whose key fields are
-- columns of them.
-- @tparam table specs the layers' specs (schema.layer_spec)
-- @tparam table metas the layers' resources (any order)
-- @return a list of `{id, name, origin = spec, destination = spec, origin_key, destination_key,
--   cardinality, composite, mapping}`
function relations.described(specs, metas)
  local spec_of, meta_of = {}, {}
  for _, s in ipairs(specs) do spec_of[s.id] = s end
  for _, m in ipairs(metas) do
    if math.tointeger(m.id) then meta_of[math.tointeger(m.id)] = m end
  end
  local out = {}
  for _, origin in ipairs(specs) do
    for _, r in ipairs(list(meta_of[origin.id])) do
      local id, dest_id = math.tointeger(r.id), math.tointeger(r.relatedTableId)
      local destination = dest_id and spec_of[dest_id]
      if r.role == "esriRelRoleOrigin" and id and destination then
        -- the destination's own entry names its foreign key; a service that
        -- describes only the origin side relates fields of the same name
        local dest_key = r.keyField
        for _, d in ipairs(list(meta_of[dest_id])) do
          if math.tointeger(d.id) == id and d.role == "esriRelRoleDestination" then dest_key = d.keyField end
        end
        local ok, dk = column_of(origin, r.keyField), column_of(destination, dest_key)
        if ok and dk then
          out[#out + 1] = { id = id, name = r.name, origin = origin, destination = destination, origin_key = ok,
                            destination_key = dk, cardinality = r.cardinality, composite = r.composite == true,
                            mapping = ("gpkgext_geoservices_relation_%s_%s_%d"):format(origin.table,
                              destination.table, id) }
        end
      end
    end
  end
  return out
end

-- The triggers that re-link one row of `side` ("base" or "related") of a
-- relation when QGIS, GDAL, sqlite3 or the library inserts, deletes or
-- re-keys it: the row's pairs are deleted and made again from the keys.
local function trigger_sql(rel, side)
  local map = rel.mapping
  local this, other = rel.origin, rel.destination
  local key, other_key = rel.origin_key, rel.destination_key
  local id_col, other_col = "base_id", "related_id"
  if side == "related" then
    this, other, key, other_key, id_col, other_col = other, this, other_key, key, other_col, id_col
  end
  local fid, other_fid = this.fid_column or "fid", other.fid_column or "fid"
  local function relink_new()
    return ("DELETE FROM %s WHERE %s = NEW.%s; INSERT INTO %s (%s, %s) SELECT NEW.%s, o.%s FROM %s AS o "
      .. "WHERE NEW.%s IS NOT NULL AND o.%s = NEW.%s;"):format(q(map), id_col, q(fid), q(map), id_col, other_col,
      q(fid), q(other_fid), q(other.table), q(key), q(other_key), q(key))
  end
  local name = function(event) return q(("%s_%s_%s"):format(map, side, event)) end
  return {
    ("CREATE TRIGGER %s AFTER INSERT ON %s BEGIN %s END"):format(name("insert"), q(this.table), relink_new()),
    ("CREATE TRIGGER %s AFTER UPDATE OF %s, %s ON %s BEGIN DELETE FROM %s WHERE %s = OLD.%s; %s END")
      :format(name("update"), q(key), q(fid), q(this.table), q(map), id_col, q(fid), relink_new()),
    ("CREATE TRIGGER %s AFTER DELETE ON %s BEGIN DELETE FROM %s WHERE %s = OLD.%s; END")
      :format(name("delete"), q(this.table), q(map), id_col, q(fid)),
  }
end

-- The SQL that registers one relation, its description and its triggers.
local function relation_sql(rel)
  local map, o, d = rel.mapping, rel.origin, rel.destination
  local sql = {
    ("CREATE TABLE %s (base_id INTEGER NOT NULL, related_id INTEGER NOT NULL)"):format(q(map)),
    ("CREATE INDEX %s ON %s (base_id)"):format(q(map .. "_base"), q(map)),
    ("CREATE INDEX %s ON %s (related_id)"):format(q(map .. "_related"), q(map)),
    -- the triggers and the rebuild look rows up by their key
    ("CREATE INDEX IF NOT EXISTS %s ON %s (%s)"):format(q(("geoservices_key_%s_%s"):format(o.table, rel.origin_key)),
      q(o.table), q(rel.origin_key)),
    ("CREATE INDEX IF NOT EXISTS %s ON %s (%s)"):format(q(("geoservices_key_%s_%s"):format(d.table,
      rel.destination_key)), q(d.table), q(rel.destination_key)),
    ("INSERT INTO gpkg_extensions (table_name, column_name, extension_name, definition, scope) "
      .. "VALUES (%s, NULL, 'gpkg_related_tables', %s, 'read-write')"):format(lit(map), lit(relations.DEFINITION)),
    ("INSERT INTO gpkgext_relations (base_table_name, base_primary_column, related_table_name, "
      .. "related_primary_column, relation_name, mapping_table_name) VALUES (%s, %s, %s, %s, %s, %s)")
      :format(lit(o.table), lit(o.fid_column or "fid"), lit(d.table), lit(d.fid_column or "fid"),
        lit(d.data_type == "attributes" and "attributes" or "features"), lit(map)),
    ("INSERT INTO gpkgext_geoservices_relationships (mapping_table, relationship_id, name, origin_layer_id, "
      .. "origin_key_field, destination_layer_id, destination_key_field, cardinality, composite, description) "
      .. "VALUES (%s, %d, %s, %d, %s, %d, %s, %s, %d, %s)"):format(lit(map), rel.id,
      type(rel.name) == "string" and lit(rel.name) or "NULL", o.id, lit(rel.origin_key), d.id,
      lit(rel.destination_key), type(rel.cardinality) == "string" and lit(rel.cardinality) or "NULL",
      rel.composite and 1 or 0, lit(("%s (%s) relates %s to %s by %s = %s"):format(tostring(rel.name),
        tostring(rel.cardinality), o.table, d.table, rel.origin_key, rel.destination_key))),
  }
  for _, side in ipairs{ "base", "related" } do
    for _, s in ipairs(trigger_sql(rel, side)) do sql[#sql + 1] = s end
  end
  return sql
end

--- The SQL that keeps the relationships of a new store: run once, after
-- its layers' tables are made (and filled: the mapping rows are made by
-- @{relink}).
-- @tparam table specs the layers' specs
-- @tparam table metas the layers' resources
-- @treturn table SQL statements (none when no relationship has both tables in the store)
function relations.store_sql(specs, metas)
  local rels = relations.described(specs, metas)
  if #rels == 0 then return {} end
  local sql = { DESCRIPTION_SQL }
  for _, s in ipairs(relations.EXTENSION_SQL) do sql[#sql + 1] = s end
  for _, rel in ipairs(rels) do
    for _, s in ipairs(relation_sql(rel)) do sql[#sql + 1] = s end
  end
  return sql
end

--- Makes every mapping table true again from the key fields (after a fill
-- or a download, inside its transaction).
-- @param st the store
-- @return true, or nil, err
function relations.relink(st)
  local has = st.db:rows("SELECT 1 AS yes FROM pragma_table_list WHERE name = 'gpkgext_geoservices_relationships'")
  if not (has and has[1]) then return true end
  local rows, msg, code = st.db:rows("SELECT r.mapping_table, r.origin_key_field, r.destination_key_field, "
    .. "g.base_table_name, g.base_primary_column, g.related_table_name, g.related_primary_column "
    .. "FROM gpkgext_geoservices_relationships AS r JOIN gpkgext_relations AS g ON g.mapping_table_name = "
      .. "r.mapping_table")
  local ok = rows ~= nil
  for _, r in ipairs(rows or {}) do
    ok, msg, code = st.db:run("DELETE FROM " .. q(r.mapping_table))
    if ok then
      ok, msg, code = st.db:run(("INSERT INTO %s (base_id, related_id) SELECT o.%s, d.%s FROM %s AS o JOIN %s AS d "
        .. "ON d.%s = o.%s"):format(q(r.mapping_table), q(r.base_primary_column), q(r.related_primary_column),
        q(r.base_table_name), q(r.related_table_name), q(r.destination_key_field), q(r.origin_key_field)))
    end
    if not ok then break end
  end
  if not ok then return nil, errors.new("io", ("%s: %s"):format(st.path, msg), { code = code }) end
  return true
end

--- What the store keeps of the service's relationships (for status and
-- users): `{mapping_table, relationship_id, name, origin_layer_id, origin_key_field, destination_layer_id,
-- destination_key_field, cardinality, composite, links}`, links the mapping rows.
-- @return the list (empty for a store without), or nil, err
function relations.list(st)
  -- (pragma_table_list: a read-only store made before format 10 has it as a temporary view)
  local has = st.db:rows("SELECT 1 AS yes FROM pragma_table_list WHERE name = 'gpkgext_geoservices_relationships'")
  if not (has and has[1]) then return json.array() end
  local rows, msg, code = st.db:rows("SELECT * FROM gpkgext_geoservices_relationships ORDER BY relationship_id")
  if not rows then return nil, errors.new("io", ("%s: %s"):format(st.path, msg), { code = code }) end
  for _, r in ipairs(rows) do
    local n = st.db:rows("SELECT count(*) AS n FROM " .. q(r.mapping_table))
    r.links = n and n[1] and n[1].n
    r.composite = r.composite == 1
  end
  return rows
end

return relations
