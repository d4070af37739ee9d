--- synchronizeReplica: the operation, async operations, and
-- client:sync, which runs it from a replica state file and advances the
-- generations only after the whole result has been received and parsed.
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
-- output file or the replica state could not be written). After a failure
-- that may have applied uploaded edits, `err.ambiguous` or
-- `err.edits_applied` is true and the message says to synchronize again with
-- `opts.resend = true`. Misuse raises.
--
-- Edits are never applied twice. A synchronization that carried edits and
-- failed after it may have reached the server (response lost or reset, an
-- unreadable body, a 5xx) is re-issued with the same edits, because
-- re-applying them is harmless: an add carries a client-side GlobalID and a
-- server refuses an add whose GlobalID exists (code -2147217395), a delete
-- re-applied fails with 1019 "Object is missing", an update writes the same
-- values again. For exactly the edits it re-sent, the client moves those
-- failures from `result.failed_edits` to `result.already_applied` and counts
-- them as succeeded. It is not re-issued within the call when an add has no
-- GlobalID, with rollbackOnFailure, or after the deadline (`err.ambiguous`).
--
-- client:sync adds a journal and a lock. Before edits (or an async job) are
-- sent, the attempt is written durably to `<state>.journal`, with the job's
-- status address once it is known; it goes away with the state write that
-- moves the generation, or when the server is known to have applied
-- nothing. The next client:sync of that replica first resolves it:
-- re-attaching to the job, or re-sending its edits with the reconciliation
-- above and without rollbackOnFailure (so it converges); that result is
-- `result.resolved`. Adds without a GlobalID are never re-sent. An OS lock
-- on `<state>.lock` keeps a second process (or task) out: kind "busy" at
-- once, or a wait of `opts.lock_timeout` seconds.
--
-- The generation moves only with the data it counts: the result file is
-- checked while it streams (an error document with HTTP 200 is an error; a
-- URL result promised without an address is an error), `opts.output` is
-- written to a temporary file, fsynced and renamed before the state moves,
-- and edits the server answered without a per-edit result are an error
-- (`err.unanswered`; `opts.allow_unanswered` makes it `result.unanswered`).
-- An error after the state moved says so: `err.synchronized`, `err.result`.
-- @module geoservices.sync
local core = require "geoservices.core"
local errors = require "geoservices.errors"
local edits_mod = require "geoservices.sync.edits"
local jobs = require "geoservices.sync.job"
local json = require "geoservices.json"
local loop = require "geoservices.loop"
local reconcile = require "geoservices.sync.reconcile"
local replica_mod = require "geoservices.sync.replica"
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
  output = "string", strict = "boolean", resend = "boolean", replica_path = "string",
  allow_unanswered = "boolean", params = "table", lock_timeout = "number", discard = "boolean",
  on_send = "function", on_job = "function",
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

-- The one tail of every synchronization, synchronous or a job that ended:
-- download the result file (URL transport), build the result, reconcile
-- re-sent edits, check every sent edit was answered, let the caller keep it
-- (ctx.on_done: the replica state advances), apply strict mode. `doc`: the
-- response's fields or the job's status resource; `sink`: the records
-- already streamed from the response (nil for a job).
local function finish(client, doc, status, sink, ctx)
  if not sink then
    sink = sink_mod.new(ctx.on_change, ctx.output ~= nil)
    sink:absorb(doc) -- an embedded result that was decoded whole
  end
  local function fail(err)
    if ctx.carried_edits then return nil, reconcile.applied_error(err) end
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
  if not result then
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
  if ctx.reissued and ctx.sent then reconcile.apply(result, ctx.sent) end
  local unanswered = ctx.sent and reconcile.unanswered(ctx.sent, sink)
  if ctx.on_done then
    -- the server applied the edits: a state that cannot be saved must say so
    local ok, done_err = ctx.on_done(result)
    if not ok then return fail(done_err) end
  end
  -- from here the replica is synchronized: an error says so and carries the result
  if unanswered and #unanswered > 0 and not ctx.allow_unanswered then
    return nil, sync_result.unanswered_error(result, unanswered)
  end
  result.unanswered = unanswered and #unanswered > 0 and unanswered or nil
  if ctx.strict and #result.failed_edits > 0 then return nil, sync_result.strict_error(result) end
  return result
