-- Host-loop embedding: the driver's socket-level API (fds, timeout, action,
-- action_timeout), core.poll, a scheduler driven from outside, and the luv
-- example (a 10 ms luv timer keeps ticking while ten syncs are in flight).
local geoservices = require "geoservices"
local core = require "geoservices.core"
local helper = require "spec.helper"
local fleet = require "spec.support.fleet"

local PARCELS = "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c"

describe("core.poll", function()
  it("waits on nothing for the time given and returns an empty list", function()
    assert.same({}, core.poll({}, 0))
    assert.same({}, core.poll({}, 1))
  end)

  it("reports a bad descriptor with \"e\" instead of raising", function()
    local events = core.poll({ { fd = 1000000, events = "r" } }, 0)
    assert.equal(1, #events)
    assert.equal(1000000, events[1].fd)
    assert.truthy(events[1].events:find("e", 1, true))
  end)

  it("raises on misuse", function()
    assert.has_error(function() core.poll("x") end)
    assert.has_error(function() core.poll({ { events = "r" } }, 0) end)
    assert.has_error(function() core.poll({ 5 }, 0) end)
  end)
end)

describe("the driver's socket-level API", function()
  local emu
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function() emu:reset() end)

  local function spec_for(route)
    return { url = emu.url .. "/admin/" .. route, method = "POST", form = { f = "json", token = "admin-token",
                                                                              ids = PARCELS } }
  end

  it("runs a request with fds / timeout / action / action_timeout only", function()
    emu:fault{ route = "getServicesById", kind = "delay", delay_ms = 50 }
    local driver = core.driver()
    local req = core.request(spec_for("services/getServicesById"))
    assert.is_true(driver:add(req))
    assert.equal(0, driver:timeout()) -- libcurl wants a first action at once
    local saw_fd, generations, finished = false, {}, nil
    for _ = 1, 10000 do
      local fds, gen = driver:fds()
      generations[gen] = true
      for _, f in ipairs(fds) do
        saw_fd = true
        assert.equal("integer", math.type(f.fd))
        assert.truthy(f.events == "r" or f.events == "w" or f.events == "rw")
        assert.equal("integer", math.type(f.id))
      end
      local events = assert(core.poll(fds, math.min(driver:timeout() or 100, 100)))
      local running, done
      if #events > 0 then
        for _, ev in ipairs(events) do running, done = driver:action(ev.fd, ev.events) end
      else
        running, done = driver:action_timeout()
      end
      assert.is_number(running)
      if done and #done > 0 then
        finished = done
        break
      end
    end
    assert.is_true(saw_fd)
    assert.is_true(next(generations, next(generations)) ~= nil) -- the list changed at least once
    assert.equal(1, #finished)
    assert.equal(req, finished[1])
    assert.equal("done", req:state())
    assert.equal(200, req:result().status)
    assert.equal(0, driver:count())
    req:close()
    driver:close()
  end)

  it("remove() during a transfer unregisters its socket", function()
    emu:fault{ route = "getServicesById", kind = "delay", delay_ms = 2000 }
    local driver = core.driver()
    local req = core.request(spec_for("services/getServicesById"))
    driver:add(req)
    for _ = 1, 200 do
      driver:action_timeout()
      local fds = driver:fds()
      if #fds > 0 and fds[1].events == "r" then break end
      core.poll(fds, 5)
      for _, f in ipairs(fds) do driver:action(f.fd, f.events) end
    end
    assert.equal(1, #driver:fds())
    assert.is_true(driver:remove(req))
    assert.same({}, (driver:fds()))
    assert.equal("ready", req:state())
    req:close()
    driver:close()
  end)

  it("action raises on bad events; closed() tells a closed driver", function()
    local driver = core.driver()
    assert.has_error(function() driver:action(3, "x") end)
    assert.is_false(driver:closed())
    driver:close()
    assert.is_true(driver:closed())
    assert.has_error(function() driver:fds() end, "attempt to use a closed driver")
  end)

  it("a scheduler driven from outside: fds, timeout, action, action_timeout", function()
    emu:fault{ route = "*", kind = "delay", delay_ms = 30 }
    local client = geoservices.client{ url = emu.url, token = "admin-token" }
    local sched = geoservices.scheduler()
    local tasks = {}
    for i = 1, 3 do tasks[i] = sched:spawn(function() return client:get_services_by_id{ PARCELS } end) end
    local turns = 0
    while not sched:done() do
      turns = turns + 1
      assert(turns < 100000, "the scheduler never finished")
      local fds = sched:fds()
      local events = assert(core.poll(fds, math.min(sched:timeout() or 100, 100)))
      for _, ev in ipairs(events) do sched:action(ev.fd, ev.events) end
      if #events == 0 then sched:action_timeout() end
    end
    for i = 1, 3 do
      local services = assert(tasks[i]:join())
      assert.equal("Parcels", services[1].serviceName)
    end
    assert.is_nil(sched:timeout())
    client:close()
  end)

  it("a scheduler driven by step(0) from a host's own loop", function()
    local client = geoservices.client{ url = emu.url, token = "admin-token" }
    local sched = geoservices.scheduler()
    local task = sched:spawn(function() return client:get_services_by_id{ PARCELS } end)
    local turns = 0
    while sched:step(0) do
      turns = turns + 1
      assert(turns < 1000000, "the scheduler never finished")
    end
    assert.equal("Parcels", assert(task:join())[1].serviceName)
    client:close()
  end)

  it("join from outside any task drives the scheduler until the task ends", function()
    local client = geoservices.client{ url = emu.url, token = "admin-token" }
    local sched = geoservices.scheduler()
    local task = sched:spawn(function() return client:get_services_by_id{ PARCELS } end)
    assert.equal("Parcels", assert(task:join())[1].serviceName)
    client:close()
  end)

  it("a client closed while its request is in flight fails that task only", function()
    emu:fault{ route = "getServicesById", kind = "delay", delay_ms = 2000 }
    local doomed = geoservices.client{ url = emu.url, token = "admin-token" }
    local v, err = geoservices.run(function()
      local task = geoservices.spawn(function() return doomed:get_services_by_id{ PARCELS } end)
      while doomed.driver:count() == 0 do geoservices.sleep(0.005) end
      doomed:close()
      return task:join()
    end)
    assert.is_nil(v)
    assert.equal("network", err.kind)
    assert.equal("closed", err.code)
  end)
end)

describe("examples/luv_embed.lua", function()
  it("keeps a 10 ms luv timer ticking (gap under 100 ms) while ten syncs are in flight", function()
    local data, ids = fleet.write(10)
    local emu = helper.start_emulator{ data = data }
    finally(function()
      emu:stop()
      os.remove(data)
    end)
    emu:control("settings", { job_step_ms = 50 })
    emu:fault{ route = "*", kind = "delay", delay_ms = 100 }
    local quoted = {}
    for i, id in ipairs(ids) do quoted[i] = helper.shell_quote(id) end
    local cmd = ("LUA_PATH=%s LUA_CPATH=%s lua5.4 examples/luv_embed.lua %s %s 2>&1"):format(
      helper.shell_quote(package.path), helper.shell_quote(package.cpath), helper.shell_quote(emu.url),
      table.concat(quoted, " "))
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    local ok = p:close()
    assert(ok, out)
    assert.truthy(out:find("10 synchronizations in %d+ ms, 0 failed"), out)
    for _, id in ipairs(ids) do assert.truthy(out:find(id, 1, true), out) end
    local gap = tonumber(out:match("max gap between 10 ms ticks: ([%d.]+) ms"))
    assert(gap, out)
    assert.is_true(gap < 100, "the host loop was blocked for " .. gap .. " ms")
  end)
end)
