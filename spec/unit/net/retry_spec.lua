-- The retry policy and the one retry driver, with fake attempts, a fake
-- clock and a fake sleep: no request is sent and nothing really waits.
local errors = require "geoservices.base.errors"
local retry = require "geoservices.net.retry"
local transport = require "geoservices.net.transport"

local function net(code) return errors.new("network", "transfer failed: " .. code, { code = code }) end
local function http(status) return errors.new("http", "HTTP " .. status, { status = status }) end
local function server(code, status)
  return errors.new("server", "server said no", { code = code, status = status or 200 })
end

-- A fake monotonic clock behind transport.now (the clock next_delay reads).
local clock
local real_now = transport.now
local function use_fake_clock(start)
  clock = start or 0
  transport.now = function() return clock end
end

describe("retry.policy", function()
  it("gives the defaults for nil and a copy the caller may change", function()
    local p = retry.policy(nil)
    assert.same({ attempts = 3, base_delay = 0.25, max_delay = 8, max_retry_after = 120 }, p)
    p.attempts = 99
    assert.equal(3, retry.policy().attempts)
    assert.equal(3, retry.DEFAULTS.attempts)
  end)

  it("makes one attempt only with false", function()
    local p = retry.policy(false)
    assert.equal(1, p.attempts)
    assert.equal(retry.DEFAULTS.base_delay, p.base_delay)
  end)

  it("overrides some members, keeps the others, and floors attempts to at least 1", function()
    local p = retry.policy{ attempts = 5.7, max_delay = 2 }
    assert.equal(5, p.attempts)
    assert.equal("integer", math.type(p.attempts))
    assert.equal(2, p.max_delay)
    assert.equal(0.25, p.base_delay)
    assert.equal(1, retry.policy{ attempts = 0 }.attempts)
  end)

  it("raises on misuse, naming the option", function()
    assert.has_error(function() retry.policy("3") end,
      "geoservices.client: option 'retry' must be a table or false")
    assert.has_error(function() retry.policy(true) end,
      "geoservices.client: option 'retry' must be a table or false")
    assert.has_error(function() retry.policy{ tries = 3 } end, "geoservices.client: unknown retry option 'tries'")
    assert.has_error(function() retry.policy{ attempts = -1 } end,
      "geoservices.client: retry option 'attempts' must be a non-negative number")
    assert.has_error(function() retry.policy{ base_delay = "1" } end,
      "geoservices.client: retry option 'base_delay' must be a non-negative number")
  end)
end)

describe("retry.not_sent and retry.ambiguous", function()
  it("know the failures that never reached the server", function()
    for _, code in ipairs{ "couldnt_connect", "resolve", "resolve_proxy" } do
      assert.is_true(retry.not_sent(net(code)), code)
      assert.is_false(retry.ambiguous(net(code)), code)
    end
    assert.is_false(retry.not_sent(net("recv")))
    assert.is_false(retry.not_sent(errors.new("timeout", "late", { code = "couldnt_connect" })))
  end)

  it("know the failures after which the request may have been processed", function()
    for _, code in ipairs{ "empty_reply", "recv", "partial", "send" } do assert.is_true(retry.ambiguous(net(code))) end
    assert.is_false(retry.ambiguous(net("tls_verify")))
    assert.is_true(retry.ambiguous(errors.new("timeout", "late")))
    assert.is_true(retry.ambiguous(errors.new("protocol", "unreadable", { code = nil })))
    assert.is_false(retry.ambiguous(errors.new("protocol", "too big", { code = "too_large" })))
    assert.is_true(retry.ambiguous(http(500)))
    assert.is_true(retry.ambiguous(http(503)))
    assert.is_false(retry.ambiguous(http(501)))
    assert.is_false(retry.ambiguous(http(404)))
    assert.is_false(retry.ambiguous(server(500)))
    assert.is_false(retry.ambiguous(errors.new("auth", "HTTP 401", { status = 401 })))
  end)

  it("is_busy is true for 409, as an HTTP status or a JSON error body's code", function()
    assert.is_true(retry.is_busy(http(409)))
    assert.is_true(retry.is_busy(server(409)))
    assert.is_true(retry.is_busy(server("409")))
    assert.is_false(retry.is_busy(http(503)))
    assert.is_false(retry.is_busy(net("recv")))
  end)
end)

