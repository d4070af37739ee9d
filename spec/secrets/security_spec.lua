-- Security: TLS verification against a local HTTPS emulator with a
-- certificate made during the run, secrets that never leak, response size
-- and JSON depth limits, path traversal, and the authorization rules of
-- section 5 as the emulator enforces them.
local geoservices = require "geoservices"
local core = require "geoservices.core"
local json = require "geoservices.base.json"
local transport = require "geoservices.net.transport"
local helper = require "spec.helper"

local PARCELS_ID = "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c"
local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local VIEWER_REPLICA = "{5E1A0C2B-4444-4A5B-9C8D-000000000004}"
local LICENSE = "examples/data/sample.prvc"

local function tmp_dir()
  local p = helper.tmp_name()
  os.remove(p)
  assert(os.execute("mkdir -m 700 " .. helper.shell_quote(p)))
  return p
end

describe("TLS", function()
  local dir, emu, cert

  setup(function()
    dir = tmp_dir()
    cert = dir .. "/cert.pem"
    local key = dir .. "/key.pem"
    local cmd = ("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
      .. "-addext subjectAltName=IP:127.0.0.1 -keyout %s -out %s >/dev/null 2>&1"):format(
        helper.shell_quote(key), helper.shell_quote(cert))
    assert(os.execute(cmd), "openssl could not make a certificate")
    emu = helper.start_emulator{ args = { "--tls-cert", cert, "--tls-key", key }, ca_file = cert }
  end)

  teardown(function()
    if emu then emu:stop() end
    os.execute("rm -rf " .. helper.shell_quote(dir))
  end)

  it("the emulator serves HTTPS", function()
    assert.matches("^https://127%.0%.0%.1:%d+/server$", emu.url)
  end)

  it("refuses an unknown certificate by default with a clear network error", function()
    local c = geoservices.client{ url = emu.url, token = "admin-token", retry = false }
    local result, err = c:get_services_by_id{ PARCELS_ID }
    assert.is_nil(result)
    assert.equal("network", err.kind)
    assert.equal("tls_verify", err.code)
    assert.matches("certificate", err.message)
    assert.equal(0, emu:count("getServicesById")) -- nothing got through
  end)

  it("is not retried: a certificate problem does not go away", function()
    local c = geoservices.client{ url = emu.url, token = "admin-token" }
    local waits = 0
    local _, err = c:get_services_by_id({ PARCELS_ID }, { on_retry = function() waits = waits + 1 end })
    assert.equal("tls_verify", err.code)
    -- one attempt, no wait planned (the retry driver tells on_retry before each one)
    assert.is_nil(err.attempts)
    assert.equal(0, waits)
  end)

  it("accepts the certificate given as ca_file", function()
    local c = geoservices.client{ url = emu.url, token = "admin-token", ca_file = cert }
    local services = assert(c:get_services_by_id{ PARCELS_ID })
    assert.equal("Parcels", services[1].serviceName)
  end)

  it("a wrong ca_file is refused too", function()
    local c = geoservices.client{ url = emu.url, token = "admin-token", ca_file = "/etc/ssl/certs/ca-certificates.crt",
                                  retry = false }
    local _, err = c:get_services_by_id{ PARCELS_ID }
    assert.equal("network", err.kind)
    assert.matches("^tls", err.code)
  end)

  it("skips verification only with an explicit insecure = true", function()
    assert.has_error(function() geoservices.client{ url = emu.url, insecure = "yes" } end)
    local c = geoservices.client{ url = emu.url, token = "admin-token", insecure = true }
    assert(c:get_services_by_id{ PARCELS_ID })
  end)
end)

