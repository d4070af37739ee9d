--- Applying a sync's uploaded edits (synchronizeReplica's import step).
-- The whole edits parameter is checked first (a malformed or non-finite
-- value anywhere refuses the request, HTTP 400, naming its position, before
-- anything is applied); then the edits are applied in one transaction: every
-- applied change gets its change-log entry and the new generation, and an
-- error raised half-way undoes them all. An edit the server refuses (a
-- duplicate GlobalID add, an update or delete of a missing object) is
-- logged too, flagged `refused` with its code, so a test can count attempted
-- duplicates; with rollback every edit of the request is logged refused
-- (`rolled_back` for those that had been applied) and nothing changes.
local answers = require "geoservices.emulator.answers"
local json = require "geoservices.base.json"
local world = require "geoservices.emulator.world"

local import = {}

local DUPLICATE_GLOBALID = -2147217395 -- the server's code for "object already exists"
local OBJECT_MISSING = 1019
local GLOBALID_REQUIRED = 1000
-- "Setting of value for <value> failed." and "Operation rolled back." (the vendor's
-- feature service error codes, https://developers.arcgis.com/rest/services-reference/
-- enterprise/feature-service-error-codes.htm)
local SETTING_FAILED = 1016
local ROLLED_BACK = 1003

local UPLOADS = { bidirectional = true, upload = true }

local error_body = answers.error_body

-- ---------------------------------------------------------------- checking the edits

local MAX_PROBLEMS = 20

local function finite(n)
  return n == n and n ~= math.huge and n ~= -math.huge
end

-- A decoded JSON array (marked by json.decode), or an empty object (some
-- encoders write an empty array as {}); never a table with holes.
local function is_array(v)
  if type(v) ~= "table" then return false end
  if not json.is_array(v) then return next(v) == nil end
  local n = #v
  for k in pairs(v) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
  end
  return true
end

local function is_object(v)
  return type(v) == "table" and not json.is_array(v)
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

-- The problems found in the edits parameter, as "position: rule" texts.
local Checker = {}
Checker.__index = Checker

function Checker:add(path, rule)
  if #self.problems < MAX_PROBLEMS then self.problems[#self.problems + 1] = path .. ": " .. rule end
end

-- Any JSON value whose numbers must all be finite (geometry).
function Checker:numbers(v, path)
  if type(v) == "number" then
    if not finite(v) then self:add(path, "must be a finite number") end
  elseif type(v) == "table" then
    local array = json.is_array(v)
    for _, k in ipairs(sorted_keys(v)) do
      self:numbers(v[k], array and ("%s[%s]"):format(path, tostring(k)) or (path .. "." .. tostring(k)))
    end
  end
end

function Checker:attributes(attrs, path)
  if attrs == nil then return self:add(path, "is required") end
  if not is_object(attrs) then return self:add(path, "must be an object") end
  for _, k in ipairs(sorted_keys(attrs)) do
    local v, at = attrs[k], path .. "." .. tostring(k)
    local t = type(v)
    if type(k) ~= "string" then
      self:add(at, "attribute names must be strings")
    elseif k == "GlobalID" and t ~= "string" then
      self:add(at, "must be a string")
    elseif t == "number" then
      if not finite(v) then self:add(at, "must be a finite number") end
    elseif t ~= "string" and t ~= "boolean" and v ~= json.null then
      self:add(at, "must be a string, number, boolean or null")
    end
  end
end

function Checker:feature(item, path)
  if not is_object(item) then return self:add(path, "must be a feature object") end
  self:attributes(item.attributes, path .. ".attributes")
  local g = item.geometry
  if g ~= nil and g ~= json.null then
    if not is_object(g) then return self:add(path .. ".geometry", "must be an object") end
    self:numbers(g, path .. ".geometry")
  end
end

local ATTACHMENT_STRINGS = { "globalId", "parentGlobalId", "contentType", "name", "uploadId" }

function Checker:attachment(item, path)
  if not is_object(item) then return self:add(path, "must be an attachment object") end
  for _, k in ipairs(ATTACHMENT_STRINGS) do
    local v = item[k]
    if v ~= nil and v ~= json.null and type(v) ~= "string" then self:add(path .. "." .. k, "must be a string") end
  end
end