describe("retry.should_retry", function()
  local function verdict(mode, err, state)
    return { retry.should_retry(mode, err, state) }
  end

  it("raises on an unknown mode", function()
    assert.has_error(function() retry.should_retry("always", net("recv")) end, "retry: unknown mode always")
  end)

  it("repeats a request that was never sent, in every mode", function()
    for _, mode in ipairs{ "once", "read", "edits" } do
      assert.same({ true, false }, verdict(mode, net("couldnt_connect")), mode)
      assert.same({ true, false }, verdict(mode, net("resolve")), mode)
    end
  end)

  it("repeats a 429 (refused: nothing done) in every mode, whether HTTP status or body code", function()
    for _, mode in ipairs{ "once", "read", "edits" } do
      assert.same({ true, false }, verdict(mode, http(429)), mode)
      assert.same({ true, false }, verdict(mode, server(429)), mode)
      assert.same({ true, false }, verdict(mode, server("429")), mode)
    end
  end)

  it("mode once repeats nothing else, but still tells whether the failure was ambiguous", function()
    assert.same({ false, true }, verdict("once", net("recv")))
    assert.same({ false, true }, verdict("once", http(503)))
    assert.same({ false, false }, verdict("once", server(503)))
    assert.same({ false, true }, verdict("once", errors.new("timeout", "late")))
    assert.same({ false, false }, verdict("once", http(409), { ambiguous = true }))
  end)

  it("mode read repeats lost responses and come-back-later statuses", function()
    for _, code in ipairs{ "empty_reply", "recv", "partial", "send" } do
      assert.same({ true, true }, verdict("read", net(code)), code)
    end
    for _, status in ipairs{ 502, 503, 504 } do
      assert.same({ true, true }, verdict("read", http(status)), status)
      assert.same({ true, false }, verdict("read", server(status)), "body code " .. status)
    end
    assert.same({ false, true }, verdict("read", http(500)))
    assert.same({ false, false }, verdict("read", http(404)))
    assert.same({ false, false }, verdict("read", server(400)))
    assert.same({ false, false }, verdict("read", net("tls_verify")))
    assert.same({ false, true }, verdict("read", errors.new("timeout", "late")))
    assert.same({ false, false }, verdict("read", errors.new("auth", "Invalid token", { code = 498, status = 200 })))
  end)

  it("mode edits repeats anything that may have reached the server, except a timeout", function()
    assert.same({ true, true }, verdict("edits", net("recv")))
    assert.same({ true, true }, verdict("edits", http(500)))
    assert.same({ true, true }, verdict("edits", http(502)))
    assert.same({ true, true }, verdict("edits", errors.new("protocol", "unreadable body")))
    assert.same({ false, true }, verdict("edits", errors.new("timeout", "late")))
    assert.same({ false, false }, verdict("edits", errors.new("protocol", "too big", { code = "too_large" })))
    assert.same({ false, false }, verdict("edits", http(501)))
    assert.same({ false, false }, verdict("edits", http(400)))
    assert.same({ true, false }, verdict("edits", server(503)))
    assert.same({ false, false }, verdict("edits", server(500)))
  end)

  it("waits out a 409 busy only after an ambiguous failure, in modes read and edits", function()
    for _, mode in ipairs{ "read", "edits" } do
      assert.same({ true, false }, verdict(mode, server(409), { ambiguous = true }), mode)
      assert.same({ true, false }, verdict(mode, http(409), { ambiguous = true }), mode)
      assert.same({ false, false }, verdict(mode, server(409), { ambiguous = false }), mode)
      assert.same({ false, false }, verdict(mode, server(409)), mode)
    end
  end)
end)

