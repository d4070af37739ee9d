--- The emulator's world: users and tokens, service definitions and notebook
-- items, loaded from a JSON (or Lua) data file and completed with realistic
-- defaults so that every field of the interface is present.
local disk = require "geoservices.emulator.disk"
local json = require "geoservices.base.json"

local world = {}

local function deep_copy(v)
  if type(v) ~= "table" then return v end
  local out = setmetatable({}, getmetatable(v))
  for k, x in pairs(v) do out[k] = deep_copy(x) end
  return out
end
world.deep_copy = deep_copy

--- A GlobalID (or replica ID) as a GUID column keeps it: upper case in
-- braces, whatever case and braces it was given in ("abc-..." and
-- "{ABC-...}" are the same row). A GUID column compares the 16 bytes, not
-- the text: SQL Server's uniqueidentifier, the vendor's esriFieldTypeGlobalID
-- ("{XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}", https://pro.arcgis.com/en/pro-app/
-- latest/help/data/geodatabases/overview/arcgis-field-data-types.htm). Not a
-- string, or empty: returned as it is.
function world.guid(s)
  if type(s) ~= "string" then return s end
  local bare = s:match("^%s*{?%s*(.-)%s*}?%s*$")
  if bare == "" then return s end
  return "{" .. bare:upper() .. "}"
end

-- Defaults of a service definition (2.9); a data file gives only what differs.
local SERVICE_DEFAULTS = {
  folderName = "/",
  description = "",
  provider = "ArcObjectsRuntime",
  clusterName = "default",
  capabilities = "Map,Query,Data",
  configuredState = "STARTED",
  isDefault = false,
  private = false,
  isolationLevel = "HIGH",
  loadBalancing = "ROUND_ROBIN",
  minInstancesPerNode = 1,
  maxInstancesPerNode = 2,
  instancesPerContainer = 1,
  maxStartupTime = 300,
  maxUsageTime = 600,
  maxWaitTime = 60,
  maxIdleTime = 1800,
  keepAliveInterval = 1800,
  recycleStartTime = "00:00",
  recycleInterval = 24,
  maxUploadFileSize = 0,
  allowedUploadFileTypes = "",
}

local function default_properties(service)
  return {
    maxDomainCodeCount = "25000", cacheDir = "/arcgis/cache", maxImageWidth = "4096",
    maxImageHeight = "4096", maxRecordCount = "2000", antialiasingMode = "Fast",
    textAntialiasingMode = "Force", enableDynamicLayers = "false", isCached = "false",
    cacheOnDemand = "false", ignoreCache = "false", clientCachingAllowed = "true",
    useLocalCacheDir = "true", outputDir = "/arcgis/output", virtualOutputDir = "/rest/directories/output",
    exportTilesAllowed = "false", maxExportTilesCount = "100000", minScale = "0", maxScale = "0",
    schemaLockingEnabled = "true", serviceId = service.id, dateFieldsTimezoneID = "UTC",
    dateFieldsRespectsDayLightSavingTime = "false", datesInUnknownTimeZone = "false",
    disableIdentifyRelates = "false", preferredTimeZoneID = "",
    preferredTimeZoneRespectsDayLightSavingTime = "false",
    supportedImageReturnTypes = "MIME+URL", filePath = "/arcgis/services/" .. service.serviceName,
  }
end

local FEATURE_SERVER_PROPERTIES = {
  enableZDefaults = "false", zDefaultValue = "0", allowGeometryUpdates = "true",
  allowTrueCurvesUpdates = "false", editorTrackingTimeInUTC = "true", editorTrackingTimeZoneID = "UTC",
  editorTrackingRespectsDayLightSavingTime = "false", maxRecordCount = "2000",
  allowOthersToQuery = "true", allowOthersToUpdate = "false", allowOthersToDelete = "false",
  enableOwnershipBasedAccessControl = "false", syncEnabled = "true",
  syncVersionCreationRule = "versionPerDownloadedMap",
  syncBranchVersionCreationRule = "versionPerDownloadedMap", xssPreventionEnabled = "true",
  xssPreventionRule = "input", realm = "",
}

local function complete_extension(ext)
  ext.enabled = ext.enabled == nil and "true" or tostring(ext.enabled)
  ext.capabilities = ext.capabilities or ""
  ext.maxUploadFileSize = ext.maxUploadFileSize or 0
  local props = ext.properties or {}
  if ext.typeName == "FeatureServer" then
    for k, v in pairs(FEATURE_SERVER_PROPERTIES) do
      if props[k] == nil then props[k] = v end
    end
  end
  ext.properties = json.object(props)
  return ext
end

local function complete_service(service, index)
  assert(type(service.id) == "string", "data: service #" .. index .. " needs a string id")
  assert(type(service.serviceName) == "string", "data: service " .. service.id .. " needs a serviceName")
  service.type = service.type or "MapServer"
  for k, v in pairs(SERVICE_DEFAULTS) do
    if service[k] == nil then service[k] = v end
  end
  service.deploymentId = service.deploymentId or ("deployment-" .. service.id)
  service.datasets = json.array(service.datasets or {})
  service.frameworkProperties = json.object(service.frameworkProperties or {})
  local props = default_properties(service)
  for k, v in pairs(service.properties or {}) do props[k] = tostring(v) end
  service.properties = json.object(props)
  local extensions = {}
  for _, ext in ipairs(service.extensions or {}) do extensions[#extensions + 1] = complete_extension(ext) end
  service.extensions = json.array(extensions)
  local portal = service.portalProperties or {}
  service.portalProperties = {
    isHosted = portal.isHosted == true,
    portalItems = json.array(portal.portalItems or {}),
  }
  return service
end

--- Loads a world from a data table (already decoded).
function world.new(data)
  local w = {
    users = data.users or {},
    tokens = data.tokens or {},
    services = {},
    services_by_id = {},
    notebooks = {},
  }
  for i, service in ipairs(data.services or {}) do
    local s = complete_service(deep_copy(service), i)
    w.services[#w.services + 1] = s
    w.services_by_id[s.id] = s
  end
  for _, item in ipairs(data.notebooks or {}) do
    assert(type(item.itemId) == "string", "data: notebook needs an itemId")
    w.notebooks[item.itemId] = deep_copy(item)
  end
  for token, entry in pairs(w.tokens) do
    assert(w.users[entry.user], ("data: token %s names unknown user %s"):format(token, tostring(entry.user)))
  end
  return w
end

--- Reads a .json or .lua data file; returns the data table or nil, err.
function world.read(path)
  local data
  if path:match("%.lua$") then
    local chunk, err = loadfile(path, "t", {})
    if not chunk then return nil, err end
    data = chunk()
  else
    local text, err = disk.read(path)
    if not text then return nil, err end
    local msg, offset
    data, msg, offset = json.decode(text)
    if not data then return nil, ("%s: invalid JSON at byte %s: %s"):format(path, tostring(offset), msg) end
  end
  return data
end

return world
