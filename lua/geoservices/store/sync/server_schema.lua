--- A schema change on the server taken in place by the next sync (issue
-- 37): a field the service added, deleted or changed (its alias, domain,
-- length, nullable, editable, default), a domain changed.
--
-- Each sync reads the layers' definitions (the service's `layers`
-- resource, all of them in one request; each layer's resource where the
-- server has none) and compares them with the layer resources the store
-- keeps (gpkgext_geoservices_layers.metadata). A difference is taken in ONE
-- transaction, before any edit is sent (the queued edits then send what the
-- new definition takes):
--
-- * a field added: `ALTER TABLE ADD COLUMN` (its type, length, default),
--   its alias and domain in gpkg_data_columns, the capture triggers made
--   again with it, the layer's default style and the QGIS project written
--   again (QGIS shows it with its alias and a value map or range); its
--   values come from the layer's `query` (`where=1=1`, that field and the
--   GlobalID, page by page), read just before: a sync's download carries
--   only the features changed since the store's generation (a schema change
--   is no data change: emulator.definition), and it comes after, so a
--   feature changed meanwhile gets its newer value from it. The queued
--   updates' bases take the field's value too, so that none sends it as a
--   change of its own. A column the user had added under the same name (a
--   local-only field) is renamed NAME_local first (its values kept, never
--   mixed with the server's), and the sync says so.
-- * a field deleted: the column stays with its values, as a local-only
--   field (status lists it, saying the server deleted it). Its label in
--   QGIS's forms says so: its alias (else its name) followed by
--   " (local only)", in gpkg_data_columns and the default style. A coded-
--   value domain stays on it (the names of the codes it holds stay
--   readable: a value map in QGIS); a range domain does not (it only was
--   the server's rule, and QGIS's range widget holds a value to it). No
--   rule of the server applies to it any more: an edit of it is not
--   queued, and the domain check reads only the server's fields. A queued edit
--   that changed it (an add holding a value, an update whose value differs
--   from its base) sends its other fields, and what it cannot send is
--   reported with the failed edits (`geoservices replica failed`: the
--   GlobalID, the field, the value, why) and in the sync's notes.
-- * the QGIS project in the file is written again, unless a user saved
--   their own there in QGIS (its metadata names them): that one is kept,
--   the aliases of the fields the server added written into its layers of
--   that table (geoservices.store.qgis.project.add_aliases), nothing else
--   of it changed; a project that cannot be read so is kept as it is.
-- * a field or domain changed: the column's rules (the length and
--   required checks, the domain check of geoservices.store.edits.domains),
--   gpkg_data_columns and its constraints, the style and the project
--   follow the new definition; a queued value the new domain does not take
--   is refused before sending, naming the rule, and stays queued.
-- * a field's type or a String's length changed (the vendor changes a type
--   by deleting the field and adding it again: geoservices.emulator.definition):
--   the column is declared as the store declares it on create (TEXT(n),
--   MEDIUMINT...: schema.layer_spec), the table made again for it
--   (geoservices.store.file.retype: rows, fids, triggers, indexes and R-tree
--   kept); each value converted where the new type holds it, any other kept
--   as it was and named by the sync (an edit sending it is refused here
--   until it is changed); the queued edits' bases converted alike, so that
--   an edit sends only what changed here (a field the server made anew
--   holds no values there: a queued change of it meets that as a conflict).
--   The server's values of the field are read as an added field's are: where
--   they differ from the file's for a feature not edited here, the file keeps
--   its own and the sync names those features and what gives the server's.
--
-- A definition the server does not give (an error, a server without the
-- resources), or one the store cannot be made from, changes nothing: the
-- sync goes on and says so. What was taken is a line of the sync log
-- (operation "schema").
-- @module geoservices.store.sync.server_schema
-- @local
local capture = require "geoservices.store.edits.capture"
local domains = require "geoservices.store.edits.domains"
local json = require "geoservices.base.json"
local layer_styles = require "geoservices.store.qgis.layer_styles"
local outgoing = require "geoservices.store.edits.outgoing"
local project = require "geoservices.store.qgis.project"
local retype = require "geoservices.store.file.retype"
local schema = require "geoservices.store.file.schema"
local service = require "geoservices.sync.service"
local shared = require "geoservices.store.shared"
local table_shape = require "geoservices.store.file.table_shape"

local M = {}

local q, lit = schema.ident, schema.literal

