--- Follows one long operation of the client on the display, as `sync` and
-- `replica create` do: the request going out, the job's status while it
-- waits, the result file's download (bytes, rate, ETA), and a replica
-- store being filled from it (a bar, records per second).
--
-- The display runs on a timer, not only on events: the operation runs as a
-- task (geoservices.run) beside a ticker task, so while the job waits
-- between two polls, or no byte arrives, the elapsed time, the rate and the
-- ETA keep moving. On a terminal the line is redrawn every tenth of a
-- second; with `--json` a `progress` event comes at most once a second;
-- without a terminal the output stays quiet: a line per job status and per
-- tenth of a download or a fill, and nothing on a timer.
-- It observes the client (Client:observe) and never replaces a method.
local core = require "geoservices.core"
local geoservices = require "geoservices"
local output = require "geoservices.cli.output"

local watch = {}

local TICK = 0.1            -- seconds between two redraws of the terminal line
local EVENT_PERIOD = 1.0    -- --json: at least this many seconds between two progress events
local RATE_WINDOW = 3.0     -- seconds of samples a rate is measured over
local RATE_SPAN = 0.25      -- a rate needs samples this far apart
-- Bytes between two download lines when the size is unknown; with a known
-- size there is one line per tenth of it.
local PROGRESS_STEP = 4 * 1024 * 1024

