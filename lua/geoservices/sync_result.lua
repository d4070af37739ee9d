--- Turns any synchronizeReplica outcome (sync embedded, sync URL, async
-- embedded, async URL) into one normalized result: the interface's fields,
-- the edits (from the body or the downloaded result file), a flat list of
-- failed edits and per-layer counts. Generations are integers here even when
-- the status resource carries them as strings.
local core = require "geoservices.core"
local errors = require "geoservices.errors"
local json = require "geoservices.json"
local sync_params = require "geoservices.sync_params"

local sync_result = {}

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
function sync_result.result_url(doc)
  return doc.URL or doc.resultUrl or doc.responseUrl or doc.resultURL or doc.url
end

--- The status address of an async response, whatever its spelling.
function sync_result.status_url(doc)
  return doc.statusUrl or doc.statusURL or doc.statusurl
end

local OPS = { addResults = "add", updateResults = "update", deleteResults = "delete" }

-- Flattens the per-edit results of the 2.1 array into failed_edits and counts.
local function collect_outcomes(result)
  local failed, counts, succeeded, downloaded = {}, {}, 0, 0
  for _, entry in ipairs(result.edits or {}) do
    local id = math.tointeger(entry.id) or entry.id
    local c = counts[id] or { succeeded = 0, failed = 0 }
    counts[id] = c
    for _, target in ipairs{ "features", "attachments" } do
      local part = entry[target]
      if type(part) == "table" then
        for list_name, op in pairs(OPS) do
          for _, r in ipairs(part[list_name] or {}) do
            local ok = r.success == true or r.success == "true"
            if ok then
              c.succeeded = c.succeeded + 1
              succeeded = succeeded + 1
            else
              c.failed = c.failed + 1
              local e = type(r.error) == "table" and r.error or {}
              failed[#failed + 1] = {
                layer = id, op = op, target = target == "features" and "feature" or "attachment",
                globalId = r.globalId or r.globalID, objectId = r.objectId,
                code = math.tointeger(e.code) or e.code, description = e.description or e.message,
              }
            end
          end
        end
        downloaded = downloaded + #(part.adds or {}) + #(part.updates or {}) + #(part.deleteIds or {})
      end
    end
  end
  table.sort(failed, function(a, b)
    if a.layer ~= b.layer then return (a.layer or 0) < (b.layer or 0) end
    return tostring(a.globalId) < tostring(b.globalId)
  end)
  return failed, counts, succeeded, downloaded
end

local function integer_gens(list)
  if type(list) ~= "table" then return nil end
  local out = {}
  for i, l in ipairs(list) do
    out[i] = { id = math.tointeger(tonumber(l.id)) or l.id, serverGen = math.tointeger(tonumber(l.serverGen)) }
  end
  return out
end

--- Builds the result from the response `doc` (and the job `status` for async
-- jobs), downloading the result file when there is one. opts.output saves the
-- file instead of parsing it; opts.strict turns failed edits into an error.
-- Returns result or nil, err; nothing here touches replica state.
function sync_result.finish(client, doc, status, opts)
  opts = opts or {}
  local url = sync_result.result_url(doc) or (status and sync_result.result_url(status))
  local content = doc
  local result = setmetatable({}, Result)
  if url and url ~= "" then
    local body, err = client:download(url, opts)
    if not body then return nil, err end
    if opts.output then
      local ok, write_err = core.write_file_atomic(opts.output, body)
      if not ok then return nil, errors.new("io", write_err) end
      result.output = opts.output
      content = {}
      -- a JSON result file still tells the generations; a geodatabase does not
      if body:sub(1, 1) == "{" then content = json.decode(body) or {} end
      content.edits = nil
    else
      local decoded, msg, offset = json.decode(body)
      if type(decoded) ~= "table" then
        return nil, errors.new("protocol", ("result file is not a complete JSON document at byte %s: %s"):format(
          tostring(offset), tostring(msg)), { url = url, offset = offset })
      end
      content = decoded
    end
    result.result_url = url
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
  result.edits = content.edits or (not result.output and json.array() or nil)
  result.transport = sync_params.transport_of(result.transportType) or (url and "url" or "embedded")
  result.response = sync_params.response_of(result.responseType)
  if result.replicaServerGen == nil and result.layerServerGens == nil then
    return nil, errors.new("protocol", "the synchronization result carries neither replicaServerGen nor "
      .. "layerServerGens", { url = url })
  end
  result.failed_edits, result.counts, result.succeeded, result.downloaded = collect_outcomes(result)
  if status and type(status.status) == "string" and status.status:lower() == "completedwitherrors" then
    result.partial = true
  end
  return result
end

--- The error of strict mode: any failed edit fails the call (the result and
-- the failures stay reachable from the error).
function sync_result.strict_error(result)
  local first = result.failed_edits[1]
  return errors.new("edits", ("%d edit(s) failed; first: layer %s %s %s %s: %s"):format(
    #result.failed_edits, tostring(first.layer), first.op, first.target, tostring(first.globalId),
    tostring(first.description)), { code = first.code, failed_edits = result.failed_edits, result = result })
end

return sync_result
