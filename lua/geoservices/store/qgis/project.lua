--- A QGIS project inside the store (issue 37): a user opens the GeoPackage's
-- project (QGIS's browser lists it under the file) and gets the service's
-- layers, styled as their default styles (layer_styles), the conflicts and
-- pending/rejected edits in a group of their own, the attachments, and
-- relations for the service's relationships and for the attachments.
--
-- Stored as QGIS 3.22 stores a project in a GeoPackage (its
-- QgsGeoPackageProjectStorage, measured by saving one headless and reading
-- it back): a row of `qgis_projects(name TEXT PRIMARY KEY, metadata BLOB,
-- content BLOB)` whose content is the hexadecimal text of the .qgz (a zip
-- holding one .qgs) and whose metadata is {"last_modified_time",
-- "last_modified_user"}. Layer sources are relative to the file's
-- directory ("./NAME.gpkg|layername=T"), as QGIS writes them.
-- @module geoservices.store.qgis.project
-- @local
local attachments = require "geoservices.store.file.attachments"
local json = require "geoservices.base.json"
local qgz = require "geoservices.store.qgis.qgz"
local symbology = require "geoservices.store.qgis.symbology"

local project = {}

project.TABLE_SQL = "CREATE TABLE IF NOT EXISTS qgis_projects(name TEXT PRIMARY KEY, metadata BLOB, content BLOB)"

local function xml(s)
  return (tostring(s):gsub("[&<>\"']", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;",
                                         ["'"] = "&apos;" }))
end

local crc32 = qgz.crc32 -- CRC-32 (ISO 3309, as zip needs it)

