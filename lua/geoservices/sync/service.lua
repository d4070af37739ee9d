--- A feature service's metadata, as replicas need it: the service resource
-- (`{service}/FeatureServer?f=json`: its layers and tables, whether sync is
-- enabled and which sync capabilities it has) and a layer resource
-- (`{service}/FeatureServer/{id}?f=json`: fields with their types, geometry
-- type, spatial reference, object id and global id fields), and the checks
-- createReplica makes against them before anything is sent.
--
-- The methods are the client's (`client:service_info(service)`,
-- `client:layer_info(service, id)`); `self` is the client. Each returns the
-- server's document as it came (every member kept) with a metatable that
-- prints a one-line summary, plus a few normalized members (below). Errors
-- come back as `nil, err` (geoservices.errors): kind "invalid" (a bad
-- service name or layer id, nothing sent), "network", "timeout",
-- "cancelled", "http", "server" (e.g. a service or layer that does not exist),
-- "auth", "protocol".
-- @module geoservices.sync.service
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"

local service = {}

--- A service name is a name, maybe in a folder (`Folder/Parcels`), never a
-- path trick.
-- @param name the value
-- @string[opt] caller the method's name, for the message when name is not a string
-- @treturn ?table err of kind "invalid" naming "service", or nil when it is good
-- @raise when name is not a string
-- @local
function service.check_name(name, caller)
  if type(name) ~= "string" then error((caller or "client") .. ": service name must be a string", 3) end
  if name == "" or name:find("[?#%%%s]") then
    return errors.invalid("service", "must be a service name such as Parcels or Folder/Parcels without "
      .. "'?', '#', '%' or spaces")
  end
  if name:find("%.%.") or name:sub(1, 1) == "/" or name:sub(-1) == "/" then
    return errors.invalid("service", "must not contain '..' or start or end with '/'")
  end
  return nil
end

--- The address of a resource of a feature service: `{base_url}/{service}/FeatureServer[/{path}]`.
-- @local
function service.url(client, name, path)
  return client:url_for(("%s/FeatureServer%s"):format(name, path and ("/" .. path) or ""))
end

local function truthy(v)
  if v == true or v == "true" then return true end
  if v == false or v == "false" then return false end
  return nil
end

-- ------------------------------------------------------------- service

--- The sync capabilities createReplica is checked against, each true, false
-- or nil (the server did not say: nothing is refused for it).
-- @table SYNC_CAPABILITIES
service.SYNC_CAPABILITIES = {
  "supportsPerReplicaSync", "supportsPerLayerSync", "supportsSyncDirectionControl", "supportsRollbackOnFailure",
  "supportsAsync", "supportsRegisteringExistingData", "supportsSyncModelNone", "supportsAttachmentsSyncDirection",
  "supportsBiDirectionalSyncForServer",
}

local ServiceInfo = { __name = "geoservices.ServiceInfo" }
ServiceInfo.__index = ServiceInfo

