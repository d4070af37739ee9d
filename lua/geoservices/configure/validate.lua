--- The rules configure applies before anything is sent. Creating an
-- organization takes long and fails late, so every mistake we can see here is
-- refused at once with `kind = "invalid"`, naming the parameter and the rule.
-- Messages describe the rule, never the value: several values are secrets.
local errors = require "geoservices.base.errors"

local validate = {}

validate.REQUIRED = {
  "username", "password", "email", "fullName", "securityQuestionIdx", "securityQuestionAns",
  "userLicenseTypeId", "licenseFile", "volumesConfig",
}

-- The eight persistent volume components of 2.6, in the spec's order.
validate.COMPONENTS = {
  "RELATIONAL_PRIMARY", "RELATIONAL_SECONDARY", "BLOB", "IN_MEM_CACHE", "QUEUE", "INDEXER", "SHARING",
  "REST_METRICS_API",
}

validate.PROFILES = { "enhanced-availability", "standard-availability", "development" }

-- Parameters sent as file parts of the multipart body.
validate.FILE_PARAMS = { licenseFile = true, serverLicenseFile = true }
validate.CREDENTIAL_TYPES = { "IAM-ROLE", "SYSTEM-ASSIGNED-IDENTITY", "HMAC-KEYS" }
validate.QUESTION_COUNT = 14

-- The members a credential type needs in credential.secret.
local SECRET_MEMBERS = {
  ["IAM-ROLE"] = {},
  ["SYSTEM-ASSIGNED-IDENTITY"] = { "storageAccountName" },
  ["HMAC-KEYS"] = { "secretKey", "accessKey" },
}

-- category <-> type pairing of a cloud service.
local CATEGORY_OF_TYPE = { objectStore = "storage", relationalStore = "databases" }

