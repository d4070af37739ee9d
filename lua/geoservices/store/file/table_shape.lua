--- A layer's table as its user left it, against the server's fields the
-- store keeps (gpkgext_geoservices_layers.columns): QGIS, GDAL and the sqlite3
-- shell can add, rename and delete a table's columns.
--
-- * A column the user added (QGIS "add field", ALTER TABLE ADD COLUMN) is a
--   local-only field: a download writes the server's columns only
--   (csrc/store/apply_layers.c: an upsert), so its values are kept; an edit
--   never sends it; status lists it.
-- * A server field missing from the table (renamed or deleted) is no
--   longer synchronized: the store opens with the columns the table has, so
--   nothing is blocked (a download drops that field's values, an edit never
--   sends it: the server keeps its own); the capture triggers are made again
--   for the table as it is at the next open for writing, whatever the
--   command (geoservices.store.file.migrate.refresh): repairing at once, not at a
--   later sync, is what keeps every command working and the queue sendable.
--   Status says what changed, which queued edits were made before (their
--   change of that field, if any, cannot be read any more: it is not sent),
--   and how to have the field back (rename the column back, then open the
--   store once with any command: the triggers capture it from then on).
-- A layer whose GlobalID or OBJECTID column is missing cannot be matched
-- with the server's features: the store refuses to open, saying which
-- column to rename back.
-- @module geoservices.store.file.table_shape
-- @local
local attachments = require "geoservices.store.file.attachments"
local capture = require "geoservices.store.edits.capture"
local json = require "geoservices.base.json"
local relations = require "geoservices.store.file.relations"
local schema = require "geoservices.store.file.schema"
local shared = require "geoservices.store.shared"

local shape = {}

local q = schema.ident

-- The renames SQLite made in a capture trigger the store wrote
-- (ALTER TABLE RENAME COLUMN rewrites `OLD."NAME"` and keeps the 'NAME'
-- key): server field -> column now, as far as the trigger tells.
local function renames_in(db, spec)
  local rows = db:rows("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?",
    ("geoservices_%s_update"):format(spec.table))
  local sql = rows and rows[1] and rows[1].sql or ""
  local found = {}
  for key, column in sql:gmatch("'([^']+)', CASE typeof%(OLD%.\"([^\"]+)\"%)") do
    if key ~= column then found[key] = column end
  end
  return found
end

