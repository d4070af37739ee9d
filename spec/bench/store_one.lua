-- One measurement of the replica store in its own process (so its peak RSS
-- is its own):
--   lua5.4 spec/bench/store_one.lua apply SYNC_FILE STORE_PATH
--     an empty store of the benchmark's four point layers is created (not
--     timed), then the result's records are applied through the C fast path
--     in one transaction, fed 64 KiB at a time, and committed (timed).
--   lua5.4 spec/bench/store_one.lua featureset SYNC_FILE OUT_JSON
--     writes the same features as one Esri JSON FeatureSet for ogr2ogr.
-- Prints: method seconds records peak_rss_kib
local common = require "spec.bench.common"
local core = require "geoservices.core"
local json = require "geoservices.base.json"

local method, source, target = arg[1], arg[2], arg[3]

local peak_rss_kib = common.peak_rss_kib

local fields = require("spec.bench.fields").replica

local SR = { wkid = 4326 }

if method == "apply" then
  local store = require "geoservices.store"
  local layers = {}
  for id = 0, 3 do
    layers[#layers + 1] = { id = id, name = "parcels_" .. id, type = "Feature Layer",
      geometryType = "esriGeometryPoint", spatialReference = SR, objectIdField = "OBJECTID",
      globalIdField = "GlobalID", fields = fields() }
  end
  os.remove(target)
  local st = assert(store.create(target, { service = "Bench", replicaID = "{B}", syncModel = "perReplica" }, layers))
  local t0 = core.monotonic()
  local f = assert(io.open(source, "rb"))
  local rec = core.records()
  local applied = 0
  local ok, err = st:transaction(function(s)
    while assert(rec:read(f)) > 0 do -- 256 KiB from the file straight to the parser
      applied = applied + assert(s:apply(rec))
    end
    assert(rec:finish())
    applied = applied + assert(s:apply(rec))
    return true
  end)
  assert(ok, err and tostring(err))
  f:close()
  st:close()
  local secs = core.monotonic() - t0
  print(("apply %.3f %d %d"):format(secs, applied, peak_rss_kib()))
elseif method == "featureset" then
  local out = assert(io.open(target, "wb"))
  out:write('{"objectIdFieldName":"OBJECTID","globalIdFieldName":"GlobalID","geometryType":"esriGeometryPoint",',
    '"spatialReference":', json.encode(SR), ',"fields":', json.encode(json.array(fields())), ',"features":[')
  local f = assert(io.open(source, "rb"))
  local rec = core.records()
  local n, buf = 0, {}
  local function take(kind, _, value)
    if kind ~= "add" and kind ~= "update" then return end
    local v = value.attributes.VERIFIED -- an integer field for both (the store writes booleans as 1/0)
    if type(v) == "boolean" then value.attributes.VERIFIED = v and 1 or 0 end
    buf[#buf + 1] = json.encode(value)
    n = n + 1
  end
  while true do
    local chunk = f:read(1 << 20)
    if not chunk then break end
    assert(rec:feed(chunk))
    rec:drain(take)
    if #buf > 0 then
      out:write(n > #buf and "," or "", table.concat(buf, ","))
      buf = {}
    end
  end
  assert(rec:finish())
  rec:drain(take)
  if #buf > 0 then out:write(n > #buf and "," or "", table.concat(buf, ",")) end
  out:write("]}")
  out:close()
  f:close()
  print(("featureset 0 %d %d"):format(n, peak_rss_kib()))
else
  error("usage: store_one.lua apply|featureset SYNC_FILE TARGET")
end
