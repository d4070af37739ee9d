-- The polling engine with a fake clock: sleeping only moves the clock and
-- records the pause, and every poll's outcome is scripted.
local errors = require "geoservices.base.errors"
local poll = require "geoservices.base.poll"

-- Runs poll.run over `script` (a list of {outcome, value, err}); returns the
-- call's results and a log of the pauses, the times each poll ran and the
-- arguments of on_deadline.
local function run(script, a)
  local log = { pauses = {}, polled_at = {} }
  local t = a.start or 0
  local i = 0
  a.now = function() return t end
  a.sleep = function(seconds)
    log.pauses[#log.pauses + 1] = seconds
    t = t + seconds
  end
  a.step = function()
    i = i + 1
    log.polled_at[#log.polled_at + 1] = t
    local s = script[i] or script.rest
    assert(s, "polled more often than scripted")
    return s[1], s[2], s[3]
  end
  a.on_deadline = a.on_deadline or function(last, elapsed)
    log.deadline = { last = last, elapsed = elapsed }
    return errors.new("timeout", "still running")
  end
  local value, err = poll.run(a)
  log.polls = i
  return value, err, log
end

local function running(v) return { "running", v } end
local function failed(kind) return { "failed", errors.new(kind, kind .. " failure") } end

describe("poll.run", function()
  it("polls at once, then waits the interval between polls, and returns the value and error of done", function()
    local job_err = errors.new("job", "failed on the server")
    local value, err, log = run({ running(1), running(2), { "done", "the result", job_err } }, { interval = 2 })
    assert.equal("the result", value)
    assert.equal(job_err, err)
    assert.same({ 2, 2 }, log.pauses)
    assert.same({ 0, 2, 4 }, log.polled_at)
  end)

  it("grows the interval by backoff up to max_interval", function()
    local script = { rest = running() }
    script[7] = { "done", true }
    local _, _, log = run(script, { interval = 1, backoff = 2, max_interval = 5 })
    assert.same({ 1, 2, 4, 5, 5, 5 }, log.pauses)
  end)

  it("without max_interval keeps multiplying", function()
    local script = { running(), running(), running(), { "done", true } }
    local _, _, log = run(script, { interval = 0.5, backoff = 3 })
    assert.same({ 0.5, 1.5, 4.5 }, log.pauses)
  end)

  it("waits before the first poll with sleep_first", function()
    local _, _, log = run({ { "done", "v" } }, { interval = 3, sleep_first = true })
    assert.same({ 3 }, log.pauses)
    assert.same({ 3 }, log.polled_at)
  end)

  it("never sleeps past the deadline, then reports it with the last value and the time taken", function()
    local value, err, log = run({ running("queued"), running("10%"), running("55%"), running("90%") },
      { start = 100, interval = 4, deadline = 110 })
    assert.is_nil(value)
    assert.equal("timeout", err.kind)
    assert.same({ 4, 4, 2 }, log.pauses)
    assert.same({ 100, 104, 108, 110 }, log.polled_at)
    assert.same({ last = "90%", elapsed = 10 }, log.deadline)
  end)

  it("passes nil as the last value when the last poll failed", function()
    local _, _, log = run({ running("50%"), failed("network") },
      { interval = 5, deadline = 5, transient = { network = true } })
    assert.equal(2, log.polls)
    assert.is_nil(log.deadline.last)
    assert.equal(5, log.deadline.elapsed)
  end)

  it("reports the deadline without polling when it already passed before the first wait", function()
    local _, err, log = run({}, { start = 20, interval = 1, deadline = 20, sleep_first = true })
    assert.equal("timeout", err.kind)
    assert.equal(0, log.polls)
    assert.same({}, log.pauses)
    assert.same({ elapsed = 0 }, log.deadline)
  end)

  it("rides over transient failures in a row, and a successful poll starts the count again", function()
    local script = { failed("network"), failed("network"), running(), failed("timeout"), failed("network"),
                     { "done", "ok" } }
    local value, err = run(script, { interval = 1, transient = { network = true, timeout = true }, max_failures = 3 })
    assert.equal("ok", value)
    assert.is_nil(err)
  end)

  it("gives up after max_failures transient failures in a row, returning the last one", function()
    local script = { failed("network"), failed("network"), failed("network"), { "done", "too late" } }
    local value, err, log = run(script, { interval = 1, transient = { network = true }, max_failures = 3 })
    assert.is_nil(value)
    assert.equal("network", err.kind)
    assert.equal(3, log.polls)
  end)

  it("allows poll.MAX_FAILURES failures in a row by default", function()
    local value, err, log = run({ rest = failed("network") }, { interval = 1, transient = { network = true } })
    assert.is_nil(value)
    assert.equal("network", err.kind)
    assert.equal(poll.MAX_FAILURES, log.polls)
    assert.equal(5, poll.MAX_FAILURES)
  end)

  it("ends at once on a failure of a kind that is not transient", function()
    local value, err, log = run({ running(), failed("auth"), running() },
      { interval = 1, transient = { network = true } })
    assert.is_nil(value)
    assert.equal("auth", err.kind)
    assert.equal(2, log.polls)
    assert.same({ 1 }, log.pauses)
    value, err, log = run({ failed("network") }, { interval = 1 }) -- no transient kinds: every failure ends it
    assert.is_nil(value)
    assert.equal("network", err.kind)
    assert.equal(1, log.polls)
  end)

  it("ends with check's error before waiting (a stall)", function()
    local checked = {}
    local stall = errors.new("job", "no progress for 60 s")
    local value, err, log = run({ rest = running() }, {
      interval = 10,
      check = function(now)
        checked[#checked + 1] = now
        if now >= 20 then return stall end
      end,
    })
    assert.is_nil(value)
    assert.equal(stall, err)
    assert.same({ 0, 10, 20 }, checked)
    assert.equal(3, log.polls)
    assert.same({ 10, 10 }, log.pauses)
  end)

  it("lets cap_pause shorten a pause, and never sleeps a negative time", function()
    local seen = {}
    local _, _, log = run({ running(), running(), running(), { "done", 1 } }, {
      interval = 10,
      cap_pause = function(pause, now)
        seen[#seen + 1] = { pause, now }
        if #seen == 1 then return 3 end
        if #seen == 2 then return -1 end
        return pause
      end,
    })
    assert.same({ 3, 0, 10 }, log.pauses)
    assert.same({ { 10, 0 }, { 10, 3 }, { 10, 3 } }, seen)
  end)

  it("caps the pause by the deadline before cap_pause sees it", function()
    local seen
    run({ running(), { "done", 1 } }, {
      interval = 10, deadline = 4, cap_pause = function(pause) seen = pause; return pause end,
    })
    assert.equal(4, seen)
  end)
end)
