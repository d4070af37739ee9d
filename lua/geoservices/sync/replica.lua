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
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"

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

-- The generations a state holds, as one comparable text.
local function generations(state)
  if state.model == "perLayer" then
    local parts = {}
    for _, l in ipairs(state.layers or {}) do parts[#parts + 1] = ("%s:%s"):format(l.id, tostring(l.serverGen)) end
    return table.concat(parts, ",")
  end
  return tostring(state.replicaServerGen)
end

-- The journaled attempt beside the state, if it still belongs to it; nil
-- when there is none; nil, err when the journal cannot be read. A damaged
-- journal stays where it is: it may hold edits the server has or has not
-- applied, which only a person can now sort out.
local function load_journal(path, state)
  local journal = path .. ".journal"
  local f = io.open(journal, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  local attempt, msg, offset = json.decode(text)
  local why = attempt == nil and ("not JSON (%s at byte %s)"):format(tostring(msg), tostring(offset))
    or type(attempt) ~= "table" and "not a JSON object"
    or type(attempt.from) ~= "string" and "it does not say which generations it was sent from"
    or attempt.edits ~= nil and type(attempt.edits) ~= "table" and "its edits are not a list"
  if why then
    return nil, errors.new("io", ("replica journal %s is damaged: %s. It holds a synchronization that may have "
      .. "reached the server, so it was left in place and nothing was sent: repair it, or move it away once you "
      .. "know what became of its edits"):format(journal, why), { code = "damaged", path = journal })
  end
  local provisional = type(attempt.params) == "table" and attempt.params.provisional == true
  if attempt.from ~= generations(state) and not provisional then
    -- resolved by the save that moved the generations (a provisional one, edits
    -- a lost answer left unknown, outlives that move: geoservices.sync.attempt)
    os.remove(journal)
    return nil
  end
  return attempt
end

--- Loads the state file at `path`, or creates it from `init` when it does
-- not exist yet (`geoservices.replica(path, init)`).
-- @string path the state file (JSON)
-- @tparam[opt] table init the fields of a new state (service, replicaID, model, replicaServerGen or
--   layers, syncDirection), used only when the file does not exist
-- @treturn[1] Replica the replica (prints as a one-line summary)
-- @return[2] nil
-- @treturn[2] table err: kind "io" (the file does not exist and no init was given, or the new file
--   could not be written; code "damaged": its journal cannot be read, and is left in place) or
--   "invalid" (not JSON, or a rule broken: service, replicaID, model, layers)
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
  local attempt
  if f then
    attempt, err = load_journal(path, state)
    if err then return nil, err end
  end
  local self = setmetatable({ path = path, state = state, attempt = attempt }, Replica)
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
-- @tparam[opt] table opts `keep_journal` (true: the journal stays; it holds edits still provisional)
-- @treturn[1] boolean true
-- @return[2] nil
-- @treturn[2] table err: kind "protocol" (no replicaServerGen for a perReplica replica) or "io"
-- @raise never
function Replica:advance(result, opts)
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
  if not (opts and opts.keep_journal) then
    self:clear_attempt() -- the journaled attempt is resolved by this very result
  end
  return true
end

--- The journal: before a synchronization with edits is sent, the attempt
-- (its edits, with their GlobalIDs, the parameters that matter and the
-- generations it was sent from) is saved durably beside the state, in
-- `<state>.journal`; the async job's status address is added as soon as it
-- is known; it is removed when the result's generations are saved
-- (@{advance}) or when the server is known to have applied none of it. The
-- state file itself changes only with the generations. A journal whose
-- generations are no longer the state's was resolved by the save that moved
-- them (a crash between the two writes) and is dropped on open; a journal
-- that cannot be read is an error of @{open} naming it, and stays.
-- @tparam table edits the edits array as sent
-- @tparam table params `syncDirection`, `transportType` of the attempt
-- @treturn[1] boolean true
-- @return[2] nil
-- @treturn[2] table err of kind "io" (nothing was sent)
-- @raise never
function Replica:begin_attempt(edits, params)
  local attempt = { edits = edits, params = params, from = generations(self.state), started = os.time() }
  local ok, msg = core.write_file_atomic(self.path .. ".journal", json.encode(attempt) .. "\n")
  if not ok then return nil, errors.new("io", "cannot journal the edits before sending them: " .. msg) end
  rawset(self, "attempt", attempt)
  return true
end

--- Adds the async job's status address to the journaled attempt.
-- @string status_url the address
-- @return true, or nil, err of kind "io"
-- @raise never
function Replica:attempt_job(status_url)
  local attempt = rawget(self, "attempt")
  if not attempt then return true end
  attempt.status_url = status_url
  local ok, msg = core.write_file_atomic(self.path .. ".journal", json.encode(attempt) .. "\n")
  if not ok then return nil, errors.new("io", "cannot journal the job's status address: " .. msg) end
  return true
end

--- Drops the journaled attempt (resolved, or known not applied).
-- @return true
-- @raise never
function Replica:clear_attempt()
  rawset(self, "attempt", nil)
  os.remove(self.path .. ".journal")
  return true
end

--- Takes the OS lock of a state file (`<path>.lock`, flock): one
-- synchronization of a replica at a time, across processes. With
-- `timeout`, waits for it (through `sleep`) up to that many seconds.
-- @string path the state file
-- @tparam[opt] number timeout seconds to wait (default: none, fail at once)
-- @tparam[opt] function sleep the wait between tries (a scheduler's sleep)
-- @treturn[1] userdata the lock (`:close()`; also a `<close>` value)
-- @return[2] nil
-- @treturn[2] table err: kind "busy" (another synchronization holds it) or "io"
-- @raise never
function replica.lock(path, timeout, sleep)
  local deadline = timeout and (core.monotonic() + timeout)
  while true do
    local lock, msg, code = core.try_lock(path .. ".lock")
    if lock then return lock end
    if code ~= "busy" or not deadline or core.monotonic() >= deadline then
      return nil, errors.new(code == "busy" and "busy" or "io", msg .. (code == "busy" and
        ": another process (or task) is synchronizing this replica; try again when it ends, or give "
        .. "opts.lock_timeout to wait" or ""), { code = code })
    end
    sleep(math.min(0.05, deadline - core.monotonic()))
  end
end

replica.Replica = Replica
return replica
