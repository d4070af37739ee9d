--- The createReplica half of the replica store:
-- `geoservices.store.create(client, path, params, opts)` creates a replica
-- on the server and builds a store from it.
--
--     local st = assert(geoservices.store.create(client, "crew-1.gpkg", {
--       service = "Parcels", layers = { 0, 1 }, replicaName = "crew-1",
--       syncModel = "perReplica", syncDirection = "bidirectional",
--     }, { on_status = function(s) print(s.status) end }))
--
-- Steps: the service's resource (the request is checked against its
-- capabilities before anything else is read or sent), each layer's resource (fields,
-- geometry type, spatial reference, id fields), createReplica (async by
-- default) whose result fills the store while it downloads (parsed once,
-- geoservices.store.building; its bytes also saved to a temporary file next
-- to the store), then the store finished: nothing exists at `path` unless
-- the whole store committed. When the store cannot be built after
-- the replica was created, the replica is unregistered (best effort) and
-- the error says so. Each step is journaled beside the path
-- (geoservices.store.sync.create_journal): a rerun of the same create after a
-- kill resumes the job, builds the store from the result already
-- downloaded, or unregisters what the killed create made, and never makes
-- a second replica.
-- @module geoservices.store.sync.create
-- @local
local attachments = require "geoservices.store.file.attachments"
local create_params = require "geoservices.sync.create_params"
local errors = require "geoservices.base.errors"
local journal = require "geoservices.store.sync.create_journal"
local paths = require "geoservices.store.paths"
local sync_create = require "geoservices.sync.create"

local M = {}

local file_exists = paths.exists

local OPTS = { on_status = "function", on_progress = "function", on_fill = "function", on_phase = "function",
               on_tick = "function", timeout = "number",
               poll_interval = "number", busy_timeout = "number", request_timeout = "number" }

