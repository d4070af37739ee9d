--- synchronizeReplica: the operation, async operations, and the way down
-- for client:sync (geoservices.sync.state), which runs it from a replica
-- state file and advances the generations only after the whole result has
-- been received and parsed.
--
-- These functions are methods of the client (`client:synchronize_replica(...)`,
-- `client:sync(...)`, `client:resume_sync(...)`); `self` is the client.
-- Their result is the normalized synchronization result described in
-- geoservices.sync.result (@{geoservices.sync.result.Result}); an async job
-- not waited for is a geoservices.sync.job operation.
--
-- Errors are returned as `nil, err` (geoservices.errors): kind "invalid"
-- (refused before anything was sent), "network", "timeout", "cancelled",
-- "http", "server", "auth", "protocol" (the transfer or the server failed),
-- "job" (the async job failed or is gone), "edits" (strict mode), "io" (an
-- output file or the replica state could not be written).
--
-- What is sent when the caller leaves it out (never a server default, which
-- the interface does not show): with edits, `transportType` embedded and
-- `rollbackOnFailure` false, because per-edit results exist only in embedded
-- answers and false lets the good edits through while the bad ones are
-- reported; an async job (always URL transport) and a sync without edits, URL
-- and true (a result file streams with flat memory; an async upload is then
-- all or nothing, so a completed job applied every edit). Enumerations go in
-- the vendor's `esri` prefix (client option enum_prefix); `svc…` values from
-- callers are accepted.
--
-- Edits reach the server at most once per request the client knows of: an
-- edit-carrying POST takes a fresh connection (libcurl never re-sends its
-- body on a reused one), is repeated only when it provably never left, and
-- an answer lost after it left makes the outcome unknown (`err.ambiguous`,
-- `err.outcome_unknown`). Each sent edit's fate is in `result.outcomes`
-- (geoservices.sync.outcome); the edits whose fate the answer does not tell
-- are `result.unknown`. client:sync and store:sync resolve those by reading
-- the server (geoservices.sync.verify), never by sending them again blindly.
--
-- The generation moves only with the data it counts: the result file is
-- checked while it streams (an error document with HTTP 200 is an error; a
-- URL result promised without an address is an error; a result for another
-- replica or with a generation that is not a positive integer, or lower
-- than the one sent, is an error), `opts.output` is written to a temporary
-- file, fsynced and renamed before the state moves.
-- @module geoservices.sync
local core = require "geoservices.core"
local errors = require "geoservices.errors"
local edits_mod = require "geoservices.sync.edits"
local jobs = require "geoservices.sync.job"
local json = require "geoservices.json"
local loop = require "geoservices.loop"
local outcome = require "geoservices.sync.outcome"
local options = require "geoservices.sync.options"
local origin = require "geoservices.net.origin"
local response = require "geoservices.net.response"
local retry = require "geoservices.net.retry"
local sink_mod = require "geoservices.sync.sink"
local sync_params = require "geoservices.sync.params"
local sync_result = require "geoservices.sync.result"
local transport = require "geoservices.net.transport"

local sync = {}

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
      sink.records:drain(sink.deliver)
      -- an error document served with HTTP 200 is an error, never an empty result
      err = response.error_of(sink.fields, 200, url)
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
sync.fetch_result_file = fetch_result_file

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
-- outcome is unknown until the server is read.
local function unknown_outcome(err)
  err.ambiguous = true
  err.outcome_unknown = true
  if not err.message:find("outcome is unknown", 1, true) then
    err.message = err.message .. "; the uploaded edits' outcome is unknown: client:sync and store:sync resolve "
      .. "it by reading the server (never by sending them again blindly)"
  end
  return err
end
sync.unknown_outcome = unknown_outcome

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
    if ctx.carried_edits then return nil, unknown_outcome(err) end
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
sync.finish = finish

