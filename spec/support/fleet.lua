-- A copy of the example world with `n` more perReplica replicas of Parcels
-- ("fleet-1" ... "fleet-n"), for the concurrency specs, the luv example's
-- test and the benchmark. Returns the data file's path and the replica IDs.
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local fleet = {}

--- The replica ID of fleet replica `i`.
function fleet.id(i)
  return ("{5E1A0C2B-9%03d-4A5B-9C8D-%012d}"):format(i % 1000, i)
end

--- Writes the data file (in the scratch directory of spec/helper.lua, which
-- goes at exit; the caller may remove it sooner). Returns path, { replicaID, ... }.
function fleet.write(n)
  local f = assert(io.open("examples/data/world.json", "rb"))
  local world = assert(json.decode(f:read("a")))
  f:close()
  local replicas = world.featureServices.Parcels.replicas
  local ids = {}
  for i = 1, n do
    ids[i] = fleet.id(i)
    replicas[#replicas + 1] = {
      replicaID = ids[i], replicaName = "fleet-" .. i, model = "perReplica", syncDirection = "bidirectional",
    }
  end
  local path = helper.tmp_name()
  local out = assert(io.open(path, "wb"))
  assert(out:write(json.encode(world)))
  out:close()
  return path, ids
end

return fleet