-- the members of a field whose change is taken in place
local FIELD_MEMBERS = { "alias", "domain", "length", "nullable", "editable", "defaultValue" }
-- the metadata member naming the fields the server deleted (kept as local-only columns)
M.DROPPED = "geoservices_deleted_fields"
-- what follows the label (alias or name) of a field the server deleted
M.LOCAL_ONLY = " (local only)"

local function by_name(fields)
  local out = {}
  for _, f in ipairs(type(fields) == "table" and fields or {}) do
    if type(f) == "table" and type(f.name) == "string" then out[f.name:lower()] = f end
  end
  return out
end

local FALLBACK = { server = true, http = true, protocol = true }

--- The layers' definitions as the server gives them now, by layer id: the
-- service's `layers` resource ("All Layers and Tables"), else each layer's.
-- @return `[id] = LayerInfo`, or nil, err
function M.read(client, service_name, ids, opts)
  local timeout = opts and opts.timeout
  local out = {}
  local doc, err = client:post(service.url(client, service_name, "layers"), {}, { timeout = timeout, retry = "read" })
  -- each layer's resource only where the server answered without that resource (not when it
  -- could not be reached, nor in a dry run: nothing more is asked then)
  if not doc and not (type(err) == "table" and FALLBACK[err.kind]) then return nil, err end
  if type(doc) == "table" then
    for _, list in ipairs{ doc.layers, doc.tables } do
      for _, l in ipairs(type(list) == "table" and list or {}) do
        local info = type(l) == "table" and service.build_layer_info(service_name, l)
        if info and math.type(info.id) == "integer" then out[info.id] = info end
      end
    end
  end
  for _, id in ipairs(ids) do
    if not out[id] then
      local info, lerr = client:layer_info(service_name, id, { timeout = timeout })
      if not info then return nil, lerr end
      out[id] = info
    end
  end
  return out
end

