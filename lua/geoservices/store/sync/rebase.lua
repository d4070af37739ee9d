--- Rebase before upload: each queued update and delete about to be sent is
-- merged with the server's current version of its feature, field by field
-- (geoservices.sync.merge), so that only what is ours goes and nothing the
-- server holds is overwritten unless the policy says so.
--
-- How the server's version is known: the features about to be sent are
-- read by GlobalID through the layer's query (geoservices.sync.verify's
-- query, 100 GlobalIDs a request), in the attempt engine's rebase hook:
-- once the attempt holds its rows, before anything is journaled as sent.
-- Reading costs one request per 100 queued updates and deletes of a
-- layer, and nothing when only adds are queued; downloading first
-- would cost a whole synchronizeReplica round (a job on most services) at
-- every sync, and still leave the same window before the upload. The
-- window between the read and the upload is that of one local transaction.
--
-- What each row becomes, in one transaction with capture off:
--
-- * sent or merged (no conflict), server_kept, local_kept: the row's base
--   becomes the server's version and the table holds ours merged onto it
--   (the fields only the server changed take its values; for server_kept
--   the conflicting ones too), so the edit sends exactly what is ours
--   (geoservices.store.edits.outgoing computes it against the base);
-- * held (manual, and an update of a feature the server deleted), or a
--   whole-feature conflict the server's values win: the edit leaves the
--   queue, the table holds the server's version, and the local one is kept
--   in the conflicts (geoservices.store.edits.conflicts);
-- * nothing left to send (both sides made the same change, or deleted the
--   feature): the edit leaves the queue.
--
-- Every conflict is kept, whichever policy decided it. Internal
-- (geoservices.store.sync.journal's rebase hook calls @{hook}; geoservices.store.sync @{summarize}).
-- @module geoservices.store.sync.rebase
-- @local
local attachment_edits = require "geoservices.store.edits.attachment_edits"
local commit = require "geoservices.store.sync.commit"
local json = require "geoservices.base.json"
local merge = require "geoservices.sync.merge"
local outcome = require "geoservices.sync.outcome"
local outgoing = require "geoservices.store.edits.outgoing"
local queue = require "geoservices.store.edits.queue"
local shared = require "geoservices.store.shared"
local sync_result = require "geoservices.sync.result"
local unrepresentable = require "geoservices.store.file.unrepresentable"
local verify = require "geoservices.sync.verify"

local rebase = {}

local db_error = shared.db_error

-- db:put that keeps the server's Z and M a 2D column cannot hold (issue 41:
-- geoservices.store.file.unrepresentable.kept_across).
-- A geometry the store cannot represent that the merge leaves as the
-- server's stays the blob it was, with its kept JSON (put_unchanged).
local function put_keeping(st, spec, f)
  return unrepresentable.put_unchanged(st, spec, f, outgoing.same, function()
    return unrepresentable.kept_across(st, spec, f.attributes[spec.globalid],
      function() return st.db:put(spec.id, f) end)
  end)
end

local DESCRIPTIONS = {
  held = "both sides changed this feature: the edit was held back (policy %s), the server's version is in the "
    .. "table",
  server_kept = "both sides changed this feature: the server's values were kept where they conflict (policy %s), "
    .. "the rest of the edit sent",
  local_kept = "both sides changed this feature: the local values were sent over the server's (policy %s)",
}

-- The server's feature as the store keeps a base: the layer's fields only,
-- its geometry without the spatial reference the query adds.
local function as_base(spec, f)
  local attributes = json.object()
  local a = f.attributes or {}
  local lower = {}
  for k, v in pairs(a) do lower[tostring(k):lower()] = v end
  for _, c in ipairs(spec.columns) do
    local v = a[c.name]
    if v == nil then v = lower[c.name:lower()] end -- field names are not case-sensitive on a server
    attributes[c.name] = v == nil and json.null or v
  end
  local geometry = f.geometry
  if type(geometry) == "table" then
    local g = {}
    for k, v in pairs(geometry) do
      if k ~= "spatialReference" then g[k] = v end
    end
    geometry = g
  end
  return { attributes = attributes, geometry = spec.geometry_column and geometry or nil }
end

