--- Runs one HTTP request through a driver of the C core and waits for it.
-- Waiting spins `driver:step` with the timeout libcurl asks for; the C core
-- never blocks longer than that and never calls back into Lua.
local core = require "geoservices.core"

local transport = {}

local MAX_WAIT_MS = 100 -- upper bound for one step, so a waiting caller stays responsive

--- Sends `spec` (the options of core.request) and waits for the outcome.
-- Returns the response table ({status, headers, body, url, ...}) or
-- nil, message, code for a transfer failure.
function transport.perform(driver, spec)
  local req <close> = core.request(spec)
  local ok, err, code = driver:add(req)
  if not ok then return nil, err, code end
  while req:state() == "running" do
    local wait = driver:timeout()
    if wait == nil or wait > MAX_WAIT_MS then wait = MAX_WAIT_MS end
    local running, msg, step_code = driver:step(wait)
    if not running then
      driver:remove(req)
      return nil, msg, step_code
    end
  end
  return req:result()
end

--- Waits `seconds` without busy-looping: libcurl's poll with no transfers
-- simply sleeps. Every polling loop (jobs, configure stages) sleeps here, so
-- the scheduler can later turn this one place into a yield.
function transport.sleep(driver, seconds)
  local deadline = core.monotonic() + seconds
  while true do
    local left = deadline - core.monotonic()
    if left <= 0 then return end
    driver:step(math.max(1, math.ceil(left * 1000)))
  end
end

transport.now = core.monotonic

return transport
