--- The emulator's own checks of a configure request (4.2), written apart
-- from the client's validate_configure.lua on purpose: the specs send what
-- the client would refuse and expect the emulator to refuse it as well, so
-- the client's checks are never the only line. Works on the received
-- strings; returns nil or a "<parameter>: <rule>" text that never quotes a
-- value (several are secrets). File parts are either in memory (`data`) or
-- spooled to disk (`path`, `size`).
local json = require "geoservices.base.json"

local rules = {}

local REQUIRED = {
  "username", "password", "email", "fullName", "securityQuestionIdx", "securityQuestionAns",
  "userLicenseTypeId", "volumesConfig",
}
local COMPONENTS = {
  RELATIONAL_PRIMARY = true, RELATIONAL_SECONDARY = true, BLOB = true, IN_MEM_CACHE = true, QUEUE = true,
  INDEXER = true, SHARING = true, REST_METRICS_API = true,
}
local PROFILES = { ["enhanced-availability"] = true, ["standard-availability"] = true, development = true }
local SECRETS_OF = {
  ["IAM-ROLE"] = {},
  ["SYSTEM-ASSIGNED-IDENTITY"] = { "storageAccountName" },
  ["HMAC-KEYS"] = { "secretKey", "accessKey" },
}
local CATEGORY = { objectStore = "storage", relationalStore = "databases" }

local function filled(v)
  return type(v) == "string" and v:match("%S") ~= nil
end

-- Each check returns nil when fine, else the rule broken (without the name).
local function check_volumes(text)
  local v = json.decode(text)
  local list = type(v) == "table" and v.volumesConfig
  if type(list) ~= "table" then return "must be a JSON object with a volumesConfig array" end
  if #list ~= 8 then return ("must configure exactly 8 persistent volumes, got %d"):format(#list) end
  local seen = {}
  for i, e in ipairs(list) do
    if type(e) ~= "table" or not COMPONENTS[e.component] then return ("entry %d has an unknown component"):format(i) end
    if seen[e.component] then return ("component %s is configured twice"):format(e.component) end
    seen[e.component] = true
    if not filled(e.provisioningType) then return ("%s needs a provisioningType"):format(e.component) end
    if type(e.size) ~= "string" or not e.size:match("^%d+[GMT]i$") then
      return ("%s size needs a unit suffix (Gi, Mi or Ti)"):format(e.component)
    end
    if not filled(e.storageClass) then return ("%s needs a storageClass"):format(e.component) end
    if e.labels ~= nil then
      if type(e.labels) ~= "table" then return ("%s labels must be an object"):format(e.component) end
      for k, x in pairs(e.labels) do
        if type(k) ~= "string" or type(x) ~= "string" then
          return ("%s labels must map strings to strings"):format(e.component)
        end
      end
    end
  end
end

local function check_connection(s)
  local c = s.connection
  if type(c) ~= "table" then return "connection is required" end
  if s.type == "objectStore" then
    for _, m in ipairs{ "bucketName", "region", "regionEndpointUrl" } do
      if not filled(c[m]) then return "object store connection needs " .. m end
    end
    if c.rootDir ~= nil and type(c.rootDir) ~= "string" then return "rootDir must be a string" end
    return nil
  end
  if not filled(c.dbUri) then return "relational store connection needs dbUri" end
  if c.dbReadonlyUri ~= nil and type(c.dbReadonlyUri) ~= "string" then return "dbReadonlyUri must be a string" end
  if math.type(c.dbPort) ~= "integer" or c.dbPort < 1 or c.dbPort > 65535 then
    return "dbPort must be an integer port number"
  end
  local cred = c.credential
  local admin = type(cred) == "table" and type(cred.databaseUsers) == "table" and cred.databaseUsers.adminUser
  if type(cred) ~= "table" or cred.type ~= "databaseUser" or type(admin) ~= "table" then
    return "relational store needs a databaseUser credential with databaseUsers.adminUser"
  end
  if admin.authType ~= "PASSWORD" or not filled(admin.name) or not filled(admin.password) then
    return "adminUser needs authType PASSWORD, a name and a password"
  end
end

local function check_cloud(text)
  local v = json.decode(text)
  if type(v) ~= "table" or #v == 0 then return "must be a non-empty JSON array of providers" end
  for i, p in ipairs(v) do
    if type(p) ~= "table" or not filled(p.name) then return ("provider %d needs a name"):format(i) end
    local object_store = false
    for j, s in ipairs(type(p.cloudServices) == "table" and p.cloudServices or {}) do
      local where = ("provider %d service %d: "):format(i, j)
      if type(s) ~= "table" or not filled(s.name) then return where .. "name is required" end
      if not CATEGORY[s.type] then return where .. "type must be objectStore or relationalStore" end
      if s.category ~= CATEGORY[s.type] then return where .. "category does not match the type" end
      if not filled(s.usage) then return where .. "usage is required" end
      if s.instanceProvided ~= nil and type(s.instanceProvided) ~= "boolean" then
        return where .. "instanceProvided must be a boolean"
      end
      local problem = check_connection(s)
      if problem then return where .. problem end
      object_store = object_store or s.type == "objectStore"
    end
    if object_store and p.credential == nil then
      return ("provider %d needs a credential for its object store"):format(i)
    end
    if p.credential ~= nil then
      local cred = p.credential
      local needs = type(cred) == "table" and SECRETS_OF[cred.type]
      if not needs then return ("provider %d credential type is not supported"):format(i) end
      for _, m in ipairs(needs) do
        if type(cred.secret) ~= "table" or not filled(cred.secret[m]) then
          return ("provider %d credential %s needs secret.%s"):format(i, cred.type, m)
        end
      end
    end
  end
