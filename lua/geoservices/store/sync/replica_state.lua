--- The replica a store holds: its description (`st:replica()`), its
-- generations (`st:generations()`, `st:set_generations()`) and the log of
-- its synchronizations (`st:log()`). These are methods of the Store
-- (geoservices.store), which attaches them (its METHODS): call them on a store.
-- @module geoservices.store.sync.replica_state
local json = require "geoservices.base.json"
local shared = require "geoservices.store.shared"

local db_error, now = shared.db_error, shared.now

local replica_state = {}

--- The methods of a replica store (geoservices.store) that read and record its replica's state.
-- @type Store
local Store = {}
replica_state.Store = Store

--- The generations of a replica info or result: perReplica's
-- replicaServerGen (and sibling), perLayer's layerServerGens (an array or
-- its JSON text, as some servers send it). Integers, kept as they are.
-- @local
function replica_state.generations_of(info)
  local gens = {}
  local rgen = info.replicaServerGen
  if type(rgen) == "string" then rgen = math.tointeger(tonumber(rgen)) end
  if math.type(rgen) == "integer" then gens.replicaServerGen = rgen end
  local sib = info.replicaServerSibGen or info.serverSibGen
  if math.type(sib) == "integer" then gens.replicaServerSibGen = sib end
  local lsg = info.layerServerGens
  if type(lsg) == "string" then lsg = json.decode(lsg) end
  if type(lsg) == "table" then
    gens.layerServerGens = {}
    for _, l in ipairs(lsg) do
      local id, gen = math.tointeger(l.id), l.serverGen
      if type(gen) == "string" then gen = math.tointeger(tonumber(gen)) end
      if id and math.type(gen) == "integer" then
        gens.layerServerGens[#gens.layerServerGens + 1] = { id = id, serverGen = gen,
          serverSibGen = math.tointeger(l.serverSibGen) }
      end
    end
  end
  return gens
end

--- The generations held: `{replicaServerGen =, replicaServerSibGen =, layerServerGens = {{id =,
-- serverGen =, serverSibGen =}, ...}}` (64-bit integers, as the server gave them).
-- @return the table, or nil, err
function Store:generations()
  local rows, msg, code = self:_db():rows(
    "SELECT layer_id, server_gen, server_sib_gen FROM gpkgext_geoservices_generations ORDER BY layer_id")
  if not rows then return nil, db_error(self.path, msg, code) end
  local gens = { layerServerGens = json.array() }
  for _, r in ipairs(rows) do
    if r.layer_id == -1 then
      gens.replicaServerGen, gens.replicaServerSibGen = r.server_gen, r.server_sib_gen
    else
      gens.layerServerGens[#gens.layerServerGens + 1] = { id = r.layer_id, serverGen = r.server_gen,
        serverSibGen = r.server_sib_gen }
    end
  end
  return gens
end

--- Stores new generations (in the caller's transaction, or its own).
-- @tparam table gens `replicaServerGen`, `replicaServerSibGen`, `layerServerGens` (array or JSON text)
-- @return true, or nil, err
function Store:set_generations(gens)
  gens = replica_state.generations_of(gens)
  return self:transaction(function()
    local db = self.db
    local sql = "INSERT OR REPLACE INTO gpkgext_geoservices_generations (layer_id, server_gen, "
      .. "server_sib_gen, updated_at) "
      .. "VALUES (?, ?, ?, ?)"
    if gens.replicaServerGen then
      local ok, msg, code = db:run(sql, -1, gens.replicaServerGen, gens.replicaServerSibGen, now())
      if not ok then return nil, db_error(self.path, msg, code) end
    end
    for _, l in ipairs(gens.layerServerGens or {}) do
      local ok, msg, code = db:run(sql, l.id, l.serverGen, l.serverSibGen, now())
      if not ok then return nil, db_error(self.path, msg, code) end
    end
    return true
  end)
end

--- Appends a line to the sync log (geoservices_sync_log).
-- @tparam table entry `operation`, `outcome`, `uploaded`, `failed`, `downloaded`, `replicaServerGen`,
--   `layerServerGens`, `message`
-- @return true, or nil, err
function Store:log(entry)
  local lsg = entry.layerServerGens
  local ok, msg, code = self:_db():run("INSERT INTO geoservices_sync_log (at, operation, outcome, uploaded, failed, "
    .. "downloaded, replica_server_gen, layer_server_gens, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", now(),
    entry.operation or "sync", entry.outcome or "ok", entry.uploaded, entry.failed, entry.downloaded,
    entry.replicaServerGen, lsg and json.encode(json.array(lsg)) or nil, entry.message)
  if not ok then return nil, db_error(self.path, msg, code) end
  return true
end

--- The replica's description: service, replicaID, replicaName, syncModel,
-- syncDirection, layers (ids), created, info (the rest, as given), and the generations.
-- @return the table, or nil, err
function Store:replica()
  local rows, msg, code = self:_db():rows("SELECT * FROM gpkgext_geoservices_replica WHERE id = 1")
  if not rows then return nil, db_error(self.path, msg, code) end
  local r = rows[1]
  local gens, err = self:generations()
  if not gens then return nil, err end
  return {
    service = r.service, replicaID = r.replica_id, replicaName = r.replica_name, syncModel = r.sync_model,
    syncDirection = r.sync_direction, layers = json.decode(r.layers), created = r.created_at,
    info = r.info and json.decode(r.info), replicaServerGen = gens.replicaServerGen,
    replicaServerSibGen = gens.replicaServerSibGen, layerServerGens = gens.layerServerGens,
  }
end

return replica_state