end

-- What a job needs to finish: the operation's own fields, and the options
-- of its wait.
local function finish_job(op, status, wait_opts)
  return finish(op.client, status, status, nil, {
    output = op.output, timeout = wait_opts.request_timeout, on_change = wait_opts.on_change or op.on_change,
    on_progress = wait_opts.on_progress or op.on_progress, carried_edits = op.carried_edits,
    reissued = op.reissued, sent = op.sent, on_done = op.on_done, strict = op.strict,
    data_format = op.data_format, allow_unanswered = op.allow_unanswered,
  })
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
-- @tparam[opt] boolean opts.resend this call re-sends edits whose earlier sync failed ambiguously:
--   adds and deletes found already applied are reported in `result.already_applied`
-- @treturn[1] geoservices.sync.result.Result the result (prints as a one-line summary)
-- @treturn[2] geoservices.sync.job.Operation with `async = true, wait = false`: the job's operation
-- @return[3] nil
-- @treturn[3] table err: kind "invalid" (bad service name, parameter or output, nothing sent),
--   "network", "timeout", "cancelled", "http", "server", "auth", "protocol", "job" (the job failed
--   or is gone), "edits" (opts.strict), "io" (opts.output could not be written); `err.ambiguous` or
--   `err.edits_applied` when uploaded edits may have been applied
-- @raise when service is not a string or params is not a table, or a parameter value cannot be sent
function sync.synchronize_replica(self, service, params, opts)
  opts = opts or {}
  local bad = check_service(service)
  if bad then return nil, bad end
  local fields, err = sync_params.encode(params, self.enum_prefix)
  if not fields then return nil, err end
  local opts_err = check_opts(opts, params)
  if opts_err then return nil, opts_err end
  local deadline = opts.timeout and (transport.now() + opts.timeout) or nil
  local _ <close> = loop.deadline_scope(deadline) -- caps every request, poll and download below
  local url = self:url_for(("%s/FeatureServer/synchronizeReplica"):format(service_path(service)))
  local request_timeout = self.timeout
  if deadline then request_timeout = math.min(request_timeout, opts.timeout) end
  local sent = reconcile.sent_edits(fields)
  local mode = "read" -- without edits a re-issue only asks for the same changes again
  if sent then
    local rollback = params.rollbackOnFailure == true or params.rollbackOnFailure == "true"
    mode = (sent.identified and not rollback) and "edits" or "once"
  end
  -- the response streams into a sink (records built one at a time, or handed
  -- to on_change); a re-issued attempt starts a fresh one
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
  local doc, post_err, info = self:post(url, fields, { timeout = request_timeout, retry = mode,
                                                       ambiguous = sent ~= nil and opts.resend == true,
                                                       records = new_sink })
  if not doc then
    if sent and (info.ambiguous or retry.ambiguous(post_err)) then return nil, reconcile.ambiguous_error(post_err) end
    return nil, post_err
  end
  local reissued = sent ~= nil and (opts.resend == true or (info.ambiguous and info.attempts > 1))
  local status_url = sync_result.status_url(doc)
  if status_url then
    local refused = origin.check_followable(status_url, self.url, "status URL")
    if refused then
      if sent then return nil, reconcile.applied_error(refused) end
      return nil, refused
    end
    local op = jobs.operation(self, {
      status_url = status_url, service = service, replicaID = params.replicaID, strict = opts.strict,
      output = opts.output, on_change = opts.on_change, on_progress = opts.on_progress, on_done = opts.on_done,
      replica_path = opts.replica_path,
      poll_interval = opts.poll_interval, on_status = opts.on_status, deadline = deadline,
      carried_edits = sent ~= nil, sent = sent, reissued = reissued,
      data_format = data_format, allow_unanswered = opts.allow_unanswered,
    }, finish_job)
    if opts.on_job then
      local journaled, journal_err = opts.on_job(op)
      if not journaled then return nil, reconcile.applied_error(journal_err) end
    end
    if opts.wait == false then return op end
    return op:wait{ poll_interval = opts.poll_interval, on_status = opts.on_status,
                    timeout = deadline and math.max(0, deadline - transport.now()) or nil }
  end
  return finish(self, doc, nil, sink, {
    output = opts.output, on_change = opts.on_change, on_progress = opts.on_progress,
    carried_edits = sent ~= nil, reissued = reissued, sent = sent, on_done = opts.on_done, strict = opts.strict,
    data_format = data_format, allow_unanswered = opts.allow_unanswered,
  })
