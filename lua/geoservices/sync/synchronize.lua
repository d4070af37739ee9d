--- synchronizeReplica, the operation: the request (its parameters checked
-- and stated explicitly, journaled through `opts.on_send` before it
-- leaves), an async job followed, the result file streamed and saved, the
-- one tail every synchronization ends with (the result checked against
-- this replica and its generations, each sent edit's fate). It knows no
-- replica state file and no store: client:sync (geoservices.sync.state)
-- and store:sync run it through the attempt engine (geoservices.sync.attempt).
-- What it sends and returns is documented for users at geoservices.sync.
-- @module geoservices.sync.synchronize
-- @local
local core = require "geoservices.core"
local errors = require "geoservices.base.errors"
local edits_mod = require "geoservices.sync.edits"
local jobs = require "geoservices.sync.job"
local json = require "geoservices.base.json"
local loop = require "geoservices.base.loop"
local outcome = require "geoservices.sync.outcome"
local options = require "geoservices.sync.options"
local origin = require "geoservices.net.origin"
local response = require "geoservices.net.response"
local retry = require "geoservices.net.retry"
local sink_mod = require "geoservices.sync.sink"
local sync_params = require "geoservices.sync.params"
local sync_result = require "geoservices.sync.result"
local transport = require "geoservices.net.transport"

local synchronize = {}

local function check_service(service)
  if type(service) ~= "string" then error("synchronize_replica: service name must be a string", 3) end
  if service == "" or service:find("[/?#%s]") then
    return errors.invalid("service", "must be a service name such as Parcels or Folder/Parcels without "
      .. "'?', '#' or spaces")
  end
  -- a folder is allowed (Folder/Service) but not path tricks
  if service:find("%.%.") or service:sub(1, 1) == "/" then
    return errors.invalid("service", "must not contain '..' or start with '/'")
  end
  return nil
end

local OPTION_TYPES = {
  wait = "boolean", poll_interval = "number", timeout = "number", request_timeout = "number",
  on_status = "function", on_progress = "function", on_change = "function", on_done = "function",
  output = "string", strict = "boolean", replica_path = "string",
  params = "table", lock_timeout = "number", discard = "boolean",
  on_send = "function", on_job = "function", enum_prefix = "string", capabilities = "table",
}

local function check_opts(opts, params)
  return options.check("synchronize_replica", opts, OPTION_TYPES, params.dataFormat)
end

local function service_path(service)
  return service:gsub("%%", "%%25")
end

-- Downloads the result file at `url`. A JSON file streams through the sink
-- (records checked and handed on as they arrive); with ctx.output its bytes
-- also go to a temporary file next to the output while they arrive (a
-- geodatabase, dataFormat = sqlite, only there). Nothing is held whole.
-- Returns the file's top-level fields and the temporary file (to commit),
-- or nil, err (the temporary file removed).
local function fetch_result_file(client, url, sink, ctx)
  local tmp, tmp_err
  if ctx.output then
    tmp, tmp_err = core.make_temp(ctx.output)
    if not tmp then return nil, errors.new("io", tmp_err) end
  end
  local json_file = ctx.data_format ~= "sqlite"
  local ok, err = client:download(url, { timeout = ctx.timeout, sink = json_file and sink or nil, file = tmp,
                                         on_progress = ctx.on_progress })
  if ok and json_file then
    local done, msg, offset = sink.records:finish()
    if not done then
      err = errors.new("protocol", "result file is not a complete JSON document: " .. msg,
        { url = url, offset = offset })
    else
      local taken, take_err = true, nil
      if sink.take then taken, take_err = sink.take(sink.records) else sink.records:drain(sink.deliver) end
      -- an error document served with HTTP 200 is an error, never an empty result
      err = not taken and take_err or response.error_of(sink.fields, 200, url)
    end
    ok = err == nil
  end
  if not ok then
    if tmp then os.remove(tmp) end
    if err.status == 404 or err.status == 410 then
      -- servers delete result files about ten minutes after the job
      -- (error-handling-with-sync-operations): the changes must be asked again
      err.code = "result_gone"
    end
    return nil, err
  end
  return sink.fields, tmp
end
-- createReplica (geoservices.sync.create) fetches its result file the same way.
synchronize.fetch_result_file = fetch_result_file

-- Writes an embedded result to ctx.output (atomically): the same document a
-- URL result file holds.
local function save_embedded(result, path)
  local ok, msg = core.write_file_atomic(path, json.encode{
    replicaID = result.replicaID, transportType = result.transportType, responseType = result.responseType,
    replicaServerGen = result.replicaServerGen, layerServerGens = result.layerServerGens,
    edits = result.edits or json.array(),
  } .. "\n")
  if not ok then return nil, errors.new("io", msg) end
  return true
end

-- A response whose transport or response type promises data must come with
-- it: a URL transport (or an ended job) with edits to give and no address.
local function missing_result(doc, status)
  local carrier = status or doc
  local transport_kind = sync_params.transport_of(carrier.transportType)
  local response_kind = sync_params.response_of(carrier.responseType)
  if response_kind == "no_edits" then return nil end
  if transport_kind == "url" or (status and response_kind and doc.edits == nil) then
    return errors.new("protocol", ("the server's answer promises a result file (%s, %s) but gives no result "
      .. "address: the changes cannot be downloaded; the replica state is unchanged"):format(
        tostring(carrier.transportType), tostring(carrier.responseType)), { code = "no_result_url" })
  end
  return nil
end

-- An answer that did not come, or came unreadable, after edits left: their
-- outcome is unknown until the server is read. The message names what is
-- unknown (`sent`, outcome.sent_edits): the edits the request carried, or
-- the uploaded edits file (editsUploadId), which cannot be read back.
local function unknown_outcome(err, sent)
  if err.outcome_unknown then return err end -- told once
  err.ambiguous = true
  err.outcome_unknown = true
  if type(sent) == "table" and sent.uploaded ~= nil then
    err.message = err.message .. ("; the outcome of the uploaded edits file (editsUploadId %s) is unknown: the "
      .. "server may still apply it; client:sync and store:sync never send it again (they hold it one "
      .. "synchronization, then report its outcome unknown)"):format(tostring(sent.uploaded))
  else
    local n = type(sent) == "table" and math.tointeger(sent.count)
    err.message = err.message .. ("; the outcome of the %s it carried is unknown: client:sync and store:sync "
      .. "resolve it by reading the server (never by sending them again blindly)"):format(
        n and ("%d edit(s)"):format(n) or "edits")
  end
  return err
end
synchronize.unknown_outcome = unknown_outcome

-- The sent edits the answer does not settle, each with its key.
local function unknown_edits(sent, verdicts)
  local list = {}
  for _, e in ipairs(sent.list) do
    local k = outcome.key(e.op, e.layer, e.target, e.globalId)
    if verdicts[k] == outcome.UNKNOWN then
      list[#list + 1] = { key = k, layer = e.layer, target = e.target, op = e.op, globalId = e.globalId }
    end
  end
  return list
end

-- The one tail of every synchronization, synchronous or a job that ended:
-- download the result file (URL transport), build the result, check it is
-- this replica's and moves its generation forward, classify each sent edit,
-- let the caller keep it (ctx.on_done: the replica state advances), apply
-- strict mode. `doc`: the response's fields or the job's status resource;
-- `sink`: the records already streamed from the response (nil for a job).
local function finish(client, doc, status, sink, ctx)
  if not sink then
    sink = sink_mod.new(ctx.on_change, ctx.output ~= nil)
    sink:absorb(doc) -- an embedded result that was decoded whole
  end
  local function fail(err)
    -- the server answered: it ran the sync, its generation of the replica may have moved
    err.generation_unknown = true
    if ctx.carried_edits then return nil, unknown_outcome(err, ctx.sent) end
    return nil, err
  end
  local url = sync_result.result_url(doc) or (status and sync_result.result_url(status))
  local file, tmp
  if url and url ~= "" then
    local refused = origin.check_followable(url, client.url, "result URL")
    if refused then return fail(refused) end
    -- the response's own document has ended; a saved file's records are
    -- counted, not built into a table
    sink:next_document(ctx.output ~= nil)
    local fields, err = fetch_result_file(client, url, sink, ctx)
    if not fields then return fail(err) end
    tmp = err
    file = { url = url, fields = fields, output = ctx.output }
  else
    local missing = missing_result(doc, status)
    if missing then return fail(missing) end
  end
  local result, err = sync_result.build(doc, status, sink, file)
  if result then err = sync_result.check(result, ctx.expect) end
  if err then
    if tmp then os.remove(tmp) end
    return fail(err)
  end
  -- the saved result is complete and on disk before the generation moves
  if tmp then
    local committed, commit_err = core.commit_file(tmp, ctx.output)
    if not committed then
      os.remove(tmp)
      return fail(errors.new("io", commit_err))
    end
  elseif ctx.output then
    local saved, save_err = save_embedded(result, ctx.output)
    if not saved then return fail(save_err) end
    result.output = ctx.output
  end
  if ctx.sent then
    result.outcomes = outcome.classify(ctx.sent, sink, { rollback = ctx.rollback, direction = ctx.direction,
      layer_directions = ctx.layer_directions, status = status and status.status, succeeded = true })
    result.unknown = unknown_edits(ctx.sent, result.outcomes)
  end
  -- an earlier request of this sync, repeated, may still run late (its answer was lost)
  result.lost_at = ctx.lost_at
  if ctx.on_done then
    -- the server applied the edits: a state that cannot be saved must say so
    local ok, done_err = ctx.on_done(result)
    if not ok then
      if ctx.carried_edits and done_err.kind == "io" then done_err.edits_applied = true end
      return fail(done_err)
    end
  end
  -- from here the replica is synchronized: an error says so and carries the result
  if ctx.strict and #result.failed_edits > 0 then return nil, sync_result.strict_error(result) end
  return result
end
synchronize.finish = finish

-- What a job needs to finish: the operation's own fields, and the options
-- of its wait.
local function finish_job(op, status, wait_opts)
  return finish(op.client, status, status, nil, {
    output = op.output, timeout = wait_opts.request_timeout, on_change = wait_opts.on_change or op.on_change,
    on_progress = wait_opts.on_progress or op.on_progress, carried_edits = op.carried_edits,
    sent = op.sent, rollback = op.rollback, direction = op.direction, layer_directions = op.layer_directions,
    expect = op.expect, on_done = op.on_done, strict = op.strict, data_format = op.data_format,
    lost_at = op.lost_at,
  })
end

-- What the request states itself when the caller leaves it out (see the
-- module's notes): never left to a server default.
local function explicit_params(params, carries_edits)
  local out = {}
  for k, v in pairs(params) do out[k] = v end
  local async = params.async == true
  if out.transportType == nil then out.transportType = (carries_edits and not async) and "embedded" or "url" end
  if out.rollbackOnFailure == nil then out.rollbackOnFailure = not carries_edits or async end
  return out
end

-- What the answer must agree with: this replica, generations forward.
local function expectation(params)
  local layers
  for _, l in ipairs(type(params.syncLayers) == "table" and params.syncLayers or {}) do
    layers = layers or {}
    layers[math.tointeger(l.id) or l.id] = math.tointeger(l.serverGen)
  end
  return { replicaID = params.replicaID, replicaServerGen = math.tointeger(params.replicaServerGen),
           layer_gens = layers }
end

local function layer_directions(params)
  local dirs
  for _, l in ipairs(type(params.syncLayers) == "table" and params.syncLayers or {}) do
    if type(l.syncDirection) == "string" then
      dirs = dirs or {}
      dirs[math.tointeger(l.id) or l.id] = l.syncDirection:lower()
    end
  end
  return dirs
end

-- synchronizeReplica (`client:synchronize_replica(service, params, opts)`;
-- documented at geoservices.synchronize.synchronize_replica).
function synchronize.synchronize_replica(self, service, params, opts)
  opts = opts or {}
  local bad = check_service(service)
  if bad then return nil, bad end
  if type(params) ~= "table" then error("synchronize_replica: params must be a table", 2) end
  local carries = (params.edits ~= nil and not (edits_mod.is(params.edits) and params.edits:is_empty()))
    or params.editsUploadId ~= nil -- an uploaded edits file (F4 of issue 34)
  local fields, err = sync_params.encode(explicit_params(params, carries), opts.enum_prefix or self.enum_prefix)
  if not fields then return nil, err end
  local opts_err = check_opts(opts, params)
  if opts_err then return nil, opts_err end
  local deadline = opts.timeout and (transport.now() + opts.timeout) or nil
  local _ <close> = loop.deadline_scope(deadline) -- caps every request, poll and download below
  local url = self:url_for(("%s/FeatureServer/synchronizeReplica"):format(service_path(service)))
  local request_timeout = self.timeout
  if deadline then request_timeout = math.min(request_timeout, opts.timeout) end
  local sent = outcome.sent_edits(fields)
  -- without edits a repeat only asks for the same changes again; with edits
  -- a request is repeated only when it provably never left
  local mode = sent and "once" or "read"
  local direction = type(fields.syncDirection) == "string" and fields.syncDirection:lower() or nil
  -- the response streams into a sink (records built one at a time, or handed
  -- to on_change); a repeated attempt starts a fresh one
  local sink
  local function new_sink()
    -- an embedded result to save must be kept whole; a result file saved to
    -- opts.output is only counted (Sink:next_document)
    sink = sink_mod.new(opts.on_change, opts.output ~= nil)
    return sink
  end
  local data_format = params.dataFormat
  if opts.on_send then -- the journal: durable before anything leaves
    local journaled, journal_err = opts.on_send(fields)
    if not journaled then return nil, journal_err end
  end
  -- all or nothing by the server's rules when its capabilities are given
  -- (client:sync and store:sync keep them, from on_send on), else as sent
  local rollback = outcome.rollback_in_effect(fields.rollbackOnFailure == true or fields.rollbackOnFailure == "true",
    opts.capabilities)
  -- A request without edits is repeated when its answer is lost, but the server may still run
  -- the lost one LATE (a gateway's 504: geoservices.net.retry.may_run_late), moving the replica's
  -- generation after this sync's own answer: `lost_at` (os.time) tells the caller's journal, whose
  -- copy check waits the late window (geoservices.store.sync.integrity). Each request goes on a
  -- fresh connection, edits or not: libcurl re-sends a body on its own when a reused connection dies
  -- before the answer, and a repeat the caller does not see is a late run it cannot tell
  local lost_at
  local function on_retry(e)
    if retry.may_run_late(e) then lost_at = os.time() end
  end
  local doc, post_err, info = self:post(url, fields, { timeout = request_timeout, retry = mode,
                                                       fresh_connect = true, records = new_sink,
                                                       on_retry = on_retry })
  if not doc then
    post_err.lost_at = lost_at
    if info.ambiguous or retry.ambiguous(post_err) then
      post_err.generation_unknown = true -- its answer lost: the server may have run it all the same
      if sent then return nil, unknown_outcome(post_err, sent) end
    end
    return nil, post_err
  end
  local ctx = {
    output = opts.output, on_change = opts.on_change, on_progress = opts.on_progress, on_done = opts.on_done,
    strict = opts.strict, data_format = data_format, carried_edits = sent ~= nil, sent = sent,
    rollback = rollback, direction = direction, layer_directions = layer_directions(fields),
    expect = expectation(fields), lost_at = lost_at,
  }
  local status_url = sync_result.status_url(doc)
  if status_url then
    local refused = origin.check_followable(status_url, self.url, "status URL")
    if refused then
      if sent then return nil, unknown_outcome(refused, sent) end
      return nil, refused
    end
    local op = jobs.operation(self, {
      status_url = status_url, service = service, replicaID = params.replicaID, replica_path = opts.replica_path,
      poll_interval = opts.poll_interval, on_status = opts.on_status, deadline = deadline,
    }, finish_job)
    for k, v in pairs(ctx) do op[k] = v end
    if opts.on_job then
      local journaled, journal_err = opts.on_job(op)
      if not journaled then return nil, unknown_outcome(journal_err, sent) end
    end
    if opts.wait == false then return op end
    return op:wait{ poll_interval = opts.poll_interval, on_status = opts.on_status,
                    timeout = deadline and math.max(0, deadline - transport.now()) or nil }
  end
  return finish(self, doc, nil, sink, ctx)
end
synchronize.finish_job = finish_job

return synchronize
