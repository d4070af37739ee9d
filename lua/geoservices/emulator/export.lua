--- What a sync sends back (synchronizeReplica's export step): the changes
-- made on the server since the client's generation (leaving out what this
-- replica itself uploaded), or a layer's whole data for a snapshot, in the
-- result document (2.3); the response type of a planned sync; and the forms
-- the answer takes by transport:
--
-- * embedded: the document, with the per-edit results of the uploaded edits
--   (INTERFACE.md 2.1: results are "Present when the response type is an
--   edits type and the transport is embedded"), all of them, only the
--   failed ones, or none (setting edit_results);
-- * URL: the document without its edits and a URL to a result file holding
--   them, never the results;
-- * NoEdits (every layer uploads only): no edits, no results and no file
--   ("The response does not contain edits or edit results. There is no delta
--   file returned", https://developers.arcgis.com/rest/services-reference/
--   enterprise/response-type-for-sync-operations.htm).
local attachments = require "geoservices.emulator.attachments"
local json = require "geoservices.base.json"
local settings = require "geoservices.emulator.settings"
local world = require "geoservices.emulator.world"
local jobs = require "geoservices.emulator.jobs"

local export = {}

local DOWNLOADS = { bidirectional = true, download = true }
local RESULT_LISTS = { "addResults", "updateResults", "deleteResults" }

local function feature_out(f)
  return { attributes = json.object(world.deep_copy(f.attributes)), geometry = world.deep_copy(f.geometry) }
end

-- An attachment record with its content by URL or embedded (emulator.attachments).
local function attachment_out_of(plan, layer)
  return function(a) return attachments.record(a, plan.service_url, layer, plan.attachments_by_url ~= false) end
end

-- Changes of one layer since `since` that this replica did not make itself
-- (refused attempts changed nothing and are not changes).
local function layer_changes(svc, layer, since, replica_id, attachment_out)
  local touched = { features = {}, attachments = {} }
  for _, e in ipairs(svc.log) do
    if e.gen > since and e.layer == layer.id and e.origin ~= replica_id and not e.refused then
      touched[e.target][e.globalId] = true
    end
  end
  local out = {}
  for _, target in ipairs{ "features", "attachments" } do
    local adds, updates, deletes = json.array(), json.array(), json.array()
    local gids = {}
    for gid in pairs(touched[target]) do gids[#gids + 1] = gid end
    table.sort(gids)
    for _, gid in ipairs(gids) do
      local item = layer[target][gid]
      local client_has = item.created_gen <= since or item.created_by == replica_id
      local record = target == "features" and feature_out or attachment_out
      if item.deleted then
        if client_has then deletes[#deletes + 1] = gid end
      elseif client_has then
        updates[#updates + 1] = record(item)
      else
        adds[#adds + 1] = record(item)
      end
    end
    out[target] = { adds = adds, updates = updates, deleteIds = deletes }
  end
  return out
end

-- Every current row of a layer: the replacement data of a snapshot.
local function layer_snapshot(layer, attachment_out)
  local out = {}
  for _, target in ipairs{ "features", "attachments" } do
    local adds, gids = json.array(), {}
    for gid, item in pairs(layer[target]) do
      if not item.deleted then gids[#gids + 1] = gid end
    end
    table.sort(gids)
    local record = target == "features" and feature_out or attachment_out
    for _, gid in ipairs(gids) do adds[#adds + 1] = record(layer[target][gid]) end
    out[target] = { adds = adds, updates = json.array(), deleteIds = json.array() }
  end
  return out
end

--- The suffix of a planned sync's response type (2.3): ReplacementData when
-- every layer takes a snapshot, EditsAndData for a per-layer mix with
-- snapshots, NoEdits when every layer only uploads, else Edits.
function export.response_suffix(model, directions)
  local n, snapshots, uploads = 0, 0, 0
  for _, d in pairs(directions) do
    n = n + 1
    if d == "snapshot" then snapshots = snapshots + 1 end
    if d == "upload" then uploads = uploads + 1 end
  end
  if n > 0 and snapshots == n then return "ReplacementData" end
  if snapshots > 0 and model == "perLayer" then return "EditsAndData" end
  if n > 0 and uploads == n then return "NoEdits" end
  return "Edits"
end

--- The responseType a planned sync answers with.
function export.response_type(plan, prefix)
  return prefix .. "ReplicaResponseType" .. export.response_suffix(plan.replica.model, plan.directions)
end

--- Whether a planned sync answers NoEdits (no edits, no results, no file).
function export.no_edits(plan)
  return export.response_suffix(plan.replica.model, plan.directions) == "NoEdits"
end

--- Exports the changes for a planned sync whose edits were imported: the
-- result document (2.3 with `edits`, without per-edit results). Everything
-- up to the service's current generation is exported and reported as the new
-- generation (an async job exports after its import; changes others made in
-- between are included, never sent twice). The replica records it.
function export.document(plan, prefix)
  local svc, replica = plan.svc, plan.replica
  local gen = svc.gen
  local doc = {
    transportType = settings.transport_name(prefix, plan.transport),
    responseType = export.response_type(plan, prefix),
    replicaID = replica.replicaID,
  }
  if not export.no_edits(plan) then
    local layer_out, ids = {}, {}
    for id, dir in pairs(plan.directions) do
      local data
      local attachment_out = attachment_out_of(plan, svc.layers[id])
      if dir == "snapshot" then data = layer_snapshot(svc.layers[id], attachment_out)
      elseif DOWNLOADS[dir] then
        data = layer_changes(svc, svc.layers[id], plan.since[id], replica.replicaID, attachment_out)
      end
      if data then
        layer_out[id] = { id = id, features = json.object(data.features), attachments = json.object(data.attachments) }
        ids[#ids + 1] = id
      end
    end
    table.sort(ids)
    doc.edits = json.array()
    for _, id in ipairs(ids) do doc.edits[#doc.edits + 1] = layer_out[id] end
  end
  if replica.model == "perLayer" then
    doc.layerServerGens = json.array()
    replica.layer_gens = replica.layer_gens or {}
    for _, id in ipairs(replica.layers) do
      doc.layerServerGens[#doc.layerServerGens + 1] = { id = id, serverGen = gen }
      replica.layer_gens[id] = gen
    end
  else
    doc.replicaServerGen = gen
    replica.gen = gen
  end
  replica.lastSyncDate = jobs.epoch_ms() -- what the replica's resource reports (emulator.create)
  if plan.flags.closeReplica then replica.closed = true end
  return doc
end

local function only_failures(list)
  local out = json.array()
  for _, r in ipairs(list) do
    if not r.success then out[#out + 1] = r end
  end
  return out
end

--- Adds the per-edit results of `imported` (import.run's) to an embedded
-- answer's edits, as `mode` says: "all", "failures" (only the skipped edits)
-- or "none". Layers that only uploaded get an entry of their own.
function export.add_results(doc, imported, mode)
  if mode == "none" or not doc.edits then return doc end
  local by_id = {}
  for _, entry in ipairs(doc.edits) do by_id[entry.id] = entry end
  local ids = {}
  for id in pairs(imported.results) do ids[#ids + 1] = id end
  table.sort(ids)
  for _, id in ipairs(ids) do
    local results = imported.results[id]
    local entry = by_id[id]
    if not entry then
      entry = { id = id, features = json.object(), attachments = json.object() }
      by_id[id] = entry
      doc.edits[#doc.edits + 1] = entry
    end
    for _, target in ipairs{ "features", "attachments" } do
      for _, list in ipairs(RESULT_LISTS) do
        local all = results[target][list]
        entry[target][list] = mode == "failures" and only_failures(all) or world.deep_copy(all)
      end
    end
  end
  table.sort(doc.edits, function(a, b) return a.id < b.id end)
  return doc
end

--- A URL-transport answer: the document's fields without its edits, and the
-- result file's address (none for NoEdits).
function export.url_answer(doc, url)
  return { transportType = doc.transportType, responseType = doc.responseType, replicaID = doc.replicaID,
           replicaServerGen = doc.replicaServerGen, layerServerGens = doc.layerServerGens, URL = url }
end

return export
