--- The record sink of a synchronization result: fed by the C core's record
-- extractor while the body (a response or a result file) arrives, it keeps
-- the top-level fields, the per-edit outcomes (failed_edits, counts) and
-- either hands each downloaded record to `on_change(layer_id, kind, record)`
-- or builds the edits array. It does no I/O. Internal.
local core = require "geoservices.core"
local json = require "geoservices.base.json"
local redact = require "geoservices.base.redact"

local sink_mod = {}

-- Where each kind of record goes in the edits array, and which are edit results.
local PLACE = {
  add = { "features", "adds" }, update = { "features", "updates" }, delete = { "features", "deleteIds" },
  add_result = { "features", "addResults" }, update_result = { "features", "updateResults" },
  delete_result = { "features", "deleteResults" },
  add_attachment = { "attachments", "adds" }, update_attachment = { "attachments", "updates" },
  delete_attachment = { "attachments", "deleteIds" },
  add_attachment_result = { "attachments", "addResults" },
  update_attachment_result = { "attachments", "updateResults" },
  delete_attachment_result = { "attachments", "deleteResults" },
}
local RESULT_OP = {
  add_result = "add", update_result = "update", delete_result = "delete",
  add_attachment_result = "add", update_attachment_result = "update", delete_attachment_result = "delete",
}

local Sink = {}
Sink.__index = Sink

--- The key of an edit's answer: operation, layer, target and GlobalID
-- (braces and case folded). Also used by geoservices.sync.outcome.
function sink_mod.answer_key(op, layer, target, gid)
  return ("%s|%s|%s|%s"):format(op, tostring(layer), target, (tostring(gid):upper():gsub("[{}]", "")))
end
local answer_key = sink_mod.answer_key

--- A sink for the records of a synchronization result, fed by the C core as
-- the body arrives. It keeps the top-level fields, the per-edit outcomes
-- (failed_edits, counts) and either hands each downloaded record to
-- `on_change(layer_id, kind, record)` or builds the edits array.
-- Internal.
-- @tparam ?function on_change the receiver of downloaded records, or nil to build `edits`
-- @tparam[opt] boolean keep_edits build `edits` even with on_change (an embedded result to save)
-- @treturn table the sink (`records`, `deliver`, `fields`, `failed_edits`, `counts`...)
-- @local
function sink_mod.new(on_change, keep_edits)
  local sink = setmetatable({
    fields = {}, counts = {}, failed_edits = {}, succeeded = 0, downloaded = 0,
    answered = {}, anonymous = {}, results = 0,
    on_change = on_change, edits = (keep_edits or not on_change) and json.array() or nil, entries = {},
    records = core.records(),
  }, Sink)
  sink.deliver = function(kind, layer, value, key) return sink:record(kind, layer, value, key) end
  return sink
end

-- The edits entry of a layer, created on its first record (document order).
function Sink:entry(layer)
  local e = self.entries[layer]
  if not e then
    e = { id = layer }
    for _, part in ipairs{ "features", "attachments" } do
      e[part] = { adds = json.array(), updates = json.array(), deleteIds = json.array() }
    end
    self.entries[layer] = e
    self.edits[#self.edits + 1] = e
  end
  return e
end

function Sink:record(kind, layer, value, key)
  if kind == "layer" then -- a layer entry starts, possibly without records
    if self.edits then self:entry(layer) end
    return
  elseif kind == "field" then
    self.fields[key] = value
    return
  elseif kind == "layer_field" then
    if self.edits then self:entry(layer)[key] = value end
    return
  end
  local op = RESULT_OP[kind]
  if op then
    -- which sent edits got an answer (geoservices.sync.outcome classifies)
    local target = kind:find("attachment", 1, true) and "attachment" or "feature"
    local gid = value.globalId or value.globalID
    self.results = self.results + 1
    if type(gid) == "string" and gid ~= "" then
      self.answered[answer_key(op, layer, target, gid)] = true
    else
      local group = answer_key(op, layer, target, "")
      self.anonymous[group] = (self.anonymous[group] or 0) + 1
    end
    local c = self.counts[layer] or { succeeded = 0, failed = 0 }
    self.counts[layer] = c
    if value.success == true or value.success == "true" then
      c.succeeded = c.succeeded + 1
      self.succeeded = self.succeeded + 1
    else
      c.failed = c.failed + 1
      local e = type(value.error) == "table" and value.error or {}
      self.failed_edits[#self.failed_edits + 1] = {
        layer = layer, op = op, target = kind:find("attachment", 1, true) and "attachment" or "feature",
        globalId = value.globalId or value.globalID, objectId = value.objectId,
        code = math.tointeger(e.code) or e.code,
        -- a server's words, kept in the store and printed: scrubbed like an error's
        description = redact.text(e.description or e.message),
      }
    end
  else
    self.downloaded = self.downloaded + 1
    if self.on_change then
      self.on_change(layer, kind, value)
      if not self.edits then return end
    end
  end
  if self.edits then
    local place = PLACE[kind]
    local part = self:entry(layer)[place[1]]
    local list = part[place[2]]
    if not list then
      list = json.array()
      part[place[2]] = list
    end
    list[#list + 1] = value
  end
end

-- The kind of record held by each list of a decoded edits entry.
local KIND_OF = {}
for kind, place in pairs(PLACE) do KIND_OF[place[1] .. "." .. place[2]] = kind end

--- Feeds the records of an already decoded response (its `edits` array) to
-- the sink, as the C core would have while streaming it.
-- @tparam table doc the decoded response
-- @local
function Sink:absorb(doc)
  for _, entry in ipairs(type(doc.edits) == "table" and doc.edits or {}) do
    local layer = math.tointeger(entry.id) or entry.id
    self:record("layer", layer)
    for _, part in ipairs{ "features", "attachments" } do
      for list_name, list in pairs(type(entry[part]) == "table" and entry[part] or {}) do
        local kind = KIND_OF[part .. "." .. list_name]
        if kind then
          for _, value in ipairs(list) do self:record(kind, layer, value) end
        end
      end
    end
  end
end

--- A fresh extractor for the next document (a result file after the
-- response): the fields start again, the outcomes and records add up.
-- With `count_only` (a result saved to a file), downloaded records are
-- counted and handed to on_change if any, never built into a table.
function Sink:next_document(count_only)
  self.fields = {}
  -- counted without an on_change: no values built, and a layer whose id
  -- follows its records waits as a count (csrc/json/lua_replay.c), not a table each
  self.records = core.records(count_only and not self.on_change and { values = false } or nil)
  if count_only then
    self.edits = nil
    self.on_change = self.on_change or function() end
  end
end

return sink_mod
