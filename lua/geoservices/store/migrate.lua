--- Brings a replica store of an older format up to schema.FORMAT, in one
-- write transaction: a failure leaves the file as it was, and another
-- process opening the same store meanwhile waits for the lock, then finds
-- the format current and does nothing. Internal (geoservices.store.open).
--
-- * 1 -> 2: the base of queued and failed edits, the conflicts table;
-- * 2 -> 3: the capture triggers on every feature table and their control
--   table (geoservices.store.capture); the queued edits not sent yet read
--   what they send from the feature table from now on.
-- @module geoservices.store.migrate
-- @local
local capture = require "geoservices.store.capture"
local json = require "geoservices.json"
local schema = require "geoservices.store.schema"

local migrate = {}

-- The layer specs of the file (the columns as geoservices_layers keeps them).
local function layer_specs(db)
  local rows, m, c = db:rows("SELECT * FROM geoservices_layers ORDER BY layer_id")
  if not rows then return nil, m, c end
  local specs = {}
  for _, r in ipairs(rows) do
    specs[#specs + 1] = { id = r.layer_id, table = r.table_name, geometry_column = r.geometry_column,
                          oid = r.object_id_field, globalid = r.global_id_field, columns = json.decode(r.columns) }
  end
  return specs
end

local function to_format_3(db)
  for _, sql in ipairs(capture.CONTROL_SQL) do
    local ok, m, c = db:exec(sql)
    if not ok then return nil, m, c end
  end
  local specs, m, c = layer_specs(db)
  if not specs then return nil, m, c end
  for _, spec in ipairs(specs) do
    for _, sql in ipairs(capture.layer_sql(spec)) do
      local ok, em, ec = db:exec(sql)
      if not ok then return nil, em, ec end
    end
  end
  -- an edit not sent yet sends what its feature holds when it goes
  return db:exec("UPDATE geoservices_edits SET feature = NULL WHERE attempt_id IS NULL")
end

-- MIGRATIONS[n]: what turns format n - 1 into n (SQL statements, or a function(db)).
local STEPS = {
  [2] = schema.MIGRATIONS[2],
  [3] = to_format_3,
}

--- Migrates an open store's file.
-- @param db the connection (outside a transaction)
-- @return true, or nil, msg, code (nothing changed)
function migrate.run(db)
  local ok, m, c = db:begin()
  if not ok then return nil, m, c end
  local function abort(msg, code)
    db:rollback()
    return nil, msg, code
  end
  local rows
  rows, m, c = db:rows("SELECT format FROM geoservices_replica WHERE id = 1")
  if not rows then return abort(m, c) end
  for n = rows[1].format + 1, schema.FORMAT do
    local step = STEPS[n]
    if type(step) == "function" then
      ok, m, c = step(db)
      if not ok then return abort(m, c) end
    else
      for _, sql in ipairs(step) do
        ok, m, c = db:exec(sql)
        if not ok then return abort(m, c) end
      end
    end
  end
  ok, m, c = db:run("UPDATE geoservices_replica SET format = ? WHERE id = 1", schema.FORMAT)
  if ok then ok, m, c = db:commit() end
  if not ok then return abort(m, c) end
  return true
end

return migrate
