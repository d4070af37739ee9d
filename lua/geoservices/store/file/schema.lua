--- The replica store's schema: what a GeoPackage (OGC 12-128r18) made from a
-- feature service's layer resources looks like. Pure: layer metadata in, SQL
-- text and layer specs out; no I/O but PROJ's database, read for the SRS rows
-- (geoservices.store.file.srs). Internal (geoservices.store uses it).
--
-- Choices, written down once:
-- * A feature table's `INTEGER PRIMARY KEY` is a local fid (`fid`,
--   AUTOINCREMENT: positive, never reused), the id GDAL and QGIS know a
--   feature by; the layer's `esriFieldTypeOID` field is a column of its own
--   (indexed), holding the server's OBJECTID, NULL for a local add until
--   the synchronization that sends it records the server's. A feature
--   added locally and one the server numbers alike never meet.
-- * The GlobalID field is `TEXT(38)`, found through a plain index on the
--   whole text (schema.gid_index_sql; not UNIQUE), which the store keeps in
--   one spelling, "{UPPERCASE}" (csrc/store/apply_guid.c): every lookup is a
--   seek whatever the GlobalIDs look like (sequential GUIDs share their first
--   8 or 16 hex digits: an index on a prefix made each lookup a scan of the
--   GUIDs sharing it, issue 38), and GDAL's and QGIS's own `GlobalID = '...'`
--   use it too. A downloaded add or update writes the server's columns of
--   the row of its GlobalID, under its fid (an upsert: a column the user
--   added keeps its value, csrc/store/apply_layers.c); a row inserted with
--   another's GlobalID (a paste in QGIS) is not refused by the index and gets
--   one of its own (geoservices.store.edits.capture).
-- * `esriFieldTypeDate` is `DATETIME`, ISO 8601 text in UTC with
--   milliseconds (`2023-11-14T22:13:20.000Z`), as the GeoPackage
--   specification asks, so GDAL and QGIS show dates; `store:get` gives epoch
--   milliseconds back, as the server sends them.
-- * Geometry columns are declared with the layer's widest type: point
--   `POINT`, multipoint `MULTIPOINT`, polyline `MULTILINESTRING`, polygon
--   `MULTIPOLYGON`, and every feature is written as that type (a one-path
--   polyline is a MultiLineString of one; csrc/store/geom.h says why); z and
--   m flags from the layer's hasZ / hasM. The first true curve (a circular
--   arc) a line or polygon layer receives turns its column into `MULTICURVE`
--   or `MULTISURFACE`, which admit the straight features already there
--   (csrc/store/apply.h): a layer without curves keeps a core type.
-- * Fields keep what the layer says of them: a string's length (`TEXT(n)`),
--   its default (not NOT NULL: see layer_spec), and
--   in the GeoPackage schema extension (`gpkg_data_columns`,
--   `gpkg_data_column_constraints`) its alias and its coded-value or range
--   domain, which GDAL lists as field domains and QGIS shows as value maps
--   and ranges.
-- * The tables meant for users are prefixed `geoservices_` and registered in
--   gpkg_contents (the sync log, the conflicts, the pending and refused edits,
--   the attachments); the library's own are an extension's,
--   `gpkgext_geoservices_*` (geoservices.store.file.extension), which GDAL and
--   QGIS do not offer as layers.
-- @module geoservices.store.file.schema
-- @local
local srs = require "geoservices.store.file.srs"

local schema = {}

--- The version of our own tables (gpkgext_geoservices_replica.format): 1 as first
-- released; 2 adds the base of queued and failed edits and the conflicts
-- table (see @{MIGRATIONS}); 3 the capture triggers (geoservices.store.edits.capture,
-- geoservices.store.file.migrate); 4 attachment updates in the attachment queue,
-- CRS rows with their WKT, related-table relations (geoservices.store.file.migrate4);
-- 5 conflicts readable and drawn: their layer, kind, policy, differences and
-- local geometry, the table of differing fields (geoservices.store.edits.conflicts).
-- 6 the GlobalID index on the whole GlobalID (@{gid_index_sql}); 7 a
-- GlobalID made for an attachment added without one (QGIS's form, GDAL,
-- SQL: @{ATTACHMENT_GID_COLUMN}); 8 the queue and the refused edits as
-- read-only views GDAL and QGIS load (@{EDIT_VIEWS_SQL}); 9 the QGIS project
-- in the file and the layers' default styles from the service's drawingInfo
-- (geoservices.store.qgis.project, geoservices.store.qgis.layer_styles); 10
-- the library's own tables named and registered as a GeoPackage extension's
-- (gpkgext_geoservices_*, geoservices.store.file.extension), not offered as layers;
-- 11 the default styles with the fields the service fills in read-only in
-- QGIS's forms (geoservices.store.qgis.layer_styles).
schema.FORMAT = 11

