--- Format 3 -> 4 (geoservices.store.file.migrate runs it, in its transaction):
-- what a store written before today's schema changes lacks.
--
-- * Attachment edits (geoservices.store.edits.attachment_edits): the queue is
--   rebuilt with 'update' in its op CHECK and the new columns, every row
--   kept, its AUTOINCREMENT sequence too (a seq is never given twice); the
--   table of adds read back, the mapping tables' base_id index, and the
--   triggers of the media table and the feature tables as that module
--   writes them now (dropped and made again). Without this, an update
--   captured by the new trigger could not be queued and the queries of the
--   queue's new columns failed quietly: the store's attachment edits would
--   never be sent. An add the old code saw applied whose attachment was not
--   downloaded back yet (no attachment_id, no queued edit) is recorded as
--   read back, so linking it again queues no second add.
-- * CRS (geoservices.store.file.srs): a row written 'undefined' with a code
--   (every EPSG code but 4326 and 3857, Esri codes beyond the old hand
--   table) gets PROJ's WKT; a code PROJ does not know keeps 'undefined' with
--   the reason in its description, which status reports.
-- * Relationships (geoservices.store.file.relations): made from the layer
--   resources the store kept (gpkgext_geoservices_layers.metadata), their mapping
--   rows from the keys. A store whose metadata says none gets none.
--
-- Each part looks at what the file holds before changing it, so a store
-- already written by today's code (format 3 with today's tables) changes
-- only its format number.
-- @module geoservices.store.file.migrate4
-- @local
local attachment_edits = require "geoservices.store.edits.attachment_edits"
local json = require "geoservices.base.json"
local relations = require "geoservices.store.file.relations"
local schema = require "geoservices.store.file.schema"
local shared = require "geoservices.store.shared"
local srs = require "geoservices.store.file.srs"

local q = schema.ident
local MEDIA = "geoservices_attachments"
local QUEUE = attachment_edits.QUEUE
local QUEUE_CREATE = "CREATE TABLE IF NOT EXISTS " .. QUEUE

local exec_all = shared.exec_all

local function exists(db, name)
  local rows, m, c = db:rows("SELECT sql FROM sqlite_master WHERE name = ?", name)
  if not rows then return nil, m, c end
  return rows[1] ~= nil, rows[1] and rows[1].sql
end

