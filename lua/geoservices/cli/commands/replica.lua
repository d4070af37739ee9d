--- `geoservices replica create|resume|info|unregister`: a replica's
-- lifecycle on the server, kept in a replica state file (geoservices.replica)
-- that `geoservices sync` then synchronizes.
--
--     geoservices replica create Parcels --layers 0,1 --name crew-1 [--model perLayer] crew-1.json
--     geoservices replica info crew-1.json          # the local state and the server's, side by side
--     geoservices replica unregister crew-1.json    # the server forgets it; the state is marked closed
--     geoservices replica unregister Parcels '*'    # every replica of Parcels the user can reach (asks first)
--     geoservices replica resume crew-1.json        # follow a createReplica job an interrupted create left
--
-- Where a new replica goes is one swappable table, `destination` below:
-- today a JSON state file with the data saved beside it
-- (`<state>.data.json`, the result file as the server wrote it).
local core = require "geoservices.core"
local files = require "geoservices.cli.files"
local geoservices = require "geoservices"
local hints = require "geoservices.cli.hints"
local json = require "geoservices.base.json"
local output = require "geoservices.cli.output"
local watch = require "geoservices.cli.watch"

local EXIT = output.EXIT

local replica_cmd = {}

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function base_of(path)
  return (path:gsub("%.json$", ""))
end

-- The journal of a create whose job runs on the server: op:to_json(), so
-- `replica resume OUT` follows it after an interruption or a crash.
local function journal_path(path)
  return base_of(path) .. ".job.json"
end

-- The check both destinations make: OUT is new and its folder writable
-- (a temporary file is made there and removed); `what` names what OUT holds.
local function check_new_out(path, what)
  if exists(path) then
    return geoservices.errors.invalid("OUT", ("%s exists: a new replica never overwrites %s"):format(path, what))
  end
  local probe, msg = core.make_temp(path)
  if not probe then return geoservices.errors.invalid("OUT", "must be a writable file path: " .. tostring(msg)) end
  os.remove(probe)
  return nil
end

--- Where a new replica goes: the one step the store integration swaps.
-- A destination has
-- * `check(path)` -> nil | err: refuse before anything is sent;
-- * `create_opts(path)` -> the create_replica options that say where the data streams
--   (`output`, or `on_change`...);
-- * `prepare(path, client, service, params, w)` (optional) -> fill | nil, err: before the request
--   leaves, a store to fill while the result downloads (geoservices.store.building: the result is
--   parsed once); w.on_fill, w.on_phase and w.tick follow it;
-- * `keep(path, result, client, w, fill)` -> info | nil, err: once the whole result is in (the
--   replica then exists on the server); info is `{state =, data =}`, printed and emitted, and
--   `after(info)`, what comes once the replica is complete and its journal gone (a store's
--   attachments fetched);
-- * `params(params)` (optional): what the destination asks of createReplica besides the user;
-- * `discard(path)` (optional): removes what an interrupted run left that nothing reads again;
-- * `name(path)` -> what the lines and events call it.
-- This one writes a replica state file (geoservices.replica) and the data beside it.
replica_cmd.json_destination = {
  check = function(path)
    local data = base_of(path) .. ".data.json"
    if not exists(path) and exists(data) then
      return geoservices.errors.invalid("OUT", ("%s exists: a new replica's data never overwrites a file"):format(data))
    end
    return check_new_out(path, "a state file")
  end,
  create_opts = function(path)
    return { output = base_of(path) .. ".data.json" }
  end,
  keep = function(path, result)
    local r, err = geoservices.replica(path, result:replica_state())
    if not r then return nil, err end
    return { state = path, data = result.output }
  end,
  name = function(path)
    return files.basename(path)
  end,
}