-- a zip of one stored (uncompressed) entry
local function zip(name, data)
  local crc = crc32(data)
  local local_header = string.pack("<I4I2I2I2I2I2I4I4I4I2I2", 0x04034b50, 20, 0, 0, 0, 0x21, crc, #data, #data,
    #name, 0) .. name
  local central = string.pack("<I4I2I2I2I2I2I2I4I4I4I2I2I2I2I2I4I4", 0x02014b50, 20, 20, 0, 0, 0, 0x21, crc,
    #data, #data, #name, 0, 0, 0, 0, 0, 0) .. name
  local offset = #local_header + #data
  return local_header .. data .. central
    .. string.pack("<I4I2I2I2I2I4I4I2", 0x06054b50, 0, 0, 1, 1, #central, offset, 0)
end

local function hex(s)
  return (s:gsub(".", function(ch) return ("%02x"):format(ch:byte()) end))
end

-- the symbology elements of a layer's default style (inside its qgis element)
local function style_body(db, table_name)
  local row = db:rows("SELECT styleQML FROM layer_styles WHERE f_table_name = ? AND useAsDefault "
    .. "ORDER BY id DESC LIMIT 1", table_name)
  local qml = row and row[1] and row[1].styleQML
  if type(qml) ~= "string" then return "", false end
  return qml:match("<qgis[^>]*>(.*)</qgis>") or "", qml:find('labelsEnabled="1"', 1, true) ~= nil
end

-- a spatial table's CRS as QGIS writes a layer's (its WKT and authority id)
local function srs(db, table_name)
  local rows = db:rows("SELECT s.organization AS org, s.organization_coordsys_id AS code, s.definition AS wkt "
    .. "FROM gpkg_geometry_columns AS g JOIN gpkg_spatial_ref_sys AS s ON s.srs_id = g.srs_id "
    .. "WHERE lower(g.table_name) = lower(?)", table_name)
  local r = rows and rows[1]
  if not r then return "" end
  local authid = (type(r.org) == "string" and r.org ~= "" and r.org ~= "NONE") and (r.org:upper() .. ":"
    .. tostring(math.tointeger(r.code) or r.code)) or ""
  return ("   <srs>\n    <spatialrefsys>\n     <wkt>%s</wkt>\n     <authid>%s</authid>\n    </spatialrefsys>\n"
    .. "   </srs>\n"):format(xml(r.wkt or ""), xml(authid))
end

local function layer_id(table_name) return "geoservices_" .. table_name:gsub("[^%w_]", "_") end

local function exists(db, name)
  local rows = db:rows("SELECT 1 AS x FROM sqlite_master WHERE name = ?", name)
  return rows and rows[1] ~= nil
end

--- The .qgs text of the store's project.
-- @param db the store's database
-- @tparam string file the store's file name (its base name: sources are relative to its directory)
-- @tparam string name the project's name
-- @treturn string
function project.qgs(db, file, name)
  local base = file:match("([^/\\]+)$") or file
  local layers = assert(db:rows("SELECT layer_id, table_name, name, metadata, global_id_field FROM "
    .. "gpkgext_geoservices_layers "
    .. "ORDER BY layer_id"))
  local maplayers, tree, edits, media, relations = {}, {}, {}, {}, {}
  local by_layer_id = {}
  local function add(list, table_name, title, body, labels)
    local id = layer_id(table_name)
    body = srs(db, table_name) .. (body or "")
    local source = ("./%s|layername=%s"):format(base, table_name)
    list[#list + 1] = ('   <layer-tree-layer id="%s" name="%s" source="%s" providerKey="ogr" checked="Qt::Checked" '
      .. 'expanded="0"/>'):format(xml(id), xml(title), xml(source))
    maplayers[#maplayers + 1] = ('  <maplayer type="vector" labelsEnabled="%d">\n   <id>%s</id>\n   <datasource>%s'
      .. '</datasource>\n   <layername>%s</layername>\n   <provider encoding="UTF-8">ogr</provider>\n%s\n  </maplayer>')
      :format(labels and 1 or 0, xml(id), xml(source), xml(title), body or "")
    return id
  end
  for _, l in ipairs(layers) do
    local body, labels = style_body(db, l.table_name)
    by_layer_id[math.tointeger(l.layer_id)] = { id = add(tree, l.table_name, l.name, body, labels), row = l }
  end
  for _, t in ipairs({ { "geoservices_conflicts", "Conflicts" }, { "geoservices_pending", "Pending edits" },
                       { "geoservices_rejected", "Rejected edits" } }) do
    -- the conflicts drawn in magenta, whatever their geometry
    if exists(db, t[1]) then
      add(edits, t[1], t[2], t[1] == "geoservices_conflicts" and symbology.any_geometry({ 230, 0, 169, 255 }) or nil)
    end
  end
  local function relation(rid, title, referencing, referencing_field, referenced, referenced_field)
    relations[#relations + 1] = ('  <relation id="%s" name="%s" referencingLayer="%s" referencedLayer="%s" '
      .. 'strength="Association">\n   <fieldRef referencingField="%s" referencedField="%s"/>\n  </relation>'):format(
      xml(rid), xml(title), xml(referencing), xml(referenced), xml(referencing_field), xml(referenced_field))
  end
  -- the service's relationships, from the origin's side: the destination's key refers to the origin's
  for lid, l in pairs(by_layer_id) do
    local meta = json.decode(l.row.metadata or "null")
    for _, r in ipairs(type(meta) == "table" and type(meta.relationships) == "table" and meta.relationships or {}) do
      local dest = by_layer_id[math.tointeger(r.relatedTableId) or -1]
      if r.role == "esriRelRoleOrigin" and dest then
        local dest_key
        local dmeta = json.decode(dest.row.metadata or "null")
        for _, dr in ipairs(type(dmeta) == "table" and type(dmeta.relationships) == "table" and dmeta.relationships
                            or {}) do
          if math.tointeger(dr.relatedTableId) == lid and dr.id == r.id then dest_key = dr.keyField end
        end
        relation(("rel_%s_%s"):format(l.id, math.tointeger(r.id) or 0), r.name or dest.row.name, dest.id,
          dest_key or r.keyField, l.id, r.keyField)
      end
    end
  end
  -- attachments: the media table's parent_global_id refers to the feature's GlobalID (the
  -- photos under a feature in its form). QGIS 3.22 cannot open the Related Tables mapping
  -- tables (no primary key, not in gpkg_contents: GDAL does not offer them).
  if exists(db, "geoservices_attachments") then
    local media_id = add(media, "geoservices_attachments", "Attachments")
    for _, l in pairs(by_layer_id) do
      local gid = l.row.global_id_field
      if exists(db, attachments.mapping_table{ table = l.row.table_name }) and gid then
        relation("rel_" .. l.id .. "_attachments", "Attachments of " .. l.row.name, media_id, "parent_global_id",
          l.id, gid)
      end
    end
  end
  local function group(title, items)
    if #items == 0 then return "" end
    return ('   <layer-tree-group name="%s" checked="Qt::Checked" expanded="1">\n%s\n   </layer-tree-group>\n'):format(
      xml(title), table.concat(items, "\n"))
  end
  return "<!DOCTYPE qgis PUBLIC 'http://mrcc.com/qgis.dtd' 'SYSTEM'>\n"
    .. ('<qgis projectname="%s" version="3.22.16-Białowieża">\n <title>%s</title>\n'):format(xml(name), xml(name))
    .. " <layer-tree-group>\n" .. table.concat(tree, "\n") .. "\n"
    .. group("Edits to check", edits) .. group("Attachments", media) .. " </layer-tree-group>\n"
    .. " <relations>\n" .. table.concat(relations, "\n") .. "\n </relations>\n"
    .. " <projectlayers>\n" .. table.concat(maplayers, "\n") .. "\n </projectlayers>\n</qgis>\n"
end

--- The SQL that writes (or rewrites) the store's project.
-- @param db the store's database
-- @tparam string path the store's path
-- @tparam[opt] string name the project's name (the file's name without .gpkg)
-- @treturn {string,...} statements
-- @treturn {table,...} their parameters
function project.write(db, path, name)
  local base = path:match("([^/\\]+)$") or path
  name = name or base:gsub("%.[gG][pP][kK][gG]$", "")
  local qgs = project.qgs(db, base, name)
  local content = hex(zip(name .. ".qgs", qgs))
  local metadata = json.encode({ last_modified_time = os.date("!%Y-%m-%dT%H:%M:%S"),
                                 last_modified_user = "geoservices" })
  local ok, msg, code = db:exec(project.TABLE_SQL)
  if not ok then return nil, msg, code end
  return db:run("INSERT OR REPLACE INTO qgis_projects (name, metadata, content) VALUES (?, ?, ?)", name, metadata,
    content)
end

local function unxml(s)
  return (s:gsub("&(#?%w+);", { amp = "&", lt = "<", gt = ">", quot = '"', apos = "'" }))
end

local function unhex(s)
  if #s % 2 ~= 0 or s:find("[^%x]") then return nil end
  return (s:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end))
end

-- Whether a maplayer's datasource is table `t` of the file named `base`.
local function source_is(block, base, t)
  local source = block:match("<datasource>(.-)</datasource>")
  if not source then return false end
  source = unxml(source)
  local file, rest = source:match("^([^|]*)(.*)$")
  return (file:match("([^/\\]+)$") or file) == base and (rest .. "|"):find("|layername=" .. t .. "|", 1, true) ~= nil
end

-- An element added into a container element of a maplayer (`<aliases>`,
-- `<editable>`) for each item whose key no element of it names yet (a
-- user's own stays): each on a line of its own, indented as the others.
-- @return the block, the number added
local function add_into(block, container, tag, key, items, element)
  local inner = block:match("<" .. container .. ">(.-)</" .. container .. ">")
  local have, n = {}, 0
  for el in (inner or ""):gmatch("<" .. tag .. "%s[^>]*>") do
    n = n + 1
    local k = el:match("%s" .. key .. '="([^"]*)"')
    if k then have[unxml(k)] = true end
  end
  local lines = {}
  for _, item in ipairs(items) do
    if not have[item.field] then
      lines[#lines + 1] = element(item, n)
      n = n + 1
    end
  end
  if #lines == 0 then return block, 0 end
  local close = "</" .. container .. ">"
  if inner then
    local indent = block:match("\n([ \t]*)" .. close)
    if indent then
      local each = ("\n" .. inner):match(".*\n([ \t]*)<" .. tag .. "%s") or indent .. "  "
      return (block:gsub("\n[ \t]*" .. close, function()
        return "\n" .. each .. table.concat(lines, "\n" .. each) .. "\n" .. indent .. close
      end, 1)), #lines
    end
    return (block:gsub(close, function() return table.concat(lines) .. close end, 1)), #lines
  elseif block:find("<" .. container .. "/>", 1, true) then
    return (block:gsub("<" .. container .. "/>", function()
      return "<" .. container .. ">" .. table.concat(lines) .. close
    end, 1)), #lines
  end
  return (block:gsub("</maplayer>$", function()
    return "<" .. container .. ">" .. table.concat(lines) .. close .. "</maplayer>"
  end)), #lines
end

-- The qgs with the fields' aliases and read-only states added to its maplayers of table `t`.
-- @return the text, the number of aliases added, the number of read-only states added
local function qgs_with_fields(qgs, base, t, fields)
  local aliases, read_only = {}, {}
  for _, f in ipairs(fields) do
    if f.alias then aliases[#aliases + 1] = f end
    if f.read_only then read_only[#read_only + 1] = f end
  end
  local na, nr = 0, 0
  local out = qgs:gsub("(<maplayer[%s>].-</maplayer>)", function(block)
    if not source_is(block, base, t) then return nil end
    local a, r
    block, a = add_into(block, "aliases", "alias", "field", aliases, function(f, i)
      return ('<alias field="%s" index="%d" name="%s"/>'):format(xml(f.field), i, xml(f.alias))
    end)
    -- QGIS 3.22 reads a field's editable state in <editable> (the "Forms" category)
    block, r = add_into(block, "editable", "field", "name", read_only, function(f)
      return ('<field name="%s" editable="0"/>'):format(xml(f.field))
    end)
    na, nr = na + a, nr + r
    return block
  end)
  return out, na, nr
end

--- Adds fields' aliases and read-only states to a project a user saved in
-- the file (QGIS 3.22 stores it as a .qgz: geoservices.store.qgis.qgz),
-- changing nothing else of it: in each of its layers of that table, an
-- `<alias>` in its `<aliases>` (QGIS reads a field's alias there, by the
-- field's name) and, for a field the service fills in, a
-- `<field editable="0">` in its `<editable>`, each only where the layer has
-- none for that field (a user's own stays). A field's widget needs nothing: a
-- field the project does not configure gets its domain's value map or range
-- from GDAL. The row's metadata (who saved it, when) is kept.
-- @param db the store's database (in the caller's transaction)
-- @string path the store's path
-- @string name the project's name
-- @string t the layer's table
-- @tparam {{field=,alias=,read_only=},...} fields
-- @return the number of aliases added and of read-only states added, or nil, why not
function project.add_fields(db, path, name, t, fields)
  local rows, m = db:rows("SELECT content FROM qgis_projects WHERE name = ?", name)
  if not rows then return nil, m end
  local content = rows[1] and rows[1].content
  local archive = type(content) == "string" and unhex(content)
  if not archive then return nil, "its content is not a project as QGIS saves one (the hexadecimal text of a .qgz)" end
  local entries, why = qgz.entries(archive)
  if not entries then return nil, why end
  local index
  for i, e in ipairs(entries) do if e.name:lower():match("%.qgs$") then index = index or i end end
  if not index then return nil, "its archive holds no .qgs" end
  local qgs
  qgs, why = qgz.content(entries[index])
  if not qgs then return nil, why end
  local base = path:match("([^/\\]+)$") or path
  local text, aliases, read_only = qgs_with_fields(qgs, base, t, fields)
  if aliases + read_only == 0 then return 0, 0 end
  entries[index] = qgz.stored(entries[index].name, text, entries[index])
  local ok, msg = db:run("UPDATE qgis_projects SET content = ? WHERE name = ?", hex(qgz.zip(entries)), name)
  if not ok then return nil, msg end
  return aliases, read_only
end

return project