function ServiceInfo:__tostring()
  local parts = {}
  for _, l in ipairs(self.layers) do parts[#parts + 1] = ("%s %s"):format(tostring(l.id), tostring(l.name)) end
  for _, t in ipairs(self.tables) do parts[#parts + 1] = ("%s %s (table)"):format(tostring(t.id), tostring(t.name)) end
  local sync
  if not self.syncEnabled then
    sync = "sync not enabled"
  else
    local caps = {}
    local c = self.syncCapabilities
    if c.supportsPerReplicaSync ~= false then caps[#caps + 1] = "perReplica" end
    if c.supportsPerLayerSync ~= false then caps[#caps + 1] = "perLayer" end
    if c.supportsAsync ~= false then caps[#caps + 1] = "async" end
    if c.supportsSyncDirectionControl ~= false then caps[#caps + 1] = "direction control" end
    sync = "sync enabled: " .. table.concat(caps, ", ")
  end
  local n = #self.layers + #self.tables
  return ("service %s: %d layer%s (%s), %s"):format(tostring(self.name), n, n == 1 and "" or "s",
    table.concat(parts, ", "), sync)
end

local function capability_list(text)
  local out = {}
  if type(text) ~= "string" then return out end
  for c in text:gmatch("[^,%s]+") do out[#out + 1] = c end
  return out
end

local function has_capability(list, name)
  for _, c in ipairs(list) do if c:lower() == name:lower() then return true end end
  return false
end

local function entries(list)
  local out = json.array()
  for _, e in ipairs(type(list) == "table" and list or {}) do
    if type(e) == "table" then
      local copy = {}
      for k, v in pairs(e) do copy[k] = v end
      copy.id = math.tointeger(tonumber(e.id)) or e.id
      out[#out + 1] = copy
    end
  end
  return out
end

--- Builds a @{ServiceInfo} from a decoded service resource. Pure.
-- @string name the service name
-- @tparam table doc the decoded resource
-- @treturn ServiceInfo the info
-- @local
function service.build_service_info(name, doc)
  local info = setmetatable({}, ServiceInfo)
  for k, v in pairs(doc) do info[k] = v end
  info.name = name
  info.capability_list = capability_list(doc.capabilities)
  local caps = {}
  local given = type(doc.syncCapabilities) == "table" and doc.syncCapabilities or {}
  for k, v in pairs(given) do caps[k] = v end
  for _, k in ipairs(service.SYNC_CAPABILITIES) do caps[k] = truthy(given[k]) end
  info.syncCapabilities = caps
  local enabled = truthy(doc.syncEnabled)
  if enabled == nil then enabled = has_capability(info.capability_list, "Sync") end
  if #info.capability_list > 0 and not has_capability(info.capability_list, "Sync") then enabled = false end
  info.syncEnabled = enabled
  info.layers, info.tables = entries(doc.layers), entries(doc.tables)
  return info
end

--- Reads a feature service's resource (`client:service_info(service)`,
-- `{service}/FeatureServer?f=json`).
-- @param self the client
-- @string name the service, e.g. "Parcels" or "Folder/Parcels"
-- @tparam[opt] table opts `timeout` (seconds)
-- @treturn[1] ServiceInfo the service's metadata (prints as a one-line summary)
-- @return[2] nil
-- @treturn[2] table err: kind "invalid" (a bad name, nothing sent), "server" (the service does not
--   exist...), "network", "timeout", "cancelled", "http", "auth", "protocol"
-- @raise when name is not a string
function service.service_info(self, name, opts)
  local bad = service.check_name(name, "service_info")
  if bad then return nil, bad end
  opts = opts or {}
  local doc, err = self:post(service.url(self, name), {}, { timeout = opts.timeout, retry = "read" })
  if not doc then return nil, err end
  return service.build_service_info(name, doc)
end

-- ------------------------------------------------------------- layer

local LayerInfo = { __name = "geoservices.LayerInfo" }
LayerInfo.__index = LayerInfo

function LayerInfo:__tostring()
  local sr = self.spatialReference
  local srs = sr and (sr.latestWkid or sr.wkid) and ("wkid " .. tostring(sr.latestWkid or sr.wkid))
    or (sr and sr.wkt and "a WKT spatial reference") or "no spatial reference"
  return ("layer %s %s of %s: %s, %s, %d fields (%s, %s)"):format(tostring(self.id), tostring(self.name),
    tostring(self.service), self.is_table and "table" or tostring(self.geometryType), srs, #self.fields,
    tostring(self.objectIdField), tostring(self.globalIdField))
end

local function field_of_type(fields, ftype)
  for _, f in ipairs(fields) do
    if f.type == ftype then return f.name end
  end
  return nil
end

--- Builds a @{LayerInfo} from a decoded layer resource. Pure.
-- @string name the service
-- @tparam table doc the decoded resource
-- @treturn LayerInfo the info
-- @local
function service.build_layer_info(name, doc)
  local info = setmetatable({}, LayerInfo)
  for k, v in pairs(doc) do info[k] = v end
  info.service = name
  info.id = math.tointeger(tonumber(doc.id)) or doc.id
  local fields = json.array()
  for _, f in ipairs(type(doc.fields) == "table" and doc.fields or {}) do
    if type(f) == "table" then fields[#fields + 1] = f end
  end
  info.fields = fields
  local extent = type(doc.extent) == "table" and doc.extent or {}
  local sr = doc.spatialReference
  if type(sr) ~= "table" then sr = extent.spatialReference end
  if type(sr) ~= "table" then sr = doc.sourceSpatialReference end
  info.spatialReference = type(sr) == "table" and sr or nil
  if type(doc.objectIdField) ~= "string" or doc.objectIdField == "" then
    info.objectIdField = field_of_type(fields, "esriFieldTypeOID")
  end
  if type(doc.globalIdField) ~= "string" or doc.globalIdField == "" then
    info.globalIdField = field_of_type(fields, "esriFieldTypeGlobalID")
  end
  if doc.geometryType == json.null or doc.geometryType == "" then info.geometryType = nil end
  info.is_table = doc.type == "Table" or info.geometryType == nil
  return info
end

--- Reads a layer's (or table's) resource (`client:layer_info(service, id)`,
-- `{service}/FeatureServer/{id}?f=json`).
-- @param self the client
-- @string name the service
-- @int id the layer id
-- @tparam[opt] table opts `timeout` (seconds)
-- @treturn[1] LayerInfo the layer's metadata (prints as a one-line summary)
-- @return[2] nil
-- @treturn[2] table err: kind "invalid" (a bad name or id, nothing sent), "server" (no such
--   layer...), "network", "timeout", "cancelled", "http", "auth", "protocol"
-- @raise when name is not a string
function service.layer_info(self, name, id, opts)
  local bad = service.check_name(name, "layer_info")
  if bad then return nil, bad end
  local layer_id = math.tointeger(id)
  if layer_id == nil or layer_id < 0 then return nil, errors.invalid("id", "must be a layer id (an integer >= 0)") end
  opts = opts or {}
  local doc, err = self:post(service.url(self, name, tostring(layer_id)), {},
                             { timeout = opts.timeout, retry = "read" })
  if not doc then return nil, err end
  return service.build_layer_info(name, doc)
end

-- ------------------------------------------------------------- checks

--- Checks a createReplica request against the service's metadata before
-- anything is sent: sync must be enabled; the sync model, a sync direction
-- other than bidirectional and an async request must be supported (a
-- capability the server does not state is not held against it); every
-- layer must exist. Pure.
-- @tparam ServiceInfo info the service
-- @tparam table plan what geoservices.sync.create_params.encode understood (`layers`, `model`,
--   `direction`, `async`)
-- @treturn ?table err of kind "invalid" naming the parameter (`err.capability` names the missing
--   capability), or nil
-- @local
function service.check_create(info, plan)
  local name = tostring(info.name)
  if not info.syncEnabled then
    return errors.new("invalid", ("service: %s does not have sync enabled (its capabilities are %s): it cannot "
      .. "create replicas"):format(name, tostring(info.capabilities)), { parameter = "service", capability = "Sync" })
  end
  local caps = info.syncCapabilities
  local function refuse(parameter, capability, rule)
    return errors.new("invalid", ("%s: %s (the service %s says %s = false)"):format(parameter, rule, name, capability),
      { parameter = parameter, capability = capability })
  end
  if plan.model == "perReplica" and caps.supportsPerReplicaSync == false then
    return refuse("syncModel", "supportsPerReplicaSync", "perReplica is not supported by this service; use perLayer")
  end
  if plan.model == "perLayer" and caps.supportsPerLayerSync == false then
    return refuse("syncModel", "supportsPerLayerSync", "perLayer is not supported by this service; use perReplica")
  end
  if plan.direction and plan.direction ~= "bidirectional" and caps.supportsSyncDirectionControl == false then
    return refuse("syncDirection", "supportsSyncDirectionControl",
      ("%s cannot be chosen on this service: its replicas are bidirectional"):format(plan.direction))
  end
  if plan.async == true and caps.supportsAsync == false then
    return refuse("async", "supportsAsync", "this service runs createReplica synchronously only")
  end
  local known = #info.layers + #info.tables > 0
  if known then
    for _, id in ipairs(plan.layers or {}) do
      if not info:layer(id) then
        return errors.invalid("layers", ("layer %d is not a layer or table of the service %s"):format(id, name))
      end
    end
  end
  return nil
end

--- The sync model createReplica uses when the caller names none:
-- perReplica, unless the service supports only perLayer.
-- @tparam ?ServiceInfo info the service (nil: not read)
-- @treturn string "perReplica" or "perLayer"
-- @local
function service.default_model(info)
  local caps = info and info.syncCapabilities or {}
  if caps.supportsPerReplicaSync == false and caps.supportsPerLayerSync ~= false then return "perLayer" end
  return "perReplica"
end

-- ------------------------------------------------------------- the results' methods

--- A service resource (`client:service_info`): the server's members as they
-- came, plus: `name` (the service asked for), `syncEnabled` (a boolean:
-- false when the server says so or lacks the Sync capability),
-- `syncCapabilities` (booleans; missing members stay nil: unknown),
-- `layers` and `tables` (`{id =, name =, geometryType =, ...}` entries, ids
-- as integers), `capability_list` (the `capabilities` text split, e.g.
-- `{"Create", "Query", "Sync"}`). `tostring` gives
-- `service Parcels: 2 layers (0 Parcels, 1 Hydrants), sync enabled: perReplica, perLayer, async`.
-- @type ServiceInfo

--- Whether the service has a layer or table with this id.
-- @int id the layer id
-- @treturn ?table its entry (`{id =, name =, ...}`), or nil
-- @raise never
function ServiceInfo:layer(id)
  for _, l in ipairs(self.layers) do if l.id == id then return l end end
  for _, t in ipairs(self.tables) do if t.id == id then return t end end
  return nil
end

--- A layer (or table) resource (`client:layer_info`): the server's members
-- as they came, plus: `id` (an integer), `service`, `fields` (each `{name =,
-- type =, alias =, length =, nullable =, ...}`), `spatialReference` (the
-- layer's own, else its extent's, else its source's; nil for a table),
-- `objectIdField` and `globalIdField` (named by the server, else found by
-- their field types), `geometryType` (nil for a table), `is_table`.
-- `tostring` gives `layer 0 Parcels of Parcels: esriGeometryPoint, wkid 4326, 8 fields (OBJECTID, GlobalID)`.
-- @type LayerInfo

--- The field of that name (case-insensitive), or nil.
-- @string name the field's name
-- @treturn ?table the field
-- @raise when name is not a string
function LayerInfo:field(name)
  for _, f in ipairs(self.fields) do
    if type(f.name) == "string" and f.name:lower() == name:lower() then return f end
  end
  return nil
end

service.ServiceInfo = ServiceInfo
service.LayerInfo = LayerInfo
return service