-- This one builds a replica store (geoservices.store, a GeoPackage) at OUT,
-- as geoservices.store.create does: the store fills while the data
-- downloads (its bytes also go to a temporary file beside it), then it is
-- finished in the same transaction (nothing at OUT unless it committed).
replica_cmd.gpkg_destination = {
  check = function(path) return check_new_out(path, "a store") end,
  create_opts = function(path)
    return { output = path .. ".download.json" }
  end,
  prepare = function(path, client, service, params, w)
    -- parameters createReplica would refuse are refused first, before anything is read
    local fields, plan = require("geoservices.sync.create_params").encode(params, client.enum_prefix)
    if not fields then return nil, plan end
    local infos, err = require("geoservices.store.sync.create").layer_infos(client, service, plan.layers)
    if not infos then return nil, err end
    return geoservices.store.building(path, infos, { on_fill = w.on_fill, on_phase = w.on_phase, on_tick = w.tick,
                                                     on_applied = w.on_applied })
  end,
  keep = function(path, result, client, w, fill)
    local ok, st, err = pcall(function()
      -- an embedded result did not go into the store as it came: from the file it was saved to
      if result.filled then
        w.fill_ended_with(result.downloaded)
      else
        local n, aerr = fill:apply_file(result.output, w.on_fill)
        if not n then return nil, aerr end
      end
      return fill:finish(require("geoservices.store.sync.create").replica_info(result))
    end)
    os.remove(result.output) -- in the store now, or not to be used (a Ctrl-C too)
    result.output = nil
    if not ok then error(st, 0) end
    if not st then return nil, err end
    -- then, the store complete (a Ctrl-C says so), the attachments' bytes by URL, one by one into
    -- their blobs, as geoservices.store.create does: one that fails (or a Ctrl-C left) is named
    -- and fetched by the next sync
    return { state = path, after = function(info)
      local done <close> = st
      if result.attachments > 0 then
        w.on_phase("fetching the attachments")
        info.attachments = require("geoservices.store.file.attachments").fetch(done, client)
      end
    end }
  end,
  -- a run interrupted before keep: its intermediate result, which nothing reads again
  discard = function(path) os.remove(path .. ".download.json") end,
  -- attachments by URL: their bytes go to the store's blobs, never base64 text in the result
  params = function(params)
    if params.returnAttachments and params.returnAttachmentsDataByUrl == nil then
      params.returnAttachmentsDataByUrl = true
    end
  end,
  name = function(path)
    return files.basename(path)
  end,
}

replica_cmd.destination = replica_cmd.json_destination

local function destination_of(path)
  if path:match("%.gpkg$") then return replica_cmd.gpkg_destination end
  return replica_cmd.destination
end

-- ------------------------------------------------------------------ create

