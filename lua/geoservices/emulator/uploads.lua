--- A feature service's uploaded items, as the vendor's server keeps them:
-- `POST <service>/FeatureServer/uploads/upload` (multipart, its `file` part)
-- makes an item and answers `{success, item = {itemID, itemName,
-- description, date, committed}}`; `GET <service>/FeatureServer/uploads/
-- <itemID>` is the item's resource (the vendor's "Item" resource:
-- https://developers.arcgis.com/rest/services-reference/enterprise/item/).
-- An item is named by an attachment add or update (its `uploadId`: the
-- attachment's bytes) or by synchronizeReplica's `editsUploadId` with
-- `editsUploadFormat` (the request's edits: "Edits can be supplied in the
-- edits parameter, or, alternatively, by using the editsUploadId and
-- editUploadFormat to identify a file containing the edits that were
-- previously uploaded using the upload_item operation",
-- https://developers.arcgis.com/rest/services-reference/enterprise/synchronize-replica.htm).
-- The format's values are the vendor's `SQLITE` and `JSON` (its services'
-- synchronizeReplica form offers exactly these), read in any case; the
-- emulator reads JSON uploads only (the same array of layer edits as the
-- `edits` parameter) and refuses SQLITE, naming the parameter.
--
-- The items live as long as the emulator's state: with a state file their
-- records are saved in it (emulator.persist) and their bytes next to it.
-- @module geoservices.emulator.uploads
-- @local
local answers = require "geoservices.emulator.answers"
local core = require "geoservices.core"
local disk = require "geoservices.emulator.disk"
local metadata = require "geoservices.emulator.metadata"

local uploads = {}

-- itemID -> {path =, size =, name =, description =, date =, service =}
local items = {}

local error_body = answers.error_body

local json_answer = answers.json

--- The bytes of an item, or nil when there is no such item.
function uploads.content(id)
  local item = id and items[id]
  return item and disk.read(item.path)
end

--- The item records, for the state file.
function uploads.dump()
  local out = {}
  for id, item in pairs(items) do out[id] = item end
  return out
end

--- Back to the records of a state file (nil: none).
function uploads.restore(saved)
  items = {}
  for id, item in pairs(saved or {}) do items[id] = item end
end

--- Forgets every item and deletes its bytes (a reset, or an emulator without a state file closing).
function uploads.remove_all()
  for _, item in pairs(items) do os.remove(item.path) end
  items = {}
end

local function new_item_id()
  local hex = core.random_bytes(16):gsub(".", function(c) return ("%02x"):format(c:byte()) end)
  return ("i%s-%s-%s-%s-%s"):format(hex:sub(1, 8), hex:sub(9, 12), hex:sub(13, 16), hex:sub(17, 20), hex:sub(21, 32))
end

local function resource(id, item)
  return { itemID = id, itemName = item.name, description = item.description, date = item.date, committed = true }
end

--- POST {service}/FeatureServer/uploads/upload: its `file` part becomes an item.
function uploads.upload_handler(emu, request, service_name)
  local denied = metadata.check_token(emu, request)
  if denied then return denied end
  if not emu.world.feature_services[service_name] then
    return nil, json_answer(200, error_body(404, ("Service %s/FeatureServer not found."):format(service_name)))
  end
  local part = request.files and request.files.file
  if not part then return error_body(400, "Unable to upload item.", { "'file' is required" }) end
  local id = new_item_id()
  local path = emu:result_path("upload-" .. id .. ".bin")
  if part.path then
    assert(os.rename(part.path, path) or os.execute(("cp '%s' '%s'"):format(part.path, path)))
  else
    assert(core.write_file_atomic(path, part.data or ""))
  end
  items[id] = { path = path, size = part.size or #(part.data or ""), name = part.filename,
                description = request.form.description, date = os.time() * 1000, service = service_name }
  return { success = true, item = resource(id, items[id]) }
end

--- GET {service}/FeatureServer/uploads/<itemID>: the item's resource.
function uploads.item_handler(emu, request, service_name, id)
  local denied = metadata.check_token(emu, request)
  if denied then return denied end
  local item = items[id]
  if not item or item.service ~= service_name then
    return error_body(404, ("Item %s does not exist."):format(id))
  end
  return resource(id, item)
end

--- The edits text a synchronizeReplica form names by `editsUploadId` with
-- `editsUploadFormat`: nil when it names none; else the text, or nil, an
-- error body (the request is refused, nothing applied). A form with both
-- `edits` and `editsUploadId` is refused: which edits were meant is not
-- for the server to guess.
function uploads.sync_edits(service_name, form)
  local id = form.editsUploadId
  if id == nil or id == "" then
    if form.editsUploadFormat ~= nil and form.editsUploadFormat ~= "" then
      return nil, error_body(400, "Unable to synchronize replica.",
        { "editsUploadFormat: is only read with editsUploadId" })
    end
    return nil
  end
  if form.edits ~= nil and form.edits ~= "" then
    return nil, error_body(400, "Unable to synchronize replica.",
      { "edits: cannot be sent together with editsUploadId" })
  end
  local format = tostring(form.editsUploadFormat or ""):lower()
  if format == "" then
    return nil, error_body(400, "Unable to synchronize replica.",
      { "editsUploadFormat: is required with editsUploadId (SQLITE or JSON)" })
  elseif format == "sqlite" then
    return nil, error_body(400, "Unable to synchronize replica.",
      { "editsUploadFormat: SQLITE uploads are not supported by this server; upload the edits as JSON" })
  elseif format ~= "json" then
    return nil, error_body(400, "Unable to synchronize replica.",
      { ("editsUploadFormat: must be SQLITE or JSON, got %s"):format(tostring(form.editsUploadFormat)) })
  end
  local item = items[id]
  if not item or item.service ~= service_name then
    return nil, error_body(400, "Unable to synchronize replica.",
      { ("editsUploadId: item %s was not uploaded to this service"):format(tostring(id)) })
  end
  local text = disk.read(item.path)
  if not text then
    return nil, error_body(400, "Unable to synchronize replica.",
      { ("editsUploadId: item %s cannot be read"):format(tostring(id)) })
  end
  return text
end

return uploads
