--- Feature services with replicas: the state behind synchronizeReplica.
-- Each service has layers of features and attachments (keyed by GlobalID),
-- one generation counter and a change log. A sync checks the whole edits
-- parameter first (a malformed or non-finite value anywhere refuses the
-- request, HTTP 400, naming its position, before anything is applied),
-- imports the uploaded edits in a transaction (every applied change gets its
-- change-log entry and generation; an error half-way undoes them all; with
-- rollbackOnFailure one failed edit undoes them all), then exports what
-- changed since the client's generation, leaving out what this replica
-- itself uploaded. Import and export are separate steps so that an async
-- job can run them in its ImportChanges and ExportChanges phases.
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
        local gid = assert(attrs.GlobalID, "data: feature without GlobalID in layer " .. tostring(l.id))
        attrs.OBJECTID = layer.next_oid
        layer.next_oid = layer.next_oid + 1
        layer.features[gid] = { attributes = attrs, geometry = world.deep_copy(f.geometry), created_gen = svc.gen }
      end
      for _, a in ipairs(l.attachments or {}) do -- attachments' metadata (the emulator keeps no content)
        local gid = assert(a.globalId, "data: attachment without globalId in layer " .. tostring(l.id))
        layer.attachments[gid] = { globalId = gid, parentGlobalId = a.parentGlobalId, contentType = a.contentType,
                                   name = a.name, size = a.size, objectId = layer.next_oid, created_gen = svc.gen }
        layer.next_oid = layer.next_oid + 1
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
        seed_gen = svc.gen, seed_ms = jobs.epoch_ms(), -- what its resource reports until it syncs
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

-- ---------------------------------------------------------------- checking the edits

local MAX_PROBLEMS = 20

local function finite(n)
  return n == n and n ~= math.huge and n ~= -math.huge
end

-- A decoded JSON array (marked by json.decode), or an empty object (some
-- encoders write an empty array as {}); never a table with holes.
local function is_array(v)
  if type(v) ~= "table" then return false end
  if not json.is_array(v) then return next(v) == nil end
  local n = #v
  for k in pairs(v) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
  end
  return true
end

local function is_object(v)
  return type(v) == "table" and not json.is_array(v)
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

-- The problems found in the edits parameter, as "position: rule" texts.
local Checker = {}
Checker.__index = Checker

function Checker:add(path, rule)
  if #self.problems < MAX_PROBLEMS then self.problems[#self.problems + 1] = path .. ": " .. rule end
end

-- Any JSON value whose numbers must all be finite (geometry).
function Checker:numbers(v, path)
  if type(v) == "number" then
    if not finite(v) then self:add(path, "must be a finite number") end
  elseif type(v) == "table" then
    local array = json.is_array(v)
    for _, k in ipairs(sorted_keys(v)) do
      self:numbers(v[k], array and ("%s[%s]"):format(path, tostring(k)) or (path .. "." .. tostring(k)))
    end
  end
end

function Checker:attributes(attrs, path)
  if attrs == nil then return self:add(path, "is required") end
  if not is_object(attrs) then return self:add(path, "must be an object") end
  for _, k in ipairs(sorted_keys(attrs)) do
    local v, at = attrs[k], path .. "." .. tostring(k)
    local t = type(v)
    if type(k) ~= "string" then
      self:add(at, "attribute names must be strings")
    elseif k == "GlobalID" and t ~= "string" then
      self:add(at, "must be a string")
    elseif t == "number" then
      if not finite(v) then self:add(at, "must be a finite number") end
    elseif t ~= "string" and t ~= "boolean" and v ~= json.null then
      self:add(at, "must be a string, number, boolean or null")
    end
  end
end

function Checker:feature(item, path)
  if not is_object(item) then return self:add(path, "must be a feature object") end
  self:attributes(item.attributes, path .. ".attributes")
  local g = item.geometry
  if g ~= nil and g ~= json.null then
    if not is_object(g) then return self:add(path .. ".geometry", "must be an object") end
    self:numbers(g, path .. ".geometry")
  end
end

local ATTACHMENT_STRINGS = { "globalId", "parentGlobalId", "contentType", "name", "uploadId" }

function Checker:attachment(item, path)
  if not is_object(item) then return self:add(path, "must be an attachment object") end
  for _, k in ipairs(ATTACHMENT_STRINGS) do
    local v = item[k]
    if v ~= nil and v ~= json.null and type(v) ~= "string" then self:add(path .. "." .. k, "must be a string") end
  end
end

function Checker:target(edits, target, path)
  if edits == nil then return end
  if not is_object(edits) then return self:add(path, "must be an object") end
  for _, list in ipairs{ "adds", "updates" } do
    local items = edits[list]
    if items ~= nil then
      if not is_array(items) then
        self:add(path .. "." .. list, "must be an array")
      else
        for i = 1, #items do
          local at = ("%s.%s[%d]"):format(path, list, i)
          if target == "features" then self:feature(items[i], at) else self:attachment(items[i], at) end
        end
      end
    end
  end
  local ids = edits.deleteIds
  if ids ~= nil then
    if not is_array(ids) then return self:add(path .. ".deleteIds", "must be an array") end
    for i = 1, #ids do
      if type(ids[i]) ~= "string" then self:add(("%s.deleteIds[%d]"):format(path, i), "must be a GlobalID string") end
    end
  end
end