-- What a job needs to finish: the operation's own fields, and the options
-- of its wait.
local function finish_job(op, status, wait_opts)
  return finish(op.client, status, status, nil, {
    output = op.output, timeout = wait_opts.request_timeout, on_change = wait_opts.on_change or op.on_change,
    on_progress = wait_opts.on_progress or op.on_progress, carried_edits = op.carried_edits,
    sent = op.sent, rollback = op.rollback, direction = op.direction, layer_directions = op.layer_directions,
    expect = op.expect, on_done = op.on_done, strict = op.strict, data_format = op.data_format,
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

--- Runs synchronizeReplica on a feature service
-- (`client:synchronize_replica(service, params, opts)`): validates the
-- parameters, sends the request (with edits, re-issued only where that is
-- safe), follows an async job, downloads the result file (URL transport) and
-- returns one normalized result whatever the transport and mode. Touches no
-- replica state file (see @{sync}).
-- @param self the client
-- @string service the service name, e.g. "Parcels" or "Folder/Parcels"
-- @tparam table params the interface's parameters, by their names: replicaID (required),
--   replicaServerGen, replicaServerSibGen, transportType ("url"/"embedded" or the prefixed names),
--   closeReplica, returnIdsForAdds, edits (an edits builder, a 2.1 table or a JSON string),
--   returnAttachmentsDataByUrl, async, syncDirection, syncLayers, editsUploadId, editsUploadFormat,
--   dataFormat, rollbackOnFailure, reconcileBranchVersion, timeReferenceUnknownClient; unknown
--   parameters pass through unchanged
-- @tparam[opt] table opts
-- @tparam[opt=true] boolean opts.wait false with `async = true`: return the job's operation at once
-- @tparam[opt=0.5] number opts.poll_interval first seconds between job status polls (backoff x1.5 up to 5 s)
-- @tparam[opt] number opts.timeout overall seconds: caps every request, poll and the download
-- @tparam[opt] function opts.on_status `on_status(status)` on each new job status
-- @tparam[opt] function opts.on_progress `on_progress(received, total)` while a result file downloads:
--   bytes so far and the file's size (nil when the server did not announce it)
-- @tparam[opt] function opts.on_change `on_change(layer_id, kind, record)` for each downloaded change
--   instead of collecting them in `result.edits` (kind "add", "update", "delete", "add_attachment"...)
-- @tparam[opt] string opts.output save the result file there instead of parsing it (required with
--   dataFormat = "sqlite")
-- @tparam[opt] boolean opts.strict failed edits make the call fail (kind "edits")
-- @tparam[opt] table opts.capabilities the service's syncCapabilities (geoservices.sync.outcome
--   capabilities_of): an edit the answer does not list counts as applied only where they make the
--   upload all or nothing; without them, as rollbackOnFailure was sent
-- @treturn[1] geoservices.sync.result.Result the result (prints as a one-line summary)
-- @treturn[2] geoservices.sync.job.Operation with `async = true, wait = false`: the job's operation
-- @return[3] nil
-- @treturn[3] table err: kind "invalid" (bad service name, parameter or output, nothing sent),
--   "network", "timeout", "cancelled", "http", "server", "auth", "protocol", "job" (the job failed
--   or is gone), "edits" (opts.strict), "io" (opts.output could not be written); `err.ambiguous` and
--   `err.outcome_unknown` when uploaded edits may have been applied; `err.generation_unknown` when the
--   server may have run the synchronization (it answered, or its answer was lost): the replica's
--   generation on the server may have moved
-- @raise when service is not a string or params is not a table, or a parameter value cannot be sent
function sync.synchronize_replica(self, service, params, opts)
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
  local doc, post_err, info = self:post(url, fields, { timeout = request_timeout, retry = mode,
                                                       fresh_connect = sent ~= nil, records = new_sink })
  if not doc then
    if info.ambiguous or retry.ambiguous(post_err) then
      post_err.generation_unknown = true -- its answer lost: the server may have run it all the same
      if sent then return nil, unknown_outcome(post_err) end
    end
    return nil, post_err
  end
  local ctx = {
    output = opts.output, on_change = opts.on_change, on_progress = opts.on_progress, on_done = opts.on_done,
    strict = opts.strict, data_format = data_format, carried_edits = sent ~= nil, sent = sent,
    rollback = rollback, direction = direction, layer_directions = layer_directions(fields),
    expect = expectation(fields),
  }
  local status_url = sync_result.status_url(doc)
  if status_url then
    local refused = origin.check_followable(status_url, self.url, "status URL")
    if refused then
      if sent then return nil, unknown_outcome(refused) end
      return nil, refused
    end
    local op = jobs.operation(self, {
      status_url = status_url, service = service, replicaID = params.replicaID, replica_path = opts.replica_path,
      poll_interval = opts.poll_interval, on_status = opts.on_status, deadline = deadline,
    }, finish_job)
    for k, v in pairs(ctx) do op[k] = v end
    if opts.on_job then
      local journaled, journal_err = opts.on_job(op)
      if not journaled then return nil, unknown_outcome(journal_err) end
    end
    if opts.wait == false then return op end
    return op:wait{ poll_interval = opts.poll_interval, on_status = opts.on_status,
                    timeout = deadline and math.max(0, deadline - transport.now()) or nil }
  end
  return finish(self, doc, nil, sink, ctx)
end
sync.finish_job = finish_job

--- Synchronizes a replica state file (`client:sync(replica, edits, opts)`)
-- with optional edits. The request is built from the state (the
-- generation, or syncLayers for a perLayer replica) and the new generations
-- are saved only after the whole result was received and parsed; after any
-- failure the state's generations are unchanged. See the module's notes for
-- the journal and how an interrupted attempt is resolved.
-- @param self the client
-- @tparam string|geoservices.sync.replica.Replica r the replica: a state file path or an opened replica
-- @tparam[opt] geoservices.sync.edits.Edits|table|string edits an edits builder, an edits table or a
--   JSON text (an empty builder sends no edits)
-- @tparam[opt] table opts the options of @{synchronize_replica}, plus:
-- @tparam[opt] table opts.params extra or overriding parameters (transportType, syncDirection,
--   async, closeReplica...)
-- @tparam[opt] number opts.lock_timeout seconds to wait for another synchronization of this replica
-- @tparam[opt] function opts.journal `journal(j) -> j2`: wraps the state file's journal (the attempt
--   engine's interface, geoservices.sync.attempt); a test gives one that forgets
-- @treturn[1] geoservices.sync.result.Result the result; the state file holds the new generations
--   (an upload-only answer moves none);
--   `result.conflicts` lists edits not applied because the server holds newer values;
--   `result.resolved` what resolving an interrupted attempt found
-- @treturn[2] geoservices.sync.job.Operation with `params.async = true` and `wait = false`: the job's
--   operation (its `wait` advances the state)
-- @return[3] nil
-- @treturn[3] table err: the errors of @{synchronize_replica}, plus kind "busy" (another
--   synchronization holds the replica), "io" or "invalid" (the state file cannot be read, is
--   invalid or closed); `err.pending` when a job's outcome is not known yet (the next sync
--   re-attaches)
-- @raise when replica is neither a path nor a replica, and as @{synchronize_replica}
function sync.sync(self, r, edits, opts)
  -- the lock lives in geoservices.sync.state, the journal beside it, the attempt in geoservices.sync.attempt
  return require("geoservices.sync.state").sync(self, r, edits, opts)
end

--- Re-attaches to an async synchronization job described by
-- `op:to_json()` (`client:resume_sync(json_text)`), for example after a
-- restart or from another client. Its `wait` downloads the result and, when
-- the job came from @{sync}, settles its edits and advances the replica
-- state file.
-- @param self the client
-- @string text the JSON text of `op:to_json()`
-- @treturn[1] geoservices.sync.job.Operation the operation (call `:wait()` or `:poll()`)
-- @return[2] nil
-- @treturn[2] table err: kind "invalid" (not a saved operation), or "io"/"invalid" (its replica
--   state file cannot be read)
-- @raise when text is not a string
function sync.resume_sync(self, text)
  return require("geoservices.sync.state").resume_sync(self, text)
end

return sync
