--- Conflicts kept when a download changes or deletes a feature that has a
-- local edit not sent (queued, or sent in this synchronization and not
-- applied by the server). The server's version goes into the feature table
-- (the last writer on the server wins, as the vendor documents), the local
-- edit leaves the queue and is kept in geoservices_conflicts with the
-- local version of the feature, its base, the server's version, the time
-- and the outcome ("server_kept"), where `st:conflicts()`, the `conflicts`
-- command and QGIS (the table is registered in gpkg_contents) show it.
-- Nothing that lost is silent: the synchronization's result names it.
--
-- Which features the download changed is told by comparing each one's
-- local version before and after the download is applied, in the commit's
-- transaction: that also covers an edit made while the synchronization ran.
-- A queued delete of a feature the server deleted too simply leaves the
-- queue. Internal (geoservices.store.commit).
-- @module geoservices.store.conflicts
-- @local
local json = require "geoservices.json"
local outgoing = require "geoservices.store.outgoing"
local queue = require "geoservices.store.queue"
local shared = require "geoservices.store.shared"

local conflicts = {}

local DESCRIPTION = "the server changed this feature while a local edit of it was not sent: the server's version is "
  .. "in the table, the local one kept here"
local DELETED = "the server deleted this feature while a local edit of it was not sent: it is gone from the table, "
  .. "the local version kept here"

--- The local version of the feature of each queued edit not sent, or sent
-- in `attempt_id`, before the download is applied.
-- @param st the store (in the commit's transaction)
-- @int ?attempt_id this synchronization's attempt
-- @return the list of queue rows with `before` (the feature, or false), or nil, err
function conflicts.before(st, attempt_id)
  local rows, msg, code = st.db:rows("SELECT seq, layer_id, op, global_id, attempt_id, feature, base "
    .. "FROM geoservices_edits ORDER BY seq")
  if not rows then return nil, shared.db_error(st.path, msg, code) end
  local list = {}
  for _, q in ipairs(rows) do
    if q.attempt_id == nil or q.attempt_id == attempt_id then
      local f, err = st:get(q.layer_id, q.global_id)
      if f == nil and err then return nil, err end
      q.before = f or false
      list[#list + 1] = q
    end
  end
  return list
end

local function entry(q, after, description)
  return { seq = q.seq, layer = q.layer_id, op = q.op, globalId = q.global_id, feature = q.before or nil,
           server = after or json.null, description = description, outcome = "server_kept" }
end

--- After the download: each edit whose feature it changed is kept as a
-- conflict (an edit sent in this attempt and not applied through
-- `by_seq`, which end_attempt keeps; one not sent here and now).
-- @param st the store (in the commit's transaction)
-- @tparam table list from @{before}
-- @tparam table c `attempt_id`, `by_seq` (the attempt's outcomes, completed here), `touched`
--   (`[feature key] = true` of the features the download changed, as far as they were watched),
--   `key(layer, gid)`
-- @return the conflicts for the result (`seq`, `layer`, `op`, `globalId`, `feature` (the local
--   version), `server`, `description`, `outcome`, and `sent` for one that was sent), or nil, err
function conflicts.after(st, list, c)
  local kept = {}
  for _, q in ipairs(list) do
    local after, err = st:get(q.layer_id, q.global_id)
    if after == nil and err then return nil, err end
    after = after or false
    local changed = not outgoing.same(q.before or nil, after or nil)
    local description = after and DESCRIPTION or DELETED
    if q.attempt_id ~= nil then
      if changed and c.by_seq[q.seq] == nil then -- sent, not applied: never again over the newer value
        c.by_seq[q.seq] = { conflict = true, server = after or json.null, description = description }
        local e = entry(q, after, description)
        e.sent = q.feature and json.decode(q.feature) or nil
        kept[#kept + 1] = e
      end
    elseif changed then
      local ok, m, code = queue.keep_conflict(st, { seq = q.seq, layer = q.layer_id, op = q.op, gid = q.global_id,
        feature = q.before and json.encode(q.before) or nil, base = q.base,
        server = json.encode(after or json.null), description = description })
      if ok then ok, m, code = st.db:run("DELETE FROM geoservices_edits WHERE seq = ?", q.seq) end
      if not ok then return nil, shared.db_error(st.path, m, code) end
      kept[#kept + 1] = entry(q, after, description)
    elseif q.op == "delete" and not after and c.touched[c.key(q.layer_id, q.global_id)] then
      -- the server deleted it too: nothing is left to send, nothing lost
      local ok, m, code = st.db:run("DELETE FROM geoservices_edits WHERE seq = ?", q.seq)
      if not ok then return nil, shared.db_error(st.path, m, code) end
    end
  end
  return kept
end

return conflicts