-- Ours merged onto the server's: the fields only it changed (and, for
-- server_kept, the conflicting ones) take its values.
local function merged_feature(spec, mine, theirs, r, d)
  local f = { attributes = json.object(), geometry = mine.geometry }
  for k, v in pairs(mine.attributes) do f.attributes[k] = v end
  for k, v in pairs(r.kept) do
    if k == "geometry" then f.geometry = v else f.attributes[k] = v end
  end
  for _, k in ipairs(r.same) do
    if k == "geometry" then f.geometry = theirs.geometry else f.attributes[k] = theirs.attributes[k] end
  end
  if d.outcome == "server_kept" then
    for _, k in ipairs(r.conflicts) do
      if k.kind == "field" then f.attributes[k.field] = theirs.attributes[k.field]
      elseif k.kind == "move" then f.geometry = theirs.geometry end
    end
  end
  if spec.oid then f.attributes[spec.oid] = theirs.attributes[spec.oid] end
  return f
end

-- Reads the server's version of the rows' features, layer by layer.
local function read_server(st, client, rep, rows, opts)
  local by_layer, order = {}, {}
  for _, r in ipairs(rows) do
    if not by_layer[r.layer] then
      by_layer[r.layer] = {}
      order[#order + 1] = r.layer
    end
    local list = by_layer[r.layer]
    list[#list + 1] = r.globalId
  end
  table.sort(order)
  local found = {}
  for _, layer in ipairs(order) do
    local spec = st.layers[layer]
    local got, err = verify.query(client, rep.service, layer, by_layer[layer], {
      global_id_field = spec.globalid, geometry = spec.geometry_column ~= nil, timeout = opts.timeout,
      out_sr = spec.srs_id and spec.srs_id > 0 and spec.srs_id or nil })
    if not got then
      err.message = ("the server's version of %d feature(s) of layer %d could not be read before sending "
        .. "(nothing was sent; the edits stay queued): %s"):format(#by_layer[layer], layer, tostring(err.message))
      return nil, err
    end
    found[layer] = got
  end
  return found
end

-- A conflict's entry in the result.
local function conflict_entry(r, d, k, policy)
  return { seq = r.seq, layer = r.layer, op = r.op, globalId = r.globalId, kind = k.kind, policy = policy,
           outcome = d.outcome, description = DESCRIPTIONS[d.outcome]:format(policy), conflicts = d.conflicts }
end


-- ---- attachments ---------------------------------------------------------------

local att_key = attachment_edits.key

-- The server's attachments of the parents of `rows`, `[key] = info` (queryAttachments).
local function server_attachments(client, rep, rows, opts)
  return attachment_edits.server_attachments(client, rep, rows, { retry = "read", timeout = opts.timeout })
end

-- Whether the server's attachment is still the one the edit started from (its base: name, type, size).
local function same_attachment(info, base)
  if type(base) ~= "table" then return true end
  if base.name ~= nil and info.name ~= nil and base.name ~= info.name then return false end
  if base.content_type ~= nil and info.contentType ~= nil and base.content_type ~= info.contentType then
    return false
  end
  if math.type(base.size) == "integer" and math.type(info.size) == "integer" and base.size ~= info.size then
    return false
  end
  return true
end

-- The attachment updates and deletes about to go (marked sent by the take),
-- against the server's attachments: one the server changed or deleted since
-- its base is a conflict (manual and server: held back, kept with the failed
-- edits naming the conflict; local: sent over it, and reported); a delete of
-- one the server deleted too is dropped. Returns the `[layer][key] = true`
-- of the attachment edits taken out of the request, or nil, err.
local function rebase_attachments(st, client, rep, policy, report, opts)
  local rows = st.db:rows("SELECT seq, layer_id, op, global_id, parent_global_id, base FROM "
    .. attachment_edits.QUEUE .. " WHERE sent_at IS NOT NULL AND failed IS NULL AND op IN ('update', 'delete') "
    .. "ORDER BY seq")
  if not rows or #rows == 0 then return {} end
  local present, err = server_attachments(client, rep, rows, opts)
  if not present then return nil, err end
  local out = {}
  for _, r in ipairs(rows) do
    local info = present[att_key(r.global_id)]
    local base = type(r.base) == "string" and json.decode(r.base) or nil
    local why
    if r.op == "delete" and not info then
      -- deleted on both sides: nothing to send
      local ok, m, c = st.db:run("DELETE FROM " .. attachment_edits.QUEUE .. " WHERE seq = ?", r.seq)
      if not ok then return nil, db_error(st.path, m, c) end
    elseif not info then
      why = "the server deleted this attachment since; the local update is held back"
    elseif not same_attachment(info, base) then
      why = ("the server changed this attachment since (now %s, %s bytes); the local %s is held back"):format(
        tostring(info.name), tostring(info.size), r.op)
    end
    if why and policy == "local" and info then
      why = nil -- sent over the server's
      report.attachments[#report.attachments + 1] = { globalId = r.global_id, op = r.op, outcome = "local_kept" }
    end
    if why then
      local ok, m, c = st.db:run("UPDATE " .. attachment_edits.QUEUE .. " SET sent_at = NULL, failed = ?, "
        .. "failed_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE seq = ?", "conflict: " .. why, r.seq)
      if not ok then return nil, db_error(st.path, m, c) end
      report.attachments[#report.attachments + 1] = { globalId = r.global_id, op = r.op, outcome = "held",
                                                      description = why }
    end
    if why or (r.op == "delete" and not info) then
      out[r.layer_id] = out[r.layer_id] or {}
      out[r.layer_id][att_key(r.global_id)] = true
    end
  end
  return out
end

-- Drops the attachment edits of `gone` from a 2.1 list.
local function without_attachments(edits, gone)
  for _, entry in ipairs(edits or {}) do
    local drop, a = gone[entry.id], entry.attachments
    if drop and a then
      local function keep(items, gid_of)
        local kept = json.array()
        for _, item in ipairs(items or {}) do
          if not drop[att_key(gid_of(item))] then kept[#kept + 1] = item end
        end
        return kept
      end
      a.updates = keep(a.updates, function(item) return item.globalId end)
      a.deleteIds = keep(a.deleteIds, function(gid) return gid end)
    end
  end
  return edits
end

-- Drops from a 2.1 edits list the feature edits of `gone` (`[layer][GlobalID key] = true`) and the
-- layer entries left with nothing; nil when nothing is left.
local function without(edits, gone, specs)
  local list = json.array()
  for _, entry in ipairs(edits or {}) do
    local drop = gone[entry.id]
    local f = entry.features
    if drop and f then
      local spec = specs[entry.id]
      local function keep(items, gid_of)
        local out = json.array()
        for _, item in ipairs(items or {}) do
          if not drop[outcome.normalize_gid(gid_of(item))] then out[#out + 1] = item end
        end
        return out
      end
      f.adds = keep(f.adds, function(item) return item.attributes[spec.globalid] end)
      f.updates = keep(f.updates, function(item) return item.attributes[spec.globalid] end)
      f.deleteIds = keep(f.deleteIds, function(gid) return gid end)
    end
    local a = entry.attachments
    local empty = (not f or (#(f.adds or {}) == 0 and #(f.updates or {}) == 0 and #(f.deleteIds or {}) == 0))
      and (not a or (#(a.adds or {}) == 0 and #(a.updates or {}) == 0 and #(a.deleteIds or {}) == 0))
    if not empty then list[#list + 1] = entry end
  end
  return #list > 0 and list or nil
end

-- The steps of the rebase of one queue row (rebase_row), in their order.

-- Our version of an update's feature (nil for a delete, or a feature no
-- longer in its table) and the base to merge it against; or nil, nil, err.
local function mine_and_base(st, spec, r)
  local mine
  if r.op == "update" then
    local m, c
    mine, m, c = st.db:get(r.layer, r.globalId)
    if mine == nil and m then return nil, nil, db_error(st.path, m, c) end
    if mine then mine = as_base(spec, mine) end -- the layer's fields (not the local fid)
  end
  -- a geometry the store keeps as the server's JSON (a curve, one it cannot represent): that JSON
  -- is the base's geometry, and ours too while the blob, its stand-in, is untouched here
  local base = r.base
  local kept = mine and unrepresentable.kept_geometry(st, spec, r.globalId)
  if kept then
    base = { attributes = r.base.attributes, geometry = kept }
    if unrepresentable.unchanged(st, spec, r.globalId) then mine.geometry = kept end
  end
  return mine, base
end

-- A row that still goes after the merge `d`: the merged feature in its
-- table, what it sends now (ours against the server's version) and its new
-- base. Returns true when nothing of it goes after all (what it changed is
-- what the server holds), false when it goes; or nil, err.
local function send_merged(st, spec, r, mine, theirs, res, d)
  local done, m, c = true, nil, nil
  local leaves = false
  if mine and theirs then done, m, c = put_keeping(st, spec, merged_feature(spec, mine, theirs, res, d)) end
  local feature = r.feature
  if done and r.op == "update" and theirs then
    -- what it sends now: ours against the server's version
    local f, changed, ferr = outgoing.feature(st, spec, "update", r.globalId, theirs)
    if not f and ferr then return nil, ferr end
    if not f or changed == false then leaves = true else feature = f end
  end
  if done and not leaves and theirs then
    done, m, c = st.db:run("UPDATE gpkgext_geoservices_edits SET base = ?, feature = ? WHERE seq = ?",
      json.encode(theirs), feature and json.encode(feature) or nil, r.seq)
    if done and feature and r.feature then
      -- the 2.1 list holds the row's feature table: it sends the new one
      r.feature.attributes, r.feature.geometry = feature.attributes, feature.geometry
    end
    r.base = theirs
  end
  if not done then return nil, db_error(st.path, m, c) end
  return leaves
end

-- A row of which nothing goes: the table holds the server's version, the
-- row leaves the queue (and the attempt: `report.left`, `gone`).
local function leave_row(st, spec, r, mine, theirs, report, gone)
  local done, m, c = true, nil, nil
  if theirs then
    done, m, c = put_keeping(st, spec, theirs)
  elseif mine then
    done, m, c = st.db:remove(r.layer, r.globalId)
  end
  if done then done, m, c = st.db:run("DELETE FROM gpkgext_geoservices_edits WHERE seq = ?", r.seq) end
  report.left[r.seq] = true
  gone[r.layer] = gone[r.layer] or {}
  gone[r.layer][outcome.normalize_gid(r.globalId)] = true
  if not done then return nil, db_error(st.path, m, c) end
  return true
end

-- The merge's conflict kept (geoservices.store.edits.queue.keep_conflict) and reported.
local function keep_row_conflict(st, r, d, mine, theirs, policy, report)
  local k = d.conflicts[1]
  for _, other in ipairs(d.conflicts) do
    if other.kind ~= "field" then k = other end -- a whole-feature conflict or a move names it
  end
  local done, m, c = queue.keep_conflict(st, { seq = r.seq, layer = r.layer, op = r.op, gid = r.globalId,
    feature = mine and json.encode(mine) or nil, base = json.encode(r.base),
    server = json.encode(theirs or json.null), description = DESCRIPTIONS[d.outcome]:format(policy),
    outcome = d.outcome, kind = k.kind, policy = policy, attempt = r.attempt })
  report.conflicts[#report.conflicts + 1] = conflict_entry(r, d, k, policy)
  if not done then return nil, db_error(st.path, m, c) end
  return true
end

-- One queued update or delete merged with the server's version of its
-- feature (`found`): what is ours still goes, what the server holds stays,
-- a conflict is kept. Returns true, or nil, err.
local function rebase_row(st, r, found, policy, report, gone)
  local spec = st.layers[r.layer]
  local server = found[r.layer][outcome.normalize_gid(r.globalId)]
  local theirs = server and as_base(spec, server) or nil
  local mine, base, merr = mine_and_base(st, spec, r)
  if merr then return nil, merr end
  if not (r.op == "delete" or mine) then return true end
  local res = merge.feature{ base = base, mine = mine, theirs = theirs, fields = spec.columns,
    skip = { [spec.oid or ""] = true, [spec.globalid] = true }, geometry = spec.geometry_column ~= nil }
  local d = merge.decide(res, policy)
  report.outcomes[r.seq] = d.outcome
  local leaves = d.op == "none"
  if not leaves then
    local err
    leaves, err = send_merged(st, spec, r, mine, theirs, res, d)
    if leaves == nil then return nil, err end
  end
  if leaves then
    local ok, err = leave_row(st, spec, r, mine, theirs, report, gone)
    if not ok then return nil, err end
  end
  if #d.conflicts > 0 then
    local ok, err = keep_row_conflict(st, r, d, mine, theirs, policy, report)
    if not ok then return nil, err end
  end
  return true
end

--- THE REBASE HOOK of the store's journal (geoservices.sync.attempt,
-- geoservices.store.sync.journal): the queued updates and deletes of the attempt
-- about to be sent are merged with the server's versions of their features.
-- Rows that send nothing leave the attempt (and the queue: their conflicts
-- are kept); the others send what is ours, against the server's version as
-- their new base. Sets `j.rebased` (the report, for @{summarize}) and
-- `j.rows` (the rows still sent).
-- @tparam table j the store's journal (`st`, `rep`, `rows`: the attempt's queue rows)
-- @param client the client
-- @tparam table taken `edits` (the 2.1 list) and `entries`
-- @tparam table opts the sync's options (`conflicts`: the policy; `timeout`)
-- @return the taken table to send, or nil, err (the server could not be read: nothing is sent)
function rebase.hook(j, client, taken, opts)
  local st = j.st
  local policy = opts.conflicts or st:conflict_policy()
  local report = { outcomes = {}, conflicts = {}, left = {}, read = 0, attachments = {} }
  j.rebased = report
  -- the attachment updates and deletes first (their own queue)
  local att_gone, aerr = rebase_attachments(st, client, j.rep, policy, report, opts)
  if not att_gone then return nil, aerr end
  if next(att_gone) then
    without_attachments(taken.edits, att_gone)
    taken.edits = without(taken.edits, {}, st.layers)
  end
  local todo = {}
  for _, r in ipairs(j.rows) do
    if (r.op == "update" or r.op == "delete") and type(r.base) == "table" and st.layers[r.layer] then
      todo[#todo + 1] = r
    end
  end
  if #todo == 0 then return taken end
  local found, err = read_server(st, client, j.rep, todo, opts)
  if not found then return nil, err end
  report.read = #todo
  local gone = {}
  local ok, werr = st:_uncaptured(function()
    for _, r in ipairs(todo) do
      local done, rerr = rebase_row(st, r, found, policy, report, gone)
      if not done then return nil, rerr end
    end
    return true
  end)
  if not ok then return nil, werr end
  if next(gone) then
    local rows = {}
    for _, r in ipairs(j.rows) do
      if not report.left[r.seq] then rows[#rows + 1] = r end
    end
    j.rows = rows
    taken.edits = without(taken.edits, gone, st.layers)
    taken.entries = commit.entries(rows)
  end
  return taken
end

local CONFLICT_OUTCOMES = { held = true, server_kept = true, local_kept = true }

--- The result of a store's synchronization completed: the conflicts the
-- rebase kept added to `result.conflicts`, and `result.summary`
-- (geoservices.sync.result.summary), each edit counted once.
-- @tparam table result the store's result (`conflicts`: the sent edits the server held other values
--   for, and the local edits a download overwrote; `applied`: records downloaded)
-- @tparam ?table report the journal's `rebased` from @{hook} (nil when nothing was rebased)
-- @tparam table rows the queue rows sent
-- @tparam table by_seq their fates (true applied; a table rejected or `{conflict = true}`; nil queued again)
-- @tparam table refused the edits refused here
function rebase.summarize(result, report, rows, by_seq, refused)
  report = report or { outcomes = {}, conflicts = {}, left = {} }
  local counts = { refused = #(refused or {}), downloaded = result.applied or result.downloaded or 0 }
  local function count(k) counts[k] = (counts[k] or 0) + 1 end
  local sent_conflicts = 0
  for _, r in ipairs(rows) do
    local fate, how = by_seq[r.seq], report.outcomes[r.seq]
    if fate == true then
      count(CONFLICT_OUTCOMES[how] and how or how == "merged" and "merged" or "sent")
    elseif type(fate) == "table" and fate.conflict then
      count("server_kept") -- the server held other values when it came (read back): never sent again
      sent_conflicts = sent_conflicts + 1
    elseif type(fate) == "table" then
      count("rejected")
    else
      count("requeued")
    end
  end
  for seq in pairs(report.left) do
    local how = report.outcomes[seq]
    count(CONFLICT_OUTCOMES[how] and how or "merged") -- "nothing": the server holds our values already
  end
  -- the local edits not sent that a download overwrote (kept by geoservices.store.edits.conflicts.after)
  local list = result.conflicts or {}
  counts.server_kept = (counts.server_kept or 0) + math.max(0, #list - sent_conflicts)
  for _, k in ipairs(report.conflicts) do list[#list + 1] = k end
  -- the attachment edits held back (kept with the failed edits) or sent over the server's change
  for _, a in ipairs(report.attachments or {}) do
    count(a.outcome)
    list[#list + 1] = { kind = "attachment", op = a.op, globalId = a.globalId, outcome = a.outcome,
                        description = a.description or "sent over the server's change (policy local)" }
  end
  result.conflicts = list
  result.summary = sync_result.summary(counts)
  if result.summary.held > 0 then result.partial = true end
  return result
end

return rebase
