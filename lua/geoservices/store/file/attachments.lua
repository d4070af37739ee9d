--- Attachments with their bytes, where QGIS and GDAL see them: the
-- GeoPackage Related Tables Extension (OGC 18-000). `geoservices_attachments`
-- is its media table (`id`, `data`, `content_type`, then the server's
-- metadata: GlobalID, parent GlobalID, name, size, the content's url), one
-- mapping table per layer with attachments (`gpkgext_geoservices_attachments_<layer
-- table>`: base_id the feature's fid, related_id the attachment's id; named
-- as an extension's table, so GDAL does not offer it as a layer), and
-- `gpkgext_relations` names the "media" relation between them, so GDAL
-- lists the relationship and QGIS shows a feature's attachments.
--
-- A download writes an attachment's metadata (csrc/store/apply_attachments.c) and, when
-- the server embedded it, its bytes; an attachment given by URL (the
-- store asks for them so: returnAttachmentsDataByUrl, the vendor's "Sync and
-- attachments") keeps an empty `data` until `fetch` downloads it to a file
-- beside the store and copies the file into the blob in pieces
-- (store:blob_from_file): memory stays flat however large the attachment.
-- One that cannot be downloaded stays unfetched, is reported, and is tried
-- again by the next sync.
-- @module geoservices.store.file.attachments
-- @local
local attachment_edits = require "geoservices.store.edits.attachment_edits"
local errors = require "geoservices.base.errors"
local paths = require "geoservices.store.paths"
local relations = require "geoservices.store.file.relations"
local schema = require "geoservices.store.file.schema"

local attachments = {}

attachments.MEDIA = "geoservices_attachments"
local RTE = "http://docs.opengeospatial.org/is/18-000/18-000.html"

local function q(name) return '"' .. name:gsub('"', '""') .. '"' end
local function lit(text) return "'" .. text:gsub("'", "''") .. "'" end

--- The mapping table between a layer's features and their attachments.
function attachments.mapping_table(spec) return "gpkgext_" .. attachments.MEDIA .. "_" .. spec.table end

--- SQL that registers the media table and links a layer with attachments
-- (the mapping table is not in gpkg_contents: GDAL finds the relation
-- through gpkgext_relations, and a table there without an INTEGER PRIMARY
-- KEY would fail GDAL's validator)
-- to it (none for a layer without): run once per layer, when the store is made.
-- @tparam table spec the layer's spec (geoservices.store.file.schema.layer_spec)
-- @tparam table meta the layer's resource (`hasAttachments`)
function attachments.layer_sql(spec, meta)
  if not (meta and meta.hasAttachments) then return {} end
  local map = attachments.mapping_table(spec)
  return {
    -- the extension's own table and registration, shared with the service's relationships
    relations.EXTENSION_SQL[1], relations.EXTENSION_SQL[2],
    ("INSERT OR IGNORE INTO gpkg_contents (table_name, data_type, identifier, description) VALUES (%s, "
      .. "'attributes', %s, 'attachments of the features: their bytes (data), content type, name "
      .. "(lua-geoservices)')"):format(lit(attachments.MEDIA), lit(attachments.MEDIA)),
    ("CREATE TABLE %s (base_id INTEGER NOT NULL, related_id INTEGER NOT NULL)"):format(q(map)),
    ("CREATE INDEX %s ON %s (related_id)"):format(q(map .. "_related"), q(map)),
    ("INSERT INTO gpkg_extensions (table_name, column_name, extension_name, definition, scope) "
      .. "VALUES (%s, NULL, 'gpkg_related_tables', %s, 'read-write')"):format(lit(map), lit(RTE)),
    ("INSERT INTO gpkgext_relations (base_table_name, base_primary_column, related_table_name, "
      .. "related_primary_column, relation_name, mapping_table_name) VALUES (%s, %s, %s, 'id', 'media', %s)")
      :format(lit(spec.table), lit(spec.fid_column or "fid"), lit(attachments.MEDIA), lit(map)),
    table.unpack(attachment_edits.layer_sql(spec, map)),
  }
end

-- The layers linked to the media table: {table, fid, map, globalid}, or
-- none in a store made before (its attachments are metadata only).
local function links(st)
  local has = st.db:rows("SELECT 1 AS yes FROM sqlite_master WHERE name = 'gpkgext_relations'")
  if not (has and has[1]) then return {} end
  local rows = st.db:rows("SELECT base_table_name, base_primary_column, mapping_table_name FROM gpkgext_relations "
    .. "WHERE related_table_name = ? AND relation_name = 'media'", attachments.MEDIA) or {}
  local out = {}
  for _, r in ipairs(rows) do
    for id, spec in pairs(st.layers) do
      if spec.table == r.base_table_name then
        out[#out + 1] = { layer = id, table = spec.table, fid = r.base_primary_column,
                          map = r.mapping_table_name, globalid = spec.globalid }
      end
    end
  end
  return out
end

--- Rebuilds the mapping tables from the attachments' parent GlobalIDs (after
-- a download: a replaced feature or attachment row has a new id).
-- @return true, or nil, err
function attachments.relink(st)
  for _, l in ipairs(links(st)) do
    local ok, msg, code = st.db:run("DELETE FROM " .. q(l.map))
    if ok then
      ok, msg, code = st.db:run(("INSERT INTO %s (base_id, related_id) SELECT f.%s, a.id FROM %s AS a JOIN %s AS f "
        .. "ON %s WHERE a.layer_id = ?"):format(q(l.map), q(l.fid), q(attachments.MEDIA),
        q(l.table), schema.gid_match("f." .. q(l.globalid), "a.parent_global_id")), l.layer)
    end
    if not ok then return nil, errors.new("io", ("%s: %s"):format(st.path, msg), { code = code }) end
  end
  return true
end

-- The attachments of a layer (its id the parameter) added by their
-- parent's GlobalID alone and linked to none, joined with their feature.
local function unlinked_from(l)
  return (" FROM %s AS a JOIN %s AS f ON %s WHERE a.attachment_id IS NULL AND a.parent_global_id IS NOT NULL "
    .. "AND (a.layer_id IS NULL OR a.layer_id = ?) AND NOT EXISTS (SELECT 1 FROM %s AS m WHERE m.related_id = a.id)")
    :format(q(attachments.MEDIA), q(l.table), schema.gid_match("f." .. q(l.globalid), "a.parent_global_id"), q(l.map))
end

--- The count of the attachments @{link_orphans} links in a layer (its id the
-- parameter): `l` = {table, globalid, map (@{mapping_table})}.
function attachments.unlinked_sql(l) return "SELECT count(*) AS n" .. unlinked_from(l) end

--- Links to its feature each attachment added through its parent's GlobalID
-- alone, as QGIS's relation editor adds a photo in the project's form (the
-- relation is on parent_global_id: QGIS 3.22 follows no mapping table), so
-- that the mapping table's capture queues it like any other: a row of the
-- media table the server never gave (no attachment_id), naming a feature of
-- a layer with attachments, and linked to none. Runs when the store is
-- opened for writing and before each sync; only reads when there is none.
-- @param st the store
-- @return the number linked, or nil, err
function attachments.link_orphans(st)
  local n = 0
  for _, l in ipairs(links(st)) do
    local from = unlinked_from(l)
    local rows, msg, code = st.db:rows("SELECT count(*) AS n" .. from, l.layer)
    if rows and rows[1].n > 0 then
      rows, msg, code = st:transaction(function()
        return st.db:run(("INSERT INTO %s (base_id, related_id) SELECT f.%s, a.id"):format(q(l.map), q(l.fid)) .. from,
          l.layer)
      end)
      if rows then n = n + rows end
    end
    if not rows then
      return nil, type(msg) == "table" and msg or errors.new("io", ("%s: %s"):format(st.path, msg), { code = code })
    end
  end
  return n
end

--- Downloads the bytes of every attachment given by URL and not fetched
-- yet, each into its blob (one small transaction each).
-- @param st the store
-- @param client a geoservices client (the token goes to its own origin only)
-- @tparam[opt] table opts `timeout`
-- @return `{fetched = n, bytes = n, failed = {{globalId =, layer =, name =, message =}...}}`, and
--   `cancelled` (the error) when the fetching was cancelled: it stopped there
function attachments.fetch(st, client, opts)
  opts = opts or {}
  local out = { fetched = 0, bytes = 0, failed = {} }
  if #links(st) == 0 then return out end
  local rows = st.db:rows("SELECT id, global_id, layer_id, name, url FROM " .. attachments.MEDIA
    .. " WHERE url IS NOT NULL AND fetched_at IS NULL ORDER BY id") or {}
  for _, r in ipairs(rows) do
    local tmp = paths.beside(st.path, "attachment")
    local ok, err
    local f = io.open(tmp, "wb") -- the download appends to it
    if f then
      f:close()
      ok, err = client:download(r.url, { file = tmp, timeout = opts.timeout })
    else
      err = errors.new("io", ("cannot write %s beside the store"):format(tmp))
    end
    local n
    if ok then
      -- one transaction, the server's bytes never captured as a local edit;
      -- fetched_at first, while the row is small (an UPDATE of a row reads
      -- its whole record, the blob included)
      ok, err = st:_uncaptured(function()
        local done, msg, code = st.db:run("UPDATE " .. attachments.MEDIA
          .. " SET fetched_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?", r.id)
        if done then
          n, msg, code = st.db:blob_from_file(attachments.MEDIA, "data", r.id, tmp)
          done = n
        end
        if not done then return nil, errors.new("io", ("%s: %s"):format(st.path, msg), { code = code }) end
        return true
      end)
    end
    os.remove(tmp)
    if not ok and type(err) == "table" and err.kind == "cancelled" then
      -- the fetch itself was cancelled (a Ctrl-C closed the scheduler of the command's tasks): the
      -- rest are not tried one by one, each failing at once; the next sync fetches them
      out.cancelled = err
      break
    elseif ok then
      out.fetched, out.bytes = out.fetched + 1, out.bytes + n
    else
      out.failed[#out.failed + 1] = { globalId = r.global_id, layer = r.layer_id, name = r.name,
                                      message = type(err) == "table" and err.message or tostring(err) }
    end
  end
  return out
end

return attachments
