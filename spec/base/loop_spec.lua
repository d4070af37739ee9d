-- The scheduler (geoservices.loop): tasks, join, cancel, deadlines, user
-- coroutines, then every operation concurrently against the emulator.
local geoservices = require "geoservices"
local core = require "geoservices.core"
local loop = require "geoservices.base.loop"
local transport = require "geoservices.net.transport"
local helper = require "spec.helper"
local fleet = require "spec.support.fleet"

local PARCELS = "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c"
local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local CREW2 = "{5E1A0C2B-2222-4A5B-9C8D-000000000002}"

describe("geoservices.loop", function()
  describe("tasks", function()
    it("run returns fn's results and passes its arguments", function()
      local a, b, c = geoservices.run(function(x, y) return x + y, "two", nil end, 1, 2)
      assert.equal(3, a)
      assert.equal("two", b)
      assert.is_nil(c)
    end)

    it("run waits for the tasks it spawned, joined or not", function()
      local finished = {}
      geoservices.run(function()
        for i = 1, 3 do
          geoservices.spawn(function()
            geoservices.sleep(0.01 * i)
            finished[#finished + 1] = i
          end)
        end
      end)
      assert.same({ 1, 2, 3 }, finished)
    end)

    it("wakes sleepers due at the same turn earliest first, whatever delayed the turn", function()
      -- a loaded machine (or a long callback) delays the scheduler's turn: every sleeper is due
      -- then, and the one that asked for the shortest sleep runs first (in hash order before:
      -- 'run waits for the tasks it spawned' failed so, {2, 1, 3} under load)
      local finished = {}
      geoservices.run(function()
        for i = 8, 1, -1 do
          geoservices.spawn(function()
            geoservices.sleep(0.01 * i)
            finished[#finished + 1] = i
          end)
        end
        geoservices.sleep(0.001) -- they all sleep now
        local stalled_until = core.monotonic() + 0.15
        while core.monotonic() < stalled_until do end -- the turn is late: all eight are due at once
      end)
      assert.same({ 1, 2, 3, 4, 5, 6, 7, 8 }, finished)
    end)

    it("interleaves tasks at their waits", function()
      local order = {}
      geoservices.run(function()
        local slow = geoservices.spawn(function()
          order[#order + 1] = "slow starts"
          geoservices.sleep(0.05)
          order[#order + 1] = "slow ends"
          return "slow"
        end)
        local fast = geoservices.spawn(function()
          order[#order + 1] = "fast starts"
          geoservices.sleep(0.001)
          order[#order + 1] = "fast ends"
          return "fast"
        end)
        assert.equal("slow", slow:join())
        assert.equal("fast", fast:join())
      end)
      assert.same({ "slow starts", "fast starts", "fast ends", "slow ends" }, order)
    end)

    it("gather returns every result in order, errors beside them", function()
      local values, errs = geoservices.gather{
        function() geoservices.sleep(0.02) return "a" end,
        function() return nil, "no b" end,
        function() return "c", "extra" end,
        function() error("boom") end,
      }
      assert.equal(4, values.n)
      assert.equal("a", values[1])
      assert.is_nil(values[2])
      assert.equal("no b", errs[2])
      assert.equal("c", values[3])
      assert.is_nil(errs[3])
      assert.equal("task", errs[4].kind)
      assert.truthy(errs[4].message:find("boom", 1, true))
    end)

    it("gather inside a task joins without starting another loop", function()
      local values = geoservices.run(function()
        return geoservices.gather{ function() return 1 end, function() return 2 end }
      end)
      assert.same({ 1, 2, n = 2 }, values)
    end)

    it("an error in one task does not kill the others: join returns nil, err", function()
      local ok_result, bad, bad_err
      geoservices.run(function()
        local good = geoservices.spawn(function() geoservices.sleep(0.02) return "fine" end)
        local failing = geoservices.spawn(function() geoservices.sleep(0.01) error({ custom = true }) end)
        bad, bad_err = failing:join()
        ok_result = good:join()
      end)
      assert.equal("fine", ok_result)
      assert.is_nil(bad)
      assert.equal("task", bad_err.kind)
      assert.same({ custom = true }, bad_err.value)
      assert.truthy(bad_err.traceback)
    end)

    it("an error table raised by a task comes back as it is", function()
      local err = geoservices.errors.new("server", "nope")
      local _, got = geoservices.run(function()
        return geoservices.spawn(function() error(err) end):join()
      end)
      assert.equal(err, got)
    end)

    it("run raises the main function's error and cancels the other tasks", function()
      local other
      assert.has_error(function()
        geoservices.run(function()
          other = geoservices.spawn(function() geoservices.sleep(5) return "never" end)
          geoservices.sleep(0.01)
          error("main failed", 0)
        end)
      end, "main failed")
      assert.equal("done", other:status())
      local v, err = other:join()
      assert.is_nil(v)
      assert.equal("cancelled", err.kind)
    end)

    it("spawn outside a task raises; sleep outside a task blocks", function()
      assert.has_error(function() geoservices.spawn(function() end) end)
      assert.is_true(geoservices.sleep(0.001))
    end)

    it("nested run inside a task runs on the same scheduler", function()
      local outer, inner
      local r = geoservices.run(function()
        outer = loop.current()
        return geoservices.run(function()
          inner = loop.current()
          geoservices.sleep(0.001)
          return "nested"
        end)
      end)
      assert.equal("nested", r)
      assert.equal(outer.sched, inner.sched)
    end)

    it("detects tasks waiting for each other", function()
      assert.has_error(function()
        geoservices.run(function()
          local a, b
          a = geoservices.spawn(function() geoservices.sleep(0.001) return b:join() end)
          b = geoservices.spawn(function() geoservices.sleep(0.001) return a:join() end)
          a:join()
        end)
      end)
    end)

    it("a task cannot join itself", function()
      geoservices.run(function()
        local me = loop.current()
        assert.has_error(function() me:join() end, "a task cannot join itself")
      end)
    end)
  end)

  describe("user coroutines", function()
    it("a plain coroutine that yields its own values inside a task works", function()
      local got = geoservices.run(function()
        local gen = coroutine.wrap(function()
          for i = 1, 3 do
            geoservices.sleep(0.001) -- not a managed coroutine: blocks, never yields our sentinel
            coroutine.yield(i * 10)
          end
        end)
        return { gen(), gen(), gen() }
      end)
      assert.same({ 10, 20, 30 }, got)
    end)

    it("geoservices.wrap: the generator's waits yield to the scheduler, its values to the caller", function()
      local order = {}
      local got = geoservices.run(function()
        geoservices.spawn(function()
          geoservices.sleep(0.005)
          order[#order + 1] = "other task"
        end)
        local gen = geoservices.wrap(function(first)
          coroutine.yield(first)
          geoservices.sleep(0.05) -- the other task runs meanwhile
          order[#order + 1] = "generator"
          coroutine.yield("second")
        end)
        return { gen("first"), gen() }
      end)
      assert.same({ "first", "second" }, got)
      assert.same({ "other task", "generator" }, order)
    end)

    it("a task's own yields pass through run to the coroutine that resumed it", function()
      local outer = coroutine.wrap(function()
        return "result", geoservices.run(function()
          local reply = coroutine.yield("question")
          geoservices.sleep(0.001)
          return reply .. "!"
        end)
      end)
      assert.equal("question", outer())
      local tag, value = outer("answer")
      assert.equal("result", tag)
      assert.equal("answer!", value)
    end)

    it("without a resumer to hand them to, a task's yields just let the others run", function()
      local order = {}
      geoservices.run(function()
        geoservices.spawn(function() order[#order + 1] = "b" end)
        order[#order + 1] = "a1"
        coroutine.yield("ignored")
        order[#order + 1] = "a2"
      end)
      -- run is called from the main thread here, so there is nobody to pass
      -- "ignored" to; passthrough happens only inside a coroutine.
      assert.same({ "a1", "b", "a2" }, order)
    end)
  end)

  describe("cancel", function()
    it("cancels a sleeping task: nil, err with kind cancelled", function()
      local v, err, later
      geoservices.run(function()
        local t = geoservices.spawn(function()
          local ok, sleep_err = geoservices.sleep(10)
          later = { ok, sleep_err and sleep_err.kind }
          geoservices.sleep(10) -- every later wait fails at once
          return "not this"
        end)
        geoservices.sleep(0.01)
        assert.is_true(t:cancel())
        v, err = t:join()
      end)
      assert.is_nil(v)
      assert.equal("cancelled", err.kind)
      assert.same({ nil, "cancelled" }, later)
    end)

    it("a task cancelled before it starts never runs; a finished one cannot be cancelled", function()
      local ran = false
      geoservices.run(function()
        local t = geoservices.spawn(function() ran = true end)
        t:cancel("changed my mind")
        local _, err = t:join()
        assert.equal("changed my mind", err.message)
        local done = geoservices.spawn(function() return 1 end)
        done:join()
        assert.is_false(done:cancel())
      end)
      assert.is_false(ran)
    end)

    it("cancels a task waiting in join", function()
      local v, err = geoservices.run(function()
        local slow = geoservices.spawn(function() geoservices.sleep(0.2) return "slow" end)
        local waiter = geoservices.spawn(function() return slow:join() end)
        geoservices.sleep(0.01)
        waiter:cancel()
        return waiter:join()
      end)
      assert.is_nil(v)
      assert.equal("cancelled", err.kind)
    end)
  end)

  describe("deadlines", function()
    it("with_timeout cuts a sleep short with a timeout error", function()
      local ok, err = geoservices.run(function()
        return geoservices.with_timeout(0.02, geoservices.sleep, 30)
      end)
      assert.is_nil(ok)
      assert.equal("timeout", err.kind)
    end)

    it("the earlier of two nested deadlines wins, and is restored after", function()
      loop.with_timeout(100, function()
        local outer = loop.deadline()
        loop.with_timeout(1000, function() assert.equal(outer, loop.deadline()) end)
        loop.with_timeout(1, function() assert.is_true(loop.deadline() < outer) end)
        assert.equal(outer, loop.deadline())
      end)
      assert.is_nil(loop.deadline())
    end)

    it("a spawned task inherits the deadline in effect", function()
      local inherited = geoservices.run(function()
        return loop.with_timeout(5, function()
          return geoservices.spawn(function() return loop.deadline() end):join()
        end)
      end)
      assert.is_number(inherited)
    end)

    it("a request started after the deadline fails with code timeout", function()
      local response, msg, code = loop.with_deadline(core.monotonic() - 1, transport.perform, core.driver(),
        { url = helper.FIXTURES .. "/services.json" })
      assert.is_nil(response)
      assert.truthy(msg)
      assert.equal("timeout", code)
    end)
  end)

  describe("transport inside tasks", function()
    it("file:// requests run concurrently and each result reaches its task", function()
      local driver = core.driver()
      local files = { "services.json", "snapshots.json", "services.json" }
      local fns = {}
      for i, name in ipairs(files) do
        fns[i] = function()
          local response = assert(transport.perform(driver, { url = helper.FIXTURES .. "/" .. name }))
          return response.body
        end
      end
      local values = geoservices.gather(fns)
      for i, name in ipairs(files) do
        assert.equal(helper.read_all(helper.ROOT .. "/spec/fixtures/" .. name), values[i])
      end
      assert.equal(0, driver:count())
      driver:close()
    end)
  end)
end)

describe("concurrent operations against the emulator", function()
  local emu, data, ids
  setup(function()
    data, ids = fleet.write(8)
    emu = helper.start_emulator{ data = data }
  end)
  teardown(function()
    emu:stop()
    os.remove(data)
  end)
  before_each(function()
    emu:reset()
    emu:control("settings", { job_step_ms = 20 })
  end)

  local function client(token, opts)
    opts = opts or {}
    opts.url, opts.token = emu.url, token or "alice-token"
    return geoservices.client(opts)
  end

  it("runs the four operations in one run, each result delivered to its task", function()
    emu:fault{ route = "*", kind = "delay", delay_ms = 50 }
    emu:control("configure", { stage_seconds = 0.01 })
    local alice, admin = client("alice-token"), client("admin-token")
    local peak = 0
    local values, errs = geoservices.gather{
      function() return admin:get_services_by_id{ PARCELS } end,
      function() return alice:list_snapshots("nb-street-trees") end,
      function() return alice:synchronize_replica("Parcels", { replicaID = CREW1, replicaServerGen = 1 }) end,
      function()
        return alice:synchronize_replica("Parcels", { replicaID = CREW2, replicaServerGen = 1, async = true,
                                                      transportType = "url" }, { poll_interval = 0.01 })
      end,
      function()
        return admin:configure({
          username = "siteadmin", password = "Pa55word-x1", email = "siteadmin@example.com",
          fullName = "Site Administrator", securityQuestionIdx = 3, securityQuestionAns = "blue",
          userLicenseTypeId = "creatorUT", licenseFile = "examples/data/sample.prvc",
          volumesConfig = geoservices.volumes{ storage_class = "standard" },
        }, { poll_interval = 0.01, timeout = helper.TEST_TIMEOUT })
      end,
      function() -- watches how many requests are in flight at once
        for _ = 1, 400 do
          peak = math.max(peak, alice.driver:count() + admin.driver:count())
          if peak >= 4 then break end
          geoservices.sleep(0.005)
        end
      end,
    }
    for i = 1, 5 do assert(values[i], tostring(errs[i])) end
    assert.equal("Parcels", values[1][1].serviceName)
    assert.equal("nb-street-trees", values[2].itemId or values[2].item_id or "nb-street-trees")
    assert.equal(3, #values[2].snapshots)
    assert.equal(CREW1, values[3].replicaID)
    assert.equal("url", values[3].transport) -- a sync without edits asks for a result file
    assert.equal(CREW2, values[4].replicaID)
    assert.equal("url", values[4].transport)
    assert.equal("ready", values[5].status.state)
    assert.is_true(peak >= 4, "never more than " .. peak .. " requests in flight")
    alice:close()
    admin:close()
  end)

  it("a cancelled request leaves no handle in the multi and no connection behind", function()
    local admin = client("admin-token")
    local stat = assert(io.open("/proc/self/stat"))
    local pid = stat:read("n")
    stat:close()
    local function open_fds()
      local p = io.popen("ls /proc/" .. pid .. "/fd")
      local n = 0
      for _ in p:lines() do n = n + 1 end
      p:close()
      return n
    end
    assert(admin:get_services_by_id{ PARCELS }) -- one keep-alive connection, opened before counting
    emu:fault{ route = "getServicesById", kind = "delay", delay_ms = 5000 }
    local before = open_fds()
    for _ = 1, 5 do
      local v, err = geoservices.run(function()
        local task = geoservices.spawn(function() return admin:get_services_by_id{ PARCELS } end)
        while admin.driver:count() == 0 or #admin.driver:fds() == 0 do geoservices.sleep(0.005) end
        task:cancel()
        return task:join()
      end)
      assert.is_nil(v)
      assert.equal("cancelled", err.kind)
      assert.equal(0, admin.driver:count())
      assert.same({}, (admin.driver:fds()))
    end
    assert.is_true(open_fds() <= before, "descriptors before " .. before .. ", after " .. open_fds())
    emu:reset()
    assert(admin:get_services_by_id{ PARCELS }) -- the client still works
    admin:close()
  end)

  it("cancel stops a job's polling loop and leaves the replica state untouched", function()
    emu:control("settings", { job_step_ms = 60000 })
    local alice = client()
    local path = helper.tmp_name()
    os.remove(path)
    local r = assert(geoservices.replica(path, { service = "Parcels", replicaID = CREW2, model = "perReplica",
                                                 replicaServerGen = 1 }))
    local before = helper.read_all(path)
    local v, err, polls = geoservices.run(function()
      local task = geoservices.spawn(function()
        return alice:sync(r, nil, { params = { async = true }, poll_interval = 0.01 })
      end)
      while emu:count("jobs") < 2 do geoservices.sleep(0.01) end
      task:cancel()
      local tv, terr = task:join()
      return tv, terr, emu:count("jobs")
    end)
    assert.is_nil(v)
    assert.equal("cancelled", err.kind)
    helper.sleep(0.1)
    assert.equal(polls, emu:count("jobs")) -- no poll after the cancel
    assert.equal(before, helper.read_all(path))
    assert.equal(0, alice.driver:count())
    os.remove(path)
    alice:close()
  end)

  it("one sync at a time per replica: a second concurrent one is refused", function()
    emu:fault{ route = "synchronizeReplica", kind = "delay", delay_ms = 100 }
    local alice = client()
    local path = helper.tmp_name()
    os.remove(path)
    assert(geoservices.replica(path, { service = "Parcels", replicaID = ids[1], model = "perReplica",
                                       replicaServerGen = 1 }))
    local values, errs = geoservices.gather{
      function() return alice:sync(path) end,
      function() geoservices.sleep(0.01) return alice:sync(path) end,
    }
    assert.truthy(values[1], tostring(errs[1]))
    assert.is_nil(values[2])
    assert.equal("invalid", errs[2].kind)
    os.remove(path)
    alice:close()
  end)

  it("a deadline becomes the timeout of the request in flight", function()
    emu:fault{ route = "getServicesById", kind = "delay", delay_ms = 3000 }
    local admin = client("admin-token")
    local v, err = geoservices.run(function()
      return geoservices.with_timeout(0.2, admin.get_services_by_id, admin, { PARCELS })
    end)
    assert.is_nil(v)
    assert.equal("timeout", err.kind)
    assert.equal(0, admin.driver:count())
    admin:close()
  end)

  it("a sync's opts.timeout is one deadline for all its requests, in a task or not", function()
    emu:fault{ route = "synchronizeReplica", kind = "delay", delay_ms = 3000 }
    local alice = client()
    local function slow_sync()
      return alice:synchronize_replica("Parcels", { replicaID = ids[2], replicaServerGen = 1 }, { timeout = 0.2 })
    end
    local v, err = slow_sync()
    assert.is_nil(v)
    assert.equal("timeout", err.kind)
    v, err = geoservices.run(slow_sync)
    assert.is_nil(v)
    assert.equal("timeout", err.kind)
    assert.is_nil(loop.deadline())
    alice:close()
  end)

  it("failures stay in their task: a refused connection beside successful syncs", function()
    local alice = client()
    local nowhere = geoservices.client{ url = "http://127.0.0.1:1/server", token = "x" }
    local fns = {}
    for i = 1, 4 do
      fns[i] = function() return alice:synchronize_replica("Parcels", { replicaID = ids[i], replicaServerGen = 1 }) end
    end
    fns[5] = function() return nowhere:get_services_by_id{ PARCELS } end
    local values, errs = geoservices.gather(fns)
    for i = 1, 4 do assert.equal(ids[i], values[i] and values[i].replicaID, tostring(errs[i])) end
    assert.is_nil(values[5])
    assert.equal("network", errs[5].kind)
    alice:close()
    nowhere:close()
  end)

  it("respects the per-host connection limit of the client", function()
    emu:fault{ route = "*", kind = "delay", delay_ms = 20 }
    local alice = client("alice-token", { max_host_connections = 2 })
    local fns = {}
    for i = 1, 6 do
      fns[i] = function() return alice:synchronize_replica("Parcels", { replicaID = ids[i], replicaServerGen = 1 }) end
    end
    local peak = 0
    fns[7] = function()
      for _ = 1, 200 do
        peak = math.max(peak, #alice.driver:fds())
        geoservices.sleep(0.002)
      end
    end
    local values, errs = geoservices.gather(fns)
    for i = 1, 6 do assert.equal(ids[i], values[i] and values[i].replicaID, tostring(errs[i])) end
    assert.is_true(peak <= 2, "sockets watched at once: " .. peak)
    alice:close()
  end)
end)
