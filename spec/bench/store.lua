-- The replica store row of `make bench`: records of a synchronization result
-- applied into a store (the C fast path, one transaction) beside
-- `ogr2ogr -f GPKG` converting the same features from an Esri JSON
-- FeatureSet, measured in the same run, each in its own process.
--   lua5.4 spec/bench/store.lua BENCH_DIR SIZE...
-- Target (issue 15): at least 5x faster than ogr2ogr at 1M, peak RSS <= 64 MiB at every size.
local common = require "spec.bench.common"

local dir = arg[1]
local sizes = {}
for i = 2, #arg do sizes[#sizes + 1] = tonumber(arg[i]) end
local lua = os.getenv("LUA") or "lua5.4"

local run = common.run

-- Outputs carry this run's pid (another `make bench` may share the
-- directory) and are removed once measured; inputs are built under a
-- temporary name and renamed into place.
local run_id
do
  local f = assert(io.open("/proc/self/stat"))
  run_id = f:read("n")
  f:close()
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function sync_file(n)
  local path = ("%s/sync_%d.json"):format(dir, n)
  if not exists(path) then run(("%s spec/bench/generate.lua %d %s"):format(lua, n, path)) end
  return path
end

local function featureset_file(n, sync)
  local path = ("%s/featureset_%d.json"):format(dir, n)
  if not exists(path) then
    local tmp = ("%s.%d"):format(path, run_id)
    run(("%s spec/bench/store_one.lua featureset %s %s"):format(lua, sync, tmp))
    assert(os.rename(tmp, path))
  end
  return path
end

local function apply(sync, n)
  local out = ("%s/store_%d.%d.gpkg"):format(dir, n, run_id)
  local line = run(("%s spec/bench/store_one.lua apply %s %s"):format(lua, sync, out))
  os.remove(out)
  local secs, records, rss = line:match("^apply (%S+) (%d+) (%d+)")
  assert(secs, "unexpected output: " .. line)
  return tonumber(secs), tonumber(records), tonumber(rss)
end

local function ogr2ogr(featureset, n)
  local out = ("%s/ogr2ogr_%d.%d.gpkg"):format(dir, n, run_id)
  local secs, rss = common.ogr2ogr(featureset, out, n)
  os.remove(out)
  return secs, rss
end

local function mib(kib) return kib / 1024 end

print("Replica store: a sync result's records applied into a GeoPackage (C fast path, one transaction) "
  .. "vs ogr2ogr -f GPKG from an Esri JSON FeatureSet of the same features")
print(("%-9s | %9s %10s %10s | %9s %10s %10s | %7s"):format("records", "store s", "records/s", "peak RSS",
  "ogr2ogr s", "records/s", "peak RSS", "speedup"))
for _, n in ipairs(sizes) do
  local sync = sync_file(n)
  local fs = featureset_file(n, sync)
  local s_secs, records, s_rss = apply(sync, n)
  assert(records == n, ("the store applied %d records of %d"):format(records, n))
  local o_secs, o_rss = ogr2ogr(fs, n)
  print(("%-9d | %9.3f %10.0f %6.1f MiB | %9.3f %10.0f %6.1f MiB | %6.2fx"):format(n, s_secs, n / s_secs,
    mib(s_rss), o_secs, n / o_secs, mib(o_rss), o_secs / s_secs))
  io.stdout:flush()
end
print("(targets: >= 5x ogr2ogr at 1M records, store peak RSS <= 64 MiB at every size)")
