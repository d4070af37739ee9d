--- The fate of each uploaded edit, as the vendor documents synchronizeReplica
-- (pure: what was sent and what came back in, verdicts out). Internal.
--
-- Per-edit results (addResults, updateResults, deleteResults) exist only in
-- embedded answers of an edits response type (INTERFACE.md 2.1); a URL result
-- file, an async job's result and a NoEdits answer carry none. With
-- rollbackOnFailure true, one failed edit rolls the whole upload back and the
-- request fails; with false, failing edits are skipped and the others applied
-- (https://developers.arcgis.com/rest/services-reference/enterprise/rollbackonfailure-and-sync-models).
-- A server may list only the skipped edits. So an edit is:
--   * rejected  when a result lists it as failed;
--   * applied   when a result lists it as a success, or when it is not listed
--               but the upload succeeded on a direction that uploads with
--               rollbackOnFailure true (all or nothing, and it was not nothing),
--               or with false and a results list in the answer (skipped-only);
--   * unknown   otherwise: no results at all (URL, async, rollbackOnFailure
--               false), a job that ended CompletedWithErrors, a lost answer.
-- An unknown outcome is resolved by reading the server (geoservices.sync.verify),
-- never by sending the edit again blindly and never by error codes whose
-- meaning no source documents.
local json = require "geoservices.base.json"
local sink_mod = require "geoservices.sync.sink"

local outcome = {}

outcome.APPLIED = "applied"
outcome.UNKNOWN = "unknown"
--- A verdict read back (geoservices.sync.verify) of an add sent before: the
-- server holds its feature from that earlier send, without what this one
-- carried (an edit made since, joined to it): the rest goes as an update.
outcome.APPLIED_BEFORE = "applied_before"

local UPLOADS = { bidirectional = true, upload = true }

--- The members of a service's `syncCapabilities` that decide outcomes, kept
-- with a replica (true, false, or absent: the server did not say).
outcome.CAPABILITIES = { "supportsRollbackOnFailure", "supportsPerReplicaSync", "supportsPerLayerSync",
                         "supportsAsync", "supportsSyncDirectionControl" }

--- The capabilities worth keeping of a service's `syncCapabilities`.
-- @tparam ?table caps the service resource's syncCapabilities
-- @treturn table the members of @{CAPABILITIES} it states
function outcome.capabilities_of(caps)
  local kept = json.object()
  for _, k in ipairs(outcome.CAPABILITIES) do
    local v = type(caps) == "table" and caps[k]
    if v == true or v == "true" then kept[k] = true elseif v == false or v == "false" then kept[k] = false end
  end
  return kept
end

--- Whether a request's upload is all or nothing, by the server's rules
-- (https://developers.arcgis.com/rest/services-reference/enterprise/rollbackonfailure-and-sync-models):
-- a service with supportsRollbackOnFailure honours the parameter sent; one
-- without it ignores the parameter and its sync model decides: perLayer
-- only skips failed edits (false), perReplica only rolls back (true; the
-- page: supportsPerReplicaSync is true and supportsPerLayerSync false when
-- not given). With both models and no promise, nothing is certain (nil).
-- @tparam boolean sent the rollbackOnFailure the request sent
-- @tparam ?table caps the service's capabilities (@{capabilities_of}); nil: not known, `sent`
-- @treturn ?boolean true (all or nothing), false (failed edits skipped), nil (not certain)
function outcome.rollback_in_effect(sent, caps)
  if caps == nil or caps.supportsRollbackOnFailure == true then return sent end
  local per_replica, per_layer = caps.supportsPerReplicaSync ~= false, caps.supportsPerLayerSync == true
  if per_layer and not per_replica then return false end
  if per_replica and not per_layer then return true end
  return nil
end

--- A GlobalID as the server's answers are compared: upper case, no braces.
function outcome.normalize_gid(gid)
  return (tostring(gid):upper():gsub("[{}]", ""))
end

--- The key of an edit: operation, layer, target and GlobalID (case and
-- braces folded).
function outcome.key(op, layer, target, gid)
  return sink_mod.answer_key(op, layer, target or "feature", gid or "")
end

--- Whether a status value is CompletedWithErrors, whatever its case or spaces.
function outcome.status_is(status, name)
  return type(status) == "string" and status:lower():gsub("[%s_]", "") == name:lower()
end

--- The edits a request carries: `list` of `{layer =, target =, op =, globalId =}`, `count`,
-- `identified` (every add has a GlobalID); nil when it carries no edits. Edits in an uploaded
-- file (`editsUploadId`) are carried too, none of them known here: `uploaded` (the id), an
-- empty `list`, `identified` false.
function outcome.sent_edits(fields)
  if fields.edits == nil and fields.editsUploadId ~= nil then
    return { adds = json.object(), deletes = json.object(), count = 0, identified = false, list = {},
             uploaded = fields.editsUploadId }
  end
  if fields.edits == nil then return nil end
  local list = fields.edits
  if type(list) == "string" then list = json.decode(list) end
  if type(list) ~= "table" then return nil end
  local sent = { adds = json.object(), deletes = json.object(), count = 0, identified = true, list = {} }
  for _, entry in ipairs(list) do
    local layer = math.tointeger(entry.id) or entry.id
    for _, part in ipairs{ "features", "attachments" } do
      local p = entry[part]
      if type(p) == "table" then
        local target = part == "features" and "feature" or "attachment"
        for _, item in ipairs(p.adds or {}) do
          local gid = type(item) == "table" and (part == "features" and type(item.attributes) == "table"
            and item.attributes.GlobalID or item.globalId)
          if type(gid) == "string" and gid ~= "" then
            sent.adds[outcome.key("add", layer, target, gid)] = true
          else
            sent.identified = false
          end
          sent.count = sent.count + 1
          sent.list[#sent.list + 1] = { layer = layer, target = target, op = "add", globalId = gid or nil }
        end
        for _, gid in ipairs(p.deleteIds or {}) do
          sent.deletes[outcome.key("delete", layer, target, gid)] = true
          sent.count = sent.count + 1
          sent.list[#sent.list + 1] = { layer = layer, target = target, op = "delete", globalId = gid }
        end
        for _, item in ipairs(p.updates or {}) do
          local gid = type(item) == "table" and (part == "features" and type(item.attributes) == "table"
            and item.attributes.GlobalID or item.globalId)
          sent.count = sent.count + 1
          sent.list[#sent.list + 1] = { layer = layer, target = target, op = "update", globalId = gid or nil }
        end
      end
    end
  end
  return sent.count > 0 and sent or nil
end

--- Classifies each sent edit.
-- @tparam table sent what outcome.sent_edits returned (its `list`)
-- @tparam table sink the record sink the answer went through (`failed_edits`, `answered`, `results`)
-- @tparam table ctx `rollback` (whether the upload is all or nothing: @{rollback_in_effect}; nil:
--   not certain), `direction` (the request's syncDirection or nil:
--   bidirectional), `layer_directions` ([layer] = direction, per layer), `status` (a job's final
--   status value, or nil), `succeeded` (the request or job produced a result)
-- @treturn table `[key] = "applied" | "unknown" | {code =, description =}` (rejected)
-- @treturn table counts `{applied =, rejected =, unknown =}`
function outcome.classify(sent, sink, ctx)
  local failed = {}
  for _, f in ipairs(sink.failed_edits or {}) do
    failed[outcome.key(f.op, f.layer, f.target, f.globalId)] = f
  end
  local partial = outcome.status_is(ctx.status, "CompletedWithErrors")
  local results_present = (sink.results or 0) > 0
  local verdicts, counts = {}, { applied = 0, rejected = 0, unknown = 0 }
  for _, e in ipairs(sent and sent.list or {}) do
    local k = outcome.key(e.op, e.layer, e.target, e.globalId)
    local direction = (ctx.layer_directions and ctx.layer_directions[e.layer]) or ctx.direction or "bidirectional"
    local f = failed[k]
    local v
    if f then
      v = { code = f.code, description = f.description }
    elseif e.globalId and sink.answered[k] then
      v = outcome.APPLIED
    elseif ctx.succeeded and UPLOADS[direction] and not partial
      and (ctx.rollback or results_present) then
      v = outcome.APPLIED
    else
      v = outcome.UNKNOWN
    end
    verdicts[k] = v
    local n = v == outcome.APPLIED and "applied" or v == outcome.UNKNOWN and "unknown" or "rejected"
    counts[n] = counts[n] + 1
  end
  return verdicts, counts
end

--- The outcome of an uploaded edits file (`editsUploadId`) whose answer was
-- lost: never known edit by edit (geoservices.sync.attempt: UPLOADED EDITS
-- FILES). `kept`: it stays in the attempt (the server may still apply it),
-- else it is settled unknown.
-- @string id the item's id
-- @bool kept whether it stays in the attempt
-- @treturn table `{id =, outcome = "unknown", kept =, message =}`
function outcome.uploaded_item(id, kept)
  return { id = id, outcome = "unknown", kept = kept == true, message = kept
    and ("the uploaded edits (item %s) may still be applied late: they are not sent again, and the next "
      .. "synchronization reads the server first"):format(id)
    or ("the outcome of the uploaded edits (item %s) is not known: they were not sent again (the server does "
      .. "not give an uploaded file back; check its edits on the server before sending it again)"):format(id) }
end

--- What reading an interrupted attempt back from the server settled:
-- `applied` (a count), `rejected` and `conflicts` (lists); prints as one line.
local Resolution = { __name = "geoservices.SyncResolution" }
Resolution.__index = Resolution

function Resolution:__tostring()
  local rejected = type(self.rejected) == "table" and #self.rejected or #(self.failed_edits or {})
  local line = ("read back from the server: %d edit(s) applied, %d rejected, %d conflict(s), %d to send again"):format(
    self.applied or 0, rejected, #(self.conflicts or {}), self.requeued or 0)
  if type(self.uploaded) == "table" then line = line .. "; " .. self.uploaded.message end
  return line
end

--- Gives a resolution record its one-line summary.
-- @tparam table t the record
-- @treturn table t
function outcome.resolution(t)
  return setmetatable(t, Resolution)
end

return outcome
