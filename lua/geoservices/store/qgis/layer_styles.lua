--- A default QGIS style per layer (issue 41): the fields' aliases where a
-- QGIS user looks, its forms and attribute table.
--
-- QGIS 3.22 opens a GeoPackage layer with the style of the `layer_styles`
-- table marked `useAsDefault` for it (the table its OGR provider writes
-- when a style is saved "in the datasource database", with the same
-- columns); it reads no alias from GDAL 3.6, whose GeoPackage driver reads
-- only column_name, mime_type and constraint_name of gpkg_data_columns
-- (where the store keeps the aliases as name and title: GDAL from 3.7 on
-- reads the name as the field's alternative name). The style holds the
-- "Fields" category (aliases; QGIS keeps the forms' widgets it reads from
-- gpkg_data_columns), the "Forms" category (the fields the service fills in
-- itself read-only in the feature's form: @{read_only}) and, where the layer
-- resource has a drawingInfo, the service's symbols and labels (store.symbology).
--
-- The table is registered in gpkg_contents as attributes, as QGIS registers
-- it (QGIS 3.22 reads no style from a table GDAL does not list: measured);
-- GDAL lists it as a table, as in every GeoPackage QGIS saved a style in.
-- @module geoservices.store.qgis.layer_styles
-- @local
local schema = require "geoservices.store.file.schema"
local symbology = require "geoservices.store.qgis.symbology"

local layer_styles = {}

-- QGIS's own table (QgsOgrProviderMetadata::saveStyle, QGIS 3.22).
layer_styles.TABLE_SQL = 'CREATE TABLE IF NOT EXISTS "layer_styles" ("id" INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, '
  .. '"f_table_catalog" TEXT(256), "f_table_schema" TEXT(256), "f_table_name" TEXT(256), '
  .. '"f_geometry_column" TEXT(256), "styleName" TEXT(30), "styleQML" TEXT, "styleSLD" TEXT, '
  .. '"useAsDefault" BOOLEAN, "description" TEXT, "owner" TEXT(30), "ui" TEXT(30), '
  .. [["update_time" DATETIME DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')))]]

-- the description of the styles geoservices writes (migrate recognises them by its end)
layer_styles.DESCRIPTION = "the service's symbols, labels and field aliases (written by geoservices)"

local function xml(s)
  return (tostring(s):gsub("[&<>\"']", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;",
                                         ["'"] = "&apos;" }))
end

-- the editor tracking fields of a layer resource's editFieldsInfo
local EDIT_FIELDS = { "creationDateField", "creatorField", "editDateField", "editorField" }

--- The fields a user cannot edit: those the service fills in itself (its
-- OBJECTID and GlobalID, a field whose `editable` is false, the editor
-- tracking fields `editFieldsInfo` names), as a set of column names.
-- @tparam table spec the layer's spec
-- @tparam[opt] table meta the layer resource
-- @treturn table name -> true
function layer_styles.read_only(spec, meta)
  local set = {}
  if spec.oid then set[spec.oid] = true end
  if spec.globalid then set[spec.globalid] = true end
  meta = type(meta) == "table" and meta or {}
  for _, f in ipairs(type(meta.fields) == "table" and meta.fields or {}) do
    if type(f) == "table" and f.editable == false and type(f.name) == "string" then set[f.name] = true end
  end
  local info = type(meta.editFieldsInfo) == "table" and meta.editFieldsInfo or {}
  for _, k in ipairs(EDIT_FIELDS) do
    if type(info[k]) == "string" and info[k] ~= "" then set[info[k]] = true end
  end
  local out = {}
  for _, c in ipairs(spec.columns) do -- the table's own spelling of each
    if set[c.name] then out[c.name] = true end
  end
  return out
end

--- The QML of a layer's default style: its fields' aliases, the fields the
-- service fills in read-only in its forms, the service's symbols and labels
-- (issue 37), or nil when it has none of them.
-- @tparam table spec the layer's spec (schema.layer_spec: columns, data_columns, fid_column, geometry_kind)
-- @tparam[opt] table meta the layer resource (its `drawingInfo`)
-- @treturn ?string
function layer_styles.qml(spec, meta)
  local alias_of = {}
  for _, d in ipairs(spec.data_columns or {}) do
    if d.alias then alias_of[d.column] = d.alias end
  end
  local drawing, labels = symbology.qml(spec, type(meta) == "table" and meta.drawingInfo or nil)
  local read_only = layer_styles.read_only(spec, meta)
  if next(alias_of) == nil and not drawing and next(read_only) == nil then return nil end
  -- QGIS's field index: the fid first, then the columns in the table's order
  local lines = { ('  <alias field="%s" index="0" name=""/>'):format(xml(spec.fid_column or "fid")) }
  for i, c in ipairs(spec.columns) do
    lines[#lines + 1] = ('  <alias field="%s" index="%d" name="%s"/>'):format(xml(c.name), i,
      xml(alias_of[c.name] or ""))
  end
  -- QGIS 3.22 reads a field's editable state in the "Forms" category
  local editable = {}
  for _, c in ipairs(spec.columns) do
    if read_only[c.name] then editable[#editable + 1] = ('  <field name="%s" editable="0"/>'):format(xml(c.name)) end
  end
  local categories = (drawing and ("Symbology|%sFields"):format(labels and "Labeling|" or "") or "Fields")
    .. (#editable > 0 and "|Forms" or "")
  return "<!DOCTYPE qgis PUBLIC 'http://mrcc.com/qgis.dtd' 'SYSTEM'>\n"
    .. ('<qgis version="3.22.16" styleCategories="%s" labelsEnabled="%d">\n'):format(categories, labels and 1 or 0)
    .. (drawing and drawing .. "\n" or "")
    .. " <aliases>\n" .. table.concat(lines, "\n") .. "\n </aliases>\n"
    .. (#editable > 0 and " <editable>\n" .. table.concat(editable, "\n") .. "\n </editable>\n" or "")
    .. "</qgis>\n"
end

--- The SQL that gives a layer its default style (none when it has no alias and no drawing).
-- @tparam table spec the layer's spec
-- @tparam[opt] table meta the layer resource
-- @treturn {string,...}
function layer_styles.layer_sql(spec, meta)
  local qml = layer_styles.qml(spec, meta)
  if not qml then return {} end
  local lit = schema.literal
  return { layer_styles.TABLE_SQL,
    "INSERT OR IGNORE INTO gpkg_contents (table_name, data_type, identifier, description) VALUES ('layer_styles', "
      .. "'attributes', 'layer_styles', 'QGIS styles')",
    ('INSERT INTO "layer_styles" ("f_table_catalog", "f_table_schema", "f_table_name", "f_geometry_column", '
      .. '"styleName", "styleQML", "styleSLD", "useAsDefault", "description", "owner", "ui") '
      .. "VALUES ('', '', %s, %s, %s, %s, '', 1, %s, '', NULL)"):format(lit(spec.table),
      lit(spec.geometry_column or ""), lit(spec.table), lit(qml),
      lit(layer_styles.DESCRIPTION)) }
end

--- Writes a layer's default style again as @{qml} makes it now: the style
-- geoservices wrote before is updated in place (its id kept), a layer
-- without one gets it, a user's own default style is kept.
-- @param db the store's database (in the caller's transaction)
-- @tparam table spec the layer's spec (its table: the store's)
-- @tparam table meta the layer resource
-- @return true, or nil, msg, code
function layer_styles.rewrite(db, spec, meta)
  local qml = layer_styles.qml(spec, meta)
  local have, m, c = db:rows("SELECT 1 AS x FROM sqlite_master WHERE name = 'layer_styles'")
  if not have then return nil, m, c end
  local styles = {}
  if have[1] then
    styles, m, c = db:rows("SELECT id, styleQML, description LIKE '%(written by geoservices)' AS ours "
      .. "FROM layer_styles WHERE f_table_name = ? AND useAsDefault ORDER BY id", spec.table)
    if not styles then return nil, m, c end
  end
  local ours = styles[1] and styles[1].ours == 1 and styles[1]
  if ours and qml and ours.styleQML ~= qml then
    return db:run("UPDATE layer_styles SET styleQML = ?, description = ? WHERE id = ?", qml, layer_styles.DESCRIPTION,
      ours.id)
  elseif not styles[1] and qml then
    for _, sql in ipairs(layer_styles.layer_sql(spec, meta)) do
      local ok
      ok, m, c = db:exec(sql)
      if not ok then return nil, m, c end
    end
  end
  return true
end

return layer_styles
