--- Turns any synchronizeReplica outcome (sync embedded, sync URL, async
-- embedded, async URL) into one normalized result: the interface's fields,
-- the edits (from the body or the downloaded result file), a flat list of
-- failed edits and per-layer counts. Generations are integers here even when
-- the status resource carries them as strings.
--
-- Users meet this module through its @{Result}, returned by
-- `client:synchronize_replica`, `client:sync` and an operation's `wait`.
-- Pure: it builds the result from what the record sink (geoservices.sync.sink)
-- kept; the downloads happen in geoservices.sync.
-- @module geoservices.sync.result
local errors = require "geoservices.base.errors"
local outcome = require "geoservices.sync.outcome"
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
-- @field edits the downloaded changes as an edits array (`{ {id =, features = {adds =, updates =,
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
-- @field outcomes `[key] = "applied" | "unknown" | {code =, description =}` of each sent edit
--   (geoservices.sync.outcome; after client:sync also the verdicts read back from the server)
-- @field unknown the sent edits whose outcome the answer does not tell (`{key =, layer =, op =,
--   target =, globalId =}`): client:sync and store:sync read them back from the server
-- @field conflicts (client:sync) edits not applied because the server holds newer values, and updates
--   the server applied late (their answer lost) over another crew's values the caller had downloaded
--   (`outcome = "local_kept"`, those values in `server`); (store:sync)
--   every conflict kept, with the `policy` and `outcome` that decided it (geoservices.store.sync.rebase)
-- @field summary (store:sync) one count per outcome (sent, merged, held, server_kept, local_kept, rejected,
--   refused, requeued, downloaded); the result then prints it
-- @field closed true when closeReplica was asked (client:sync marks the state closed)
local Result = { __name = "geoservices.SyncResult" }
Result.__index = Result

-- The counts of a store's synchronization, one per outcome (sync_result.summary).
local Summary = { __name = "geoservices.SyncSummary" }
Summary.__index = Summary

local function plural(n, one, many) return ("%d %s"):format(n, n == 1 and one or (many or one .. "s")) end

function Summary:__tostring()
  local parts = { ("%d sent"):format(self.sent), ("%d merged"):format(self.merged) }
  local how = {}
  if self.held > 0 then how[#how + 1] = ("%d held back"):format(self.held) end
  if self.server_kept > 0 then how[#how + 1] = ("%d server's values kept"):format(self.server_kept) end
  if self.local_kept > 0 then how[#how + 1] = ("%d local values sent over the server's"):format(self.local_kept) end
  parts[#parts + 1] = plural(self.conflicts, "conflict") .. (#how > 0 and (" (" .. table.concat(how, ", ") .. ")")
    or "")
  parts[#parts + 1] = ("%d rejected by the server"):format(self.rejected)
  parts[#parts + 1] = ("%d refused here"):format(self.refused)
  if self.requeued > 0 then parts[#parts + 1] = ("%d queued again"):format(self.requeued) end
  parts[#parts + 1] = ("%d downloaded"):format(self.downloaded)
  return table.concat(parts, ", ")
end

--- The summary of a store's synchronization: one count per outcome, each
-- local edit in exactly one: `sent` (applied as sent), `merged` (applied
-- merged with the server's changes of other fields, or nothing left to
-- send because the server held the same values), `held` (a conflict held
-- back: nothing of it sent), `server_kept` (a conflict whose server's
-- values were kept), `local_kept` (a conflict whose local values were sent
-- over the server's), `conflicts` (the three together), `rejected` (refused
-- by the server), `refused` (refused here before sending), `requeued` (its
-- outcome not known yet: queued again), and `downloaded` (records the
-- download applied). The same names in the Lua result (`result.summary`),
-- the CLI's `--json` (its `summary` member) and its text, which is
-- `tostring(summary)`: "1 sent, 1 merged, 1 conflict (1 held back), 0 rejected by the server, 0 refused
-- here, 3 downloaded".
-- @tparam table counts the counts (missing ones are 0)
-- @treturn table the summary
-- @local
function sync_result.summary(counts)
  local s = setmetatable({}, Summary)
  for _, k in ipairs(sync_result.SUMMARY_FIELDS) do s[k] = math.tointeger(counts[k]) or 0 end
  s.conflicts = s.held + s.server_kept + s.local_kept
  return s
end

--- The members of a summary, in the order they print.
sync_result.SUMMARY_FIELDS = { "sent", "merged", "held", "server_kept", "local_kept", "rejected", "refused", "requeued",
                               "downloaded" }

function Result:__tostring()
  local gen = self.replicaServerGen
  if gen == nil and self.layerServerGens then
    local parts = {}
    for _, l in ipairs(self.layerServerGens) do parts[#parts + 1] = ("%s:%s"):format(l.id, l.serverGen) end
    gen = "layers " .. table.concat(parts, ",")
  end
  if self.summary then -- a store's: one count per outcome
    return ("sync %s: %s, generation %s%s"):format(tostring(self.replicaID), tostring(self.summary), tostring(gen),
      self.partial and " (partial)" or "")
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

local function integer_gens(list)
  if type(list) ~= "table" then return nil end
  local out = {}
  for i, l in ipairs(list) do
    out[i] = { id = math.tointeger(tonumber(l.id)) or l.id, serverGen = math.tointeger(tonumber(l.serverGen)) }
  end
  return out
end

--- Builds the result of a synchronization from what arrived, without I/O.
-- Internal: geoservices.sync calls it once the response (and the result
-- file, if any) went through the sink.
-- @tparam table doc the response's (or job status's) fields
-- @tparam ?table status the job status resource, or nil
-- @tparam table sink the records sink (outcomes and downloaded records)
-- @tparam ?table file what the result file said: `{url =, fields =, output =}`, or nil
-- @treturn[1] Result the result
-- @return[2] nil
-- @treturn[2] table err: kind "protocol" (no generation)
-- @local
function sync_result.build(doc, status, sink, file)
  local result = setmetatable({}, Result)
  local content = file and file.fields or {}
  if file then
    result.result_url = file.url
    result.output = file.output
  end
  local url = file and file.url
  local function pick(field)
    if content[field] ~= nil then return content[field] end
    if doc[field] ~= nil then return doc[field] end
    return status and status[field]
  end
  -- the response (or job status) says how the result travelled; the file may not
  result.transportType = (status and status.transportType) or doc.transportType or content.transportType
  result.responseType = pick("responseType")
  result.replicaID = pick("replicaID")
  local raw_gen = pick("replicaServerGen")
  result.replicaServerGen = math.tointeger(tonumber(raw_gen))
  if raw_gen ~= nil and result.replicaServerGen == nil then
    return nil, errors.new("protocol", ("the synchronization result carries replicaServerGen %s, not an integer")
      :format(tostring(raw_gen)), { url = url })
  end
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

local function generation_text(result)
  if result.replicaServerGen then return "generation " .. tostring(result.replicaServerGen) end
  local parts = {}
  for _, l in ipairs(result.layerServerGens or {}) do parts[#parts + 1] = ("%s:%s"):format(l.id, l.serverGen) end
  return "layer generations " .. table.concat(parts, ",")
end

local function same_replica(a, b)
  return outcome.normalize_gid(a) == outcome.normalize_gid(b)
end

--- Checks a result against what was asked: this replica's, generations
-- positive integers that never go back. Nothing is kept when it fails.
-- @tparam Result result the result
-- @tparam ?table expect `replicaID`, `replicaServerGen`, `layer_gens` ([layer id] = generation sent)
-- @treturn ?table err of kind "protocol", or nil
-- @local
function sync_result.check(result, expect)
  if not expect then return nil end
  local function bad(what)
    return errors.new("protocol", ("the synchronization result %s: nothing of it is kept, the replica state is "
      .. "unchanged"):format(what), { url = result.result_url })
  end
  if expect.replicaID and result.replicaID ~= nil and not same_replica(result.replicaID, expect.replicaID) then
    return bad(("is for replica %s, not %s"):format(tostring(result.replicaID), tostring(expect.replicaID)))
  end
  local gen = result.replicaServerGen
  if gen ~= nil and gen < 1 then
    return bad("carries replicaServerGen " .. tostring(gen) .. ", not a positive integer")
  end
  if gen and expect.replicaServerGen and gen < expect.replicaServerGen then
    return bad(("moves the generation back, from %d to %d"):format(expect.replicaServerGen, gen))
  end
  for _, l in ipairs(result.layerServerGens or {}) do
    if math.type(l.serverGen) ~= "integer" or l.serverGen < 1 then
      return bad(("carries serverGen %s for layer %s, not a positive integer"):format(tostring(l.serverGen),
        tostring(l.id)))
    end
    local before = expect.layer_gens and expect.layer_gens[l.id]
    if before and l.serverGen < before then
      return bad(("moves layer %s's generation back, from %d to %d"):format(tostring(l.id), before, l.serverGen))
    end
  end
  return nil
end

--- The error of strict mode: any failed edit fails the call (the result and
-- the failures stay reachable from the error).
-- @tparam Result result a result with failed edits
-- @treturn table err of kind "edits" with `failed_edits` and `result`
-- @local
function sync_result.strict_error(result)
  local first = result.failed_edits[1]
  return errors.new("edits", ("%d edit(s) failed; first: layer %s %s %s %s: %s. The replica was synchronized "
    .. "(%s): do not send the same request again"):format(
    #result.failed_edits, tostring(first.layer), first.op, first.target, tostring(first.globalId),
    tostring(first.description), generation_text(result)),
    { code = first.code, failed_edits = result.failed_edits, result = result, synchronized = true })
end

return sync_result
