--- The retry policy: which failures may be repeated, how long to wait
-- between attempts, and when to give up. Client:post and Client:download ask
-- it after every failed attempt; nothing else in the library retries.
--
-- A request is repeated only where repeating is safe:
--   * every request, when it failed before any byte was sent (connection
--     refused, name not resolved);
--   * mode "read" (getServicesById, snapshots/list, the root resource, job
--     status polls, result files, a synchronizeReplica without edits):
--     also after a lost or reset response, HTTP 502/503/504 and 429 (or the
--     same codes in a JSON error body);
--   * mode "edits" (a synchronizeReplica carrying edits whose adds all have a
--     client-side GlobalID): also after an ambiguous failure that may have
--     reached the server (response lost or reset mid-body, unreadable body,
--     any 5xx). The caller re-issues the same edits and reconciles the
--     "already exists" failures of exactly the adds it re-sent (sync.lua);
--   * mode "once" (configure; a synchronizeReplica whose edits cannot be
--     re-issued safely): only before any byte was sent, and 429 (refused).
-- A 409 "busy" answer after an ambiguous failure (our own lost async job
-- still running) is waited out in modes "read" and "edits".
--
-- Waits grow exponentially with jitter, honour Retry-After, and never go
-- past the call's deadline: an attempt that cannot finish before it is not made.
--
-- Users set the policy with the client option `retry` (@{DEFAULTS});
-- the other functions are what Client:post and Client:download ask.
-- @module geoservices.net.retry
local transport = require "geoservices.net.transport"

local retry = {}

--- The default policy; the client option `retry` overrides some of its
-- members (`geoservices.client{ url = ..., retry = { attempts = 5 } }`), or
-- `retry = false` makes one attempt only.
-- @table DEFAULTS
-- @field attempts attempts in all, first included (3; 1 = never retry)
-- @field base_delay seconds before the first retry (0.25); each retry waits about twice as long
--   (half of it random)
-- @field max_delay cap of the exponential wait, seconds (8)
-- @field max_retry_after a longer Retry-After is not waited for: the call fails (120 s)
retry.DEFAULTS = {
  attempts = 3,          -- attempts in all (1 = never retry)
  base_delay = 0.25,     -- seconds before the first retry
  max_delay = 8,         -- cap of the exponential wait
  max_retry_after = 120, -- a longer Retry-After is not waited for
}

-- Transfer codes of the C core that mean nothing reached the server.
local NOT_SENT = { couldnt_connect = true, resolve = true, resolve_proxy = true }

-- Transfer codes after which the request may have reached the server and
-- only the response was lost.
local LOST = { empty_reply = true, recv = true, partial = true, send = true }

-- Statuses (HTTP, or the code of a JSON error body) that ask to come back later.
local TRY_LATER = { [429] = true, [502] = true, [503] = true, [504] = true }

local MODES = { once = true, read = true, edits = true }

--- A policy table from the client option `retry` (nil = defaults, false =
-- never retry, or a table overriding some of DEFAULTS). Raises on misuse.
-- @tparam ?table|false opt the client option
-- @treturn table the policy, with every member of @{DEFAULTS}
-- @raise when opt is not a table, false or nil, names an unknown member, or gives a negative or
--   non-number value
function retry.policy(opt)
  local p = {}
  for k, v in pairs(retry.DEFAULTS) do p[k] = v end
  if opt == false then
    p.attempts = 1
  elseif opt ~= nil then
    if type(opt) ~= "table" then error("geoservices.client: option 'retry' must be a table or false", 3) end
    for k, v in pairs(opt) do
      if retry.DEFAULTS[k] == nil then
        error(("geoservices.client: unknown retry option '%s'"):format(tostring(k)), 3)
      end
      if type(v) ~= "number" or not (v >= 0 and v < math.huge) then -- NaN and inf too
        error(("geoservices.client: retry option '%s' must be a non-negative number"):format(k), 3)
      end
      p[k] = v
    end
    p.attempts = math.max(1, math.floor(p.attempts))
  end
  return p
end

local function status_of(err)
  if err.kind == "http" or err.kind == "auth" then return err.status end
  if err.kind == "server" then return math.tointeger(err.code) or err.status end
  return nil
end

--- True when the failure proves the request never reached the server.
-- @tparam table err the error
-- @treturn boolean
-- @raise never
function retry.not_sent(err)
  return (err.kind == "network" and NOT_SENT[err.code]) or false
end

