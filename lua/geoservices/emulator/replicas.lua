--- Feature services with replicas: the state behind synchronizeReplica,
-- and the planning of a sync. Each service has layers of features and
-- attachments (keyed by GlobalID), one generation counter and a change log.
-- A sync is planned here (its parameters read and checked against the
-- replica, with the documented defaults of what it leaves out: settings),
-- its uploaded edits imported by emulator.import and the changes exported
-- by emulator.export. Import and export are separate steps so that an async
-- job can run them in its ImportChanges and ExportChanges phases.
local answers = require "geoservices.emulator.answers"
local import = require "geoservices.emulator.import"
local jobs = require "geoservices.emulator.jobs"
local json = require "geoservices.base.json"
local metadata = require "geoservices.emulator.metadata"
local settings = require "geoservices.emulator.settings"
local world = require "geoservices.emulator.world"

local replicas = {}

local DIRECTIONS = { bidirectional = true, upload = true, download = true, snapshot = true }
local DOWNLOADS = { bidirectional = true, download = true }

local error_body = answers.error_body

--- Builds the services' state from the data file's `featureServices`.
function replicas.load(data)
  local services = {}
  for name, s in pairs(data or {}) do
    local svc = {
      name = name,
      capabilities = s.capabilities or "Create,Update,Delete,Query,Sync",
      gen = math.tointeger(s.serverGen) or 1,
      layers = {},
      layer_ids = {},
      log = {},
      replicas = {},
      -- what the service and layer resources describe (emulator.metadata)
      meta = { spatialReference = world.deep_copy(s.spatialReference), description = s.description,
               syncCapabilities = world.deep_copy(s.syncCapabilities) },
    }
    for _, l in ipairs(s.layers or {}) do
      local meta = {}
      for k, v in pairs(l) do
        if k ~= "features" and k ~= "attachments" and k ~= "id" and k ~= "name" then meta[k] = world.deep_copy(v) end
      end
      local layer = { id = l.id, name = l.name, features = {}, attachments = {}, next_oid = 1, meta = meta }
      for _, f in ipairs(l.features or {}) do
        local attrs = world.deep_copy(f.attributes or {})
        local gid = world.guid(assert(attrs.GlobalID, "data: feature without GlobalID in layer " .. tostring(l.id)))
        attrs.GlobalID = gid
        attrs.OBJECTID = layer.next_oid
        layer.next_oid = layer.next_oid + 1
        layer.features[gid] = { attributes = attrs, geometry = world.deep_copy(f.geometry), created_gen = svc.gen }
      end
      for _, a in ipairs(l.attachments or {}) do -- content: base64 data, else size bytes (emulator.attachments)
        local gid = world.guid(assert(a.globalId, "data: attachment without globalId in layer " .. tostring(l.id)))
        layer.attachments[gid] = { globalId = gid, parentGlobalId = world.guid(a.parentGlobalId),
                                   contentType = a.contentType,
                                   name = a.name, size = a.size, data = a.data, objectId = layer.next_oid,
                                   created_gen = svc.gen }
        layer.next_oid = layer.next_oid + 1
      end
      svc.layers[l.id] = layer
      svc.layer_ids[#svc.layer_ids + 1] = l.id
    end
    table.sort(svc.layer_ids)
    for _, r in ipairs(s.replicas or {}) do
      local replica = {
        replicaID = world.guid(r.replicaID),
        replicaName = r.replicaName or r.replicaID,
        model = r.model or "perReplica",
        syncDirection = r.syncDirection or "bidirectional",
        layers = r.layers or svc.layer_ids,
        targetType = r.targetType or "client",
        seed_gen = svc.gen, seed_ms = jobs.epoch_ms(), -- what its resource reports until it syncs
      }
      svc.replicas[replica.replicaID] = replica
    end
    services[name] = svc
  end
  return services
end

-- A boolean parameter: nil when absent (its default is the caller's).
local function parse_bool(value, name)
  if value == nil or value == "" then return nil end
  local v = tostring(value):lower()
  if v == "true" then return true end
  if v == "false" then return false end
  return nil, ("'%s' must be true or false"):format(name)
end

local function parse_json_param(form, name)
  local text = form[name]
  if text == nil or text == "" then return nil end
  local value, msg = json.decode(text)
  if value == nil then return nil, ("'%s' is not valid JSON: %s"):format(name, msg) end
  return value
end

-- Whether a failed edit undoes the request. With the service's
-- supportsRollbackOnFailure, the parameter decides (absent: the setting
-- rollback_default); without it the parameter is ignored and the sync model
-- decides, as https://developers.arcgis.com/rest/services-reference/enterprise/
-- rollbackonfailure-and-sync-models.htm says: a service with only perLayer sync
-- always skips failed edits (false), one with only perReplica sync always rolls
-- back (true). With both models (the page does not say) the replica's own
-- model decides the same way.
local function rollback_of(svc, replica, requested, s)
  local caps = metadata.sync_capabilities(svc, s)
  if caps.supportsRollbackOnFailure ~= false then
    if requested == nil then return s.rollback_default end
    return requested
  end
  if caps.supportsPerLayerSync and not caps.supportsPerReplicaSync then return false end
  if caps.supportsPerReplicaSync and not caps.supportsPerLayerSync then return true end
  return replica.model ~= "perLayer"
end

--- Checks the request and the replica against the emulator's settings `s`;
-- returns a plan or nil, error body (and an HTTP status for malformed input).
-- `uploaded`: the edits text of an uploaded item the request names
-- (emulator.uploads), read in place of the edits parameter.
function replicas.plan(svc, form, s, uploaded)
  if not metadata.has_capability(svc, "Sync") then
    return nil, error_body(400, "Sync operations are not supported on this service.",
      { "The service does not have the Sync capability." })
  end
  local rid = form.replicaID
  if rid == nil or rid == "" then
    return nil, error_body(400, "Unable to synchronize replica.", { "'replicaID' is required." })
  end
  local replica = svc.replicas[world.guid(rid)] -- a GUID: any case, braces or none
  if not replica then return nil, error_body(404, ("Replica %s does not exist."):format(rid)) end
  if replica.closed then return nil, error_body(400, ("Replica %s has been unregistered."):format(rid)) end
  if replica.busy_job and not jobs.finished(replica.busy_job) then
    return nil, error_body(409, ("Replica %s is busy with another synchronization."):format(rid))
  end
  -- the service's capability set, as its resource advertises it (metadata.sync_capabilities)
  local caps = metadata.sync_capabilities(svc, s)
  if (replica.model == "perReplica" and caps.supportsPerReplicaSync == false)
    or (replica.model == "perLayer" and caps.supportsPerLayerSync == false) then
    return nil, error_body(400, "Unable to synchronize replica.",
      { ("The service does not support the %s sync model of replica %s."):format(replica.model, rid) })
  end
  local plan = { svc = svc, replica = replica, directions = {}, since = {} }
  plan.transport = settings.transport_of(form.transportType, s.default_transport)
  if not plan.transport then return nil, error_body(400, "Invalid transportType: " .. tostring(form.transportType)) end
  local data_format = form.dataFormat or "json"
  if data_format ~= "json" then
    return nil, error_body(400, ("dataFormat %s is not supported by the emulator."):format(data_format))
  end
  local flags = {}
  for _, name in ipairs{ "async", "closeReplica", "returnIdsForAdds", "rollbackOnFailure" } do
    local v, err = parse_bool(form[name], name)
    if err then return nil, error_body(400, err) end
    flags[name] = v
  end
  plan.flags = flags
  if flags.async and caps.supportsAsync == false then
    return nil, error_body(400, "Unable to synchronize replica.",
      { "The service does not run synchronizeReplica as a job (syncCapabilities.supportsAsync is false)." })
  end
  -- a job's result is always a file: "If async is true, the results will always be
  -- returned as if transportType is esriTransportTypeUrl" (https://developers.arcgis.com/
  -- rest/services-reference/enterprise/synchronize-replica.htm)
  if flags.async then plan.transport = "url" end
  plan.rollback = rollback_of(svc, replica, flags.rollbackOnFailure, s)
  plan.names_refused = s.rollback_names_edits ~= false
  plan.field_lengths = s.field_lengths == true
  local edits, edits_err = parse_json_param(uploaded and { edits = uploaded } or form, "edits")
  if edits_err then
    return nil, error_body(400, "Unable to synchronize replica: the edits are malformed.", { edits_err }), 400
  end
  if edits ~= nil then
    local problems = import.check_edits(svc, edits)
    if problems then
      return nil, error_body(400, "Unable to synchronize replica: the edits are malformed.", problems), 400
    end
  end
  plan.edits = edits or json.array()
  local sync_layers, layers_err = parse_json_param(form, "syncLayers")
  if layers_err then return nil, error_body(400, layers_err) end
  local default_dir = form.syncDirection
  if default_dir == "" then default_dir = nil end
  if default_dir and not DIRECTIONS[default_dir] then
    return nil, error_body(400, "Invalid syncDirection: " .. default_dir)
  end
  if replica.model == "perLayer" then
    local by_id = {}
    for _, entry in ipairs(sync_layers or {}) do
      if type(entry) ~= "table" or math.tointeger(entry.id) == nil then
        return nil, error_body(400, "Every syncLayers entry needs an integer id.")
      end
      by_id[entry.id] = entry
    end
    for _, id in ipairs(replica.layers) do
      local entry = by_id[id] or {}
      local dir = entry.syncDirection or default_dir or replica.syncDirection
      if not DIRECTIONS[dir] then return nil, error_body(400, "Invalid syncDirection for layer " .. id) end
      if dir ~= replica.syncDirection and caps.supportsSyncDirectionControl == false then
        return nil, error_body(400, "Unable to synchronize replica.",
          { ("The service does not support choosing the sync direction (layer %d: %s)."):format(id, dir) })
      end
      plan.directions[id] = dir
      plan.since[id] = math.tointeger(entry.serverGen)
    end
  else
    local dir = default_dir or replica.syncDirection
    if dir ~= replica.syncDirection and caps.supportsSyncDirectionControl == false then
      return nil, error_body(400, "Unable to synchronize replica.",
        { ("The service does not support choosing the sync direction (%s)."):format(dir) })
    end
    local since = math.tointeger(tonumber(form.replicaServerGen))
    for _, id in ipairs(replica.layers) do
      plan.directions[id] = dir
      plan.since[id] = since
    end
  end
  for id, dir in pairs(plan.directions) do
    local since = plan.since[id]
    if DOWNLOADS[dir] then
      if since == nil then
        return nil, error_body(400, ("A server generation is required to download changes of layer %d."):format(id))
      end
      if since > svc.gen then
        return nil, error_body(400, ("Generation %d of layer %d is newer than the server's %d."):format(
          since, id, svc.gen))
      end
    end
  end
  return plan
end

--- Counts of live features per layer (for tests and the tour).
function replicas.count_features(svc)
  local counts = {}
  for id, layer in pairs(svc.layers) do
    local n = 0
    for _, f in pairs(layer.features) do
      if not f.deleted then n = n + 1 end
    end
    counts[tostring(id)] = n
  end
  return counts
end

return replicas
