--- Runs one HTTP request through a driver of the C core and waits for it.
-- Every operation (the four, job polling, result downloads, configure's
-- stage polling) waits here or in transport.sleep, so these two functions
-- decide how waiting happens (see geoservices.loop):
--  * inside a task (geoservices.run / spawn) they yield to the scheduler,
--    which drives every client's driver through one poll, so operations run
--    concurrently;
--  * outside a task they block, driving only this driver.
-- The C core never blocks longer than libcurl's own timeout asks and never
-- calls back into Lua. The current deadline (loop.with_deadline, an
-- operation's opts.timeout) caps every request's timeout and every sleep.
local core = require "geoservices.core"
local loop = require "geoservices.loop"

local transport = {}

--- Sends `spec` (the options of core.request) and waits for the outcome.
-- Returns the response table ({status, headers, body, url, ...}) or
-- nil, message, code for a transfer failure; code "cancelled" when the task
-- was cancelled, "timeout" when the deadline passed. With `on_records` (and
-- spec.records, a core.records()), the body's records are delivered while
-- it arrives, as on_records(kind, layer_id, value, key). `on_progress(received,
-- total)` is called while the body arrives (total is nil when the server did
-- not announce it; inside a task only when records arrive too).
function transport.perform(driver, spec, on_records, on_progress)
  local cancelled = loop.cancelled()
  if cancelled then return nil, cancelled.message, "cancelled" end
  local deadline = loop.deadline()
  if deadline then
    local left_ms = math.floor((deadline - core.monotonic()) * 1000)
    if left_ms <= 0 then return nil, "the deadline passed before the request was sent", "timeout" end
    if spec.timeout_ms == nil or spec.timeout_ms > left_ms then spec.timeout_ms = left_ms end
  end
  -- <close>: the request is closed (and so detached from the multi handle)
  -- on every way out, including an abandoned task closed by its scheduler.
  local req <close> = core.request(spec)
  local ok, err, code = driver:add(req)
  if not ok then return nil, err, code end
  local progress
  if on_records or on_progress then
    progress = function()
      if on_records then req:drain(on_records) end
      if on_progress then
        local received, total = req:progress()
        if received > 0 then on_progress(received, total) end
      end
    end
  end
  local done, msg, wait_code = loop.await(driver, req, progress)
  if not done then
    if not driver:closed() then driver:remove(req) end
    return nil, msg, wait_code
  end
  if req:state() ~= "done" then
    return nil, "the client was closed while the request was in flight", "closed"
  end
  if progress then progress() end
  return req:result()
end

--- Waits `seconds` (a poll interval): yields inside a task, blocks outside.
-- Never waits past the current deadline; the polling loops check it.
function transport.sleep(driver, seconds)
  local _ = driver
  return loop.sleep(seconds)
end

transport.now = core.monotonic

return transport