--- Reads each layer's table and fits its spec to it (in place): the spec's
-- `columns` become the server's fields the table has (`server_columns` all
-- of them), `missing` the fields it lacks (`{name, renamed_to}`), `local_only`
-- the columns the user added.
-- @param db the connection
-- @tparam table layers the specs by layer id
-- @return true, or nil, msg, code
function shape.fit(db, layers)
  for _, spec in pairs(layers) do
    local info, m, c = db:rows(("PRAGMA table_info(%s)"):format(q(spec.table)))
    if not info then return nil, m, c end
    local have = {}
    for _, col in ipairs(info) do have[col.name:lower()] = col.name end
    spec.gone = #info == 0 or nil
    if #info > 0 then
      local renames = renames_in(db, spec)
      local kept, known, missing = {}, {}, {}
      for _, col in ipairs(spec.columns) do
        known[col.name:lower()] = true
        if have[col.name:lower()] then
          kept[#kept + 1] = col
        else
          if col.name == spec.globalid or col.name == spec.oid then
            return nil, ("layer %s: its %s column %s is not in table %s any more (renamed or deleted in QGIS, "
              .. "GDAL or SQL?): the store cannot match its features with the server's. "
              .. "Rename the column back%s"):format(
              spec.name or spec.table, col.name == spec.globalid and "GlobalID" or "OBJECTID", col.name, spec.table,
              renames[col.name] and (": ALTER TABLE %s RENAME COLUMN %s TO %s"):format(q(spec.table),
                q(renames[col.name]), q(col.name)) or ""), "schema"
          end
          missing[#missing + 1] = { name = col.name, renamed_to = renames[col.name] }
        end
      end
      known[(spec.geometry_column or ""):lower()] = true
      known[(spec.fid_column or "fid"):lower()] = true
      local local_only = {}
      for _, col in ipairs(info) do
        if not known[col.name:lower()] and col.pk == 0 then local_only[#local_only + 1] = col.name end
      end
      spec.server_columns, spec.columns, spec.missing, spec.local_only = spec.columns, kept, missing, local_only
    end
  end
  return true
end

-- Whether `sql` creates a trigger on table `t`.
local function trigger_on(sql, t)
  if sql:sub(1, 15) ~= "CREATE TRIGGER " then return false end
  local head = (sql:match("^(.-)%sBEGIN%s") or sql):gsub("%s+", " ") .. " "
  return head:find(" ON " .. q(t) .. " ", 1, true) ~= nil
end

--- Makes a layer's deleted table again, empty (QGIS's browser deletes a
-- layer with its registration; DROP TABLE leaves that behind): its
-- registration, R-tree, capture triggers and the relation and attachment
-- triggers on it, as the store made them. Nothing is deleted on the server
-- (dropping a table fires no trigger); the other tables' triggers that
-- name it work again; its queued edits stay, to be sent or discarded.
-- Inside the caller's transaction.
-- @param db the connection
-- @tparam table spec the layer's spec (gone)
-- @tparam table layers every layer's spec by id
-- @return true, or nil, msg, code
function shape.remake(db, spec, layers)
  local rows, m, c = db:rows("SELECT layer_id, metadata FROM gpkgext_geoservices_layers ORDER BY layer_id")
  if not rows then return nil, m, c end
  local metas, meta = {}, nil
  for _, r in ipairs(rows) do
    local decoded = r.metadata and json.decode(r.metadata)
    if type(decoded) == "table" then
      metas[#metas + 1] = decoded
      if r.layer_id == spec.id then meta = decoded end
    end
  end
  local full = meta and schema.layer_spec(meta, {})
  if not full then
    return nil, ("layer %s: its table %s was deleted and the store keeps no description to make it again: "
      .. "create a new replica"):format(spec.name or spec.table, spec.table), "schema"
  end
  full.table, full.srs_id = spec.table, spec.srs_id
  local t = spec.table
  for _, tbl in ipairs{ "gpkg_contents", "gpkg_geometry_columns", "gpkg_extensions", "gpkg_data_columns" } do
    local ok
    ok, m, c = db:run(("DELETE FROM %s WHERE table_name = ?"):format(tbl), t)
    if not ok then return nil, m, c end
  end
  local list = {}
  if full.geometry_column then
    list[1] = ("DROP TABLE IF EXISTS %s"):format(q(("rtree_%s_%s"):format(t, full.geometry_column)))
  end
  for _, sql in ipairs(schema.layer_sql(full, spec.srs_id or -1)) do list[#list + 1] = sql end
  for _, sql in ipairs(capture.layer_sql(spec, layers)) do list[#list + 1] = sql end
  local specs = {}
  for _, l in pairs(layers) do
    specs[#specs + 1] = setmetatable({ fid_column = l.fid_column or "fid" }, { __index = l })
  end
  local on_it = relations.store_sql(specs, metas)
  for _, sql in ipairs(attachments.layer_sql(full, meta)) do
    on_it[#on_it + 1] = sql
  end
  for _, sql in ipairs(on_it) do
    if trigger_on(sql, t) then list[#list + 1] = sql end
  end
  local ok
  ok, m, c = shared.exec_all(db, list)
  if not ok then return nil, m, c end
  -- its unsent adds and updates lost their values with the table: reported
  -- with the failed edits, never sent (its deletes still go: they send the GlobalID alone)
  local unsent = "layer_id = ? AND attempt_id IS NULL AND op IN ('add', 'update')"
  local moved
  moved, m, c = db:run("INSERT INTO gpkgext_geoservices_failed_edits (layer_id, op, global_id, feature, description, "
    .. "failed_at, base) SELECT layer_id, op, global_id, feature, ?, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), base "
    .. "FROM gpkgext_geoservices_edits WHERE " .. unsent .. " ORDER BY seq", ("not sent: table %s was deleted with the "
    .. "feature's values (in QGIS or with DROP TABLE)"):format(t), spec.id)
  if moved then moved, m, c = db:run("DELETE FROM gpkgext_geoservices_edits WHERE " .. unsent, spec.id) end
  if not moved then return nil, m, c end
  spec.gone, spec.remade, spec.lost_edits = nil, true, moved
  return true
end

--- Makes every deleted table again (@{remake}), in one transaction,
-- noting it in the sync log; opened read-only, a deleted table is refused
-- in words instead.
-- @return true, or nil, msg, code
function shape.remake_all(db, layers, readonly)
  local gone = {}
  for _, spec in pairs(layers) do
    if spec.gone then gone[#gone + 1] = spec end
  end
  if #gone == 0 then return true end
  table.sort(gone, function(a, b) return a.id < b.id end)
  if readonly then
    return nil, ("layer %s: its table was deleted; any geoservices command that writes to the store (status, sync) "
      .. "makes it again, empty"):format(gone[1].table), "schema"
  end
  local ok, m, c = db:begin()
  if not ok then return nil, m, c end
  for _, spec in ipairs(gone) do
    ok, m, c = shape.remake(db, spec, layers)
    if ok then
      ok, m, c = db:run("INSERT INTO geoservices_sync_log (at, operation, outcome, message) VALUES "
        .. "(strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), 'repair', 'ok', ?)", ("table %s was deleted: made again, empty")
        :format(spec.table))
    end
    if not ok then
      db:rollback()
      return nil, m, c
    end
  end
  return db:commit()
end

--- What the tables' shapes mean for the user, in plain words, one line
-- each: the fields not synchronized and what to do.
-- @param st the store
-- @treturn table the lines (none when every table is as the server's layer)
function shape.notes(st)
  local lines = {}
  local ids = {}
  for id in pairs(st.layers) do ids[#ids + 1] = id end
  table.sort(ids)
  for _, id in ipairs(ids) do
    local spec = st.layers[id]
    for _, m in ipairs(spec.missing or {}) do
      local rows = st.db:rows("SELECT count(*) AS n FROM gpkgext_geoservices_edits WHERE layer_id = ? AND "
        .. "op IN ('add', 'update')", id)
      local queued = rows and rows[1] and rows[1].n or 0
      lines[#lines + 1] = ("layer %s: field %s is not in the table any more (%s): it is no longer synchronized "
        .. "(downloads leave it out, edits never send it; the server keeps its values)%s. To synchronize it again, "
        .. "rename the column back%s and run any geoservices command on the store before editing it again (from then "
        .. "on its edits are captured); to show another name, give the field an alias instead"):format(spec.table,
        m.name, m.renamed_to and ("renamed to " .. m.renamed_to) or "renamed or deleted",
        queued > 0 and ("; %d queued edit%s of the layer send%s the other fields only"):format(queued,
          queued == 1 and "" or "s", queued == 1 and "s" or "") or "",
        m.renamed_to and (" (ALTER TABLE %s RENAME COLUMN %s TO %s)"):format(q(spec.table), q(m.renamed_to),
          q(m.name)) or "")
    end
    if spec.remade then
      local lost = spec.lost_edits or 0
      lines[#lines + 1] = ("layer %s: its table was deleted (nothing is deleted on the server): made again, "
        .. "empty, so that the store keeps working; its features come back as the server changes them, all of "
        .. "them with a new replica (geoservices replica create)%s"):format(spec.table, lost > 0
        and ("; %d queued edit%s of it lost %s values with the table: not sent, listed by geoservices replica "
          .. "failed %s"):format(lost, lost == 1 and "" or "s", lost == 1 and "its" or "their",
          shared.shell_word(st.path)) or "")
    end
    -- the fields the server deleted, kept as local-only columns (geoservices.store.sync.server_schema)
    local rows = st.db:rows("SELECT json_extract(metadata, '$.geoservices_deleted_fields') AS d FROM "
      .. "gpkgext_geoservices_layers WHERE layer_id = ? AND json_valid(metadata)", id)
    local deleted = {}
    for _, n in ipairs(rows and rows[1] and rows[1].d and json.decode(rows[1].d) or {}) do
      if type(n) == "string" then deleted[n:lower()] = true end
    end
    local mine, gone = {}, {}
    for _, name in ipairs(spec.local_only or {}) do
      if deleted[name:lower()] then gone[#gone + 1] = name else mine[#mine + 1] = name end
    end
    if #gone > 0 then
      lines[#lines + 1] = ("layer %s: field%s %s deleted on the server: kept in this file with %s values, a local-only "
        .. "field%s (not synchronized)"):format(spec.table, #gone == 1 and "" or "s", table.concat(gone, ", "),
        #gone == 1 and "its" or "their", #gone == 1 and "" or "s")
    end
    if #mine > 0 then
      lines[#lines + 1] = ("layer %s: local-only field%s %s: kept in this file, not synchronized"):format(spec.table,
        #mine == 1 and "" or "s", table.concat(mine, ", "))
    end
  end
  return lines
end

return shape
