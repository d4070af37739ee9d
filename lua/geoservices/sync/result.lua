--- Turns any synchronizeReplica outcome (sync embedded, sync URL, async
-- embedded, async URL) into one normalized result: the interface's fields,
-- the edits (from the body or the downloaded result file), a flat list of
-- failed edits and per-layer counts. Generations are integers here even when
-- the status resource carries them as strings.
--
-- Users meet this module through its @{Result}, returned by
-- `client:synchronize_replica`, `client:sync` and an operation's `wait`; the
-- functions that build it (the record sink fed by the C core, the download
-- of a result file) are internal.
-- @module geoservices.sync.result
local core = require "geoservices.core"
local errors = require "geoservices.errors"
local json = require "geoservices.json"
local sync_params = require "geoservices.sync.params"

local sync_result = {}

--- The result of a synchronization: a plain table with the interface's
-- field names plus a few normalized ones; `tostring(result)` is a one-line
-- summary (`sync {id}: edits via url, 3 uploaded ok, 0 failed, 7 downloaded, generation 13`).
-- @table Result
-- @field replicaID the replica's id
-- @field replicaServerGen the new server generation (integer; perReplica), or nil
-- @field layerServerGens `{ {id =, serverGen =}, ... }` the new generation of each layer (integers;
--   perLayer), or nil; one of the two is always present
-- @field transportType the transportType the response reported (any spelling)
-- @field transport "url" or "embedded"
-- @field responseType the responseType the response reported
-- @field response "edits", "edits_and_data", "replacement_data" or "no_edits" (nil when unknown)
-- @field edits the downloaded changes as a 2.1 edits array (`{ {id =, features = {adds =, updates =,
--   deleteIds =}, attachments = {...}}, ... }`); nil with opts.output or opts.on_change
-- @field downloaded the number of downloaded changes (records)
-- @field succeeded the number of uploaded edits the server applied
-- @field failed_edits the uploaded edits that failed, sorted by layer and GlobalID, each
--   `{layer =, op = "add"|"update"|"delete", target = "feature"|"attachment", globalId =, objectId =,
--   code =, description =}`
-- @field counts `counts[layer_id] = {succeeded =, failed =}` of the uploaded edits
-- @field partial true when the job ended CompletedWithErrors
-- @field result_url the address of the downloaded result file (URL transport)
-- @field output the path the result file was saved to (opts.output)
-- @field already_applied with re-sent edits: the failures that proved an edit was applied by an
--   earlier attempt (moved out of failed_edits and counted as succeeded)
-- @field reissued true when the request carried re-sent edits
-- @field closed true when closeReplica was asked (client:sync marks the state closed)
local Result = { __name = "geoservices.SyncResult" }
Result.__index = Result