end

-- Replicas with a synchronization in flight in this process: a second one
-- is refused at once (the OS lock below does the same across processes).
local active = {}
local merged_edits

local function advance_replica(r, params)
  return function(result)
    if params.closeReplica then result.closed = true end
    return r:advance(result)
  end
end

-- The edits of a call as a 2.1 table (what the journal keeps); nil when
-- there are none. An add without a GlobalID stays without one: it can
-- never be re-sent safely, so it is never re-sent (see resolve_attempt).
local function journaled_edits(edits)
  if edits == nil or (edits_mod.is(edits) and edits:is_empty()) then return nil end
  if edits_mod.is(edits) then return edits:to_table() end
  if type(edits) == "string" then
    local list = json.decode(edits)
    if type(list) == "table" then return list end
  end
  return edits -- refused with its message by the validation
end

-- The journaled edits that may be re-sent: all but adds without a GlobalID
-- (the server would add them twice). Returns the edits and the count of
-- adds left out.
local function resendable(edits)
  local out, left_out = json.array(), 0
  for _, entry in ipairs(edits) do
    local copy = {}
    for k, v in pairs(entry) do copy[k] = v end
    for _, part in ipairs{ "features", "attachments" } do
      local p = entry[part]
      if type(p) == "table" then
        local adds = json.array()
        for _, item in ipairs(p.adds or {}) do
          local gid = type(item) == "table" and (part == "features" and type(item.attributes) == "table"
            and item.attributes.GlobalID or item.globalId)
          if type(gid) == "string" and gid ~= "" then adds[#adds + 1] = item else left_out = left_out + 1 end
        end
        local pc = {}
        for k, v in pairs(p) do pc[k] = v end
        pc.adds = adds
        copy[part] = pc
      end
    end
    out[#out + 1] = copy
  end
  return out, left_out
end

-- The union of two 2.1 edit lists, by layer; an edit both carry (same
-- operation and GlobalID) is sent once.
function merged_edits(first, second)
  if type(second) ~= "table" then return first end
  local out, by_layer, seen = json.array(), {}, {}
  local function add(list)
    for _, entry in ipairs(list) do
      local layer = math.tointeger(entry.id) or entry.id
      local target = by_layer[layer]
      if not target then
        target = { id = entry.id }
        by_layer[layer] = target
        out[#out + 1] = target
      end
      for _, part in ipairs{ "features", "attachments" } do
        for _, name in ipairs{ "adds", "updates", "deleteIds" } do
          for _, item in ipairs(type(entry[part]) == "table" and entry[part][name] or {}) do
            local gid = type(item) ~= "table" and item
              or (type(item.attributes) == "table" and item.attributes.GlobalID) or item.globalId
            local key = ("%s|%s|%s|%s"):format(tostring(layer), part, name, tostring(gid))
            if gid == nil or not seen[key] then
              seen[key] = true
              target[part] = target[part] or {}
              target[part][name] = target[part][name] or json.array()
              local list_ = target[part][name]
              list_[#list_ + 1] = item
            end
          end
        end
      end
    end
  end
  add(first)
  add(second)
  return out
end

-- A failure that proves the server applied none of the attempt's edits ends
-- the attempt; any other keeps it for the next sync to resolve.
local function nothing_applied(err)
  return type(err) == "table" and not err.ambiguous and not err.edits_applied and not err.synchronized
end

-- Resolves the attempt an earlier sync left in the journal (it crashed or
-- failed while the outcome was unknown): re-attaches to its job when the
-- status address is known, else re-sends its edits with the reconciliation
-- of re-sent edits (an add that already exists, a delete already gone,
-- count as applied). Never with rollbackOnFailure: a re-send must converge.
-- Its downloaded changes go where the caller's do (on_change; output as
-- `<output>.resolved.json`).
local function resolve_attempt(self, r, opts)
  local attempt = r.attempt
  local sub = {
    on_change = opts.on_change, on_progress = opts.on_progress, on_status = opts.on_status,
    poll_interval = opts.poll_interval, timeout = opts.timeout, strict = false,
    output = opts.output and (opts.output .. ".resolved.json") or nil,
    on_done = advance_replica(r, {}),
  }
  if attempt.status_url then
    local op = jobs.operation(self, {
      status_url = attempt.status_url, service = r.service, replicaID = r.replicaID, output = sub.output,
      on_change = sub.on_change, on_progress = sub.on_progress, on_done = sub.on_done, replica_path = r.path,
      carried_edits = true, sent = reconcile.sent_edits({ edits = attempt.edits }), reissued = true,
    }, finish_job)
    local result, err = op:wait{ poll_interval = opts.poll_interval, on_status = opts.on_status,
                                 timeout = opts.timeout }
    if result or (err.code ~= "job_not_found") then return result, err end
    -- the server no longer knows the job: its edits are re-sent below
  end
  local params = r:request_params()
  local journaled = type(attempt.params) == "table" and attempt.params or {}
  params.syncDirection = journaled.syncDirection or params.syncDirection
  params.transportType = journaled.transportType
  local edits, left_out = resendable(attempt.edits)
  params.edits = edits
  sub.resend = true
  local result, err = sync.synchronize_replica(self, r.service, params, sub)
  -- adds without a GlobalID are never sent twice: their outcome stays unknown
  if result and left_out > 0 then result.unresolved_adds = left_out end
  return result, err
end

local function sync_locked(self, r, edits, opts)
  if r.state.closed then
    return nil, errors.invalid("replica", ("%s was %s"):format(r.replicaID,
      r.state.unregistered and "unregistered (replica unregister)" or "closed by an earlier sync"))
  end
  local resolved
  local attempt = r.attempt
  if attempt and not attempt.status_url and #(attempt.edits or {}) == 0 then
    -- an async sync without edits that never got its job's address: nothing to resolve
    r:clear_attempt()
    attempt = nil
  end
  if attempt and not attempt.status_url and opts.resend and edits ~= nil then
    -- the caller re-sends the interrupted attempt's edits itself: one
    -- request carries both, reconciled as a re-send
    edits = merged_edits(attempt.edits, journaled_edits(edits))
  elseif attempt then
    local err
    resolved, err = resolve_attempt(self, r, opts)
    if not resolved then
      err.message = "an earlier synchronization of this replica was interrupted and could not be resolved "
        .. "yet (its edits are kept in the state file and sent again next time): " .. err.message
      return nil, err
    end
    if r.state.closed then return resolved end
  end
  local params = r:request_params()
  for k, v in pairs(opts.params or {}) do params[k] = v end
  params.edits = journaled_edits(edits)
  local call_opts = {}
  for k, v in pairs(opts) do call_opts[k] = v end
  call_opts.params = nil
  call_opts.on_done = advance_replica(r, params)
  call_opts.replica_path = r.path
  -- edits, and any async job (its changes are downloaded once it ends),
  -- are journaled: durable before anything is sent; the job's address as
  -- soon as it is known
  local journaling = type(params.edits) == "table" or params.async == true
  if journaling then
    call_opts.on_send = function(fields)
      return r:begin_attempt(type(fields.edits) == "table" and fields.edits or json.array(),
                             { syncDirection = params.syncDirection, transportType = params.transportType })
    end
    call_opts.on_job = function(op) return r:attempt_job(op.status_url) end
  end
  local result, err = sync.synchronize_replica(self, r.service, params, call_opts)
  if not result and journaling and r.attempt and nothing_applied(err) then r:clear_attempt() end
  if result and resolved then result.resolved = resolved end
  return result, err
end

--- Synchronizes a replica state file (`client:sync(replica, edits, opts)`)
-- with optional edits. The request is built from the state (the
-- generation, or syncLayers for a perLayer replica) and the new generations
-- are saved only after the whole result was received and parsed; after any
-- failure the state's generations are unchanged.
--
-- One synchronization of a replica runs at a time: an OS lock on the state
-- (`<state>.lock`) is held for the whole call, and a second process (or
-- task) gets kind "busy" at once, or waits up to `opts.lock_timeout`.
-- Edits are journaled in the state before they are sent (with a GlobalID
-- on every add), and the async job's address as soon as it is known; a sync
-- that finds an interrupted attempt resolves it first (re-attaching to the
-- job, or re-sending its edits with reconciliation), so a crash at any
-- moment neither loses an edit nor applies one twice.
-- @param self the client
-- @tparam string|geoservices.sync.replica.Replica r the replica: a state file path or an opened replica
-- @tparam[opt] geoservices.sync.edits.Edits|table|string edits an edits builder, an edits table or a
--   JSON text (an empty builder sends no edits)
-- @tparam[opt] table opts the options of @{synchronize_replica}, plus:
-- @tparam[opt] table opts.params extra or overriding parameters (transportType, syncDirection,
--   async, closeReplica...)
-- @tparam[opt] number opts.lock_timeout seconds to wait for another synchronization of this replica
-- @treturn[1] geoservices.sync.result.Result the result; the state file holds the new generations;
--   `result.resolved` is the result of an interrupted attempt resolved first
-- @treturn[2] geoservices.sync.job.Operation with `params.async = true` and `wait = false`: the job's
--   operation (its `wait` advances the state)
-- @return[3] nil
-- @treturn[3] table err: the errors of @{synchronize_replica}, plus kind "busy" (another
--   synchronization holds the replica), "io" or "invalid" (the state file cannot be read, is
--   invalid or closed) and "io" (the new state could not be saved: `err.edits_applied`)
-- @raise when replica is neither a path nor a replica, and as @{synchronize_replica}
function sync.sync(self, r, edits, opts)
  opts = opts or {}
  local path = type(r) == "string" and r or (getmetatable(r) == replica_mod.Replica and r.path)
  if not path then error("client:sync: expected a replica or a state file path", 2) end
  if opts.lock_timeout ~= nil and (type(opts.lock_timeout) ~= "number" or opts.lock_timeout <= 0) then
    return nil, errors.invalid("lock_timeout", "must be a positive number of seconds")
  end
  if active[path] then
    return nil, errors.invalid("replica", ("a synchronization of %s is already running"):format(
      type(r) == "string" and path or r.replicaID))
  end
  local lock, lock_err = replica_mod.lock(path, opts.lock_timeout, function(s) return self:sleep(s) end)
  if not lock then return nil, lock_err end
  -- under the lock, the state as it is now: another process may have moved it
  local loaded, err = replica_mod.open(path)
  if not loaded then
    lock:close()
    return nil, err
  end
  if type(r) ~= "string" then
    r.state = loaded.state
    rawset(r, "attempt", rawget(loaded, "attempt"))
  else
    r = loaded
  end
  active[path] = true
  local ok, result, sync_err = pcall(sync_locked, self, r, edits, opts)
  active[path] = nil
  lock:close()
  if not ok then error(result, 0) end
  return result, sync_err
end

--- Re-attaches to an async synchronization job described by
-- `op:to_json()` (`client:resume_sync(json_text)`), for example after a
-- restart or from another client. Its `wait` downloads the result and, when
-- the job came from @{sync}, advances the replica state file.
-- @param self the client
-- @string text the JSON text of `op:to_json()`
-- @treturn[1] geoservices.sync.job.Operation the operation (call `:wait()` or `:poll()`)
-- @return[2] nil
-- @treturn[2] table err: kind "invalid" (not a saved operation), or "io"/"invalid" (its replica
--   state file cannot be read)
-- @raise when text is not a string
function sync.resume_sync(self, text)
  local state, msg = json.decode(text)
  if type(state) ~= "table" or type(state.status_url) ~= "string" then
    return nil, errors.invalid("operation", "not a saved sync operation: " .. tostring(msg or "no status_url"))
  end
  local fields = {
    status_url = state.status_url, service = state.service, replicaID = state.replicaID,
    strict = state.strict, output = state.output, replica_path = state.replica_path,
    carried_edits = state.carried_edits, reissued = state.reissued, sent = state.sent,
  }
  if state.replica_path then
    local r, err = replica_mod.open(state.replica_path)
    if not r then return nil, err end
    fields.on_done = advance_replica(r, {})
  end
  return jobs.operation(self, fields, finish_job)
end

return sync