end

local function check_stores(text)
  local v = json.decode(text)
  if type(v) ~= "table" then return "must be a JSON array" end
  for i, e in ipairs(v) do
    local info = type(e) == "table" and e.info
    if type(info) ~= "table" or not filled(e.clientPath) or e.type ~= "folder" or not filled(info.fileServerHost)
      or not filled(info.fileServerPath) or info.fileServerType ~= "nfs" then
      return ("entry %d needs clientPath, type folder and info with fileServerHost, fileServerPath and nfs"):format(i)
    end
  end
end

local CHECKS = {
  username = function(v)
    if #v < 6 then return "must be at least 6 characters" end
    if v:find("[^%w@_%.%-]") then return "only letters, digits and @ _ . - are allowed" end
  end,
  password = function(v)
    if #v < 8 then return "must be at least 8 characters" end
    if not (v:find("%a") and v:find("%d")) then return "needs at least one letter and one digit" end
  end,
  email = function(v)
    if not v:match("^[^%s@]+@[^%s@]+%.[^%s@.]+$") then return "is not an e-mail address" end
  end,
  securityQuestionIdx = function(v)
    local n = v:match("^%d+$") and tonumber(v)
    if not n or n < 1 or n > 14 then return "must be an integer from 1 to 14" end
  end,
  volumesConfig = check_volumes,
  cloudConfig = check_cloud,
  userManagedStores = check_stores,
  systemArchitectureProfile = function(v)
    local p = json.decode(v)
    if type(p) ~= "table" or not PROFILES[p.name] then
      return "name must be enhanced-availability, standard-availability or development"
    end
  end,
  -- the vendor's own tooling sends {"logLevel": ""} (keep the default level)
  logSettings = function(v)
    local p = json.decode(v)
    if type(p) ~= "table" or type(p.logLevel) ~= "string" then return "must be a JSON object with logLevel" end
  end,
  -- a path, or {"paths": [...]} as the vendor's tooling sends it
  folderPathsToRegister = function(v)
    if v:sub(1, 1) ~= "{" then return nil end
    local p = json.decode(v)
    if type(p) ~= "table" or type(p.paths) ~= "table" then return "must be a path or a JSON object {paths: [...]}" end
    for _, path in ipairs(p.paths) do
      if not filled(path) then return "paths must be non-empty strings" end
    end
  end,
  systemProperties = function(v)
    if type(json.decode(v)) ~= "table" then return "must be a JSON object" end
  end,
}

--- Checks the decoded multipart fields and files; returns nil when the
-- request is acceptable, else "parameter: rule".
-- The size of a file part: in memory (`data`), or spooled to disk by the
-- HTTP layer (`path`, `size`) so a large upload is never held whole.
local function part_size(part)
  if part.data ~= nil then return #part.data end
  if part.size ~= nil then return part.size end
  local f = part.path and io.open(part.path, "rb")
  if not f then return 0 end
  local size = f:seek("end")
  f:close()
  return size or 0
end
rules.part_size = part_size

function rules.check(fields, files)
  for _, name in ipairs(REQUIRED) do
    if not filled(fields[name]) then return name .. ": is required" end
  end
  local license = files.licenseFile
  if not license or part_size(license) == 0 then return "licenseFile: a non-empty license file part is required" end
  -- the services component's license: a file part (or, as older tooling does, a field)
  local server_license = files.serverLicenseFile
  if server_license and part_size(server_license) == 0 then return "serverLicenseFile: the file part is empty" end
  for _, name in ipairs{ "username", "password", "email", "securityQuestionIdx", "volumesConfig", "cloudConfig",
                         "userManagedStores", "systemArchitectureProfile", "logSettings", "systemProperties",
                         "folderPathsToRegister" } do
    if fields[name] ~= nil then
      local problem = CHECKS[name](fields[name])
      if problem then return name .. ": " .. problem end
    end
  end
end

--- Whether the request configures a cloud object store (which makes the
-- Cloud Native Storage stage applicable).
function rules.has_cloud_storage(fields)
  local v = fields.cloudConfig and json.decode(fields.cloudConfig)
  for _, p in ipairs(type(v) == "table" and v or {}) do
    for _, s in ipairs(type(p.cloudServices) == "table" and p.cloudServices or {}) do
      if s.type == "objectStore" then return true end
    end
  end
  return false
end

return rules