local function set_of(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

local COMPONENT_SET = set_of(validate.COMPONENTS)
local PROFILE_SET = set_of(validate.PROFILES)

local function fail(param, rule, ...)
  return nil, errors.invalid(param, select("#", ...) > 0 and rule:format(...) or rule)
end

local function is_text(v)
  return type(v) == "string" and v:find("%S") ~= nil
end

local function is_list(v)
  if type(v) ~= "table" then return false end
  local n = 0
  for _ in pairs(v) do n = n + 1 end
  return n == #v
end

local function is_object(v)
  return type(v) == "table" and (next(v) == nil or not is_list(v))
end

-- Checks that `obj[name]` is non-blank text; `where` prefixes the rule.
local function need_text(param, obj, name, where)
  if not is_text(obj[name]) then return fail(param, "%s%s is required (a non-empty string)", where, name) end
  return true
end

local function check_account(p)
  local u = p.username
  if type(u) ~= "string" then return fail("username", "must be a string") end
  if #u < 6 then return fail("username", "must be at least 6 characters") end
  if u:find("[^%w@_%.%-]") then
    return fail("username", "may contain only letters, digits and the symbols @ _ . -")
  end
  local pw = p.password
  if type(pw) ~= "string" then return fail("password", "must be a string") end
  if #pw < 8 then return fail("password", "must be at least 8 characters") end
  if not pw:find("%a") or not pw:find("%d") then
    return fail("password", "must contain at least one letter and one digit")
  end
  if type(p.email) ~= "string" or not p.email:match("^[^%s@]+@[^%s@]+%.[^%s@.]+$") then
    return fail("email", "must be an e-mail address like name@example.com")
  end
  for _, name in ipairs{ "fullName", "userLicenseTypeId", "securityQuestionAns" } do
    if not is_text(p[name]) then return fail(name, "must be a non-empty string") end
  end
  for _, name in ipairs{ "firstName", "lastName", "description" } do
    if p[name] ~= nil and type(p[name]) ~= "string" then return fail(name, "must be a string") end
  end
  return true
end

--- folderPathsToRegister: a path string, or `{paths = {"/a", "/b"}}` as the
-- vendor's own tooling sends it (sent as JSON).
function validate.folder_paths(v)
  if type(v) == "string" then return true end
  if type(v) == "table" and is_list(v.paths) then
    for i, path in ipairs(v.paths) do
      if not is_text(path) then return fail("folderPathsToRegister", "paths[%d] must be a non-empty string", i) end
    end
    return true
  end
  return fail("folderPathsToRegister", "must be a path or a table {paths = {...}}")
end

--- securityQuestionIdx as an integer 1..14 (a digit string is accepted too).
function validate.question_index(v)
  local n = type(v) == "string" and v:match("^%d+$") and tonumber(v) or v
  n = math.type(n) and math.tointeger(n)
  if not n or n < 1 or n > validate.QUESTION_COUNT then
    return fail("securityQuestionIdx", "must be an integer from 1 to %d (see geoservices.SECURITY_QUESTIONS)",
      validate.QUESTION_COUNT)
  end
  return n
end

--- licenseFile (and serverLicenseFile, the services component's license):
-- a readable, non-empty file path, or {filename =, data =}. A path is only
-- probed (opened, sized); libcurl streams it when sending.
function validate.license_file(v, name)
  name = name or "licenseFile"
  if type(v) == "string" then
    local f, msg = io.open(v, "rb")
    if not f then
      return fail(name, "the file must exist and be readable (%s)", tostring(msg))
    end
    local probe, read_err = f:read(0) -- fails on a directory
    local size = f:seek("end")
    f:close()
    if probe == nil and read_err then return fail(name, "must be a regular readable file, not a directory") end
    if not size or size == 0 then return fail(name, "the file is empty") end
    return true
  elseif type(v) == "table" then
    if type(v.data) ~= "string" or v.data == "" then
      return fail(name, "the data member must be the non-empty file content")
    end
    if not is_text(v.filename) then return fail(name, "the filename member is required") end
    return true
  end
  return fail(name, "must be a file path or a table {filename =, data =}")
end

--- volumesConfig: {volumesConfig = {eight entries}} or the bare list.
-- Returns the value in the {volumesConfig = ...} form the server expects.
function validate.volumes(v)
  local entries = type(v) == "table" and (v.volumesConfig or (is_list(v) and v)) or nil
  if not is_list(entries) then
    return fail("volumesConfig",
      "must be {volumesConfig = {...}} with one entry per component (see geoservices.volumes)")
  end
  if #entries ~= #validate.COMPONENTS then
    return fail("volumesConfig", "must have exactly %d entries, one per component, got %d", #validate.COMPONENTS,
      #entries)
  end
  local seen = {}
  for i, e in ipairs(entries) do
    local where = ("entry %d: "):format(i)
    if type(e) ~= "table" then return fail("volumesConfig", "%smust be an object", where) end
    if not COMPONENT_SET[e.component] then
      return fail("volumesConfig", "%scomponent must be one of %s", where, table.concat(validate.COMPONENTS, ", "))
    end
    if seen[e.component] then
      return fail("volumesConfig", "%scomponent %s appears twice; each component exactly once", where, e.component)
    end
    seen[e.component] = true
    where = ("entry %d (%s): "):format(i, e.component)
    if not is_text(e.provisioningType) then return fail("volumesConfig", "%sprovisioningType is required", where) end
    local size = type(e.size) == "string" and e.size or ""
    if not (size:match("^%d+Gi$") or size:match("^%d+Mi$") or size:match("^%d+Ti$")) then
      return fail("volumesConfig", "%ssize must be a quantity with a unit suffix Gi, Mi or Ti, like \"16Gi\"", where)
    end
    if not is_text(e.storageClass) then
      return fail("volumesConfig", "%sstorageClass must be a non-empty string", where)
    end
    if e.labels ~= nil then
      if not is_object(e.labels) then return fail("volumesConfig", "%slabels must be an object", where) end
      for k, lv in pairs(e.labels) do
        if type(k) ~= "string" or type(lv) ~= "string" then
          return fail("volumesConfig", "%slabels must map strings to strings", where)
        end
      end
    end
  end
  return v.volumesConfig and v or { volumesConfig = entries }
end

local function check_connection(service, where)
  local c = service.connection
  if type(c) ~= "table" then return fail("cloudConfig", "%sconnection is required (an object)", where) end
  where = where .. "connection."
  if service.type == "objectStore" then
    for _, name in ipairs{ "bucketName", "region", "regionEndpointUrl" } do
      local ok, err = need_text("cloudConfig", c, name, where)
      if not ok then return nil, err end
    end
    if c.rootDir ~= nil and type(c.rootDir) ~= "string" then
      return fail("cloudConfig", "%srootDir must be a string", where)
    end
    return true
  end
  local ok, err = need_text("cloudConfig", c, "dbUri", where)
  if not ok then return nil, err end
  if c.dbReadonlyUri ~= nil and type(c.dbReadonlyUri) ~= "string" then
    return fail("cloudConfig", "%sdbReadonlyUri must be a string", where)
  end
  local port = math.type(c.dbPort) and math.tointeger(c.dbPort)
  if not port or port < 1 or port > 65535 then
    return fail("cloudConfig", "%sdbPort must be an integer 1..65535", where)
  end
  local cred = c.credential
  if type(cred) ~= "table" or cred.type ~= "databaseUser" then
    return fail("cloudConfig", "%scredential must be {type = \"databaseUser\", databaseUsers = {adminUser = ...}}",
      where)
  end
  local admin = type(cred.databaseUsers) == "table" and cred.databaseUsers.adminUser
  if type(admin) ~= "table" then
    return fail("cloudConfig", "%scredential.databaseUsers.adminUser is required", where)
  end
  if admin.authType ~= "PASSWORD" then
    return fail("cloudConfig", "%scredential.databaseUsers.adminUser.authType must be PASSWORD", where)
  end
  for _, name in ipairs{ "name", "password" } do
    ok, err = need_text("cloudConfig", admin, name, where .. "credential.databaseUsers.adminUser.")
    if not ok then return nil, err end
  end
  return true
end

local function check_service(service, where)
  if type(service) ~= "table" then return fail("cloudConfig", "%smust be an object", where) end
  local ok, err = need_text("cloudConfig", service, "name", where)
  if not ok then return nil, err end
  local category = CATEGORY_OF_TYPE[service.type]
  if not category then return fail("cloudConfig", "%stype must be objectStore or relationalStore", where) end
  if service.category ~= category then
    return fail("cloudConfig", "%scategory must be %s for a %s", where, category, service.type)
  end
  ok, err = need_text("cloudConfig", service, "usage", where)
  if not ok then return nil, err end
  if service.instanceProvided ~= nil and type(service.instanceProvided) ~= "boolean" then
    return fail("cloudConfig", "%sinstanceProvided must be a boolean", where)
  end
  return check_connection(service, where)
end

local function check_credential(cred, where)
  if type(cred) ~= "table" then return fail("cloudConfig", "%scredential must be an object", where) end
  local needs = SECRET_MEMBERS[cred.type]
  if not needs then
    return fail("cloudConfig", "%scredential.type must be one of %s", where,
      table.concat(validate.CREDENTIAL_TYPES, ", "))
  end
  if #needs > 0 and type(cred.secret) ~= "table" then
    return fail("cloudConfig", "%scredential.secret is required for %s (%s)", where, cred.type,
      table.concat(needs, ", "))
  end
  for _, name in ipairs(needs) do
    if not is_text(cred.secret[name]) then
      return fail("cloudConfig", "%scredential.secret.%s is required for %s", where, name, cred.type)
    end
  end
  return true
end

--- cloudConfig: a list of providers with their services.
function validate.cloud(v)
  if not is_list(v) or #v == 0 then return fail("cloudConfig", "must be a non-empty list of provider objects") end
  for i, provider in ipairs(v) do
    local where = ("provider %d: "):format(i)
    if type(provider) ~= "table" then return fail("cloudConfig", "%smust be an object", where) end
    local ok, err = need_text("cloudConfig", provider, "name", where)
    if not ok then return nil, err end
    local services = provider.cloudServices
    if services ~= nil and not is_list(services) then
      return fail("cloudConfig", "%scloudServices must be a list", where)
    end
    local has_object_store = false
    for j, service in ipairs(services or {}) do
      ok, err = check_service(service, ("%scloudServices[%d]: "):format(where, j))
      if not ok then return nil, err end
      has_object_store = has_object_store or service.type == "objectStore"
    end
    if provider.credential ~= nil or has_object_store then
      if provider.credential == nil then
        return fail("cloudConfig", "%scredential is required when an object store is configured", where)
      end
      ok, err = check_credential(provider.credential, where)
      if not ok then return nil, err end
    end
  end
  return true
end

--- userManagedStores: NFS folders to register.
function validate.stores(v)
  if not is_list(v) then return fail("userManagedStores", "must be a list of folder entries") end
  for i, e in ipairs(v) do
    local where = ("entry %d: "):format(i)
    if type(e) ~= "table" then return fail("userManagedStores", "%smust be an object", where) end
    local ok, err = need_text("userManagedStores", e, "clientPath", where)
    if not ok then return nil, err end
    if e.type ~= "folder" then return fail("userManagedStores", "%stype must be \"folder\"", where) end
    if type(e.info) ~= "table" then return fail("userManagedStores", "%sinfo is required (an object)", where) end
    for _, name in ipairs{ "fileServerHost", "fileServerPath" } do
      ok, err = need_text("userManagedStores", e.info, name, where .. "info.")
      if not ok then return nil, err end
    end
    if e.info.fileServerType ~= "nfs" then
      return fail("userManagedStores", "%sinfo.fileServerType must be \"nfs\"", where)
    end
  end
  return true
end

--- systemArchitectureProfile: a name or {name =}; returns {name = ...}.
function validate.profile(v)
  local name = type(v) == "table" and v.name or v
  if not PROFILE_SET[name] then
    return fail("systemArchitectureProfile", "must be one of %s", table.concat(validate.PROFILES, ", "))
  end
  return type(v) == "table" and v or { name = name }
end

--- Checks every rule; returns a new table of the parameters as they are to
-- be sent (normalized where a short form is accepted), or nil, err.
function validate.params(p)
  for _, name in ipairs(validate.REQUIRED) do
    if p[name] == nil then return fail(name, "is required") end
  end
  local out = {}
  for k, v in pairs(p) do out[k] = v end
  local ok, err = check_account(p)
  if not ok then return nil, err end
  out.securityQuestionIdx, err = validate.question_index(p.securityQuestionIdx)
  if not out.securityQuestionIdx then return nil, err end
  ok, err = validate.license_file(p.licenseFile)
  if not ok then return nil, err end
  if p.serverLicenseFile ~= nil then
    ok, err = validate.license_file(p.serverLicenseFile, "serverLicenseFile")
    if not ok then return nil, err end
  end
  if p.folderPathsToRegister ~= nil then
    ok, err = validate.folder_paths(p.folderPathsToRegister)
    if not ok then return nil, err end
  end
  out.volumesConfig, err = validate.volumes(p.volumesConfig)
  if not out.volumesConfig then return nil, err end
  if p.cloudConfig ~= nil then
    ok, err = validate.cloud(p.cloudConfig)
    if not ok then return nil, err end
  end
  if p.userManagedStores ~= nil then
    ok, err = validate.stores(p.userManagedStores)
    if not ok then return nil, err end
  end
  if p.systemArchitectureProfile ~= nil then
    out.systemArchitectureProfile, err = validate.profile(p.systemArchitectureProfile)
    if not out.systemArchitectureProfile then return nil, err end
  end
  -- the vendor's own tooling sends {logLevel = ""} (the default level)
  if p.logSettings ~= nil and (type(p.logSettings) ~= "table" or type(p.logSettings.logLevel) ~= "string") then
    return fail("logSettings", "must be {logLevel = \"...\"} (\"\" keeps the default level)")
  end
  if p.systemProperties ~= nil and not is_object(p.systemProperties) then
    return fail("systemProperties", "must be an object of property names to values")
  end
  return out
end

return validate
