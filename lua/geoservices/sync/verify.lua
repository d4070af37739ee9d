--- Resolves edits whose outcome is unknown by reading the server: the
-- layer's query operation (`<service>/FeatureServer/<layer>/query`, which
-- every feature layer has), by GlobalID, in batches. Never re-sends anything.
--
--   * an add is applied when the server has its GlobalID; an add sent before
--     (its `base`: what that earlier send carried) whose feature the server
--     holds without the values this one sent was applied BEFORE: that earlier
--     send made it (the server applied it late), what was joined to it since
--     is not there;
--   * a delete is applied when the server no longer has it;
--   * an update is applied when the server holds the values it sent; when the
--     server still holds the values from before the edit (`base`), it was
--     not applied; anything else is a CONFLICT: someone changed the feature
--     since, and the edit must not be sent again over that newer value;
--   * an add or an update read with a delete of its feature that is applied
--     (all in the attempt) is applied: the feature absent is what they make.
--
-- An edit not applied is "not_applied" when the request's outcome was unknown
-- (it may be sent again), and "rejected" when the request is known to have
-- completed (the server skipped it: rollbackOnFailure false gives no reason);
-- so is, then, an update of a feature the server no longer holds (after a
-- lost answer it is a conflict: never sent again over the delete).
-- Internal: geoservices.sync and geoservices.store.sync call it.
local compare = require "geoservices.sync.compare"
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"
local outcome = require "geoservices.sync.outcome"

local verify = {}

local BATCH = 100 -- GlobalIDs per query: a where clause of about 4 KB

local normalize = outcome.normalize_gid

local function quoted(gid)
  local g = normalize(gid)
  return "'{" .. g:gsub("'", "''") .. "}'"
end

