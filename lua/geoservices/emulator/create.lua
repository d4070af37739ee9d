--- The emulator's createReplica, replica resource and unRegisterReplica,
-- with the fidelity of its synchronizeReplica (emulator.sync, .replicas):
--
-- * createReplica registers a replica with its layers, sync model
--   (perReplica or perLayer; none registers nothing), direction, target,
--   filter and attachment choice, and exports its data: every field of the
--   chosen features and, with returnAttachments, the attachments' metadata,
--   in the vendor's result shape (`{replicaName, replicaID,
--   replicaServerGen | layerServerGens, transportType, responseType:
--   ...ResponseTypeData, layers: [{id, features: [...], attachments: [...]}]}`),
--   as a result file (URL transport; the synchronous answer is then only
--   `{transportType, responseUrl}`, as real servers send it) or embedded,
--   synchronously or as a job (Pending, InProgress, ProvisioningReplica,
--   ExportingData, ExportAttachments with attachments, then Completed; the
--   replica is registered in ProvisioningReplica, its replicaID is "" in
--   the status resource until then, and the data is exported in
--   ExportingData). The requested capabilities are checked against the
--   service's (emulator.metadata): a perReplica replica on a service
--   without per-replica sync is refused.
-- * The data is filtered by the geometry (by bounding boxes: a feature is
--   in when its box meets the filter's) and by layerQueries (queryOption
--   all, none or useFilter; a where clause of comparisons joined by AND:
--   `FIELD op literal` with = <> != < > <= >=, `FIELD IS [NOT] NULL`, `1=1`).
--   Later synchronizations of the replica send every change of its layers
--   (the filter is not applied to changes). inSR and replicaSR are not
--   applied: the data stays in the service's spatial reference.
-- * The replica resource (`replicas/{id}`) reports the generations the
--   server last handed the replica, its layers, model, direction,
--   attachments (as both returnsAttachments and returnAttachments), dates.
-- * unRegisterReplica forgets the replica: it can no longer synchronize
--   (the server's error body) and its resource is gone.
-- Everything lives in the feature services' state and is saved with
-- `--state-file`.
local answers = require "geoservices.emulator.answers"
local attachment_content = require "geoservices.emulator.attachments"
local core = require "geoservices.core"
local jobs = require "geoservices.emulator.jobs"
local json = require "geoservices.base.json"
local metadata = require "geoservices.emulator.metadata"
local settings = require "geoservices.emulator.settings"
local world = require "geoservices.emulator.world"

local create = {}

local PROVISION = 3 -- phase index of ProvisioningReplica
local EXPORT = 4    -- phase index of ExportingData

local MODELS = { none = "none", perreplica = "perReplica", perlayer = "perLayer" }
local DIRECTIONS = { bidirectional = true, upload = true, download = true }

local error_body = answers.error_body

local function refuse(...)
  return nil, error_body(400, "Unable to create replica.", { ... })
end

local function parse_bool(value, name, default)
  if value == nil or value == "" then return default end
  local v = value:lower()
  if v == "true" then return true end
  if v == "false" then return false end
  return nil, ("'%s' must be true or false"):format(name)
end

local function new_guid()
  local b = { core.random_bytes(16):byte(1, 16) }
  b[7] = (b[7] & 0x0f) | 0x40
  b[9] = (b[9] & 0x3f) | 0x80
  local hex = {}
  for i = 1, 16 do hex[i] = ("%02X"):format(b[i]) end
  local s = table.concat(hex)
  return ("{%s-%s-%s-%s-%s}"):format(s:sub(1, 8), s:sub(9, 12), s:sub(13, 16), s:sub(17, 20), s:sub(21, 32))
end

-- ---------------------------------------------------------------- filters

-- "0,1", "[0,1]" or a JSON array: the layer ids.
local function layer_ids(text)
  if text == nil or text == "" then return nil end
  local ids, seen = {}, {}
  for item in (text:gsub("^%s*%[", ""):gsub("%]%s*$", "") .. ","):gmatch("([^,]*),") do
    local id = math.tointeger(tonumber(item))
    if not id then return nil end
    if not seen[id] then
      seen[id] = true
      ids[#ids + 1] = id
    end
  end
  return ids
end

-- The filter geometry's bounding box: "xmin,ymin,xmax,ymax" or a geometry's JSON.
local function filter_box(text)
  if text == nil or text == "" then return nil end
  local a, b, c, d = text:match("^%s*([^,]+),([^,]+),([^,]+),([^,]+)%s*$")
  if a and tonumber(a) and tonumber(b) and tonumber(c) and tonumber(d) then
    return { tonumber(a), tonumber(b), tonumber(c), tonumber(d) }, { xmin = tonumber(a), ymin = tonumber(b),
      xmax = tonumber(c), ymax = tonumber(d) }
  end
  local g = json.decode(text)
  if type(g) ~= "table" then return nil, "the geometry is neither xmin,ymin,xmax,ymax nor a geometry object" end
  local xmin, ymin, xmax, ymax = metadata.bbox(g)
  if not xmin then return nil, "the geometry has no coordinates" end
  return { xmin, ymin, xmax, ymax }, g
end

local function meets(box, g)
  if not box then return true end
  local xmin, ymin, xmax, ymax = metadata.bbox(g)
  if not xmin then return false end
  return xmin <= box[3] and xmax >= box[1] and ymin <= box[4] and ymax >= box[2]
end

local COMPARE = {
  ["="] = function(a, b) return a == b end, ["<>"] = function(a, b) return a ~= b end,
  ["!="] = function(a, b) return a ~= b end, ["<"] = function(a, b) return a < b end,
  [">"] = function(a, b) return a > b end, ["<="] = function(a, b) return a <= b end,
  [">="] = function(a, b) return a >= b end,
}

-- A where clause of comparisons joined by AND: a list of tests, or nil, message.
local function parse_where(text)
  if text == nil or text:match("^%s*$") then return {} end
  local tests = {}
  local rest = " " .. text .. " "
  local parts = {}
  -- split on AND outside quotes
  local buf, in_quote, i = {}, false, 1
  while i <= #rest do
    local c = rest:sub(i, i)
    if c == "'" then in_quote = not in_quote end
    if not in_quote and rest:sub(i, i + 4):upper() == " AND " then
      parts[#parts + 1] = table.concat(buf)
      buf = {}
      i = i + 5
    else
      buf[#buf + 1] = c
      i = i + 1
    end
  end
  parts[#parts + 1] = table.concat(buf)
  for _, part in ipairs(parts) do
    local p = part:match("^%s*(.-)%s*$")
    local field, op, literal = p:match("^([%a_][%w_]*)%s*([<>=!]+)%s*(.-)$")
    local null_field, nott = p:match("^([%a_][%w_]*)%s+[Ii][Ss]%s+([Nn]?[Oo]?[Tt]?)%s*[Nn][Uu][Ll][Ll]$")
    if p:match("^1%s*=%s*1$") then -- luacheck: ignore 542 (always true)
    elseif null_field then
      local want_null = nott == ""
      tests[#tests + 1] = { field = null_field,
                            test = function(v) return (v == nil or v == json.null) == want_null end }
    elseif field and COMPARE[op] then
      local value
      local quoted = literal:match("^'(.*)'$")
      if quoted and not quoted:gsub("''", ""):find("'", 1, true) then value = quoted:gsub("''", "'")
      else value = tonumber(literal) end
      if value == nil then return nil, ("the emulator reads comparisons joined by AND, not %q"):format(p) end
      local cmp = COMPARE[op]
      tests[#tests + 1] = { field = field, test = function(v)
        if type(v) ~= type(value) then return false end
        return cmp(v, value)
      end }
    else
      return nil, ("the emulator reads comparisons joined by AND, not %q"):format(p)
    end
  end
  return tests
end

-- A feature's attribute `name`, whatever the case of its name (field names
-- are not case-sensitive on the server).
local function attribute(attrs, name)
  if attrs[name] ~= nil then return attrs[name] end
  local lower = name:lower()
  for k, v in pairs(attrs) do
    if type(k) == "string" and k:lower() == lower then return v end
  end
  return nil
end

-- Whether a feature's attributes pass every test of a where clause (@{parse_where}).
local function passes(tests, attrs)
  for _, t in ipairs(tests) do
    if not t.test(attribute(attrs, t.field)) then return false end
  end
  return true
end

-- ---------------------------------------------------------------- the request

--- Checks a createReplica request against the service and the emulator's
-- settings `s`; returns the plan (plain tables only: it is saved with a
-- job) or nil, error body.
function create.plan(svc, form, s)
  if not metadata.has_capability(svc, "Sync") then
    return nil, error_body(400, "Sync operations are not supported on this service.",
      { "The service does not have the Sync capability." })
  end
  local caps = metadata.sync_capabilities(svc, s)
  local plan = { replicaName = form.replicaName, targetType = form.targetType or "client" }
  if plan.replicaName == nil or plan.replicaName == "" then plan.replicaName = svc.name end
  local ids = layer_ids(form.layers)
  if not ids or #ids == 0 then return refuse("'layers' is required: the ids of the layers to replicate.") end
  for _, id in ipairs(ids) do
    if not svc.layers[id] then return refuse(("Layer %d does not exist in this service."):format(id)) end
  end
  plan.layers = ids
  local model = MODELS[(form.syncModel or "none"):lower()]
  if not model then return refuse("Invalid syncModel: " .. tostring(form.syncModel)) end
  if model == "perReplica" and caps.supportsPerReplicaSync == false then
    return refuse("The service does not support the perReplica sync model.")
  end
  if model == "perLayer" and caps.supportsPerLayerSync == false then
    return refuse("The service does not support the perLayer sync model.")
  end
  plan.model = model
  local dir = (form.syncDirection == nil or form.syncDirection == "") and "bidirectional"
    or form.syncDirection:lower()
  if not DIRECTIONS[dir] then return refuse("Invalid syncDirection: " .. tostring(form.syncDirection)) end
  if dir ~= "bidirectional" and caps.supportsSyncDirectionControl == false then
    return refuse("The service does not support choosing the sync direction.")
  end
  plan.syncDirection = dir
  -- absent: the setting default_transport ("url", as the vendor's createReplica examples
  -- send and its Python API defaults to; emulator.settings)
  plan.transport = settings.transport_of(form.transportType, s.default_transport)
  if not plan.transport then return refuse("Invalid transportType: " .. tostring(form.transportType)) end
  if (form.dataFormat or "json") ~= "json" then
    return refuse(("dataFormat %s is not supported by the emulator."):format(form.dataFormat))
  end
  for _, name in ipairs{ "async", "returnAttachments", "returnAttachmentsDataByUrl" } do
    local v, err = parse_bool(form[name], name, name == "returnAttachmentsDataByUrl")
    if err then return refuse(err) end
    plan[name] = v
  end
  if plan.async and caps.supportsAsync == false then
    return refuse("The service does not run createReplica as a job.")
  end
  local box, geometry = filter_box(form.geometry)
  if form.geometry and form.geometry ~= "" and not box then
    return refuse("Invalid geometry: " .. tostring(geometry))
  end
  plan.box, plan.geometry, plan.geometryType = box, geometry, form.geometryType
  plan.queries = {}
  if form.layerQueries and form.layerQueries ~= "" then
    local queries = json.decode(form.layerQueries)
    if type(queries) ~= "table" then return refuse("'layerQueries' is not a JSON object.") end
    for key, q in pairs(queries) do
      local id = math.tointeger(tonumber(key))
      if not id or type(q) ~= "table" then return refuse("Invalid layerQueries entry " .. tostring(key)) end
      local option = (q.queryOption or "useFilter"):lower()
      if option ~= "all" and option ~= "none" and option ~= "usefilter" then
        return refuse(("Invalid queryOption for layer %d: %s"):format(id, tostring(q.queryOption)))
      end
      local ok, where_err = parse_where(q.where)
      if not ok then return refuse(("layer %d where clause: %s"):format(id, where_err)) end
      plan.queries[tostring(id)] = { queryOption = option, where = q.where, useGeometry = q.useGeometry ~= false }
    end
    plan.layerQueries = form.layerQueries
  end
  return plan
end

-- ---------------------------------------------------------------- the work

--- Registers the planned replica (not for syncModel none): returns it.
function create.register(svc, plan, owner)
  if plan.model == "none" then return nil end
  local now = jobs.epoch_ms()
  local replica = {
    replicaID = new_guid(), replicaName = plan.replicaName, model = plan.model, syncDirection = plan.syncDirection,
    layers = world.deep_copy(plan.layers), targetType = plan.targetType, returnAttachments = plan.returnAttachments,
    creationDate = now, lastSyncDate = now, owner = owner, created = true,
    geometry = plan.geometry, geometryType = plan.geometryType, layerQueries = plan.layerQueries,
  }
  svc.replicas[replica.replicaID] = replica
  return replica
end

local function feature_record(f)
  return { attributes = json.object(world.deep_copy(f.attributes)), geometry = world.deep_copy(f.geometry) }
end


local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

--- The data of the planned replica at the service's current generation:
-- the result document; the replica (if any) records that generation.
function create.export(svc, plan, replica, prefix)
  local gen = svc.gen
  local layers = json.array()
  for _, id in ipairs(plan.layers) do
    local layer = svc.layers[id]
    local q = plan.queries[tostring(id)] or { queryOption = "usefilter", useGeometry = true }
    local tests = q.where and assert(parse_where(q.where)) or {}
    local features, attachments, chosen = json.array(), json.array(), {}
    if q.queryOption ~= "none" then
      local use_box = q.queryOption == "usefilter" and q.useGeometry and not metadata.is_table(layer)
      for _, gid in ipairs(sorted_keys(layer.features)) do
        local f = layer.features[gid]
        if not f.deleted and (not use_box or meets(plan.box, f.geometry))
          and (q.queryOption == "all" or passes(tests, f.attributes)) then
          features[#features + 1] = feature_record(f)
          chosen[gid] = true
        end
      end
    end
    if plan.returnAttachments then
      for _, gid in ipairs(sorted_keys(layer.attachments)) do
        local a = layer.attachments[gid]
        if not a.deleted and chosen[a.parentGlobalId] then
          attachments[#attachments + 1] = attachment_content.record(a, plan.service_url, layer,
                                                                    plan.returnAttachmentsDataByUrl ~= false)
        end
      end
    end
    layers[#layers + 1] = { id = id, features = features, attachments = attachments }
  end
  local doc = {
    replicaName = plan.replicaName,
    transportType = settings.transport_name(prefix, plan.transport),
    responseType = prefix .. "ReplicaResponseTypeData",
    layers = layers,
  }
  if replica then
    doc.replicaID = replica.replicaID
    if replica.model == "perLayer" then
      doc.layerServerGens = json.array()
      replica.layer_gens = {}
      for _, id in ipairs(replica.layers) do
        doc.layerServerGens[#doc.layerServerGens + 1] = { id = id, serverGen = gen }
        replica.layer_gens[id] = gen
      end
    else
      doc.replicaServerGen = gen
      replica.gen = gen
    end
  end
  return doc
end

--- The text of a createReplica result document, each layer entry writing
-- its "id" where `id_position` says ("first" or "last", settings.lua).
function create.encode(doc, id_position)
  if id_position ~= "first" then return json.encode(doc) end -- the encoder sorts keys: id last
  local layers = doc.layers
  doc.layers = json.array()
  local text = json.encode(doc)
  doc.layers = layers
  local parts = {}
  for i, l in ipairs(layers) do
    parts[i] = ('{"id":%s,"features":%s,"attachments":%s}'):format(json.encode(l.id), json.encode(l.features),
      json.encode(l.attachments))
  end
  -- the first "layers" member is the document's own: sorted, the keys before it hold no text of a user's
  local at = assert(text:find('"layers":[]', 1, true))
  return text:sub(1, at - 1) .. '"layers":[' .. table.concat(parts, ",") .. "]" .. text:sub(at + #'"layers":[]')
end

-- ---------------------------------------------------------------- handlers

local http_error = answers.json

local function service_url(emu, name)
  return ("%s/%s/FeatureServer"):format(emu:url(), name)
end

--- POST {service}/FeatureServer/createReplica
function create.create_replica(emu, request, service_name)
  local svc, refused = metadata.service(emu, request, service_name)
  if not svc then return refused end
  local plan, err = create.plan(svc, request.form, emu.settings)
  if plan then plan.service_url = service_url(emu, service_name) end
  if not plan then return err end
  local user = metadata.user_of(emu, request)
  plan.owner = user and user.name or ""
  local prefix = emu.settings.enum_prefix
  if plan.async then
    local outcome = emu.settings.job_outcome or "Completed"
    local phases = { "Pending", "InProgress", "ProvisioningReplica", "ExportingData" }
    if plan.returnAttachments then phases[#phases + 1] = "ExportAttachments" end
    local job = emu.jobs:submit({
      transportType = prefix .. "TransportTypeUrl",
      responseType = prefix .. "ReplicaResponseTypeData",
      replicaName = plan.replicaName,
      replicaID = "", -- known once the replica is provisioned
      targetType = plan.targetType,
    }, outcome, emu.settings.job_step_ms, emu.settings.job_phase_ms)
    job.kind, job.phases, job.service, job.plan, job.prefix = "createReplica", phases, service_name, plan, prefix
    job.layer_id_position = emu.settings.layer_id_position
    -- a job's result is always a file: "If async is true, the results will always be returned
    -- as if transportType is esriTransportTypeUrl" (https://developers.arcgis.com/rest/
    -- services-reference/enterprise/create-replica.htm)
    plan.transport = "url"
    return { statusUrl = service_url(emu, service_name) .. "/jobs/" .. job.id }
  end
  local replica = create.register(svc, plan, plan.owner)
  local doc = create.export(svc, plan, replica, prefix)
  if plan.transport == "url" then
    -- the vendor's terse answer: the file holds the rest
    return { transportType = doc.transportType,
             responseUrl = emu:store_result(service_name, create.encode(doc, emu.settings.layer_id_position)) }
  end
  if emu.settings.layer_id_position ~= "first" then return doc end
  return nil, { status = 200, headers = { ["Content-Type"] = "application/json; charset=utf-8" },
                body = create.encode(doc, "first") }
end

--- Moves a createReplica job's work to where its clock is: entering
-- ProvisioningReplica registers the replica (once: `job.imported`),
-- entering ExportingData exports its data to a result file (once:
-- `job.exported`). A job whose outcome is Failed registers nothing.
-- Returns true when the state changed (to be saved).
function create.advance(emu, job)
  if job.exported then return false end
  local phase = jobs.phase(job)
  local changed = false
  local svc = emu.world.feature_services[job.service]
  if phase >= PROVISION and not job.imported then
    job.imported, changed = true, true
    if job.outcome ~= "Failed" and svc then
      local replica = create.register(svc, job.plan, job.plan.owner)
      job.replica_id = replica and replica.replicaID or nil
      job.fields.replicaID = job.replica_id or ""
    elseif job.outcome == "Failed" then
      job.messages = { { type = "error", description = "The replica could not be created." } }
    end
  end
  if phase >= EXPORT and not job.exported then
    job.exported, changed = true, true
    if job.outcome ~= "Failed" and svc then
      local replica = job.replica_id and svc.replicas[job.replica_id] or nil
      local doc = create.export(svc, job.plan, replica, job.prefix)
      job.result = emu:store_result(job.service, create.encode(doc, job.layer_id_position))
    end
    job.plan = nil
  end
  return changed
end

local function decode_id(text)
  return (text:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

--- The replica's resource: GET/POST {service}/FeatureServer/replicas/{id}
function create.replica_info(emu, request, service_name, id_text)
  local svc, refused = metadata.service(emu, request, service_name)
  if not svc then return refused end
  local id = decode_id(id_text)
  local replica = svc.replicas[id]
  if not replica then
    -- the same id without braces, or in lowercase
    local want = id:upper():gsub("[{}]", "")
    for rid, r in pairs(svc.replicas) do
      if rid:upper():gsub("[{}]", "") == want then replica = r end
    end
  end
  if not replica then return error_body(404, ("Replica %s does not exist."):format(id)) end
  local ids = json.array(world.deep_copy(replica.layers or svc.layer_ids))
  local doc = {
    replicaName = replica.replicaName, replicaID = replica.replicaID, replicaOwner = replica.owner or "",
    layers = ids, syncModel = replica.model, targetType = replica.targetType or "client",
    syncDirection = replica.syncDirection or "bidirectional",
    creationDate = replica.creationDate or replica.seed_ms or 0, lastSyncDate = replica.lastSyncDate or 0,
    returnsAttachments = replica.returnAttachments == true, returnAttachments = replica.returnAttachments == true,
    spatialRel = "esriSpatialRelIntersects",
  }
  local gen = replica.gen or replica.seed_gen or svc.gen
  if replica.model == "perLayer" then
    doc.layerServerGens = json.array()
    for _, id_ in ipairs(ids) do
      local g = replica.layer_gens and replica.layer_gens[id_] or gen
      doc.layerServerGens[#doc.layerServerGens + 1] = { id = id_, serverGen = g, serverSibGen = 0 }
    end
  else
    doc.replicaServerGen = gen
    doc.serverSibGen = 0
  end
  if replica.geometry then
    doc.queryGeometry = world.deep_copy(replica.geometry)
    doc.geometryType = replica.geometryType or "esriGeometryEnvelope"
  end
  if replica.layerQueries then doc.layerQueries = json.decode(replica.layerQueries) end
  return doc
end

--- GET {service}/FeatureServer/replicas: the replicas' names and ids, a
-- JSON array as the vendor documents the resource ("replicas (Feature
-- Service)": every replica for an administrator, only the user's own
-- otherwise), oldest first.
function create.list_replicas(emu, request, service_name)
  local svc, refused = metadata.service(emu, request, service_name)
  if not svc then return refused end
  local user = metadata.user_of(emu, request)
  local list = {}
  for _, r in pairs(svc.replicas) do
    if not user or user.role == "administrator" or r.owner == user.name then list[#list + 1] = r end
  end
  table.sort(list, function(a, b)
    local ta, tb = a.creationDate or 0, b.creationDate or 0
    if ta ~= tb then return ta < tb end
    return tostring(a.replicaName) < tostring(b.replicaName)
  end)
  local out = json.array()
  for i, r in ipairs(list) do out[i] = { replicaName = r.replicaName, replicaID = r.replicaID } end
  return out
end

--- POST {service}/FeatureServer/unRegisterReplica (replicaID)
function create.unregister(emu, request, service_name)
  local svc, refused = metadata.service(emu, request, service_name)
  if not svc then return refused end
  local rid = request.form.replicaID
  if rid == nil or rid == "" then
    return nil, http_error(400, error_body(400, "Unable to unregister replica.", { "'replicaID' is required." }))
  end
  if rid == "*" then
    -- "Starting at 10.5.1, you can specify * to unregister all replicas"
    -- (https://developers.arcgis.com/rest/services-reference/enterprise/unregister-replica/):
    -- every one, unless a sync is running on it
    for id, r in pairs(svc.replicas) do
      if r.busy_job and not jobs.finished(r.busy_job) then
        return error_body(409, ("Replica %s is busy with another synchronization."):format(id))
      end
    end
    svc.replicas = {}
    return { success = true }
  end
  local replica = svc.replicas[world.guid(rid)]
  if not replica then return error_body(404, ("Replica %s does not exist."):format(rid)) end
  if replica.busy_job and not jobs.finished(replica.busy_job) then
    return error_body(409, ("Replica %s is busy with another synchronization."):format(rid))
  end
  svc.replicas[replica.replicaID] = nil
  return { success = true }
end

create.parse_where = parse_where
create.attribute = attribute
create.passes = passes
return create
