--- The edits builder: collects a replica's adds, updates and deletes per
-- layer and encodes them as the edits array (`[]` for empty arrays,
-- integers as integers, doubles with 17 significant digits).
--
--     local e = geoservices.edits()
--     local gid = e:add(0, { attributes = { APN = "101" }, geometry = { x = -117.2, y = 34.1 } })
--     e:update(0, { attributes = { GlobalID = other, OWNER = "Jane" } })
--     e:delete(1, "{...}")
--     client:synchronize_replica("Parcels", { replicaID = id, replicaServerGen = 12, edits = e })
--
-- Misuse (a layer id that is not a non-negative integer, a feature that is
-- not a table, an update or delete without a GlobalID) raises at once.
-- @module geoservices.sync.edits
local core = require "geoservices.core"
local json = require "geoservices.base.json"

local edits = {}

local Edits = {}
Edits.__index = Edits
Edits.__name = "geoservices.Edits"

--- A new GlobalID: a random (version 4) UUID in braces, uppercase, from the
-- kernel's random source so that two clients never collide
-- (also `geoservices.new_global_id()`).
-- @treturn string the GlobalID, e.g. "{3F2A...-...}"
-- @raise when the kernel's random source cannot be read
function edits.new_global_id()
  local b = { core.random_bytes(16):byte(1, 16) }
  b[7] = (b[7] & 0x0f) | 0x40 -- version 4
  b[9] = (b[9] & 0x3f) | 0x80 -- RFC 4122 variant
  return ("{%02X%02X%02X%02X-%02X%02X-%02X%02X-%02X%02X-%02X%02X%02X%02X%02X%02X}"):format(table.unpack(b))
end

--- A new, empty edits builder (`geoservices.edits()`).
-- @treturn Edits the builder
-- @raise never
function edits.new()
  return setmetatable({ layers = {}, order = {} }, Edits)
end

local function check_layer(layer_id)
  if math.type(layer_id) ~= "integer" or layer_id < 0 then
    error("edits: layer id must be a non-negative integer, got " .. tostring(layer_id), 3)
  end
end

