-- Issue 38's table of `make bench`: createReplica -> replica store for each
-- shape of data a real service has (spec/bench/generate_shape.lua, seeded),
-- through HTTP (spec/bench/serve_replica.lua with the shape's layer), by the
-- Lua API (spec/bench/store_download_one.lua) and by the CLI
-- (spec/bench/cli_create_one.lua), each in a process of its own (its peak
-- RSS is its own), beside ogr2ogr -f GPKG of the same features as an Esri
-- JSON FeatureSet, all in this run; then the scaling row: the Lua API's
-- time per feature at each size.
--   lua5.4 spec/bench/shapes.lua BENCH_DIR SIZE...
-- At the largest SIZE S: S points with sequential GlobalIDs (issue 28's
-- points but for their GlobalIDs: spec/bench/generate_replica.lua), S/10 polygons
-- of about 200 vertices with a hole, S/5 rows of 100 fields, S/10 rows with
-- a 10 KB text, S/100 features with 5 attachments of 1 MiB each (their
-- bytes fetched by URL) (S = 1M: issue 38's sizes).
-- BENCH_SHAPES (shape names joined by commas, e.g. points_seq) runs those
-- rows only; the scaling row (points_seq) runs with points_seq.
-- Targets: client peak RSS <= 64 MiB (Lua and CLI); time >= 4x faster than
-- ogr2ogr for points, >= 3x for polygons and wide rows; file <= 1.25x
-- ogr2ogr's; per-feature time at the largest size within 1.5x of the smallest.
local common = require "spec.bench.common"

local dir = arg[1]
local sizes = {}
for i = 2, #arg do sizes[#sizes + 1] = tonumber(arg[i]) end
local S = sizes[#sizes]
local lua = os.getenv("LUA") or "lua5.4"
local results = os.getenv("BENCH_RESULTS")
local run = common.run

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function record(key, value, target)
  if not results then return end
  local f = assert(io.open(results, "a"))
  f:write(key, "\t", value, "\t", target, "\n")
  f:close()
end

-- The shape's files for n features: the base path (BASE.json, .layer.json, .featureset.json). The
-- points are issue 28's (spec/bench/generate_replica.lua's records, 10-20 attributes) with sequential
-- GlobalIDs: the same data as its rows but for them.
local function data(shape, n)
  local base = ("%s/shape_%s_%d"):format(dir, shape, n)
  if exists(base .. ".featureset.json") then return base end
  if shape == "points_seq" then
    run(("%s spec/bench/generate_replica.lua %d first %s.json 1 seq16"):format(lua, n, base))
    run(("%s spec/bench/store_one.lua featureset %s.json %s.featureset.json"):format(lua, base, base))
    local json = require "geoservices.base.json"
    local f = assert(io.open(base .. ".layer.json", "wb"))
    f:write(json.encode{ id = 0, name = "parcels_0", type = "Feature Layer", geometryType = "esriGeometryPoint",
      spatialReference = { wkid = 4326, latestWkid = 4326 }, objectIdField = "OBJECTID", globalIdField = "GlobalID",
      hasAttachments = false, fields = json.array(require("spec.bench.fields").replica()),
      relationships = json.array() })
    f:close()
  else
    run(("%s spec/bench/generate_shape.lua %s %d %s"):format(lua, shape, n, base))
  end
  return base
end

-- The Lua API and the CLI against a server of the shape's result: their seconds, peak RSS (KiB), file size
-- (measured once per file: the scaling row's largest size is the points row). With attachments (n
-- features, 5 each), both fetch their bytes by URL.
local measured = {}
local function clients(base, n, attachments)
  if measured[base] then return measured[base] end
  local log, out = base .. ".serve.log", base .. ".created.gpkg"
  local url, pid = common.serve(lua, "spec/bench/serve_replica.lua", base .. ".json " .. base .. ".layer.json"
    .. (attachments and (" " .. base .. ".blob") or ""), log)
  local ok, got = pcall(function()
    assert(url, "the replica server did not start")
    local r = {}
    local line = run(("%s spec/bench/store_download_one.lua %s %s %s"):format(lua, url, out,
      attachments and "attachments" or ""))
    local s, records, kib, fetched = line:match("download_create (%S+) (%d+) (%d+) (%d+)")
    assert(s and tonumber(records) == n, "unexpected output: " .. line)
    assert(not attachments or tonumber(fetched) == 5 * n, "attachments fetched: " .. line)
    r.lua_secs, r.lua_rss = tonumber(s), tonumber(kib)
    r.size = tonumber(run("stat -c %s " .. out))
    os.remove(out)
    line = run(("GEOSERVICES_TTY=0 %s spec/bench/cli_create_one.lua %s %s %s 2>&1"):format(lua, url, out,
      attachments and "attachments" or ""))
    assert(not attachments or line:find(("%d attachments fetched"):format(5 * n), 1, true), line)
    s, records, kib = line:match("cli_create (%S+) (%d+) (%d+) 0%s*$")
    assert(s and tonumber(records) == n, "unexpected output: " .. line)
    r.cli_secs, r.cli_rss = tonumber(s), tonumber(kib)
    return r
  end)
  os.execute("kill " .. pid)
  os.remove(out)
  os.remove(log)
  if not ok then error(got, 0) end
  measured[base] = got
  return got
end

local ROWS = {
  { shape = "points_seq", n = S, label = "points, sequential GlobalIDs", speed = 4 },
  { shape = "polygons", n = S // 10, label = "polygons, ~200 vertices, a hole", speed = 3 },
  { shape = "wide", n = S // 5, label = "rows of 100 fields", speed = 3 },
  { shape = "texts", n = S // 10, label = "rows with a 10 KB text" },
  { shape = "attachments", n = S // 100, label = "5 attachments of 1 MiB each", attachments = true },
}

local only
if os.getenv("BENCH_SHAPES") then
  only = {}
  for name in os.getenv("BENCH_SHAPES"):gmatch("[^,%s]+") do only[name] = true end
end

print("createReplica -> replica store by data shape (issue 38), through HTTP, by the Lua API and the CLI, "
  .. "vs ogr2ogr -f GPKG of the same features")
print(("%-32s %8s | %8s %8s | %8s %8s | %8s %8s %7s | %8s %7s %7s"):format("shape", "features", "Lua s", "Lua RSS",
  "CLI s", "CLI RSS", "ogr2ogr", "its RSS", "speedup", "file MiB", "ogr2ogr", "size"))
for _, row in ipairs(ROWS) do
  if row.n >= 10 and (not only or only[row.shape]) then
    local base = data(row.shape, row.n)
    local gdal_out = base .. ".ogr2ogr.gpkg"
    local o_secs, o_rss, o_size = common.ogr2ogr(base .. ".featureset.json", gdal_out, row.n)
    os.remove(gdal_out)
    local r = clients(base, row.n, row.attachments)
    local speed = o_secs / r.lua_secs
    local label = ("%d"):format(row.n)
    if row.attachments then -- ogr2ogr converts the features only: no time or size to set beside them
      print(("%-32s %8d | %7.2fs %4.1f MiB | %7.2fs %4.1f MiB | %7.2fs %4.0f MiB %7s | %8.1f %7.1f %7s"):format(
        row.label, row.n, r.lua_secs, r.lua_rss / 1024, r.cli_secs, r.cli_rss / 1024, o_secs, o_rss / 1024, "-",
        r.size / 1048576, o_size / 1048576, "-"))
      record("shape_attachments_rss", ("Lua %.1f, CLI %.1f MiB (%s features, %d MiB fetched)"):format(
        r.lua_rss / 1024, r.cli_rss / 1024, label, 5 * row.n), "<= 64 MiB + one attachment (1 MiB)")
    else
      print(("%-32s %8d | %7.2fs %4.1f MiB | %7.2fs %4.1f MiB | %7.2fs %4.0f MiB %6.2fx | %8.1f %7.1f %6.3fx"):format(
        row.label, row.n, r.lua_secs, r.lua_rss / 1024, r.cli_secs, r.cli_rss / 1024, o_secs, o_rss / 1024, speed,
        r.size / 1048576, o_size / 1048576, r.size / o_size))
      record("shape_" .. row.shape .. "_rss", ("Lua %.1f, CLI %.1f MiB (%s)"):format(r.lua_rss / 1024,
        r.cli_rss / 1024, label), "<= 64 MiB")
      record("shape_" .. row.shape .. "_speed", ("%.2fx (%s)"):format(speed, label),
        row.speed and (">= %dx ogr2ogr"):format(row.speed) or "(none)")
      record("shape_" .. row.shape .. "_size", ("%.3fx (%s)"):format(r.size / o_size, label),
        "<= 1.25x ogr2ogr's file")
    end
    io.stdout:flush()
  end
end
print("(targets: peak RSS <= 64 MiB, Lua and CLI (attachments: plus one); >= 4x ogr2ogr's time for points, >= 3x "
  .. "for polygons and wide rows; file <= 1.25x ogr2ogr's; attachments: ogr2ogr converts the features only)")

-- Scaling: the Lua API's time per feature (points, sequential GlobalIDs) at each size.
if only and not only.points_seq then return end
print()
print("Scaling (points, sequential GlobalIDs, the Lua API through HTTP): time per feature")
local first
for _, n in ipairs(sizes) do
  local r = clients(data("points_seq", n), n)
  local per = r.lua_secs / n * 1e6
  first = first or per
  print(("  %9d features  %8.3f s  %6.2f us/feature  %5.2fx the smallest's  (peak RSS Lua %.1f, CLI %.1f MiB)")
    :format(n, r.lua_secs, per, per / first, r.lua_rss / 1024, r.cli_rss / 1024))
  io.stdout:flush()
  if n == S and #sizes > 1 then
    record("shape_scaling", ("%.2fx (%d vs %d)"):format(per / first, n, sizes[1]), "<= 1.5x the smallest size's")
  end
end
print("(target: the time per feature at the largest size within 1.5x of the smallest's)")