--- What changed in a layer's fields: `{added = {field...}, dropped = {name...}, changed = {field...},
-- retyped = {{name, from, to}...}}`, or nil when nothing did.
function M.diff(old_meta, new_meta)
  local old, new = by_name(old_meta.fields), by_name(new_meta.fields)
  local d = { added = {}, dropped = {}, changed = {}, retyped = {} }
  for _, f in ipairs(new_meta.fields or {}) do
    local o = type(f) == "table" and type(f.name) == "string" and old[f.name:lower()]
    if type(f) == "table" and type(f.name) == "string" and f.type ~= "esriFieldTypeGeometry" then
      if not o then
        d.added[#d.added + 1] = f
      elseif o.type ~= f.type then
        d.retyped[#d.retyped + 1] = { name = f.name, from = tostring(o.type), to = tostring(f.type) }
      else
        for _, k in ipairs(FIELD_MEMBERS) do
          if not outgoing.same(o[k], f[k]) then
            d.changed[#d.changed + 1] = f
            break
          end
        end
      end
    end
  end
  for _, f in ipairs(old_meta.fields or {}) do
    if type(f) == "table" and type(f.name) == "string" and not new[f.name:lower()] then
      d.dropped[#d.dropped + 1] = f.name
    end
  end
  if #d.added + #d.dropped + #d.changed + #d.retyped == 0 then return nil end
  return d
end

-- The added fields' values on the server, `[normalized GlobalID] = {field = value}`,
-- page by page (`resultOffset`; a server that answers all at once is read once).
local function added_values(client, service_name, spec, info, names, opts)
  local url = service.url(client, service_name, ("%d/query"):format(spec.id))
  local page = math.tointeger(info.maxRecordCount) or 1000
  local out, offset = {}, 0
  while true do
    local doc, err = client:post(url, { where = "1=1", outFields = spec.globalid .. "," .. table.concat(names, ","),
      returnGeometry = false, resultOffset = offset, resultRecordCount = page,
      orderByFields = info.objectIdField }, { retry = "read", timeout = opts and opts.timeout })
    if not doc then return nil, err end
    if type(doc.features) ~= "table" then
      return nil, ("the query of layer %d answered without features"):format(spec.id)
    end
    for _, f in ipairs(doc.features) do
      local a = type(f) == "table" and type(f.attributes) == "table" and f.attributes or {}
      local lower = {}
      for k, v in pairs(a) do if type(k) == "string" then lower[k:lower()] = v end end
      local gid = lower[spec.globalid:lower()]
      if type(gid) == "string" then
        local values = {}
        for _, n in ipairs(names) do values[n] = lower[n:lower()] end
        out[shared.normalize_gid(gid)] = values
      end
    end
    if doc.exceededTransferLimit ~= true or #doc.features == 0 then break end
    offset = offset + #doc.features
  end
  return out
end

-- A value of the server as the column keeps it (a date: DATETIME text).
local function stored(column, v)
  if v == nil or v == json.null then return nil end
  if column.type == "date" and math.type(v) == "integer" then
    local ok, text = pcall(os.date, "!%Y-%m-%dT%H:%M:%S", v // 1000)
    if ok then return ("%s.%03dZ"):format(text, v % 1000) end
  end
  if type(v) == "table" then return json.encode(v) end
  return v
end

local function exec(db, sql, ...)
  local ok, m, c
  if select("#", ...) > 0 then ok, m, c = db:run(sql, ...) else ok, m, c = db:exec(sql) end
  if not ok then error({ db = { m, c } }) end
  return ok
end

local function column_names(db, t)
  local names = {}
  for _, col in ipairs(db:rows(("PRAGMA table_info(%s)"):format(q(t))) or {}) do names[col.name:lower()] = col.name end
  return names
end

-- A seq for a failed edit drawn from the queue's own sequence
-- (AUTOINCREMENT): no queue row ever takes it, so a later failure of that
-- row (INSERT OR REPLACE by seq) never replaces this report.
local function new_seq(db)
  exec(db, "INSERT INTO gpkgext_geoservices_edits (layer_id, op, global_id, created_at) VALUES (-1, 'delete', '', '')")
  local rows = db:rows("SELECT last_insert_rowid() AS seq")
  local seq = rows[1].seq
  exec(db, "DELETE FROM gpkgext_geoservices_edits WHERE seq = ?", seq)
  return seq
end

-- The queued edits (not yet sent) that changed a field the server deleted:
-- each reported with the failed edits; they send their other fields.
local function report_dropped(st, spec, name, lines)
  local db = st.db
  local t, g = q(spec.table), q(spec.globalid)
  local rows = db:rows(("SELECT e.seq, e.op, e.global_id, e.base, r.%s AS value FROM gpkgext_geoservices_edits AS e "
    .. "JOIN %s AS r ON %s WHERE e.layer_id = ? AND e.attempt_id IS NULL AND e.op IN ('add', 'update') ORDER BY e.seq")
    :format(q(name), t, schema.gid_match("r." .. g, "e.global_id")), spec.id) or {}
  for _, r in ipairs(rows) do
    local base = r.base and json.decode(r.base)
    local before = type(base) == "table" and type(base.row) == "table" and base.row[name]
    local lost = r.value ~= nil and (r.op == "add" or not outgoing.same(r.value, before))
      or r.value == nil and r.op == "update" and before ~= nil and before ~= json.null
    if lost then
      local why = ("not sent: field %s was deleted on the server (the layer's definition changed); the %s's other "
        .. "fields are sent; the value stays in the table's column %s (a local-only field now)"):format(name, r.op,
        name)
      exec(db, "INSERT INTO gpkgext_geoservices_failed_edits (seq, layer_id, op, global_id, feature, description, "
        .. "failed_at, base) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", new_seq(db), spec.id, r.op, r.global_id,
        json.encode{ attributes = { [spec.globalid] = r.global_id, [name] = r.value == nil and json.null or r.value } },
        why, shared.now(), r.base)
      lines[#lines + 1] = ("layer %s: the queued %s of %s changed field %s, which the server deleted: that change is "
        .. "not sent (listed by geoservices replica failed %s), its other fields are"):format(spec.table, r.op,
        r.global_id, name, shared.shell_word(st.path))
    end
  end
end

-- The capture triggers of a layer made again for its columns now.
local function recapture(db, spec, layers)
  local list = {}
  for _, l in pairs(layers) do list[#list + 1] = l end
  table.sort(list, function(a, b) return a.id < b.id end)
  for _, name in ipairs(capture.trigger_names(spec)) do exec(db, "DROP TRIGGER IF EXISTS " .. q(name)) end
  for _, sql in ipairs(capture.layer_sql(spec, list)) do exec(db, sql) end
end

-- gpkg_data_columns and its constraints for the server's fields, as the new definition says.
local function rewrite_data_columns(db, spec, full)
  for _, c in ipairs(full.columns) do
    exec(db, "DELETE FROM gpkg_data_columns WHERE table_name = ? AND lower(column_name) = lower(?)", spec.table, c.name)
  end
  for _, d in ipairs(full.data_columns or {}) do
    if d.constraint then
      exec(db, "DELETE FROM gpkg_data_column_constraints WHERE constraint_name IN (?, ?)", d.constraint,
        "_" .. d.constraint .. "_domain_description")
    end
    if d.alias then -- an alias a local-only column holds as its name gives way
      exec(db, "UPDATE gpkg_data_columns SET name = NULL WHERE table_name = ? AND name = ?", spec.table, d.alias)
    end
  end
  for _, sql in ipairs(schema.data_column_sql(full)) do exec(db, sql) end
end

-- A field the server deleted, kept as a local-only column: its label (the
-- alias, else the name) marked local only, once; a range domain no rule
-- any more, a coded-value domain kept for the names of its codes.
local function mark_local_only(db, spec, name)
  local rows = db:rows("SELECT d.name, d.title, d.constraint_name, (SELECT count(*) FROM gpkg_data_column_constraints "
    .. "AS k WHERE k.constraint_name = d.constraint_name AND k.constraint_type = 'range') AS ranges "
    .. "FROM gpkg_data_columns AS d WHERE d.table_name = ? AND lower(d.column_name) = lower(?)", spec.table, name)
  local r = rows and rows[1]
  local label = r and (r.title or r.name) or name
  if label:sub(-#M.LOCAL_ONLY) ~= M.LOCAL_ONLY then label = label .. M.LOCAL_ONLY end
  -- the name too, as the schema writes it, unless another column of the table has it
  local taken = db:rows("SELECT 1 AS x FROM gpkg_data_columns WHERE table_name = ? AND name = ? "
    .. "AND lower(column_name) <> lower(?)", spec.table, label, name)
  local short = not (taken and taken[1]) and label or nil
  if r then
    exec(db, "UPDATE gpkg_data_columns SET name = ?, title = ?, constraint_name = CASE WHEN ? > 0 THEN NULL ELSE "
      .. "constraint_name END WHERE table_name = ? AND lower(column_name) = lower(?)", short, label, r.ranges,
      spec.table, name)
  else
    exec(db, "INSERT INTO gpkg_data_columns (table_name, column_name, name, title) VALUES (?, ?, ?, ?)", spec.table,
      name, short, label)
  end
end

-- The layer's default style written again (a user's own default style is kept),
-- the fields the server deleted with their local-only labels.
local function restyle(db, spec, full, meta, kept)
  local shown = setmetatable({ table = spec.table, columns = {}, data_columns = {} }, { __index = full })
  for _, c in ipairs(full.columns) do shown.columns[#shown.columns + 1] = c end
  for _, d in ipairs(full.data_columns or {}) do shown.data_columns[#shown.data_columns + 1] = d end
  for _, name in ipairs(kept) do
    local r = db:rows("SELECT title FROM gpkg_data_columns WHERE table_name = ? AND lower(column_name) = lower(?)",
      spec.table, name)
    shown.columns[#shown.columns + 1] = { name = name }
    if r and r[1] and r[1].title then shown.data_columns[#shown.data_columns + 1] = { column = name,
                                                                                        alias = r[1].title } end
  end
  local ok, m, c = layer_styles.rewrite(db, shown, meta)
  if not ok then error({ db = { m, c } }) end
end

-- What a column's values must be to be of its store type (geoservices.store.file.schema), as SQL
-- on `%s` (the column), and the words for those that are not.
local HOLDS = {
  integer = { "typeof(%s) IN ('integer', 'null')", "an integer" },
  real = { "typeof(%s) IN ('integer', 'real', 'null')", "a number" },
  blob = { "typeof(%s) IN ('blob', 'null')", "bytes" },
  date = { "typeof(%s) IN ('text', 'null')", "a date" },
}
local TEXT_HOLDS = { "typeof(%s) IN ('text', 'null')", "text" }

-- The values of column `c` (its new spec) that its type does not hold or
-- that are longer than its width: how many, and the GlobalIDs of the first
-- three, as words for the sync's notes ("" when none).
local function not_held(db, spec, name, c)
  local holds = HOLDS[c.type] or TEXT_HOLDS
  local col = q(name)
  local width = math.tointeger(tonumber(tostring(c.sql):match("^TEXT%((%d+)%)$")))
  local what, cond = holds[2], "NOT (" .. holds[1]:format(col) .. ")"
  if width and c.type == "text" then
    what = ("longer than %d characters"):format(width)
    cond = ("typeof(%s) = 'text' AND length(%s) > %d"):format(col, col, width)
  else
    what = "not " .. what
  end
  local rows = db:rows(("SELECT %s AS gid FROM %s WHERE %s ORDER BY %s"):format(q(spec.globalid), q(spec.table), cond,
    q(spec.fid_column or "fid"))) or {}
  if #rows == 0 then return "" end
  local gids = {}
  for i = 1, math.min(3, #rows) do gids[i] = tostring(rows[i].gid) end
  local one = #rows == 1
  return ("; %d of them %s %s (kept as %s, in %s%s; an edit that sends %s is refused here until it is "
    .. "changed)"):format(#rows, one and "is" or "are", what, one and "it is" or "they are", table.concat(gids, ", "),
    #rows > 3 and (" and %d more"):format(#rows - 3) or "", one and "it" or "one")
end

-- The features not edited here whose value of a retyped field differs
-- from the server's (`values`, read by query): the vendor changes a type by
-- deleting the field and adding it again, without its values (an
-- administrator may fill them in again: a data change, downloaded as any).
-- The file keeps its own (nothing is deleted, nothing sent), and the sync
-- says where they differ and what gives the server's. A feature with a
-- queued edit is the rebase's (geoservices.store.sync.rebase): a field left
-- alone takes the server's value, one changed on both sides is a conflict.
local function differing(db, spec, column, field, c, values, lines)
  if not values then return end
  local rows = db:rows(("SELECT r.%s AS gid, r.%s AS v FROM %s AS r WHERE NOT EXISTS (SELECT 1 FROM "
    .. "gpkgext_geoservices_edits AS e WHERE e.layer_id = ? AND e.op IN ('add', 'update') AND %s) ORDER BY r.%s")
    :format(q(spec.globalid), q(column), q(spec.table), schema.gid_match("r." .. q(spec.globalid), "e.global_id"),
      q(spec.fid_column or "fid")), spec.id) or {}
  local gids = {}
  for _, r in ipairs(rows) do
    local server = type(r.gid) == "string" and values[shared.normalize_gid(r.gid)]
    if server and not outgoing.same(r.v, stored(c, server[field])) then gids[#gids + 1] = r.gid end
  end
  if #gids == 0 then return end
  local shown = {}
  for i = 1, math.min(3, #gids) do shown[i] = gids[i] end
  lines[#lines + 1] = ("layer %s: field %s holds another value on the server than in this file for %d feature%s not "
    .. "edited here (%s%s): the server made the field anew, without its old values; this file keeps its own (never "
    .. "sent); a new replica (geoservices replica create), or a later change of the feature on the server, has the "
    .. "server's"):format(spec.table, field, #gids, #gids == 1 and "" or "s", table.concat(shown, ", "),
    #gids > 3 and (" and %d more"):format(#gids - 3) or "")
end

-- The server's fields whose column the store declares otherwise now (a
-- type or a String's length the server changed): the table made again
-- with the declarations the store makes on create (schema.layer_spec;
-- geoservices.store.file.retype), its values and rows kept, the queued
-- edits' bases converted alike (an edit then sends only what changed
-- here). A column that cannot be so (its CREATE TABLE text declares it
-- otherwise than the store wrote it) keeps its type and its old rules, and
-- the sync says so.
local function retype_columns(st, spec, d, full_columns, lines, values)
  local db = st.db
  local declared, m, code = retype.declared(db, spec.table)
  if not declared then error({ db = { m, code } }) end
  local added, retyped = {}, {}
  for _, f in ipairs(d.added) do added[f.name:lower()] = true end
  for _, r in ipairs(d.retyped) do retyped[r.name:lower()] = r end
  local changes = {}
  for key, c in pairs(full_columns) do
    local col = declared[key]
    if col and not added[key] and col.type:upper() ~= c.sql:upper() then
      changes[#changes + 1] = { column = col.name, from = col.type, to = c.sql, spec = c }
    end
  end
  table.sort(changes, function(a, b) return a.column < b.column end)
  local done = true
  if #changes > 0 then
    local ok
    ok, m, code = retype.apply(db, spec.table, changes)
    if not ok and code ~= "schema" then error({ db = { m, code } }) end
    done = ok
  end
  local changed = {}
  for _, ch in ipairs(changes) do
    changed[ch.column:lower()] = ch
    if done then
      local ok, cm, cc = retype.convert_json(db, ch.to, "gpkgext_geoservices_edits", "base",
        '$.row."' .. ch.spec.name .. '"', "layer_id = ?", spec.id)
      if not ok then error({ db = { cm, cc } }) end
    end
  end
  local function kept_type(name)
    -- the column's rules stay the old type's
    for _, c in ipairs(spec.server_columns or spec.columns) do
      if c.name:lower() == name:lower() then full_columns[name:lower()] = c end
    end
  end
  for _, ch in ipairs(changes) do
    local r = retyped[ch.column:lower()]
    if not done then
      if r then kept_type(ch.column) end
      lines[#lines + 1] = ("layer %s: the server's definition makes field %s %s (%s here): its column keeps its "
        .. "declaration here (%s), as do the rules of its edits; a new replica has the new one (geoservices replica "
        .. "create)"):format(spec.table, ch.column, ch.to, ch.from, tostring(m))
    elseif r then
      lines[#lines + 1] = ("layer %s: the server changed the type of field %s from %s to %s: its column is %s in this "
        .. "file now (it was %s), its values kept%s"):format(spec.table, r.name, r.from, r.to, ch.to, ch.from,
        not_held(db, spec, ch.column, ch.spec))
      differing(db, spec, ch.column, r.name, ch.spec, values, lines)
    else
      lines[#lines + 1] = ("layer %s: field %s is %s in this file now (it was %s), as the server's definition says: "
        .. "its values kept%s"):format(spec.table, ch.column, ch.to, ch.from, not_held(db, spec, ch.column, ch.spec))
    end
  end
  for _, r in ipairs(d.retyped) do
    if declared[r.name:lower()] and not changed[r.name:lower()] then
      lines[#lines + 1] = ("layer %s: the server changed the type of field %s from %s to %s: its column is declared "
        .. "as before here, its values kept"):format(spec.table, r.name, r.from, r.to)
    end
  end
end

-- Takes one layer's change (inside the transaction, capture off).
local function take_layer(st, spec, info, d, values, lines)
  local db = st.db
  local meta = json.decode(json.encode(info)) -- a plain copy of the resource
  local full = assert(schema.layer_spec(meta, {})) -- checked by M.take
  local have = column_names(db, spec.table)
  local stored_meta = db:rows("SELECT metadata FROM gpkgext_geoservices_layers WHERE layer_id = ?", spec.id)
  local old_meta = json.decode(stored_meta and stored_meta[1] and stored_meta[1].metadata or "null")
  local dropped = {}
  local was = type(old_meta) == "table" and type(old_meta[M.DROPPED]) == "table" and old_meta[M.DROPPED] or {}
  for _, n in ipairs(was) do dropped[#dropped + 1] = n end
  local full_columns = {}
  for _, c in ipairs(full.columns) do full_columns[c.name:lower()] = c end
  -- deleted: reported edits, the column kept (local-only)
  for _, name in ipairs(d.dropped) do
    if have[name:lower()] then
      report_dropped(st, spec, have[name:lower()], lines)
      mark_local_only(db, spec, have[name:lower()])
      dropped[#dropped + 1] = have[name:lower()]
    end
    lines[#lines + 1] = ("layer %s: field %s was deleted on the server: its column stays here with its values, a "
      .. "local-only field (not synchronized)"):format(spec.table, name)
  end
  -- added: the column (a local-only one of that name renamed first), its values
  for _, f in ipairs(d.added) do
    local c = full_columns[f.name:lower()]
    local mine = have[f.name:lower()]
    if mine then
      local new, n = mine .. "_local", 2
      while have[new:lower()] do
        new = ("%s_local%d"):format(mine, n)
        n = n + 1
      end
      exec(db, ("ALTER TABLE %s RENAME COLUMN %s TO %s"):format(q(spec.table), q(mine), q(new)))
      have[new:lower()], have[mine:lower()] = new, nil
      for i, n2 in ipairs(dropped) do if n2:lower() == mine:lower() then dropped[i] = new end end
      lines[#lines + 1] = ("layer %s: the server added field %s, and this store had a local-only field of that name: "
        .. "yours is renamed %s (its values kept, not synchronized), the server's is %s"):format(spec.table, f.name,
        new, f.name)
    end
    exec(db, ("ALTER TABLE %s ADD COLUMN %s %s%s"):format(q(spec.table), q(c.name), c.sql,
      c.default and (" DEFAULT " .. c.default) or ""))
    have[c.name:lower()] = c.name
    local n = 0
    for gid, v in pairs(values or {}) do
      local value = stored(c, v[f.name])
      if value ~= nil then
        exec(db, ("UPDATE %s SET %s = ? WHERE %s"):format(q(spec.table), q(c.name),
          schema.gid_match(q(spec.globalid), "?")), value, gid)
        n = n + 1
      end
    end
    -- the queued updates' bases hold the value now in the table: none sends it as its own change
    exec(db, ("UPDATE gpkgext_geoservices_edits SET base = json_set(base, %s, (SELECT %s FROM %s AS r WHERE %s)) "
      .. "WHERE layer_id = ? AND base IS NOT NULL AND json_valid(base)"):format(lit('$.row."' .. c.name .. '"'),
      q(c.name), q(spec.table), schema.gid_match("r." .. q(spec.globalid), "gpkgext_geoservices_edits.global_id")),
      spec.id)
    lines[#lines + 1] = ("layer %s: the server added field %s: taken in place (%d value%s downloaded)"):format(
      spec.table, f.name, n, n == 1 and "" or "s")
  end
  for _, f in ipairs(d.changed) do
    lines[#lines + 1] = ("layer %s: the server changed field %s (its alias, domain, length, nullable or editable): "
      .. "taken in place; a queued value the new definition refuses stays queued, named by the sync"):format(
      spec.table, f.name)
  end
  retype_columns(st, spec, d, full_columns, lines, values)
  local columns = json.array()
  for _, c in ipairs(full.columns) do columns[#columns + 1] = full_columns[c.name:lower()] end
  full.columns = columns
  -- a name dropped and since added again is the server's again
  local still = json.array()
  for _, n in ipairs(dropped) do if not full_columns[n:lower()] then still[#still + 1] = n end end
  if #still > 0 then meta[M.DROPPED] = still end
  exec(db, "UPDATE gpkgext_geoservices_layers SET columns = ?, metadata = ? WHERE layer_id = ?", json.encode(columns),
    json.encode(meta), spec.id)
  rewrite_data_columns(db, spec, full)
  -- the spec as the store opens it: the server's columns the table has, the local-only ones
  spec.columns = columns
  local one = { [spec.id] = spec }
  local ok, m, c = table_shape.fit(db, one)
  if not ok then error({ db = { m, c } }) end
  ok, m, c = shared.register_layer(db, spec)
  if not ok then error({ db = { m, c } }) end
  recapture(db, spec, st.layers)
  restyle(db, spec, full, meta, still)
end

--- Reads the definitions and takes what changed, in one transaction.
-- @param st the store (under its sync lock)
-- @param client the client
-- @tparam table rep the store's replica
-- @tparam table opts the sync's options (`timeout`)
-- @treturn table lines for the sync's notes (none when nothing changed), and the changes by layer
function M.take(st, client, rep, opts)
  local ids = {}
  for id in pairs(st.layers) do ids[#ids + 1] = id end
  table.sort(ids)
  local infos, rerr = M.read(client, rep.service, ids, opts)
  if not infos then
    return { ("the layers' definitions could not be read (%s): a schema change on the server is taken by a later "
      .. "sync"):format(tostring(rerr and rerr.message or rerr)) }, {}
  end
  local rows = st.db:rows("SELECT layer_id, metadata FROM gpkgext_geoservices_layers") or {}
  local kept = {}
  for _, r in ipairs(rows) do kept[r.layer_id] = json.decode(r.metadata or "null") end
  local todo, skipped = {}, {}
  for _, id in ipairs(ids) do
    local old, info = kept[id], infos[id]
    local d = type(old) == "table" and info and not st.layers[id].gone and M.diff(old, info)
    if d then
      -- a definition the store cannot be made from (no GlobalID field...) is not taken
      local _, why = schema.layer_spec(json.decode(json.encode(info)), {})
      if why then
        skipped[#skipped + 1] = ("layer %s: the server's new definition cannot be taken (%s): the store keeps the "
          .. "one it had; a new replica follows the service (geoservices replica create)"):format(st.layers[id].table,
          why)
      else
        todo[#todo + 1] = { spec = st.layers[id], info = info, diff = d }
      end
    end
  end
  if #todo == 0 then return skipped, {} end
  -- the added fields' values, read before the transaction
  for _, t in ipairs(todo) do
    if #t.diff.added + #t.diff.retyped > 0 then
      local names = {}
      for _, f in ipairs(t.diff.added) do names[#names + 1] = f.name end
      for _, r in ipairs(t.diff.retyped) do names[#names + 1] = r.name end
      local values, verr = added_values(client, rep.service, t.spec, t.info, names, opts)
      if not values then
        return { ("layer %s: the server changed its fields, but the new or retyped fields' values could not be read "
          .. "(%s): taken by a later sync"):format(t.spec.table,
          tostring(type(verr) == "table" and verr.message or verr)) }, {}
      end
      t.values = values
    end
  end
  local lines, changes = skipped, {}
  local saved = {}
  for _, t in ipairs(todo) do
    local spec = t.spec
    saved[spec] = { columns = spec.columns, server_columns = spec.server_columns, missing = spec.missing,
                    local_only = spec.local_only }
  end
  local ok, err = st:_uncaptured(function()
    local done, e = pcall(function()
      for _, t in ipairs(todo) do
        take_layer(st, t.spec, t.info, t.diff, t.values, lines)
        local added, changed = {}, {}
        for _, f in ipairs(t.diff.added) do added[#added + 1] = f.name end
        for _, f in ipairs(t.diff.changed) do changed[#changed + 1] = f.name end
        changes[#changes + 1] = { layer = t.spec.id, table = t.spec.table, added = added, dropped = t.diff.dropped,
                                  changed = changed }
      end
      -- the project written again, unless a user saved their own in QGIS: kept, and
      -- each project a user saved in the file gets the added fields' aliases (read-only states)
      local name = (st.path:match("([^/\\]+)$") or st.path):gsub("%.[gG][pP][kK][gG]$", "")
      local projects = st.db:rows("SELECT name, CASE WHEN json_valid(metadata) THEN json_extract(metadata, "
        .. "'$.last_modified_user') END AS who FROM qgis_projects ORDER BY name") or {}
      local ours = true
      for _, p in ipairs(projects) do
        if p.name == name and p.who ~= nil and p.who ~= "geoservices" then ours = false end
      end
      if ours then
        local wrote, m, c = project.write(st.db, st.path)
        if not wrote then error({ db = { m, c } }) end
      end
      for _, p in ipairs(projects) do
        if p.who ~= nil and p.who ~= "geoservices" then
          local aliases, read_only, failed = 0, 0, nil
          for _, t in ipairs(todo) do
            local fields, columns = {}, {}
            for _, f in ipairs(t.diff.added) do columns[#columns + 1] = { name = f.name } end
            local fixed = layer_styles.read_only({ columns = columns }, t.info)
            for _, f in ipairs(t.diff.added) do
              local alias = type(f.alias) == "string" and f.alias ~= "" and f.alias ~= f.name and f.alias or nil
              if alias or fixed[f.name] then
                fields[#fields + 1] = { field = f.name, alias = alias, read_only = fixed[f.name] }
              end
            end
            if #fields > 0 and not failed then
              local na, nr = project.add_fields(st.db, st.path, p.name, t.spec.table, fields)
              if na then aliases, read_only = aliases + na, read_only + nr else failed = nr end
            end
          end
          local what = ("the QGIS project %s in the file was saved by %s"):format(p.name, tostring(p.who))
          if failed then
            lines[#lines + 1] = ("%s: kept as it is (the new fields' aliases could not be added to it: %s; the fields "
              .. "show with their domains' widgets, their aliases in the layers' default styles)"):format(what,
              tostring(failed))
          elseif aliases + read_only > 0 then
            lines[#lines + 1] = ("%s: kept, with the %s of the field%s the server added written into it (nothing "
              .. "else of it changed)"):format(what, aliases > 0 and (aliases == 1 and "alias" or "aliases")
              .. (read_only > 0 and " and read-only states" or "") or "read-only states",
              aliases + read_only == 1 and "" or "s")
          elseif p.name == name then
            lines[#lines + 1] = ("%s: kept as it is (the changed fields show with their domains' widgets; their "
              .. "aliases in the layers' default styles)"):format(what)
          end
        end
      end
      -- a line of the sync log: what was taken, when
      local logged, lerr = st:log{ operation = "schema", outcome = "ok", message = table.concat(lines, "; ") }
      if not logged then error({ store_error = lerr }) end
    end)
    if done then return true end
    if type(e) == "table" and e.db then return nil, shared.db_error(st.path, e.db[1], e.db[2]) end
    if type(e) == "table" and e.store_error then return nil, e.store_error end
    error(e, 0)
  end)
  domains.forget(st)
  if not ok then
    -- rolled back: the specs as they were, registered again
    for spec, was in pairs(saved) do
      for k, v in pairs(was) do spec[k] = v end
      shared.register_layer(st.db, spec)
    end
    return nil, err
  end
  return lines, changes
end

return M
