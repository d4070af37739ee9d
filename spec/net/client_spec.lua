-- The client object: options, printing, and response classification against
-- file:// fixtures (no server needed).
local geoservices = require "geoservices"
local helper = require "spec.helper"

describe("geoservices.net.client", function()
  it("raises on misuse of its options", function()
    assert.has_error(function() geoservices.client() end, "geoservices.client: expected an options table")
    assert.has_error(function() geoservices.client{} end,
      "geoservices.client: option 'url' must be an http(s):// address")
    assert.has_error(function() geoservices.client{ url = "ftp://x" } end,
      "geoservices.client: option 'url' must be an http(s):// address")
    assert.has_error(function() geoservices.client{ url = "http://x", token = 5 } end,
      "geoservices.client: option 'token' must be a string or a function")
    assert.has_error(function() geoservices.client{ url = "http://x", timeout = "5" } end,
      "geoservices.client: option 'timeout' must be a number, got string")
    assert.has_error(function() geoservices.client{ url = "http://x", tiemout = 5 } end,
      "geoservices.client: unknown option 'tiemout'")
  end)

  it("prints a one-line summary without the token", function()
    local c = geoservices.client{ url = "http://127.0.0.1:8080/server/", token = "s3cr3t-token" }
    local text = tostring(c)
    assert.equal("geoservices.Client <http://127.0.0.1:8080/server> (admin path 'admin', token, timeout 30 s)",
      text)
    assert.not_matches("s3cr3t", text)
    for k, v in pairs(c) do
      assert.not_matches("s3cr3t", tostring(k) .. "=" .. tostring(v))
    end
    local p = geoservices.client{ url = "http://h/s", token = function() return "x" end, admin_path = "/arcgis/admin/" }
    assert.equal("geoservices.Client <http://h/s> (admin path 'arcgis/admin', token provider, timeout 30 s)",
      tostring(p))
    assert.equal("http://h/s/arcgis/admin/services/getServicesById", p:admin_url("services/getServicesById"))
  end)

  describe("against file:// fixtures", function()
    local function client_for(dir)
      return geoservices.client{ url = helper.FIXTURES .. "/" .. dir, token = "t", file_urls = true }
    end

    it("decodes a result with integers kept as integers", function()
      local services = assert(client_for("ok"):get_services_by_id{ "svc-1" })
      assert.equal(1, #services)
      assert.equal("Parcels", services[1].serviceName)
      assert.equal(9007199254740993, services[1].maxUploadFileSize)
      assert.equal("integer", math.type(services[1].maxUploadFileSize))
      assert.equal("integer", math.type(services[1].extensions[1].maxUploadFileSize))
      assert.equal(0, #services[1].datasets)
    end)

    it("reports a JSON error body as a server error with code and details", function()
      local res, err = client_for("error_body"):get_services_by_id("svc-1")
      assert.is_nil(res)
      assert.equal("server", err.kind)
      assert.equal(500, err.code)
      assert.same({ "backend unavailable" }, err.details)
      assert.matches("^server: Unable to complete operation%.: backend unavailable %(code 500%)", tostring(err))
    end)

    it("reports truncated JSON as a protocol error with the offset", function()
      local res, err = client_for("truncated"):get_services_by_id("svc-1")
      assert.is_nil(res)
      assert.equal("protocol", err.kind)
      assert.is_number(err.offset)
      assert.matches("invalid JSON response", err.message)
    end)

    it("reports a missing file as a network error", function()
      local res, err = client_for("nowhere"):get_services_by_id("svc-1")
      assert.is_nil(res)
      assert.equal("network", err.kind)
    end)
  end)
end)
