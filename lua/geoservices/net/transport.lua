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
local errors = require "geoservices.base.errors"
local loop = require "geoservices.base.loop"

local transport = {}

--- Sends `spec` (the options of core.request) and waits for the outcome.
-- Returns the response table ({status, headers, body, url, ...}) or
-- nil, message, code for a transfer failure; code "cancelled" when the task
-- was cancelled, "timeout" when the deadline passed. With `on_records` (and
-- spec.records, a core.records()), the body's records are delivered while
-- it arrives, as on_records(kind, layer_id, value, key); or, when
-- on_records is a table, taken by `on_records.take(records)` from the
-- extractor itself (a store applying them in C), which returns true, or nil,
-- err to stop the transfer (then nil, err, "records_refused"). `on_progress(received,
-- total)` is called while the body arrives (total is nil when the server did
-- not announce it; inside a task only when records arrive too).
function transport.perform(driver, spec, on_records, on_progress)
  local cancelled, deadline, alone = loop.limits(driver)
  if cancelled then return nil, cancelled.message, "cancelled" end
  if deadline then
    local left_ms = math.floor((deadline - core.monotonic()) * 1000)
    if left_ms <= 0 then return nil, "the deadline passed before the request was sent", "timeout" end
    if spec.timeout_ms == nil or spec.timeout_ms > left_ms then spec.timeout_ms = left_ms end
  end
  local req, added
  if alone and not on_records and not on_progress then
    -- the usual blocking request: made, sent, waited for, its result taken
    -- and closed in one call of the core; back here only when it is still
    -- running after BLOCKING_WAIT_MS (then it is ours to wait for and close)
    local resp, msg, code = driver:perform(spec, loop.BLOCKING_WAIT_MS)
    if resp ~= false then return resp, msg, code end
    req, added = msg, true
  else
    req = core.request(spec)
  end
  -- <close>: the request is closed (and so detached from the multi handle)
  -- on every way out, including an abandoned task closed by its scheduler.
  local _ <close> = req
  if not added then
    -- not alone (a task's request, or tasks' requests on this driver): one
    -- the socket API drives, which a blocking caller must then not drive
    -- alone (driver:socket_driven())
    local ok, err, code = driver:add(req, not alone)
    if not ok then return nil, err, code end
  end
  local progress, refused
  if on_records or on_progress then
    progress = function()
      if refused then return end
      if type(on_records) == "function" then
        req:drain(on_records)
      elseif on_records then
        local taken, err = on_records.take(spec.records)
        if not taken then
          refused = err
          driver:remove(req) -- the transfer stops: the request is no longer running
          return
        end
        req:resume()
      end
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
  if refused then return nil, refused, "records_refused" end
  if req:state() ~= "done" then
    return nil, "the client was closed while the request was in flight", "closed"
  end
  if progress then progress() end
  if refused then return nil, refused, "records_refused" end
  return req:result()
end

--- Waits `seconds` (a poll interval): yields inside a task, blocks outside.
-- Never waits past the current deadline; the polling loops check it.
function transport.sleep(driver, seconds)
  local _ = driver
  return loop.sleep(seconds)
end

--- The options of the C core's request shared by every request of a
-- connection: address, method, timeout (from the deadline), TLS settings,
-- size limit.
-- @tparam table conn the connection: timeout settings and TLS options of a client (`ca_file`,
--   `insecure`, `user_agent`, `max_response_bytes`)
-- @string url the address
-- @string method "GET" or "POST"
-- @number deadline absolute deadline (transport.now clock)
-- @treturn table the request options
function transport.spec(conn, url, method, deadline)
  local timeout_ms = math.floor((deadline - core.monotonic()) * 1000)
  if timeout_ms < 1 then timeout_ms = 1 end
  return {
    url = url,
    method = method,
    timeout_ms = timeout_ms,
    ca_file = conn.ca_file,
    insecure = conn.insecure,
    user_agent = conn.user_agent,
    max_response_bytes = conn.max_response_bytes,
  }
end

--- Sends one request of a connection and tells its observers: "request"
-- before (an observer may refuse it by returning an error: nothing is sent
-- and the error is returned as a transfer failure with code "refused"),
-- "response" after. `event` describes the request for the observers (built
-- only when there are observers).
-- @tparam table conn the connection (`driver`, `notify`, `observed`)
-- @tparam table spec the request options
-- @tparam ?function on_records records receiver (see perform)
-- @tparam ?function on_progress progress receiver (see perform)
-- @tparam[opt] function describe `describe(...)` -> the "request" event's fields
-- @param ... describe's arguments
-- @return as @{perform}; nil, err, "refused" when an observer refused the request
function transport.send(conn, spec, on_records, on_progress, describe, ...)
  if conn.observed() then
    local event = describe and describe(...) or {}
    event.type, event.method, event.url = "request", spec.method, spec.url
    local refusal = conn.notify(event)
    if refusal ~= nil then return nil, refusal, "refused" end
    local started = core.monotonic()
    local function progress(received, total)
      conn.notify{ type = "progress", method = spec.method, url = spec.url, received = received, total = total }
      if on_progress then on_progress(received, total) end
    end
    local resp, msg, code = transport.perform(conn.driver, spec, on_records, progress)
    conn.notify{ type = "response", method = spec.method, url = spec.url, status = resp and resp.status,
                 bytes = resp and (resp.bytes or #resp.body), error = not resp and msg or nil, code = code,
                 seconds = core.monotonic() - started }
    return resp, msg, code
  end
  return transport.perform(conn.driver, spec, on_records, on_progress)
end

--- The error of a failed send: an observer's refusal as it is, else the
-- transfer failure's error (geoservices.errors.from_transfer).
function transport.failure(msg, code, url)
  if code == "refused" then return msg end
  return errors.from_transfer(msg, code, url)
end

transport.now = core.monotonic

return transport