--- Reads features of a layer by GlobalID (`client:query_features`).
-- @param client the client
-- @string service the service name
-- @int layer the layer id
-- @tparam table gids the GlobalIDs
-- @tparam[opt] table opts `global_id_field` ("GlobalID"), `geometry` (true: returnGeometry), `out_sr` (the
--   spatial reference's wkid the geometries come in: the store's), `timeout`
-- @treturn[1] table `[normalized GlobalID] = {attributes =, geometry =}` of the features the server has
-- @treturn[1] table the layer as the answer describes it: `fields`, `spatialReference`
-- @return[2] nil
-- @treturn[2] table err (the request's errors; "protocol" for an answer without features)
function verify.query(client, service, layer, gids, opts)
  opts = opts or {}
  local field = opts.global_id_field or "GlobalID"
  local url = client:url_for(("%s/FeatureServer/%d/query"):format(service:gsub("%%", "%%25"), layer))
  local found, meta = {}, {}
  for first = 1, #gids, BATCH do
    local list = {}
    for i = first, math.min(first + BATCH - 1, #gids) do list[#list + 1] = quoted(gids[i]) end
    local doc, err = client:post(url, {
      where = ("%s IN (%s)"):format(field, table.concat(list, ",")), outFields = "*",
      returnGeometry = opts.geometry and true or false, outSR = opts.geometry and opts.out_sr or nil,
    }, { retry = "read", timeout = opts.timeout })
    if not doc then return nil, err end
    if type(doc.features) ~= "table" then
      return nil, errors.new("protocol", ("the query of layer %d of %s answered without features"):format(layer,
        service), { url = url })
    end
    meta.fields, meta.spatialReference = meta.fields or doc.fields, meta.spatialReference or doc.spatialReference
    for _, f in ipairs(doc.features) do
      local attrs = type(f) == "table" and f.attributes
      local gid = type(attrs) == "table" and attrs[field]
      if gid == nil and type(attrs) == "table" then
        -- field names are not case-sensitive on the server (GLOBALID, globalid)
        for k, v in pairs(attrs) do
          if type(k) == "string" and k:lower() == field:lower() then gid = v end
        end
      end
      if type(gid) == "string" then found[normalize(gid)] = f end
    end
  end
  return found, meta
end

-- The values an update found before it, on the fields it changes.
local function base_of(e)
  local sent = type(e.feature) == "table" and e.feature or {}
  local attrs = {}
  for k in pairs(type(sent.attributes) == "table" and sent.attributes or {}) do
    attrs[k] = type(e.base.attributes) == "table" and e.base.attributes[k] or nil
  end
  return { attributes = attrs, geometry = sent.geometry ~= nil and e.base.geometry or nil }
end

--- Verifies edits whose outcome is unknown.
-- @param client the client
-- @string service the service name
-- @tparam table list `{ {key =, layer =, op =, globalId =, feature =, base =}, ... }` (feature: what an
--   add or update sent; base: an update's feature before the edit, when known, false when the server
--   had no such feature then)
-- @tparam table opts `completed` (the request is known to have completed: an edit not applied was
--   skipped by the server), `fields` (`[layer] = {global_id =, object_id =}`), `timeout`
-- @treturn[1] table `[key] = "applied" | "applied_before" (an add sent before: see above) | "not_applied" |
--   {code =, description =} | {conflict = true, server = feature}`, and for applied adds `objectIds[key]` (the
--   server's OBJECTID) in the 2nd value
-- @treturn[1] table `[key] = objectId` of the adds found
-- @return[2] nil
-- @treturn[2] table err (the query failed: nothing is resolved)
function verify.edits(client, service, list, opts)
  opts = opts or {}
  local by_layer, order = {}, {}
  for _, e in ipairs(list) do
    if not by_layer[e.layer] then
      by_layer[e.layer] = {}
      order[#order + 1] = e.layer
    end
    local l = by_layer[e.layer]
    l[#l + 1] = e
  end
  local verdicts, object_ids = {}, {}
  for _, layer in ipairs(order) do
    local fields = opts.fields and opts.fields[layer] or {}
    local gid_field, oid_field = fields.global_id or "GlobalID", fields.object_id or "OBJECTID"
    local gids, geometry = {}, false
    for _, e in ipairs(by_layer[layer]) do
      gids[#gids + 1] = e.globalId
      if e.op == "update" or (e.op == "add" and type(e.base) == "table") then geometry = true end
    end
    local found, layer_meta = verify.query(client, service, layer, gids,
      { global_id_field = gid_field, geometry = geometry, timeout = opts.timeout })
    if not found then return nil, layer_meta end
    -- values at the precision the server's fields keep (geoservices.sync.compare)
    local rules = compare.rules(layer_meta.fields, layer_meta.spatialReference)
    local skip = { [gid_field] = true, [oid_field] = true, GlobalID = true, OBJECTID = true }
    local not_applied = opts.completed
      and { code = "skipped", description = "the server skipped this edit (it did not apply it and gave no reason)" }
      or "not_applied"
    for _, e in ipairs(by_layer[layer]) do
      local server = found[normalize(e.globalId)]
      local v
      if e.op == "add" and server and type(e.base) == "table" and type(e.feature) == "table"
        and not compare.holds(server, e.feature, skip, rules) then
        v = outcome.APPLIED_BEFORE
        object_ids[e.key] = math.tointeger(server.attributes[oid_field])
      elseif e.op == "add" then
        v = server and "applied" or not_applied
        if server then object_ids[e.key] = math.tointeger(server.attributes[oid_field]) end
      elseif e.op == "delete" then
        v = server and not_applied or "applied"
      elseif not server and e.base == false then
        v = not_applied -- there was no such feature when it left either: the server's answer will say why
      elseif not server and opts.completed then
        -- the request is known to have completed: the server refused the update of a feature it
        -- did not hold any more (someone deleted it), as its per-edit results say where it gives them
        v = { code = "missing", description = "the server does not hold this feature (someone deleted it): it did "
              .. "not apply the update" }
      elseif not server then
        v = { conflict = true, server = json.null, description = "the feature was deleted on the server" }
      elseif compare.holds(server, e.feature or {}, skip, rules) then
        v = "applied"
      elseif type(e.base) == "table" and compare.holds(server, base_of(e), skip, rules) then
        v = not_applied
      else
        v = { conflict = true, server = server,
              description = "the server holds other values than this edit sent: someone changed the feature since" }
      end
      verdicts[e.key] = v
    end
  end
  -- an add or an update read with its feature's delete (in the attempt with it, made before it:
  -- nobody edits a feature they deleted): the feature absent is what they make together, whether
  -- the server ran them all or only the delete; neither is the server's refusal nor someone
  -- else's delete, and neither is sent again
  local deleted = {}
  for _, e in ipairs(list) do
    if e.op == "delete" and verdicts[e.key] == "applied" then
      deleted[e.layer .. "|" .. normalize(e.globalId)] = true
    end
  end
  for _, e in ipairs(list) do
    if (e.op == "add" or e.op == "update") and deleted[e.layer .. "|" .. normalize(e.globalId)] then
      verdicts[e.key], object_ids[e.key] = "applied", nil
    end
  end
  return verdicts, object_ids
end

return verify
