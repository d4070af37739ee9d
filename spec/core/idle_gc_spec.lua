-- The collector's step taken while a request is in flight (driver:perform,
-- core.drive): it may run finalizers, Lua code that may use the driver that
-- waits, or close it. A finalizer tells that it runs at that step by the C
-- function below it (perform or core.drive) and `d:count() > 0`: the
-- request it interrupts is still attached (an answer is decoded after its
-- request left the driver). Elsewhere the finalizers do nothing.
local helper = require "spec.helper"

-- Each case in a process of its own, whose heap is small (see with_finalizers).
local SCRIPT = [[
local core = require "geoservices.core"
local geoservices = require "geoservices"
local transport = require "geoservices.net.transport"
local case, server = ...
local ID = "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c"
local URL = server .. "/admin/services/getServicesById"

local function spec()
  return { url = URL, method = "POST", body = "f=json&serviceIDs=" .. ID .. "&token=admin-token", json = true,
           timeout_ms = 10000 }
end

local function answer(resp)
  return resp and resp.json and resp.json.services and resp.json.services[1].id or false
end

-- Whether fn (a C function) is on the stack below the caller.
local function on_stack(fn)
  for level = 3, 1000 do
    local info = debug.getinfo(level, "f")
    if not info then return false end
    if info.func == fn then return true end
  end
  return false
end

-- Whether a finalizer runs at the idle step of d's wait (in `waiter`).
local function at_wait(d, waiter)
  return not d:closed() and d:count() > 0 and on_stack(waiter)
end

-- Calls each(arm) until done() (at most 3000 times); arm(), called just
-- before a request, arms a finalizer that calls on_gc. Young collections
-- every 1 % of a small heap (a few KB). arm() first makes a 40 KB string,
-- kept until the next but one arm(): the collection its making triggers
-- frees little, so the idle step, which counts the KB the state grew by
-- since the last one, takes a step that collects at the wait (unless the
-- few allocations between arm() and the wait did).
local function with_finalizers(on_gc, each, done)
  local armed, kept, n = true, {}, 0
  local function arm()
    n = n + 1
    kept[n % 2] = (" "):rep(40000) .. n
    setmetatable({}, { __gc = function() if armed then on_gc() end end })
  end
  collectgarbage()
  collectgarbage("generational", 1, 100)
  for _ = 1, 3000 do
    each(arm)
    if done() then break end
  end
  armed = false
  collectgarbage("incremental", 200, 100, 13)
  collectgarbage()
end

-- A finalizer that performs on d when it runs at the wait in `waiter`, and
-- the checks of what it saw (at least 3 times, each time the right answer).
local function performing(d, waiter)
  local f = { during = 0, inner = {} }
  function f.on_gc()
    if not at_wait(d, waiter) then return end
    f.during = f.during + 1
    f.inner[#f.inner + 1] = answer(transport.perform(d, spec()))
  end
  function f.done() return f.during >= 3 end
  function f.check()
    assert(f.during >= 3, "finalizers at the wait: " .. f.during)
    for _, id in ipairs(f.inner) do assert(id == ID, "the finalizer's answer: " .. tostring(id)) end
  end
  return f
end

-- A finalizer that closes d when it runs at the wait in `waiter`.
local function closing(d, waiter)
  local f = { closed = false }
  function f.on_gc()
    if at_wait(d, waiter) then
      d:close()
      f.closed = true
    end
  end
  function f.done() return f.closed end
  return f
end

local cases = {}

-- a finalizer at the wait performs on the same driver
function cases.perform_inside()
  local d = core.driver()
  local f = performing(d, d.perform)
  with_finalizers(f.on_gc, function(arm)
    arm()
    assert(answer(assert(transport.perform(d, spec()))) == ID, "the waiting request's own answer")
  end, f.done)
  d:close()
  f.check()
end

-- a finalizer at the wait closes the driver
function cases.close_inside()
  local d = core.driver()
  local f = closing(d, d.perform)
  local r, msg, code
  with_finalizers(f.on_gc, function(arm)
    arm()
    r, msg, code = transport.perform(d, spec())
    if not f.closed then assert(answer(assert(r, msg)) == ID) end
  end, f.done)
  assert(f.closed, "no finalizer ran at the wait")
  assert(r == nil and code == "closed", tostring(code))
  assert(msg == "the client was closed while the request was in flight", msg)
end

-- a finalizer at a scheduler's wait performs on the tasks' driver
function cases.perform_inside_run()
  local c = geoservices.client{ url = server, token = "admin-token", retry = false }
  local f = performing(c.driver, core.drive)
  with_finalizers(f.on_gc, function(arm)
    local a, b = geoservices.run(function()
      local ta = geoservices.spawn(function() arm() return c:get_services_by_id{ ID } end)
      local tb = geoservices.spawn(function() arm() return c:get_services_by_id{ ID } end)
      return assert(ta:join()), assert(tb:join())
    end)
    assert(a[1].id == ID and b[1].id == ID, "the tasks' own answers")
  end, f.done)
  c:close()
  f.check()
end

-- a finalizer at a scheduler's wait closes the tasks' driver
function cases.close_inside_run()
  local c = geoservices.client{ url = server, token = "admin-token", retry = false }
  local f = closing(c.driver, core.drive)
  local value, err
  with_finalizers(f.on_gc, function(arm)
    value, err = geoservices.run(function() arm() return c:get_services_by_id{ ID } end)
    if not f.closed then assert(assert(value, err)[1].id == ID) end
  end, f.done)
  assert(f.closed, "no finalizer ran at the wait")
  assert(value == nil and err.kind == "network" and err.code == "closed", tostring(err))
end

-- a collector the user stopped is not stepped
function cases.stopped()
  local d = core.driver()
  for _ = 1, 5 do assert(transport.perform(d, spec())) end
  collectgarbage()
  collectgarbage("stop")
  local last = collectgarbage("count")
  for _ = 1, 200 do
    assert(answer(transport.perform(d, spec())) == ID)
    local now = collectgarbage("count")
    assert(now >= last, "collected while stopped")
    last = now
  end
  assert(collectgarbage("isrunning") == false)
  collectgarbage("restart")
  d:close()
end

cases[case]()
io.write("ok")
]]

describe("the idle collector step", function()
  local emu, dir
  setup(function()
    emu = helper.start_emulator()
    dir = helper.tmp_dir()
    helper.write_file(dir .. "/idle_gc.lua", SCRIPT)
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. helper.shell_quote(dir))
  end)

  local function run(case)
    local cmd = ("LUA_PATH=%s LUA_CPATH=%s lua5.4 %s %s %s 2>&1"):format(
      helper.shell_quote(package.path), helper.shell_quote(package.cpath), helper.shell_quote(dir .. "/idle_gc.lua"),
      case, helper.shell_quote(emu.url))
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    p:close()
    assert.equal("ok", out)
  end

  it("lets a finalizer that runs while a request waits perform on the same driver", function()
    run("perform_inside")
  end)

  it("fails the request with code 'closed' when a finalizer closes its driver while it waits", function()
    run("close_inside")
  end)

  it("lets a finalizer that runs while tasks wait perform on their driver", function()
    run("perform_inside_run")
  end)

  it("fails the tasks' requests with code 'closed' when a finalizer closes their driver", function()
    run("close_inside_run")
  end)

  it("leaves a collector the user stopped alone", function()
    run("stopped")
  end)
end)
