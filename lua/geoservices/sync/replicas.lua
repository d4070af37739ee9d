--- A replica as the server keeps it: its resource
-- (`{service}/FeatureServer/replicas/{id}?f=json`) and unRegisterReplica
-- (`{service}/FeatureServer/unRegisterReplica`).
--
-- The methods are the client's (`client:replica_info(service, id)`,
-- `client:unregister_replica(service, id)`); `self` is the client. Real
-- servers differ in what they send, and every shape seen is accepted:
-- `layerServerGens` as an array or as its JSON text, `serverSibGen` 0 or
-- -1 (or `replicaServerSibGen`), `returnsAttachments` and
-- `returnAttachments`, `layers` as ids or as their text, and generations
-- that are epoch milliseconds on one platform and small counters on
-- another: they are opaque 64-bit integers here (never floats, never
-- compared with a clock).
-- @module geoservices.sync.replicas
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"
local service = require "geoservices.sync.service"

local replicas = {}

--- An integer of any JSON spelling of a generation (a number, its text),
-- exactly: "1700000000123" and 1700000000123 give the same integer.
-- @param v the value
-- @treturn ?integer the integer, or nil
-- @local
function replicas.integer(v)
  if math.type(v) == "integer" then return v end
  if type(v) == "number" then return math.tointeger(v) end
  if type(v) == "string" and v:match("^%s*%-?%d+%s*$") then return math.tointeger(tonumber(v)) end
  return nil
end
local integer = replicas.integer

--- The per-layer generations of any shape (an array of `{id, serverGen,
-- serverSibGen}`, or its JSON text), with integers; nil when there are none.
-- @param value the value
-- @treturn ?table `{ {id =, serverGen =, serverSibGen =}, ... }`
-- @local
function replicas.layer_gens(value)
  if type(value) == "string" then
    local decoded = json.decode(value)
    value = decoded
  end
  if type(value) ~= "table" then return nil end
  local out = json.array()
  for _, l in ipairs(value) do
    if type(l) == "table" and integer(l.id) then
      out[#out + 1] = { id = integer(l.id), serverGen = integer(l.serverGen), serverSibGen = integer(l.serverSibGen) }
    end
  end
  return out
end

--- `generations[layer_id] = serverGen` from a replica's (or a result's)
-- `replicaServerGen` (every layer) or `layerServerGens`.
-- @tparam ?integer replica_gen the per-replica generation
-- @tparam ?table layer_gens the per-layer generations
-- @tparam ?table layer_ids the replica's layers (for a per-replica generation)
-- @treturn table the map (empty when nothing is known)
-- @local
function replicas.generations(replica_gen, layer_gens, layer_ids)
  local out = {}
  if layer_gens and #layer_gens > 0 then
    for _, l in ipairs(layer_gens) do out[l.id] = l.serverGen end
  elseif replica_gen then
    for _, id in ipairs(layer_ids or {}) do out[id] = replica_gen end
  end
  return out
end

