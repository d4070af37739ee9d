--- Replica state: a small JSON file per replica holding what the next
-- synchronization needs (service, replicaID, model, generations, directions).
-- Generations move only through `advance`, which the sync calls after the
-- whole result was received and parsed; the file is replaced atomically
-- (temporary file, fsync, rename), so a failure leaves it byte-identical.
--
--     { "service": "Parcels", "replicaID": "{...}", "model": "perReplica",
--       "replicaServerGen": 12, "syncDirection": "bidirectional" }
--     { "service": "Parcels", "replicaID": "{...}", "model": "perLayer",
--       "layers": [ { "id": 0, "serverGen": 12, "syncDirection": "download" } ] }
--
-- `geoservices.replica(path, init)` is @{open}; client:sync takes a replica
-- or a state file path.
-- @module geoservices.sync.replica
local core = require "geoservices.core"
local errors = require "geoservices.errors"
local json = require "geoservices.json"

local replica = {}

local Replica = { __name = "geoservices.Replica" }

local MODELS = { perReplica = true, perLayer = true }

local function check_state(state, path)
  local function bad(rule) return nil, errors.new("invalid", ("replica state %s: %s"):format(path, rule)) end
  if type(state) ~= "table" then return bad("not a JSON object") end
  if type(state.service) ~= "string" or state.service == "" then return bad("'service' is required") end
  if type(state.replicaID) ~= "string" or state.replicaID == "" then return bad("'replicaID' is required") end
  state.model = state.model or "perReplica"
  if not MODELS[state.model] then return bad("'model' must be perReplica or perLayer") end
  if state.model == "perLayer" then
    if type(state.layers) ~= "table" or #state.layers == 0 then return bad("a perLayer replica needs 'layers'") end
    for i, l in ipairs(state.layers) do
      if math.tointeger(l.id) == nil then return bad(("layers[%d] needs an integer id"):format(i)) end
    end
  end
  return state
end

--- Loads the state file at `path`, or creates it from `init` when it does
-- not exist yet (`geoservices.replica(path, init)`).
-- @string path the state file (JSON)
-- @tparam[opt] table init the fields of a new state (service, replicaID, model, replicaServerGen or
--   layers, syncDirection), used only when the file does not exist
-- @treturn[1] Replica the replica (prints as a one-line summary)
-- @return[2] nil
-- @treturn[2] table err: kind "io" (the file does not exist and no init was given, or the new file
--   could not be written) or "invalid" (not JSON, or a rule broken: service, replicaID, model,
--   layers)
-- @raise when path is not a string
function replica.open(path, init)
  if type(path) ~= "string" then error("geoservices.replica: expected a file path", 2) end
  local f = io.open(path, "rb")
  local state
  if f then
    local text = f:read("a")
    f:close()
    local msg, offset
    state, msg, offset = json.decode(text)
    if state == nil then
      return nil, errors.new("invalid", ("replica state %s: invalid JSON at byte %s: %s"):format(
        path, tostring(offset), tostring(msg)))
    end
  elseif init then
    state = {}
    for k, v in pairs(init) do state[k] = v end
  else
    return nil, errors.new("io", ("replica state %s does not exist"):format(path))
  end
  local ok, err = check_state(state, path)
  if not ok then return nil, err end
  local self = setmetatable({ path = path, state = state }, Replica)
  if not f then
    local saved, save_err = self:save()
    if not saved then return nil, save_err end
  end
  return self
end

--- A replica state, made by @{open}. Fields: `path`, `state` (the decoded
-- file); the state's members (`service`, `replicaID`, `model`,
-- `replicaServerGen`, `layers`, `syncDirection`, `closed`) read through,
-- e.g. `r.replicaID`.
-- @type Replica

-- Methods first, then the state's members.
function Replica:__index(key)
  local method = Replica[key]
  if method ~= nil then return method end
  return rawget(self, "state")[key]
end

-- One line: replica id, service, model, generation, path.
function Replica:__tostring()
  local s = self.state
  local gen = s.replicaServerGen
  if s.model == "perLayer" then
    local parts = {}
    for _, l in ipairs(s.layers) do parts[#parts + 1] = ("%s:%s"):format(l.id, tostring(l.serverGen)) end
    gen = "layers " .. table.concat(parts, ",")
  end
  return ("geoservices.Replica %s of %s (%s, generation %s) <%s>"):format(
    s.replicaID, s.service, s.model, tostring(gen), self.path)
end

--- Writes the state atomically (temporary file, fsync, rename).
-- @treturn[1] boolean true
-- @return[2] nil
-- @treturn[2] table err of kind "io"
-- @raise never
function Replica:save()
  local ok, msg = core.write_file_atomic(self.path, json.encode(self.state) .. "\n")
  if not ok then return nil, errors.new("io", msg) end
  return true
end

--- The synchronizeReplica parameters this state implies: the generation
-- (per replica) or syncLayers (per layer), and the default direction.
-- @treturn table `{replicaID =, syncDirection =, replicaServerGen = | syncLayers =}`
-- @raise never
function Replica:request_params()
  local s = self.state
  local params = { replicaID = s.replicaID, syncDirection = s.syncDirection }
  if s.model == "perLayer" then
    local layers = json.array()
    for _, l in ipairs(s.layers) do
      layers[#layers + 1] = { id = l.id, serverGen = l.serverGen, syncDirection = l.syncDirection }
    end
    params.syncLayers = layers
  else
    params.replicaServerGen = s.replicaServerGen
  end
  return params
end

--- Takes the generations of a fully received result and saves them. On a
-- save failure the state in memory is restored, so memory and file agree.
-- client:sync calls it; a user rarely needs to.
-- @tparam geoservices.sync.result.Result result a synchronization result (replicaServerGen or
--   layerServerGens; `closed`)
-- @treturn[1] boolean true
-- @return[2] nil
-- @treturn[2] table err: kind "protocol" (no replicaServerGen for a perReplica replica) or "io"
-- @raise never
function Replica:advance(result)
  local s = self.state
  local before = json.encode(s)
  if s.model == "perLayer" then
    local by_id = {}
    for _, l in ipairs(result.layerServerGens or {}) do by_id[l.id] = l.serverGen end
    if next(by_id) == nil and result.replicaServerGen then
      for _, l in ipairs(s.layers) do l.serverGen = result.replicaServerGen end
    else
      for _, l in ipairs(s.layers) do
        if by_id[l.id] then l.serverGen = by_id[l.id] end
      end
    end
  else
    if result.replicaServerGen == nil then
      return nil, errors.new("protocol", "result has no replicaServerGen for a perReplica replica")
    end
    s.replicaServerGen = result.replicaServerGen
  end
  if result.closed then s.closed = true end
  local ok, err = self:save()
  if not ok then
    self.state = json.decode(before)
    return nil, err
  end
  return true
end

replica.Replica = Replica
return replica
