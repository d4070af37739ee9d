--- A store being built: a new GeoPackage filled from a replica's first
-- result as it arrives, then finished into place (its indexes, capture
-- triggers, relations, the replica's row and generations, WAL) or
-- abandoned, nothing left behind. geoservices.store's `store.building` and
-- `store.create_from` start it; store.sync.create and the CLI's `replica
-- create` fill it while createReplica's result downloads. It stands below
-- geoservices.store, whose Store class it is handed (building.start).
-- @module geoservices.store.building
-- @local
local attachments = require "geoservices.store.file.attachments"
local capture = require "geoservices.store.edits.capture"
local conflicts = require "geoservices.store.edits.conflicts"
local core = require "geoservices.core"
local errors = require "geoservices.base.errors"
local extension = require "geoservices.store.file.extension"
local json = require "geoservices.base.json"
local layer_styles = require "geoservices.store.qgis.layer_styles"
local paths = require "geoservices.store.paths"
local project = require "geoservices.store.qgis.project"
local relations = require "geoservices.store.file.relations"
local replica_state = require "geoservices.store.sync.replica_state"
local result_file = require "geoservices.store.sync.result_file"
local schema = require "geoservices.store.file.schema"
local shared = require "geoservices.store.shared"
local srs = require "geoservices.store.file.srs"

local busy_ms, db_error, now, register_layer = shared.busy_ms, shared.db_error, shared.now, shared.register_layer
local file_exists = paths.exists

local building = {}

-- A store being built: its temporary file, filled, then finished into place or abandoned.
local Building = {}
Building.__index = Building

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
-- @tparam table class geoservices.store's Store class, handed in: `new(db, path, layers)` (a store
--   on the file being built, to fill it), `open(path, opts)` (the store once finished)
-- @return the store being built, or nil, err ("invalid": a file at path, bad metadata; "io")
function building.start(path, layers_metadata, opts, class)
  opts = opts or {}
  if file_exists(path) then
    return nil, errors.new("invalid", ("path: %s exists; a store is never created over a file"):format(path),
      { parameter = "path" })
  end
  local specs, taken, ids = {}, {}, {}
  for _, layer in ipairs(layers_metadata) do
    local spec, why = schema.layer_spec(layer, taken)
    if not spec then return nil, errors.invalid("layers", why) end
    if ids[spec.id] then return nil, errors.invalid("layers", ("layer %d twice"):format(spec.id)) end
    ids[spec.id] = true
    specs[#specs + 1] = spec
  end
  if #specs == 0 then return nil, errors.invalid("layers", "at least one layer") end

  local tmp = paths.beside(path, "creating")
  local db, msg, code = core.store_open(tmp, { create = true, busy_timeout = busy_ms(opts) })
  if not db then return nil, db_error(tmp, msg, code) end
  local layers = {}
  for _, spec in ipairs(specs) do layers[spec.id] = spec end
  local b = setmetatable({ path = path, tmp = tmp, db = db, st = class.new(db, tmp, layers), specs = specs,
                           layers_metadata = layers_metadata, opts = opts, fields = {}, applied = 0,
                           class = class }, Building)
  local function check(ok, m, c)
    if not ok then error({ store_error = db_error(path, m, c) }) end
    return ok
  end
  local ok, err = pcall(function()
    -- The fill writes a file nobody else knows yet (it is renamed into place
    -- once whole, removed otherwise): its rollback journal is kept in memory (a
    -- new file's pages past its first size are never journaled) and nothing
    -- waits for the disk until the end (synchronous, below); WAL then. 100k
    -- points: 2.45 s -> see the commit; a WAL fill writes every page twice.
    check(db:rows("PRAGMA journal_mode = MEMORY"))
    check(db:rows("PRAGMA synchronous = OFF"))
    check(db:begin())
    for _, sql in ipairs(schema.BASE_SQL) do check(db:exec(sql)) end
    for _, sql in ipairs(schema.CONFLICTS_FORMAT_3) do check(db:exec(sql)) end
    for _, sql in ipairs(schema.EDIT_VIEWS_SQL) do check(db:exec(sql)) end
    for _, sql in ipairs(capture.CONTROL_SQL) do check(db:exec(sql)) end
    for _, r in ipairs(srs.rows_for(specs)) do
      check(db:run("INSERT INTO gpkg_spatial_ref_sys (srs_name, srs_id, organization, organization_coordsys_id, "
        .. "definition, description) VALUES (?, ?, ?, ?, ?, ?)", r.srs_name, r.srs_id, r.organization,
        r.organization_coordsys_id, r.definition, r.description))
    end
    for _, spec in ipairs(specs) do
      -- the GlobalID index comes once the table is filled: built from sorted
      -- keys then, not by a random insert per row (1M points: 40.9 s -> 17.1 s)
      local gid_index = schema.gid_index_sql(spec)
      for _, sql in ipairs(schema.layer_sql(spec, spec.srs_id or -1)) do
        if sql ~= gid_index then check(db:exec(sql)) end
      end
      local meta
      for _, l in ipairs(layers_metadata) do
        if math.tointeger(l.id) == spec.id then meta = l end
      end
      check(db:run("INSERT INTO gpkgext_geoservices_layers (layer_id, table_name, name, geometry_kind, "
        .. "geometry_column, srs_id, object_id_field, global_id_field, sync_direction, columns, metadata) "
        .. "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", spec.id, spec.table, spec.name, spec.geometry_kind,
        spec.geometry_column, spec.srs_id, spec.oid, spec.globalid, nil,
        json.encode(json.array(spec.columns)), json.encode(meta)))
      check(register_layer(db, spec))
      for _, sql in ipairs(attachments.layer_sql(spec, meta)) do check(db:exec(sql)) end
      -- the aliases, symbols and labels where QGIS users look (a default style of the layer)
      for _, sql in ipairs(layer_styles.layer_sql(spec, meta)) do check(db:exec(sql)) end
    end
    check(conflicts.layout(db)) -- its geometry in the layers' CRS
    check(project.write(db, path)) -- the QGIS project a user opens (issue 37)
    -- every table is empty: records are inserted without a GlobalID lookup
    -- each (their index comes after; a repeat is settled in finish)
    check(db:filling())
  end)
  if not ok then
    b:abandon()
    if type(err) == "table" and err.store_error then return nil, err.store_error end
    error(err, 0)
  end
  return b
end

-- The first result's records the store does not apply: its fields are kept (the generations, replicaID)
function Building:on_record(deliver)
  local fields, on_record = self.fields, self.opts.on_record
  return function(kind, layer, value, key)
    if kind == "field" then fields[key] = value end
    if on_record then on_record(kind, layer, value, key) end
    if deliver then deliver(kind, layer, value, key) end
  end
end

--- Applies the complete records of a core.records() extractor (the first
-- result, as it arrives); the others go to `deliver(kind, layer, value, key)`.
-- @return the count applied, or nil, err (the building then only abandons)
function Building:apply(records, deliver)
  if self.failed then return nil, self.failed end
  local n, err = self.st:apply(records, self:on_record(deliver))
  if not n then
    self.failed = err
    return nil, err
  end
  self.applied = self.applied + n
  if self.opts.on_applied then self.opts.on_applied(self.applied + self.db:waiting()) end
  return n
end

--- Applies a JSON result file, chunk by chunk (`on_fill(bytes, total, records)`
-- follows it: geoservices.store.result_file).
-- @return the count applied, or nil, err
function Building:apply_file(file, on_fill)
  if self.failed then return nil, self.failed end
  local n, err = result_file.apply(self.st, file, self:on_record(), on_fill)
  if not n then
    self.failed = err
    return nil, err
  end
  self.applied = self.applied + n
  return n
end

--- The features and attachments applied per layer so far:
-- `{[layer_id] = {add = n, add_attachment = n}}`.
function Building:counts()
  return self.db:applied_layers()
end

-- The steps of Building:finish, in their order. Each raises `{store_error =
-- err}` through `check` (a failed SQLite call), so that finish abandons the
-- file being built whatever step failed.

-- The check of a build step's SQLite call: raises the store's error.
local function checker(path)
  return function(ok, m, c)
    if not ok then error({ store_error = db_error(path, m, c) }) end
    return ok
  end
end

-- Each layer's sync direction, as the replica has it (syncLayers).
local function write_directions(db, check, specs, replica_info)
  local directions = {}
  for _, l in ipairs(type(replica_info.syncLayers) == "table" and replica_info.syncLayers or {}) do
    if math.tointeger(l.id) then directions[math.tointeger(l.id)] = l.syncDirection end
  end
  for _, spec in ipairs(specs) do
    spec.sync_direction = directions[spec.id]
    if spec.sync_direction then
      check(db:run("UPDATE gpkgext_geoservices_layers SET sync_direction = ? WHERE layer_id = ?", spec.sync_direction,
        spec.id))
    end
  end
end

-- The replica's row: its description, kept whole as JSON too.
local function write_replica(db, check, specs, replica_info, model)
  local info = {}
  for k, v in pairs(replica_info) do
    if type(v) ~= "function" and type(v) ~= "userdata" then info[k] = v end
  end
  local layer_ids = json.array()
  for _, spec in ipairs(specs) do layer_ids[#layer_ids + 1] = spec.id end
  check(db:run("INSERT INTO gpkgext_geoservices_replica (id, format, service, replica_id, replica_name, sync_model, "
    .. "sync_direction, layers, created_at, info) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?)", schema.FORMAT,
    replica_info.service, replica_info.replicaID ~= "" and replica_info.replicaID or nil,
    replica_info.replicaName, model, replica_info.syncDirection or "bidirectional", json.encode(layer_ids),
    now(), json.encode(info)))
end

-- Each table filled: its GlobalID index built from the sorted keys, then a
-- GlobalID the result gave twice settled as an upsert would have (the
-- later record kept); then the capture triggers (a trigger is a program
-- run per row, even one whose WHEN is false).
local function index_and_capture(db, check, specs, phase)
  -- (the index's sort in temporary files: the connection keeps its
  -- temporary data in memory, where 1M keys would take 35 MiB)
  check(db:exec("PRAGMA temp_store = FILE"))
  for _, spec in ipairs(specs) do
    phase("building the GlobalID index of " .. spec.table)
    check(db:exec(schema.gid_index_sql(spec)))
    phase("settling the repeated GlobalIDs of " .. spec.table)
    check(db:exec(schema.drop_repeated_gids_sql(spec)))
    for _, sql in ipairs(capture.layer_sql(spec, specs)) do check(db:exec(sql)) end
  end
  check(db:exec("PRAGMA temp_store = MEMORY"))
end

-- The service's relationships: registered once filled, their mapping rows
-- made from the keys; the attachments linked to their features.
local function link(st, db, check, specs, layers_metadata, phase)
  phase("linking attachments and related records")
  for _, sql in ipairs(relations.store_sql(specs, layers_metadata)) do check(db:exec(sql)) end
  local linked, lerr = attachments.relink(st)
  if linked then linked, lerr = relations.relink(st) end
  if not linked then error({ store_error = lerr }) end
end

-- The replica's id (when only the result named it), its generations (the
-- result's own fields over replica_info's) and the first line of its sync log.
local function keep_generations(st, db, check, replica_info, fields, applied)
  if fields.replicaID and (not replica_info.replicaID or replica_info.replicaID == "") then
    check(db:run("UPDATE gpkgext_geoservices_replica SET replica_id = ? WHERE id = 1", fields.replicaID))
  end
  local gens = replica_state.generations_of(replica_info)
  local result_gens = replica_state.generations_of(fields)
  if result_gens.replicaServerGen then gens.replicaServerGen = result_gens.replicaServerGen end
  if result_gens.layerServerGens then gens.layerServerGens = result_gens.layerServerGens end
  local ok, err = st:set_generations(gens)
  if not ok then error({ store_error = err }) end
  ok, err = st:log{ operation = "create", outcome = "ok", downloaded = applied,
    replicaServerGen = gens.replicaServerGen, layerServerGens = gens.layerServerGens }
  if not ok then error({ store_error = err }) end
end

-- The commit, then WAL: readers (QGIS, GDAL) never block the store's
-- writes, nor it theirs; the mode is kept in the file. Switching to it
-- writes the file whole to disk (synchronous FULL) before the rename makes
-- it the store.
local function commit_in_wal(db, check, path, phase)
  phase("packing the spatial index and committing")
  check(db:commit())
  phase("writing the store to disk")
  check(db:rows("PRAGMA synchronous = FULL"))
  local mode = check(db:rows("PRAGMA journal_mode = WAL"))
  if not (mode[1] and mode[1].journal_mode == "wal") then
    error({ store_error = db_error(path, "the store could not be switched to WAL mode", "io") })
  end
end

--- Finishes the store with `replica_info` (as store.create_from takes it):
-- each table's GlobalID index, the repeated GlobalIDs settled, the capture
-- triggers, relations, the replica's row and generations (the result's own
-- fields over replica_info's), the commit, WAL, the rename into place.
-- @return the store, open; or nil, err (nothing left at path or beside it)
function Building:finish(replica_info)
  local db, specs, opts, path = self.db, self.specs, self.opts, self.path
  local model = replica_info.syncModel or replica_info.model or "perReplica"
  if model ~= "perReplica" and model ~= "perLayer" then
    self:abandon()
    return nil, errors.invalid("syncModel", "perReplica or perLayer")
  end
  if self.failed then
    local err = self.failed
    self:abandon()
    return nil, err
  end
  local check = checker(path)
  local phase = opts.on_phase or function() end
  local ok, err = pcall(function()
    write_directions(db, check, specs, replica_info)
    write_replica(db, check, specs, replica_info, model)
    if opts.on_tick then db:on_tick(opts.on_tick) end
    index_and_capture(db, check, specs, phase)
    link(self.st, db, check, specs, self.layers_metadata, phase)
    check(extension.register(db)) -- the library's own tables, an extension's (not offered as layers)
    keep_generations(self.st, db, check, replica_info, self.fields, self.applied)
    commit_in_wal(db, check, path, phase)
  end)
  db:close()
  self.finished = true
  if ok and file_exists(path) then -- created meanwhile by someone else: theirs stays
    ok, err = false, { store_error = errors.new("invalid", ("path: %s exists; a store is never created over a file")
      :format(path), { parameter = "path" }) }
  end
  if ok then
    local renamed, rmsg = os.rename(self.tmp, path)
    if not renamed then ok, err = false, { store_error = errors.new("io", "cannot rename the new store: " .. rmsg) } end
  end
  if not ok then
    self:abandon()
    if type(err) == "table" and err.store_error then return nil, err.store_error end
    error(err, 0)
  end
  return self.class.open(path, opts)
end

--- Removes the store being built (nothing is left at its path or beside
-- it); a no-op once it was finished or abandoned.
function Building:abandon()
  if self.gone then return end
  self.gone = true
  if not self.finished then self.db:close() end
  os.remove(self.tmp)
  for _, suffix in ipairs{ "-journal", "-wal", "-shm" } do os.remove(self.tmp .. suffix) end
end

-- closed as a to-be-closed variable (an error, a Ctrl-C) before it was finished: abandoned
function Building:__close()
  if not self.finished then self:abandon() end
end

return building