local function ids_of(value)
  if type(value) == "string" then
    local out = json.array()
    for id in value:gmatch("%-?%d+") do out[#out + 1] = math.tointeger(tonumber(id)) end
    return out
  end
  local out = json.array()
  for _, v in ipairs(type(value) == "table" and value or {}) do
    local id = integer(type(v) == "table" and v.id or v)
    if id then out[#out + 1] = id end
  end
  return out
end

local function boolean_of(v)
  if v == true or v == "true" then return true end
  if v == false or v == "false" then return false end
  return nil
end

-- A replica's resource: see ReplicaInfo below.
local ReplicaInfo = { __name = "geoservices.ReplicaInfo" }
ReplicaInfo.__index = ReplicaInfo

local function generation_text(self)
  if self.layerServerGens and #self.layerServerGens > 0 then
    local parts = {}
    for _, l in ipairs(self.layerServerGens) do parts[#parts + 1] = ("%s:%s"):format(l.id, tostring(l.serverGen)) end
    return "layer generations " .. table.concat(parts, ",")
  end
  return "generation " .. tostring(self.replicaServerGen)
end
replicas.generation_text = generation_text

function ReplicaInfo:__tostring()
  local ids = {}
  for i, id in ipairs(self.layers) do ids[i] = tostring(id) end
  return ("replica %s %s of %s: %s, %s, layers %s, %s"):format(tostring(self.replicaName), tostring(self.replicaID),
    tostring(self.service), tostring(self.syncModel), tostring(self.syncDirection or "bidirectional"),
    #ids > 0 and table.concat(ids, ",") or "none", generation_text(self))
end

--- Builds a @{ReplicaInfo} from a decoded replica resource. Pure.
-- @string name the service
-- @tparam table doc the decoded resource
-- @treturn ReplicaInfo the info
-- @local
function replicas.build_info(name, doc)
  local info = setmetatable({}, ReplicaInfo)
  for k, v in pairs(doc) do info[k] = v end
  info.service = name
  if doc.replicaID == "" then info.replicaID = nil end
  info.layers = ids_of(doc.layers)
  info.replicaServerGen = integer(doc.replicaServerGen)
  info.replicaServerSibGen = integer(doc.replicaServerSibGen) or integer(doc.serverSibGen)
  info.layerServerGens = replicas.layer_gens(doc.layerServerGens)
  if #info.layers == 0 and info.layerServerGens then
    for _, l in ipairs(info.layerServerGens) do info.layers[#info.layers + 1] = l.id end
  end
  if info.syncModel == nil then
    info.syncModel = (info.layerServerGens and #info.layerServerGens > 0) and "perLayer"
      or (info.replicaServerGen and "perReplica") or nil
  end
  local attachments = boolean_of(doc.returnAttachments)
  if attachments == nil then attachments = boolean_of(doc.returnsAttachments) end
  info.returnAttachments = attachments
  info.creationDate = integer(doc.creationDate)
  info.lastSyncDate = integer(doc.lastSyncDate)
  info.generations = replicas.generations(info.replicaServerGen, info.layerServerGens, info.layers)
  return info
end

--- The replicaID that unregisters every replica of a service the user can
-- reach (unRegisterReplica, new in 10.5.1: "If * is provided, all replicas
-- accessible by the logged in user are removed"; an administrator reaches
-- every one).
replicas.ALL = "*"

-- A replica id goes into a path: GUID characters only, braces encoded.
local function id_path(id)
  return (id:gsub("[{}]", { ["{"] = "%7B", ["}"] = "%7D" }))
end

local function check_id(id, all)
  if type(id) ~= "string" or id == "" or not id:match("^[%w{}%-_]+$") then
    return errors.invalid("replicaID", "must be a replica id such as {5E1A0C2B-...} (letters, digits, braces, '-')"
      .. (all and ", or * for every replica" or ""))
  end
  return nil
end

--- Reads a replica's resource (`client:replica_info(service, replica_id)`,
-- `{service}/FeatureServer/replicas/{id}?f=json`).
-- @param self the client
-- @string name the service
-- @string id the replica's id (`{...}`)
-- @tparam[opt] table opts `timeout` (seconds)
-- @treturn[1] ReplicaInfo the replica (prints as a one-line summary)
-- @return[2] nil
-- @treturn[2] table err: kind "invalid" (a bad service name or id, nothing sent), "server" (no
--   such replica: it was unregistered, or never existed), "network", "timeout", "cancelled",
--   "http", "auth", "protocol"
-- @raise when name is not a string
function replicas.replica_info(self, name, id, opts)
  local bad = service.check_name(name, "replica_info") or check_id(id)
  if bad then return nil, bad end
  opts = opts or {}
  local doc, err = self:post(service.url(self, name, "replicas/" .. id_path(id)), {},
                             { timeout = opts.timeout, retry = "read" })
  if not doc then return nil, err end
  return replicas.build_info(name, doc)
end

-- The replicas of a service: see ReplicaList below.
local ReplicaList = { __name = "geoservices.ReplicaList" }
ReplicaList.__index = ReplicaList

function ReplicaList:__tostring()
  local shown = {}
  for i, r in ipairs(self) do
    if i > 10 then
      shown[#shown + 1] = ("... (%d more)"):format(#self - 10)
      break
    end
    shown[i] = tostring(r.replicaName)
  end
  return ("%d replica%s of %s%s"):format(#self, #self == 1 and "" or "s", tostring(self.service),
    #shown > 0 and (": " .. table.concat(shown, ", ")) or "")
end

--- Lists the replicas of a feature service (`client:list_replicas(service)`,
-- `{service}/FeatureServer/replicas?f=json`): as the vendor documents it, an
-- administrator gets every replica, another user the replicas they created.
-- With `opts.details`, each replica's resource is read too (@{replica_info},
-- one request each): owner, model, generations, last sync.
-- @param self the client
-- @string name the service
-- @tparam[opt] table opts `details` (boolean), `timeout` (seconds, per request)
-- @treturn[1] ReplicaList the replicas, in the server's order (prints as a one-line summary)
-- @return[2] nil
-- @treturn[2] table err: kind "invalid" (a bad service name, nothing sent), "server" (no such
--   service), "network", "timeout", "cancelled", "http", "auth", "protocol"
-- @raise when name is not a string
function replicas.list_replicas(self, name, opts)
  local bad = service.check_name(name, "list_replicas")
  if bad then return nil, bad end
  opts = opts or {}
  local doc, err = self:post(service.url(self, name, "replicas"), {},
                             { timeout = opts.timeout, retry = "read", array = true })
  if not doc then return nil, err end
  if not json.is_array(doc) and next(doc) ~= nil then
    return nil, errors.new("protocol", "the replicas resource did not answer a list",
      { url = service.url(self, name, "replicas") })
  end
  local list = setmetatable({ service = name }, ReplicaList)
  for _, entry in ipairs(doc) do
    if type(entry) == "table" and type(entry.replicaID) == "string" then
      local item = { service = name }
      for k, v in pairs(entry) do item[k] = v end
      if opts.details then
        local info, info_err = replicas.replica_info(self, name, entry.replicaID, { timeout = opts.timeout })
        if info then
          item = info
        elseif info_err.kind == "server" then
          item.error = info_err -- unregistered since it was listed
        else
          return nil, info_err
        end
      end
      list[#list + 1] = item
    end
  end
  return list
end

-- The outcome of unRegisterReplica: see Unregistered below.
local Unregistered = { __name = "geoservices.Unregistered" }
Unregistered.__index = Unregistered

function Unregistered:__tostring()
  if self.replicaID == replicas.ALL then
    return ("every replica of %s the user can reach unregistered"):format(tostring(self.service))
  end
  return ("replica %s of %s unregistered%s"):format(tostring(self.replicaID), tostring(self.service),
    self.already and " (by an earlier attempt of this call)" or "")
end

--- Whether an error is the server's "no such replica" (404, "does not exist", "not found").
local function not_found(err)
  if err.kind ~= "server" and err.kind ~= "http" then return false end
  if err.code == 404 or err.status == 404 then return true end
  local text = (tostring(err.message) .. " " .. table.concat(type(err.details) == "table" and err.details or {}, " "))
    :lower()
  return text:find("does not exist", 1, true) ~= nil or text:find("not found", 1, true) ~= nil
end
replicas.not_found = not_found

--- Unregisters a replica (`client:unregister_replica(service, replica_id)`,
-- `{service}/FeatureServer/unRegisterReplica` with `replicaID`): the
-- server forgets it, and it can no longer be synchronized. Retried as a
-- read (unregistering twice changes nothing); a re-sent request that finds
-- the replica gone reports the first one's success (`already = true`).
-- `"*"` (@{ALL}, servers since 10.5.1) unregisters every replica of the
-- service the user can reach.
-- @param self the client
-- @string name the service
-- @string id the replica's id, or "*" for all
-- @tparam[opt] table opts `timeout` (seconds)
-- @treturn[1] Unregistered the outcome (prints as a one-line summary)
-- @return[2] nil
-- @treturn[2] table err: kind "invalid" (a bad service name or id, nothing sent), "server" (no
--   such replica...), "network", "timeout", "cancelled", "http", "auth", "protocol"
-- @raise when name is not a string
function replicas.unregister_replica(self, name, id, opts)
  local bad = service.check_name(name, "unregister_replica") or (id ~= replicas.ALL and check_id(id, true))
  if bad then return nil, bad end
  opts = opts or {}
  local doc, err, info = self:post(service.url(self, name, "unRegisterReplica"), { replicaID = id },
                                   { timeout = opts.timeout, retry = "read" })
  if not doc then
    if id ~= replicas.ALL and info and info.attempts > 1 and info.ambiguous and not_found(err) then
      return setmetatable({ replicaID = id, service = name, success = true, already = true }, Unregistered)
    end
    return nil, err
  end
  if doc.success == false or doc.success == "false" then
    return nil, errors.new("server", ("unRegisterReplica of %s answered success = false"):format(id),
      { url = service.url(self, name, "unRegisterReplica") })
  end
  local out = setmetatable({}, Unregistered)
  for k, v in pairs(doc) do out[k] = v end
  out.replicaID, out.service, out.success = id, name, true
  return out
end

--- A replica's resource (`client:replica_info`): the server's members as
-- they came, plus normalized ones: `replicaID`, `replicaName`, `service`,
-- `syncModel`, `layers` (integer ids), `replicaServerGen` and
-- `replicaServerSibGen` (integers; perReplica), `layerServerGens` (an array
-- of `{id =, serverGen =, serverSibGen =}` with integers, whatever the
-- server sent), `generations` (`[layer_id] = serverGen`), `returnAttachments`
-- (a boolean from either spelling), `creationDate` and `lastSyncDate`
-- (integers, epoch milliseconds). `tostring` gives
-- `replica crew-1 {5E1A...} of Parcels: perReplica, bidirectional, layers 0,1, generation 12`.
-- @table ReplicaInfo

--- The replicas of a service (`client:list_replicas`): an array of
-- `{replicaName =, replicaID =, service =}` (and whatever else the server
-- listed), or with `details` of @{ReplicaInfo} (an entry whose resource was
-- gone by then keeps its name and id, and `error`); `service`. `tostring`
-- gives `3 replicas of Parcels: crew-1, crew-2, office`.
-- @table ReplicaList

--- The outcome of unRegisterReplica: `replicaID` ("*" for all), `service`, `success`
-- (true), `already` (true when a re-sent request found the replica gone:
-- the first one unregistered it). `tostring` gives
-- `replica {5E1A...} of Parcels unregistered` (with "*": `every replica of
-- Parcels the user can reach unregistered`).
-- @table Unregistered

replicas.ReplicaInfo = ReplicaInfo
replicas.ReplicaList = ReplicaList
replicas.Unregistered = Unregistered
return replicas
