--- Another replica's edits that win a race (POST /_emulator/race): they are
-- synchronized by their own replica right before the next request of a
-- route is handled, so a test can place another crew's change between
-- what a client read from the server and what it sends (a client that
-- checks the server before it uploads sees the old state, and the server
-- then refuses or merges its edits). Each race runs once.
--
-- A race: `{route = "synchronizeReplica" (default), service =, replicaID =,
-- edits = <a 2.1 edits array>}`; the replica syncs them bidirectionally
-- from the service's current generation (syncLayers for a perLayer one),
-- embedded, as its own synchronizeReplica would. A race waiting is kept in
-- the state file (a restarted emulator still runs it).
-- @module geoservices.emulator.race
-- @local
local json = require "geoservices.base.json"

local race = {}

--- Checks and queues a race; true or nil, message.
function race.add(emu, spec)
  if type(spec) ~= "table" then return nil, "a race is an object" end
  if type(spec.service) ~= "string" or not emu.world.feature_services[spec.service] then
    return nil, "race.service must name a feature service"
  end
  if type(spec.replicaID) ~= "string" then return nil, "race.replicaID is required" end
  if type(spec.edits) ~= "table" then return nil, "race.edits must be an edits array" end
  if spec.route ~= nil and type(spec.route) ~= "string" then return nil, "race.route must be a route name" end
  emu.races[#emu.races + 1] = { route = spec.route or "synchronizeReplica", service = spec.service,
                                replicaID = spec.replicaID, edits = spec.edits }
  return true
end

-- The synchronizeReplica form of a race's replica.
local function form_of(svc, r)
  local replica = svc.replicas[r.replicaID]
  local form = { f = "json", replicaID = r.replicaID, transportType = "esriTransportTypeEmbedded",
                 edits = json.encode(r.edits) }
  if replica and replica.model == "perLayer" then
    local layers = json.array()
    for _, id in ipairs(replica.layers) do layers[#layers + 1] = { id = id, serverGen = svc.gen } end
    form.syncLayers = json.encode(layers)
  else
    form.replicaServerGen = tostring(svc.gen)
  end
  return form
end

--- Runs the races waiting for `route` (before its request is handled);
-- `synchronize` is the synchronizeReplica handler. Returns true when any ran.
function race.run_before(emu, route_name, synchronize)
  local kept, ran = {}, false
  for _, r in ipairs(emu.races) do
    if r.route == route_name then
      local svc = emu.world.feature_services[r.service]
      local result, raw = synchronize(emu, { method = "POST", headers = {}, form = form_of(svc, r) }, r.service)
      local failed = raw or (type(result) == "table" and result.error)
      if failed then io.stderr:write("emulator: a race's sync failed: ", json.encode(failed), "\n") end
      ran = true
    else
      kept[#kept + 1] = r
    end
  end
  emu.races = kept
  return ran
end

return race