--- The layers' resources (`{service}/FeatureServer/{id}`), in order.
-- @return the list, or nil, err
function M.layer_infos(client, service, ids, opts)
  local infos = {}
  for _, id in ipairs(ids) do
    local li, err = client:layer_info(service, id, { timeout = opts and opts.timeout })
    if not li then return nil, err end
    infos[#infos + 1] = li
  end
  return infos
end

--- The replica_info of store.create_from for a createReplica result.
function M.replica_info(result, request)
  request = request or {}
  return {
    service = result.service, replicaID = result.replicaID, replicaName = result.replicaName or request.replicaName,
    syncModel = result.syncModel, syncDirection = result.syncDirection or request.syncDirection or "bidirectional",
    layers = result.layers, replicaServerGen = result.replicaServerGen, layerServerGens = result.layerServerGens,
    returnAttachments = request.returnAttachments,
  }
end

-- The createReplica request from the caller's params (`service` apart), or nil, err.
local function request_of(params)
  local request = {}
  for k, v in pairs(params) do
    if k ~= "service" then request[k] = v end
  end
  -- attachments by URL: their bytes are fetched one by one into their blobs
  -- (store.attachments), never base64 text in the result held in memory
  if request.returnAttachments and request.returnAttachmentsDataByUrl == nil then
    request.returnAttachmentsDataByUrl = true
  end
  if request.dataFormat ~= nil and request.dataFormat ~= "json" then
    return nil, errors.invalid("dataFormat", "json (the store reads the JSON result)")
  end
  return request
end

-- The layers' resources, once the request's layers (every layer of the
-- service by default) are checked and what the service cannot do is
-- refused; or nil, err, nothing sent.
local function layers_checked(client, service, info, request, opts)
  if request.layers == nil then
    local ids = {}
    for _, l in ipairs(info.layers or {}) do ids[#ids + 1] = l.id end
    for _, l in ipairs(info.tables or {}) do ids[#ids + 1] = l.id end
    request.layers = ids
  end
  if type(request.layers) ~= "table" or #request.layers == 0 then
    return nil, errors.invalid("layers", "a list of layer ids")
  end
  for _, id in ipairs(request.layers) do
    if math.type(id) ~= "integer" then return nil, errors.invalid("layers", "integer layer ids") end
  end
  -- what the service cannot do is refused now, before its layers are read
  local fields, plan = create_params.encode(request, client.enum_prefix)
  if not fields then return nil, plan end
  local refused = sync_create.settle(fields, plan, info)
  if refused then return nil, refused end
  return M.layer_infos(client, service, request.layers, opts)
end

-- The create a killed run left in the journal, settled: `{result =,
-- replica_info =}` when it made the replica, true to go on with a new
-- request, false when there was none; or nil, err. The request gets its
-- replicaName (a generated one: the journal's when it has one).
local function settle_left(client, path, service, request, opts, fill)
  local left, jerr = journal.read(path)
  if left == nil then return nil, jerr end
  if request.replicaName == nil then
    -- a name of its own (the store's file name and a random suffix), so that
    -- a rerun after a lost answer finds the replica by its name alone
    request.replicaName = left and left.generated and left.replicaName or journal.unique_name(path)
  end
  if left and (left.service ~= service or left.replicaName ~= request.replicaName) then
    return nil, errors.new("invalid", ("path: %s records the createReplica of replica %s of %s in flight; rerun "
      .. "that create to finish it, or check the server's replicas (geoservices replicas %s), unregister what it "
      .. "made and remove the file"):format(journal.path(path), tostring(left.replicaName), left.service,
      left.service), { parameter = "path" })
  end
  if not left then return false end
  local settled, serr = journal.settle(client, path, left, request, opts, fill)
  if not settled then return nil, serr end
  return settled
end

-- The store filling as the result downloads, followed by opts.on_fill as a
-- fill from a file is (bytes of the file, records read so far): the
-- download's progress with the records the store has read (`on_applied`,
-- store.building's), then `ended(result)` once, with every record.
local function fill_progress(opts)
  local records, bytes, total = 0, 0, nil
  local p = {}
  function p.on_applied(n) records = n end
  function p.on_progress(received, size)
    if opts.on_progress then opts.on_progress(received, size) end
    bytes, total = received, size
    if opts.on_fill and size and received < size and records > 0 then opts.on_fill(received, size, records) end
  end
  function p.ended(result)
    local size = total or bytes
    if opts.on_fill and result and result.filled and size > 0 then opts.on_fill(size, size, result.downloaded) end
  end
  return p
end

-- createReplica, its result filling the store as it downloads (and saved to
-- `into.tmp`), each step journaled (sending, the job, created) so that a
-- rerun after a kill finds it. Returns the result, or nil, err (the journal
-- removed when nothing was made).
local function create_replica(client, path, service, params, request, into, opts)
  local tmp = into.tmp
  os.remove(tmp)
  local base = { service = service, replicaName = request.replicaName,
                 generated = request.replicaName ~= params.replicaName or nil }
  local function step(state, extra)
    local j = { state = state }
    for k, v in pairs(base) do j[k] = v end
    for k, v in pairs(extra or {}) do j[k] = v end
    return journal.write(path, j)
  end
  -- the replicas of this name before the request: a rerun tells the one it
  -- made (a generated name is unique: whatever has it is this create's)
  if not base.generated then base.known = journal.named(client, service, request.replicaName, opts) end
  local result, cerr = client:create_replica(service, request, {
    output = tmp, fill = into.fill, service_info = into.info, on_status = opts.on_status,
    on_progress = into.on_progress,
    timeout = opts.timeout, poll_interval = opts.poll_interval, request_timeout = opts.request_timeout,
    on_send = function() return step("sending") end,
    on_job = function(op) return step("job", { op = op:to_json() }) end,
    on_done = function(r)
      return step("created", { replicaID = r.replicaID, replica_info = M.replica_info(r, request) })
    end,
  })
  if not result then
    -- nothing made: no journal; something may be: it stays for a rerun
    if not (cerr.created or cerr.ambiguous or cerr.pending or cerr.operation) then journal.remove(path) end
    return nil, cerr
  end
  return result
end

-- The store finished from the replica (its result applied from the file it
-- was saved to when it did not fill the store as it downloaded); or, when
-- that fails, the replica unregistered (or the journal kept for a rerun
-- that does it) and nil, err.
local function finish(client, path, service, replica_info, result, built, opts)
  local tmp, fill = built.tmp, built.fill
  local ok, st, serr = pcall(function()
    -- a result that did not go into it as it downloaded (embedded in the answer, or downloaded by
    -- the create a rerun resumes): from the file it was saved to
    if not (result and result.filled) then
      local n, aerr = fill:apply_file(tmp, opts.on_fill)
      if not n then return nil, aerr end
    end
    return fill:finish(replica_info)
  end)
  if not ok then serr = errors.new("io", tostring(st)) st = nil end
  if not st then
    local note = ""
    local id = replica_info.replicaID
    if id then
      local gone = client:unregister_replica(service, id, { timeout = opts.timeout })
      note = gone and (" (replica %s was unregistered)"):format(id)
        or (" (replica %s exists on the server: a rerun of this create unregisters it)"):format(id)
      if gone then journal.remove(path) end
    end
    os.remove(tmp)
    serr.message = "building the store of the new replica: " .. serr.message .. note
    serr.replicaID = id
    return nil, serr
  end
  return st
end

--- Creates a replica and a store holding it.
-- @param client a geoservices client
-- @string path the new GeoPackage (must not exist)
-- @tparam table params `service` (required), `layers` (ids; default every layer of the service),
--   and the createReplica parameters (replicaName, syncModel, syncDirection, geometry, layerQueries,
--   returnAttachments, async...), passed through
-- @tparam[opt] table opts `on_status`, `on_progress` (the download, which fills the store as it
--   arrives), `on_fill(bytes, total, records)` (the store filling: bytes of the result and records
--   read, as the download goes, the last call with every record; or from the file it was saved
--   to: an embedded result, or the one a rerun resumes), `on_phase(text)` and `on_tick()` (the
--   store then built: see store.create_from),
--   `timeout`, `poll_interval`, `busy_timeout`
-- @tparam function building geoservices.store's `building`, the store being built (filled while
--   the result downloads, then finished): handed in by geoservices.store, which stands above this module
-- @return the open store, or nil, err (kind "invalid" with nothing sent: a file at path, a bad
--   parameter, a capability the service lacks; or the errors of createReplica and the store)
-- @raise on misuse
function M.create(client, path, params, opts, building)
  if type(client) ~= "table" then error("store.create: client must be a geoservices client", 3) end
  if type(path) ~= "string" then error("store.create: path must be a string", 3) end
  if type(params) ~= "table" then error("store.create: params must be a table", 3) end
  opts = opts or {}
  if type(opts) ~= "table" then error("store.create: opts must be a table", 3) end
  for k, v in pairs(opts) do
    if not OPTS[k] then error(("store.create: unknown option '%s'"):format(tostring(k)), 3) end
    if type(v) ~= OPTS[k] then error(("store.create: option '%s' must be a %s"):format(k, OPTS[k]), 3) end
  end
  local service = params.service
  if type(service) ~= "string" or service == "" then return nil, errors.invalid("service", "a service name") end
  if file_exists(path) then
    return nil, errors.new("invalid", ("path: %s exists; a store is never created over a file"):format(path),
      { parameter = "path" })
  end
  local request, rerr = request_of(params)
  if not request then return nil, rerr end

  local info, err = client:service_info(service, { timeout = opts.timeout })
  if not info then return nil, err end
  local layer_infos, lerr = layers_checked(client, service, info, request, opts)
  if not layer_infos then return nil, lerr end

  local tmp = journal.download(path)
  local result, replica_info
  -- the store, filled while the result downloads; abandoned (nothing left) on any way out but its finish
  local progress = fill_progress(opts)
  local fill <close>, ferr = building(path, layer_infos, { busy_timeout = opts.busy_timeout,
    on_fill = opts.on_fill, on_phase = opts.on_phase, on_tick = opts.on_tick, on_applied = progress.on_applied })
  if not fill then return nil, ferr end
  local settled, serr = settle_left(client, path, service, request, opts, fill)
  if settled == nil then return nil, serr end
  if type(settled) == "table" then result, replica_info = settled.result, settled.replica_info end
  if not result and not replica_info then
    result, err = create_replica(client, path, service, params, request, { info = info, tmp = tmp, fill = fill,
                                                                            on_progress = progress.on_progress }, opts)
    if not result then return nil, err end
  end
  progress.ended(result)
  replica_info = replica_info or M.replica_info(result, request)
  local st, berr = finish(client, path, service, replica_info, result, { tmp = tmp, fill = fill }, opts)
  if not st then return nil, berr end
  journal.remove(path)
  st.created = result or replica_info
  -- the attachments' bytes: one that fails is named here and fetched by the next sync
  st.created.attachments = attachments.fetch(st, client, { timeout = opts.timeout })
  return st
end

return M