describe("secrets", function()
  local emu, log_path
  local SECRETS = {
    "admin-token", "Pa55word-SECRET-x1", "ANSWER-SECRET-x2", "HMAC-SECRET-KEY-x3", "HMAC-ACCESS-KEY-x4",
    "DB-SECRET-PW-x5",
  }

  setup(function()
    emu = helper.start_emulator{ args = { "--verbose", "--configure-seconds", "0.01" } }
    log_path = emu.log
  end)
  teardown(function() emu:stop() end)
  before_each(function() emu:reset() end)

  local function params()
    return {
      username = "siteadmin", password = "Pa55word-SECRET-x1", email = "siteadmin@example.com",
      fullName = "Site Administrator", securityQuestionIdx = 3, securityQuestionAns = "ANSWER-SECRET-x2",
      userLicenseTypeId = "creatorUT", licenseFile = LICENSE,
      volumesConfig = geoservices.volumes{ storage_class = "standard" },
      cloudConfig = { {
        name = "Amazon EKS",
        credential = { type = "HMAC-KEYS", secret = { secretKey = "HMAC-SECRET-KEY-x3",
                                                      accessKey = "HMAC-ACCESS-KEY-x4" } },
        cloudServices = {
          { name = "Amazon S3", category = "storage", type = "objectStore", usage = "DEFAULT",
            connection = { bucketName = "b", region = "us-east-1", regionEndpointUrl = "https://s3.example.com",
                           rootDir = "arcgis" } },
          { name = "Amazon RDS", category = "databases", type = "relationalStore", usage = "DEFAULT",
            instanceProvided = true,
            connection = { dbUri = "db.example.com", dbReadonlyUri = "ro.db.example.com", dbPort = 5432,
                           credential = { type = "databaseUser", databaseUsers = { adminUser = {
                             authType = "PASSWORD", name = "dbadmin", password = "DB-SECRET-PW-x5" } } } } },
        },
      } },
    }
  end

  -- Every string reachable from `value` (keys, values, tostring of tables
  -- with a metatable), so nested error fields are searched too.
  local function texts(value, out, seen)
    out, seen = out or {}, seen or {}
    local t = type(value)
    if t == "string" then
      out[#out + 1] = value
    elseif t == "table" then
      if seen[value] then return out end
      seen[value] = true
      if getmetatable(value) then out[#out + 1] = tostring(value) end
      for k, v in pairs(value) do
        texts(k, out, seen)
        texts(v, out, seen)
      end
    elseif value ~= nil then
      out[#out + 1] = tostring(value)
    end
    return out
  end

  local function assert_clean(what, value, allowed)
    for _, text in ipairs(texts(value)) do
      for _, secret in ipairs(SECRETS) do
        if secret ~= allowed then
          assert.is_nil(text:find(secret, 1, true), ("%s reveals %s: %s"):format(what, secret, text:sub(1, 200)))
        end
      end
    end
  end

  it("appear in no error, tostring, result, operation or log line", function()
    local seen = {}
    local function keep(what, ...)
      seen[#seen + 1] = { what, table.pack(...) }
      return ...
    end
    local c = geoservices.client{ url = emu.url, token = "admin-token", retry = { base_delay = 0.01 } }
    keep("client", c, tostring(c))
    -- errors of every kind
    emu:fault{ route = "getServicesById", kind = "status", status = 500, body = "<h1>boom</h1>" }
    keep("http error", c:get_services_by_id{ PARCELS_ID })
    emu:fault{ route = "snapshots/list", kind = "error", code = 498 }
    keep("auth error", c:list_snapshots("nb-street-trees"))
    emu:fault{ route = "root", kind = "invalid_json" }
    keep("protocol error", c:configure_status())
    keep("network error", geoservices.client{ url = "http://127.0.0.1:1/server", token = "admin-token",
                                              retry = false }:get_services_by_id{ PARCELS_ID })
    local bad = params()
    bad.password = "short"
    keep("invalid configure", c:configure(bad))
    bad = params()
    bad.cloudConfig[1].credential.secret.accessKey = nil
    keep("invalid cloud config", c:configure(bad))
    keep("dry run", c:configure(params(), { dry_run = true }))
    keep("dry run text", tostring(c:configure(params(), { dry_run = true })))
    emu:fault{ route = "configure", kind = "status", status = 503 }
    keep("refused configure", c:configure(params()))
    emu:reset()
    emu:fault{ route = "configure", kind = "reset" }
    local root, op = c:configure(params(), { wait = false })
    keep("re-attached configure", root, op, tostring(op))
    keep("ready", op:wait{ poll_interval = 0.01, timeout = helper.TEST_TIMEOUT })
    keep("second configure", c:configure(params()))
    -- synchronizeReplica: result, operation, errors
    local e = geoservices.edits()
    e:add(0, { attributes = { APN = "secret-scan" } })
    local result = c:synchronize_replica("Parcels", { replicaID = CREW1, replicaServerGen = 1, edits = e })
    keep("sync result", result, tostring(result))
    local sync_op = c:synchronize_replica("Parcels", { replicaID = CREW1, replicaServerGen = 1, async = true },
      { wait = false })
    keep("sync operation", sync_op, tostring(sync_op), sync_op:to_json())
    keep("sync operation result", sync_op:wait{ poll_interval = 0.02 })
    emu:fault{ route = "synchronizeReplica", kind = "error", code = 403 }
    keep("sync error", c:synchronize_replica("Parcels", { replicaID = CREW1, replicaServerGen = 1 }))
    -- a token provider's token is not kept where it can be printed either
    local pc = geoservices.client{ url = emu.url, token = function() return "admin-token" end }
    assert(pc:get_services_by_id{ PARCELS_ID })
    keep("provider client", pc, tostring(pc))

    for _, entry in ipairs(seen) do
      for i = 1, entry[2].n do assert_clean(entry[1], entry[2][i]) end
    end
    -- the emulator's request log (method, path and query of every request)
    local log = helper.read_all(log_path)
    assert.matches("POST /server/admin/services/getServicesById", log, 1, true)
    assert_clean("the emulator's request log", log)
  end)

  it("tokens travel only in POST bodies, never in a URL", function()
    local c = geoservices.client{ url = emu.url, token = "admin-token" }
    local echo = assert(c:post(emu.root .. "/_emulator/echo", { a = "b" }))
    assert.equal("POST", echo.method)
    assert.equal("application/x-www-form-urlencoded", echo.content_type)
    assert.equal("admin-token", echo.fields.token.head)
    -- a result file download (GET) carries no token at all
    local r = assert(c:synchronize_replica("Parcels", { replicaID = CREW1, replicaServerGen = 1,
                                                        transportType = "url" }))
    assert.is_not_nil(r.result_url)
    assert.is_nil(r.result_url:find("token", 1, true))
    for line in helper.read_all(log_path):gmatch("[^\n]+") do
      if line:match("^GET ") then assert.is_nil(line:find("token", 1, true), line) end
    end
  end)
end)

describe("limits", function()
  local emu
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function() emu:reset() end)

  it("a response larger than max_response_bytes is a protocol error", function()
    local c = geoservices.client{ url = emu.url, token = "admin-token", max_response_bytes = 512 }
    local result, err = c:get_services_by_id{ PARCELS_ID }
    assert.is_nil(result)
    assert.equal("protocol", err.kind)
    assert.equal("too_large", err.code)
    assert.equal(1, emu:count("getServicesById")) -- not retried: it would not fit the next time either
  end)

  it("a result file larger than max_response_bytes is refused from its first chunk", function()
    local c = geoservices.client{ url = emu.url, token = "alice-token", max_response_bytes = 600, download_chunk = 64 }
    local _, err = c:synchronize_replica("Parcels", { replicaID = CREW1, syncDirection = "snapshot",
                                                      transportType = "url" })
    assert.equal("protocol", err.kind)
    assert.equal("too_large", err.code)
    assert.equal(1, emu:count("results"))
  end)

  it("JSON nested deeper than the limit is a protocol error, not a crash", function()
    local deep = ("["):rep(100000) .. ("]"):rep(100000)
    emu:fault{ route = "getServicesById", kind = "status", status = 200, body = deep,
               headers = { ["Content-Type"] = "application/json" } }
    local result, err = geoservices.client{ url = emu.url, token = "admin-token" }:get_services_by_id{ PARCELS_ID }
    assert.is_nil(result)
    assert.equal("protocol", err.kind)
    assert.matches("depth", err.message)
  end)

  it("max_json_depth is configurable", function()
    local c = geoservices.client{ url = emu.url, token = "admin-token", max_json_depth = 3 }
    local result, err = c:get_services_by_id{ PARCELS_ID }
    assert.is_nil(result)
    assert.equal("protocol", err.kind)
    assert.matches("depth", err.message)
    assert(geoservices.client{ url = emu.url, token = "admin-token", max_json_depth = 64 }
      :get_services_by_id{ PARCELS_ID })
  end)
end)

describe("the emulator", function()
  local emu, driver
  setup(function()
    emu = helper.start_emulator()
    driver = core.driver()
  end)
  teardown(function()
    emu:stop()
    driver:close()
  end)
  before_each(function() emu:reset() end)

  local function get(path)
    return assert(transport.perform(driver, { url = emu.root .. path, timeout_ms = 5000 }))
  end

  it("rejects path traversal in the result-file route", function()
    local c = geoservices.client{ url = emu.url, token = "alice-token" }
    local r = assert(c:synchronize_replica("Parcels", { replicaID = CREW1, replicaServerGen = 1,
                                                        transportType = "url" }))
    local name = r.result_url:match("replicafiles/(.+)$")
    assert.equal(200, get("/server/Parcels/FeatureServer/replicafiles/" .. name).status)
    local attempts = {
      "/server/Parcels/FeatureServer/replicafiles/..%2f..%2f..%2f..%2fetc%2fpasswd",
      "/server/Parcels/FeatureServer/replicafiles/%2e%2e%2f%2e%2e%2fetc%2fpasswd.json",
      "/server/Parcels/FeatureServer/replicafiles/..%2F" .. name,
      "/server/Parcels/FeatureServer/replicafiles/%2Fetc%2Fpasswd",
      "/server/Parcels/FeatureServer/replicafiles/..%5C..%5Cetc%5Cpasswd.json",
      "/server/..%2f..%2f..%2fetc/FeatureServer/replicafiles/passwd.json",
      "/server/Viewer/FeatureServer/replicafiles/" .. name, -- another service's file
      "/server/Parcels/FeatureServer/replicafiles/" .. name .. "%00.txt",
      "/server/Parcels/FeatureServer/replicafiles/world.json",
    }
    for _, path in ipairs(attempts) do
      local response = get(path)
      assert.equal(404, response.status, path)
      assert.is_nil(response.body:find("root:", 1, true), path)
      assert.is_nil(response.body:find("featureServices", 1, true), path)
    end
  end)

  -- Section 5, rule by rule: {what, call, expected error code or nil for success}.
  it("enforces every authorization rule of section 5", function()
    local function client(token) return geoservices.client{ url = emu.url, token = token, retry = false } end
    local function snapshots(token)
      local list, err = client(token):list_snapshots("nb-street-trees")
      return list and list.total, err
    end
    local cases = {
      { "getServicesById without a token", function() return client():get_services_by_id{ PARCELS_ID } end, 499 },
      { "getServicesById with an expired token",
        function() return client("expired-token"):get_services_by_id{ PARCELS_ID } end, 498 },
      { "getServicesById with an unknown token",
        function() return client("forged-token"):get_services_by_id{ PARCELS_ID } end, 498 },
      { "getServicesById as a non-administrator",
        function() return client("alice-token"):get_services_by_id{ PARCELS_ID } end, 403 },
      { "getServicesById as the administrator",
        function() return client("admin-token"):get_services_by_id{ PARCELS_ID } end, nil },
      { "snapshots/list without a token", function() return snapshots(nil) end, 499 },
      { "snapshots/list with an expired token", function() return snapshots("expired-token") end, 498 },
      { "snapshots/list without the notebook privilege", function() return snapshots("viewer-token") end, 403 },
      { "snapshots/list by the owner sees all three", function() return snapshots("alice-token") end, nil, 3 },
      { "snapshots/list by another user sees the public one", function() return snapshots("bob-token") end, nil, 1 },
      { "configure by a non-administrator", function()
          return client("alice-token"):configure({ username = "siteadmin", password = "Passw0rd!x",
            email = "a@example.com", fullName = "A", securityQuestionIdx = 1, securityQuestionAns = "x",
            userLicenseTypeId = "creatorUT", licenseFile = LICENSE,
            volumesConfig = geoservices.volumes{ storage_class = "s" } }, { wait = false })
        end, 403 },
      { "synchronizeReplica on a service without the Sync capability", function()
          return client("alice-token"):synchronize_replica("Viewer", { replicaID = VIEWER_REPLICA,
                                                                       replicaServerGen = 1 })
        end, 400 },
      { "synchronizeReplica with an invalid token", function()
          return client("forged-token"):synchronize_replica("Parcels", { replicaID = CREW1, replicaServerGen = 1 })
        end, 498 },
      { "synchronizeReplica with the Sync capability", function()
          return client("alice-token"):synchronize_replica("Parcels", { replicaID = CREW1, replicaServerGen = 1 })
        end, nil },
      { "the root resource with an invalid token", function() return client("forged-token"):configure_status() end,
        498 },
      -- issue 16: a site without an organization has no user yet, so
      -- configure needs no token there; once configured, it needs one again
      { "configure without a token on a site without an organization", function()
          return client():configure({ username = "siteadmin", password = "Passw0rd!x", email = "a@example.com",
            fullName = "A", securityQuestionIdx = 1, securityQuestionAns = "x", userLicenseTypeId = "creatorUT",
            licenseFile = LICENSE, volumesConfig = geoservices.volumes{ storage_class = "s" } }, { wait = false })
        end, nil },
      { "configure without a token once configured", function()
          return client():configure({ username = "siteadmin", password = "Passw0rd!x", email = "a@example.com",
            fullName = "A", securityQuestionIdx = 1, securityQuestionAns = "x", userLicenseTypeId = "creatorUT",
            licenseFile = LICENSE, volumesConfig = geoservices.volumes{ storage_class = "s" } }, { wait = false })
        end, 499 },
      { "the root resource without a token once configured", function() return client():configure_status() end,
        499 },
    }
    for _, case in ipairs(cases) do
      local result, err = case[2]()
      if case[3] then
        assert.is_nil(result, case[1])
        assert.equal(case[3], err.code, case[1] .. ": " .. tostring(err))
        if case[3] ~= 400 then assert.equal("auth", err.kind, case[1]) end
      else
        assert.is_not_nil(result, case[1] .. ": " .. tostring(err))
        if case[4] then assert.equal(case[4], result, case[1]) end
      end
    end
    -- and only the configure without a token took effect, on a site without an organization
    assert.equal("in_progress", json.decode(json.encode(assert(
      geoservices.client{ url = emu.url, token = "admin-token" }:configure_status()).status)).state)
  end)
end)
