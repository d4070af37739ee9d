-- One store made from a createReplica result file in its own process (so
-- its peak RSS is its own): store.create_from with the file as its source,
-- as geoservices.store.create does once the result is downloaded.
--   lua5.4 spec/bench/store_create_one.lua RESULT_FILE STORE_PATH
-- Prints: create seconds features peak_rss_kib fill_reports_with_records (before the last)
local common = require "spec.bench.common"
local core = require "geoservices.core"
local store = require "geoservices.store"

local source, target = arg[1], arg[2]

local fields = require("spec.bench.fields").replica

local layers = {}
for id = 0, 3 do -- every layer the generator may write
  layers[#layers + 1] = { id = id, name = "parcels_" .. id, type = "Feature Layer",
    geometryType = "esriGeometryPoint", spatialReference = { wkid = 4326 }, objectIdField = "OBJECTID",
    globalIdField = "GlobalID", fields = fields() }
end
os.remove(target)
local t0 = core.monotonic()
-- the fill's progress: how many of its reports before the last counted records
local counted = 0
local function on_fill(bytes, total, records)
  if bytes < total and records > 0 then counted = counted + 1 end
end
local st = assert(store.create_from(target, { service = "Bench", replicaID = "{B}", syncModel = "perReplica" },
  layers, source, { on_fill = on_fill }))
local secs = core.monotonic() - t0
local n = 0
for id = 0, 3 do n = n + st:count(id) end
st:close()
print(("create %.3f %d %d %d"):format(secs, n, common.peak_rss_kib(), counted))
