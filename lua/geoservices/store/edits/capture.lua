--- Change capture in the file itself: plain SQL triggers on each feature
-- table record every insert, update and delete in the queue
-- (gpkgext_geoservices_edits), whoever makes it: QGIS, GDAL, the sqlite3 shell, or
-- this library, whose own `st:add/update/delete` simply write the table.
-- Nothing of ours needs to be loaded: the triggers use SQLite's core and
-- JSON functions only, so GDAL and QGIS fire them as they fire the R-tree
-- triggers of the GeoPackage standard.
--
-- What a trigger does, per GlobalID (a row of the queue not yet sent is
-- folded into; a row in flight is never touched, a new one follows it):
--
-- * insert: a row without a GlobalID gets one (a version 4 UUID in the
--   form `{XXXXXXXX-XXXX-4XXX-YXXX-XXXXXXXXXXXX}`, upper case), and so does
--   a row repeating the GlobalID of another row of any layer of the store
--   (a paste); a row repeating another's OBJECTID (a split or a duplicate
--   copies the original's) holds none until the sync that sends it records
--   the server's (which replaces any number a local add holds); an add is
--   queued, unless a delete of the same GlobalID is queued: the feature
--   came back, and that delete becomes an update (keeping its base);
-- * update (of anything but the OBJECTID, and with some value changed): an
--   update is queued with its base (the row's values before it, OLD.*),
--   unless an add or update is queued already (it keeps its first base);
-- * delete: an unsent add is dropped (the server never saw the feature), an
--   unsent update becomes the delete (keeping its base), otherwise a delete
--   is queued with its base;
-- * a GlobalID changed by hand: a delete of the old one and an add of the new.
--
-- A trigger never refuses an edit: it has no RAISE, and its statements
-- cannot fail on a value (a blob where text was declared is kept as hex).
-- What the server cannot take is refused at sync time instead, naming the
-- edit (geoservices.store.edits.outgoing).
--
-- The library's own writes of downloaded data are not captured: the
-- one-row table `gpkgext_geoservices_capture` is checked in each trigger's WHEN
-- clause, and switched off and on again inside the transaction that
-- applies a download (other connections never see it off).
-- @module geoservices.store.edits.capture
-- @local
local calendar = require "geoservices.base.calendar"
local core = require "geoservices.core"
local json = require "geoservices.base.json"
local schema = require "geoservices.store.file.schema"

local capture = {}

local q, lit = schema.ident, schema.literal

--- The control table (in every store of format 3 and later).
capture.CONTROL_SQL = {
  [[CREATE TABLE gpkgext_geoservices_capture (id INTEGER PRIMARY KEY CHECK (id = 1), enabled INTEGER NOT NULL)]],
  "INSERT INTO gpkgext_geoservices_capture (id, enabled) VALUES (1, 1)",
}

-- A missing row reads as on: an edit is never lost for want of it.
local CAPTURING = "(SELECT enabled FROM gpkgext_geoservices_capture WHERE id = 1) IS NOT 0"
local NOW = "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"
local NEW_GLOBAL_ID = schema.NEW_GLOBAL_ID -- a version 4 UUID

local PAIRS_PER_OBJECT = 50 -- SQLite allows 127 arguments per function call by default

--- The SQL expression of a row's values as a JSON object (column name ->
-- value, a double with all its digits; the geometry as the hex of its
-- blob; a blob elsewhere as `{"blob": hex}`), its columns read as
-- `prefix .. "col"` ("OLD.", "NEW." or "").
-- @tparam table spec the layer's spec
-- @string prefix the row's prefix
-- @treturn string the expression
function capture.row_sql(spec, prefix)
  local pairs_sql = {}
  for _, c in ipairs(spec.columns) do
    local ref = prefix .. q(c.name)
    -- a double with every digit (json_object would keep 15), but an infinity as it is
    pairs_sql[#pairs_sql + 1] = ("%s, CASE typeof(%s) WHEN 'blob' THEN json_object('blob', hex(%s)) WHEN 'real' THEN "
      .. "CASE WHEN abs(%s) <= 1.7976931348623157e308 THEN json(printf('%%!.17g', %s)) ELSE %s END ELSE %s END")
      :format(lit(c.name), ref, ref, ref, ref, ref, ref)
  end
  if spec.geometry_column then
    pairs_sql[#pairs_sql + 1] = ("%s, hex(%s)"):format(lit(spec.geometry_column), prefix .. q(spec.geometry_column))
  end
  local objects = {}
  for first = 1, #pairs_sql, PAIRS_PER_OBJECT do
    objects[#objects + 1] = "json_object(" .. table.concat(pairs_sql, ", ", first,
      math.min(#pairs_sql, first + PAIRS_PER_OBJECT - 1)) .. ")"
  end
  -- a merge patch drops the members whose value is null: a missing member
  -- reads as null (capture.feature_of)
  local sql = objects[1] or "json_object()"
  for i = 2, #objects do sql = ("json_patch(%s, %s)"):format(sql, objects[i]) end
  return sql
end

-- The base kept by a trigger: `{"row": {...}}` of the row's OLD values.
local function base_sql(spec)
  return ("json_object('row', %s)"):format(capture.row_sql(spec, "OLD."))
end

-- An edit of any value the server keeps (the OBJECTID is the server's own).
local function changed_sql(spec)
  local terms = {}
  for _, c in ipairs(spec.columns) do
    if c.name ~= spec.oid and c.name ~= spec.globalid then
      terms[#terms + 1] = ("OLD.%s IS NOT NEW.%s"):format(q(c.name), q(c.name))
    end
  end
  if spec.geometry_column then
    terms[#terms + 1] = ("OLD.%s IS NOT NEW.%s"):format(q(spec.geometry_column), q(spec.geometry_column))
  end
  if #terms == 0 then return "0" end
  return "(" .. table.concat(terms, " OR ") .. ")"
end

local function trigger_name(spec, what)
  return q(("geoservices_%s_%s"):format(spec.table, what))
end

-- The guard's name: SQLite names the trigger in the message of an ALTER
-- TABLE DROP COLUMN it refuses (as QGIS, GDAL and the sqlite3 shell delete
-- a field), so that it says what happened and what to do.
local function guard_name(spec)
  return ("%s: a field of the service cannot be deleted in its replica store; hide it in QGIS (Attributes Form: "
    .. "Hidden) or delete it on the server (lua-geoservices)"):format(spec.table)
end

-- The guard of a layer's fields: a trigger that never runs (WHEN 0) but reads
-- each field of the service, made first so that SQLite, checking the schema
-- after a DROP COLUMN, stops at it before the capture triggers (which read
-- each field too: their name alone said nothing). A field the user added is
-- not in it: theirs to delete.
local function guard_sql(spec)
  local terms = {}
  for _, c in ipairs(spec.columns) do terms[#terms + 1] = ("OLD.%s IS NULL"):format(q(c.name)) end
  if #terms == 0 then terms[1] = "1" end
  return ("CREATE TRIGGER %s BEFORE DELETE ON %s WHEN 0 AND (%s) BEGIN SELECT 1; END"):format(q(guard_name(spec)),
    q(spec.table), table.concat(terms, " OR "))
end

-- The queue's rows of a GlobalID not sent yet.
local function unsent(layer, gid_sql)
  return ("layer_id = %d AND attempt_id IS NULL AND global_id = %s"):format(layer, gid_sql)
end

-- The statements queuing an add of `gid_sql` (a queued delete of it becomes an update).
local function add_steps(spec, gid_sql)
  local L = spec.id
  return {
    ("UPDATE gpkgext_geoservices_edits SET op = 'update' WHERE %s AND op = 'delete';"):format(unsent(L, gid_sql)),
    ("INSERT INTO gpkgext_geoservices_edits (layer_id, op, global_id, created_at) SELECT %d, 'add', %s, %s "
      .. "WHERE %s IS NOT NULL AND NOT EXISTS (SELECT 1 FROM gpkgext_geoservices_edits WHERE %s);")
      :format(L, gid_sql, NOW, gid_sql, unsent(L, gid_sql)),
  }
end

-- The statements queuing a delete of OLD's GlobalID (order matters: the
-- delete is queued only when nothing is, before an unsent add is dropped).
local function delete_steps(spec)
  local L, gid = spec.id, "OLD." .. q(spec.globalid)
  return {
    ("INSERT INTO gpkgext_geoservices_edits (layer_id, op, global_id, created_at, base) "
      .. "SELECT %d, 'delete', %s, %s, %s WHERE NOT EXISTS (SELECT 1 FROM gpkgext_geoservices_edits WHERE %s);")
      :format(L, gid, NOW, base_sql(spec), unsent(L, gid)),
    ("UPDATE gpkgext_geoservices_edits SET op = 'delete', feature = NULL WHERE %s AND op = 'update';")
      :format(unsent(L, gid)),
    ("DELETE FROM gpkgext_geoservices_edits WHERE %s AND op = 'add';"):format(unsent(L, gid)),
  }
end

-- "the GlobalID `gid_sql` is held by a row of another layer's table" (none: "0").
local function elsewhere(spec, others, gid_sql)
  local list = {}
  for _, o in pairs(others or {}) do list[#list + 1] = o end
  table.sort(list, function(a, b) return a.id < b.id end) -- one text whoever asks (migrate.refresh compares it)
  local terms = {}
  for _, o in ipairs(list) do
    if o.id ~= spec.id and o.table ~= spec.table then
      terms[#terms + 1] = ("EXISTS (SELECT 1 FROM %s AS elsewhere WHERE %s)"):format(q(o.table),
        schema.gid_match("elsewhere." .. q(o.globalid), gid_sql))
    end
  end
  return #terms > 0 and table.concat(terms, " OR ") or "0"
end

--- The statements that create a layer's capture triggers.
-- @tparam table spec the layer's spec (id, table, columns, globalid, oid, geometry_column)
-- @tparam[opt] table others the specs of the store's layers (a list or a map by id; spec's own is
--   skipped): a GlobalID is unique across all their tables
-- @treturn table SQL statements
function capture.layer_sql(spec, others)
  local qt, g = q(spec.table), q(spec.globalid)
  local has_gid = ("OLD.%s IS NOT NULL AND trim(OLD.%s) <> ''"):format(g, g)
  local row_gid = ("(SELECT %s FROM %s WHERE rowid = NEW.rowid)"):format(g, qt)
  local insert = {
    -- a row without a GlobalID gets one (its update fires no capture: OLD's is NULL), and so does a row
    -- repeating another's, in this table or another layer's (a paste in QGIS copies the GlobalID too;
    -- the file has no UNIQUE index to refuse it)
    ("UPDATE OR IGNORE %s SET %s = %s WHERE rowid = NEW.rowid AND (%s IS NULL OR trim(%s) = '' OR EXISTS "
      .. "(SELECT 1 FROM %s AS other WHERE %s AND other.rowid <> NEW.rowid) OR %s);")
      :format(qt, g, NEW_GLOBAL_ID, g, g, qt, schema.gid_match("other." .. g, "NEW." .. g),
        elsewhere(spec, others, "NEW." .. g)),
  }
  if spec.oid then
    -- the OBJECTID is the server's: a row repeating another's (a split or a duplicate in QGIS copies the
    -- original's) holds none until the sync that sends it records the server's
    local oid = q(spec.oid)
    insert[#insert + 1] = ("UPDATE %s SET %s = NULL WHERE rowid = NEW.rowid AND NEW.%s IS NOT NULL AND EXISTS "
      .. "(SELECT 1 FROM %s AS other WHERE other.%s = NEW.%s AND other.rowid <> NEW.rowid);"):format(qt, oid, oid, qt,
        oid, oid)
  end
  for _, s in ipairs(add_steps(spec, row_gid)) do insert[#insert + 1] = s end
  local regid = delete_steps(spec)
  for _, s in ipairs(add_steps(spec, "NEW." .. g)) do regid[#regid + 1] = s end
  return {
    guard_sql(spec),
    ("CREATE TRIGGER %s AFTER INSERT ON %s WHEN %s BEGIN %s END"):format(trigger_name(spec, "insert"), qt,
      CAPTURING, table.concat(insert, " ")),
    ("CREATE TRIGGER %s AFTER UPDATE ON %s WHEN %s AND %s AND OLD.%s IS NEW.%s AND %s BEGIN "
      .. "INSERT INTO gpkgext_geoservices_edits (layer_id, op, global_id, created_at, base) "
      .. "SELECT %d, 'update', NEW.%s, %s, %s WHERE NOT EXISTS (SELECT 1 FROM gpkgext_geoservices_edits "
      .. "WHERE %s); END"):format(trigger_name(spec, "update"), qt, CAPTURING, has_gid, g, g, changed_sql(spec),
      spec.id, g, NOW, base_sql(spec), unsent(spec.id, "NEW." .. g)),
    -- (not when another row, here or in another layer, holds OLD's GlobalID too: a pasted row given
    -- one of its own, above)
    ("CREATE TRIGGER %s AFTER UPDATE OF %s ON %s WHEN %s AND %s AND OLD.%s IS NOT NEW.%s AND NOT EXISTS "
      .. "(SELECT 1 FROM %s AS other WHERE %s AND other.rowid <> OLD.rowid) AND NOT (%s) BEGIN %s END")
      :format(trigger_name(spec, "regid"), g, qt, CAPTURING, has_gid, g, g, qt,
        schema.gid_match("other." .. g, "OLD." .. g), elsewhere(spec, others, "OLD." .. g),
        table.concat(regid, " ")),
    ("CREATE TRIGGER %s AFTER DELETE ON %s WHEN %s AND %s BEGIN %s END"):format(trigger_name(spec, "delete"), qt,
      CAPTURING, has_gid, table.concat(delete_steps(spec), " ")),
  }
end

--- The names of a layer's capture triggers (the guard of its fields first), in @{layer_sql}'s order.
function capture.trigger_names(spec)
  local names = { guard_name(spec) }
  for _, what in ipairs{ "insert", "update", "regid", "delete" } do
    names[#names + 1] = ("geoservices_%s_%s"):format(spec.table, what)
  end
  return names
end

--- Switches capture off or on in the connection's transaction.
-- @param db the store's connection
-- @bool on capture or not
-- @return true, or nil, msg, code
function capture.set(db, on)
  return db:run("UPDATE gpkgext_geoservices_capture SET enabled = ? WHERE id = 1", on and 1 or 0)
end

-- ---- reading what a trigger kept ------------------------------------------

local function unhex(s)
  return (s:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end))
end

--- Epoch milliseconds of the DATETIME text the store and GDAL write
-- (`2023-11-14T22:13:20.000Z`, a space for the T, seconds' fraction and Z
-- optional, or a date alone); nil for anything else.
-- @string text the text
-- @treturn ?integer the milliseconds
function capture.ms_of_iso(text)
  local y, mo, d, rest = text:match("^(%-?%d%d%d%d+)%-(%d%d)%-(%d%d)(.*)$")
  if not y then return nil end
  y, mo, d = math.tointeger(tonumber(y)), math.tointeger(tonumber(mo)), math.tointeger(tonumber(d))
  if mo < 1 or mo > 12 or d < 1 or d > 31 then return nil end
  local ms = calendar.days_from_civil(y, mo, d) * 86400000
  if rest == "" or rest == "Z" then return ms end
  local h, mi, s, frac = rest:match("^[T ](%d%d):(%d%d):(%d%d)(%.?%d*)Z?$")
  if not h then return nil end
  local fraction = 0
  if #frac > 1 then fraction = math.floor(tonumber("0" .. frac) * 1000 + 0.5) end
  return ms + ((tonumber(h) * 60 + tonumber(mi)) * 60 + tonumber(s)) * 1000 + fraction
end

--- A kept row (`{"row": {...}}` as a trigger writes it) as a feature
-- `{attributes =, geometry =}`: dates as epoch milliseconds, the geometry
-- decoded (nil when none, or when its blob cannot be read). A base written
-- by an older store (already a feature) is given back as it is.
-- @tparam table spec the layer's spec
-- @tparam table kept the decoded JSON
-- @treturn table the feature
function capture.feature_of(spec, kept)
  local row = type(kept) == "table" and kept.row
  if type(row) ~= "table" then return kept end
  local attributes = json.object()
  for _, c in ipairs(spec.columns) do
    local v = row[c.name]
    if v == nil then v = json.null end
    if type(v) == "table" and type(v.blob) == "string" then
      v = unhex(v.blob)
    elseif c.type == "date" and type(v) == "string" then
      v = capture.ms_of_iso(v) or v
    end
    attributes[c.name] = v
  end
  local geometry
  local hex = spec.geometry_column and row[spec.geometry_column]
  if type(hex) == "string" and hex ~= "" then geometry = core.esri_geometry(unhex(hex)) end
  return { attributes = attributes, geometry = geometry }
end

return capture