describe("retry.parse_retry_after", function()
  local MONTHS = { "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" }
  local DAYS = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" }
  local function http_date(t)
    local u = os.date("!*t", t)
    return ("%s, %02d %s %04d %02d:%02d:%02d GMT"):format(DAYS[u.wday], u.day, MONTHS[u.month], u.year, u.hour,
      u.min, u.sec)
  end

  it("reads delta-seconds, with surrounding blanks", function()
    assert.equal(120, retry.parse_retry_after("120"))
    assert.equal(5, retry.parse_retry_after("  5 "))
    assert.equal(0, retry.parse_retry_after("0"))
  end)

  it("reads an HTTP date as seconds from now, and a date in the past as 0", function()
    local future = retry.parse_retry_after(http_date(os.time() + 90))
    assert.is_true(future >= 88 and future <= 91, tostring(future))
    assert.equal(0, retry.parse_retry_after(http_date(os.time() - 3600)))
    assert.equal(0, retry.parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"))
  end)

  it("gives nil for absent or unreadable values", function()
    assert.is_nil(retry.parse_retry_after(nil))
    assert.is_nil(retry.parse_retry_after(30))
    assert.is_nil(retry.parse_retry_after(""))
    assert.is_nil(retry.parse_retry_after("-5"))
    assert.is_nil(retry.parse_retry_after("1.5"))
    assert.is_nil(retry.parse_retry_after("soon"))
    assert.is_nil(retry.parse_retry_after("Wed, 21 Foo 2015 07:28:00 GMT"))
  end)
end)

describe("retry.delay", function()
  it("grows exponentially with equal jitter: between half and all of base * 2^(n-1), capped", function()
    local p = retry.policy{ base_delay = 1, max_delay = 8 }
    for n, full in ipairs{ 1, 2, 4, 8, 8, 8 } do
      for _ = 1, 50 do
        local d = retry.delay(p, n)
        assert.is_true(d >= full / 2 and d <= full, ("n=%d d=%s"):format(n, d))
      end
    end
  end)

  it("is at least the Retry-After the server asked for", function()
    local p = retry.policy{ base_delay = 1, max_delay = 8 }
    assert.equal(30, retry.delay(p, 1, 30))
    local d = retry.delay(p, 4, 0.1) -- a shorter Retry-After does not shorten the backoff
    assert.is_true(d >= 4 and d <= 8)
  end)
end)

describe("retry.next_delay", function()
  after_each(function() transport.now = real_now end)

  it("stops once the attempts are used up, saying how many were made", function()
    local p = retry.policy{ attempts = 3 }
    assert.is_number(retry.next_delay(p, 1))
    assert.is_number(retry.next_delay(p, 2))
    local d, why = retry.next_delay(p, 3)
    assert.is_nil(d)
    assert.equal("gave up after 3 attempts", why)
    d, why = retry.next_delay(retry.policy(false), 1)
    assert.is_nil(d)
    assert.equal("gave up after 1 attempt", why)
  end)

  it("does not wait for a Retry-After longer than max_retry_after", function()
    local p = retry.policy{ max_retry_after = 60 }
    local d, why = retry.next_delay(p, 1, nil, 61)
    assert.is_nil(d)
    assert.equal("the server asked to retry after 61 s", why)
    assert.equal(60, retry.next_delay(p, 1, nil, 60))
  end)

  it("makes no attempt that cannot finish before the deadline", function()
    use_fake_clock(100)
    local p = retry.policy{ attempts = 5, base_delay = 1, max_delay = 1 }
    assert.is_number(retry.next_delay(p, 1, 102))
    -- a first retry that does not fit: nil and no reason (the caller's error stays as it is)
    local d, why = retry.next_delay(p, 1, 100.2)
    assert.is_nil(d)
    assert.is_nil(why)
    d, why = retry.next_delay(p, 2, 100.2)
    assert.is_nil(d)
    assert.equal("gave up after 2 attempts: the deadline is near", why)
    d, why = retry.next_delay(p, 1, 110, 20)
    assert.is_nil(d)
    assert.equal("the server asked to retry after 20 s, past the deadline", why)
  end)

  it("with backoff_n waits with that number and does not count attempts (a busy server)", function()
    use_fake_clock(0)
    local p = retry.policy{ attempts = 2, base_delay = 1, max_delay = 64 }
    local d = retry.next_delay(p, 7, nil, nil, 5)
    assert.is_true(d >= 8 and d <= 16, tostring(d))
    assert.is_nil((retry.next_delay(p, 7, nil, nil, nil)))
  end)
end)

describe("retry.annotate", function()
  it("records the attempts and Retry-After, and adds the note to the message once", function()
    local err = http(503)
    assert.equal(err, retry.annotate(err, 3, "after 3 attempts", 7))
    assert.equal(3, err.attempts)
    assert.equal(7, err.retry_after)
    assert.equal("HTTP 503 (after 3 attempts)", err.message)
    retry.annotate(err, 3, "after 3 attempts")
    assert.equal("HTTP 503 (after 3 attempts)", err.message)
    assert.equal(7, err.retry_after)
  end)

  it("leaves the message alone without a note", function()
    local err = retry.annotate(http(502), 1, nil)
    assert.equal("HTTP 502", err.message)
    assert.equal(1, err.attempts)
    assert.is_nil(err.retry_after)
  end)
end)

describe("retry.run", function()
  after_each(function() transport.now = real_now end)

  -- Runs the driver over a script of attempt outcomes and classify verdicts.
  -- Each script step is { outcome, value, retry_after, verdict = ..., replacement = ... }.
  local function drive(script, opts)
    opts = opts or {}
    local log = { attempts = {}, sleeps = {}, classified = {}, retries = {} }
    local step = 0
    local value, err = retry.run{
      policy = opts.policy or retry.policy{ attempts = 3, base_delay = 0.01, max_delay = 0.02 },
      deadline = opts.deadline,
      attempt = function(n)
        step = step + 1
        log.attempts[#log.attempts + 1] = n
        local s = assert(script[step], "the driver made more attempts than scripted")
        log.current = s
        return s[1], s[2], s[3]
      end,
      classify = function(e, n)
        log.classified[#log.classified + 1] = n
        assert.equal(log.current[2], e)
        return log.current.verdict or "retry", log.current.replacement
      end,
      sleep = function(seconds)
        log.sleeps[#log.sleeps + 1] = seconds
        if opts.on_sleep then opts.on_sleep(seconds) end
      end,
      on_retry = function(e, delay, attempts) log.retries[#log.retries + 1] = { e, delay, attempts } end,
    }
    return value, err, log
  end

  it("returns the value of a successful first attempt without classifying or sleeping", function()
    local value, err, log = drive{ { "done", "the body" } }
    assert.equal("the body", value)
    assert.is_nil(err)
    assert.same({ 1 }, log.attempts)
    assert.same({}, log.classified)
    assert.same({}, log.sleeps)
  end)

  it("retries failures with a sleep between attempts, then succeeds", function()
    local e1, e2 = http(503), http(502)
    local value, _, log = drive{ { "failed", e1 }, { "failed", e2 }, { "done", 42 } }
    assert.equal(42, value)
    assert.same({ 1, 2, 3 }, log.attempts)
    assert.same({ 1, 2 }, log.classified)
    assert.equal(2, #log.sleeps)
    assert.equal(2, #log.retries)
    assert.equal(e1, log.retries[1][1])
    assert.equal(log.sleeps[1], log.retries[1][2])
    assert.equal(1, log.retries[1][3])
    assert.equal(2, log.retries[2][3])
  end)

  it("gives up when the attempts are used up, with the error annotated", function()
    local e = http(503)
    local value, err, log = drive{ { "failed", e }, { "failed", e }, { "failed", e }, { "failed", e } }
    assert.is_nil(value)
    assert.equal(e, err)
    assert.equal(3, err.attempts)
    assert.equal("HTTP 503 (gave up after 3 attempts)", err.message)
    assert.same({ 1, 2, 3 }, log.attempts)
    assert.equal(2, #log.sleeps)
  end)

  it("starts counting again after progress", function()
    local e = net("partial")
    local value, _, log = drive{
      { "failed", e }, { "failed", e }, { "progress" }, { "failed", e }, { "failed", e }, { "done", "whole" },
    }
    assert.equal("whole", value)
    assert.same({ 1, 2, 3, 1, 2, 3 }, log.attempts)
    assert.equal(4, #log.sleeps)
  end)

  it("ends at once on a fatal attempt, without classifying", function()
    local e = errors.new("invalid", "bad")
    local value, err, log = drive{ { "failed", http(503) }, { "fatal", e } }
    assert.is_nil(value)
    assert.equal(e, err)
    assert.same({ 1 }, log.classified)
    assert.is_nil(e.attempts)
  end)

  it("ends at once on a fatal verdict, with the replacement error when given", function()
    local e, other = http(503), errors.new("auth", "token expired")
    local _, err, log = drive{ { "failed", e, verdict = "fatal", replacement = other } }
    assert.equal(other, err)
    assert.same({}, log.sleeps)
    _, err = drive{ { "failed", e, verdict = "fatal" } }
    assert.equal(e, err)
  end)

  it("stops on a stop verdict, annotating only when more than one attempt was made", function()
    local e1 = http(400)
    local _, err = drive{ { "failed", e1, verdict = "stop" } }
    assert.equal(e1, err)
    assert.equal("HTTP 400", err.message)
    assert.is_nil(err.attempts)
    local e2 = http(404)
    _, err = drive{ { "failed", http(503) }, { "failed", e2, verdict = "stop" } }
    assert.equal(e2, err)
    assert.equal(2, err.attempts)
    assert.equal("HTTP 404 (after 2 attempts)", err.message)
  end)

  it("repeats at once after an again verdict, without sleeping or using up an attempt", function()
    local e = errors.new("auth", "Invalid token", { code = 498 })
    local value, _, log = drive({ { "failed", e, verdict = "again" }, { "failed", http(503) }, { "done", "ok" } },
      { policy = retry.policy{ attempts = 2, base_delay = 0.01 } })
    assert.equal("ok", value)
    assert.same({ 1, 2, 3 }, log.attempts)
    assert.equal(1, #log.sleeps)
  end)

  it("waits out a busy server with growing pauses without using up the attempts", function()
    local busy = server(409)
    local script = {}
    for i = 1, 8 do script[i] = { "failed", busy, verdict = "busy" } end
    script[9] = { "done", "finished" }
    local value, _, log = drive(script, { policy = retry.policy{ attempts = 2, base_delay = 1, max_delay = 1000 } })
    assert.equal("finished", value)
    assert.equal(8, #log.sleeps)
    for n, d in ipairs(log.sleeps) do
      local full = 2 ^ (math.min(n, 6) - 1) -- the busy wait's number grows up to 6
      assert.is_true(d >= full / 2 and d <= full, ("wait %d: %s"):format(n, d))
    end
  end)

  it("leaves the attempts for other failures untouched by busy waits", function()
    local busy, lost = server(409), net("recv")
    local value, _, log = drive({
      { "failed", busy, verdict = "busy" }, { "failed", busy, verdict = "busy" }, { "failed", busy, verdict = "busy" },
      { "failed", lost }, { "failed", lost }, { "done", "applied" },
    }, { policy = retry.policy{ attempts = 3, base_delay = 0.01, max_delay = 0.01 } })
    assert.equal("applied", value)
    assert.equal(5, #log.sleeps)
  end)

  it("gives up on the deadline: no note when even a first retry does not fit", function()
    use_fake_clock(50)
    local e = http(503)
    local _, err, log = drive({ { "failed", e } },
      { deadline = 50.05, policy = retry.policy{ attempts = 5, base_delay = 1 } })
    assert.equal(e, err)
    assert.equal("HTTP 503", err.message)
    assert.equal(1, err.attempts)
    assert.same({}, log.sleeps)
  end)

  it("gives up on the deadline after some attempts, saying why", function()
    use_fake_clock(0)
    local e = http(503)
    local _, err, log = drive({ { "failed", e }, { "failed", e }, { "failed", e } }, {
      deadline = 1, policy = retry.policy{ attempts = 5, base_delay = 0 },
      on_sleep = function() clock = clock + 1 end, -- the attempt itself took a second
    })
    assert.equal(1, #log.sleeps)
    assert.equal(2, err.attempts)
    assert.equal("HTTP 503 (gave up after 2 attempts: the deadline is near)", err.message)
  end)

  it("honours Retry-After up to the deadline", function()
    use_fake_clock(0)
    local e = http(503)
    local _, err, log = drive({ { "failed", e, 1 }, { "failed", e, 1 }, { "failed", e, 1 } }, {
      deadline = 2.5, policy = retry.policy{ attempts = 5, base_delay = 0 },
      on_sleep = function(s) clock = clock + s end,
    })
    assert.same({ 1, 1 }, log.sleeps)
    assert.equal(3, err.attempts)
    assert.equal(1, err.retry_after)
    assert.equal("HTTP 503 (the server asked to retry after 1 s, past the deadline)", err.message)
  end)

  it("a busy wait cut short by the deadline says why it stopped", function()
    -- busy waits plan with next_delay(policy, 1, ...), whose "no room for a first retry" answer is
    -- nil without a reason, so after several waits the error gets no "deadline is near" note
    use_fake_clock(0)
    local busy = server(409)
    local script = {}
    for i = 1, 20 do script[i] = { "failed", busy, verdict = "busy" } end
    local _, err, log = drive(script, {
      deadline = 10, policy = retry.policy{ attempts = 3, base_delay = 1, max_delay = 1000 },
      on_sleep = function(s) clock = clock + s end,
    })
    assert.is_true(#log.sleeps >= 2)
    assert.equal(#log.sleeps + 1, err.attempts)
    assert.matches("deadline", err.message)
  end)

  it("fails at once on a Retry-After longer than the policy waits for", function()
    local e = http(429)
    local _, err, log = drive{ { "failed", e, 600 } }
    assert.same({}, log.sleeps)
    assert.equal(600, err.retry_after)
    assert.equal("HTTP 429 (the server asked to retry after 600 s)", err.message)
  end)
end)