function Checker:target(edits, target, path)
  if edits == nil then return end
  if not is_object(edits) then return self:add(path, "must be an object") end
  for _, list in ipairs{ "adds", "updates" } do
    local items = edits[list]
    if items ~= nil then
      if not is_array(items) then
        self:add(path .. "." .. list, "must be an array")
      else
        for i = 1, #items do
          local at = ("%s.%s[%d]"):format(path, list, i)
          if target == "features" then self:feature(items[i], at) else self:attachment(items[i], at) end
        end
      end
    end
  end
  local ids = edits.deleteIds
  if ids ~= nil then
    if not is_array(ids) then return self:add(path .. ".deleteIds", "must be an array") end
    for i = 1, #ids do
      if type(ids[i]) ~= "string" then self:add(("%s.deleteIds[%d]"):format(path, i), "must be a GlobalID string") end
    end
  end
end

--- Checks the decoded edits parameter of a sync against the service: its
-- shape (2.1), the types of what is stored, finite numbers everywhere it
-- matters. Returns nil when it can be imported, else the list of problems
-- ("edits[1].features.adds[2]: must be a feature object", first ones only).
function import.check_edits(svc, edits)
  local c = setmetatable({ problems = {} }, Checker)
  if not is_array(edits) then
    c:add("edits", "must be an array of layer entries")
    return c.problems
  end
  for i = 1, #edits do
    local entry, path = edits[i], ("edits[%d]"):format(i)
    if not is_object(entry) then
      c:add(path, "must be a layer entry object")
    else
      local id = math.tointeger(entry.id)
      if type(entry.id) ~= "number" or id == nil then
        c:add(path .. ".id", "must be an integer layer id")
      elseif not svc.layers[id] then
        c:add(path .. ".id", ("layer %d is not part of this service"):format(id))
      end
      c:target(entry.features, "features", path .. ".features")
      c:target(entry.attachments, "attachments", path .. ".attachments")
    end
  end
  if #c.problems > 0 then return c.problems end
  return nil
end

-- ---------------------------------------------------------------- applying

-- What an add or update sent, for the change log: the feature's attributes,
-- or an attachment's fields.
local function sent(target, item)
  if target == "features" then return json.object(world.deep_copy(item.attributes)) end
  return json.object{ globalId = item.globalId, parentGlobalId = item.parentGlobalId, contentType = item.contentType,
                      name = item.name, uploadId = item.uploadId }
end

-- The GlobalID of an add or update as the server's GUID column keeps it
-- (world.guid): an edit naming it in another case or without braces is
-- about the same row.
local function gid_of(target, item)
  if target == "features" then
    return world.guid(type(item.attributes) == "table" and item.attributes.GlobalID or nil)
  end
  return world.guid(item.globalId)
end

