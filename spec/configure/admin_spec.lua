-- getServicesById and notebooks/snapshots/list end to end against the
-- emulator process: results, visibility, authorization and every error kind.
local geoservices = require "geoservices"
local helper = require "spec.helper"

local PARCELS = "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c"
local BASEMAP = "7a1e3c5b2d4f4e6a9c8b7a6f5e4d3c2b"
local ROUTING = "2c4e6a8b0d1f4a3c5e7b9d0f1a3c5e7b"

describe("admin operations against the emulator", function()
  local emu
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function() emu:reset() end)

  local function client(token, opts)
    opts = opts or {}
    opts.url = opts.url or emu.url
    opts.token = token
    return geoservices.client(opts)
  end

  describe("get_services_by_id", function()
    it("returns the definitions in the order asked, with every field of 2.9", function()
      local services = assert(client("admin-token"):get_services_by_id{ BASEMAP, PARCELS, ROUTING })
      assert.equal(3, #services)
      assert.same({ BASEMAP, PARCELS, ROUTING }, { services[1].id, services[2].id, services[3].id })
      local parcels = services[2]
      for _, field in ipairs{ "id", "serviceName", "folderName", "type", "description", "provider", "clusterName",
        "deploymentId", "capabilities", "configuredState", "isDefault", "private", "isolationLevel", "loadBalancing",
        "minInstancesPerNode", "maxInstancesPerNode", "instancesPerContainer", "maxStartupTime", "maxUsageTime",
        "maxWaitTime", "maxIdleTime", "keepAliveInterval", "recycleStartTime", "recycleInterval",
        "maxUploadFileSize", "allowedUploadFileTypes", "datasets", "frameworkProperties", "extensions",
        "properties", "portalProperties" } do
        assert.is_not_nil(parcels[field], field)
      end
      assert.equal("integer", math.type(parcels.maxInstancesPerNode))
      assert.equal("ROUND_ROBIN", parcels.loadBalancing)
      assert.matches("^%d%d:%d%d$", parcels.recycleStartTime)
      local fs = parcels.extensions[1]
      assert.equal("FeatureServer", fs.typeName)
      assert.equal("true", fs.properties.syncEnabled)
      assert.equal("versionPerDownloadedMap", fs.properties.syncBranchVersionCreationRule)
      assert.equal("input", fs.properties.xssPreventionRule)
      assert.is_true(parcels.portalProperties.isHosted)
      assert.equal("Parcels", parcels.portalProperties.portalItems[1].itemTitle)
    end)

    it("accepts a comma-separated string and prints compact summaries", function()
      local services = assert(client("admin-token"):get_services_by_id(PARCELS .. ", " .. BASEMAP))
      assert.equal("2 services: Parcels.FeatureServer, Basemap.MapServer", tostring(services))
      assert.equal("service Hosted/Parcels.FeatureServer [" .. PARCELS .. "] STARTED, extensions FeatureServer",
        tostring(services[1]))
    end)

    it("reports an unknown id with an error naming it", function()
      local res, err = client("admin-token"):get_services_by_id{ PARCELS, "nope" }
      assert.is_nil(res)
      assert.equal("server", err.kind)
      assert.equal(404, err.code)
      assert.matches("nope", err.message)
    end)

    it("refuses bad input before sending anything", function()
      local c = client("admin-token")
      local cases = {
        { {}, "serviceIDs: at least one service id is required" },
        { "", "serviceIDs: at least one service id is required" },
        { "a,,b", "serviceIDs: empty id in the comma-separated list" },
        { { "a", "b,c" }, "serviceIDs: id #2 contains a comma, the list separator" },
        { { "a", "" }, "serviceIDs: id #2 is empty" },
        { { "a", 7 }, "serviceIDs: id #2 must be a string, got number" },
      }
      for _, case in ipairs(cases) do
        local res, err = c:get_services_by_id(case[1])
        assert.is_nil(res)
        assert.equal("invalid", err.kind)
        assert.equal("serviceIDs", err.parameter)
        assert.equal("invalid: " .. case[2], tostring(err))
      end
      assert.has_error(function() c:get_services_by_id(42) end)
      assert.equal(0, emu:requests().total)
    end)

    it("needs the administrator role", function()
      local res, err = client("alice-token"):get_services_by_id{ PARCELS }
      assert.is_nil(res)
      assert.equal("auth", err.kind)
      assert.equal(403, err.code)
    end)
  end)

  describe("list_snapshots", function()
    it("shows the owner every snapshot", function()
      local list = assert(client("alice-token"):list_snapshots("nb-street-trees"))
      assert.equal("success", list.status)
      assert.equal(3, list.total)
      assert.equal("integer", math.type(list.total))
      local names = {}
      for i, s in ipairs(list.snapshots) do names[i] = s.properties.name end
      assert.same({ "Baseline", "Draft model", "Unreviewed" }, names)
      local first = list.snapshots[1]
      assert.equal("snapshot_1700000000000.json", first.resourceKey)
      assert.equal("1700000000000", first.created)
      assert.equal("ArcGIS Notebook Python 3 Standard", first.properties.runtime.notebookRuntimeName)
      assert.is_nil(first.private)
      assert.equal("3 snapshots of item nb-street-trees: Baseline, Draft model, Unreviewed", tostring(list))
    end)

    it("shows another user only the snapshots created with private = false", function()
      local list = assert(client("bob-token"):list_snapshots("nb-street-trees"))
      assert.equal(1, list.total)
      assert.equal("Baseline", list.snapshots[1].properties.name)
    end)

    it("applies the same rule to an administrator who is not the owner", function()
      local list = assert(client("admin-token"):list_snapshots("nb-street-trees"))
      assert.equal(1, list.total)
    end)

    it("lists an item without snapshots as an empty array", function()
      local list = assert(client("bob-token"):list_snapshots("nb-empty"))
      assert.equal(0, list.total)
      assert.same({}, list.snapshots)
      assert.equal("0 snapshots of item nb-empty", tostring(list))
    end)

    it("needs the privilege to create and edit notebooks", function()
      local res, err = client("viewer-token"):list_snapshots("nb-street-trees")
      assert.is_nil(res)
      assert.equal("auth", err.kind)
      assert.equal(403, err.code)
    end)

    it("reports an unknown item", function()
      local res, err = client("alice-token"):list_snapshots("nb-missing")
      assert.is_nil(res)
      assert.equal("server", err.kind)
      assert.equal(404, err.code)
    end)

    it("refuses a missing or empty item id before sending", function()
      local c = client("alice-token")
      local _, err = c:list_snapshots(nil)
      assert.equal("invalid: itemId: the notebook item id is required", tostring(err))
      _, err = c:list_snapshots("  ")
      assert.equal("invalid: itemId: the notebook item id must not be empty", tostring(err))
      assert.equal(0, emu:requests().total)
    end)
  end)

  describe("authentication", function()
    it("reports a missing token as auth error 499", function()
      local _, err = client(nil):list_snapshots("nb-street-trees")
      assert.equal("auth", err.kind)
      assert.equal(499, err.code)
    end)

    it("reports an unknown or expired static token as auth error 498", function()
      for _, token in ipairs{ "expired-token", "made-up" } do
        local _, err = client(token):list_snapshots("nb-street-trees")
        assert.equal("auth", err.kind)
        assert.equal(498, err.code)
      end
      assert.equal(2, emu:count("snapshots/list")) -- a static token is not retried
    end)

    it("asks a token provider again after 498 and retries exactly once", function()
      local calls = {}
      local c = client(function(reason)
        calls[#calls + 1] = reason
        return #calls == 1 and "expired-token" or "alice-token"
      end)
      local list = assert(c:list_snapshots("nb-street-trees"))
      assert.equal(3, list.total)
      assert.same({ "initial", "refresh" }, calls)
      assert.equal(2, emu:count("snapshots/list"))
      assert(c:list_snapshots("nb-street-trees")) -- the fresh token is kept
      assert.equal(2, #calls)
    end)

    it("does not loop when the refreshed token is rejected too", function()
      local calls = 0
      local c = client(function() calls = calls + 1; return "expired-token" end)
      local _, err = c:list_snapshots("nb-street-trees")
      assert.equal(498, err.code)
      assert.equal(2, calls)
      assert.equal(2, emu:count("snapshots/list"))
    end)

    it("sends the token only in the POST body and never shows it", function()
      local secret = "alice-token"
      local c = client(secret)
      emu:fault{ route = "snapshots/list", kind = "status", status = 500 }
      local _, err = c:list_snapshots("nb-street-trees")
      assert.not_matches(secret, tostring(err))
      for _, v in pairs(err) do assert.not_matches(secret, tostring(v)) end
      assert.not_matches(secret, tostring(c))
    end)
  end)

  describe("error kinds", function()
    it("network: connection refused", function()
      local _, err = client("admin-token", { url = "http://127.0.0.1:1/server" }):get_services_by_id{ PARCELS }
      assert.equal("network", err.kind)
      assert.equal("couldnt_connect", err.code)
      assert.equal("http://127.0.0.1:1/server/admin/services/getServicesById", err.url)
    end)

    it("timeout: the deadline passes before the answer", function()
      emu:fault{ route = "getServicesById", kind = "delay", delay_ms = 2000 }
      local _, err = client("admin-token", { timeout = 0.3 }):get_services_by_id{ PARCELS }
      assert.equal("timeout", err.kind)
    end)

    it("http: status 500 with an HTML body", function()
      emu:fault{ route = "getServicesById", kind = "status", status = 500,
                 body = "<html><body><h1>Internal Server Error</h1><p>proxy failure</p></body></html>" }
      local _, err = client("admin-token"):get_services_by_id{ PARCELS }
      assert.equal("http", err.kind)
      assert.equal(500, err.status)
      assert.equal("HTTP 500: Internal Server Error proxy failure", err.message)
    end)

    it("server: HTTP 200 with an error body", function()
      emu:fault{ route = "getServicesById", kind = "error", code = 500, message = "Unable to get services." }
      local _, err = client("admin-token"):get_services_by_id{ PARCELS }
      assert.equal("server", err.kind)
      assert.equal(500, err.code)
      assert.equal(200, err.status)
    end)

    it("auth: HTTP 401 and 403 statuses", function()
      for _, status in ipairs{ 401, 403 } do
        emu:reset()
        emu:fault{ route = "getServicesById", kind = "status", status = status }
        local _, err = client("admin-token"):get_services_by_id{ PARCELS }
        assert.equal("auth", err.kind)
        assert.equal(status, err.status)
      end
    end)

    it("protocol: truncated JSON and a body that is not JSON", function()
      emu:fault{ route = "getServicesById", kind = "truncate" }
      local _, err = client("admin-token"):get_services_by_id{ PARCELS }
      assert.equal("protocol", err.kind)
      assert.matches("at byte %d+", err.message)
      emu:reset()
      emu:fault{ route = "getServicesById", kind = "invalid_json" }
      _, err = client("admin-token"):get_services_by_id{ PARCELS }
      assert.equal("protocol", err.kind)
      assert.matches("invalid JSON response %(application/json, %d+ bytes%) at byte %d+", err.message)
    end)

    it("network: the connection is reset before any response", function()
      emu:fault{ route = "getServicesById", kind = "reset" }
      local _, err = client("admin-token"):get_services_by_id{ PARCELS }
      assert.equal("network", err.kind)
      assert.equal("empty_reply", err.code)
    end)

    it("network: the connection is reset in the middle of the body", function()
      emu:fault{ route = "getServicesById", kind = "reset_mid_body" }
      local _, err = client("admin-token"):get_services_by_id{ PARCELS }
      assert.equal("network", err.kind)
      assert.equal("partial", err.code)
    end)
  end)
end)
