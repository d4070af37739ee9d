-- The C core's driver and request objects: the step API, results, errors and
-- the userdata lifecycle (created closed, idempotent close, use after close).
local core = require "geoservices.core"
local helper = require "spec.helper"

local FIXTURES = helper.FIXTURES

local function run(driver, req, timeout)
  driver:add(req)
  helper.wait_for("request to finish", function()
    driver:step(50)
    return req:state() == "done"
  end, timeout)
  return req:result()
end

describe("geoservices.core", function()
  it("names its version and libcurl's", function()
    assert.matches("^%d+%.%d+%.%d+$", core.VERSION)
    assert.is_string(core.curl_version().version)
    assert.is_true(core.curl_version().gzip)
  end)

  it("can be loaded again in the same state", function()
    package.loaded["geoservices.core"] = nil
    local again = require "geoservices.core"
    package.loaded["geoservices.core"] = core
    local drv = again.driver()
    local req = again.request{ url = FIXTURES .. "/ok/admin/notebooks/snapshots/list" }
    local res = assert(run(drv, req))
    assert.matches("snapshot_1", res.body)
    drv:close()
  end)
end)

describe("driver and request", function()
  local driver
  before_each(function() driver = core.driver() end)
  after_each(function() driver:close() end)

  it("serves file:// through the same multi/step path", function()
    local req = core.request{ url = FIXTURES .. "/ok/admin/services/getServicesById" }
    assert.equal("ready", req:state())
    local res = assert(run(driver, req))
    assert.equal("done", req:state())
    assert.matches('"serviceName": "Parcels"', res.body)
    req:close()
  end)

  it("returns finished requests from step and reports the running count", function()
    local a = core.request{ url = FIXTURES .. "/ok/admin/services/getServicesById" }
    local b = core.request{ url = FIXTURES .. "/ok/admin/notebooks/snapshots/list" }
    driver:add(a)
    driver:add(b)
    assert.equal(2, driver:count())
    local seen = {}
    helper.wait_for("both requests", function()
      local _, finished = driver:step(50)
      for _, r in ipairs(finished) do seen[r] = true end
      return seen[a] and seen[b]
    end)
    assert.equal(0, driver:count())
  end)

  it("reports a transfer failure as nil, message, code", function()
    local res, msg, code = run(driver, core.request{ url = FIXTURES .. "/no/such/file" })
    assert.is_nil(res)
    assert.equal("read", code)
    assert.matches("no/such/file", msg)
  end)

  it("reports a refused connection with a stable code", function()
    local res, msg, code = run(driver, core.request{ url = "http://127.0.0.1:1/x" })
    assert.is_nil(res)
    assert.equal("couldnt_connect", code)
    assert.is_string(msg)
  end)

  it("has no timer without requests, and step(0) never blocks", function()
    assert.is_nil(driver:timeout())
    local t0 = core.monotonic()
    local running, finished = driver:step(0)
    assert.equal(0, running)
    assert.same({}, finished)
    assert.is_true(core.monotonic() - t0 < 0.05)
  end)

  it("raises on misuse", function()
    assert.has_error(function() core.request{} end, "request option 'url' is required")
    assert.has_error(function() core.request{ url = "http://x", method = "PUT" } end,
      "request option 'method': expected GET or POST, got 'PUT'")
    assert.has_error(function() core.request{ url = "http://x", form = {}, body = "" } end)
    local req = core.request{ url = FIXTURES .. "/ok/admin/services/getServicesById" }
    assert.has_error(function() req:result() end, "request: result() before the request finished")
  end)

  it("is safe to close twice and raises when used after close", function()
    local req = core.request{ url = FIXTURES .. "/ok/admin/services/getServicesById" }
    req:close()
    req:close()
    assert.equal("closed", req:state())
    assert.has_error(function() req:result() end, "attempt to use a closed request")
    assert.has_error(function() driver:add(req) end, "attempt to use a closed request")
    assert.matches("^geoservices%.Request %(0x%x+, closed%)$", tostring(req))
    local d = core.driver()
    d:close()
    d:close()
    assert.has_error(function() d:step(0) end, "attempt to use a closed driver")
    assert.matches("^geoservices%.Driver %(0x%x+, closed%)$", tostring(d))
  end)

  it("closes a <close> variable when its scope ends with an error", function()
    local captured
    local ok = pcall(function()
      local req <close> = core.request{ url = FIXTURES .. "/ok/admin/services/getServicesById" }
      captured = req
      error("boom")
    end)
    assert.is_false(ok)
    assert.equal("closed", captured:state())
  end)

  describe("with requests in flight", function()
    local emu
    setup(function() emu = helper.start_emulator() end)
    teardown(function() emu:stop() end)
    before_each(function()
      emu:reset()
      emu:fault{ route = "getServicesById", kind = "delay", delay_ms = 3000 }
    end)

    local function slow_request()
      return core.request{ url = emu.url .. "/admin/services/getServicesById",
                           form = { { "f", "json" } }, timeout_ms = 10000 }
    end

    local function start(req)
      driver:add(req)
      helper.wait_for("the emulator to receive it", function()
        driver:step(20)
        return emu:count("getServicesById") > 0
      end)
    end

    it("closes a running request: it leaves the multi handle", function()
      local req = slow_request()
      start(req)
      assert.equal("running", req:state())
      req:close()
      assert.equal(0, driver:count())
      req:close()
    end)

    it("cancels with driver:remove and can send the request again", function()
      local req = slow_request()
      start(req)
      assert.is_true(driver:remove(req))
      assert.is_false(driver:remove(req))
      assert.equal("ready", req:state())
      assert.equal(0, driver:count())
      emu:reset()
      local res = assert(run(driver, req))
      assert.equal(200, res.status)
      req:close()
    end)

    it("survives a collectgarbage with requests and their driver dropped", function()
      local d = core.driver()
      local req = slow_request()
      d:add(req)
      d:step(20)
      d, req = nil, nil -- luacheck: ignore
      collectgarbage()
      collectgarbage()
      -- the anchored request was detached by the driver's finaliser
      local fresh = core.driver()
      local r2 = core.request{ url = FIXTURES .. "/ok/admin/services/getServicesById" }
      assert.truthy(run(fresh, r2))
      fresh:close()
    end)

    it("closes the driver with a request attached; the request is usable after", function()
      local d = core.driver()
      local req = slow_request()
      d:add(req)
      d:step(20)
      d:close()
      assert.equal("ready", req:state())
      req:close()
    end)

    it("gives up at the per-request deadline", function()
      local req = core.request{ url = emu.url .. "/admin/services/getServicesById",
                                form = { { "f", "json" } }, timeout_ms = 300 }
      local t0 = core.monotonic()
      local res, _, code = run(driver, req)
      assert.is_nil(res)
      assert.equal("timeout", code)
      assert.is_true(core.monotonic() - t0 < 2.5)
    end)

    it("reuses one connection for sequential requests", function()
      emu:reset()
      local connects = 0
      for _ = 1, 5 do
        local res = assert(run(driver, core.request{ url = emu.url .. "/admin/services/getServicesById",
                                                    form = { { "f", "json" } } }))
        connects = connects + res.connects
      end
      assert.equal(1, connects)
    end)

    it("sends a User-Agent naming the library and offers gzip", function()
      local res = assert(run(driver, core.request{ url = emu.root .. "/_emulator/echo", form = { { "a", "b" } } }))
      local got = require("geoservices.json").decode(res.body)
      assert.matches("^lua%-geoservices/" .. core.VERSION:gsub("%.", "%%.") .. " libcurl/", got.headers["user-agent"])
      assert.matches("gzip", got.headers["accept-encoding"])
    end)
  end)
end)