-- GATEWAYS: an answer lost on its way back (no answer at all: a dropped
-- connection, a timeout; or a gateway's 502 or 504 while the server behind it
-- goes on), so the server may still run the request LATE, after the caller
-- went on. A server's own error answer (500, 503) ended its work.
local LATE_STATUS = { [502] = true, [504] = true }

--- True when the server may still run the failed request later: its answer
-- was lost on the way back (see GATEWAYS above); false when it never left.
-- @tparam table err the error
-- @treturn boolean
-- @raise never
function retry.may_run_late(err)
  if retry.not_sent(err) then return false end
  if err.status then return LATE_STATUS[err.status] == true end
  return err.kind == "network" or err.kind == "timeout"
end

--- True when the request may have been processed although the call failed:
-- the response was lost, reset or unreadable, the deadline passed while
-- waiting, or the server answered with a 5xx status.
-- @tparam table err the error
-- @treturn boolean
-- @raise never
function retry.ambiguous(err)
  if err.kind == "network" then return LOST[err.code] == true end
  if err.kind == "timeout" then return true end
  if err.kind == "protocol" then return err.code ~= "too_large" end
  if err.kind == "http" then return err.status ~= nil and err.status >= 500 and err.status ~= 501 end
  return false
end

--- Decides whether a failed attempt is repeated. `mode` is "once", "read"
-- or "edits"; `state.ambiguous` tells that an earlier attempt of this call
-- may have reached the server. Returns true to retry, and whether this
-- failure itself was ambiguous.
-- @string mode "once", "read" or "edits"
-- @tparam table err the failed attempt's error
-- @tparam[opt] table state `{ambiguous = boolean}`
-- @treturn boolean whether to retry
-- @treturn boolean whether this failure was ambiguous
-- @raise when mode is unknown
function retry.should_retry(mode, err, state)
  if not MODES[mode] then error("retry: unknown mode " .. tostring(mode), 2) end
  local ambiguous = retry.ambiguous(err)
  if retry.not_sent(err) then return true, false end
  local status = status_of(err)
  if status == 429 and err.kind ~= "auth" then return true, false end -- refused: nothing was done
  if mode == "once" then return false, ambiguous end
  if status == 409 and state and state.ambiguous then return true, false end
  if mode == "read" then
    if err.kind == "network" and LOST[err.code] then return true, ambiguous end
    if status and TRY_LATER[status] and err.kind ~= "auth" then return true, ambiguous end
    return false, ambiguous
  end
  -- mode "edits": anything that may have reached the server is re-issued
  -- (the caller reconciles); a timeout is never, because its deadline is gone.
  if ambiguous and err.kind ~= "timeout" then return true, true end
  if status and TRY_LATER[status] then return true, ambiguous end
  return false, ambiguous
end

--- Seconds asked by a Retry-After header (delta-seconds or an HTTP date),
-- or nil.
-- @tparam ?string value the header
-- @treturn ?number seconds (0 for a date in the past), or nil when absent or unreadable
-- @raise never
function retry.parse_retry_after(value)
  if type(value) ~= "string" then return nil end
  local secs = value:match("^%s*(%d+)%s*$")
  if secs then return tonumber(secs) end
  local d, mon, y, h, m, s = value:match("%a+, (%d+) (%a+) (%d+) (%d+):(%d+):(%d+) GMT")
  if not d then return nil end
  local months = { Jan = 1, Feb = 2, Mar = 3, Apr = 4, May = 5, Jun = 6, Jul = 7, Aug = 8, Sep = 9, Oct = 10,
                   Nov = 11, Dec = 12 }
  if not months[mon] then return nil end
  local t = { year = tonumber(y), month = months[mon], day = tonumber(d), hour = tonumber(h), min = tonumber(m),
              sec = tonumber(s), isdst = false }
  -- os.time reads the table as local time: correct by the offset of UTC
  local now = os.time()
  local utc_now = os.time(os.date("!*t", now))
  local when = os.time(t) + (now - utc_now)
  return math.max(0, when - now)
end

--- The wait before retry number `n` (1 = first retry): exponential with
-- "equal jitter" (half fixed, half random), at least `retry_after`.
-- @tparam table policy a policy (@{policy})
-- @int n the retry's number
-- @tparam[opt] number retry_after seconds the server asked for
-- @treturn number seconds
-- @raise never
function retry.delay(policy, n, retry_after)
  local d = math.min(policy.max_delay, policy.base_delay * 2 ^ (n - 1))
  d = d / 2 + math.random() * d / 2
  if retry_after and retry_after > d then d = retry_after end
  return d
end

