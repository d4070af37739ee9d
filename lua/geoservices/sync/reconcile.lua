--- What a synchronization carrying edits must do when its outcome is
-- uncertain. Pure: the request's edits in, a verdict or an annotated error
-- out. Internal.
local json = require "geoservices.json"
local sink_mod = require "geoservices.sync.sink"

local reconcile = {}

-- A synchronizeReplica that carried edits and failed in a way that may have
-- reached the server (response lost or reset, unreadable body, 5xx) is
-- re-issued with the same edits only because re-applying them is harmless:
--   * adds carry client-side GlobalIDs (the edits builder makes them): the
--     server refuses an add whose GlobalID exists with code -2147217395, so
--     an add is never applied twice. Those failures, for exactly the adds
--     this request re-sent, are reported as already applied;
--   * an update re-applied writes the same values again (idempotent);
--   * a delete re-applied fails with 1019 "Object is missing": for exactly
--     the deletes re-sent, that too is reported as already applied.
-- It is not re-issued (the ambiguous error says so, err.ambiguous = true)
-- when an add has no GlobalID (the server would add it twice) or with
-- rollbackOnFailure = true (an applied first attempt would make the whole
-- re-issue roll back). opts.resend = true declares a manual re-send of
-- edits whose earlier sync failed ambiguously, with the same reconciliation.

local DUPLICATE_GLOBALID = -2147217395 -- "an object with this GlobalID already exists"
local OBJECT_MISSING = 1019             -- "Object is missing."

local function edit_key(layer, target, gid)
  return ("%s|%s|%s"):format(tostring(layer), target, (tostring(gid):upper():gsub("[{}]", "")))
end

-- The adds and deletes a request carries, keyed by layer, target and
-- GlobalID; nil when it carries no edits.
function reconcile.sent_edits(fields)
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
            sent.adds[edit_key(layer, target, gid)] = true
          else
            sent.identified = false
          end
          sent.count = sent.count + 1
          sent.list[#sent.list + 1] = { layer = layer, target = target, op = "add", globalId = gid or nil }
        end
        for _, gid in ipairs(p.deleteIds or {}) do
          sent.deletes[edit_key(layer, target, gid)] = true
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

--- Moves the failures that prove a re-sent edit was applied by an earlier
-- attempt from result.failed_edits to result.already_applied, and counts
-- them as succeeded.
-- @tparam table result a synchronization result
-- @tparam table sent the adds and deletes the request carried
-- @treturn table the result, with `reissued = true`
-- @local
function reconcile.apply(result, sent)
  local kept, already = {}, {}
  for _, f in ipairs(result.failed_edits or {}) do
    local k = edit_key(f.layer, f.target, f.globalId)
    if (f.op == "add" and f.code == DUPLICATE_GLOBALID and sent.adds[k])
      or (f.op == "delete" and f.code == OBJECT_MISSING and sent.deletes[k]) then
      f.already_applied = true
      already[#already + 1] = f
      local c = result.counts and result.counts[f.layer]
      if c then c.failed, c.succeeded = c.failed - 1, c.succeeded + 1 end
      result.succeeded = (result.succeeded or 0) + 1
    else
      kept[#kept + 1] = f
    end
  end
  result.failed_edits = kept
  result.already_applied = already
  result.reissued = true
  return result
end

function reconcile.ambiguous_error(err)
  err.ambiguous = true
  if not err.message:find("resend", 1, true) then
    err.message = err.message .. "; the edits may have been applied: synchronize again with the same edits and "
      .. "opts.resend = true (adds and deletes already applied are then reported as such)"
  end
  return err
end

--- The sent edits the server gave no per-edit result for (a direction or
-- layer that does not upload drops them silently). Results are matched by
-- GlobalID, then, for results without one, by count per layer and
-- operation. Only meaningful when results were expected: the caller checks
-- only embedded results, or results that carry any answer at all.
-- @tparam table sent what reconcile.sent_edits returned
-- @tparam table sink the records sink (its `answered`, `anonymous`, `results`)
-- @treturn table the unanswered edits, `{ {layer =, target =, op =, globalId =}, ... }`
function reconcile.unanswered(sent, sink)
  local left = {}
  local spare = {}
  for k, v in pairs(sink.anonymous) do spare[k] = v end
  for _, e in ipairs(sent.list or {}) do
    local gid = e.globalId or ""
    if not (gid ~= "" and sink.answered[sink_mod.answer_key(e.op, e.layer, e.target, gid)]) then
      local group = sink_mod.answer_key(e.op, e.layer, e.target, "")
      if (spare[group] or 0) > 0 then
        spare[group] = spare[group] - 1
      else
        left[#left + 1] = e
      end
    end
  end
  return left
end

--- The server accepted a synchronization that carried edits, but its result
-- could not be read: the edits are applied, the generations did not move.
-- @tparam table err the error
-- @treturn table err, with `edits_applied = true` and a message saying to re-send
function reconcile.applied_error(err)
  err.edits_applied = true
  if not err.message:find("resend", 1, true) then
    err.message = err.message .. "; the server applied the edits but the result was not received, so the "
      .. "replica state is unchanged: synchronize again with the same edits and opts.resend = true"
  end
  return err
end

return reconcile
