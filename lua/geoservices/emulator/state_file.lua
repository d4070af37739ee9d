--- The emulator's state on disk (`--state-file PATH`): what a change costs
-- is what changed, not the world. PATH holds the whole state (written at
-- start-up, before the emulator listens, and again when the journal
-- outgrows both it and JOURNAL_LIMIT: a whole write of a large world takes
-- seconds, which a client waiting for its answer must not meet often);
-- PATH.journal holds, after it, one record per later save: the state
-- without its large maps (every layer's features and attachments, every
-- service's change log), and those maps' changed entries. A save used to
-- write the whole world after every change and every job step: at 100,000
-- features, tens of seconds per request, past a client's timeout (issue 39).
--
-- Durability is as before: a save returns once its bytes are on disk
-- (core.write_file_atomic for PATH, core.append_durable for a record), so
-- whatever crashes, a restart finds every acknowledged change. A record cut
-- short by a crash is known by its length and ignored (its change was not
-- acknowledged). Each record names the whole state it follows (its id): a
-- crash between a new PATH and the removal of the old journal leaves
-- records that name another id, and they are ignored.
--
-- A change is found by identity: the maps' entries are replaced, never
-- changed in place (emulator.import copies a feature before it changes
-- it), and the change log is only appended to. A map that is replaced (a
-- reset, a new service) makes the next save write the whole state.
local core = require "geoservices.core"
local disk = require "geoservices.emulator.disk"
local persist = require "geoservices.emulator.persist"

local state_file = {}

local StateFile = {}
StateFile.__index = StateFile

local MODE = tonumber("600", 8) -- it holds the users' tokens
local LOG = "log"
local JOURNAL_LIMIT = 64 * 1024 * 1024

-- The large maps of a state, by name: {kind, service, layer} in one string.
local function large_maps(root)
  local maps = {}
  for name, svc in pairs(root.feature_services or {}) do
    maps[("%s\0%s"):format(LOG, name)] = svc.log
    for id, layer in pairs(svc.layers or {}) do
      maps[("features\0%s\0%s"):format(name, tostring(id))] = layer.features
      maps[("attachments\0%s\0%s"):format(name, tostring(id))] = layer.attachments
    end
  end
  return maps
end

local function is_log(name) return name:sub(1, #LOG + 1) == LOG .. "\0" end

-- What a save remembers of a map: the map and its entries (for a log, its length).
local function remember(name, map)
  if is_log(name) then return { map = map, n = #map } end
  local copy = {}
  for k, v in pairs(map) do copy[k] = v end
  return { map = map, copy = copy }
end

--- The state file at `path` (nothing is read or written yet).
function state_file.new(path)
  return setmetatable({ path = path, journal = path .. ".journal", saved = nil, id = nil,
                        base_bytes = 0, journal_bytes = 0 }, StateFile)
end

--- Reads the state saved at `path` and its journal: the state, or nil when
-- there is none, or nil, message when it cannot be read.
function state_file.read(path)
  local text = disk.read(path)
  if not text then return nil end
  local root, err = persist.load(text)
  if type(root) ~= "table" then return nil, err end
  local journal = disk.read(path .. ".journal") or ""
  local pos = 1
  while pos <= #journal do
    local len, id, body = journal:match("^#(%d+) (%x+)\n()", pos)
    if not len or body + tonumber(len) - 1 > #journal then break end -- a record cut short by a crash
    local last = body + tonumber(len) - 1
    if id == root.journal then
      local maps = large_maps(root)
      local record, rerr = persist.load(journal:sub(body, last), function(name)
        return maps[name] or error("journal: no map " .. name:gsub("%z", "/"))
      end)
      if type(record) ~= "table" then return nil, "journal: " .. tostring(rerr) end
      for name, changed in pairs(record.changed) do
        local map = maps[name]
        if is_log(name) then
          for _, e in ipairs(changed) do map[#map + 1] = e end
        else
          for k, v in pairs(changed) do map[k] = v or nil end
        end
      end
      root = record.root
    end
    pos = last + 1
  end
  return root
end

-- The changes of each large map since the last save, or nil when one is
-- new or replaced (the whole state is written then).
function StateFile:changes(maps)
  local out = {}
  for name in pairs(self.saved) do
    if not maps[name] then return nil end
  end
  for name, map in pairs(maps) do
    local s = self.saved[name]
    if not s or s.map ~= map then return nil end
    if is_log(name) then
      if #map < s.n then return nil end
      if #map > s.n then
        local added = {}
        for i = s.n + 1, #map do added[#added + 1] = map[i] end
        out[name] = added
      end
    else
      local changed
      for k, v in pairs(map) do
        if s.copy[k] ~= v then
          changed = changed or {}
          changed[k] = v
        end
      end
      for k in pairs(s.copy) do
        if map[k] == nil then
          changed = changed or {}
          changed[k] = false
        end
      end
      out[name] = changed
    end
  end
  return out
end

function StateFile:write_whole(root, maps)
  self.id = core.random_bytes(8):gsub(".", function(c) return ("%02x"):format(c:byte()) end)
  root.journal = self.id
  local text = persist.dump(root)
  local ok, err = core.write_file_atomic(self.path, text, MODE)
  if not ok then return nil, err end
  os.remove(self.journal) -- its records name the old id
  self.base_bytes, self.journal_bytes = #text, 0
  self.saved = {}
  for name, map in pairs(maps) do self.saved[name] = remember(name, map) end
  return true
end

--- Saves `root` (the emulator's mutable state): a record of what changed
-- since the last save, or the whole state (the first save, a replaced
-- map, a journal past its limit). Returns true once it is on
-- disk, or nil, message.
function StateFile:save(root)
  local maps = large_maps(root)
  local changes = self.saved and self.journal_bytes <= math.max(self.base_bytes, JOURNAL_LIMIT)
    and self:changes(maps)
  if not changes then return self:write_whole(root, maps) end
  root.journal = self.id
  local names = {}
  for name, map in pairs(maps) do names[map] = name end
  local text = persist.dump({ root = root, changed = changes }, names)
  local record = ("#%d %s\n%s"):format(#text, self.id, text)
  local ok, err = core.append_durable(self.journal, record, MODE)
  if not ok then return nil, err end
  self.journal_bytes = self.journal_bytes + #record
  for name, changed in pairs(changes) do
    local s = self.saved[name]
    if is_log(name) then
      s.n = #s.map
    else
      for k, v in pairs(changed) do s.copy[k] = v or nil end
    end
  end
  return true
end

return state_file
