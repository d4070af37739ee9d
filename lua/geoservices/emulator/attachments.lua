--- Attachment content, as the vendor's feature service serves it: an
-- attachment's bytes at `<service>/FeatureServer/<layer>/<parent
-- OBJECTID>/attachments/<attachment id>` (the attachment resource's
-- content), which createReplica and synchronizeReplica name in each
-- attachment's `url` when returnAttachmentsDataByUrl is true, or embed as
-- base64 `data` when it is false ("An attachment's data can be either
-- embedded base-64 data or by reference": the vendor's "Sync and
-- attachments" page).
--
-- The data file gives an attachment's bytes as base64 `data`; one without
-- `data` has `size` bytes of a pattern drawn from its GlobalID, so a test can
-- ask for a large attachment without a large data file.
-- @module geoservices.emulator.attachments
-- @local
local json = require "geoservices.base.json"
local metadata = require "geoservices.emulator.metadata"
local uploads = require "geoservices.emulator.uploads"

local attachments = {}

local ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

function attachments.base64_encode(bytes)
  local out = {}
  for i = 1, #bytes, 3 do
    local a, b, c = bytes:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local chars = {}
    for k = 1, 4 do
      local v = (n >> (6 * (4 - k))) & 63
      chars[k] = ALPHABET:sub(v + 1, v + 1)
    end
    if not b then chars[3] = "=" end
    if not c then chars[4] = "=" end
    out[#out + 1] = table.concat(chars)
  end
  return table.concat(out)
end

function attachments.base64_decode(text)
  local out, acc, bits = {}, 0, 0
  for ch in text:gmatch("[%w%+/]") do
    acc = (acc << 6) | (ALPHABET:find(ch, 1, true) - 1)
    bits = bits + 6
    if bits >= 8 then
      bits = bits - 8
      out[#out + 1] = string.char((acc >> bits) & 0xff)
    end
  end
  return table.concat(out)
end

--- The bytes of an attachment (the emulator's record of it).
function attachments.content(a)
  local uploaded = a.uploadId and uploads.content(a.uploadId)
  if uploaded then return uploaded end
  if a.data then return attachments.base64_decode(a.data) end
  local size = math.tointeger(a.size) or 0
  local seed = (a.globalId or "") .. "\n"
  local whole = seed:rep(size // #seed + 1)
  return whole:sub(1, size)
end

--- The address of an attachment's content, or nil when its parent is gone.
function attachments.url(service_url, layer, a)
  local parent = layer.features[a.parentGlobalId]
  if not parent or not a.objectId then return nil end
  return ("%s/%d/%d/attachments/%d"):format(service_url, layer.id, parent.attributes.OBJECTID, a.objectId)
end

--- An attachment record of a createReplica or synchronizeReplica answer:
-- its content by URL (`url`) or embedded (`data`, base64).
function attachments.record(a, service_url, layer, by_url)
  local r = { id = a.objectId, globalId = a.globalId, parentGlobalId = a.parentGlobalId, name = a.name,
              contentType = a.contentType, size = a.size }
  if by_url then
    r.url = attachments.url(service_url, layer, a)
  elseif service_url then
    r.data = attachments.base64_encode(attachments.content(a))
  end
  return r
end

local function not_found(message)
  return { status = 200, headers = { ["Content-Type"] = "application/json; charset=utf-8" },
           body = json.encode{ error = { code = 404, message = message, details = json.array() } } }
end

--- GET {service}/FeatureServer/<layer>/<objectid>/attachments/<attachment id>: the bytes.
function attachments.content_handler(emu, request, service_name, layer_text, oid_text, att_text)
  local denied = metadata.check_token(emu, request)
  if denied then return denied end
  local svc = emu.world.feature_services[service_name]
  local layer = svc and svc.layers[tonumber(layer_text)]
  if not layer then return nil, not_found("Service or layer not found.") end
  local oid, att_id = math.tointeger(tonumber(oid_text)), math.tointeger(tonumber(att_text))
  for _, a in pairs(layer.attachments) do
    local parent = layer.features[a.parentGlobalId]
    if a.objectId == att_id and not a.deleted and parent and parent.attributes.OBJECTID == oid then
      local disposition = ('inline; filename="%s"'):format(tostring(a.name or "attachment"):gsub('["\\\r\n]', "_"))
      return nil, { status = 200, body = attachments.content(a),
                    headers = { ["Content-Type"] = a.contentType or "application/octet-stream",
                                ["Content-Disposition"] = disposition } }
    end
  end
  return nil, not_found("Attachment not found.")
end

local function id_list(text)
  local out = {}
  for v in tostring(text or ""):gmatch("[^,%s]+") do out[#out + 1] = v end
  return out
end

local function guid_key(s) return (tostring(s):gsub("[{}]", ""):upper()) end

--- GET/POST {service}/FeatureServer/<layer>/queryAttachments: the
-- attachments of the features named by objectIds or globalIds (their
-- parents'), as `attachmentGroups` of `{parentObjectId, parentGlobalId,
-- attachmentInfos = [{id, globalId, name, contentType, size, url}]}`.
function attachments.query_handler(emu, request, service_name, layer_text)
  local denied = metadata.check_token(emu, request)
  if denied then return denied end
  local svc = emu.world.feature_services[service_name]
  local layer = svc and svc.layers[tonumber(layer_text)]
  if not layer then return { error = { code = 400, message = "Invalid or missing input parameters.",
                                        details = { "Service or layer not found." } } } end
  local form = request.form or {}
  local want_oids, want_gids = {}, {}
  for _, v in ipairs(id_list(form.objectIds)) do want_oids[tonumber(v)] = true end
  for _, v in ipairs(id_list(form.globalIds)) do want_gids[guid_key(v)] = true end
  local every = next(want_oids) == nil and next(want_gids) == nil
  local groups, by_parent = json.array(), {}
  local service_url = ("%s/%s/FeatureServer"):format(emu:url(), service_name)
  local gids = {}
  for gid in pairs(layer.attachments) do gids[#gids + 1] = gid end
  table.sort(gids)
  for _, gid in ipairs(gids) do
    local a = layer.attachments[gid]
    local parent = layer.features[a.parentGlobalId]
    if not a.deleted and parent and not parent.deleted then
      local oid = parent.attributes.OBJECTID
      if every or want_oids[oid] or want_gids[guid_key(a.parentGlobalId)] then
        local group = by_parent[oid]
        if not group then
          group = { parentObjectId = oid, parentGlobalId = a.parentGlobalId, attachmentInfos = json.array() }
          by_parent[oid] = group
          groups[#groups + 1] = group
        end
        group.attachmentInfos[#group.attachmentInfos + 1] = {
          id = a.objectId, globalId = a.globalId, name = a.name, contentType = a.contentType,
          size = a.size or #attachments.content(a), url = attachments.url(service_url, layer, a) }
      end
    end
  end
  table.sort(groups, function(x, y) return x.parentObjectId < y.parentObjectId end)
  return { fields = json.array(), attachmentGroups = groups }
end

return attachments
