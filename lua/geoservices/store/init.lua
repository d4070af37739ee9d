--- The replica store: a replica's data, generations, local edits and sync
-- history in one OGC GeoPackage (SQLite) file that GDAL and QGIS open.
--
--     local store = require "geoservices.store"
--     local st = assert(store.create(client, "crew-1.gpkg", {
--       service = "Parcels", layers = { 0, 1 }, replicaName = "crew-1",   -- createReplica's parameters
--     }))
--     local gid = st:add(0, { attributes = { NAME = "x" }, geometry = { x = 1, y = 2 } })
--     st:update(0, { attributes = { GlobalID = gid, NAME = "y" } })
--     st:delete(0, gid)
--     print(st:count(0), #st:pending())
--     st:close()
--
-- Local edits are applied to the feature tables at once and queued in the
-- same transaction (the queue is the journal: an edit leaves it only when
-- the server's result for it is committed). Downloaded records go from the
-- C record extractor straight into prepared statements (`st:apply`), inside
-- one transaction with the new generations; a failure at any point leaves
-- the file as it was. The file is in WAL mode: readers (QGIS, GDAL, another
-- process) never block the store's writes, nor it theirs; a write waits for
-- another writer's lock up to `busy_timeout` seconds, then fails with an
-- error of kind "busy".
--
-- Edit in QGIS. The store is the dataset itself: open it in QGIS (`qgis
-- crew-1.gpkg`), GDAL or the sqlite3 shell, edit, save. Triggers in the
-- file queue every insert, update and delete, whoever makes it
-- (geoservices.store.edits.capture), and the library's own st:add/update/delete
-- go the same way:
--
--     ogrinfo -sql "UPDATE Parcels SET OWNER = 'Jane' WHERE APN = '101-200-01'" crew-1.gpkg
--     geoservices status crew-1.gpkg        -- replica, generation, last sync, local edits, failed, conflicts
--     geoservices pending crew-1.gpkg       -- one line per local edit: kind, layer, GlobalID, what it sends
--     geoservices sync --busy-timeout 30 crew-1.gpkg   -- QGIS may keep the file open (WAL)
--     geoservices conflicts crew-1.gpkg     -- local edits that lost to the server's version
--     geoservices discard crew-1.gpkg {0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}   -- the server's version back
--
-- A feature added in QGIS gets its GlobalID from the file (a version 4
-- UUID) and a positive fid; the server's OBJECTID is a field of its own,
-- filled by the sync that sends it. A download that changes a feature whose
-- local edit was not sent keeps the local version in the table
-- geoservices_conflicts (QGIS lists it). Before sending, a sync checks the
-- file (quick_check), refuses a copy of a store another copy synchronized
-- (`adopt_copy`, `--adopt-copy`) and refuses, edit by edit, what the server
-- cannot take, naming the layer, the GlobalID and the rule.
--
-- Runtime failures return `nil, err` (geoservices.errors): kind "busy" (the
-- lock wait ran out), "invalid" (refused: an unknown layer or GlobalID, a
-- file already there), "protocol" (a downloaded record the store cannot
-- take), "io" (SQLite or the file system; `err.code` is SQLite's, e.g.
-- "corrupt", "full", "readonly"). Misuse (wrong argument types) raises.
--
-- This module opens and creates stores and owns the Store class: its
-- connection, transactions and capture switch. Every other method is a
-- function of the module of its concept, taking the store first, attached
-- to the class in one table at the end of this file (METHODS): the
-- features and local edits in store/edits/, the replica's state and the
-- synchronization in store/sync/, the tables' shape in store/file/. Those
-- modules never require this one.
-- @module geoservices.store
local attachment_edits = require "geoservices.store.edits.attachment_edits"
local attachments = require "geoservices.store.file.attachments"
local building = require "geoservices.store.building"
local capture = require "geoservices.store.edits.capture"
local core = require "geoservices.core"
local create = require "geoservices.store.sync.create"
local errors = require "geoservices.base.errors"
local extension = require "geoservices.store.file.extension"
local features = require "geoservices.store.edits.features"
local inspect = require "geoservices.store.edits.inspect"
local json = require "geoservices.base.json"
local migrate = require "geoservices.store.file.migrate"
local queue = require "geoservices.store.edits.queue"
local replica_state = require "geoservices.store.sync.replica_state"
local resolve = require "geoservices.store.edits.resolve"
local schema = require "geoservices.store.file.schema"
local shared = require "geoservices.store.shared"
local store_sync = require "geoservices.store.sync"
local table_shape = require "geoservices.store.file.table_shape"
local wal_copy = require "geoservices.store.file.wal_copy"

local store = {}

local Store = {}
Store.__index = Store
Store.__name = "geoservices.ReplicaStore"

local busy_ms, db_error, layer_of = shared.busy_ms, shared.db_error, shared.layer_of
local register = shared.register_layer

store.normalize_global_id = shared.normalize_gid

-- `format`: the format of the file's own tables (schema.FORMAT unless a
-- store of an older one was opened read-only).
local function new_store(db, path, layers, format)
  return setmetatable({ db = db, path = path, layers = layers, format = format or schema.FORMAT }, Store)
end

-- The format of the store's own tables, or nil, err (kind "io"): not a
-- GeoPackage, not a replica store, a format newer than this library reads.
local function format_of(db, path)
  local rows, m, c = db:rows("PRAGMA application_id")
  if not rows then return nil, db_error(path, m, c) end
  if rows[1].application_id ~= schema.APPLICATION_ID then
    return nil, errors.new("io", ("%s is not a GeoPackage"):format(path), { path = path, code = "not_a_store" })
  end
  rows, m, c = db:rows("SELECT format FROM gpkgext_geoservices_replica WHERE id = 1")
  if not rows and c == "sqlite" then -- a store made before format 10 names its tables geoservices_*
    rows, m, c = db:rows("SELECT format FROM geoservices_replica WHERE id = 1")
  end
  if not rows and c ~= "sqlite" then return nil, db_error(path, m, c) end -- busy, io...: not "no such table"
  if not rows or not rows[1] then
    return nil, errors.new("io", ("%s is a GeoPackage but not a replica store"):format(path),
      { path = path, code = "not_a_store" })
  end
  if rows[1].format > schema.FORMAT then
    return nil, errors.new("io", ("replica store %s has format %d; this library reads up to %d"):format(
      path, rows[1].format, schema.FORMAT), { path = path, code = "format" })
  end
  return rows[1].format
end

-- The layers' specs as gpkgext_geoservices_layers keeps them, by id; or nil, msg, code.
local function read_layers(db)
  local rows, m, c = db:rows("SELECT * FROM gpkgext_geoservices_layers ORDER BY layer_id")
  if not rows then return nil, m, c end
  local layers = {}
  for _, r in ipairs(rows) do
    local spec = {
      id = r.layer_id, table = r.table_name, name = r.name, geometry_kind = r.geometry_kind,
      geometry_column = r.geometry_column, srs_id = r.srs_id, oid = r.object_id_field,
      globalid = r.global_id_field, sync_direction = r.sync_direction, columns = json.decode(r.columns),
    }
    layers[spec.id] = spec
  end
  return layers
end

-- the failures of a read-write open that a read-only open may get past (store.open's "where_needed")
local CANNOT_WRITE = { cantopen = true, readonly = true, full = true, io = true }

--- Opens an existing store. A store written by an earlier version of this
-- library (an older format) is brought up to date first, in one
-- transaction; opened read-only it is read as it is (its queued edits
-- have no base, it has no conflicts).
-- @string path the GeoPackage file
-- @tparam[opt] table opts `busy_timeout` (seconds to wait for another process's lock, default 5),
--   `readonly` (true: open read-only; this works where the store cannot be written, a read-only
--   medium, a folder of another user or a full disk: csrc/store/open_read.h. When its last commits
--   wait in PATH-wal without PATH-shm, they are read from a copy in $TMPDIR, and the store's
--   `read_note` says so in words; "where_needed": read-write, or read-only where it cannot be
--   written, for what only reads)
-- @treturn[1] Store the store
-- @return[2] nil
-- @treturn[2] table err: kind "io" (no such file, not a store), "busy"
-- @raise when path is not a string
function store.open(path, opts)
  if type(path) ~= "string" then error("store.open: path must be a string", 2) end
  if opts and opts.readonly == "where_needed" then
    local rw = {}
    for k, v in pairs(opts) do rw[k] = v end
    rw.readonly = nil
    local st, err = store.open(path, rw)
    if st or err.kind ~= "io" or not CANNOT_WRITE[err.code] then return st, err end
    rw.readonly = true
    return store.open(path, rw)
  end
  local f = io.open(path, "rb")
  if not f then return nil, errors.new("io", ("replica store %s: no such file"):format(path), { path = path }) end
  f:close()
  local db, msg, code = core.store_open(path, { busy_timeout = busy_ms(opts), readonly = opts and opts.readonly })
  local copy, note
  if not db and code == "wal" then -- read-only: commits in its -wal that only a copy reads
    copy, note = wal_copy.make(path)
    if not copy then return nil, note end
    db, msg, code = core.store_open(copy, { busy_timeout = busy_ms(opts) })
  end
  if not db then
    if copy then wal_copy.remove(copy) end
    return nil, db_error(path, msg, code)
  end
  local function close_db()
    db:close()
    if copy then wal_copy.remove(copy) end
  end
  local function fail(m, c)
    close_db()
    return nil, db_error(path, m, c)
  end
  local format, ferr = format_of(db, path)
  if not format then
    close_db()
    return nil, ferr
  end
  if format < schema.FORMAT and not (opts and opts.readonly) then
    local ok, mm, mc = migrate.run(db, path)
    if not ok then return fail(mm, mc) end
    format = schema.FORMAT
  elseif format < 10 then -- read as it is: its tables under today's names, the file untouched
    local ok, mm, mc = extension.alias_old(db)
    if not ok then return fail(mm, mc) end
  end
  if not (opts and opts.readonly) then
    -- a store made before WAL mode: switched now (best effort: a process
    -- holding the file keeps it as it is until the next open)
    local rows = db:rows("PRAGMA journal_mode")
    if rows and rows[1] and rows[1].journal_mode ~= "wal" then db:rows("PRAGMA journal_mode = WAL") end
  end
  local layers, lm, lc = read_layers(db)
  if not layers then return fail(lm, lc) end
  -- the tables as the user left them: a column renamed or deleted in QGIS is left out, one added kept
  local fitted, fm, fc = table_shape.fit(db, layers)
  if not fitted then return fail(fm, fc) end
  local remade, rm_msg, rm_code = table_shape.remake_all(db, layers, opts and opts.readonly)
  if not remade then return fail(rm_msg, rm_code) end
  for _, spec in pairs(layers) do
    local ok, rm, rc = register(db, spec)
    if not ok then return fail(rm, rc) end
  end
  if not (opts and opts.readonly) then
    local ok, rm, rc = migrate.refresh(db, layers)
    if not ok then return fail(rm, rc) end
  end
  local st = new_store(db, path, layers, format)
  st.copy, st.read_note = copy, note
  -- a photo QGIS's form added by its parent's GlobalID alone, queued (best
  -- effort here: another writer may hold the file; each sync does it again)
  if not (opts and opts.readonly) then attachments.link_orphans(st) end
  return st
end

--- Creates a store from a replica's description and its layers' metadata,
-- and fills it with a first result (the createReplica half calls this with
-- the replica it created and the records of its data).
--
-- Contract: nothing exists at `path` until the whole store is committed;
-- it is built in `path .. ".creating-<random>"` and renamed into place, so a
-- failure (or a crash) at any point leaves no store behind. The
-- generations come from `replica_info`, overridden by the result's own
-- top-level `replicaServerGen`/`layerServerGens` when it has them.
-- @string path the new GeoPackage (must not exist)
-- @tparam table replica_info `service`, `replicaID`, `replicaName`, `syncModel` ("perReplica" or
--   "perLayer"), `syncDirection`, `layers` (ids), `replicaServerGen`, `replicaServerSibGen`,
--   `layerServerGens` (array or JSON text), `syncLayers` (per-layer directions); anything else is
--   kept as JSON in gpkgext_geoservices_replica.info
-- @tparam table layers_metadata the layer resources (`{service}/FeatureServer/{id}?f=json`), one per layer
-- @param source the first result's records: nil (none); a path (string) of a JSON result file; a
--   core.records() extractor already fed (and finished); or a function `source(apply)` that feeds
--   the records itself (a download) and calls `apply(records)` whenever it likes (after each
--   chunk) — apply drains the extractor into the store and returns the count, or nil, err —
--   and returns true, or nil, err to abandon the creation
-- @tparam[opt] table opts `busy_timeout` (seconds), `on_record(kind, layer_id, value, key)` (the
--   records the store does not apply: top-level fields, layer fields, edit results),
--   `on_fill(bytes, total, records)` (with a result file as source: after each MiB of it applied,
--   and once at the end with bytes == total), `on_phase(text)` (each step after the fill that may
--   take seconds at 1M features, named: "building the GlobalID index of Parcels"...), `on_tick()`
--   (called every few tens of milliseconds while one SQL statement runs long, as an index is built:
--   a display moves; it must not use the store)
-- @treturn[1] Store the store, open
-- @return[2] nil
-- @treturn[2] table err: "invalid" (a file at path, bad metadata), "protocol" (a bad record), "io"
-- @raise on misuse (argument types); an error raised by `source` is raised again after the
--   temporary file is removed
function store.create_from(path, replica_info, layers_metadata, source, opts)
  if type(path) ~= "string" then
    error("store.create_from: path must be a string (store.create(client, ...) is the createReplica half)", 2)
  end
  if type(replica_info) ~= "table" then error("store.create_from: replica_info must be a table", 2) end
  if type(layers_metadata) ~= "table" then error("store.create_from: layers_metadata must be a table", 2) end
  opts = opts or {}
  local model = replica_info.syncModel or replica_info.model or "perReplica"
  if model ~= "perReplica" and model ~= "perLayer" then
    return nil, errors.invalid("syncModel", "perReplica or perLayer")
  end
  local b, err = store.building(path, layers_metadata, opts)
  if not b then return nil, err end
  local ok, n, ferr = pcall(function()
    if source == nil then return 0 end
    if type(source) == "string" then return b:apply_file(source, opts.on_fill) end
    if type(source) == "function" then
      local fed, e = source(function(records) return b:apply(records) end)
      if fed then return 0 end
      return nil, e
    end
    return b:apply(source)
  end)
  if not ok then
    b:abandon()
    error(n, 0) -- the source's error, raised again once the temporary file is gone
  end
  if not n then
    b:abandon()
    return nil, ferr
  end
  return b:finish(replica_info)
end

--- Starts building a store at `path` (which must not exist) for the layers
-- of `layers_metadata`: a temporary file beside it holds the tables, in one
-- transaction, ready to take a first result's records as they come
-- (`b:apply(records, deliver)`, as a download arrives, or `b:apply_file(file)`);
-- `b:finish(replica_info)` then builds its indexes, commits and renames it
-- into place, or `b:abandon()` removes it (also when `b` is closed, as a
-- to-be-closed variable, without being finished). store.create and the CLI's
-- `replica create OUT.gpkg` fill it while createReplica's result downloads
-- (`client:create_replica(..., {fill = b})`): the result is parsed once.
-- @string path the new GeoPackage (must not exist)
-- @tparam table layers_metadata the layer resources, as store.create_from takes them
-- @tparam[opt] table opts as store.create_from's: `busy_timeout`, `on_record`, `on_fill`, `on_phase`,
--   `on_tick`; and `on_applied(records)` after each `b:apply`: the records read so far (applied, or
--   waiting for their layer's id)
-- @return the store being built, or nil, err ("invalid": a file at path, bad metadata; "io")
function store.building(path, layers_metadata, opts)
  return building.start(path, layers_metadata, opts, { new = new_store, open = store.open })
end

--- Creates a replica on the server (createReplica) and a store holding it
-- (geoservices.store.create): nothing exists at `path` unless the whole
-- store committed. A store from a replica and data already at hand is
-- @{create_from} (the form `store.create(path, replica_info, layers_metadata,
-- opts)`, an empty store, is kept for earlier callers).
-- @param client a geoservices client
-- @string path the new GeoPackage (must not exist)
-- @tparam table params `service` (required), `layers` (ids; default every layer of the service),
--   and the createReplica parameters (replicaName, syncModel, syncDirection, geometry...), passed through
-- @tparam[opt] table opts `on_status`, `on_progress` (the download), `on_fill(bytes, total, records)`
--   (the store being filled), `timeout`, `poll_interval`, `busy_timeout`
-- @return the open store, or nil, err (kind "invalid" with nothing sent: a file at path, a bad
--   parameter, a capability the service lacks; or the errors of createReplica and the store)
-- @raise on misuse
function store.create(client, path, params, opts)
  if type(client) == "string" then -- the earlier form: (path, replica_info, layers_metadata, opts)
    return store.create_from(client, path, params, nil, opts)
  end
  if type(client) ~= "table" or type(client.create_replica) ~= "function" then
    error("store.create: the first argument must be a geoservices client (or a path: see store.create_from)", 2)
  end
  return create.create(client, path, params, opts, store.building)
end

--- A replica store opened by @{open} or @{create}.
-- @type Store

function Store:__tostring()
  if not self.db then return ("replica store %s (closed)"):format(self.path) end
  local r = self.db:rows("SELECT replica_id, sync_model FROM gpkgext_geoservices_replica WHERE id = 1")
  local q = self.db:rows("SELECT count(*) AS n FROM gpkgext_geoservices_edits")
  local nlayers = 0
  for _ in pairs(self.layers) do nlayers = nlayers + 1 end
  local replica = r and r[1] or {}
  return ("replica store %s: replica %s (%s), %d layer%s, %s pending edit%s"):format(self.path,
    replica.replica_id or "?", replica.sync_model or "?", nlayers, nlayers == 1 and "" or "s",
    q and q[1].n or "?", q and q[1].n == 1 and "" or "s")
end

--- Closes the store (idempotent; an open transaction is rolled back).
-- @treturn boolean true
function Store:close()
  if self.db then self.db:close() end
  self.db = nil
  if self.copy then wal_copy.remove(self.copy) end
  self.copy = nil
  return true
end
Store.__close = Store.close

function Store:_db()
  if not self.db then error("attempt to use a closed replica store", 3) end
  return self.db
end

--- Runs `fn(store, ...)` in one write transaction (BEGIN IMMEDIATE): it is
-- committed when fn returns anything but `nil, err`, rolled back otherwise
-- (and when fn raises: the error is raised again). Inside a transaction,
-- fn simply runs in it.
-- @tparam function fn the work
-- @return fn's results, or nil, err (kind "busy" when the lock could not be had)
-- @raise what fn raises
function Store:transaction(fn, ...)
  local db = self:_db()
  if db:in_transaction() then return fn(self, ...) end
  local ok, msg, code = db:begin()
  if not ok then return nil, db_error(self.path, msg, code) end
  local results = table.pack(pcall(fn, self, ...))
  if not results[1] then
    db:rollback()
    error(results[2], 0)
  end
  if results[2] == nil and results.n >= 3 and results[3] ~= nil then
    db:rollback()
    return nil, results[3]
  end
  ok, msg, code = db:commit()
  if not ok then
    db:rollback()
    return nil, db_error(self.path, msg, code)
  end
  return table.unpack(results, 2, results.n)
end

--- Runs `fn()` with change capture off (geoservices.store.edits.capture): the
-- library's own writes of what the server sent are not local edits. It
-- runs in a transaction (the caller's, or its own): capture is switched
-- back on before fn's results are returned, and a rollback restores it
-- too, so no other connection ever sees it off. A store of an older format
-- opened read-only has no capture to switch.
-- @tparam function fn the work
-- @return fn's results, or nil, err
-- @raise what fn raises
function Store:_uncaptured(fn)
  local db = self:_db()
  if self.format < 3 then return fn() end
  return self:transaction(function()
    -- nested (st:apply inside a sync's commit): capture is off already and
    -- stays off until the outer call ends
    local state = db:rows("SELECT enabled FROM gpkgext_geoservices_capture WHERE id = 1")
    if state and state[1] and state[1].enabled == 0 then return fn() end
    local ok, msg, code = capture.set(db, false)
    if not ok then return nil, db_error(self.path, msg, code) end
    local results = table.pack(fn())
    ok, msg, code = capture.set(db, true)
    if not ok then return nil, db_error(self.path, msg, code) end
    return table.unpack(results, 1, results.n)
  end)
end

--- Applies the complete records of a core.records() extractor: downloaded
-- features and attachments go into the tables (in C, no Lua value per
-- record); the other records (fields, layer fields, edit results, and
-- "layer" when a layer entry starts) go to `on_record(kind, layer_id, value,
-- key)`. It runs in the caller's @{transaction} (a download's records and
-- its generations commit together), or in its own; what it writes is the
-- server's, never captured as local edits.
-- @tparam userdata records a core.records() extractor
-- @tparam[opt] function on_record the receiver of the other records
-- @treturn[1] integer records applied
-- @treturn[1] integer records delivered to on_record
-- @return[2] nil
-- @treturn[2] table err: kind "protocol" (a record the store cannot take), "io"; the extractor's
--   complete records are consumed either way: roll back
-- @raise what on_record raises
function Store:apply(records, on_record)
  local db = self:_db()
  return self:_uncaptured(function()
    local n, delivered, code = db:apply(records, on_record)
    if not n then return nil, db_error(self.path, delivered, code) end
    return n, delivered
  end)
end

--- Removes every feature of a layer (before a snapshot layer's replacement data).
-- @int layer_id the layer
-- @return true, or nil, err
function Store:clear_layer(layer_id)
  local spec, err = layer_of(self, layer_id)
  if not spec then return nil, err end
  local db = self:_db()
  return self:_uncaptured(function()
    local ok, msg, code = db:run("DELETE FROM " .. schema.ident(spec.table))
    if not ok then return nil, db_error(self.path, msg, code) end
    return true
  end)
end

-- Every other method of a Store, each a function of its concept's module
-- that takes the store first (documented there).
local METHODS = {
  -- the features: read, and edited locally (store/edits/features.lua)
  get = features.get, count = features.count,
  add = features.add, update = features.update, delete = features.delete,
  -- the queue of local edits and its attempts (store/edits/queue.lua)
  pending = queue.Store.pending, failed = queue.Store.failed,
  begin_attempt = queue.Store.begin_attempt, attempt_job = queue.Store.attempt_job,
  attempt = queue.Store.attempt, end_attempt = queue.Store.end_attempt,
  -- the store's state at a glance, and a local edit discarded (store/edits/inspect.lua)
  status = inspect.Store.status, discard = inspect.Store.discard,
  -- the conflicts kept and their resolution (store/edits/resolve.lua)
  conflicts = resolve.Store.conflicts, discard_conflict = resolve.Store.discard_conflict,
  resolve = resolve.Store.resolve,
  conflict_policy = resolve.Store.conflict_policy, set_conflict_policy = resolve.Store.set_conflict_policy,
  -- the attachments edited locally (store/edits/attachment_edits.lua)
  add_attachment = attachment_edits.add, delete_attachment = attachment_edits.delete,
  attachment_edits = attachment_edits.pending,
  -- what the user changed in the layers' tables, in plain words (store/file/table_shape.lua)
  schema_notes = table_shape.notes,
  -- the replica: its description, generations and sync log (store/sync/replica_state.lua)
  replica = replica_state.Store.replica, generations = replica_state.Store.generations,
  set_generations = replica_state.Store.set_generations, log = replica_state.Store.log,
  -- the synchronization with the server (store/sync/init.lua)
  sync = store_sync.sync, unregister = store_sync.unregister,
}
for name, fn in pairs(METHODS) do
  assert(Store[name] == nil and type(fn) == "function", name)
  Store[name] = fn
end

return store
