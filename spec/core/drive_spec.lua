-- core.drive, the scheduler's wait: one call drives a transfer through all
-- its steps (the kick that sends the request, then the answer) and comes
-- back when a task can go on, when its time is up, or at once with 0.
local core = require "geoservices.core"
local geoservices = require "geoservices"
local helper = require "spec.helper"

describe("core.drive", function()
  local serve, stop_all = helper.scripted_servers()
  after_each(stop_all)

  local function request_to(s, path)
    return core.request{ url = s.root .. path, form = { { "f", "json" } }, timeout_ms = 10000 }
  end

  it("comes back once the transfer finished, in one call", function()
    local s = serve{ { method = "POST", path = "/quick", responses = { { json = { ok = true } } } } }
    local d = core.driver()
    local r = request_to(s, "/quick")
    d:add(r)
    -- a drive that sat out its time would take all of it: far more than any stall (it was 5 s,
    -- the bound 4 s)
    local max_s = 10 * helper.WAIT_SCALE
    local t0 = core.monotonic()
    assert.is_true((core.drive({ [d] = true }, max_s * 1000)))
    local took = core.monotonic() - t0
    assert.equal("done", r:state())
    assert.is_true(took < max_s / 2, tostring(took))
    assert.equal(200, assert(r:result()).status)
    r:close()
    d:close()
  end)

  it("never waits with 0, and waits no longer than asked for an answer that is late", function()
    -- an answer that came before the drives below were done (a process stalled past its delay,
    -- or a drive that waits for it: that one does at every length) runs the case again with a
    -- later answer (the request's timeout is 10 s)
    helper.within_window("drives before the late answer", { 1.5, 4, 8 }, function(delay)
      local s = serve{ { method = "POST", path = "/slow", responses = { { json = { ok = true }, delay = delay } } } }
      local d = core.driver()
      local r = request_to(s, "/slow")
      d:add(r)
      -- a drive that waited would wait a poll's second or the answer, each time; a loaded machine
      -- stretches some of these drives, never all (one stretched by 0.9 s failed a single drive)
      local fastest_0, fastest_200 = math.huge, math.huge
      for _ = 1, 5 do
        local t0 = core.monotonic()
        assert.is_true((core.drive({ [d] = true }, 0)))
        fastest_0 = math.min(fastest_0, core.monotonic() - t0)
      end
      for _ = 1, 3 do
        local t0 = core.monotonic()
        assert.is_true((core.drive({ [d] = true }, 200)))
        local waited = core.monotonic() - t0
        if r:state() ~= "running" then
          r:close()
          d:close()
          return false
        end
        assert.is_true(waited >= 0.15, tostring(waited))
        fastest_200 = math.min(fastest_200, waited)
      end
      assert.is_true(fastest_0 < 0.5, tostring(fastest_0))
      assert.is_true(fastest_200 < 1.2, tostring(fastest_200))
      helper.wait_for("the late answer", function()
        core.drive({ [d] = true }, 100)
        return r:state() == "done"
      end)
      r:close()
      d:close()
      return true
    end)
  end)

  it("lets a task's sleep end on time while another task's request is in flight", function()
    -- a sleep that waited for the request would end with its answer, at every length; one that
    -- ended after the answer was due (a stalled machine) runs the case again with a later answer
    -- (the bound was 0.9 s, the answer's delay 1 s)
    helper.within_window("a sleep before the late answer", { 1, 4, 8 }, function(delay)
      local s = serve{ { method = "POST", path = "/slow", responses = { { json = { ok = true }, delay = delay } } } }
      local c = geoservices.client{ url = s.url, token = "t", retry = false }
      local slept_at
      local t0 = core.monotonic()
      geoservices.run(function()
        local call = geoservices.spawn(function() return c:post(s.root .. "/slow", {}) end)
        geoservices.sleep(0.1)
        slept_at = core.monotonic() - t0
        assert(call:join())
      end)
      c:close()
      if slept_at >= delay then return false end -- it ended once the answer was due
      assert.is_true(slept_at >= 0.09, tostring(slept_at))
      return true
    end)
  end)
end)