--- The local edits waiting (geoservices_pending) and those the server
-- refused (geoservices_rejected) as views registered as attributes, so that
-- GDAL and QGIS load them (read only: a view takes no edit) beside the
-- conflicts layer; the tables themselves stay the library's, unregistered.
-- Every column a plain column reference, so that each has its declared type
-- (GeoPackage requirement 5). Run again, it changes nothing.
schema.EDIT_VIEWS_SQL = {
  [[CREATE VIEW IF NOT EXISTS geoservices_pending AS SELECT e.seq AS fid, l.table_name AS layer, e.op AS edit,
    e.global_id AS GlobalID, e.created_at AS made_at, e.attempt_id AS sent_in_attempt
    FROM gpkgext_geoservices_edits AS e LEFT JOIN gpkgext_geoservices_layers AS l ON l.layer_id = e.layer_id]],
  [[INSERT OR IGNORE INTO gpkg_contents (table_name, data_type, identifier, description) VALUES ('geoservices_pending',
    'attributes', 'geoservices_pending', 'local edits waiting for the next sync, read only: geoservices pending '
    || 'shows what each sends, geoservices discard drops one (lua-geoservices)')]],
  [[CREATE VIEW IF NOT EXISTS geoservices_rejected AS SELECT f.seq AS fid, l.table_name AS layer, f.op AS edit,
    f.global_id AS GlobalID, f.code AS code, f.description AS reason, f.failed_at AS failed_at
    FROM gpkgext_geoservices_failed_edits AS f LEFT JOIN gpkgext_geoservices_layers AS l ON l.layer_id = f.layer_id]],
  [[INSERT OR IGNORE INTO gpkg_contents (table_name, data_type, identifier, description) VALUES ('geoservices_rejected',
    'attributes', 'geoservices_rejected', 'local edits the server refused, with its code and reason, read only '
    || '(lua-geoservices)')]],
}

--- A new GlobalID in SQL (SQLite's core functions only): a version 4 UUID
-- (RFC 4122: the version nibble 4, the variant 8, 9, A or B) in the form
-- `{XXXXXXXX-XXXX-4XXX-YXXX-XXXXXXXXXXXX}`, upper case.
schema.NEW_GLOBAL_ID = "'{' || hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || "
  .. "substr(hex(randomblob(2)), 2) || '-' || substr('89AB', 1 + (abs(random()) % 4), 1) || "
  .. "substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)) || '}'"

--- The media table's global_id column: nullable (no NOT NULL, no DEFAULT
-- that GDAL and QGIS would show as a text to fill in), so that an attachment
-- inserted without one (QGIS's relation editor, GDAL, SQL fill in only name,
-- content type and bytes) is taken; @{ATTACHMENT_GID_TRIGGER} gives it one.
schema.ATTACHMENT_GID_COLUMN = "global_id TEXT UNIQUE"

