--- Feature services with replicas: the state behind synchronizeReplica.
-- Each service has layers of features and attachments (keyed by GlobalID),
-- one generation counter and a change log. A sync applies the uploaded edits
-- in a transaction, then exports what changed since the client's generation,
-- leaving out what this replica itself uploaded.
local jobs = require "geoservices.emulator.jobs"
local json = require "geoservices.json"
local world = require "geoservices.emulator.world"

local replicas = {}

local DUPLICATE_GLOBALID = -2147217395 -- the server's code for "object already exists"
local OBJECT_MISSING = 1019

local DIRECTIONS = { bidirectional = true, upload = true, download = true, snapshot = true }
local UPLOADS = { bidirectional = true, upload = true }
local DOWNLOADS = { bidirectional = true, download = true }

local function error_body(code, message, details)
  return { error = { code = code, message = message, details = json.array(details or {}) } }
end
replicas.error_body = error_body

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
    }
    for _, l in ipairs(s.layers or {}) do
      local layer = { id = l.id, name = l.name, features = {}, attachments = {}, next_oid = 1 }
      for _, f in ipairs(l.features or {}) do
        local attrs = world.deep_copy(f.attributes or {})
        local gid = assert(attrs.GlobalID, "data: feature without GlobalID in layer " .. tostring(l.id))
        attrs.OBJECTID = layer.next_oid
        layer.next_oid = layer.next_oid + 1
        layer.features[gid] = { attributes = attrs, geometry = world.deep_copy(f.geometry), created_gen = svc.gen }
      end
      svc.layers[l.id] = layer
      svc.layer_ids[#svc.layer_ids + 1] = l.id
    end
    table.sort(svc.layer_ids)
    for _, r in ipairs(s.replicas or {}) do
      local replica = {
        replicaID = r.replicaID,
        replicaName = r.replicaName or r.replicaID,
        model = r.model or "perReplica",
        syncDirection = r.syncDirection or "bidirectional",
        layers = r.layers or svc.layer_ids,
        targetType = r.targetType or "client",
      }
      svc.replicas[r.replicaID] = replica
    end
    services[name] = svc
  end
  return services
end

local function has_capability(svc, cap)
  for c in svc.capabilities:gmatch("[^,%s]+") do
    if c:lower() == cap:lower() then return true end
  end
  return false
end

-- Enumerated values are matched on their suffix, whatever the prefix.
local function transport_of(value)
  if value == nil or value == "" then return "embedded" end
  local v = value:lower()
  if v:match("transporttypeurl$") then return "url" end
  if v:match("transporttypeembedded$") then return "embedded" end
  return nil
end

local function parse_bool(value, name)
  if value == nil or value == "" then return false end
  if value == "true" then return true end
  if value == "false" then return false end
  return nil, ("'%s' must be true or false"):format(name)
end

local function parse_json_param(form, name)
  local text = form[name]
  if text == nil or text == "" then return nil end
  local value, msg = json.decode(text)
  if value == nil then return nil, ("'%s' is not valid JSON: %s"):format(name, msg) end
  return value
end

-- ---------------------------------------------------------------- upload

local function feature_out(f)
  return { attributes = json.object(world.deep_copy(f.attributes)), geometry = world.deep_copy(f.geometry) }
end

local function attachment_out(a)
  return { globalId = a.globalId, parentGlobalId = a.parentGlobalId, contentType = a.contentType,
           name = a.name, uploadId = a.uploadId }
end

-- Applies one layer's uploaded edits to `layer`, recording undo steps and log
-- entries; returns the per-edit results of the features and attachments.
local function apply_layer_edits(layer, entry, ctx)
  local out = {}
  for _, target in ipairs{ "features", "attachments" } do
    local edits = entry[target]
    local res = { addResults = json.array(), updateResults = json.array(), deleteResults = json.array() }
    out[target] = res
    if type(edits) == "table" then
      local store = layer[target]
      local function record(list, gid, oid, err)
        local r = { globalId = gid, success = err == nil }
        if err then
          r.error = { code = err[1], description = err[2] }
          ctx.failed[#ctx.failed + 1] = ("layer %d %s %s: %s"):format(layer.id, target, tostring(gid), err[2])
        elseif oid then
          r.objectId = oid
        end
        list[#list + 1] = r
      end
      local function change(gid, op)
        local before = store[gid]
        ctx.undo[#ctx.undo + 1] = function() store[gid] = before end
        ctx.log[#ctx.log + 1] = { layer = layer.id, target = target, globalId = gid, op = op }
      end
      for _, item in ipairs(edits.adds or {}) do
        local gid = target == "features" and type(item.attributes) == "table" and item.attributes.GlobalID
          or item.globalId
        if type(gid) ~= "string" or gid == "" then
          record(res.addResults, gid, nil, { 1000, "GlobalID is required for adds in a replica." })
        elseif store[gid] then
          record(res.addResults, gid, nil,
            { DUPLICATE_GLOBALID, ("An object with GlobalID %s already exists."):format(gid) })
        elseif target == "attachments" and not (layer.features[item.parentGlobalId]
          and not layer.features[item.parentGlobalId].deleted) then
          record(res.addResults, gid, nil, { OBJECT_MISSING, "The parent feature of the attachment does not exist." })
        else
          change(gid, "add")
          local oid = layer.next_oid
          local old_next = layer.next_oid
          ctx.undo[#ctx.undo + 1] = function() layer.next_oid = old_next end
          layer.next_oid = layer.next_oid + 1
          if target == "features" then
            local attrs = world.deep_copy(item.attributes)
            attrs.OBJECTID = oid
            store[gid] = { attributes = attrs, geometry = world.deep_copy(item.geometry), created_gen = ctx.gen,
                           created_by = ctx.replica_id }
          else
            store[gid] = { globalId = gid, parentGlobalId = item.parentGlobalId, contentType = item.contentType,
                           name = item.name, uploadId = item.uploadId, objectId = oid, created_gen = ctx.gen,
                           created_by = ctx.replica_id }
          end
          record(res.addResults, gid, ctx.return_ids and oid or nil)
        end
      end
      for _, item in ipairs(edits.updates or {}) do
        local gid = target == "features" and type(item.attributes) == "table" and item.attributes.GlobalID
          or item.globalId
        local current = type(gid) == "string" and store[gid]
        if not current or current.deleted then
          record(res.updateResults, gid, nil, { OBJECT_MISSING, "Object is missing." })
        else
          change(gid, "update")
          local updated = world.deep_copy(current)
          if target == "features" then
            for k, v in pairs(item.attributes) do
              if k ~= "OBJECTID" then updated.attributes[k] = v end
            end
            if item.geometry then updated.geometry = world.deep_copy(item.geometry) end
          else
            for _, k in ipairs{ "contentType", "name", "uploadId", "parentGlobalId" } do
              if item[k] ~= nil then updated[k] = item[k] end
            end
          end
          store[gid] = updated
          record(res.updateResults, gid, target == "features" and updated.attributes.OBJECTID or updated.objectId)
        end
      end
      for _, gid in ipairs(edits.deleteIds or {}) do
        local current = store[gid]
        if not current or current.deleted then
          record(res.deleteResults, gid, nil, { OBJECT_MISSING, "Object is missing." })
        else
          change(gid, "delete")
          local tomb = world.deep_copy(current)
          tomb.deleted = true
          store[gid] = tomb
          record(res.deleteResults, gid, target == "features" and tomb.attributes.OBJECTID or tomb.objectId)
        end
      end
    end
  end
  return out
end

-- ---------------------------------------------------------------- download

-- Changes of one layer since `since` that this replica did not make itself.
local function layer_changes(svc, layer, since, replica_id)
  local touched = { features = {}, attachments = {} }
  for _, e in ipairs(svc.log) do
    if e.gen > since and e.layer == layer.id and e.origin ~= replica_id then
      touched[e.target][e.globalId] = true
    end
  end
  local out = {}
  for _, target in ipairs{ "features", "attachments" } do
    local adds, updates, deletes = json.array(), json.array(), json.array()
    local gids = {}
    for gid in pairs(touched[target]) do gids[#gids + 1] = gid end
    table.sort(gids)
    for _, gid in ipairs(gids) do
      local item = layer[target][gid]
      local client_has = item.created_gen <= since or item.created_by == replica_id
      local record = target == "features" and feature_out or attachment_out
      if item.deleted then
        if client_has then deletes[#deletes + 1] = gid end
      elseif client_has then
        updates[#updates + 1] = record(item)
      else
        adds[#adds + 1] = record(item)
      end
    end
    out[target] = { adds = adds, updates = updates, deleteIds = deletes }
  end
  return out
end

-- Every current row of a layer: the replacement data of a snapshot.
local function layer_snapshot(layer)
  local out = {}
  for _, target in ipairs{ "features", "attachments" } do
    local adds, gids = json.array(), {}
    for gid, item in pairs(layer[target]) do
      if not item.deleted then gids[#gids + 1] = gid end
    end
    table.sort(gids)
    local record = target == "features" and feature_out or attachment_out
    for _, gid in ipairs(gids) do adds[#adds + 1] = record(layer[target][gid]) end
    out[target] = { adds = adds, updates = json.array(), deleteIds = json.array() }
  end
  return out
end

-- ---------------------------------------------------------------- the operation

local function response_type(prefix, model, directions)
  local n, snapshots, uploads = 0, 0, 0
  for _, d in pairs(directions) do
    n = n + 1
    if d == "snapshot" then snapshots = snapshots + 1 end
    if d == "upload" then uploads = uploads + 1 end
  end
  local suffix
  if n > 0 and snapshots == n then suffix = "ReplacementData"
  elseif snapshots > 0 and model == "perLayer" then suffix = "EditsAndData"
  elseif n > 0 and uploads == n then suffix = "NoEdits"
  else suffix = "Edits" end
  return prefix .. "ReplicaResponseType" .. suffix
end

--- Checks the request and the replica; returns a plan or nil, error body.
function replicas.plan(svc, form)
  if not has_capability(svc, "Sync") then
    return nil, error_body(400, "Sync operations are not supported on this service.",
      { "The service does not have the Sync capability." })
  end
  local rid = form.replicaID
  if rid == nil or rid == "" then
    return nil, error_body(400, "Unable to synchronize replica.", { "'replicaID' is required." })
  end
  local replica = svc.replicas[rid]
  if not replica then return nil, error_body(404, ("Replica %s does not exist."):format(rid)) end
  if replica.closed then return nil, error_body(400, ("Replica %s has been unregistered."):format(rid)) end
  if replica.busy_job and not jobs.finished(replica.busy_job) then
    return nil, error_body(409, ("Replica %s is busy with another synchronization."):format(rid))
  end
  local plan = { svc = svc, replica = replica, directions = {}, since = {} }
  plan.transport = transport_of(form.transportType)
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
  local edits, edits_err = parse_json_param(form, "edits")
  if edits_err then return nil, error_body(400, edits_err) end
  if edits ~= nil and type(edits) ~= "table" then return nil, error_body(400, "'edits' must be an array") end
  plan.edits = edits or {}
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
      plan.directions[id] = dir
      plan.since[id] = math.tointeger(entry.serverGen)
    end
  else
    local dir = default_dir or replica.syncDirection
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

--- Runs a planned sync: applies the edits, exports the changes, advances the
-- generation. Returns the result document (2.3 with `edits`) or nil, error body.
function replicas.execute(plan, prefix)
  local svc, replica = plan.svc, plan.replica
  local new_gen = svc.gen + 1
  local ctx = { undo = {}, log = {}, failed = {}, gen = new_gen, replica_id = replica.replicaID,
                return_ids = plan.flags.returnIdsForAdds }
  local layer_out = {}
  for _, entry in ipairs(plan.edits) do
    local id = type(entry) == "table" and math.tointeger(entry.id)
    local layer = id and svc.layers[id]
    if not layer then
      for i = #ctx.undo, 1, -1 do ctx.undo[i]() end
      return nil, error_body(400, ("Layer %s is not part of this service."):format(tostring(id)))
    end
    if UPLOADS[plan.directions[id] or ""] then
      local results = apply_layer_edits(layer, entry, ctx)
      layer_out[id] = { id = id, features = results.features, attachments = results.attachments }
    end
  end
  if #ctx.failed > 0 and plan.flags.rollbackOnFailure then
    for i = #ctx.undo, 1, -1 do ctx.undo[i]() end
    return nil, error_body(400, "Unable to synchronize replica: edits failed and were rolled back.", ctx.failed)
  end
  svc.gen = new_gen
  for _, e in ipairs(ctx.log) do
    e.gen, e.origin = new_gen, replica.replicaID
    svc.log[#svc.log + 1] = e
  end
  for id, dir in pairs(plan.directions) do
    local data
    if dir == "snapshot" then data = layer_snapshot(svc.layers[id])
    elseif DOWNLOADS[dir] then data = layer_changes(svc, svc.layers[id], plan.since[id], replica.replicaID) end
    if data then
      local out = layer_out[id] or { id = id, features = {}, attachments = {} }
      for _, target in ipairs{ "features", "attachments" } do
        for k, v in pairs(data[target]) do out[target][k] = v end
      end
      layer_out[id] = out
    end
  end
  local ids = {}
  for id in pairs(layer_out) do ids[#ids + 1] = id end
  table.sort(ids)
  local edits = json.array()
  for _, id in ipairs(ids) do
    local out = layer_out[id]
    out.features, out.attachments = json.object(out.features), json.object(out.attachments)
    edits[#edits + 1] = out
  end
  local doc = {
    transportType = prefix .. (plan.transport == "url" and "TransportTypeUrl" or "TransportTypeEmbedded"),
    responseType = response_type(prefix, replica.model, plan.directions),
    replicaID = replica.replicaID,
    edits = edits,
  }
  if replica.model == "perLayer" then
    doc.layerServerGens = json.array()
    for _, id in ipairs(replica.layers) do
      doc.layerServerGens[#doc.layerServerGens + 1] = { id = id, serverGen = new_gen }
    end
  else
    doc.replicaServerGen = new_gen
  end
  if plan.flags.closeReplica then replica.closed = true end
  return doc
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