-- Which report `bytes` falls in (its tenth of total, or its PROGRESS_STEP
-- without a total): a line or an event is written once per report.
local function report_of(bytes, total)
  if total and total > 0 then return ("%d/%d"):format(10 * bytes // total, total) end
  return tostring(bytes // PROGRESS_STEP)
end

--- A rate meter: `add(now, value)` keeps the samples of the last
-- RATE_WINDOW seconds; `rate()` is the value's growth per second over them,
-- or nil until they span RATE_SPAN seconds.
function watch.meter()
  local times, values = {}, {}
  local m = {}
  function m.add(now, value)
    times[#times + 1], values[#values + 1] = now, value
    while #times > 2 and now - times[2] >= RATE_WINDOW do
      table.remove(times, 1)
      table.remove(values, 1)
    end
  end
  function m.rate(now)
    if #times < 2 then return nil end
    local span = (now or times[#times]) - times[1]
    if span < RATE_SPAN then return nil end
    return math.max(0, values[#values] - values[1]) / span
  end
  return m
end

--- A duration for people: `4.2 s`, `3m05s`, `1h02m`.
function watch.duration(seconds)
  if seconds < 60 then return ("%.1f s"):format(seconds) end
  if seconds < 3600 then return ("%dm%02ds"):format(seconds // 60, math.floor(seconds % 60)) end
  return ("%dh%02dm"):format(seconds // 3600, math.floor(seconds % 3600) // 60)
end

local function eta_text(done, total, rate)
  if not total or total <= 0 or not rate or rate <= 0 or done >= total then return "" end
  return ", ETA " .. watch.duration((total - done) / rate)
end

--- The terminal line of the state `w` at `now`. Pure (tested alone).
-- @tparam table w the state: `name`, `started`, `phase` ("sending", "job", "downloading", "filling",
--   "building": `step` names what, since `step_started`), `status`, `bytes`, `total`, `records`,
--   `download_rate`, `filled`, `fill_total`, `fill_records`, `fill_rate` (bytes/s), `records_rate`, `frame`
-- @number now the clock
-- @treturn string the line
function watch.render(w, now)
  if w.phase == "filling" then
    local text = ("%s filling the store %s"):format(w.name, output.progress_bar(w.filled, w.fill_total,
      w.fill_records, 0, nil, true))
    if w.records_rate then text = text .. (", %d records/s"):format(math.floor(w.records_rate + 0.5)) end
    return text .. eta_text(w.filled, w.fill_total, w.fill_rate)
  elseif w.phase == "downloading" then
    local text = ("%s downloading %s"):format(w.name, output.progress_bar(w.bytes, w.total, w.records, w.frame, nil,
      true))
    if w.download_rate then text = text .. (", %s/s"):format(output.human_bytes(math.floor(w.download_rate))) end
    return text .. eta_text(w.bytes, w.total, w.download_rate)
  end
  local spinner = output.SPINNER[(w.frame or 0) % #output.SPINNER + 1]
  if w.phase == "building" then
    return ("%s %s %s, %s"):format(spinner, w.name, w.step, watch.duration(now - w.step_started))
  end
  local doing = w.phase == "job" and tostring(w.status) or "sending"
  return ("%s %s %s, %s"):format(spinner, w.name, doing, watch.duration(now - w.started))
end

-- The --json progress event of the state `w` at `now`.
local function progress_event(w, now)
  local ev = { event = "progress", replica = w.name, phase = w.phase, status = w.phase == "job" and w.status or nil,
               step = w.phase == "building" and w.step or nil,
               elapsed = math.floor((now - w.started) * 10 + 0.5) / 10 }
  if w.phase == "downloading" then
    ev.bytes, ev.total, ev.records = w.bytes, w.total, w.records
    ev.rate = w.download_rate and math.floor(w.download_rate)
    if w.total and w.download_rate and w.download_rate > 0 and w.bytes < w.total then
      ev.eta = math.floor((w.total - w.bytes) / w.download_rate + 0.5)
    end
  elseif w.phase == "filling" then
    ev.bytes, ev.total, ev.records = w.filled, w.fill_total, w.fill_records
    ev.records_rate = w.records_rate and math.floor(w.records_rate)
    if w.fill_rate and w.fill_rate > 0 and w.filled < w.fill_total then
      ev.eta = math.floor((w.fill_total - w.filled) / w.fill_rate + 0.5)
    end
  end
  return ev
end

--- Starts following: returns `w` with `on_status`, `on_progress`,
-- `on_change`, `on_fill`, `on_phase` (give them to the operation), `run(fn, ...)` (runs
-- the operation with the display's timer), `report_download(ok)` (once, at
-- the end) and `restore()` (stops observing, clears the live line).
-- @param out the command's output
-- @param client the client
-- @string name what the lines and events name (`replica = name`)
-- @tparam[opt] table opts `clock` (a function; core.monotonic by default)
function watch.new(out, client, name, opts)
  local clock = opts and opts.clock or core.monotonic
  local w = { name = name, phase = "sending", status = nil, bytes = 0, frame = 0, started = clock() }
  local downloads, fills, fill_records = watch.meter(), watch.meter(), watch.meter()
  local last_draw, last_event = -math.huge, nil

  -- the rates as of `now`, from the samples kept
  local function measure(now)
    w.download_rate = downloads.rate(now)
    w.fill_rate = fills.rate(now)
    w.records_rate = not w.fill_ended and fill_records.rate(now) or nil
    local until_ = w.fill_ended or now
    if not w.records_rate and w.fill_started and (w.fill_records or 0) > 0 and until_ > w.fill_started then
      -- the records come in bursts (and all at once at the end): over the whole fill
      w.records_rate = w.fill_records / (until_ - w.fill_started)
    end
  end

  -- redraws the terminal line (at most every TICK unless forced), or emits
  -- a progress event (at most every EVENT_PERIOD)
  local function show(force)
    local now = clock()
    if out.mode == "tty" then
      if not force and now - last_draw < TICK then return end
      last_draw = now
      w.frame = w.frame + 1
      measure(now)
      out:live(watch.render(w, now))
    elseif out.mode == "json" then
      if last_event and now - last_event < EVENT_PERIOD then return end
      if not last_event and now - w.started < EVENT_PERIOD then return end
      last_event = now
      measure(now)
      out:emit(progress_event(w, now))
    end
  end
  w.tick = function() show(false) end

  w.stop_observing = client:observe(function(event)
    if event.type ~= "request" then return nil end
    -- (a GET once the store's building began fetches an attachment: that step's line stays)
    if event.method == "GET" and w.phase ~= "building" then
      w.phase = "downloading"
      downloads.add(clock(), w.bytes) -- the rate counts from the request, not from its first bytes
    end
    if out.mode == "tty" then show(true) end
    return nil
  end)

  local last_report
  w.on_progress = function(received, total)
    if w.filling and total then
      -- a store filling as the result downloads (one pass): the download is the store's fill, its
      -- line the fill's (bytes of the file, records in the store); the last comes from w.filled
      w.bytes, w.total = received, total
      downloads.add(clock(), received)
      if received < total then return w.on_fill(received, total, w.records or 0) end
      return
    end
    w.phase = "downloading"
    w.bytes, w.total = received, total
    downloads.add(clock(), received)
    if out.mode == "tty" then return show(false) end
    if total and received >= total then return end
    local report = report_of(received, total)
    if report == last_report then return end
    last_report = report
    local percent = total and total > 0 and 100 * received // total or nil
    if out.mode == "json" then
      out:emit{ event = "download", replica = name, done = false, bytes = received, total = total,
                percent = percent, records = w.records }
    else
      out:progress(("%s: downloading %s%s%s"):format(name, output.human_bytes(received),
        total and (" of %s (%d%%)"):format(output.human_bytes(total), percent) or "",
        w.records and (", %d records"):format(w.records) or ""))
    end
  end

  local last_fill
  w.on_fill = function(bytes, total, records)
    local now = clock()
    if w.phase ~= "filling" then w.fill_started = now end
    w.phase, w.filled, w.fill_total, w.fill_records = "filling", bytes, total, records
    fills.add(now, bytes)
    fill_records.add(now, records)
    local done = bytes >= total
    if done then w.fill_ended = now end
    if out.mode == "tty" then return show(done) end
    local report = report_of(bytes, total)
    if report == last_fill then return end
    last_fill = report
    local percent = total > 0 and 100 * bytes // total or 100
    if out.mode == "json" then
      out:emit{ event = "fill", replica = name, done = done, bytes = bytes, total = total, percent = percent,
                records = records }
    else
      out:progress(("%s: filling the store %s of %s (%d%%), %d records"):format(name, output.human_bytes(bytes),
        output.human_bytes(total), percent, records))
    end
  end

  -- the records a store filling as the result downloads has read so far (store.building's on_applied)
  w.on_applied = function(records)
    w.filling, w.records = true, records
  end

  -- the download that filled the store ended: its last fill line, with every record (not w.filled: bytes)
  w.fill_ended_with = function(records)
    local size = w.total or w.bytes
    if w.filling and size > 0 then w.on_fill(size, size, records) end
  end

  -- a step of the store's building after its fill (store.create_from's on_phase)
  w.on_phase = function(text)
    w.phase, w.step, w.step_started = "building", text, clock()
    if out.mode == "json" then
      out:emit{ event = "phase", replica = name, step = text }
    elseif out.mode == "lines" then
      out:progress(("%s: %s"):format(name, text))
    else
      show(true)
    end
  end

  w.on_status = function(status)
    w.phase, w.status = "job", status.status
    if out.mode == "json" then
      out:emit{ event = "job", replica = name, status = status.status }
    elseif out.mode == "lines" then
      out:progress(("%s: job %s"):format(name, tostring(status.status)))
    else
      show(true)
    end
  end

  w.on_change = function()
    w.records = (w.records or 0) + 1
    if out.mode == "tty" then show(false) end
  end

  w.restore = function()
    w.stop_observing()
    out:clear_live()
  end

  w.report_download = function(ok)
    if w.phase ~= "downloading" and w.phase ~= "filling" and w.phase ~= "building" then return end
    if out.mode == "tty" then show(true) end
    if out.mode == "json" then
      out:emit{ event = "download", replica = name, ok = ok, done = true,
                bytes = w.bytes > 0 and w.bytes or nil, total = w.total, records = w.records }
    end
  end

  --- Runs `fn(...)` with the display's timer: on a terminal or with --json
  -- as a task beside a ticker task; without a terminal directly.
  w.run = function(fn, ...)
    if out.mode == "lines" then return fn(...) end
    return watch.with_ticker(w.tick, TICK, fn, ...)
  end
  return w
end

-- The main thread of the interpreter: where Lua's own Ctrl-C handler sets
-- its hook (lua.c hooks that thread only).
local main_thread = coroutine.running()

-- Ctrl-C while a task runs Lua code: lua.c's handler hooks the main thread,
-- which sits in coroutine.resume until the task yields, so a long run of
-- Lua code in the task (a store being filled) would not stop. The task
-- looks for that pending hook every few thousand instructions and raises
-- the same "interrupted!" itself (the hook is cleared: raised once).
local function interrupt_check()
  if debug.gethook(main_thread) == "external hook" then
    debug.sethook(main_thread)
    error("interrupted!", 2)
  end
end

--- Runs `fn(...)` as a task of geoservices.run beside a task that calls
-- `tick()` every `period` seconds until fn returns; returns what fn returns
-- and raises what it raises.
function watch.with_ticker(tick, period, fn, ...)
  local args = table.pack(...)
  return geoservices.run(function()
    debug.sethook(interrupt_check, "", 4096)
    local done = false
    local ticker = geoservices.spawn(function()
      debug.sethook() -- the ticker never raises Ctrl-C: the main thread does, once the operation yields
      while not done do
        -- cancelled (a Ctrl-C closed the scheduler): the display stops with it
        if not geoservices.sleep(period) then break end
        if not done then tick() end
      end
    end)
    local results = table.pack(pcall(fn, table.unpack(args, 1, args.n)))
    done = true
    ticker:cancel()
    debug.sethook()
    if not results[1] then error(results[2], 0) end
    return table.unpack(results, 2, results.n)
  end)
end

return watch
