-- libcurl drives a multi handle either through curl_multi_perform and its own
-- poll (a blocking request: driver:perform, :wait, :step) or through the
-- socket API (a scheduler: core.drive, driver:action); a transfer that the
-- first way moved on is not in the socket list the second way polls, so it
-- waits for its timeout. Here a blocking request runs on a driver while a
-- task's request on it is already added but its task does not wait on it yet:
-- in a finalizer that runs as the scheduler takes the task's wait (its first
-- allocation there, the set it keeps the request in), in a finalizer inside
-- the task itself (which cannot yield), and between two waits of a stream.
local core = require "geoservices.core"
local geoservices = require "geoservices"
local loop = require "geoservices.base.loop"
local transport = require "geoservices.net.transport"
local helper = require "spec.helper"

-- every request's timeout: far beyond a loaded machine's stalls (3 s was not); a task never
-- woken still fails, its request ending in a timeout
local TIMEOUT = 10 * helper.WAIT_SCALE

describe("a blocking request on a driver a task's request is on", function()
  local serve, stop_all = helper.scripted_servers()
  after_each(stop_all)

  -- Runs on_gc once, in a finalizer, at the start of the scheduler's next
  -- wait on a request (before it registers the wait).
  local function finalizer_at_next_wait(on_gc)
    local original = loop.Scheduler._wait
    local function restore() loop.Scheduler._wait = original end
    loop.Scheduler._wait = function(self, task, kind, ...)
      if kind == "request" then
        restore()
        setmetatable({}, { __gc = on_gc })
        collectgarbage()
      end
      return original(self, task, kind, ...)
    end
    return restore
  end

  -- The task posts to `task_path` (a kept-alive connection) while the
  -- finalizer's blocking request goes to `finalizer_path` (a new one).
  local function task_with_blocking_request_at_wait(task_path, finalizer_path)
    local s = serve{
      { method = "POST", path = "/slow", responses = { { json = { ok = "slow" }, delay = 0.3 } } },
      { method = "POST", path = "/quick", responses = { { json = { ok = "quick" } } } },
    }
    local c = geoservices.client{ url = s.url, token = "t", retry = false }
    local d = c.driver
    -- a kept-alive connection for the task's request: a new one would have
    -- libcurl's connect timer, which brings it back to the socket list
    assert(c:post(s.root .. "/quick", {}))
    local during
    local restore = finalizer_at_next_wait(function()
      during = { outside_task = loop.current() == nil, attached = d:count() }
      local resp, msg = transport.perform(d, { url = s.root .. finalizer_path, method = "POST", json = true,
                                               timeout_ms = TIMEOUT * 1000 })
      during.answer = resp and resp.json and resp.json.ok or msg
    end)
    local t0 = core.monotonic()
    local resp, err = geoservices.run(function()
      return c:post(s.root .. task_path, {}, { timeout = TIMEOUT })
    end)
    local took = core.monotonic() - t0
    restore()
    c:close()
    assert.is_table(during, "the finalizer ran")
    assert.is_true(during.outside_task)
    assert.equal(1, during.attached) -- the task's request, added, not yet waited for
    assert.equal(finalizer_path:sub(2), during.answer)
    assert.is_truthy(resp, tostring(err))
    assert.equal(task_path:sub(2), resp.ok)
    return took
  end

  -- The fastest of up to `runs` runs of a scenario (each returns how long it
  -- took): a loaded machine stalls one run now and then; a task woken late
  -- (by a poll's second, or its request's timeout) is late in every run.
  local function fastest(runs, bound, run)
    local best = math.huge
    for _ = 1, runs do
      best = math.min(best, run())
      if best < bound then break end
    end
    return best
  end

  it("leaves the task's request to finish on time", function()
    local took = fastest(3, 0.8, function() return task_with_blocking_request_at_wait("/slow", "/quick") end)
    assert.is_true(took < 0.8, ("the task's request took %.2f s (answered after 0.3 s)"):format(took))
  end)

  -- A finalizer that runs inside a task's coroutine (a collection its
  -- allocations started) cannot yield to the scheduler: a C call (the
  -- collector) is between them. Its requests and sleeps block instead, as
  -- outside any task.
  it("lets a finalizer inside a task make a blocking request and sleep", function()
    local s = serve{ { method = "POST", path = "/quick", responses = { { json = { ok = "quick" } } } } }
    local c = geoservices.client{ url = s.url, token = "t", retry = false }
    local during
    local resp, err = geoservices.run(function()
      setmetatable({}, { __gc = function()
        during = { outside_task = loop.current() == nil }
        local answer, msg = transport.perform(c.driver, { url = s.root .. "/quick", method = "POST", json = true,
                                                          timeout_ms = TIMEOUT * 1000 })
        during.answer = answer and answer.json and answer.json.ok or msg
        during.slept = loop.sleep(0.01)
      end })
      collectgarbage()
      return c:post(s.root .. "/quick", {}, { timeout = TIMEOUT })
    end)
    c:close()
    assert.is_table(during, "the finalizer ran")
    assert.is_true(during.outside_task)
    assert.equal("quick", during.answer)
    assert.is_true(during.slept)
    assert.is_truthy(resp, tostring(err))
    assert.equal("quick", resp.ok)
  end)

  -- Between two waits of a task's streaming request (its records delivered,
  -- the body not all there yet), a finalizer's blocking request drives the
  -- same driver: the rest of the stream must still wake the task.
  it("leaves a streaming request to finish on time after a blocking request between its waits", function()
    local adds = {}
    for i = 1, 3 do adds[i] = { attributes = { OBJECTID = i }, geometry = { x = i, y = i } } end
    local body = core.json_encode{ replicaServerGen = 7, edits = { { id = 0, features = { adds = adds } } } }
    local took = fastest(3, 0.8, function()
      local s = serve{
        { method = "POST", path = "/stream", responses = { { body = body, pause_at = #body // 2, pause = 0.3 } } },
        { method = "POST", path = "/quick", responses = { { json = { ok = "quick" } } } },
      }
      local c = geoservices.client{ url = s.url, token = "t", retry = false }
      local d = c.driver
      assert(c:post(s.root .. "/quick", {})) -- kept-alive connections
      local during, ids = nil, {}
      local t0 = core.monotonic()
      local resp, err = geoservices.run(function()
        return transport.perform(d, { url = s.root .. "/stream", method = "POST", records = core.records(),
                                      timeout_ms = TIMEOUT * 1000 }, function(kind, _, value)
          if kind ~= "add" then return end
          ids[#ids + 1] = value.attributes.OBJECTID
          if during then return end
          during = {}
          setmetatable({}, { __gc = function()
            local answer, msg = transport.perform(d, { url = s.root .. "/quick", method = "POST", json = true,
                                                       timeout_ms = TIMEOUT * 1000 })
            during.answer = answer and answer.json and answer.json.ok or msg
          end })
          collectgarbage()
        end)
      end)
      local took = core.monotonic() - t0
      c:close()
      assert.is_truthy(resp, tostring(err))
      assert.equal("quick", during.answer)
      assert.same({ 1, 2, 3 }, ids)
      return took
    end)
    assert.is_true(took < 0.8, ("the stream took %.2f s (its pause 0.3 s)"):format(took))
  end)

  it("wakes the task at once when the blocking request finished the task's request too", function()
    local took = fastest(3, 0.8, function() return task_with_blocking_request_at_wait("/quick", "/slow") end)
    assert.is_true(took < 0.8, ("the task took %.2f s (the blocking request 0.3 s)"):format(took))
  end)
end)
