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
    -- a step that waited would wait its poll's time (a second or more) every time; a loaded
    -- machine stretches some of these steps (one by 0.5 s failed the single step's bound)
    local fastest = math.huge
    for _ = 1, 20 do
      local t0 = core.monotonic()
      local running, finished = driver:step(0)
      fastest = math.min(fastest, core.monotonic() - t0)
      assert.equal(0, running)
      assert.same({}, finished)
    end
    assert.is_true(fastest < 0.1, tostring(fastest))
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
      -- the answer comes far later than any stall of a loaded machine (3 s did not); a
      -- timeout that came late would every time, a stall stretches one of three requests
      emu:reset()
      emu:fault{ route = "getServicesById", kind = "delay", delay_ms = 10000 * helper.WAIT_SCALE }
      local fastest = math.huge
      for _ = 1, 3 do
        local req = core.request{ url = emu.url .. "/admin/services/getServicesById",
                                  form = { { "f", "json" } }, timeout_ms = 300 }
        local t0 = core.monotonic()
        local res, _, code = run(driver, req)
        fastest = math.min(fastest, core.monotonic() - t0)
        assert.is_nil(res)
        assert.equal("timeout", code)
        req:close()
      end
      assert.is_true(fastest < 2.5, tostring(fastest))
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

    it("wait() drives until the request ends, or returns false after max_ms", function()
      -- held far longer than any stall of a loaded machine (3 s was not): each
      -- wait below ends at its max_ms, never with the answer
      local hold = 10 * helper.WAIT_SCALE
      emu:reset()
      emu:fault{ route = "getServicesById", kind = "delay", delay_ms = hold * 1000 }
      local req = core.request{ url = emu.url .. "/admin/services/getServicesById",
                                form = { { "f", "json" } }, timeout_ms = 2 * hold * 1000 }
      driver:add(req)
      -- three waits: each waits its 150 ms at least; a wait that overstays its
      -- max_ms does so every time, a stalled machine stretches one of them
      local waited = {}
      for i = 1, 3 do
        local t0 = core.monotonic()
        assert.is_false(driver:wait(req, 150))
        waited[i] = core.monotonic() - t0
        assert.is_true(waited[i] >= 0.14, tostring(waited[i]))
        assert.equal("running", req:state())
      end
      table.sort(waited)
      assert.is_true(waited[1] < 1.5, table.concat(waited, " "))
      assert.equal("running", req:state())
      assert.is_false(req:ready())
      local other = core.driver()
      assert.has_error(function() other:wait(req, 10) end)
      other:close()
      emu:reset()
      local quick = core.request{ url = emu.url .. "/admin/services/getServicesById", form = { { "f", "json" } } }
      driver:add(quick)
      while not driver:wait(quick, 100) do end
      assert.equal("done", quick:state())
      assert.is_true(quick:ready())
      assert.equal(200, assert(quick:result()).status)
      req:close()
      quick:close()
    end)

    it("core.drive runs every driver of a table through one poll and names a closed one", function()
      emu:reset()
      local d1, d2 = core.driver(), core.driver()
      local r1 = core.request{ url = emu.url .. "/admin/services/getServicesById", form = { { "f", "json" } } }
      local r2 = core.request{ url = emu.url .. "/admin/notebooks/snapshots/list", form = { { "f", "json" } } }
      d1:add(r1)
      d2:add(r2)
      local waiting = { [d1] = true, [d2] = true }
      helper.wait_for("both requests", function()
        local ok, failures = core.drive(waiting, 50)
        assert.is_true(ok)
        assert.is_nil(failures)
        return r1:state() == "done" and r2:state() == "done"
      end)
      assert.equal(200, assert(r1:result()).status)
      assert.equal(200, assert(r2:result()).status)
      d2:close()
      local ok, failures = core.drive(waiting, 0)
      assert.is_true(ok)
      assert.same({ d2, "the client was closed while the request was in flight", "closed" }, failures)
      assert.has_error(function() core.drive({ [{}] = true }, 0) end, "core.drive: the table's keys must be drivers")
      d1:close()
    end)

    it("core.drive handles more drivers and sockets than it keeps without allocating", function()
      emu:reset()
      local drivers, requests, waiting = {}, {}, {}
      for i = 1, 40 do
        drivers[i] = core.driver()
        requests[i] = core.request{ url = emu.url .. "/admin/services/getServicesById", form = { { "f", "json" } } }
        drivers[i]:add(requests[i])
        waiting[drivers[i]] = true
      end
      helper.wait_for("40 requests on 40 drivers", function()
        assert.is_true((core.drive(waiting, 50)))
        for i = 1, 40 do
          if requests[i]:state() ~= "done" then return false end
        end
        return true
      end)
      for i = 1, 40 do
        assert.equal(200, assert(requests[i]:result()).status)
        requests[i]:close()
        drivers[i]:close()
      end
    end)

    it("reuses easy handles of closed requests without carrying their options over", function()
      emu:reset()
      local echo = emu.root .. "/_emulator/echo"
      local req = core.request{ url = echo, form = { { "a", "b" } }, user_agent = "first/1",
                                headers = { "X-Only-First: yes" } }
      local first = assert(run(driver, req))
      req:close() -- its easy handle goes back to the state's pool, reset
      local got = require("geoservices.base.json").decode(first.body)
      assert.equal("first/1", got.headers["user-agent"])
      assert.equal("yes", got.headers["x-only-first"])
      for _ = 1, 3 do
        req = core.request{ url = echo, form = { { "a", "b" } } }
        local res = assert(run(driver, req))
        req:close()
        got = require("geoservices.base.json").decode(res.body)
        assert.is_nil(got.headers["x-only-first"])
        assert.matches("^lua%-geoservices/", got.headers["user-agent"])
      end
    end)

    it("perform() makes, sends, waits for and closes a request in one call, or hands it over when slow", function()
      emu:reset()
      local url = emu.url .. "/admin/services/getServicesById"
      for _ = 1, 3 do
        local res = assert(driver:perform({ url = url, form = { { "f", "json" } }, json = true }, 5000))
        assert.equal(200, res.status)
        assert.is_table(res.json)
        assert.equal(0, driver:count())
      end
      -- options are checked as core.request checks them, and a refused one leaves nothing behind
      assert.has_error(function() driver:perform({ url = url, timeout_ms = "soon" }, 100) end,
        "request option 'timeout_ms': expected a non-negative integer")
      assert.has_error(function() driver:perform({ method = "POST" }, 100) end, "request option 'url' is required")
      assert.equal(200, assert(driver:perform({ url = url, form = { { "f", "json" } } }, 5000)).status)
      -- a transfer failure comes back as nil, message, code
      local res, msg, code = driver:perform({ url = "http://127.0.0.1:1/" }, 5000)
      assert.is_nil(res)
      assert.is_string(msg)
      assert.equal("couldnt_connect", code)
      -- not finished after max_ms: false and the running request, the caller's to wait for and close.
      -- An answer that came within the perform after all (a process stalled past its delay, or a
      -- perform that waits for the answer: that one does at every length) runs it again with a
      -- later answer. That it gives up at its max_ms, not later, the wait() case above proves:
      -- both wait in one loop (driver.c's wait_request)
      helper.within_window("perform() handing over a slow request", { 600, 3000, 15000 }, function(delay_ms)
        emu:reset()
        emu:fault{ route = "getServicesById", kind = "delay", delay_ms = delay_ms }
        local done, req = driver:perform({ url = url, form = { { "f", "json" } } }, 100)
        if done then return false end
        assert.is_false(done)
        assert.equal("running", req:state())
        -- meanwhile another perform has a request of its own
        emu:reset()
        assert.equal(200, assert(driver:perform({ url = url, form = { { "f", "json" } } }, 5000)).status)
        while not driver:wait(req, 100) do end
        assert.equal(200, assert(req:result()).status)
        req:close()
        assert.equal(0, driver:count())
        return true
      end)
    end)

    it("keeps a finished plain request's handle for the next without its method, body, type or timeout", function()
      emu:reset()
      local echo = emu.root .. "/_emulator/echo"
      local json = require "geoservices.base.json"
      local function echoed(spec)
        local req = core.request(spec)
        local res = assert(run(driver, req))
        req:close() -- a plain request that finished: its handle is kept, not reset
        return json.decode(res.body)
      end
      -- a timeout that an emulator slowed by a loaded machine still meets (400 ms did not
      -- always), shorter than the last answer's delay below
      for _ = 1, 2 do
        local got = echoed{ url = echo, body = "a=b&c=d", content_type = "text/plain", timeout_ms = 1500,
                            connect_timeout_ms = 1500, headers = { "X-Only-First: yes" } }
        assert.equal("POST", got.method)
        assert.equal("text/plain", got.content_type)
        assert.equal(7, got.body_length)
        got = echoed{ url = echo }
        assert.equal("GET", got.method)
        assert.equal(0, got.body_length)
        assert.is_nil(got.headers["x-only-first"])
        assert.not_equal("text/plain", got.content_type)
        got = echoed{ url = echo, form = { { "a", "b" } } }
        assert.equal("POST", got.method)
        assert.equal("application/x-www-form-urlencoded", got.content_type)
        assert.equal("b", got.fields.a.head)
      end
      -- the last request's 1.5 s timeout is not this one's: the answer takes 2.5 s
      echoed{ url = echo, timeout_ms = 1500 }
      emu:fault{ route = "getServicesById", kind = "delay", delay_ms = 2500 }
      local req = core.request{ url = emu.url .. "/admin/services/getServicesById", form = { { "f", "json" } } }
      assert.equal(200, assert(run(driver, req, 10)).status)
      req:close()
    end)

    it("sends a User-Agent naming the library and offers gzip", function()
      local res = assert(run(driver, core.request{ url = emu.root .. "/_emulator/echo", form = { { "a", "b" } } }))
      local got = require("geoservices.base.json").decode(res.body)
      assert.matches("^lua%-geoservices/" .. core.VERSION:gsub("%.", "%%.") .. " libcurl/", got.headers["user-agent"])
      assert.matches("gzip", got.headers["accept-encoding"])
    end)
  end)
end)
