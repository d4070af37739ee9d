--- createReplica (`{service}/FeatureServer/createReplica`): registers a
-- replica of some layers of a feature service on the server and downloads
-- its data, which streams through the C core's record extractor exactly as
-- a synchronization result does: each feature and attachment is handed to
-- `on_change(layer_id, "add" | "add_attachment", record)` as it arrives, or
-- collected, or the result file is saved whole to `opts.output`; it is
-- never decoded whole.
--
-- The methods are the client's (`client:create_replica(service, params, opts)`,
-- `client:resume_create_replica(json_text)`); `self` is the client.
--
--     local result = assert(client:create_replica("Parcels", {
--       replicaName = "crew-1", layers = { 0, 1 }, syncModel = "perReplica", returnAttachments = true,
--     }, { on_status = function(s) print(s.status) end }))
--     print(result)   --> createReplica crew-1 {5E1A...} of Parcels: perReplica, layers 0,1, 4 features, ...
--     geoservices.replica("crew-1.json", result:replica_state())   -- ready for client:sync
--
-- Before anything is sent, the parameters are checked (kind "invalid",
-- naming the parameter) and so is the service's resource: sync enabled,
-- the sync model, a sync direction and async supported, every layer there
-- (`opts.check = false` skips reading it). The request is async by default
-- (real servers answer HTTP 500 to large synchronous createReplica
-- requests, and their default is synchronous), followed through the same
-- job engine as synchronizeReplica (geoservices.sync.job on
-- geoservices.poll), with `on_send` and `on_job` hooks for a journal and
-- `resume_create_replica` to re-attach after a restart.
--
-- Real servers differ in their answers, and every shape seen is accepted:
-- the result address as `URL`, `resultUrl` or `responseUrl`; transport
-- types `esriTransportTypeUrl`, `svcTransportTypeUrl`, `...URL`; a first
-- answer without replicaID or responseType (taken from the result file);
-- `replicaID: ""` treated as missing; generations as numbers or text, per
-- replica or per layer (an array or its JSON text), epoch milliseconds or
-- small counters (opaque 64-bit integers); a result without generations
-- (read from the replica's resource).
-- @module geoservices.sync.create
local core = require "geoservices.core"
local create_params = require "geoservices.sync.create_params"
local errors = require "geoservices.base.errors"
local options = require "geoservices.sync.options"
local jobs = require "geoservices.sync.job"
local json = require "geoservices.base.json"
local loop = require "geoservices.base.loop"
local origin = require "geoservices.net.origin"
local replicas = require "geoservices.sync.replicas"
local retry = require "geoservices.net.retry"
local service = require "geoservices.sync.service"
local synchronize = require "geoservices.sync.synchronize"
local sync_params = require "geoservices.sync.params"
local sync_result = require "geoservices.sync.result"
local transport = require "geoservices.net.transport"

local create = {}

-- ------------------------------------------------------------------ sink

local CreateSink = {}
CreateSink.__index = CreateSink

--- A record sink for a createReplica answer or result file, fed by the C
-- core's record extractor while the body arrives: top-level fields, the
-- layer entries (in order), per-layer counts, and each record handed to
-- `on_change` or collected in the vendor's shape (`data`). No I/O. Internal.
-- @tparam ?function on_change `on_change(layer_id, kind, record)`, or nil to collect
-- @tparam[opt] boolean keep collect even with on_change (an embedded result to save)
-- @treturn table the sink (`records`, `deliver`, `fields`, `data`, `counts`, `layer_ids`...)
-- @local
function create.new_sink(on_change, keep)
  local sink = setmetatable({
    fields = {}, on_change = on_change, data = (keep or not on_change) and json.array() or nil,
    entries = {}, counts = {}, layer_ids = {}, downloaded = 0, features = 0, attachments = 0,
    records = core.records(),
  }, CreateSink)
  sink.deliver = function(kind, layer, value, key) return sink:record(kind, layer, value, key) end
  return sink
end

function CreateSink:entry(layer)
  local e = self.entries[layer]
  if not e then
    e = { id = layer }
    self.entries[layer] = e
    self.layer_ids[#self.layer_ids + 1] = layer
    self.counts[layer] = { features = 0, attachments = 0 }
    if self.data then
      e.features, e.attachments = json.array(), json.array()
      self.data[#self.data + 1] = e
    end
  end
  return e
end

function CreateSink:record(kind, layer, value, key)
  if kind == "field" then
    self.fields[key] = value
    return
  elseif kind == "layer" then
    self:entry(layer)
    return
  elseif kind == "layer_field" then
    local e = self:entry(layer)
    if self.data then e[key] = value end
    return
  end
  local e = self:entry(layer)
  local c = self.counts[layer]
  self.downloaded = self.downloaded + 1
  if kind == "add" then
    c.features = c.features + 1
    self.features = self.features + 1
  elseif kind == "add_attachment" then
    c.attachments = c.attachments + 1
    self.attachments = self.attachments + 1
  end
  if self.on_change then self.on_change(layer, kind, value) end
  if self.data then
    local list_name = kind == "add" and "features" or kind == "add_attachment" and "attachments" or kind
    local list = e[list_name]
    if not list then
      list = json.array()
      e[list_name] = list
    end
    list[#list + 1] = value
  end
end

--- Feeds the layers of an already decoded document (a job status resource
-- that carried the data) to the sink.
-- @local
function CreateSink:absorb(doc)
  for _, entry in ipairs(type(doc.layers) == "table" and doc.layers or {}) do
    if type(entry) == "table" then
      local layer = math.tointeger(entry.id) or entry.id
      self:record("layer", layer)
      for _, f in ipairs(type(entry.features) == "table" and entry.features or {}) do self:record("add", layer, f) end
      for _, a in ipairs(type(entry.attachments) == "table" and entry.attachments or {}) do
        self:record("add_attachment", layer, a)
      end
    end
  end
end

--- A fresh extractor for the next document (the result file after the
-- answer); with `count_only` (a result saved to a file) nothing is collected;
-- with `fill` (a store being built: geoservices.store.building) its records
-- go into the store as they arrive, `fill:apply(records, deliver)` taking
-- them from the extractor in C and handing back the fields and layer
-- entries, and the counts are the store's (CreateSink:count_filled).
-- @local
function CreateSink:next_document(count_only, fill)
  self.fields = {}
  if fill then
    self.records, self.data = core.records(), nil
    self.take = function(records) return fill:apply(records, self.deliver) end
    return
  end
  -- counting only: the records come without their values, so a layer whose
  -- id follows its features waits as a count, not as a table per feature
  self.records = core.records(count_only and not self.on_change and { values = false } or nil)
  if count_only then self.data = nil end
end

--- The counts of a result that went into a store (`fill:counts()`, the
-- features and attachments it applied per layer) instead of through record().
-- @local
function CreateSink:count_filled(counts)
  for layer, c in pairs(counts) do
    if self.entries[layer] or c.add > 0 or c.add_attachment > 0 then
      self:entry(layer)
      self.counts[layer] = { features = c.add, attachments = c.add_attachment }
      self.features, self.attachments = self.features + c.add, self.attachments + c.add_attachment
      self.downloaded = self.downloaded + c.add + c.add_attachment
    end
  end
end

-- ------------------------------------------------------------------ result

--- The result of createReplica: a plain table; `tostring(result)` is a
-- one-line summary (`createReplica crew-1 {5E1A...} of Parcels: perReplica, layers 0,1,
-- 4 features, 0 attachments, via url, generation 7`).
-- @table Result
-- @field replicaID the new replica's id
-- @field replicaName its name
-- @field service the service
-- @field syncModel "perReplica" or "perLayer" (as asked)
-- @field syncDirection the direction asked (nil: the server's default, bidirectional)
-- @field replicaServerGen the replica's generation (integer; perReplica)
-- @field layerServerGens `{ {id =, serverGen =}, ... }` the layers' generations (integers; perLayer)
-- @field generations `generations[layer_id] = serverGen` for every layer (opaque 64-bit integers:
--   epoch milliseconds on some servers, small counters on others; never compare them with a clock)
-- @field layers the replica's layer ids, in the order of the data (else as asked)
-- @field counts `counts[layer_id] = {features =, attachments =}` of the downloaded data
-- @field features, attachments, downloaded totals of the downloaded records
-- @field data the data in the vendor's shape, `{ {id =, features = {...}, attachments = {...}}, ... }`;
--   nil with opts.on_change or opts.output
-- @field transportType, responseType as the server reported them
-- @field transport "url" or "embedded"
-- @field result_url the address of the downloaded result file (URL transport)
-- @field output the path the result was saved to (opts.output)
-- @field filled true when the result file went into opts.fill as it downloaded (an embedded
--   result does not: it is in opts.output)
-- @field status the job's last status resource (async)
-- @field partial true when the job ended CompletedWithErrors
local Result = { __name = "geoservices.CreateReplicaResult" }
Result.__index = Result

function Result:__tostring()
  local ids = {}
  for i, id in ipairs(self.layers) do ids[i] = tostring(id) end
  local data = self.output and ("saved to " .. self.output)
    or ("%d feature%s, %d attachment%s"):format(self.features, self.features == 1 and "" or "s",
      self.attachments, self.attachments == 1 and "" or "s")
  return ("createReplica %s %s of %s: %s, layers %s, %s, via %s, %s%s"):format(tostring(self.replicaName),
    tostring(self.replicaID), tostring(self.service), tostring(self.syncModel), table.concat(ids, ","), data,
    tostring(self.transport), replicas.generation_text(self), self.partial and " (partial)" or "")
end

--- The fields of a replica state file (geoservices.replica) for this
-- replica: `geoservices.replica(path, result:replica_state())` makes the
-- state `client:sync` continues from.
-- @treturn table `{service =, replicaID =, replicaName =, model =, syncDirection =,
--   replicaServerGen = | layers = {{id =, serverGen =}, ...}}`
-- @raise never
function Result:replica_state()
  local state = { service = self.service, replicaID = self.replicaID, replicaName = self.replicaName,
                  model = self.syncModel, syncDirection = self.syncDirection or "bidirectional" }
  if self.syncModel == "perLayer" then
    local layers = json.array()
    for _, id in ipairs(self.layers) do layers[#layers + 1] = { id = id, serverGen = self.generations[id] } end
    state.layers = layers
  else
    state.replicaServerGen = self.replicaServerGen
  end
  return state
end

-- Whether two replica ids are the same (case and braces aside).
local function same_id(a, b)
  local function fold(id) return (id:upper():gsub("[{}]", "")) end
  return fold(a) == fold(b)
end

local function first_id(...)
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if type(v) == "string" and v ~= "" then return v end
  end
  return nil
end

--- Builds the result of createReplica from what arrived, without I/O.
-- Generations missing everywhere stay nil (the caller may read the
-- replica's resource). Internal.
-- @tparam table ctx the request: `service`, `model`, `layers` (asked), `direction`, `replicaName`
-- @tparam table doc the answer's fields (or the job's status)
-- @tparam ?table status the job's status resource
-- @tparam table sink the sink the data went through
-- @tparam ?table file `{url =, fields =, output =}` of a result file
-- @treturn Result the result
-- @treturn ?table err of kind "protocol" when its generations contradict its model
-- @local
function create.build(ctx, doc, status, sink, file)
  local content = file and file.fields or {}
  status = status or {}
  local result = setmetatable({ service = ctx.service, syncModel = ctx.model, syncDirection = ctx.direction },
                              Result)
  result.replicaID = first_id(content.replicaID, doc.replicaID, status.replicaID)
  result.replicaName = first_id(content.replicaName, doc.replicaName, status.replicaName, ctx.replicaName)
  result.transportType = status.transportType or doc.transportType or content.transportType
  result.responseType = first_id(content.responseType, doc.responseType, status.responseType)
  result.transport = sync_params.transport_of(result.transportType) or (file and "url" or "embedded")
  if file then result.result_url, result.output = file.url, file.output end
  result.status = status.status and status or nil
  if status.status and status.status:lower() == "completedwitherrors" then result.partial = true end
  local function pick(name)
    if content[name] ~= nil then return content[name] end
    if doc[name] ~= nil then return doc[name] end
    return status[name]
  end
  local rgen = replicas.integer(pick("replicaServerGen"))
  local lgens = replicas.layer_gens(pick("layerServerGens"))
  if lgens and #lgens == 0 then lgens = nil end
  local layers = {}
  for i, id in ipairs(#sink.layer_ids > 0 and sink.layer_ids or ctx.layers or {}) do layers[i] = id end
  result.layers = layers
  result.counts = {}
  for _, id in ipairs(layers) do result.counts[id] = sink.counts[id] or { features = 0, attachments = 0 } end
  result.features, result.attachments, result.downloaded = sink.features, sink.attachments, sink.downloaded
  if not result.output then result.data = sink.data end
  return result, create.set_generations(result, rgen, lgens)
end

--- Puts the generations in a result as its model wants them: a perLayer
-- replica answered with one replicaServerGen gets it for every layer; a
-- perReplica replica answered per layer takes their common generation.
-- @treturn ?table err of kind "protocol" when they cannot be reconciled
-- @local
function create.set_generations(result, rgen, lgens)
  if result.syncModel == "perLayer" then
    if not lgens and rgen then
      lgens = json.array()
      for _, id in ipairs(result.layers) do lgens[#lgens + 1] = { id = id, serverGen = rgen } end
    end
    result.layerServerGens, result.replicaServerGen = lgens, nil
  else
    if not rgen and lgens then
      for _, l in ipairs(lgens) do
        if rgen and l.serverGen ~= rgen then
          return errors.new("protocol", "a perReplica replica was answered with different generations per layer")
        end
        rgen = l.serverGen
      end
    end
    result.replicaServerGen, result.layerServerGens = rgen, nil
  end
  result.generations = replicas.generations(result.replicaServerGen, result.layerServerGens, result.layers)
  return nil
end

local function has_generations(result)
  if result.syncModel == "perLayer" then
    if not result.layerServerGens then return false end
    for _, l in ipairs(result.layerServerGens) do if l.serverGen == nil then return false end end
    return true
  end
  return result.replicaServerGen ~= nil
end

-- ------------------------------------------------------------------ operation

local OPTION_TYPES = {
  wait = "boolean", poll_interval = "number", timeout = "number", request_timeout = "number",
  on_status = "function", on_progress = "function", on_change = "function", on_done = "function",
  output = "string", on_send = "function", on_job = "function", check = "boolean", service_info = "table",
  fill = "table",
}

local function check_opts(opts, plan)
  return options.check("create_replica", opts, OPTION_TYPES, plan.data_format)
end

-- An embedded result saved to ctx.output: the document a result file holds.
local function save_embedded(result, path)
  local doc = { replicaName = result.replicaName, replicaID = result.replicaID,
                replicaServerGen = result.replicaServerGen, layerServerGens = result.layerServerGens,
                transportType = result.transportType, responseType = result.responseType,
                layers = result.data or json.array() }
  local ok, msg = core.write_file_atomic(path, json.encode(doc) .. "\n")
  if not ok then return nil, errors.new("io", msg) end
  return true
end

-- Says, in an error after the server may have created the replica, how to
-- find it: its name and id when known.
local function created_note(ctx, replica_id)
  return (" The replica %s%s may exist on the server: synchronize it, or unregister it "
    .. "(client:unregister_replica)."):format(tostring(ctx.replicaName or "?"),
      replica_id and (" " .. replica_id) or "")
end

local function with_note(err, ctx, replica_id, extra)
  err.message = err.message .. created_note(ctx, replica_id)
  err.created = true
  err.replicaID = replica_id or err.replicaID
  for k, v in pairs(extra or {}) do err[k] = v end
  return err
end

-- The one tail of every createReplica, synchronous or a job that ended:
-- download the result file (URL transport), build the result, read the
-- replica's generations if the result has none, save opts.output, let the
-- caller keep it (ctx.on_done), return it.
local function finish(client, doc, status, sink, ctx)
  if not sink then
    sink = create.new_sink(ctx.on_change, ctx.output ~= nil)
    sink:absorb(doc)
  end
  local url = sync_result.result_url(doc) or (status and sync_result.result_url(status))
  if url == "" then url = nil end
  local file, tmp
  if url then
    local refused = origin.check_followable(url, client.url, "result URL")
    if refused then return nil, with_note(refused, ctx, first_id(doc.replicaID)) end
    sink:next_document(ctx.output ~= nil, ctx.fill)
    local fields, err = synchronize.fetch_result_file(client, url, sink, ctx)
    if not fields then return nil, with_note(err, ctx, first_id(doc.replicaID)) end
    tmp = err
    file = { url = url, fields = fields, output = ctx.output }
    if ctx.fill then sink:count_filled(ctx.fill:counts()) end
    -- the file of another replica than the one the answer names is not this one's data
    local named, holds = first_id(doc.replicaID, status and status.replicaID), first_id(fields.replicaID)
    if named and holds and not same_id(named, holds) then
      if tmp then os.remove(tmp) end
      return nil, with_note(errors.new("protocol", ("the result file holds replica %s, not %s, the replica "
        .. "createReplica made: nothing was kept from it"):format(holds, named), { code = "other_replica",
        url = url }), ctx, named)
    end
  elseif #sink.layer_ids == 0 then
    return nil, with_note(errors.new("protocol", ("the server's answer to createReplica (%s) has no result "
      .. "address and no layers: the replica's data cannot be downloaded."):format(
        tostring((status or doc).transportType)), { code = "no_result_url" }), ctx, first_id(doc.replicaID))
  end
  local result, gens_err = create.build(ctx, doc, status, sink, file)
  local function fail(err)
    if tmp then os.remove(tmp) end
    return nil, with_note(err, ctx, result.replicaID, { result = result })
  end
  if gens_err then return fail(gens_err) end
  result.filled = file and ctx.fill and true or nil
  if not result.replicaID then
    return fail(errors.new("protocol", "neither the server's answer nor its result file names the new replica's "
      .. "replicaID: it cannot be synchronized.", { code = "no_replica_id" }))
  end
  if not has_generations(result) then
    -- not in the answer, the job or the file: the replica's own resource has them
    local info, info_err = replicas.replica_info(client, ctx.service, result.replicaID,
                                                 { timeout = ctx.timeout })
    if info then
      local info_gens_err = create.set_generations(result, info.replicaServerGen, info.layerServerGens)
      if info_gens_err then return fail(info_gens_err) end
    end
    if not has_generations(result) then
      return fail(errors.new("protocol", ("the result of createReplica carries no %s, and the replica's resource "
        .. "did not give it either%s."):format(ctx.model == "perLayer" and "layerServerGens" or "replicaServerGen",
          info_err and (" (" .. tostring(info_err) .. ")") or ""), { code = "no_generation" }))
    end
  end
  if tmp then
    local committed, commit_err = core.commit_file(tmp, ctx.output)
    if not committed then return fail(errors.new("io", commit_err)) end
    tmp = nil
  elseif ctx.output then
    local saved, save_err = save_embedded(result, ctx.output)
    if not saved then return fail(save_err) end
    result.output = ctx.output
    result.data = nil
  end
  if ctx.on_done then
    local ok, done_err = ctx.on_done(result)
    if not ok then return fail(done_err) end
  end
  return result
end

-- The request a job keeps (and op:to_json saves) to build its result.
local function request_of(ctx)
  return { service = ctx.service, model = ctx.model, layers = ctx.layers, direction = ctx.direction,
           replicaName = ctx.replicaName, data_format = ctx.data_format }
end

local function job_ctx(op, wait_opts)
  local req = op.create or {}
  return {
    service = op.service, model = req.model, layers = req.layers, direction = req.direction,
    replicaName = req.replicaName, output = op.output, timeout = wait_opts.request_timeout,
    on_change = wait_opts.on_change or op.on_change, on_progress = wait_opts.on_progress or op.on_progress,
    on_done = op.on_done, data_format = req.data_format, fill = wait_opts.fill or op.fill,
  }
end

local function finish_job(op, status, wait_opts)
  return finish(op.client, status, status, nil, job_ctx(op, wait_opts))
end

local function make_operation(client, fields)
  fields.operation = "createReplica"
  fields.gone_hint = ("createReplica's outcome is unknown: the replica %s may exist on the server "
    .. "(synchronize it, or unregister it), or create it again"):format(
      tostring(fields.create and fields.create.replicaName or "?"))
  return jobs.operation(client, fields, finish_job)
end

--- Completes a createReplica request's plan from the service's resource
-- (the default sync model, async unless the service cannot) and checks it
-- against the service's capabilities.
-- @tparam table fields the encoded parameters (geoservices.sync.create_params.encode)
-- @tparam table plan their plan, as encode returned it
-- @tparam ?geoservices.sync.service.ServiceInfo info the service's resource (nil: not read)
-- @return nil, or err (kind "invalid": a capability the service lacks)
function create.settle(fields, plan, info)
  plan.model = plan.model or service.default_model(info)
  fields.syncModel = plan.model
  if plan.async == nil then
    plan.async = not (info and info.syncCapabilities.supportsAsync == false)
    fields.async = plan.async
  end
  return info and service.check_create(info, plan) or nil
end

--- Runs createReplica on a feature service (`client:create_replica(service,
-- params, opts)`): validates the parameters, checks them against the
-- service's capabilities, sends the request (async by default), follows the
-- job, downloads the data and returns one result whatever the transport
-- and mode.
-- @param self the client
-- @string name the service, e.g. "Parcels" or "Folder/Parcels"
-- @tparam table params createReplica's parameters: `layers` (required: ids as a list, an integer
--   or "0,1"), `replicaName`, `syncModel` ("perReplica" or "perLayer"; default perReplica, or
--   perLayer on a service that supports only that), `syncDirection` ("bidirectional", "upload",
--   "download"), `geometry` (an envelope, point, multipoint, polyline or polygon object, its JSON
--   text, or "xmin,ymin,xmax,ymax"), `geometryType` (implied by the geometry when not given),
--   `inSR`, `replicaSR` (a wkid or `{wkid =}`/`{wkt =}`), `transportType` ("url", default, or
--   "embedded", or the prefixed names), `returnAttachments`, `returnAttachmentsDataByUrl`,
--   `async` (default true, unless the service says supportsAsync = false), `dataFormat`
--   ("json", default; "sqlite" needs opts.output), `layerQueries` (`{[id] = {queryOption =
--   "all"|"useFilter"|"none", where =, useGeometry =, includeRelated =}}` or its JSON text),
--   `targetType` ("client" or "server"); unknown parameters pass through unchanged
-- @tparam[opt] table opts
-- @tparam[opt=true] boolean opts.wait false with an async request: return the job's operation at once
-- @tparam[opt=0.5] number opts.poll_interval first seconds between job status polls (backoff x1.5 up to 5 s)
-- @tparam[opt] number opts.timeout overall seconds: caps every request, poll and the download
-- @tparam[opt] function opts.on_status `on_status(status)` on each new job status (Pending, InProgress,
--   ProvisioningReplica, ExportingData, ..., Completed)
-- @tparam[opt] function opts.on_progress `on_progress(received, total)` while the result file downloads
-- @tparam[opt] function opts.on_change `on_change(layer_id, kind, record)` for each downloaded feature
--   (kind "add") and attachment ("add_attachment") instead of collecting them in `result.data`
-- @tparam[opt] string opts.output save the result (the JSON file, or the geodatabase with dataFormat =
--   "sqlite") there, written whole before the call returns, instead of collecting the data
-- @tparam[opt] table opts.fill a replica store being built (geoservices.store.building): the result
--   file's records go into it while they arrive, checked as ever before the result is returned (the
--   store commits later, or is abandoned); `result.filled` then says so (an embedded result is not)
-- @tparam[opt] function opts.on_send `on_send(fields)` -> true | nil, err: before the request leaves
--   (a journal; an error stops the call, nothing sent)
-- @tparam[opt] function opts.on_job `on_job(op)` -> true | nil, err: as soon as the job's address is
--   known (journal `op:to_json()` to re-attach after a crash)
-- @tparam[opt] function opts.on_done `on_done(result)` -> true | nil, err: once the whole result is in,
--   before the call returns (keep the replica: an error is returned with `err.result`)
-- @tparam[opt=true] boolean opts.check false: do not read the service's resource before sending
-- @tparam[opt] geoservices.sync.service.ServiceInfo opts.service_info the service's resource, already read
-- @treturn[1] Result the result (prints as a one-line summary)
-- @treturn[2] geoservices.sync.job.Operation with `wait = false` (async): the job's operation
-- @return[3] nil
-- @treturn[3] table err: kind "invalid" (a parameter, an option or a capability the service lacks:
--   `err.parameter`, `err.capability`; nothing sent), "network", "timeout", "cancelled", "http",
--   "server", "auth", "protocol", "job" (the job failed or is gone), "io" (opts.output);
--   `err.created` is true when the replica may exist on the server (the message names it),
--   `err.result` holds the result when the failure came after the data arrived
-- @raise when name is not a string, params or opts is not a table, or an option has the wrong type
function create.create_replica(self, name, params, opts)
  opts = opts or {}
  local bad = service.check_name(name, "create_replica")
  if bad then return nil, bad end
  local fields, plan = create_params.encode(params, self.enum_prefix)
  if not fields then return nil, plan end
  local opts_err = check_opts(opts, plan)
  if opts_err then return nil, opts_err end
  local deadline = opts.timeout and (transport.now() + opts.timeout) or nil
  local _ <close> = loop.deadline_scope(deadline)
  local request_timeout = self.timeout
  if deadline then request_timeout = math.min(request_timeout, opts.timeout) end

  local info = opts.service_info
  if not info and opts.check ~= false then
    local read_err
    info, read_err = service.service_info(self, name, { timeout = request_timeout })
    if not info then
      read_err.message = "reading the service's capabilities before createReplica: " .. read_err.message
      return nil, read_err
    end
  end
  local refused = create.settle(fields, plan, info)
  if refused then return nil, refused end

  local ctx = {
    service = name, model = plan.model, layers = plan.layers, direction = plan.direction,
    replicaName = params.replicaName, output = opts.output, on_change = opts.on_change,
    on_progress = opts.on_progress, on_done = opts.on_done, data_format = plan.data_format,
    timeout = opts.request_timeout, fill = opts.fill,
  }
  if opts.on_send then
    local journaled, journal_err = opts.on_send(fields)
    if not journaled then return nil, journal_err end
  end
  local sink
  local function new_sink()
    sink = create.new_sink(opts.on_change, opts.output ~= nil)
    return sink
  end
  local url = service.url(self, name, "createReplica")
  -- a new connection: libcurl re-sends a body on its own when a reused one
  -- dies before the answer, and a second createReplica is a second replica
  local doc, post_err, call = self:post(url, fields, { timeout = request_timeout, retry = "once", records = new_sink,
                                                       fresh_connect = true })
  if not doc then
    if call.ambiguous or retry.ambiguous(post_err) then
      post_err.ambiguous = true
      with_note(post_err, ctx, nil)
    end
    return nil, post_err
  end
  local status_url = sync_result.status_url(doc)
  if status_url then
    local unfollowable = origin.check_followable(status_url, self.url, "status URL")
    if unfollowable then return nil, with_note(unfollowable, ctx, nil) end
    local op = make_operation(self, {
      status_url = status_url, service = name, replicaName = params.replicaName, output = opts.output,
      on_change = opts.on_change, on_progress = opts.on_progress, on_done = opts.on_done, fill = opts.fill,
      poll_interval = opts.poll_interval, on_status = opts.on_status, deadline = deadline,
      create = request_of(ctx),
    })
    if opts.on_job then
      local journaled, journal_err = opts.on_job(op)
      if not journaled then
        journal_err.operation = op
        return nil, with_note(journal_err, ctx, nil)
      end
    end
    if opts.wait == false then return op end
    return op:wait{ poll_interval = opts.poll_interval, on_status = opts.on_status,
                    request_timeout = opts.request_timeout,
                    timeout = deadline and math.max(0, deadline - transport.now()) or nil }
  end
  return finish(self, doc, nil, sink, ctx)
end

--- Re-attaches to a createReplica job described by `op:to_json()`
-- (`client:resume_create_replica(json_text)`), for example after a crash
-- between the job's start and its result. Its `wait(opts)` takes the
-- options of a job's wait plus `on_change`, `on_progress`; `op.on_done` and
-- `op.output` may be set before waiting.
-- @param self the client
-- @string text the JSON text of `op:to_json()`
-- @treturn[1] geoservices.sync.job.Operation the operation (call `:wait()` or `:poll()`)
-- @return[2] nil
-- @treturn[2] table err: kind "invalid" (not a saved createReplica operation)
-- @raise when text is not a string
function create.resume_create_replica(self, text)
  if type(text) ~= "string" then error("resume_create_replica: expected the JSON text of op:to_json()", 2) end
  local state, msg = json.decode(text)
  if type(state) ~= "table" or type(state.status_url) ~= "string" or state.operation ~= "createReplica" then
    return nil, errors.invalid("operation", "not a saved createReplica operation: "
      .. tostring(msg or (type(state) == "table" and state.operation) or "no status_url"))
  end
  return make_operation(self, {
    status_url = state.status_url, service = state.service, replicaName = type(state.create) == "table"
      and state.create.replicaName or nil, output = state.output, create = state.create,
  })
end

create.Result = Result
return create