--- The trigger making an attachment's GlobalID, as the capture trigger
-- makes a feature's (geoservices.store.edits.capture).
--- The index of the attachments the server never gave that name a parent
-- (a photo QGIS's form added): the scan linking them to their feature at
-- each open and sync (geoservices.store.file.attachments.link_orphans)
-- searches it alone, never reading each attachment row (their pages hold
-- part of each photo's bytes: 0.24 s an open at 100,000 photos). A store
-- made before gets it when opened (geoservices.store.file.migrate.refresh).
schema.ATTACHMENT_UNLINKED_NAME = "geoservices_attachments_unlinked"
schema.ATTACHMENT_UNLINKED_INDEX = "CREATE INDEX IF NOT EXISTS " .. schema.ATTACHMENT_UNLINKED_NAME
  .. " ON geoservices_attachments (parent_global_id, layer_id, attachment_id) WHERE attachment_id IS NULL "
  .. "AND parent_global_id IS NOT NULL"

schema.ATTACHMENT_GID_TRIGGER = ("CREATE TRIGGER geoservices_attachments_global_id AFTER INSERT ON "
  .. "geoservices_attachments WHEN NEW.global_id IS NULL OR trim(NEW.global_id) = '' BEGIN "
  .. "UPDATE geoservices_attachments SET global_id = %s WHERE id = NEW.id; END"):format(schema.NEW_GLOBAL_ID)

schema.APPLICATION_ID = 0x47504B47 -- "GPKG"
schema.USER_VERSION = 10300

-- Esri field type -> SQL type, store column type (csrc/store/apply.h). The
-- GeoPackage types of the same width (12-128r18 table 1: SMALLINT 16 bits,
-- MEDIUMINT 32, INTEGER 64, FLOAT 32), so GDAL and QGIS know the range.
local FIELD_TYPES = {
  esriFieldTypeOID = { "INTEGER", "integer" },
  esriFieldTypeInteger = { "MEDIUMINT", "integer" },
  esriFieldTypeSmallInteger = { "SMALLINT", "integer" },
  esriFieldTypeBigInteger = { "INTEGER", "integer" },
  esriFieldTypeDouble = { "REAL", "real" },
  esriFieldTypeSingle = { "FLOAT", "real" },
  esriFieldTypeString = { "TEXT", "text" },
  esriFieldTypeGUID = { "TEXT(38)", "guid" },
  esriFieldTypeGlobalID = { "TEXT(38)", "guid" },
  esriFieldTypeDate = { "DATETIME", "date" },
  esriFieldTypeDateOnly = { "DATE", "text" },
  esriFieldTypeTimeOnly = { "TEXT", "text" },
  esriFieldTypeTimestampOffset = { "TEXT", "text" },
  esriFieldTypeBlob = { "BLOB", "blob" },
  esriFieldTypeXML = { "TEXT", "text" },
  esriFieldTypeRaster = { "BLOB", "blob" },
}

-- Esri geometry type -> store geometry kind, GeoPackage column type.
local GEOMETRY_TYPES = {
  esriGeometryPoint = { "point", "POINT" },
  esriGeometryMultipoint = { "multipoint", "MULTIPOINT" },
  esriGeometryPolyline = { "polyline", "MULTILINESTRING" },
  esriGeometryPolygon = { "polygon", "MULTIPOLYGON" },
}
schema.GEOMETRY_TYPES = GEOMETRY_TYPES

-- The gpkg_spatial_ref_sys rows: geoservices.store.file.srs (WKT from the
-- service or PROJ's database).
--- The three rows every GeoPackage has (12-128r18 requirement 11).
schema.REQUIRED_SRS = srs.REQUIRED
--- The gpkg_spatial_ref_sys row of a layer's spatialReference (geoservices.store.file.srs.row).
schema.srs_row = srs.row

--- SQL quoting of an identifier.
-- @string name the identifier
-- @treturn string `"name"` with inner quotes doubled
function schema.ident(name)
  return '"' .. name:gsub('"', '""') .. '"'
end

--- The SQL condition "the GlobalID in `column_sql` is `value_sql`" that
-- SQLite answers with a seek in the GlobalID index (@{gid_index_sql}): the
-- column as the store keeps it, equal to the value in the same spelling
-- (shared.normalize_gid). The C core writes the same condition
-- (geoservices_store_put_gid_match, csrc/store/apply_layers.c).
function schema.gid_match(column_sql, value_sql)
  return ("%s = %s"):format(column_sql, value_sql)
end

--- The statement creating a layer's GlobalID index: the whole GlobalID, not
-- UNIQUE (a pasted feature is not refused: its insert trigger gives it a
-- GlobalID of its own), nothing but the column so that every SQLite reader
-- keeps it. IF NOT EXISTS: an older store gets it when opened.
function schema.gid_index_sql(spec)
  return ("CREATE INDEX IF NOT EXISTS %s ON %s (%s)"):format(schema.ident(spec.table .. "_" .. spec.globalid),
    schema.ident(spec.table), schema.ident(spec.globalid))
end

--- Whether `sql` (sqlite_master's text of a layer's GlobalID index) is the
-- index @{gid_index_sql} makes; an older store's (on the GlobalID's first 8
-- hex digits, formats 4 and 5) is made again (geoservices.store.file.migrate).
function schema.is_gid_index(sql, spec)
  if type(sql) ~= "string" then return false end
  local tail = (" ON %s (%s)"):format(schema.ident(spec.table), schema.ident(spec.globalid))
  return sql:sub(-#tail) == tail
end

--- The statement removing, of the rows that share a GlobalID, all but the
-- last written (highest rowid): a table filled without looking each
-- GlobalID up (store.create_from) ends as INSERT OR REPLACE would have left
-- it. One pass over the GlobalID index in its order (the groups, their
-- largest rowid from the index itself), then a seek for each repeated
-- GlobalID: linear in the rows whatever the GlobalIDs look like.
function schema.drop_repeated_gids_sql(spec)
  local t, g = schema.ident(spec.table), schema.ident(spec.globalid)
  return ("DELETE FROM %s WHERE rowid IN (SELECT a.rowid FROM (SELECT %s AS gid, max(rowid) AS keep FROM %s "
    .. "GROUP BY %s HAVING count(*) > 1) AS d JOIN %s AS a ON %s WHERE a.rowid <> d.keep)"):format(t, g, t, g, t,
      schema.gid_match("a." .. g, "d.gid"))
end

--- SQL quoting of a text literal.
-- @string s the text
-- @treturn string `'s'` with inner quotes doubled
function schema.literal(s)
  return "'" .. tostring(s):gsub("'", "''") .. "'"
end

local RESERVED_PREFIXES = { "gpkg_", "rtree_", "sqlite_", "geoservices_" }

-- A table name for a layer: its name with anything but letters, digits and
-- underscores replaced, unique in the store, never one of the reserved
-- prefixes.
local function table_name(layer, taken)
  local name = tostring(layer.name or ""):gsub("[^%w_]", "_")
  if name == "" or name:match("^%d") then name = "layer_" .. name end
  for _, prefix in ipairs(RESERVED_PREFIXES) do
    if name:lower():sub(1, #prefix) == prefix then name = "l_" .. name end
  end
  if name == "layer_" then name = "layer_" .. tostring(layer.id) end
  local base = name
  if taken[name:lower()] then name = base .. "_" .. tostring(layer.id) end
  local n = 2
  while taken[name:lower()] do
    name = ("%s_%d_%d"):format(base, layer.id, n)
    n = n + 1
  end
  taken[name:lower()] = true
  return name
end

-- ---- the schema extension (12-128r18 F.9): aliases and domains -------------

-- A number as SQL text, every bit of it.
local function number_sql(v)
  if math.type(v) == "integer" then return tostring(v) end
  local i = math.tointeger(v)
  if i then return tostring(i) end
  return ("%.17g"):format(v)
end

-- Epoch milliseconds as the DATETIME text the store writes (csrc/store/isotime.c).
local function iso_of_ms(ms)
  ms = math.tointeger(ms)
  if not ms then return nil end
  local ok, text = pcall(os.date, "!%Y-%m-%dT%H:%M:%S", ms // 1000)
  if not ok or #text ~= 19 or text:sub(1, 1) == "-" then return nil end -- beyond what the format holds
  return ("%s.%03dZ"):format(text, ms % 1000)
end

local NUMERIC = { integer = true, real = true }

-- The DEFAULT clause of a field's defaultValue (nil when none fits the column).
local function default_sql(f, column_type)
  local v = f.defaultValue
  if type(v) == "number" and v == v and NUMERIC[column_type] then return number_sql(v) end
  if type(v) == "number" and column_type == "date" then
    local iso = iso_of_ms(v)
    return iso and schema.literal(iso)
  end
  if type(v) == "string" and column_type == "text" then return schema.literal(v) end
end

-- The gpkg_data_column_constraints rows of an Esri domain: {type, value,
-- min, max, description}; nil for what has no GeoPackage form (a range on
-- text or dates, an empty or inverted range, an inherited domain).
local function constraint_rows(domain, column_type)
  if type(domain) ~= "table" or type(domain.name) ~= "string" or domain.name == "" then return nil end
  local rows = {}
  local description = type(domain.description) == "string" and domain.description ~= "" and domain.description
  if domain.type == "codedValue" and type(domain.codedValues) == "table" then
    if not (NUMERIC[column_type] or column_type == "text") then return nil end
    for _, cv in ipairs(domain.codedValues) do
      local code = type(cv.code) == "number" and number_sql(cv.code) or type(cv.code) == "string" and cv.code
      if code then rows[#rows + 1] = { type = "enum", value = code, description = tostring(cv.name or code) } end
    end
    -- GDAL keeps a coded domain's own description in a row of this name
    if description and #rows > 0 then
      rows[#rows + 1] = { type = "enum", value = "", description = description,
                          name = "_" .. domain.name .. "_domain_description" }
    end
  elseif domain.type == "range" and type(domain.range) == "table" and NUMERIC[column_type] then
    local min, max = domain.range[1], domain.range[2]
    if type(min) ~= "number" or type(max) ~= "number" or min ~= min or max ~= max or min >= max then
      return nil
    end
    rows[1] = { type = "range", min = min, max = max, description = description or nil }
  end
  return #rows > 0 and rows or nil
end

-- The SQL of a layer's rows in the schema extension: its columns' aliases
-- and domains (a domain shared by several fields or layers is written once).
local function data_column_sql(spec)
  local lit, sql, named = schema.literal, {}, {}
  for _, d in ipairs(spec.data_columns or {}) do
    for _, r in ipairs(d.constraints or {}) do
      sql[#sql + 1] = ("INSERT OR IGNORE INTO gpkg_data_column_constraints (constraint_name, constraint_type, "
        .. "value, min, min_is_inclusive, max, max_is_inclusive, description) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)")
        :format(lit(r.name or d.constraint), lit(r.type), r.value and lit(r.value) or "NULL",
          r.min and number_sql(r.min) or "NULL", r.min and "1" or "NULL", r.max and number_sql(r.max) or "NULL",
          r.max and "1" or "NULL", r.description and lit(r.description) or "NULL")
    end
    -- the alias as the title; as the name too (a short name, unique in the
    -- table) the first time it comes: readers take one or the other
    local name = d.alias and not named[d.alias] and d.alias
    if name then named[name] = true end
    sql[#sql + 1] = ("INSERT INTO gpkg_data_columns (table_name, column_name, name, title, constraint_name) "
      .. "VALUES (%s, %s, %s, %s, %s)"):format(lit(spec.table), lit(d.column), name and lit(name) or "NULL",
        d.alias and lit(d.alias) or "NULL", d.constraints and lit(d.constraint) or "NULL")
  end
  return sql
end
schema.data_column_sql = data_column_sql

local function find_field(fields, pred)
  for _, f in ipairs(fields) do
    if pred(f) then return f end
  end
end

--- The spec of one layer's table, from its layer resource
-- (`{service}/FeatureServer/{id}?f=json`: id, name, type, geometryType,
-- spatialReference or extent.spatialReference, objectIdField,
-- globalIdField, fields).
-- @tparam table layer the layer resource
-- @tparam table taken table names already used (lower case keys), updated
-- @treturn[1] table the spec: id, name, table, data_type ("features" or "attributes"),
--   geometry_kind, geometry_type (GeoPackage), geometry_column, esri_geometry_type, has_z, has_m,
--   spatial_reference, oid, globalid, columns = {{name, type, sql, esri_type}...}
-- @return[2] nil
-- @treturn[2] string why the layer cannot be stored
function schema.layer_spec(layer, taken)
  if type(layer) ~= "table" then return nil, "a layer's metadata must be a table" end
  local id = math.tointeger(layer.id)
  if not id or id < 0 then return nil, "a layer's id must be a non-negative integer" end
  local fields = type(layer.fields) == "table" and layer.fields or {}
  local where = ("layer %d"):format(id)
  local gid_field = layer.globalIdField and find_field(fields, function(f) return f.name == layer.globalIdField end)
    or find_field(fields, function(f) return f.type == "esriFieldTypeGlobalID" end)
  if not gid_field then
    return nil, where .. " has no GlobalID field (a replica needs GlobalIDs)"
  end
  local oid_field = layer.objectIdField and find_field(fields, function(f) return f.name == layer.objectIdField end)
    or find_field(fields, function(f) return f.type == "esriFieldTypeOID" end)
  local geometry = layer.geometryType and GEOMETRY_TYPES[layer.geometryType]
  if layer.geometryType and not geometry and layer.type ~= "Table" then
    return nil, ("%s: geometry type %s is not supported"):format(where, tostring(layer.geometryType))
  end
  if layer.type == "Table" then geometry = nil end
  local spec = {
    id = id, name = layer.name or ("layer " .. id), table = table_name(layer, taken),
    data_type = geometry and "features" or "attributes",
    geometry_kind = geometry and geometry[1] or "none", geometry_type = geometry and geometry[2],
    esri_geometry_type = layer.geometryType,
    -- the column's z and m flags: 1 (mandatory) for the layer's hasZ / hasM,
    -- and the C core writes every blob of the column with them
    has_z = geometry ~= nil and layer.hasZ == true, has_m = geometry ~= nil and layer.hasM == true,
    spatial_reference = layer.spatialReference or (type(layer.extent) == "table" and layer.extent.spatialReference),
    globalid = gid_field.name, oid = oid_field and oid_field.name,
    columns = {}, data_columns = {}, description = type(layer.description) == "string" and layer.description or "",
  }
  local names = {}
  local function add_column(f)
    if type(f.name) ~= "string" or f.name == "" or f.name:find('"', 1, true) then
      return nil, ("%s: bad field name %s"):format(where, tostring(f.name))
    end
    if names[f.name:lower()] then return nil, ("%s: field %s twice"):format(where, f.name) end
    names[f.name:lower()] = true
    local t = FIELD_TYPES[f.type] or { "TEXT", "text" }
    local sql = t[1]
    if f.type == "esriFieldTypeString" and math.tointeger(f.length) and f.length > 0 then
      sql = ("TEXT(%d)"):format(f.length)
    end
    local column = { name = f.name, type = t[2], sql = sql, esri_type = f.type }
    -- what the server requires of an edit is kept (the layer's metadata) and
    -- checked when the edit is synchronized, not declared NOT NULL: the
    -- server's own data may hold nulls there, and a download must never be
    -- refused by the file, nor a QGIS user's edit aborted by it
    if f.nullable == false and f.editable ~= false and f ~= oid_field then column.required = true end
    column.default = default_sql(f, t[2])
    spec.columns[#spec.columns + 1] = column
    local alias = type(f.alias) == "string" and f.alias ~= "" and f.alias ~= f.name and f.alias or nil
    local constraints = constraint_rows(f.domain, t[2])
    if alias or constraints then
      spec.data_columns[#spec.data_columns + 1] = { column = f.name, alias = alias, constraints = constraints,
                                                    constraint = constraints and f.domain.name }
    end
    return true
  end
  if oid_field then
    local ok, err = add_column(oid_field)
    if not ok then return nil, err end
  end
  for _, f in ipairs(fields) do
    if f ~= oid_field and f.type ~= "esriFieldTypeGeometry" then
      local ok, err = add_column(f)
      if not ok then return nil, err end
    end
  end
  if geometry then
    local col = "geom"
    while names[col] do col = "_" .. col end
    spec.geometry_column = col
  end
  local fid = "fid"
  while names[fid] do fid = "_" .. fid end
  spec.fid_column = fid
  return spec
end

--- The SQL that creates one layer's table, its registration and (for
-- features) its R-tree index with the standard triggers (12-128r18 F.3).
-- @tparam table spec from @{layer_spec}
-- @int srs_id the layer's srs_id
-- @treturn table SQL statements
function schema.layer_sql(spec, srs_id)
  local q, lit = schema.ident, schema.literal
  local t = spec.table
  local fid = spec.fid_column or "fid"
  local defs = { q(fid) .. " INTEGER PRIMARY KEY AUTOINCREMENT" }
  if spec.geometry_column then defs[2] = q(spec.geometry_column) .. " " .. spec.geometry_type end
  for _, c in ipairs(spec.columns) do
    local def = q(c.name) .. " " .. c.sql
    if c.default then def = def .. " DEFAULT " .. c.default end
    defs[#defs + 1] = def
  end
  local sql = {
    ("CREATE TABLE %s (%s)"):format(q(t), table.concat(defs, ", ")),
    ("INSERT INTO gpkg_contents (table_name, data_type, identifier, description, srs_id) VALUES (%s, %s, %s, %s, %s)")
      :format(lit(t), lit(spec.data_type), lit(spec.name), lit(spec.description),
        spec.geometry_column and tostring(srs_id) or "NULL"),
  }
  sql[#sql + 1] = schema.gid_index_sql(spec)
  if spec.oid then -- a delete by OBJECTID (servers that send them) finds its row
    sql[#sql + 1] = ("CREATE INDEX %s ON %s (%s)"):format(q(t .. "_" .. spec.oid), q(t), q(spec.oid))
  end
  if spec.geometry_column then
    local g, id = spec.geometry_column, fid
    local rtree = ("rtree_%s_%s"):format(t, g)
    local qg, qid, qr, qt = q(g), q(id), q(rtree), q(t)
    local bounds = ("NEW.%s, ST_MinX(NEW.%s), ST_MaxX(NEW.%s), ST_MinY(NEW.%s), ST_MaxY(NEW.%s)")
      :format(qid, qg, qg, qg, qg)
    local function trigger(suffix, body)
      return ("CREATE TRIGGER %s %s"):format(q(rtree .. "_" .. suffix), body)
    end
    sql[#sql + 1] = ("INSERT INTO gpkg_geometry_columns (table_name, column_name, geometry_type_name, srs_id, z, m) "
      .. "VALUES (%s, %s, %s, %d, %d, %d)"):format(lit(t), lit(g), lit(spec.geometry_type), srs_id,
        spec.has_z and 1 or 0, spec.has_m and 1 or 0)
    sql[#sql + 1] = ("INSERT INTO gpkg_extensions (table_name, column_name, extension_name, definition, scope) "
      .. "VALUES (%s, %s, 'gpkg_rtree_index', 'http://www.geopackage.org/spec120/#extension_rtree', 'write-only')")
      :format(lit(t), lit(g))
    sql[#sql + 1] = ("CREATE VIRTUAL TABLE %s USING rtree(id, minx, maxx, miny, maxy)"):format(qr)
    sql[#sql + 1] = trigger("insert", ("AFTER INSERT ON %s WHEN (NEW.%s NOT NULL AND NOT ST_IsEmpty(NEW.%s)) "
      .. "BEGIN INSERT OR REPLACE INTO %s VALUES (%s); END"):format(qt, qg, qg, qr, bounds))
    sql[#sql + 1] = trigger("update1", ("AFTER UPDATE OF %s ON %s WHEN OLD.%s = NEW.%s AND "
      .. "(NEW.%s NOTNULL AND NOT ST_IsEmpty(NEW.%s)) BEGIN INSERT OR REPLACE INTO %s VALUES (%s); END")
      :format(qg, qt, qid, qid, qg, qg, qr, bounds))
    sql[#sql + 1] = trigger("update2", ("AFTER UPDATE OF %s ON %s WHEN OLD.%s = NEW.%s AND "
      .. "(NEW.%s ISNULL OR ST_IsEmpty(NEW.%s)) BEGIN DELETE FROM %s WHERE id = OLD.%s; END")
      :format(qg, qt, qid, qid, qg, qg, qr, qid))
    sql[#sql + 1] = trigger("update3", ("AFTER UPDATE ON %s WHEN OLD.%s != NEW.%s AND "
      .. "(NEW.%s NOTNULL AND NOT ST_IsEmpty(NEW.%s)) BEGIN DELETE FROM %s WHERE id = OLD.%s; "
      .. "INSERT OR REPLACE INTO %s VALUES (%s); END"):format(qt, qid, qid, qg, qg, qr, qid, qr, bounds))
    sql[#sql + 1] = trigger("update4", ("AFTER UPDATE ON %s WHEN OLD.%s != NEW.%s AND "
      .. "(NEW.%s ISNULL OR ST_IsEmpty(NEW.%s)) BEGIN DELETE FROM %s WHERE id IN (OLD.%s, NEW.%s); END")
      :format(qt, qid, qid, qg, qg, qr, qid, qid))
    sql[#sql + 1] = trigger("delete", ("AFTER DELETE ON %s WHEN OLD.%s NOT NULL "
      .. "BEGIN DELETE FROM %s WHERE id = OLD.%s; END"):format(qt, qg, qr, qid))
  end
  for _, s in ipairs(data_column_sql(spec)) do sql[#sql + 1] = s end
  return sql
end

-- local edits the server holds other values for (a newer edit of another
-- replica): never sent again; what was sent, its base and the server's values
local CONFLICTS_SQL = [[CREATE TABLE geoservices_conflicts (seq INTEGER PRIMARY KEY, layer_id INTEGER NOT NULL,
    op TEXT NOT NULL, global_id TEXT NOT NULL, feature TEXT, base TEXT, server TEXT, description TEXT,
    attempt_id INTEGER, detected_at TEXT NOT NULL)]]

--- What format 3 adds to the conflicts table: the outcome of each (what
-- became of the local edit: "server_kept", the server's version stays and
-- the local one is kept here), and its registration in gpkg_contents as an
-- attributes table, so that GDAL and QGIS list it beside the layers.
schema.CONFLICTS_FORMAT_3 = {
  "ALTER TABLE geoservices_conflicts ADD COLUMN outcome TEXT",
  -- those kept before: the server's values stayed, the edit was not sent again
  "UPDATE geoservices_conflicts SET outcome = 'server_kept'",
  [[INSERT INTO gpkg_contents (table_name, data_type, identifier, description)
    VALUES ('geoservices_conflicts', 'attributes', 'geoservices_conflicts',
    'local edits that lost to the server''s version: the local feature, the server''s, when, and what became of it '
    || '(lua-geoservices)')]],
}

--- The GeoPackage core tables (12-128r18 1.1.2, 1.1.3, 2.1.5) and our own.
schema.BASE_SQL = {
  ("PRAGMA application_id = %d"):format(schema.APPLICATION_ID),
  ("PRAGMA user_version = %d"):format(schema.USER_VERSION),
  [[CREATE TABLE gpkg_spatial_ref_sys (srs_name TEXT NOT NULL, srs_id INTEGER NOT NULL PRIMARY KEY,
    organization TEXT NOT NULL, organization_coordsys_id INTEGER NOT NULL, definition TEXT NOT NULL,
    description TEXT)]],
  [[CREATE TABLE gpkg_contents (table_name TEXT NOT NULL PRIMARY KEY, data_type TEXT NOT NULL,
    identifier TEXT UNIQUE, description TEXT DEFAULT '',
    last_change DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    min_x DOUBLE, min_y DOUBLE, max_x DOUBLE, max_y DOUBLE, srs_id INTEGER,
    CONSTRAINT fk_gc_r_srs_id FOREIGN KEY (srs_id) REFERENCES gpkg_spatial_ref_sys(srs_id))]],
  [[CREATE TABLE gpkg_geometry_columns (table_name TEXT NOT NULL, column_name TEXT NOT NULL,
    geometry_type_name TEXT NOT NULL, srs_id INTEGER NOT NULL, z TINYINT NOT NULL, m TINYINT NOT NULL,
    CONSTRAINT pk_geom_cols PRIMARY KEY (table_name, column_name),
    CONSTRAINT uk_gc_table_name UNIQUE (table_name),
    CONSTRAINT fk_gc_tn FOREIGN KEY (table_name) REFERENCES gpkg_contents(table_name),
    CONSTRAINT fk_gc_srs FOREIGN KEY (srs_id) REFERENCES gpkg_spatial_ref_sys (srs_id))]],
  [[CREATE TABLE gpkg_extensions (table_name TEXT, column_name TEXT, extension_name TEXT NOT NULL,
    definition TEXT NOT NULL, scope TEXT NOT NULL,
    CONSTRAINT ge_tce UNIQUE (table_name, column_name, extension_name))]],
  -- the schema extension (12-128r18 F.9): aliases and domains, as GDAL writes it
  [[CREATE TABLE gpkg_data_columns (table_name TEXT NOT NULL, column_name TEXT NOT NULL, name TEXT, title TEXT,
    description TEXT, mime_type TEXT, constraint_name TEXT,
    CONSTRAINT pk_gdc PRIMARY KEY (table_name, column_name), CONSTRAINT gdc_tn UNIQUE (table_name, name))]],
  [[CREATE TABLE gpkg_data_column_constraints (constraint_name TEXT NOT NULL, constraint_type TEXT NOT NULL,
    value TEXT, min NUMERIC, min_is_inclusive BOOLEAN, max NUMERIC, max_is_inclusive BOOLEAN, description TEXT,
    CONSTRAINT gdcc_ntv UNIQUE (constraint_name, constraint_type, value))]],
  [[INSERT INTO gpkg_extensions (table_name, column_name, extension_name, definition, scope) VALUES
    ('gpkg_data_columns', NULL, 'gpkg_schema', 'http://www.geopackage.org/spec121/#extension_schema', 'read-write'),
    ('gpkg_data_column_constraints', NULL, 'gpkg_schema', 'http://www.geopackage.org/spec121/#extension_schema',
     'read-write')]],
  -- the replica: one row
  [[CREATE TABLE gpkgext_geoservices_replica (id INTEGER PRIMARY KEY CHECK (id = 1), format INTEGER NOT NULL,
    service TEXT, replica_id TEXT, replica_name TEXT, sync_model TEXT, sync_direction TEXT,
    layers TEXT, created_at TEXT NOT NULL, info TEXT)]],
  -- one row per layer: its table, its field-to-column mapping, its resource
  [[CREATE TABLE gpkgext_geoservices_layers (layer_id INTEGER PRIMARY KEY, table_name TEXT NOT NULL UNIQUE,
    name TEXT, geometry_kind TEXT NOT NULL, geometry_column TEXT, srs_id INTEGER, object_id_field TEXT,
    global_id_field TEXT NOT NULL, sync_direction TEXT, columns TEXT NOT NULL, metadata TEXT)]],
  -- generations as the server gives them (64-bit integers); layer_id -1 is the
  -- replica's own (perReplica), other rows a layer's (perLayer)
  [[CREATE TABLE gpkgext_geoservices_generations (layer_id INTEGER PRIMARY KEY, server_gen INTEGER,
    server_sib_gen INTEGER, updated_at TEXT NOT NULL)]],
  -- the local edits not yet committed by the server: the queue is the journal.
  -- feature: the JSON sent (an update's changed attributes); base: the JSON of
  -- the feature before the first unsent local change (updates and deletes)
  [[CREATE TABLE gpkgext_geoservices_edits (seq INTEGER PRIMARY KEY AUTOINCREMENT, layer_id INTEGER NOT NULL,
    op TEXT NOT NULL CHECK (op IN ('add', 'update', 'delete')), global_id TEXT NOT NULL, feature TEXT,
    attempt_id INTEGER, created_at TEXT NOT NULL, base TEXT)]],
  "CREATE INDEX geoservices_edits_gid ON gpkgext_geoservices_edits (layer_id, global_id)",
  -- local edits the server rejected, with its code and description
  [[CREATE TABLE gpkgext_geoservices_failed_edits (seq INTEGER PRIMARY KEY, layer_id INTEGER NOT NULL, op TEXT NOT NULL,
    global_id TEXT NOT NULL, feature TEXT, code INTEGER, description TEXT, attempt_id INTEGER,
    failed_at TEXT NOT NULL, base TEXT)]],
  CONFLICTS_SQL,
  -- a synchronization in flight: recorded before it is sent
  [[CREATE TABLE gpkgext_geoservices_attempts (attempt_id INTEGER PRIMARY KEY AUTOINCREMENT, started_at TEXT NOT NULL,
    state TEXT NOT NULL, status_url TEXT, global_ids TEXT, params TEXT)]],
  [[CREATE TABLE geoservices_sync_log (id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL,
    operation TEXT NOT NULL, outcome TEXT NOT NULL, uploaded INTEGER, failed INTEGER, downloaded INTEGER,
    replica_server_gen INTEGER, layer_server_gens TEXT, message TEXT)]],
  [[INSERT INTO gpkg_contents (table_name, data_type, identifier, description)
    VALUES ('geoservices_sync_log', 'attributes', 'geoservices_sync_log',
    'synchronizations of this replica store (lua-geoservices)')]],
  -- attachments with their bytes: the media table of the GeoPackage Related
  -- Tables Extension (its id, data and content_type, OGC 18-000) that
  -- geoservices.store.file.attachments registers and links to the feature tables.
  -- A downloaded record replaces its GlobalID's row (INSERT OR REPLACE): a
  -- column it does not carry takes its default (data empty until the bytes
  -- at url are fetched; fetched_at says when they were). data is the last
  -- column: a zeroblob there is written without being held in memory, and
  -- the fetch fills it in pieces
  [[CREATE TABLE geoservices_attachments (id INTEGER PRIMARY KEY AUTOINCREMENT,
    content_type TEXT NOT NULL DEFAULT 'application/octet-stream',
    ]] .. schema.ATTACHMENT_GID_COLUMN .. [[, layer_id INTEGER, parent_global_id TEXT, attachment_id INTEGER,
    name TEXT, size INTEGER, keywords TEXT, url TEXT, fetched_at TEXT, data BLOB NOT NULL DEFAULT x'')]],
  "CREATE INDEX geoservices_attachments_parent ON geoservices_attachments (parent_global_id)",
  schema.ATTACHMENT_UNLINKED_INDEX,
  schema.ATTACHMENT_GID_TRIGGER,
}

--- What turns a store of format N - 1 into format N (`MIGRATIONS[N]`, SQL
-- statements); geoservices.store.open runs them in one transaction with the
-- new format number. A store written before a column existed gets it empty:
-- the edits it already queued have no base.
schema.MIGRATIONS = {
  [2] = {
    "ALTER TABLE gpkgext_geoservices_edits ADD COLUMN base TEXT",
    "ALTER TABLE gpkgext_geoservices_failed_edits ADD COLUMN base TEXT",
    CONFLICTS_SQL,
  },
}

return schema