local function layer(self, layer_id)
  check_layer(layer_id)
  local l = self.layers[layer_id]
  if not l then
    l = {
      features = { adds = {}, updates = {}, deleteIds = {} },
      attachments = { adds = {}, updates = {}, deleteIds = {} },
    }
    self.layers[layer_id] = l
    self.order[#self.order + 1] = layer_id
  end
  return l
end

local function copy_feature(feature, what)
  if type(feature) ~= "table" then error(("edits: %s expects a feature table"):format(what), 3) end
  local attributes = {}
  for k, v in pairs(feature.attributes or {}) do
    -- the GlobalID in any case ("globalid", "GLOBALID") is the GlobalID:
    -- one key, spelt as the interface spells it, never a second one
    if type(k) == "string" and k ~= "GlobalID" and k:lower() == "globalid" then
      if feature.attributes.GlobalID ~= nil or attributes.GlobalID ~= nil then
        error(("edits: %s has two GlobalID attributes ('%s' and another)"):format(what, k), 3)
      end
      k = "GlobalID"
    end
    attributes[k] = v
  end
  return { attributes = attributes, geometry = feature.geometry }
end

--- An edits builder made by @{new}; `tostring(e)` counts its edits per kind.
-- It can be passed wherever edits are accepted (`params.edits`,
-- client:sync); it is encoded as the edits array.
-- @type Edits

--- Adds a feature; gives it a new GlobalID unless it has one. The feature
-- is copied (attributes and geometry).
-- @int layer_id the layer id (a non-negative integer)
-- @tparam table feature `{attributes = {...}, geometry = {...}}`
-- @treturn string the feature's GlobalID
-- @raise when layer_id is not a non-negative integer or feature is not a table
function Edits:add(layer_id, feature)
  local f = copy_feature(feature, "add")
  if f.attributes.GlobalID == nil then f.attributes.GlobalID = edits.new_global_id() end
  table.insert(layer(self, layer_id).features.adds, f)
  return f.attributes.GlobalID
end

--- Updates a feature identified by its attributes.GlobalID (required).
-- @int layer_id the layer id
-- @tparam table feature `{attributes = {GlobalID = ..., changed fields}, geometry = ...}`
-- @treturn string the GlobalID
-- @raise when layer_id is not a non-negative integer, feature is not a table or has no GlobalID
function Edits:update(layer_id, feature)
  local f = copy_feature(feature, "update")
  if type(f.attributes.GlobalID) ~= "string" or f.attributes.GlobalID == "" then
    error("edits: update needs attributes.GlobalID", 2)
  end
  table.insert(layer(self, layer_id).features.updates, f)
  return f.attributes.GlobalID
end

--- Deletes the feature with this GlobalID.
-- @int layer_id the layer id
-- @string global_id the feature's GlobalID
-- @treturn string the GlobalID
-- @raise when layer_id is not a non-negative integer or global_id is not a non-empty string
function Edits:delete(layer_id, global_id)
  if type(global_id) ~= "string" or global_id == "" then error("edits: delete needs a GlobalID string", 2) end
  table.insert(layer(self, layer_id).features.deleteIds, global_id)
  return global_id
end

local ATTACHMENT_FIELDS = { "globalId", "parentGlobalId", "contentType", "name", "uploadId" }

local function copy_attachment(att, what)
  if type(att) ~= "table" then error(("edits: %s expects an attachment table"):format(what), 3) end
  local a = {}
  for _, k in ipairs(ATTACHMENT_FIELDS) do a[k] = att[k] end
  return a
end

--- Adds an attachment; gives it a new globalId unless it has one.
-- @int layer_id the layer id
-- @tparam table attachment `{parentGlobalId =, name =, contentType =, uploadId =, globalId =}`
--   (other members are dropped)
-- @treturn string the attachment's globalId
-- @raise when layer_id is not a non-negative integer, attachment is not a table or has no parentGlobalId
function Edits:add_attachment(layer_id, attachment)
  local a = copy_attachment(attachment, "add_attachment")
  if type(a.parentGlobalId) ~= "string" then error("edits: add_attachment needs parentGlobalId", 2) end
  a.globalId = a.globalId or edits.new_global_id()
  table.insert(layer(self, layer_id).attachments.adds, a)
  return a.globalId
end

--- Updates an attachment identified by its globalId.
-- @int layer_id the layer id
-- @tparam table attachment `{globalId =, name =, contentType =, uploadId =, parentGlobalId =}`
-- @treturn string the globalId
-- @raise when layer_id is not a non-negative integer, attachment is not a table or has no globalId
function Edits:update_attachment(layer_id, attachment)
  local a = copy_attachment(attachment, "update_attachment")
  if type(a.globalId) ~= "string" then error("edits: update_attachment needs globalId", 2) end
  table.insert(layer(self, layer_id).attachments.updates, a)
  return a.globalId
end

--- Deletes the attachment with this globalId.
-- @int layer_id the layer id
-- @string global_id the attachment's globalId
-- @treturn string the globalId
-- @raise when layer_id is not a non-negative integer or global_id is not a non-empty string
function Edits:delete_attachment(layer_id, global_id)
  if type(global_id) ~= "string" or global_id == "" then
    error("edits: delete_attachment needs a globalId string", 2)
  end
  table.insert(layer(self, layer_id).attachments.deleteIds, global_id)
  return global_id
end

--- Counts over features and attachments.
-- @treturn table `{adds =, updates =, deletes =, total =}`
-- @raise never
function Edits:counts()
  local c = { adds = 0, updates = 0, deletes = 0 }
  for _, l in pairs(self.layers) do
    for _, part in pairs{ l.features, l.attachments } do
      c.adds = c.adds + #part.adds
      c.updates = c.updates + #part.updates
      c.deletes = c.deletes + #part.deleteIds
    end
  end
  c.total = c.adds + c.updates + c.deletes
  return c
end

--- Whether the builder holds no edit at all (client:sync then sends none).
-- @treturn boolean
-- @raise never
function Edits:is_empty()
  return self:counts().total == 0
end

--- The edits array, with array markers so empty lists encode as `[]`.
-- Layers come in the order they were first used.
-- @treturn table `{ {id =, features = {adds =, updates =, deleteIds =}, attachments = {...}}, ... }`
-- @raise never
function Edits:to_table()
  local out = json.array()
  for _, id in ipairs(self.order) do
    local l = self.layers[id]
    local entry = { id = id }
    for _, part in ipairs{ "features", "attachments" } do
      entry[part] = {
        adds = json.array(l[part].adds),
        updates = json.array(l[part].updates),
        deleteIds = json.array(l[part].deleteIds),
      }
    end
    out[#out + 1] = entry
  end
  return out
end

--- The edits array as JSON text.
-- @treturn string the JSON text
-- @raise never
function Edits:encode()
  return json.encode(self:to_table())
end

-- One line: layers and counts.
function Edits:__tostring()
  local c = self:counts()
  return ("geoservices.Edits (%d layers: %d adds, %d updates, %d deletes)"):format(
    #self.order, c.adds, c.updates, c.deletes)
end

--- Module functions.
-- @section functions

--- `true` when `value` is an edits builder.
-- @param value any value
-- @treturn boolean
-- @raise never
function edits.is(value)
  return getmetatable(value) == Edits
end

--- Epoch milliseconds (UTC) of an os.time() number or a date table
-- {year, month, day, hour, min, sec}; the interface's date format (also
-- `geoservices.date(value)`). A date table is read as UTC, whatever the local time zone.
-- @tparam number|table value seconds since the epoch (os.time()), or a date table
--   (year, month, day integers; hour, min, sec optional)
-- @treturn integer milliseconds since the epoch (UTC)
-- @raise when value is neither, or year, month or day is not an integer
function edits.date(value)
  if type(value) == "number" then return math.floor(value * 1000) end
  if type(value) ~= "table" then error("date: expected seconds or a date table", 2) end
  -- days from the civil date (Howard Hinnant's algorithm): UTC without os.time's local zone
  local y, m, d = value.year, value.month, value.day
  if math.type(y) ~= "integer" or math.type(m) ~= "integer" or math.type(d) ~= "integer" then
    error("date: year, month and day must be integers", 2)
  end
  y = m <= 2 and y - 1 or y
  local era = (y >= 0 and y or y - 399) // 400
  local yoe = y - era * 400
  local doy = (153 * (m + (m > 2 and -3 or 9)) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  local days = era * 146097 + doe - 719468
  local seconds = days * 86400 + (value.hour or 0) * 3600 + (value.min or 0) * 60 + (value.sec or 0)
  return math.floor(seconds * 1000)
end

return edits
