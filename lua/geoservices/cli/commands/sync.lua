--- `geoservices sync STATE...`: synchronizes replicas from their state
-- files, following each on the display (job status, the download's bytes,
-- records) through the client's observer and the operation's callbacks.
local core = require "geoservices.core"
local files = require "geoservices.cli.files"
local geoservices = require "geoservices"
local output = require "geoservices.cli.output"

local EXIT = output.EXIT

local function generation_text(result)
  if result.layerServerGens then
    local parts = {}
    for _, l in ipairs(result.layerServerGens) do parts[#parts + 1] = ("%s:%s"):format(l.id, l.serverGen) end
    return table.concat(parts, " ")
  end
  return tostring(result.replicaServerGen)
end

-- Bytes between two download progress reports when the size is unknown; with
-- a known size there is one report per tenth of it.
local PROGRESS_STEP = 4 * 1024 * 1024

-- Follows one synchronization on the display: job status changes, polls
-- (spinner ticks), the result download (bytes as they arrive, through the
-- library's on_progress) and parsed records.
local function sync_watch(out, client, name)
  local w = { status = "sending", records = nil, bytes = 0, tick = 0, frame = 0, started = core.monotonic() }
  local last_draw = 0
  local function draw(force)
    if out.mode ~= "tty" then return end
    local now = core.monotonic()
    if not force and now - last_draw < 0.1 then return end
    last_draw = now
    if w.downloading then
      w.frame = w.frame + 1 -- moves the marker when the size is unknown
      out:live(("%s %s %s"):format(name, "downloading",
        output.progress_bar(w.bytes, w.total, w.records, w.frame, nil, true)))
    else
      local spinner = output.SPINNER[w.tick % #output.SPINNER + 1]
      out:live(("%s %s %s %.1f s"):format(spinner, name, w.status, now - w.started))
    end
  end
  -- Every request of this client ticks the spinner; a GET is the result
  -- file's download (the client's observer tells, nothing is replaced).
  w.stop_observing = client:observe(function(event)
    if event.type ~= "request" then return nil end
    if event.method == "GET" then w.downloading = true else w.tick = w.tick + 1 end
    draw(true)
    return nil
  end)
  -- Bytes of the result file as they arrive (total: nil when unknown). The
  -- terminal bar is redrawn at most ten times a second; elsewhere a report
  -- goes out only when the download enters a new tenth of its size (or a
  -- new PROGRESS_STEP bytes), never for the end, which the download event
  -- above reports once the file is complete.
  local last_report
  w.on_progress = function(received, total)
    w.downloading = true
    w.bytes, w.total = received, total
    if out.mode == "tty" then return draw(false) end
    if total and received >= total then return end
    local report = total and total > 0 and ("%d/%d"):format(10 * received // total, total)
      or tostring(received // PROGRESS_STEP)
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
  -- The download's end, once: bytes of the whole file and its announced size.
  w.report_download = function(ok)
    if not w.downloading then return end
    draw(true)
    if out.mode == "json" then
      out:emit{ event = "download", replica = name, ok = ok, done = true,
                bytes = w.bytes > 0 and w.bytes or nil, total = w.total }
    end
  end
  return w
end

-- Where the downloaded changes go without --output: beside the state, named
-- by the generation they start from, so no sync overwrites another's and
-- nothing is thrown away unless --discard says so.
local function default_output(path, replica)
  local from
  if replica.model == "perLayer" then
    local parts = {}
    for _, l in ipairs(replica.layers) do parts[#parts + 1] = ("%s-%s"):format(l.id, tostring(l.serverGen)) end
    from = table.concat(parts, "_")
  else
    from = tostring(replica.replicaServerGen)
  end
  return ("%s.changes-from-%s.json"):format(path:gsub("%.json$", ""), from)
end

-- A replica store (STORE.gpkg): its own queue is the edits, the changes go into it.
local function sync_store(args, out, client, path, edits_text)
  local name = files.basename(path)
  if edits_text then
    return nil, geoservices.errors.invalid("--edits", "a store uploads its own queued edits"), EXIT.usage
  end
  local st, err = geoservices.store.open(path)
  if not st then return nil, err, EXIT.usage end
  local watch = sync_watch(out, client, name)
  local opts = { params = { transportType = args.transport, async = args.async or nil },
                 direction = args.direction, poll_interval = args.poll_interval, timeout = args.wait_timeout,
                 on_status = watch.on_status, on_progress = watch.on_progress, lock_timeout = args.lock_timeout }
  out:server_work{ what = ("the synchronization of %s (its edits may have reached it)"):format(name),
                   follow = (out.follow_prefix or "geoservices") .. " sync " .. path }
  local ok, result, sync_err = pcall(st.sync, st, client, opts)
  st:close()
  if ok then watch.report_download(result ~= nil) end
  watch.restore()
  if not ok then error(result, 0) end
  out:server_work(nil)
  if not result then return nil, sync_err end
  return result
end

local function sync_one(args, out, client, path, edits_text, output_path)
  if path:match("%.gpkg$") then return sync_store(args, out, client, path, edits_text) end
  local name = files.basename(path)
  local replica, err = geoservices.replica(path)
  if not replica then return nil, err, EXIT.usage end
  if not output_path and not args.discard then output_path = default_output(path, replica) end
  local params = { syncDirection = args.direction, transportType = args.transport, async = args.async or nil }
  local watch = sync_watch(out, client, name)
  local opts = { params = params, poll_interval = args.poll_interval, timeout = args.wait_timeout,
                 on_status = watch.on_status, on_progress = watch.on_progress, on_change = watch.on_change,
                 output = output_path, resend = args.resend or nil, lock_timeout = args.lock_timeout }
  -- an async job, or edits, may keep running on the server should Ctrl-C
  -- stop the command here: running the same sync again follows them (the
  -- state journals the edits and the job; see geoservices.sync)
  if args.async or edits_text then
    out:server_work{ what = args.async and ("the synchronization job of %s"):format(name)
                       or ("the synchronization of %s (its edits may have reached it)"):format(name),
                     follow = (out.follow_prefix or "geoservices") .. " sync " .. path
                       .. (args.async and " --async" or "") }
  end
  local ok, result, sync_err = pcall(client.sync, client, replica, edits_text, opts)
  if ok then watch.report_download(result ~= nil) end
  watch.restore()
  if not ok then error(result, 0) end -- Ctrl-C too: main names the work still running
  out:server_work(nil)
  if not result then return nil, sync_err end
  return result, nil, nil, output_path
end

return function(args, out, client)
  local states = args.state
  local edits_text
  if args.edits then
    if #states > 1 then return output.usage_error(out, "sync: --edits goes with exactly one state file") end
    local text, err = files.read(args.edits)
    if not text then return output.fail(out, err, { command = "sync" }) end
    edits_text = text
  end
  local summary = { command = "sync", replicas = #states, synchronized = 0, failed = 0, partial = 0 }
  local worst = EXIT.ok
  for _, path in ipairs(states) do
    local output_path
    if args.output then
      output_path = #states == 1 and args.output
        or (args.output .. "/" .. files.basename(path):gsub("%.json$", "") .. ".result.json")
    end
    local result, err, code, saved_to = sync_one(args, out, client, path, edits_text, output_path)
    output_path = saved_to
    if not result and err == output.DRY_RUN then -- luacheck: ignore 542 (main prints the dry run)
    elseif not result then
      summary.failed = summary.failed + 1
      out:error(err, { replica = path })
      code = code or output.exit_for(err)
      if worst == EXIT.ok or worst == EXIT.partial or code == EXIT.failed then worst = code end
    else
      summary.synchronized = summary.synchronized + 1
      local failed = #result.failed_edits
      if failed > 0 or result.partial then
        summary.partial = summary.partial + 1
        if worst == EXIT.ok then worst = EXIT.partial end
      end
      if out.mode == "json" then
        out:emit{ event = "replica", replica = path, replicaID = result.replicaID, uploaded = result.succeeded,
                  failed = failed, downloaded = result.downloaded, records = result.downloaded,
                  generation = result.replicaServerGen, layerServerGens = result.layerServerGens,
                  output = output_path, partial = result.partial or failed > 0, applied = result.applied,
                  overwritten = result.overwritten and #result.overwritten or nil }
        for _, f in ipairs(result.failed_edits) do
          local ev = { event = "failed_edit", replica = path }
          for k, v in pairs(f) do ev[k] = v end
          out:emit(ev)
        end
      else
        out:line(("%s: %s"):format(files.basename(path), tostring(result)))
        for _, f in ipairs(result.failed_edits) do
          out:line(("    failed %s of %s %s in layer %s: %s (code %s)"):format(f.op, f.target, tostring(f.globalId),
            tostring(f.layer), tostring(f.description), tostring(f.code)))
        end
        if result.applied then
          out:line(("    %d downloaded changes applied to the store, %d local edits uploaded, %d overwritten by "
            .. "the server's state"):format(result.applied, result.uploaded or 0, #(result.overwritten or {})))
        elseif output_path then out:line("    downloaded changes saved to " .. output_path)
        else
          out:line(("    %d downloaded changes discarded (--discard)"):format(result.downloaded or 0))
        end
        if result.resolved then
          out:line("    an interrupted earlier synchronization was resolved first: " .. tostring(result.resolved))
        end
        out:line("    new generation " .. generation_text(result))
      end
    end
  end
  if args.dry_run and worst == EXIT.ok then return nil end -- main prints what was captured
  if out.mode ~= "json" and #states > 1 then
    out:line(("%d of %d replicas synchronized, %d with failed edits, %d failed"):format(summary.synchronized,
      #states, summary.partial, summary.failed))
  end
  return out:result(worst, summary)
end