function Result:__tostring()
  local gen = self.replicaServerGen
  if gen == nil and self.layerServerGens then
    local parts = {}
    for _, l in ipairs(self.layerServerGens) do parts[#parts + 1] = ("%s:%s"):format(l.id, l.serverGen) end
    gen = "layers " .. table.concat(parts, ",")
  end
  local down = self.output and ("saved to " .. self.output)
    or ("%d downloaded"):format(self.downloaded or 0)
  return ("sync %s: %s via %s, %d uploaded ok, %d failed, %s, generation %s%s"):format(
    tostring(self.replicaID), tostring(self.response), tostring(self.transport), self.succeeded or 0,
    #self.failed_edits, down, tostring(gen), self.partial and " (partial)" or "")
end

--- The result address of a response or status resource, whatever its spelling.
-- @tparam table doc a response or a job status resource
-- @treturn ?string the address (URL, resultUrl, responseUrl, resultURL or url), or nil
-- @local
function sync_result.result_url(doc)
  return doc.URL or doc.resultUrl or doc.responseUrl or doc.resultURL or doc.url
end

--- The status address of an async response, whatever its spelling.
-- @tparam table doc a response
-- @treturn ?string the address (statusUrl, statusURL or statusurl), or nil
-- @local
function sync_result.status_url(doc)
  return doc.statusUrl or doc.statusURL or doc.statusurl
end

-- Where each kind of record goes in the 2.1 array, and which are edit results.
local PLACE = {
  add = { "features", "adds" }, update = { "features", "updates" }, delete = { "features", "deleteIds" },
  add_result = { "features", "addResults" }, update_result = { "features", "updateResults" },
  delete_result = { "features", "deleteResults" },
  add_attachment = { "attachments", "adds" }, update_attachment = { "attachments", "updates" },
  delete_attachment = { "attachments", "deleteIds" },
  add_attachment_result = { "attachments", "addResults" },
  update_attachment_result = { "attachments", "updateResults" },
  delete_attachment_result = { "attachments", "deleteResults" },
}
local RESULT_OP = {
  add_result = "add", update_result = "update", delete_result = "delete",
  add_attachment_result = "add", update_attachment_result = "update", delete_attachment_result = "delete",
}

local Sink = {}
Sink.__index = Sink

--- A sink for the records of a synchronization result, fed by the C core as
-- the body arrives. It keeps the top-level fields, the per-edit outcomes
-- (failed_edits, counts) and either hands each downloaded record to
-- `on_change(layer_id, kind, record)` or builds the 2.1 edits array.
-- Internal.
-- @tparam ?function on_change the receiver of downloaded records, or nil to build `edits`
-- @treturn table the sink (`records`, `deliver`, `fields`, `failed_edits`, `counts`...)
-- @local
function sync_result.sink(on_change)
  local sink = setmetatable({
    fields = {}, counts = {}, failed_edits = {}, succeeded = 0, downloaded = 0,
    on_change = on_change, edits = not on_change and json.array() or nil, entries = {},
    records = core.records(),
  }, Sink)
  sink.deliver = function(kind, layer, value, key) return sink:record(kind, layer, value, key) end
  return sink
end

-- The 2.1 entry of a layer, created on its first record (document order).
function Sink:entry(layer)
  local e = self.entries[layer]
  if not e then
    e = { id = layer }
    for _, part in ipairs{ "features", "attachments" } do
      e[part] = { adds = json.array(), updates = json.array(), deleteIds = json.array() }
    end
    self.entries[layer] = e
    self.edits[#self.edits + 1] = e
  end
  return e
end

function Sink:record(kind, layer, value, key)
  if kind == "layer" then -- a layer entry starts, possibly without records
    if self.edits then self:entry(layer) end
    return
  elseif kind == "field" then
    self.fields[key] = value
    return
  elseif kind == "layer_field" then
    if self.edits then self:entry(layer)[key] = value end
    return
  end
  local op = RESULT_OP[kind]
  if op then
    local c = self.counts[layer] or { succeeded = 0, failed = 0 }
    self.counts[layer] = c
    if value.success == true or value.success == "true" then
      c.succeeded = c.succeeded + 1
      self.succeeded = self.succeeded + 1
    else
      c.failed = c.failed + 1
      local e = type(value.error) == "table" and value.error or {}
      self.failed_edits[#self.failed_edits + 1] = {
        layer = layer, op = op, target = kind:find("attachment", 1, true) and "attachment" or "feature",
        globalId = value.globalId or value.globalID, objectId = value.objectId,
        code = math.tointeger(e.code) or e.code, description = e.description or e.message,
      }
    end
  else
    self.downloaded = self.downloaded + 1
    if self.on_change then
      self.on_change(layer, kind, value)
      return
    end
  end
  if self.edits then
    local place = PLACE[kind]
    local part = self:entry(layer)[place[1]]
    local list = part[place[2]]
    if not list then
      list = json.array()
      part[place[2]] = list
    end
    list[#list + 1] = value
  end
end

-- The kind of record held by each list of a decoded 2.1 entry.
local KIND_OF = {}
for kind, place in pairs(PLACE) do KIND_OF[place[1] .. "." .. place[2]] = kind end

--- Feeds the records of an already decoded response (its `edits` array) to
-- the sink, as the C core would have while streaming it.
-- @tparam table doc the decoded response
-- @local
function Sink:absorb(doc)
  for _, entry in ipairs(type(doc.edits) == "table" and doc.edits or {}) do
    local layer = math.tointeger(entry.id) or entry.id
    self:record("layer", layer)
    for _, part in ipairs{ "features", "attachments" } do
      for list_name, list in pairs(type(entry[part]) == "table" and entry[part] or {}) do
        local kind = KIND_OF[part .. "." .. list_name]
        if kind then
          for _, value in ipairs(list) do self:record(kind, layer, value) end
        end
      end
    end
  end
end

local function integer_gens(list)
  if type(list) ~= "table" then return nil end
  local out = {}
  for i, l in ipairs(list) do
    out[i] = { id = math.tointeger(tonumber(l.id)) or l.id, serverGen = math.tointeger(tonumber(l.serverGen)) }
  end
  return out
end

-- Streams the result file at `url` into the sink (or saves it to
-- opts.output, checking that a JSON file is complete). Returns true or nil, err.
local function fetch(client, url, sink, opts)
  if opts.output then
    local body, err = client:download(url, { timeout = opts.timeout, on_progress = opts.on_progress })
    if not body then return nil, err end
    if body:sub(1, 1) == "{" then -- a JSON result must be complete before it is trusted
      local check = core.records()
      local ok, msg, offset = check:feed(body)
      if ok then ok, msg, offset = check:finish() end
      if not ok then
        return nil, errors.new("protocol", "result file: " .. msg, { url = url, offset = offset })
      end
      check:drain(function(kind, _, value, key)
        if kind == "field" and key ~= "edits" then sink.fields[key] = value end
      end)
    end
    local ok, write_err = core.write_file_atomic(opts.output, body)
    if not ok then return nil, errors.new("io", write_err) end
    return true
  end
  local ok, err = client:download(url, { timeout = opts.timeout, stream = sink, on_progress = opts.on_progress })
  if not ok then return nil, err end
  local done, msg, offset = sink.records:finish()
  if not done then
    return nil, errors.new("protocol", "result file is not a complete JSON document: " .. msg,
      { url = url, offset = offset })
  end
  sink.records:drain(sink.deliver)
  return true
end

--- Builds the result of a synchronization. `doc`: the fields of the
-- response (or of the job status), `status`: the job status resource (async)
-- or nil, `sink`: the records already streamed from the response body (nil
-- for a job). Downloads the result file when there is one. opts: output,
-- on_change, on_progress, timeout. Returns result or nil, err; touches no replica state.
-- Internal: synchronize_replica and jobs call it.
-- @param client the client
-- @tparam table doc the response's (or job status's) fields
-- @tparam ?table status the job status resource, or nil
-- @tparam[opt] table opts output, on_change, on_progress, timeout
-- @tparam[opt] table sink the records already streamed
-- @treturn[1] Result the result
-- @return[2] nil
-- @treturn[2] table err: the download's errors, kind "protocol" (an incomplete result, no
--   generation), "io" (opts.output could not be written)
-- @local
function sync_result.finish(client, doc, status, opts, sink)
  opts = opts or {}
  if not sink then
    sink = sync_result.sink(opts.on_change)
    sink:absorb(doc) -- an embedded result that was decoded whole
  end
  local url = sync_result.result_url(doc) or (status and sync_result.result_url(status))
  local result = setmetatable({}, Result)
  local content = {}
  if url and url ~= "" then
    sink.fields = {}
    sink.records = core.records() -- a new document: the response's own one has ended
    local ok, err = fetch(client, url, sink, opts)
    if not ok then return nil, err end
    content = sink.fields
    result.result_url = url
    result.output = opts.output
  end
  local function pick(field)
    if content[field] ~= nil then return content[field] end
    if doc[field] ~= nil then return doc[field] end
    return status and status[field]
  end
  -- the response (or job status) says how the result travelled; the file may not
  result.transportType = (status and status.transportType) or doc.transportType or content.transportType
  result.responseType = pick("responseType")
  result.replicaID = pick("replicaID")
  result.replicaServerGen = math.tointeger(tonumber(pick("replicaServerGen")))
  result.layerServerGens = integer_gens(pick("layerServerGens"))
  if not result.output then result.edits = sink.edits end
  result.transport = sync_params.transport_of(result.transportType) or (url and "url" or "embedded")
  result.response = sync_params.response_of(result.responseType)
  if result.replicaServerGen == nil and result.layerServerGens == nil then
    return nil, errors.new("protocol", "the synchronization result carries neither replicaServerGen nor "
      .. "layerServerGens", { url = url })
  end
  table.sort(sink.failed_edits, function(a, b)
    if a.layer ~= b.layer then return (a.layer or 0) < (b.layer or 0) end
    return tostring(a.globalId) < tostring(b.globalId)
  end)
  result.failed_edits, result.counts = sink.failed_edits, sink.counts
  result.succeeded, result.downloaded = sink.succeeded, sink.downloaded
  if status and type(status.status) == "string" and status.status:lower() == "completedwitherrors" then
    result.partial = true
  end
  return result
end

--- The error of strict mode: any failed edit fails the call (the result and
-- the failures stay reachable from the error).
-- @tparam Result result a result with failed edits
-- @treturn table err of kind "edits" with `failed_edits` and `result`
-- @local
function sync_result.strict_error(result)
  local first = result.failed_edits[1]
  return errors.new("edits", ("%d edit(s) failed; first: layer %s %s %s %s: %s"):format(
    #result.failed_edits, tostring(first.layer), first.op, first.target, tostring(first.globalId),
    tostring(first.description)), { code = first.code, failed_edits = result.failed_edits, result = result })
end

return sync_result
