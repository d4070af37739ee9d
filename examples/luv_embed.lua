-- A host event loop (luv, libuv's Lua binding: Debian's lua-luv) drives
-- lua-geoservices without ever blocking inside it: ten synchronizations run
-- as tasks of a geoservices scheduler while a 10 ms luv timer keeps ticking.
--
--   lua5.4 examples/luv_embed.lua URL [REPLICA_ID ...]
--
-- URL is the server (or the emulator: `make emulator`). Without replica IDs
-- it synchronizes the example world's replicas. It prints each result, then
-- "max gap between 10 ms ticks: N ms" — the longest the host loop was kept
-- from running its own timer while the syncs were in flight.
--
-- The pattern: the scheduler tells the host which sockets to watch
-- (sched:fds()) and when to call back (sched:timeout()); the host calls
-- sched:action(fd, events) when a socket is ready and sched:action_timeout()
-- when the time came. Neither ever blocks.
local uv = require "luv"
local geoservices = require "geoservices"

local url = arg[1] or error("usage: lua5.4 examples/luv_embed.lua URL [REPLICA_ID ...]")
local replicas = { table.unpack(arg, 2) }
if #replicas == 0 then
  replicas = { "{5E1A0C2B-1111-4A5B-9C8D-000000000001}", "{5E1A0C2B-2222-4A5B-9C8D-000000000002}" }
end

local client = geoservices.client{ url = url, token = os.getenv("GEOSERVICES_TOKEN") or "alice-token" }
local sched = geoservices.scheduler()

-- The work: one task per replica, as many as given (the test passes ten).
local tasks = {}
for i, id in ipairs(replicas) do
  tasks[i] = sched:spawn(function()
    return client:synchronize_replica("Parcels", { replicaID = id, replicaServerGen = 1, async = true },
                                      { poll_interval = 0.02 })
  end)
end

-- The host's own work: a 10 ms ticker that measures how late it runs.
local ticker = uv.new_timer()
local last_tick = uv.hrtime()
local max_gap_ms = 0
ticker:start(10, 10, function()
  local t = uv.hrtime()
  max_gap_ms = math.max(max_gap_ms, (t - last_tick) / 1e6)
  last_tick = t
end)

-- The glue between luv and the scheduler.
local watchers = {}        -- fd -> { poll = uv_poll, id = registration id, events = "r"|"w"|"rw" }
local wake = uv.new_timer() -- for sched:timeout()
local pump

local function on_ready(fd)
  return function(err, events)
    if err then events = "rwe" end
    sched:action(fd, events or "r")
    pump()
  end
end

local function finish()
  for fd, w in pairs(watchers) do
    w.poll:stop()
    w.poll:close()
    watchers[fd] = nil
  end
  wake:stop()
  wake:close()
  ticker:stop()
  ticker:close()
end

-- After anything happened: watch exactly the sockets the scheduler wants,
-- and re-arm the timer for the next time it needs to run.
function pump()
  if sched:done() then return finish() end
  local wanted = {}
  for _, f in ipairs(sched:fds()) do wanted[f.fd] = f end
  for fd, w in pairs(watchers) do
    local f = wanted[fd]
    if not f or f.id ~= w.id then -- gone, or the number now names another socket
      w.poll:stop()
      w.poll:close()
      watchers[fd] = nil
    end
  end
  for fd, f in pairs(wanted) do
    local w = watchers[fd]
    if not w then
      w = { poll = uv.new_socket_poll(fd), id = f.id }
      watchers[fd] = w
    end
    if w.events ~= f.events then
      w.events = f.events
      w.poll:start(f.events, on_ready(fd))
    end
  end
  local ms = sched:timeout()
  wake:stop()
  if ms then
    wake:start(ms, 0, function()
      sched:action_timeout()
      pump()
    end)
  end
end

local started = uv.hrtime()
pump()
uv.run()

local failed = 0
for i, task in ipairs(tasks) do
  local result, err = task:join() -- finished: returns at once
  if result then
    print(("%2d  %s"):format(i, tostring(result)))
  else
    failed = failed + 1
    print(("%2d  failed: %s"):format(i, tostring(err)))
  end
end
print(("%d synchronizations in %.0f ms, %d failed"):format(#tasks, (uv.hrtime() - started) / 1e6, failed))
print(("max gap between 10 ms ticks: %.1f ms"):format(max_gap_ms))
client:close()
os.exit(failed == 0 and 0 or 1)