-- The layers' specs as the modules that write per-layer SQL take them:
-- the columns kept in gpkgext_geoservices_layers, the fid column (the table's
-- INTEGER PRIMARY KEY), the kind of table (gpkg_contents), the resource.
local function layer_specs(db)
  local rows, m, c = db:rows("SELECT l.*, c.data_type FROM gpkgext_geoservices_layers AS l "
    .. "LEFT JOIN gpkg_contents AS c ON c.table_name = l.table_name ORDER BY l.layer_id")
  if not rows then return nil, m, c end
  local specs, metas = {}, {}
  for _, r in ipairs(rows) do
    local info
    info, m, c = db:rows(("PRAGMA table_info(%s)"):format(q(r.table_name)))
    if not info then return nil, m, c end
    local fid = "fid"
    for _, col in ipairs(info) do
      if col.pk == 1 then fid = col.name end
    end
    specs[#specs + 1] = { id = r.layer_id, table = r.table_name, geometry_column = r.geometry_column,
                          oid = r.object_id_field, globalid = r.global_id_field, columns = json.decode(r.columns),
                          fid_column = fid, data_type = r.data_type or "features" }
    local meta = r.metadata and json.decode(r.metadata)
    if type(meta) == "table" then metas[#metas + 1] = meta end
  end
  return specs, metas
end

-- The queue made again by `create` (its CREATE TABLE as attachment_edits
-- writes it now), every row kept, unless it is today's already or none.
local function rebuild_queue(db, create)
  local has, sql = exists(db, QUEUE)
  if has == nil then return nil, sql end
  if not has or sql:find("'update'", 1, true) then return true end
  local info, m, c = db:rows(("PRAGMA table_info(%s)"):format(q(QUEUE)))
  if not info then return nil, m, c end
  local seq
  seq, m, c = db:rows("SELECT seq FROM sqlite_sequence WHERE name = ?", QUEUE)
  if not seq then return nil, m, c end
  local tmp = QUEUE .. "_format_4"
  local columns = {}
  for i, col in ipairs(info) do columns[i] = q(col.name) end
  local list = table.concat(columns, ", ")
  return exec_all(db, {
    "CREATE TABLE " .. tmp .. create:sub(#QUEUE_CREATE + 1),
    ("INSERT INTO %s (%s) SELECT %s FROM %s ORDER BY seq"):format(tmp, list, list, QUEUE),
    "DROP TABLE " .. QUEUE,
    ("ALTER TABLE %s RENAME TO %s"):format(tmp, QUEUE),
    -- the sequence as it was: the rows settled since the largest seq gave up their numbers, never to be reused
    ("DELETE FROM sqlite_sequence WHERE name = '%s'"):format(QUEUE),
    ("INSERT INTO sqlite_sequence (name, seq) SELECT '%s', max(%d, coalesce((SELECT max(seq) FROM %s), 0))")
      :format(QUEUE, math.tointeger(seq[1] and seq[1].seq) or 0, QUEUE),
  })
end

-- The attachment edits' tables, index and triggers of every layer linked to the media table.
local function attachments(db, specs)
  local has, m, c = exists(db, "gpkgext_relations")
  if has == nil then return nil, m, c end
  if not has then return true end -- a store made before attachments were kept
  local links
  links, m, c = db:rows("SELECT base_table_name, mapping_table_name FROM gpkgext_relations "
    .. "WHERE related_table_name = ? AND relation_name = 'media'", MEDIA)
  if not links then return nil, m, c end
  local todo, drops, create = {}, {}, nil
  for _, link in ipairs(links) do
    for _, spec in ipairs(specs) do
      if spec.table == link.base_table_name then
        for _, sql in ipairs(attachment_edits.layer_sql(spec, link.mapping_table_name)) do
          local name = sql:match('^CREATE TRIGGER ("[^"]*")')
          if name then drops[#drops + 1] = "DROP TRIGGER IF EXISTS " .. name end
          if sql:sub(1, #QUEUE_CREATE) == QUEUE_CREATE then create = sql end
          if sql:find("^CREATE INDEX ") and not sql:find("^CREATE INDEX IF NOT EXISTS ") then
            sql = "CREATE INDEX IF NOT EXISTS " .. sql:sub(#"CREATE INDEX " + 1)
          end
          todo[#todo + 1] = sql
        end
      end
    end
  end
  if not create then return true end
  -- the triggers go first: they name the queue, which is made again under its name
  local ok
  ok, m, c = exec_all(db, drops)
  if ok then ok, m, c = rebuild_queue(db, create) end
  if ok then ok, m, c = exec_all(db, todo) end
  if not ok then return nil, m, c end
  -- adds the old code saw applied whose attachment was not downloaded back yet
  return db:run(("INSERT OR IGNORE INTO %s (global_id) SELECT a.global_id FROM %s AS a WHERE a.layer_id IS NOT NULL "
    .. "AND a.attachment_id IS NULL AND NOT EXISTS (SELECT 1 FROM %s AS e WHERE e.global_id = a.global_id)")
    :format(attachment_edits.ADDED, MEDIA, QUEUE))
end

-- PROJ's WKT for the rows written 'undefined' with a code.
local function crs(db)
  local rows, m, c = db:rows("SELECT srs_id FROM gpkg_spatial_ref_sys WHERE definition = 'undefined' AND srs_id > 0")
  if not rows then return nil, m, c end
  for _, r in ipairs(rows) do
    local row = srs.row({ wkid = r.srs_id })
    if row.srs_id == r.srs_id then
      local ok
      ok, m, c = db:run("UPDATE gpkg_spatial_ref_sys SET srs_name = ?, organization = ?, definition = ?, "
        .. "description = ? WHERE srs_id = ?", row.srs_name, row.organization, row.definition, row.description,
        r.srs_id)
      if not ok then return nil, m, c end
    end
  end
  return true
end

-- The service's relationships, once (a store that has them is left as it is).
local function relationships(db, specs, metas)
  local has, m, c = exists(db, relations.TABLE)
  if has == nil then return nil, m, c end
  if has then return true end
  local ok
  ok, m, c = exec_all(db, relations.store_sql(specs, metas))
  if not ok then return nil, m, c end
  local err
  ok, err = relations.relink({ db = db, path = "the store" })
  if not ok then return nil, err.message, err.code end
  return true
end

--- Brings a format-3 store to format 4 (see the module's description).
-- @param db the connection, inside migrate's transaction
-- @return true, or nil, msg, code
return function(db)
  local specs, metas, c = layer_specs(db)
  if not specs then return nil, metas, c end
  local ok, m
  ok, m, c = attachments(db, specs)
  if ok then ok, m, c = crs(db) end
  if ok then ok, m, c = relationships(db, specs, metas) end
  if not ok then return nil, m, c end
  return true
end
