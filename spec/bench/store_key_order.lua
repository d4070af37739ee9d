-- Issue 28's rows of `make bench`: createReplica -> replica store of N points
-- through HTTP (spec/bench/serve_replica.lua answers createReplica with a
-- result file; the client downloads it and fills the store:
-- spec/bench/store_download_one.lua, in a process of its own so its peak RSS
-- is its own), with each layer entry's "id" before its features and after
-- them, beside ogr2ogr -f GPKG converting the same features from an Esri
-- JSON FeatureSet (time and file size), all in this run.
--   lua5.4 spec/bench/store_key_order.lua BENCH_DIR SIZE...
-- Targets: client peak RSS <= 64 MiB in both orders, client time (download +
-- fill) >= 4x faster than ogr2ogr, file size <= 1.25x ogr2ogr's (issue 38: its GlobalID index is whole).
local common = require "spec.bench.common"

local dir = arg[1]
local sizes = {}
for i = 2, #arg do sizes[#sizes + 1] = tonumber(arg[i]) end
local lua = os.getenv("LUA") or "lua5.4"
local results = os.getenv("BENCH_RESULTS")
local run = common.run

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function result_file(n, order)
  local path = ("%s/replica_%d_%s.json"):format(dir, n, order)
  if not exists(path) then
    run(("%s spec/bench/generate_replica.lua %d %s %s.tmp && mv %s.tmp %s"):format(lua, n, order, path, path, path))
  end
  return path
end

-- store.create against a server of `source`: seconds, peak RSS (KiB), file size
local function create(source, n)
  local log, out = dir .. "/serve_replica.log", ("%s/created_%d.gpkg"):format(dir, n)
  local url, pid = common.serve(lua, "spec/bench/serve_replica.lua", source, log)
  local ok, secs, rss, size = pcall(function()
    assert(url, "the replica server did not start")
    local line = run(("%s spec/bench/store_download_one.lua %s %s"):format(lua, url, out))
    local s, records, kib = line:match("^download_create (%S+) (%d+) (%d+)")
    assert(s and tonumber(records) == n, "unexpected output: " .. line)
    return tonumber(s), tonumber(kib), tonumber(run("stat -c %s " .. out))
  end)
  os.execute("kill " .. pid)
  os.remove(out)
  os.remove(log)
  if not ok then error(secs, 0) end
  return secs, rss, size
end

local function record(key, value, target)
  if not results then return end
  local f = assert(io.open(results, "a"))
  f:write(key, "\t", value, "\t", target, "\n")
  f:close()
end

print("createReplica -> replica store (one layer of points) through HTTP, the layer's id before or after its "
  .. "features, vs ogr2ogr -f GPKG of the same features")
print(("%-9s | %-5s | %9s %10s | %9s %8s | %9s %9s %7s"):format("records", "id", "client s", "peak RSS",
  "ogr2ogr s", "speedup", "file MiB", "ogr2ogr", "size"))
for _, n in ipairs(sizes) do
  local featureset = ("%s/replica_featureset_%d.json"):format(dir, n)
  if not exists(featureset) then
    run(("%s spec/bench/store_one.lua featureset %s %s"):format(lua, result_file(n, "first"), featureset))
  end
  local gdal_out = ("%s/replica_ogr2ogr_%d.gpkg"):format(dir, n)
  local o_secs, _, o_size = common.ogr2ogr(featureset, gdal_out, n)
  os.remove(gdal_out)
  for _, order in ipairs{ "first", "last" } do
    local secs, rss, size = create(result_file(n, order), n)
    print(("%-9d | %-5s | %9.3f %6.1f MiB | %9.3f %7.2fx | %9.1f %9.1f %6.3fx"):format(n, order, secs, rss / 1024,
      o_secs, o_secs / secs, size / 1048576, o_size / 1048576, size / o_size))
    io.stdout:flush()
    if n == sizes[#sizes] then
      local label = ("%d, id %s"):format(n, order)
      record("replica_rss_" .. order, ("%.1f MiB (%s)"):format(rss / 1024, label), "<= 64 MiB")
      record("replica_speed_" .. order, ("%.2fx (%s)"):format(o_secs / secs, label), ">= 4x ogr2ogr")
      record("replica_size_" .. order, ("%.3fx (%s)"):format(size / o_size, label), "<= 1.25x ogr2ogr's file")
    end
  end
end
print("(targets: peak RSS <= 64 MiB with the id first and last; >= 4x ogr2ogr's time; file <= 1.25x ogr2ogr's)")
