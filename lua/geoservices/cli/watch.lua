--- Follows one long operation of the client on the display, as `sync` does:
-- job status changes (a spinner on a terminal, a line or a `job` event
-- elsewhere), polls, the result file's download (bytes as they arrive
-- through the library's on_progress: a bar on a terminal, a line or a
-- `download` event per tenth of the file elsewhere), the records parsed,
-- and a replica store being filled from the file (on_fill: the same way,
-- `fill` events).
-- Used by `sync` and `replica create`; it observes the client (Client:observe), it
-- never replaces a method.
local core = require "geoservices.core"
local output = require "geoservices.cli.output"

local watch = {}

-- Bytes between two download reports when the size is unknown; with a
-- known size there is one report per tenth of it.
local PROGRESS_STEP = 4 * 1024 * 1024

-- Which report `bytes` falls in (its tenth of total, or its PROGRESS_STEP
-- without a total): a line or an event is written once per report.
local function report_of(bytes, total)
  if total and total > 0 then return ("%d/%d"):format(10 * bytes // total, total) end
  return tostring(bytes // PROGRESS_STEP)
end

--- Starts following: returns `w` with `on_status`, `on_progress`,
-- `on_change`, `on_fill` (give them to the operation), `report_download(ok)` (once, at
-- the end) and `restore()` (stops observing, clears the live line).
-- @param out the command's output
-- @param client the client
-- @string name what the lines and events name (`replica = name`)
function watch.new(out, client, name)
  local w = { status = "sending", records = nil, bytes = 0, tick = 0, frame = 0, started = core.monotonic() }
  local last_draw = 0
  local function draw(force)
    if out.mode ~= "tty" then return end
    local now = core.monotonic()
    if not force and now - last_draw < 0.1 then return end
    last_draw = now
    if w.filling then
      out:live(("%s filling the store %s"):format(name, output.progress_bar(w.filled, w.fill_total, w.fill_records,
        0, nil, true)))
    elseif w.downloading then
      w.frame = w.frame + 1
      out:live(("%s downloading %s"):format(name, output.progress_bar(w.bytes, w.total, w.records, w.frame, nil, true)))
    else
      local spinner = output.SPINNER[w.tick % #output.SPINNER + 1]
      out:live(("%s %s %s %.1f s"):format(spinner, name, w.status, now - w.started))
    end
  end
  w.stop_observing = client:observe(function(event)
    if event.type ~= "request" then return nil end
    if event.method == "GET" then w.downloading = true else w.tick = w.tick + 1 end
    draw(true)
    return nil
  end)
  local last_report
  w.on_progress = function(received, total)
    w.downloading = true
    w.bytes, w.total = received, total
    if out.mode == "tty" then return draw(false) end
    if total and received >= total then return end
    local report = report_of(received, total)
    if report == last_report then return end
    last_report = report
    local percent = total and total > 0 and 100 * received // total or nil
    if out.mode == "json" then
      out:emit{ event = "download", replica = name, done = false, bytes = received, total = total,
                percent = percent, records = w.records }
    else
      out:line(("%s: downloading %s%s%s"):format(name, output.human_bytes(received),
        total and (" of %s (%d%%)"):format(output.human_bytes(total), percent) or "",
        w.records and (", %d records"):format(w.records) or ""))
    end
  end
  local last_fill
  w.on_fill = function(bytes, total, records)
    w.filling, w.filled, w.fill_total, w.fill_records = true, bytes, total, records
    local done = bytes >= total
    if out.mode == "tty" then return draw(done) end
    local report = report_of(bytes, total)
    if report == last_fill then return end
    last_fill = report
    local percent = total > 0 and 100 * bytes // total or 100
    if out.mode == "json" then
      out:emit{ event = "fill", replica = name, done = done, bytes = bytes, total = total, percent = percent,
                records = records }
    else
      out:line(("%s: filling the store %s of %s (%d%%), %d records"):format(name, output.human_bytes(bytes),
        output.human_bytes(total), percent, records))
    end
  end
  w.on_status = function(status)
    w.status = status.status
    if out.mode == "json" then
      out:emit{ event = "job", replica = name, status = status.status }
    elseif out.mode == "lines" then
      out:line(("%s: job %s"):format(name, tostring(status.status)))
    else
      draw(true)
    end
  end
  w.on_change = function()
    w.records = (w.records or 0) + 1
    draw(false)
  end
  w.restore = function()
    w.stop_observing()
    out:clear_live()
  end
  w.report_download = function(ok)
    if not w.downloading then return end
    draw(true)
    if out.mode == "json" then
      out:emit{ event = "download", replica = name, ok = ok, done = true,
                bytes = w.bytes > 0 and w.bytes or nil, total = w.total, records = w.records }
    end
  end
  return w
end

return watch
