--- A layer's columns given other declared types (issue 37: a field whose
-- type or length the server changed). SQLite cannot change a column's
-- declared type (ALTER TABLE has no such form), so the table is made again,
-- as SQLite's "other kinds of table schema changes" procedure has it
-- (https://www.sqlite.org/lang_altertable.html, section 7), inside the
-- caller's transaction:
--
-- * its CREATE TABLE text, with the columns' declared types replaced (every
--   other column, local-only ones too, and every DEFAULT, as they were), makes
--   a new table, which takes every row as it is (its fid too: the R-tree,
--   keyed by fid, stays right; SQLite's type affinity converts each value the
--   new type can hold, `12` to `'12'` for a TEXT column, `'7'` to `7` for an
--   integer one, and keeps any other as it was: nothing is lost);
-- * the old table is dropped, the new one takes its name (with
--   legacy_alter_table on, so that the triggers of other tables that name it,
--   as the relations' do, are left as they were and work again);
-- * its indexes and triggers (the GlobalID index, the R-tree's, the capture
--   triggers, the relations' and GDAL's) are made again from their own SQL,
--   and the AUTOINCREMENT sequence keeps its highest fid (a fid is never
--   given twice).
--
-- Its registration (gpkg_contents, gpkg_geometry_columns, gpkg_extensions,
-- gpkg_data_columns) names the table, never its page: nothing there changes.
-- @module geoservices.store.file.retype
-- @local
local schema = require "geoservices.store.file.schema"

local retype = {}

local q = schema.ident

local function run(db, sql, ...)
  local ok, m, c
  if select("#", ...) > 0 then ok, m, c = db:run(sql, ...) else ok, m, c = db:exec(sql) end
  if not ok then error({ db = { m, c } }, 0) end
end

-- The declared type of each column of table `t`, by lower-case name.
function retype.declared(db, t)
  local out = {}
  local rows, m, c = db:rows(("PRAGMA table_info(%s)"):format(q(t)))
  if not rows then return nil, m, c end
  for _, r in ipairs(rows) do out[r.name:lower()] = { name = r.name, type = r.type or "" } end
  return out
end

-- The CREATE TABLE text with each column's declared type replaced, or nil, why.
local function edited(sql, changes)
  for _, ch in ipairs(changes) do
    local head = q(ch.column) .. " " .. ch.from
    local at, n, found = 1, 0, nil
    while true do
      local s, e = sql:find(head, at, true)
      if not s then break end
      local after = sql:sub(e + 1, e + 1)
      if after == "," or after == ")" or after:match("%s") then
        n, found = n + 1, { s, e }
      end
      at = e + 1
    end
    if n ~= 1 then return nil, ("column %s is not declared %s once in its CREATE TABLE"):format(ch.column, ch.from) end
    sql = sql:sub(1, found[1] - 1) .. q(ch.column) .. " " .. ch.to .. sql:sub(found[2] + 1)
  end
  return sql
end

--- Makes table `t` again with the columns' new declared types.
-- @param db the connection (in a transaction)
-- @string t the table
-- @tparam table changes `{column =, from =, to =}` each: the column's name and declared types
--   (`from` as PRAGMA table_info gives it)
-- @return true, or nil, msg, code (nothing changed: the CREATE TABLE text does not declare a
--   column so once, code "schema"; or the database's error: the caller rolls back)
function retype.apply(db, t, changes)
  local rows, m, c = db:rows("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", t)
  if not rows then return nil, m, c end
  local create = rows[1] and rows[1].sql
  if not create then return nil, ("no table %s"):format(t), "schema" end
  local body, why = edited(create, changes)
  if not body then return nil, why, "schema" end
  local paren = body:find("(", 1, true)
  local tmp = "geoservices_retype_" .. t
  local kept
  kept, m, c = db:rows("SELECT type, sql FROM sqlite_master WHERE tbl_name = ? AND type IN ('index', 'trigger') "
    .. "AND sql IS NOT NULL ORDER BY type = 'trigger', rowid", t)
  if not kept then return nil, m, c end
  local seq
  seq, m, c = db:rows("SELECT seq FROM sqlite_sequence WHERE name = ?", t)
  if not seq then return nil, m, c end
  local legacy
  legacy, m, c = db:rows("PRAGMA legacy_alter_table")
  if not legacy then return nil, m, c end
  legacy = legacy[1] and legacy[1].legacy_alter_table or 0
  local ok, err = pcall(function()
    run(db, "CREATE TABLE " .. q(tmp) .. " " .. body:sub(paren))
    run(db, ("INSERT INTO %s SELECT * FROM %s"):format(q(tmp), q(t)))
    run(db, "DROP TABLE " .. q(t))
    run(db, "PRAGMA legacy_alter_table = ON")
    local renamed, rm, rc = db:exec(("ALTER TABLE %s RENAME TO %s"):format(q(tmp), q(t)))
    run(db, ("PRAGMA legacy_alter_table = %d"):format(legacy))
    if not renamed then error({ db = { rm, rc } }, 0) end
    if seq[1] then
      run(db, "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = ?", seq[1].seq, t)
      run(db, "INSERT INTO sqlite_sequence (name, seq) SELECT ?, ? WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence "
        .. "WHERE name = ?)", t, seq[1].seq, t)
    end
    for _, r in ipairs(kept) do run(db, r.sql) end
  end)
  if ok then return true end
  if type(err) == "table" and err.db then return nil, err.db[1], err.db[2] end
  error(err, 0)
end

--- Converts a JSON value as a column declared `decl` would keep it (its
-- type affinity), for each row of `tbl` whose JSON column `col` holds a
-- value at `path`, selected by `where` (SQL with `...` as its parameters):
-- the queued edits' bases, so that an edit compares the table's converted
-- value with a base converted alike.
-- @return true, or nil, msg, code
function retype.convert_json(db, decl, tbl, col, path, where, ...)
  local ok, err = pcall(function(...)
    run(db, ("CREATE TEMP TABLE geoservices_retype_values (id INTEGER PRIMARY KEY, v %s)"):format(decl))
    run(db, ("INSERT INTO temp.geoservices_retype_values (id, v) SELECT rowid, json_extract(%s, %s) FROM %s "
      .. "WHERE json_valid(%s) AND json_type(%s, %s) NOT IN ('null', 'object', 'array') AND (%s)"):format(q(col),
      schema.literal(path), q(tbl), q(col), q(col), schema.literal(path), where), ...)
    run(db, ("UPDATE %s SET %s = json_set(%s, %s, (SELECT v FROM temp.geoservices_retype_values AS r WHERE r.id = "
      .. "%s.rowid)) WHERE rowid IN (SELECT id FROM temp.geoservices_retype_values)"):format(q(tbl), q(col), q(col),
      schema.literal(path), q(tbl)))
    run(db, "DROP TABLE temp.geoservices_retype_values")
  end, ...)
  if ok then return true end
  db:exec("DROP TABLE IF EXISTS temp.geoservices_retype_values")
  if type(err) == "table" and err.db then return nil, err.db[1], err.db[2] end
  error(err, 0)
end

return retype