--- True for a 409 "busy" answer (waited out after an ambiguous failure).
-- @tparam table err the error
-- @treturn boolean
-- @raise never
function retry.is_busy(err)
  return status_of(err) == 409
end

--- Plans the next attempt: returns the delay in seconds, or nil and the
-- reason why not (attempts used up, Retry-After too long, deadline).
-- `attempt` counts the failures so far; `backoff_n`, when given, is used
-- for the wait instead (a busy server is waited out with growing pauses
-- without using up the attempts).
-- @tparam table policy a policy (@{policy})
-- @int attempt failures so far
-- @tparam ?number deadline absolute deadline, or nil
-- @tparam[opt] number retry_after seconds the server asked for
-- @int[opt] backoff_n the wait's number instead of attempt
-- @treturn[1] number the delay in seconds
-- @return[2] nil
-- @treturn[2] ?string why not (nil when the deadline leaves no room for a first retry)
-- @raise never
function retry.next_delay(policy, attempt, deadline, retry_after, backoff_n)
  if not backoff_n and attempt >= policy.attempts then
    return nil, ("gave up after %d attempt%s"):format(attempt, attempt == 1 and "" or "s")
  end
  if retry_after and retry_after > policy.max_retry_after then
    return nil, ("the server asked to retry after %d s"):format(retry_after)
  end
  local d = retry.delay(policy, backoff_n or attempt, retry_after)
  if deadline and transport.now() + d >= deadline then
    if attempt == 1 and not retry_after then return nil, nil end
    return nil, retry_after and ("the server asked to retry after %d s, past the deadline"):format(retry_after)
      or ("gave up after %d attempt%s: the deadline is near"):format(attempt, attempt == 1 and "" or "s")
  end
  return d
end

--- Adds how the call ended to an error: err.attempts, err.retry_after and
-- a note in the message.
-- @tparam table err the error
-- @int attempt the attempts made
-- @tparam ?string note the note, e.g. "after 3 attempts"
-- @tparam[opt] number retry_after seconds the server asked for
-- @treturn table err
-- @raise never
function retry.annotate(err, attempt, note, retry_after)
  err.attempts = attempt
  if retry_after then err.retry_after = retry_after end
  if note and not err.message:find(note, 1, true) then err.message = err.message .. " (" .. note .. ")" end
  return err
end

--- The one retry driver, under every request of the library (Client:post
-- and the ranged downloads of net.download). Calls `attempt(n)` until it
-- returns a value, the policy says stop, or the deadline is near.
-- @tparam table args
-- @tparam table args.policy a policy (@{policy})
-- @tparam ?number args.deadline absolute deadline
-- @tparam function args.attempt `attempt(n)` -> `"done", value` | `"progress"` (a step forward: the
--   failure count starts again) | `"failed", err, retry_after` (asks `classify`) | `"fatal", err`
--   (ends the call at once)
-- @tparam function args.classify `classify(err, n)` -> "retry", "busy" (waited out without using up
--   the attempts), "again" (repeat at once: a refreshed token), "stop", or "fatal" and the error to
--   return instead
-- @tparam function args.sleep `sleep(seconds)`
-- @tparam[opt] function args.on_retry `on_retry(err, delay, attempts)` before each wait
-- @return[1] the value of the successful attempt
-- @return[2] nil
-- @treturn[2] table err, annotated with the attempts made
-- @local
function retry.run(args)
  local attempts, counted = 0, 0 -- attempts since the last progress; failures counted against the policy
  while true do
    attempts = attempts + 1
    local outcome, value, retry_after = args.attempt(attempts)
    if outcome == "done" then return value end
    if outcome == "fatal" then return nil, value end
    if outcome == "progress" then
      attempts, counted = 0, 0
    else
      local err = value
      local verdict, replacement = args.classify(err, attempts)
      if verdict == "fatal" then return nil, replacement or err end
      if verdict == "stop" then
        if attempts > 1 then retry.annotate(err, attempts, ("after %d attempts"):format(attempts)) end
        return nil, err
      elseif verdict ~= "again" then
        local busy = verdict == "busy"
        if not busy then counted = counted + 1 end
        local delay, why = retry.next_delay(args.policy, busy and 1 or counted, args.deadline, retry_after,
                                            busy and math.min(attempts, 6) or nil)
        if not delay then
          if not why and attempts > 1 then
            why = ("gave up after %d attempts: the deadline is near"):format(attempts)
          end
          return nil, retry.annotate(err, attempts, why, retry_after)
        end
        if args.on_retry then args.on_retry(err, delay, attempts) end
        args.sleep(delay)
      end
    end
  end
end

return retry
