--- Validation and encoding of synchronizeReplica's parameters. Every
-- rule refuses bad input before anything is sent, naming the parameter.
-- Unknown parameters pass through unchanged, so a newer server parameter
-- never needs a new release of this library.
local edits_mod = require "geoservices.sync.edits"
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"

local sync_params = {}

local invalid = errors.invalid

local UPLOAD_FORMATS = { sqlite = true, json = true }
local BOOLEANS = {
  "closeReplica", "returnIdsForAdds", "returnAttachmentDatabyURL", "returnAttachmentsDataByUrl", "async",
  "rollbackOnFailure", "reconcileBranchVersion", "timeReferenceUnknownClient",
}
-- Attachments' data by reference (a URL each) or embedded: synchronizeReplica's
-- own form spells it returnAttachmentDatabyURL (the service's REST directory
-- page, and the vendor's Python API, arcgis.features FeatureLayerCollection
-- _synchronize_replica, sends that name), createReplica's
-- returnAttachmentsDataByUrl (its reference page and the vendor's "Sync
-- workflow examples"). The caller may use either name; the form's is sent.
local BY_URL, BY_URL_CREATE = "returnAttachmentDatabyURL", "returnAttachmentsDataByUrl"
local INTEGERS = { "replicaServerGen", "replicaServerSibGen" }
local DIRECTIONS = { bidirectional = true, upload = true, download = true, snapshot = true }
local DOWNLOADS = { bidirectional = true, download = true }
local DIRECTION_LIST = "bidirectional, upload, download or snapshot"

--- Matches an enumerated value on its suffix, case-insensitively, whatever
-- its prefix ("svcTransportTypeUrl", "...URL", "url" all give "url").
function sync_params.transport_of(value)
  if type(value) ~= "string" then return nil end
  local v = value:lower()
  if v == "url" or v:match("transporttypeurl$") then return "url" end
  if v == "embedded" or v:match("transporttypeembedded$") then return "embedded" end
  return nil
end

local RESPONSE_TYPES = { "editsanddata", "replacementdata", "noedits", "edits" } -- longest suffix first
local RESPONSE_NAMES = {
  editsanddata = "edits_and_data", replacementdata = "replacement_data", noedits = "no_edits", edits = "edits",
}

--- "edits", "edits_and_data", "replacement_data", "no_edits", or nil.
function sync_params.response_of(value)
  if type(value) ~= "string" then return nil end
  local v = value:lower()
  for _, suffix in ipairs(RESPONSE_TYPES) do
    if v == suffix or v:sub(-#("responsetype" .. suffix)) == "responsetype" .. suffix then
      return RESPONSE_NAMES[suffix]
    end
  end
  return nil
end

-- An integer, or a float with an integral value; strings are not numbers here.
local function integer_of(v)
  return type(v) == "number" and math.tointeger(v) or nil
end

local function direction_of(value, parameter)
  if value == nil then return nil end
  if type(value) ~= "string" or not DIRECTIONS[value:lower()] then
    return nil, invalid(parameter, ("must be %s, got %s"):format(DIRECTION_LIST, tostring(value)))
  end
  return value:lower()
end

-- A nil hole (`{a, nil, b}`) would be sent as a shorter list or as a JSON
-- object, and its edits silently lost: returns the position of the first
-- missing item, or nil for a true list. A hole can sit inside the length
-- (`#{a, nil, b}` is 3: the constructor sizes the array part) or before a
-- key beyond it (`t[1] = a; t[3] = b`: #t is 1), so both are looked at.
local function hole_in(list)
  local n = #list
  for i = 1, n do
    if list[i] == nil then return i end
  end
  for k in pairs(list) do
    if math.type(k) == "integer" and k > n then
      for i = n + 1, k do
        if list[i] == nil then return i end
      end
    end
  end
  return nil
end

local function check_list(parameter, where, list)
  if list == nil then return nil end
  if type(list) ~= "table" then return invalid(parameter, where .. " must be an array") end
  local hole = hole_in(list)
  if hole then
    return invalid(parameter, ("%s has a nil hole at #%d: every item up to the last must be present"):format(
      where, hole))
  end
  return nil
end

local function check_record_ids(layer_id, part, list, what, id_of)
  for i, item in ipairs(list or {}) do
    local gid = id_of(item)
    if type(gid) ~= "string" or gid == "" then
      return invalid("edits", ("layer %d %s %s #%d has no GlobalID"):format(layer_id, part, what, i))
    end
  end
  return nil
end

local function feature_gid(f) return type(f) == "table" and type(f.attributes) == "table" and f.attributes.GlobalID end
local function attachment_gid(a) return type(a) == "table" and a.globalId end
local function itself(v) return v end

-- Structure of the edits array; updates and deletes must name a GlobalID.
local function check_edits(list)
  if type(list) ~= "table" then return invalid("edits", "must be an array of layer entries") end
  local list_err = check_list("edits", "the list of layer entries", list)
  if list_err then return list_err end
  for i, entry in ipairs(list) do
    if type(entry) ~= "table" or integer_of(entry.id) == nil then
      return invalid("edits", ("entry #%d needs an integer layer id"):format(i))
    end
    for _, part in ipairs{ "features", "attachments" } do
      local p = entry[part]
      if p ~= nil then
        if type(p) ~= "table" then return invalid("edits", ("layer %d %s must be an object"):format(entry.id, part)) end
        local gid_of = part == "features" and feature_gid or attachment_gid
        for _, name in ipairs{ "adds", "updates", "deleteIds" } do
          local err = check_list("edits", ("layer %d %s %s"):format(entry.id, part, name), p[name])
          if err then return err end
        end
        local err = check_record_ids(entry.id, part, p.updates, "update", gid_of)
          or check_record_ids(entry.id, part, p.deleteIds, "delete", itself)
        if err then return err end
      end
    end
  end
  return nil
end

local function has_edits(list)
  for _, entry in ipairs(list) do
    for _, part in ipairs{ "features", "attachments" } do
      local p = entry[part]
      if type(p) == "table" and (#(p.adds or {}) + #(p.updates or {}) + #(p.deleteIds or {})) > 0 then
        return true
      end
    end
  end
  return false
end

--- Validates `params` and returns the form fields to send, or nil, err.
-- `prefix` is the vendor prefix of enumerated values ("svc" by default).
function sync_params.encode(params, prefix)
  if type(params) ~= "table" then error("synchronize_replica: params must be a table", 3) end
  local fields = {}
  for k, v in pairs(params) do fields[k] = v end

  if type(params.replicaID) ~= "string" or params.replicaID == "" then
    return nil, invalid("replicaID", "is required: the identifier of the replica, a non-empty string")
  end
  for _, name in ipairs(BOOLEANS) do
    if params[name] ~= nil and type(params[name]) ~= "boolean" then
      return nil, invalid(name, "must be true or false, got " .. type(params[name]))
    end
  end
  local by_url, by_url_create = params[BY_URL], params[BY_URL_CREATE]
  if by_url ~= nil and by_url_create ~= nil and by_url ~= by_url_create then
    return nil, invalid(BY_URL, ("and %s say different things: give one"):format(BY_URL_CREATE))
  end
  fields[BY_URL_CREATE] = nil
  if by_url == nil then fields[BY_URL] = by_url_create end
  for _, name in ipairs(INTEGERS) do
    if params[name] ~= nil and integer_of(params[name]) == nil then
      return nil, invalid(name, "must be an integer generation number")
    end
    fields[name] = integer_of(params[name])
  end
  if params.transportType ~= nil then
    local t = sync_params.transport_of(params.transportType)
    if not t then
      return nil, invalid("transportType", ("must be %sTransportTypeUrl or %sTransportTypeEmbedded, got %s"):format(
        prefix, prefix, tostring(params.transportType)))
    end
    -- a bare "url"/"embedded" or the interface's neutral "svc..." form takes
    -- the configured prefix; a vendor's own enumeration is sent verbatim
    local given = params.transportType:lower()
    if given == t or given:sub(1, 3) == "svc" then
      fields.transportType = prefix .. (t == "url" and "TransportTypeUrl" or "TransportTypeEmbedded")
    end
  end
  local direction, err = direction_of(params.syncDirection, "syncDirection")
  if err then return nil, err end
  fields.syncDirection = direction
  if params.dataFormat ~= nil and params.dataFormat ~= "json" and params.dataFormat ~= "sqlite" then
    return nil, invalid("dataFormat", "must be json or sqlite, got " .. tostring(params.dataFormat))
  end
  -- the vendor's form offers SQLITE and JSON (the interface names sqlite);
  -- any case is taken and sent as given
  local upload_format = params.editsUploadFormat
  if upload_format ~= nil and (type(upload_format) ~= "string" or not UPLOAD_FORMATS[upload_format:lower()]) then
    return nil, invalid("editsUploadFormat", "must be SQLITE or JSON (any case), got " .. tostring(upload_format))
  end
  if params.editsUploadFormat ~= nil and params.editsUploadId == nil then
    return nil, invalid("editsUploadFormat", "is only used with editsUploadId")
  end

  -- edits: a builder, a table or a JSON string; validated in table form
  local edit_list = params.edits
  if edits_mod.is(edit_list) then
    edit_list = edit_list:to_table()
  elseif type(edit_list) == "string" then
    local decoded, msg = json.decode(edit_list)
    if decoded == nil then return nil, invalid("edits", "is not valid JSON: " .. tostring(msg)) end
    edit_list = decoded
  end
  if edit_list ~= nil then
    local edits_err = check_edits(edit_list)
    if edits_err then return nil, edits_err end
    if params.editsUploadId ~= nil then
      return nil, invalid("edits", "cannot be combined with editsUploadId: send the edits one way")
    end
  end
  local uploading = edit_list ~= nil and has_edits(edit_list)
  if (uploading or params.editsUploadId ~= nil) and (direction == "download" or direction == "snapshot") then
    local what = uploading and "edits" or "editsUploadId"
    return nil, invalid(what, ("would be ignored by the server with syncDirection = %s: "
      .. "use bidirectional or upload, or send no edits"):format(direction))
  end

  -- syncLayers: per-layer generation and direction
  local layer_dirs = {}
  if params.syncLayers ~= nil then
    if type(params.syncLayers) ~= "table" then
      return nil, invalid("syncLayers", "must be an array of entries")
    end
    local list_err = check_list("syncLayers", "the list", params.syncLayers)
    if list_err then return nil, list_err end
    local out = json.array()
    for i, entry in ipairs(params.syncLayers) do
      if type(entry) ~= "table" or integer_of(entry.id) == nil then
        return nil, invalid("syncLayers", ("entry #%d needs an integer id"):format(i))
      end
      local dir, dir_err = direction_of(entry.syncDirection, ("syncLayers (layer %d) syncDirection"):format(entry.id))
      if dir_err then return nil, dir_err end
      local effective = dir or direction or "bidirectional"
      if entry.serverGen ~= nil and integer_of(entry.serverGen) == nil then
        return nil, invalid("syncLayers", ("entry for layer %d: serverGen must be an integer"):format(entry.id))
      end
      if DOWNLOADS[effective] and entry.serverGen == nil then
        return nil, invalid("syncLayers", ("entry for layer %d needs serverGen: direction %s downloads changes"):format(
          entry.id, effective))
      end
      layer_dirs[math.tointeger(entry.id)] = effective
      local copy = {}
      for k, v in pairs(entry) do copy[k] = v end
      copy.syncDirection = dir
      out[#out + 1] = copy
    end
    fields.syncLayers = out
  end
  if uploading then
    for _, entry in ipairs(edit_list) do
      local dir = layer_dirs[math.tointeger(entry.id)]
      if (dir == "download" or dir == "snapshot") and has_edits{ entry } then
        return nil, invalid("edits", ("layer %d has edits but its syncLayers direction is %s: the server would "
          .. "ignore them"):format(entry.id, dir))
      end
    end
  end
  if edit_list ~= nil then
    -- a table goes to the C form encoder as is: JSON text and percent-encoding
    -- are written straight into the request body, never as a Lua string
    fields.edits = type(params.edits) == "string" and params.edits or edit_list
  end
  return fields
end

return sync_params