--- Checks the decoded edits parameter of a sync against the service: its
-- shape (2.1), the types of what is stored, finite numbers everywhere it
-- matters. Returns nil when it can be imported, else the list of problems
-- ("edits[1].features.adds[2]: must be a feature object", first ones only).
function replicas.check_edits(svc, edits)
  local c = setmetatable({ problems = {} }, Checker)
  if not is_array(edits) then
    c:add("edits", "must be an array of layer entries")
    return c.problems
  end
  for i = 1, #edits do
    local entry, path = edits[i], ("edits[%d]"):format(i)
    if not is_object(entry) then
      c:add(path, "must be a layer entry object")
    else
      local id = math.tointeger(entry.id)
      if type(entry.id) ~= "number" or id == nil then
        c:add(path .. ".id", "must be an integer layer id")
      elseif not svc.layers[id] then
        c:add(path .. ".id", ("layer %d is not part of this service"):format(id))
      end
      c:target(entry.features, "features", path .. ".features")
      c:target(entry.attachments, "attachments", path .. ".attachments")
    end
  end
  if #c.problems > 0 then return c.problems end
  return nil
end

-- ---------------------------------------------------------------- upload

local function feature_out(f)
  return { attributes = json.object(world.deep_copy(f.attributes)), geometry = world.deep_copy(f.geometry) }
end

local function attachment_out(a)
  return { globalId = a.globalId, parentGlobalId = a.parentGlobalId, contentType = a.contentType,
           name = a.name, uploadId = a.uploadId, size = a.size }
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
  if form.editsUploadId ~= nil and form.editsUploadId ~= "" then
    -- uploaded items do not exist in the emulator: refuse rather than sync without the edits
    return nil, error_body(400, "editsUploadId is not supported by the emulator: it has no uploaded items; "
      .. "send the edits in the edits parameter.", { "editsUploadId: uploads are not supported" }), 400
  end
  local edits, edits_err = parse_json_param(form, "edits")
  if edits_err then
    return nil, error_body(400, "Unable to synchronize replica: the edits are malformed.", { edits_err }), 400
  end
  if edits ~= nil then
    local problems = replicas.check_edits(svc, edits)
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

local function undo_all(ctx)
  for i = #ctx.undo, 1, -1 do ctx.undo[i]() end
  ctx.undo = {}
end

--- Imports a planned sync's edits in one transaction and advances the
-- generation: every applied change gets its change-log entry. Returns
-- `{gen =, results = {[layer id] = {id =, features =, attachments =}}}`, or
-- nil, error body when rollbackOnFailure undid a request with a failed edit.
-- An error raised half-way (a bug) undoes what was applied before it is
-- raised again: a request is never half applied.
function replicas.import(plan)
  local svc, replica = plan.svc, plan.replica
  local new_gen = svc.gen + 1
  local ctx = { undo = {}, log = {}, failed = {}, gen = new_gen, replica_id = replica.replicaID,
                return_ids = plan.flags.returnIdsForAdds }
  local layer_out = {}
  local ok, err = pcall(function()
    for _, entry in ipairs(plan.edits) do
      local id = math.tointeger(entry.id)
      local layer = svc.layers[id]
      if not layer then error(("layer %s is not part of this service"):format(tostring(id))) end
      if UPLOADS[plan.directions[id] or ""] then
        local results = apply_layer_edits(layer, entry, ctx)
        layer_out[id] = { id = id, features = results.features, attachments = results.attachments }
      end
    end
  end)
  if not ok then
    undo_all(ctx)
    error(err, 0)
  end
  if #ctx.failed > 0 and plan.flags.rollbackOnFailure then
    undo_all(ctx)
    return nil, error_body(400, "Unable to synchronize replica: edits failed and were rolled back.", ctx.failed)
  end
  svc.gen = new_gen
  for _, e in ipairs(ctx.log) do
    e.gen, e.origin = new_gen, replica.replicaID
    svc.log[#svc.log + 1] = e
  end
  return { gen = new_gen, results = layer_out }
end

--- Exports the changes for a planned sync whose edits were imported
-- (`imported` from replicas.import): the result document (2.3 with
-- `edits`). Everything up to the service's current generation is exported
-- and reported as the new generation (an async job exports after its
-- import; changes others made in between are included, never sent twice).
function replicas.export(plan, imported, prefix)
  local svc, replica = plan.svc, plan.replica
  local gen = svc.gen
  local layer_out = {}
  for id, out in pairs(imported.results) do
    layer_out[id] = { id = out.id, features = world.deep_copy(out.features),
                      attachments = world.deep_copy(out.attachments) }
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
    responseType = replicas.response_type(plan, prefix),
    replicaID = replica.replicaID,
    edits = edits,
  }
  if replica.model == "perLayer" then
    doc.layerServerGens = json.array()
    replica.layer_gens = replica.layer_gens or {}
    for _, id in ipairs(replica.layers) do
      doc.layerServerGens[#doc.layerServerGens + 1] = { id = id, serverGen = gen }
      replica.layer_gens[id] = gen
    end
  else
    doc.replicaServerGen = gen
    replica.gen = gen
  end
  replica.lastSyncDate = jobs.epoch_ms() -- what the replica's resource reports (emulator.create)
  if plan.flags.closeReplica then replica.closed = true end
  return doc
end

--- The responseType a planned sync answers with.
function replicas.response_type(plan, prefix)
  return response_type(prefix, plan.replica.model, plan.directions)
end

--- Runs a planned sync at once: import, then export. Returns the result
-- document (2.3 with `edits`) or nil, error body.
function replicas.execute(plan, prefix)
  local imported, err = replicas.import(plan)
  if not imported then return nil, err end
  return replicas.export(plan, imported, prefix)
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
