-- The client against the vendor's published payloads (issue 16), served by
-- a scripted server on 127.0.0.1 (spec/support/scripted_server.py): both
-- error dialects with HTTP 200 or not, a refused generateToken, a
-- getServicesById answer without some of the ids, snapshot entries, and
-- configure as a real server reports it: stages that appear as they start,
-- `configured`, the ready document without a state, `failed`, a state the
-- client does not know.
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local A = "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c"
local B = "7a1e3c5b2d4f4e6a9c8b7a6f5e4d3c2b"
local SERVICES = "/server/admin/services/getServicesById"
local ROOT = "/server/admin"
local CONFIGURE = "/server/admin/configure"
local FAST = { poll_interval = 0.01, timeout = helper.TEST_TIMEOUT }

local STAGES = {
  "License validation", "Configuration store", "Relational store", "Cloud Native Storage", "Queue store",
  "In-memory store", "Object store", "Spatiotemporal and index store", "Portal REST API", "Services REST API",
  "Service lifecycle manager", "Usage Statistics", "System and utility services", "Pod replicas",
}

local function service(id, name)
  return { id = id, serviceName = name, folderName = "/", type = "MapServer", configuredState = "STARTED",
           extensions = json.array() }
end

-- The configure response: every stage not_started (Cloud Native Storage not applicable).
local function initial_root()
  local stages = json.array()
  for _, name in ipairs(STAGES) do
    stages[#stages + 1] = { name = name, state = name == "Cloud Native Storage" and "not_applicable" or "not_started",
                            lastUpdated = 1619131300000 }
  end
  return { json = { fullVersion = "11.4.0", currentVersion = 11.4, resources = json.array(),
                    status = { state = "in_progress", message = "Creating the organization. This may take a while.",
                               warnings = json.array(), stages = stages } } }
end

-- A root resource read while configuring: the first `started` stages of
-- the list, the last of them in progress (the list grows as stages start).
local function running_root(started, message)
  local stages = json.array()
  local n = 0
  for _, name in ipairs(STAGES) do
    if name ~= "Cloud Native Storage" and n < started then
      n = n + 1
      stages[#stages + 1] = { name = name == "Usage Statistics" and "Usage statistics" or name,
                              state = n == started and "in_progress" or "completed",
                              lastUpdated = 1619131300000 + n * 1000, startTime = 1619131300000 + n * 900 }
    end
  end
  return { json = { fullVersion = "11.4.0", currentVersion = 11.4, resources = json.array(),
                    status = { state = "in_progress", message = message or "Creating the organization.",
                               warnings = json.array(), stages = stages } } }
end

