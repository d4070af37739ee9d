--- `geoservices sync STATE...`: synchronizes replicas from their state
-- files or stores, following each on the display (job status, the
-- download's bytes, records) through cli/watch.lua.
local files = require "geoservices.cli.files"
local geoservices = require "geoservices"
local geoservices_result = require "geoservices.sync.result"
local hints = require "geoservices.cli.hints"
local output = require "geoservices.cli.output"
local watch_mod = require "geoservices.cli.watch"

local EXIT = output.EXIT

-- A store's summary as a JSON object (geoservices.sync.result.summary: the same names).
local function summary_of(summary)
  local o = {}
  for _, k in ipairs(geoservices_result.SUMMARY_FIELDS) do o[k] = summary[k] end
  o.conflicts = summary.conflicts
  return o
end

local function generation_text(result)
  if result.layerServerGens then
    local parts = {}
    for _, l in ipairs(result.layerServerGens) do parts[#parts + 1] = ("%s:%s"):format(l.id, l.serverGen) end
    return table.concat(parts, " ")
  end
  return tostring(result.replicaServerGen)
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
  for _, note in ipairs(st:schema_notes()) do out:progress(note) end -- a table's shape the user changed
  local watch = watch_mod.new(out, client, name)
  local opts = { params = { transportType = args.transport, async = args.async or nil },
                 direction = args.direction, poll_interval = args.poll_interval, timeout = args.wait_timeout,
                 on_status = watch.on_status, on_progress = watch.on_progress, on_fill = watch.on_fill,
                 lock_timeout = args.lock_timeout, busy_timeout = args.busy_timeout,
                 adopt_copy = args.adopt_copy or nil, conflicts = args.conflicts, late_window = args.late_window }
  out:server_work{ what = ("the synchronization of %s (its edits may have reached it)"):format(name),
                   follow = hints.follow(out, "sync", path) }
  local ok, result, sync_err = pcall(watch.run, st.sync, st, client, opts)
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
  local watch = watch_mod.new(out, client, name)
  local opts = { params = params, poll_interval = args.poll_interval, timeout = args.wait_timeout,
                 on_status = watch.on_status, on_progress = watch.on_progress, on_change = watch.on_change,
                 output = output_path, lock_timeout = args.lock_timeout, late_window = args.late_window }
  -- an async job, or edits, may keep running on the server should Ctrl-C
  -- stop the command here: running the same sync again follows them (the
  -- state journals the edits and the job; see geoservices.sync)
  if args.async or edits_text then
    out:server_work{ what = args.async and ("the synchronization job of %s"):format(name)
                       or ("the synchronization of %s (its edits may have reached it)"):format(name),
                     follow = hints.follow(out, "sync", path, args.async and "--async" or nil) }
  end
  local ok, result, sync_err = pcall(watch.run, client.sync, client, replica, edits_text, opts)
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
                  overwritten = result.overwritten and #result.overwritten or nil,
                  summary = result.summary and summary_of(result.summary) or nil,
                  summary_text = result.summary and tostring(result.summary) or nil }
        for _, f in ipairs(result.failed_edits) do
          local ev = { event = "failed_edit", replica = path }
          for k, v in pairs(f) do ev[k] = v end
          out:emit(ev)
        end
        for _, note in ipairs(result.store_notes or {}) do
          out:emit{ event = "store_note", replica = path, message = note }
        end
      else
        out:line(("%s: %s"):format(files.basename(path), tostring(result)))
        for _, f in ipairs(result.failed_edits) do
          out:line(("    failed %s of %s %s in layer %s: %s (code %s)"):format(f.op, f.target, tostring(f.globalId),
            tostring(f.layer), tostring(f.description), tostring(f.code)))
        end
        if result.summary then -- luacheck: ignore 542 (a store's: one count per outcome in the line above)
        elseif output_path then out:line("    downloaded changes saved to " .. output_path)
        else
          out:line(("    %d downloaded changes discarded (--discard)"):format(result.downloaded or 0))
        end
        for _, note in ipairs(result.store_notes or {}) do out:line("    " .. note) end
        if result.resolved then
          out:line((result.failed_job and "    the async job failed on one edit and applied none; its edits were %s "
            .. "and sent again in one synchronous request" or "    an interrupted earlier synchronization was "
            .. "resolved first: %s"):format(tostring(result.resolved)))
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