local function generation_text(result)
  if result.layerServerGens then
    local parts = {}
    for _, l in ipairs(result.layerServerGens) do parts[#parts + 1] = ("%s:%s"):format(l.id, tostring(l.serverGen)) end
    return table.concat(parts, " ")
  end
  return tostring(result.replicaServerGen)
end

-- --param NAME=VALUE: a parameter passed through as it is (a JSON value is
-- sent as its text, which is what the server reads).
local function extra_params(list, params)
  for _, item in ipairs(list or {}) do
    local name, value = item:match("^([%w_]+)=(.*)$")
    if not name then return geoservices.errors.invalid("--param", "must be NAME=VALUE, got " .. item) end
    params[name] = value
  end
  return nil
end

-- Follows a createReplica (a new one, or a job resumed) to its end and
-- reports it: the library call is `run(opts)`.
-- After a create whose replica the server made but whose store (or state
-- file) could not be written (a full disk, a read-only folder: kind "io"):
-- nothing local refers to the replica, so it is unregistered now and the
-- journal goes; when that fails, the error names the command that does it.
local function unregister_orphan(out, client, path, service, err)
  if not (type(err) == "table" and err.kind == "io" and err.created and err.replicaID and service) then return end
  local note = " The replica " -- the library's note, for a caller that has no CLI
  local at = err.message:find(note, 1, true)
  if at then err.message = err.message:sub(1, at - 1) end
  local done = client:unregister_replica(service, err.replicaID)
  if done then
    os.remove(journal_path(path))
    err.message = ("%s; the replica %s it made was unregistered, nothing is left on the server: make room (or "
      .. "choose another folder) and create again"):format(err.message, err.replicaID)
  else
    err.message = ("%s; the replica %s was made on the server: unregister it with `%s`"):format(err.message,
      err.replicaID, hints.follow(out, "replica", "unregister", service, err.replicaID))
  end
end

local function follow(out, client, path, dest, run, poll_opts, service, params)
  local name = dest.name(path)
  local w = watch.new(out, client, name)
  local kept
  local opts = dest.create_opts(path)
  -- what a killed create or resume left: the partial download (<output>.partXXXXXX)
  if opts.output then core.remove_temps(opts.output) end
  -- no on_change: the records stream through the C core as geoservices.store.create's do, into the
  -- store as they arrive, never a Lua table each (on_change only to count them: 1M points took
  -- 1,017 MiB, issue 38)
  opts.on_status, opts.on_progress = w.on_status, w.on_progress
  if dest.prepare and not poll_opts.dry_run then
    local fill, err = dest.prepare(path, client, service, params, w)
    if not fill then
      w.restore()
      out:server_work(nil) -- nothing was sent
      out:error(err, { replica = path })
      return out:result(output.exit_for(err), { command = "replica", replica = path })
    end
    opts.fill = fill
  end
  poll_opts.dry_run = nil
  for k, v in pairs(poll_opts) do opts[k] = v end
  opts.on_job = function(op)
    local ok, msg = core.write_file_atomic(journal_path(path), op:to_json() .. "\n")
    if not ok then return nil, geoservices.errors.new("io", "cannot journal the job: " .. tostring(msg)) end
    out:server_work{ what = ("the createReplica job of %s"):format(name),
                     follow = hints.follow(out, "replica", "resume", path) }
    return true
  end
  opts.on_done = function(result)
    local info, err = dest.keep(path, result, client, w, opts.fill)
    if not info then return nil, err end
    kept = info
    os.remove(journal_path(path))
    -- from here an interruption leaves nothing to follow: it says the replica is complete
    out:server_work(nil)
    out.complete = ("%s is complete"):format(name)
    if info.after then info.after(info) end
    return true
  end
  local ok, result, err = pcall(w.run, run, opts)
  if opts.fill then opts.fill:abandon() end -- unless finished: what an error or a Ctrl-C left of the store
  if ok then w.report_download(result ~= nil) end
  w.restore()
  if not ok then -- Ctrl-C too: main names the job still running
    -- what the interrupted run was writing goes: a partial download, the store's intermediate result
    if opts.output then core.remove_temps(opts.output) end
    if dest.discard then dest.discard(path) end
    error(result, 0)
  end
  out:server_work(nil)
  if not result then
    if err == output.DRY_RUN then return nil end
    if type(err) == "table" and err.kind == "job" and err.code ~= "job_not_found" then os.remove(journal_path(path)) end
    unregister_orphan(out, client, path, service, err)
    out:error(err, { replica = path })
    return out:result(output.exit_for(err), { command = "replica", replica = path })
  end
  local counts = json.object()
  for id, c in pairs(result.counts) do counts[tostring(id)] = c end
  if out.mode == "json" then
    out:emit{ event = "replica", replica = path, created = true, replicaID = result.replicaID,
              replicaName = result.replicaName, service = result.service, model = result.syncModel,
              layers = json.array(result.layers), features = result.features, attachments = result.attachments,
              records = result.downloaded, counts = counts, generation = result.replicaServerGen,
              layerServerGens = result.layerServerGens, state = kept and kept.state, data = kept and kept.data,
              fetched = kept and kept.attachments and kept.attachments.fetched,
              partial = result.partial }
  else
    out:line(("%s: %s"):format(name, tostring(result)))
    for _, id in ipairs(result.layers) do
      local c = result.counts[id]
      out:line(("    layer %s: %d features, %d attachments"):format(tostring(id), c.features, c.attachments))
    end
    if kept and kept.state then
      out:line((path:match("%.gpkg$") and "    replica store (GeoPackage) saved to " or "    replica state saved to ")
        .. kept.state)
    end
    if kept and kept.data then out:line("    data saved to " .. kept.data) end
    local fetched = kept and kept.attachments
    if fetched then
      out:line(("    %d attachments fetched (%s)"):format(fetched.fetched, output.human_bytes(fetched.bytes)))
      for _, f in ipairs(fetched.failed) do
        out:line(("    attachment %s (%s) not fetched: %s; the next sync fetches it"):format(f.globalId,
          tostring(f.name), f.message))
      end
    end
    out:line("    generation " .. generation_text(result))
  end
  return out:result(result.partial and EXIT.partial or EXIT.ok, { command = "replica", replica = path })
end

local function create(args, out, client)
  local path = args.out
  local dest = destination_of(path)
  local refused = dest.check(path)
  if refused then return output.fail(out, refused, { command = "replica" }) end
  if exists(journal_path(path)) then
    return output.usage_error(out, ("a createReplica job for %s is journaled in %s: follow it with `%s`"):format(
      path, journal_path(path), hints.follow(out, "replica", "resume", path)))
  end
  local params = {
    replicaName = args.name, layers = args.layers, syncModel = args.model, syncDirection = args.direction,
    transportType = args.transport, returnAttachments = args.attachments or nil, geometry = args.geometry,
    inSR = args.in_sr and (math.tointeger(tonumber(args.in_sr)) or args.in_sr) or nil,
    async = args.sync and false or nil,
  }
  local bad = extra_params(args.param, params)
  if bad then return output.fail(out, bad, { command = "replica" }) end
  if dest.params then dest.params(params) end
  -- until the job is known (on_job), an interruption leaves at most a replica the server may have made
  out:server_work{ what = ("the createReplica request of %s (a replica%s may have been created)"):format(
                     dest.name(path), args.name and (" named " .. args.name) or ""),
                   verb = "see whether it was (then unregister it, or create again)",
                   follow = hints.follow(out, "replicas", args.service) }
  return follow(out, client, path, dest, function(opts)
    return client:create_replica(args.service, params, opts)
  end, { poll_interval = args.poll_interval, timeout = args.wait_timeout,
          check = not args.dry_run, dry_run = args.dry_run }, args.service, params)
  -- a dry run shows createReplica itself, not the reads before it
end

-- The replica `path` holds when it is complete (a store, or a state file):
-- `{service =, replicaID =, replicaName =}`; nil when there is none.
local function complete_replica(path)
  if not exists(path) then return nil end
  if path:match("%.gpkg$") then
    local st = geoservices.store.open(path, { readonly = true })
    if not st then return nil end
    local rep = st:replica()
    st:close()
    return rep and { service = rep.service, replicaID = rep.replicaID, replicaName = rep.replicaName }
  end
  local r = geoservices.replica(path)
  return r and { service = r.service, replicaID = r.replicaID, replicaName = r.state and r.state.replicaName }
end

-- A journal left beside a replica that is complete (an interruption between
-- the store's commit and the journal's removal): the job is this replica's.
local function journal_of_complete(text, have)
  local journaled = json.decode(text)
  if type(journaled) ~= "table" or not have or journaled.service ~= have.service then return false end
  local request = type(journaled.create) == "table" and journaled.create or {}
  return (journaled.replicaID ~= nil and journaled.replicaID == have.replicaID)
    or (request.replicaName ~= nil and request.replicaName == have.replicaName)
end

local function resume(args, out, client)
  local path = args.out
  local text = exists(journal_path(path)) and files.read(journal_path(path))
  local have = complete_replica(path)
  if have and (not text or journal_of_complete(text, have)) then
    -- nothing to resume: the replica is complete (a leftover journal is removed)
    os.remove(journal_path(path))
    if out.mode == "json" then
      out:emit{ event = "replica", replica = path, complete = true, replicaID = have.replicaID,
                service = have.service }
    else
      out:line(("%s is complete (replica %s of %s): nothing to resume"):format(path, tostring(have.replicaID),
        tostring(have.service)))
    end
    return out:result(EXIT.ok, { command = "replica", replica = path })
  end
  if not text then
    return output.usage_error(out, ("no createReplica job is journaled for %s (%s)"):format(path, journal_path(path)))
  end
  local op, err = client:resume_create_replica(text)
  if not op then return output.fail(out, err, { command = "replica" }) end
  return follow(out, client, path, destination_of(path), function(opts)
    op.output = opts.output
    op.on_done = opts.on_done
    return op:wait{ poll_interval = opts.poll_interval, timeout = opts.timeout, on_status = opts.on_status,
                    on_progress = opts.on_progress, fill = opts.fill }
  end, { poll_interval = args.poll_interval, timeout = args.wait_timeout }, op.service,
    { layers = type(op.create) == "table" and op.create.layers or nil })
end

-- ------------------------------------------------------------------ info, unregister

local function date_text(ms)
  if math.type(ms) ~= "integer" or ms <= 0 then return "-" end
  return os.date("!%Y-%m-%d %H:%M:%S UTC", ms // 1000)
end

local function local_generation(r)
  if r.model == "perLayer" then
    local parts = {}
    for _, l in ipairs(r.layers or {}) do parts[#parts + 1] = ("%s:%s"):format(l.id, tostring(l.serverGen)) end
    return table.concat(parts, " ")
  end
  return tostring(r.replicaServerGen)
end

local function server_generation(server)
  if server.layerServerGens and #server.layerServerGens > 0 then
    local parts = {}
    for _, l in ipairs(server.layerServerGens) do parts[#parts + 1] = ("%s:%s"):format(l.id, tostring(l.serverGen)) end
    return table.concat(parts, " ")
  end
  return tostring(server.replicaServerGen)
end

-- A store's local state in the shape of a replica state file's, and the store.
local function open_store(path)
  local st, err = geoservices.store.open(path)
  if not st then return nil, err end
  local rep
  rep, err = st:replica()
  if not rep then
    st:close()
    return nil, err
  end
  local pending, failed = st:pending(), st:failed()
  local r = { service = rep.service, replicaID = rep.replicaID, model = rep.syncModel,
              syncDirection = rep.syncDirection, replicaServerGen = rep.replicaServerGen,
              layers = rep.syncModel == "perLayer" and rep.layerServerGens or nil,
              closed = type(rep.info) == "table" and rep.info.unregistered or nil,
              pending = pending and #pending, failed = failed and #failed, store = st }
  return r
end

local function open_state(out, path)
  local r, err
  if path:match("%.gpkg$") then r, err = open_store(path) else r, err = geoservices.replica(path) end
  if not r then
    out:error(err, { replica = path })
    return nil, out:result(EXIT.usage, { command = "replica", replica = path })
  end
  return r
end

local function info(args, out, client)
  local path = args.state
  local r, code = open_state(out, path)
  if not r then return code end
  local server, err = client:replica_info(r.service, r.replicaID)
  if r.store then r.store:close() end
  if not server then
    if err == output.DRY_RUN then return nil end
    out:error(err, { replica = path })
    return out:result(output.exit_for(err), { command = "replica", replica = path })
  end
  local ids = {}
  for i, id in ipairs(server.layers) do ids[i] = tostring(id) end
  local same = true
  for id, gen in pairs(server.generations) do
    local mine = r.model == "perLayer" and nil or r.replicaServerGen
    for _, l in ipairs(r.model == "perLayer" and r.layers or {}) do
      if l.id == id then mine = l.serverGen end
    end
    if mine ~= gen then same = false end
  end
  if out.mode == "json" then
    local gens = json.object()
    for id, gen in pairs(server.generations) do gens[tostring(id)] = gen end
    out:emit{ event = "replica_info", replica = path, replicaID = r.replicaID, service = r.service,
              ["local"] = { model = r.model, syncDirection = r.syncDirection, generation = r.replicaServerGen,
                            layers = r.layers, closed = r.closed, pending = r.pending, failed = r.failed },
              server = { replicaName = server.replicaName, syncModel = server.syncModel,
                         syncDirection = server.syncDirection, layers = json.array(server.layers),
                         generation = server.replicaServerGen, layerServerGens = server.layerServerGens,
                         generations = gens, creationDate = server.creationDate, lastSyncDate = server.lastSyncDate,
                         returnAttachments = server.returnAttachments, targetType = server.targetType,
                         replicaOwner = server.replicaOwner },
              in_step = same }
  else
    out:line(("%s: replica %s %s of %s"):format(files.basename(path), tostring(server.replicaName), r.replicaID,
      r.service))
    local rows = {
      { "", "local", "server" },
      { "model", tostring(r.model), tostring(server.syncModel) },
      { "direction", tostring(r.syncDirection or "bidirectional"), tostring(server.syncDirection) },
      { "generation", local_generation(r), server_generation(server) },
      { "layers", "-", table.concat(ids, ",") },
      { "attachments", "-", server.returnAttachments == nil and "-" or (server.returnAttachments and "yes" or "no") },
      { "created", "-", date_text(server.creationDate) },
      { "last sync", "-", date_text(server.lastSyncDate) },
    }
    if r.store then
      rows[#rows + 1] = { "pending", ("%d local edit%s"):format(r.pending, r.pending == 1 and "" or "s"), "-" }
      rows[#rows + 1] = { "failed", ("%d rejected edit%s"):format(r.failed, r.failed == 1 and "" or "s"), "-" }
      rows[#rows + 1] = { "closed", r.closed and "unregistered" or "no", "-" }
    end
    for _, row in ipairs(rows) do out:line(("    %-12s %-24s %s"):format(row[1], row[2], row[3])) end
    if not same then
      out:line(("    the generations differ: the server handed out a newer one than this state holds (an interrupted "
        .. "sync?); `%s` resolves it"):format(hints.follow(out, "sync", path)))
    end
  end
  return out:result(EXIT.ok, { command = "replica", replica = path })
end

-- What an unregistered replica would strand: the store's local edits not
-- sent, those the server rejected and its conflicts, or a state file's
-- journaled attempt. nil when nothing; else the refusal's words.
local function stranded(r, path)
  local parts, next_steps = {}, {}
  local function count(n, one, many)
    if n and n > 0 then parts[#parts + 1] = ("%d %s"):format(n, n == 1 and one or many) end
  end
  if r.store then
    local conflicts = r.store:conflicts()
    count(r.pending, "local edit not sent", "local edits not sent")
    count(r.failed, "edit the server rejected", "edits the server rejected")
    count(conflicts and #conflicts, "conflict", "conflicts")
    if (r.pending or 0) > 0 then next_steps[#next_steps + 1] = ("`geoservices sync %s`"):format(path) end
    if (r.failed or 0) > 0 or (conflicts and #conflicts > 0) then
      next_steps[#next_steps + 1] = ("`geoservices status %s`"):format(path)
    end
  elseif r.attempt then
    parts[1] = "a synchronization whose outcome is not known yet"
    next_steps[1] = ("`geoservices sync %s`"):format(path)
  end
  if #parts == 0 then return nil end
  return ("%s holds %s: an unregistered replica can never send them; run %s first, or give --force to "
    .. "unregister anyway (they stay in the file, unsendable)"):format(path, table.concat(parts, ", "),
    table.concat(next_steps, " and "))
end

-- `replica unregister SERVICE REPLICA_ID`: a replica of the service by its
-- id, with no store or state file (one a lost store left behind), or with
-- "*" every replica of it the user can reach (servers since 10.5.1). "*"
-- asks first on a terminal; without one it needs --yes, and without it
-- nothing is sent (exit 2).
local function confirm_all(args, out, client, env)
  local service = args.state
  if not env.stdin_tty then
    return false, output.usage_error(out, ("replica unregister %s '*' unregisters every replica of %s the user can "
      .. "reach: give --yes to confirm (there is no terminal to ask on); nothing was sent"):format(service, service))
  end
  local list = client:list_replicas(service) -- a read: what the question is about
  local names = ""
  if list then
    local shown = {}
    for i, r in ipairs(list) do
      if i > 10 then
        shown[#shown + 1] = ("... (%d more)"):format(#list - 10)
        break
      end
      shown[i] = tostring(r.replicaName)
    end
    names = (" (%d listed now%s)"):format(#list, #shown > 0 and (": " .. table.concat(shown, ", ")) or "")
  end
  env.stderr:write(("Unregister every replica of %s you can reach%s? Their stores and state files will no longer "
    .. "synchronize. Type yes to go on: "):format(service, names))
  env.stderr:flush()
  local answer = io.read("l")
  if answer ~= "yes" then
    out:error(("not confirmed (answered %q): nothing was unregistered"):format(tostring(answer or "")))
    return false, out:result(EXIT.failed, { command = "replica" })
  end
  return true
end

local function unregister_by_id(args, out, client, env)
  local service, id = args.state, args.replica_id
  if id == "*" and not args.yes and not args.dry_run then
    local confirmed, code = confirm_all(args, out, client, env)
    if not confirmed then return code end
  end
  local done, err = client:unregister_replica(service, id)
  if not done then return output.fail(out, err, { command = "replica" }) end
  if out.mode == "json" then
    out:emit{ event = "replica", service = service, replicaID = id, unregistered = true, already = done.already or nil }
  else
    out:line(tostring(done))
  end
  return out:result(EXIT.ok, { command = "replica", service = service })
end

local function unregister(args, out, client, env)
  if args.replica_id then return unregister_by_id(args, out, client, env) end
  local path = args.state
  local r, code = open_state(out, path)
  if not r then return code end
  local refusal = not args.force and stranded(r, path)
  if refusal then
    if r.store then r.store:close() end
    out:error(geoservices.errors.invalid("--force", refusal), { replica = path })
    return out:result(EXIT.usage, { command = "replica", replica = path })
  end
  local done, err
  if r.store then
    done, err = r.store:unregister(client)
    r.store:close()
  else
    done, err = client:unregister_replica(r.service, r.replicaID)
  end
  if not done then
    if err == output.DRY_RUN then return nil end
    out:error(err, { replica = path })
    return out:result(output.exit_for(err), { command = "replica", replica = path })
  end
  local saved, save_err = true, nil
  if not r.store then
    r.state.closed = true
    r.state.unregistered = os.date("!%Y-%m-%dT%H:%M:%SZ")
    saved, save_err = r:save()
  end
  if out.mode == "json" then
    out:emit{ event = "replica", replica = path, replicaID = r.replicaID, service = r.service, unregistered = true,
              already = done.already or nil, state_saved = saved == true }
  else
    out:line(("%s: %s%s"):format(files.basename(path), tostring(done),
      r.store and "; the store is marked unregistered" or saved and "; the state file is marked closed" or ""))
  end
  if not saved then
    out:error(save_err, { replica = path })
    return out:result(EXIT.failed, { command = "replica", replica = path })
  end
  return out:result(EXIT.ok, { command = "replica", replica = path })
end

-- The local edits a store's server rejected, with its code and description.
local function failed(args, out)
  local path = args.state
  local st, err = geoservices.store.open(path, { readonly = true })
  if not st then -- no store there: input the command cannot work on
    out:error(err, { replica = path })
    return out:result(EXIT.usage, { command = "replica", replica = path })
  end
  local list
  list, err = st:failed()
  st:close()
  if not list then return output.fail(out, err, { command = "replica" }) end
  if out.mode == "json" then
    for _, f in ipairs(list) do
      out:emit{ event = "failed_edit", replica = path, seq = f.seq, op = f.op, layer = f.layer,
                globalId = f.globalId, code = f.code, description = f.description, failed = f.failed }
    end
  else
    out:line(("%s: %d rejected local edit%s"):format(files.basename(path), #list, #list == 1 and "" or "s"))
    for _, f in ipairs(list) do
      out:line(("    %s of %s in layer %s: %s (code %s, %s)"):format(f.op, output.one_line(f.globalId),
        tostring(f.layer), output.one_line(f.description), output.one_line(f.code), tostring(f.failed)))
    end
  end
  return out:result(EXIT.ok, { command = "replica", replica = path, failed = #list })
end

local SUBCOMMANDS = { create = create, resume = resume, info = info, unregister = unregister, failed = failed }

return setmetatable(replica_cmd, { __call = function(_, args, out, client, env)
  return SUBCOMMANDS[args.replica_command](args, out, client, env)
end })