-- The vendor's published ready document: stages all completed, no state.
local function published_ready()
  local stages = json.array()
  for _, name in ipairs{ "License validation", "Configuration store", "Relational store", "Queue store",
                         "In-memory store", "Object store", "Spatiotemporal and index store", "Portal REST API",
                         "Services REST API", "Service lifecycle manager", "Usage statistics",
                         "System and utility services", "Pod replicas" } do
    stages[#stages + 1] = { lastUpdated = 1619131335931, name = name, state = "completed" }
  end
  return { json = { fullVersion = "10.9.1", resources = json.array{ "orgs", "logs", "system", "datastores",
                    "uploads", "services" }, currentVersion = 10.9, status = { stages = stages } } }
end

local function with_state(doc, state, message)
  doc.json.status.state = state
  doc.json.status.message = message
  return doc
end

local function org_params()
  return {
    username = "siteadmin", password = "Org-Pa55word", email = "siteadmin@example.com", fullName = "Site Admin",
    securityQuestionIdx = 1, securityQuestionAns = "Springfield", userLicenseTypeId = "creatorUT",
    licenseFile = "examples/data/sample.prvc", volumesConfig = geoservices.volumes{ storage_class = "standard" },
  }
end

local function form_of(body)
  local fields = {}
  for pair in body:gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=?(.*)$")
    fields[k] = v:gsub("+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)
  end
  return fields
end

describe("the vendor's published payloads", function()
  local serve, stop_all = helper.scripted_servers()
  after_each(stop_all)

  describe("both error dialects", function()
    it("refreshes the token once on {status: error, messages: [Token Expired.], code: 498} with HTTP 200", function()
      local s = serve{ { method = "POST", path = SERVICES, responses = {
        { json = { status = "error", messages = json.array{ "Token Expired." }, code = 498 } },
        { json = { services = json.array{ service(A, "Basemap") } } },
      } } }
      local calls = {}
      local c = geoservices.client{ url = s.url, token = function(reason)
        calls[#calls + 1] = reason
        return "token-" .. #calls
      end }
      local list = assert(c:get_services_by_id{ A })
      assert.equal(1, #list)
      assert.same({ "initial", "refresh" }, calls)
      local sent = s:requests()
      assert.equal(2, #sent)
      assert.equal("token-1", form_of(sent[1].body).token)
      assert.equal("token-2", form_of(sent[2].body).token)
    end)

    it("ends with the server's messages, kind auth, when the fresh token is refused too", function()
      local s = serve{ { method = "POST", path = SERVICES, responses = {
        { status = 401, json = { status = "error", messages = json.array{ "Token Expired." }, code = 498 } },
      } } }
      local c = geoservices.client{ url = s.url, token = function() return "t" end }
      local res, err = c:get_services_by_id{ A }
      assert.is_nil(res)
      assert.equal("auth", err.kind)
      assert.equal(498, err.code)
      assert.matches("^Token Expired%.", err.message)
      assert.equal(2, #s:requests())
    end)

    it("reads error objects without a code, with HTTP 200 or 500, never as a missing 'services' array", function()
      local s = serve{ { method = "POST", path = SERVICES, responses = {
        { json = { error = { message = "Unable to get services.", details = json.array{ "Invalid service id." } } } },
        { status = 500, json = { status = "error", messages = json.array{ "Internal failure." } } },
        { json = { status = "error", messages = json.array() } },
      } } }
      local c = geoservices.client{ url = s.url, token = "t", retry = false }
      local _, err = c:get_services_by_id{ A }
      assert.equal("server", err.kind)
      assert.is_nil(err.code)
      assert.equal("Unable to get services.: Invalid service id.", err.message)
      _, err = c:get_services_by_id{ A }
      assert.equal("server", err.kind)
      assert.equal(500, err.status)
      assert.equal("Internal failure.", err.message)
      _, err = c:get_services_by_id{ A }
      assert.equal("server reported an error", err.message)
      for _, text in ipairs{ tostring(err) } do assert.falsy(text:find("'services' array", 1, true)) end
    end)

    it("streams a synchronizeReplica answer in either dialect into an error of its kind", function()
      local s = serve{ { method = "POST", path = "/server/Parcels/FeatureServer/synchronizeReplica", responses = {
        { json = { status = "error", messages = json.array{ "Token Expired." }, code = 498 } },
        { status = 500, json = { status = "error", messages = json.array{ "Replica busy." } } },
        { json = { error = { message = "Unable to synchronize replica." } } },
      } } }
      local c = geoservices.client{ url = s.url, token = "t", retry = false }
      local params = { replicaID = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}", replicaServerGen = 1 }
      local _, err = c:synchronize_replica("Parcels", params)
      assert.same({ "auth", 498, "Token Expired." }, { err.kind, err.code, err.message })
      _, err = c:synchronize_replica("Parcels", params)
      assert.same({ "server", 500, "Replica busy." }, { err.kind, err.status, err.message })
      _, err = c:synchronize_replica("Parcels", params)
      assert.same({ "server", "Unable to synchronize replica." }, { err.kind, err.message })
    end)

    it("a refused generateToken is kind auth, reason generate_token, with the server's message", function()
      local s = serve{ { method = "POST", path = "/server/tokens/generateToken", responses = {
        { json = { error = { code = 400, message = "Unable to generate token.",
                             details = json.array{ "Invalid username or password." } } } },
      } } }
      local secret = "Vendor-Pa55-SECRET"
      local c = geoservices.client{ url = s.url, username = "siteadmin", password = secret }
      local res, err = c:get_services_by_id{ A }
      assert.is_nil(res)
      assert.equal("auth", err.kind)
      assert.equal("generate_token", err.reason)
      assert.equal(400, err.code)
      assert.equal(("could not generate a token for user 'siteadmin' at %s/tokens/generateToken: "
        .. "Unable to generate token.: Invalid username or password."):format(s.url), err.message)
      assert.falsy(tostring(err):find(secret, 1, true))
      local ask = form_of(s:requests()[1].body)
      assert.same({ "client", "expiration", "f", "password", "referer", "username" },
        (function() local k = {} for n in pairs(ask) do k[#k + 1] = n end table.sort(k) return k end)())
      assert.equal("json", ask.f)
      assert.equal("referer", ask.client)
      assert.equal("60", ask.expiration)
      assert.equal(1, #s:requests()) -- no operation request without a token
    end)
  end)

  describe("getServicesById and snapshots", function()
    it("names the ids the server did not return", function()
      local s = serve{ { method = "POST", path = SERVICES, responses = {
        { json = { services = json.array{ service(A, "Basemap") } } },
      } } }
      local c = geoservices.client{ url = s.url, token = "t" }
      local list = assert(c:get_services_by_id{ A, B })
      assert.equal(1, #list)
      assert.same({ B }, list.missing)
      assert.equal("1 of 2 services: Basemap.MapServer; not returned: " .. B, tostring(list))
      list = assert(c:get_services_by_id{ A })
      assert.same({}, list.missing)
      assert.equal("1 service: Basemap.MapServer", tostring(list))
    end)

    it("prints every snapshot entry as one readable line", function()
      local s = serve{ { method = "POST", path = "/server/admin/notebooks/snapshots/list", responses = {
        { json = { snapshots = json.array{ { resourceKey = "snapshot_1700000000000.json", created = "1700000000000",
          properties = { name = "Baseline", description = "", runtime = {
            notebookRuntimeName = "ArcGIS Notebook Python 3 Standard", notebookRuntimeVersion = "10.0" } } } },
          total = 1, status = "success" } },
      } } }
      local list = assert(geoservices.client{ url = s.url, token = "t" }:list_snapshots("nb1"))
      assert.equal('snapshot "Baseline" (snapshot_1700000000000.json, created 2023-11-14 22:13 UTC, '
        .. "runtime ArcGIS Notebook Python 3 Standard 10.0)", tostring(list.snapshots[1]))
      assert.equal("1 snapshot of item nb1: Baseline", tostring(list))
    end)
  end)

  describe("configure as the real server reports it", function()
    local function configure_routes(root_responses)
      return {
        { method = "POST", path = CONFIGURE, responses = { initial_root() } },
        { method = "POST", path = ROOT, responses = root_responses },
      }
    end

    it("follows a stage list that grows, and finishes on the published ready document without a state", function()
      local s = serve(configure_routes{
        running_root(0, "Deploying the containers."), running_root(1), running_root(2), running_root(3),
        published_ready(),
      })
      local c = geoservices.client{ url = s.url, token = "t" }
      local seen, messages = {}, {}
      local root, op = assert(c:configure(org_params(), { wait = false }))
      assert.equal("configure operation: organization in_progress: 0 of 13 stages completed", tostring(op))
      local final = assert(op:wait{ poll_interval = 0.01, timeout = helper.TEST_TIMEOUT,
        on_stage = function(stage, old)
          seen[#seen + 1] = stage.name .. ": " .. tostring(old) .. " -> " .. stage.state
        end,
        on_message = function(m) messages[#messages + 1] = m end })
      assert.equal(root.status.state, "in_progress")
      assert.equal("ready", op.state)
      assert.equal("organization ready: 13 of 13 stages completed", tostring(final))
      assert.equal("License validation: not_started -> in_progress", seen[1])
      assert.equal("License validation: in_progress -> completed", seen[2])
      assert.equal("Pod replicas: not_started -> completed", seen[#seen])
      assert.same({ "Deploying the containers.", "Creating the organization." }, messages)
      assert.equal(5, #s:requests() - 1)
    end)

    it("says how many of the stages started so far are done, with the server's message", function()
      local organization = require "geoservices.configure.organization"
      local doc = running_root(3, "Configuring the relational store.").json
      assert.equal('organization in_progress: 2 of the 3 stages started so far completed, Relational store in '
        .. 'progress (server: "Configuring the relational store.")', organization.summary(doc))
      doc = running_root(0, "Deploying the containers.").json
      assert.equal('organization in_progress: no stage started yet (server: "Deploying the containers.")',
        organization.summary(doc))
      assert.equal("ready", organization.state(published_ready().json))
      assert.equal("ready", organization.state({ resources = { "orgs" } }))
      assert.equal("in_progress", organization.state({ status = { stages = running_root(2).json.status.stages } }))
    end)

    it("finishes on state configured", function()
      local s = serve(configure_routes{ running_root(2), with_state(published_ready(), "configured",
        "The organization is configured.") })
      local root = assert(geoservices.client{ url = s.url, token = "t" }:configure(org_params(), FAST))
      assert.equal("configured", root.status.state)
      assert.equal("organization configured: 13 of 13 stages completed", tostring(root))
    end)

    it("ends with kind job on state failed, with the server's message", function()
      local failed = running_root(3)
      failed.json.status.state = "failed"
      failed.json.status.message = "The relational store could not be created."
      local s = serve(configure_routes{ running_root(2), failed })
      local res, err = geoservices.client{ url = s.url, token = "t" }:configure(org_params(), FAST)
      assert.is_nil(res)
      assert.equal("job", err.kind)
      assert.equal("configuration failed: The relational store could not be created.", err.message)
    end)

    it("waits on a state it does not know until the deadline, and says so", function()
      -- polls go on until the deadline: a double slowed by a loaded machine
      -- may answer fewer than the four asked for here before it, and the
      -- deadline is tried again longer
      helper.within_window("more than three requests before the deadline", { 300, 1500, 6000 }, function(ms)
        local s = serve(configure_routes{ with_state(running_root(2), "provisioning", "Provisioning.") })
        local res, err = geoservices.client{ url = s.url, token = "t" }:configure(org_params(),
          { poll_interval = 0.01, timeout = ms / 1000 })
        assert.is_nil(res)
        assert.equal("timeout", err.kind)
        if #s:requests() <= 3 then return false end
        assert.equal("provisioning", err.state)
        assert.matches("the server reported state 'provisioning', which this client does not know, and it was "
          .. "treated as still running", err.message, 1, true)
        return true
      end)
    end)

    it("re-attaches to a configuration whose list is still empty", function()
      local s = serve{ { method = "POST", path = ROOT, responses = { running_root(0, "Deploying."), running_root(1),
                                                                      published_ready() } } }
      local c = geoservices.client{ url = s.url, token = "t" }
      assert.equal('organization in_progress: no stage started yet (server: "Deploying.")',
        tostring(assert(c:configure_status())))
      local final = assert(c:wait_configured(FAST))
      assert.is_nil(final.status.state) -- the published document, as it came
      assert.equal("organization ready: 13 of 13 stages completed", tostring(final))
    end)
  end)
end)