-- The first attribute of `attrs` a String field of `layer` cannot hold (longer
-- than the field's length, in characters), or nil: a geodatabase column of
-- that length refuses it.
local function too_long(layer, attrs)
  local meta = type(layer.meta) == "table" and layer.meta or {}
  for _, f in ipairs(type(meta.fields) == "table" and meta.fields or {}) do
    local v = type(attrs) == "table" and attrs[f.name]
    if f.type == "esriFieldTypeString" and math.tointeger(f.length) and type(v) == "string"
      and (utf8.len(v) or #v) > f.length then
      return f.name
    end
  end
  return nil
end

-- The attributes of an edit as a layer whose definition an administrator
-- changed (emulator.definition: `meta.definition_changed`) keeps them: a
-- field it no longer has is left out (an edit made before a field was
-- deleted does not bring it back); an add gets each field it leaves out
-- with that field's default, else null. Other layers keep what is sent.
local function as_defined(layer, attrs, is_add)
  local meta = type(layer.meta) == "table" and layer.meta or {}
  if not meta.definition_changed or type(meta.fields) ~= "table" then return attrs end
  local declared = {}
  for _, f in ipairs(meta.fields) do
    if type(f.name) == "string" then declared[f.name:lower()] = f end
  end
  local out = {}
  for k, v in pairs(attrs) do
    if type(k) == "string" and declared[k:lower()] then out[k] = v end
  end
  if is_add then
    for _, f in ipairs(meta.fields) do
      if out[f.name] == nil and f.type ~= "esriFieldTypeOID" and f.type ~= "esriFieldTypeGlobalID" then
        local d = f.defaultValue
        out[f.name] = (d == nil or type(d) == "string" and d:find("^GetDate%(")) and json.null or world.deep_copy(d)
      end
    end
  end
  return out
end

-- Applies one target's (features' or attachments') edits of a layer to
-- `layer`, recording undo steps, attempts and the per-edit results in `res`.
local function apply_target(layer, target, edits, res, ctx)
  local store = layer[target]
  local function attempt(op, gid, item)
    local entry = { layer = layer.id, target = target, globalId = gid, op = op,
                    attributes = item and sent(target, item) or nil }
    ctx.attempts[#ctx.attempts + 1] = entry
    return entry
  end
  local function refuse(list, entry, code, description)
    entry.refused, entry.code = true, code
    list[#list + 1] = { globalId = entry.globalId, success = false, error = { code = code, description = description } }
    ctx.failed[#ctx.failed + 1] = ("layer %d %s %s %s: %s"):format(layer.id, target, entry.op,
      tostring(entry.globalId), description)
  end
  local function change(gid)
    local before = store[gid]
    ctx.undo[#ctx.undo + 1] = function() store[gid] = before end
  end
  for _, item in ipairs(edits.adds or {}) do
    local gid = gid_of(target, item)
    local entry = attempt("add", gid, item)
    if type(gid) ~= "string" or gid == "" then
      refuse(res.addResults, entry, GLOBALID_REQUIRED, "GlobalID is required for adds in a replica.")
    elseif store[gid] then
      refuse(res.addResults, entry, DUPLICATE_GLOBALID, ("An object with GlobalID %s already exists."):format(gid))
    elseif target == "features" and ctx.field_lengths and too_long(layer, item.attributes) then
      refuse(res.addResults, entry, SETTING_FAILED, ("Setting of value for %s failed."):format(
        too_long(layer, item.attributes)))
    elseif target == "attachments" and not (layer.features[world.guid(item.parentGlobalId)]
      and not layer.features[world.guid(item.parentGlobalId)].deleted) then
      refuse(res.addResults, entry, OBJECT_MISSING, "The parent feature of the attachment does not exist.")
    else
      change(gid)
      local oid, old_next = layer.next_oid, layer.next_oid
      ctx.undo[#ctx.undo + 1] = function() layer.next_oid = old_next end
      layer.next_oid = layer.next_oid + 1
      if target == "features" then
        local attrs = as_defined(layer, world.deep_copy(item.attributes), true)
        attrs.OBJECTID, attrs.GlobalID = oid, gid
        store[gid] = { attributes = attrs, geometry = world.deep_copy(item.geometry), created_gen = ctx.gen,
                       created_by = ctx.replica_id }
      else
        store[gid] = { globalId = gid, parentGlobalId = world.guid(item.parentGlobalId), contentType = item.contentType,
                       name = item.name, uploadId = item.uploadId, objectId = oid, created_gen = ctx.gen,
                       created_by = ctx.replica_id }
      end
      entry.applied = true
      res.addResults[#res.addResults + 1] = { globalId = gid, success = true, objectId = ctx.return_ids and oid or nil }
    end
  end
  for _, item in ipairs(edits.updates or {}) do
    local gid = gid_of(target, item)
    local entry = attempt("update", gid, item)
    local current = type(gid) == "string" and store[gid]
    if not current or current.deleted then
      refuse(res.updateResults, entry, OBJECT_MISSING, "Object is missing.")
    elseif target == "features" and ctx.field_lengths and too_long(layer, item.attributes) then
      refuse(res.updateResults, entry, SETTING_FAILED, ("Setting of value for %s failed."):format(
        too_long(layer, item.attributes)))
    else
      change(gid)
      local updated = world.deep_copy(current)
      if target == "features" then
        for k, v in pairs(as_defined(layer, item.attributes, false)) do
          if k ~= "OBJECTID" and k ~= "GlobalID" then updated.attributes[k] = v end
        end
        if item.geometry then updated.geometry = world.deep_copy(item.geometry) end
      else
        for _, k in ipairs{ "contentType", "name", "uploadId", "parentGlobalId" } do
          if item[k] ~= nil then updated[k] = k == "parentGlobalId" and world.guid(item[k]) or item[k] end
        end
        -- new bytes (an upload): the size and content of before are gone
        if item.uploadId ~= nil then updated.size, updated.data = nil, nil end
      end
      store[gid] = updated
      entry.applied = true
      res.updateResults[#res.updateResults + 1] = { globalId = gid, success = true,
        objectId = target == "features" and updated.attributes.OBJECTID or updated.objectId }
    end
  end
  for _, sent_gid in ipairs(edits.deleteIds or {}) do
    local gid = world.guid(sent_gid)
    local entry = attempt("delete", gid)
    local current = store[gid]
    if not current or current.deleted then
      refuse(res.deleteResults, entry, OBJECT_MISSING, "Object is missing.")
    else
      change(gid)
      local tomb = world.deep_copy(current)
      tomb.deleted = true
      store[gid] = tomb
      entry.applied = true
      if target == "features" then
        -- a deleted feature's attachments go with it (the vendor's attachment
        -- table is related to its layer by a composite relationship class:
        -- "deleting a feature deletes its attachments"); logged as deletes,
        -- so other replicas download them
        local atts = {}
        for agid, a in pairs(layer.attachments) do
          if not a.deleted and a.parentGlobalId == gid then atts[#atts + 1] = agid end
        end
        table.sort(atts)
        for _, agid in ipairs(atts) do
          local before = layer.attachments[agid]
          ctx.undo[#ctx.undo + 1] = function() layer.attachments[agid] = before end
          local atomb = world.deep_copy(before)
          atomb.deleted = true
          layer.attachments[agid] = atomb
          ctx.attempts[#ctx.attempts + 1] = { layer = layer.id, target = "attachments", globalId = agid,
                                              op = "delete", cascade = true, applied = true }
        end
      end
      res.deleteResults[#res.deleteResults + 1] = { globalId = gid, success = true,
        objectId = target == "features" and tomb.attributes.OBJECTID or tomb.objectId }
    end
  end
end

-- Applies one layer's uploaded edits; returns its per-edit results.
local function apply_layer_edits(layer, entry, ctx)
  local out = {}
  for _, target in ipairs{ "features", "attachments" } do
    local res = { addResults = json.array(), updateResults = json.array(), deleteResults = json.array() }
    out[target] = res
    if type(entry[target]) == "table" then apply_target(layer, target, entry[target], res, ctx) end
  end
  return out
end

local function undo_all(ctx)
  for i = #ctx.undo, 1, -1 do ctx.undo[i]() end
  ctx.undo = {}
end

-- Appends the request's attempts to the service's change log with `gen`, and
-- when the request arrived and ran (`arrived`, `at`: emulator.control.changelog);
-- `rolled_back`: none was applied (every one is refused).
local function log_attempts(svc, ctx, gen, rolled_back)
  for _, e in ipairs(ctx.attempts) do
    if rolled_back and e.applied then e.refused, e.rolled_back = true, true end
    e.applied = nil
    e.gen, e.origin, e.arrived, e.at = gen, ctx.replica_id, ctx.arrived, ctx.at
    svc.log[#svc.log + 1] = e
  end
end

--- Imports a planned sync's edits in one transaction and advances the
-- generation. Returns `{gen =, results = {[layer id] = {id =, features =,
-- attachments =}}}`, or nil, error body when rollback (plan.rollback) undid a
-- request with a failed edit: the details name each failed edit with its
-- GlobalID. An error raised half-way (a bug) undoes what was applied before
-- it is raised again: a request is never half applied.
function import.run(plan)
  local svc, replica = plan.svc, plan.replica
  local new_gen = svc.gen + 1
  local ctx = { undo = {}, attempts = {}, failed = {}, gen = new_gen, replica_id = replica.replicaID,
                arrived = plan.arrived, at = plan.at,
                return_ids = plan.flags.returnIdsForAdds, field_lengths = plan.field_lengths }
  local layer_out = {}
  local ok, err = pcall(function()
    for _, entry in ipairs(plan.edits) do
      local id = math.tointeger(entry.id)
      local layer = svc.layers[id]
      if not layer then error(("layer %s is not part of this service"):format(tostring(id))) end
      if UPLOADS[plan.directions[id] or ""] then
        local results = apply_layer_edits(layer, entry, ctx)
        layer_out[id] = { id = id, features = results.features, attachments = results.attachments }
      end
    end
  end)
  if not ok then
    undo_all(ctx)
    error(err, 0)
  end
  if #ctx.failed > 0 and plan.rollback then
    undo_all(ctx)
    log_attempts(svc, ctx, svc.gen, true)
    if not plan.names_refused then -- the documented code alone (settings.rollback_names_edits)
      return nil, error_body(400, "Operation rolled back.", { ("Error code %d."):format(ROLLED_BACK) })
    end
    return nil, error_body(400, "Unable to synchronize replica: edits failed and were rolled back; "
      .. "no edit was applied.", ctx.failed)
  end
  svc.gen = new_gen
  log_attempts(svc, ctx, new_gen, false)
  return { gen = new_gen, results = layer_out }
end

return import
