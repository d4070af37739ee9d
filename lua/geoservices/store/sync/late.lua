--- An update whose answer was lost, applied by the server late: after
-- another crew's change of its feature, which a download meanwhile brought
-- into the feature table (geoservices.sync.attempt's late window holds the
-- edit in its attempt, never settling it as a conflict while it may still
-- land: geoservices.store.edits.conflicts). Once a read shows it applied,
-- the server holds what the edit sent, over that change: the feature table
-- takes the sent values again (the store holds what the server holds), and
-- a conflict tells the user, outcome `local_kept` (ours went over the other
-- crew's values, kept in the conflict; `st:resolve(gid, "server")` puts them
-- back). Where the user edited the feature again since (a newer queued
-- edit: the table holds theirs, which goes next), the table is left as it
-- is and that edit's base takes the sent values: the server holds them from
-- our own edit, which the rebase must not take for another crew's change
-- (a false conflict). Nothing is done where the table still holds what was
-- sent. Internal (geoservices.store.sync.commit, in the transaction that
-- settles the read).
-- @module geoservices.store.sync.late
-- @local
local conflicts = require "geoservices.store.edits.conflicts"
local json = require "geoservices.base.json"
local compare = require "geoservices.sync.compare"
local outgoing = require "geoservices.store.edits.outgoing"
local shared = require "geoservices.store.shared"

local late = {}

late.DESCRIPTION = "the server applied this edit late (its answer was lost), after another crew's change of the "
  .. "feature, which it replaced: the server and the table hold this edit's values, the other crew's are kept here "
  .. "(resolve with the server's version to put them back)"

-- A copy of `feature` with the values `sent` carries over its own.
local function with_sent(feature, sent)
  local out = { attributes = json.object(), geometry = feature.geometry }
  for k, v in pairs(feature.attributes) do out.attributes[k] = v end
  for k, v in pairs(sent.attributes or {}) do out.attributes[k] = v end
  if sent.geometry ~= nil then out.geometry = sent.geometry end
  return out
end

-- Whether a local edit of the row's feature was queued after it; the base
-- of each such edit takes the values `sent` (the server holds them now).
local function edited_since(st, spec, r, sent)
  local rows, m, c = st.db:rows("SELECT seq, base FROM gpkgext_geoservices_edits WHERE layer_id = ? AND "
    .. "global_id = ? AND attempt_id IS NULL AND seq > ?", r.layer, r.globalId, r.seq)
  if not rows then return nil, m, c end
  for _, q in ipairs(rows) do
    local base = q.base ~= nil and outgoing.base(spec, q.base) -- kept as the row was (capture)
    if type(base) == "table" and type(base.attributes) == "table" then
      local ok
      ok, m, c = st.db:run("UPDATE gpkgext_geoservices_edits SET base = ? WHERE seq = ?",
        json.encode(with_sent(base, sent)), q.seq)
      if not ok then return nil, m, c end
    end
  end
  return rows[1] ~= nil
end

--- For each update of `rows` settled applied (`by_seq[seq] == true`): the
-- sent values back in the table, and the conflict kept, where a download
-- replaced them since. Returns the conflicts kept (for the result), or nil, err.
-- @param st the store (in a transaction, uncaptured)
-- @int attempt_id the attempt
-- @tparam table rows its queue rows, as st:pending() gives them (`seq`, `layer`, `op`, `globalId`, `feature`
--   (what was sent), `base`: decoded)
-- @tparam table by_seq each row's fate (geoservices.store.sync.commit.outcomes)
function late.landed(st, attempt_id, rows, by_seq)
  local kept = {}
  for _, r in ipairs(rows) do
    local spec, sent = st.layers[r.layer], r.feature
    if by_seq[r.seq] == true and r.op == "update" and spec and type(sent) == "table" then
      local current, m, c = st.db:get(r.layer, r.globalId)
      if current == nil and m then return nil, shared.db_error(st.path, m, c) end
      local edited
      edited, m, c = edited_since(st, spec, r, sent)
      if edited == nil then return nil, shared.db_error(st.path, m, c) end
      local own = { [spec.globalid] = true, [spec.oid or "OBJECTID"] = true } -- the server fills them
      if current and not edited and not compare.holds(current, sent, own) then
        local ok
        ok, m, c = st.db:put(r.layer, with_sent(current, sent))
        if ok then
          ok, m, c = conflicts.keep(st, { seq = r.seq, layer = r.layer, op = r.op, gid = r.globalId,
            feature = json.encode(sent), base = r.base ~= nil and json.encode(r.base) or nil,
            server = json.encode(current), description = late.DESCRIPTION, attempt = attempt_id,
            outcome = "local_kept" })
        end
        if not ok then return nil, shared.db_error(st.path, m, c) end
        kept[#kept + 1] = { seq = r.seq, layer = r.layer, op = r.op, globalId = r.globalId, sent = sent,
                            server = current, description = late.DESCRIPTION, outcome = "local_kept" }
      end
    end
  end
  return kept
end

return late
