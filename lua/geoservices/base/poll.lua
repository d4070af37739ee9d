--- The one polling engine of every long-running operation (async
-- synchronization jobs, configure's stages): "poll, then sleep until the
-- next poll", with a growing interval, riding over a few failed polls in a
-- row (a server restarting), and one deadline. Sleeping goes through the
-- caller's sleep (a scheduler timer inside a task), never os.execute.
-- Pure control flow: the caller's `step` does the I/O.
local poll = {}

poll.MAX_FAILURES = 5 -- failed polls in a row (each already retried) before giving up

--- Polls until `step` says the operation ended.
-- @tparam table a
-- @tparam function a.step `step()` -> `"done", value, err` (ended: the call returns value, err) |
--   `"running", value` (not yet) | `"failed", err` (this poll failed)
-- @tparam function a.sleep `sleep(seconds)`
-- @tparam function a.now the clock (seconds)
-- @number a.interval seconds before the first re-poll (positive)
-- @number[opt=1] a.backoff factor applied to the interval after each wait
-- @number[opt] a.max_interval the interval never grows past it
-- @number[opt] a.deadline absolute deadline: no wait goes past it
-- @tparam function a.on_deadline `on_deadline(last_value, elapsed)` -> the error returned when the
--   deadline passes (last_value: the value of the last poll, nil when it failed)
-- @tparam[opt] table a.transient the error kinds worth another poll (others end the call)
-- @int[opt=5] a.max_failures failed polls in a row before giving up
-- @bool[opt] a.sleep_first wait before the first poll (the caller already holds a fresh value)
-- @tparam[opt] function a.check `check(now)` -> nil, or an error that ends the call (a stall)
-- @tparam[opt] function a.cap_pause `cap_pause(pause, now)` -> a shorter pause (to check a stall in time)
-- @return the value of "done", or nil and the error
function poll.run(a)
  local interval = a.interval
  local max_failures = a.max_failures or poll.MAX_FAILURES
  local transient = a.transient or {}
  local failures = 0
  local last
  local started = a.now()
  local skip_wait = not a.sleep_first
  while true do
    if skip_wait then
      skip_wait = false
    else
      local now = a.now()
      local stop = a.check and a.check(now)
      if stop then return nil, stop end
      if a.deadline and now >= a.deadline then return nil, a.on_deadline(last, now - started) end
      local pause = interval
      if a.deadline then pause = math.min(pause, a.deadline - now) end
      if a.cap_pause then pause = a.cap_pause(pause, now) end
      a.sleep(math.max(pause, 0))
      interval = interval * (a.backoff or 1)
      if a.max_interval then interval = math.min(interval, a.max_interval) end
    end
    local outcome, value, err = a.step()
    if outcome == "done" then return value, err end
    if outcome == "running" then
      failures, last = 0, value
    else
      failures, last = failures + 1, nil
      if not transient[value.kind] or failures >= max_failures then return nil, value end
    end
  end
end

return poll
