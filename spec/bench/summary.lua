-- `make bench`, last: the rows of issues 17, 28 and 38 measured in this run, each beside
-- its target, from the lines spec/bench/parse.lua and spec/bench/requests.lua
-- appended to BENCH_RESULTS (key, value, target). Prints; judges nothing.
local path = assert(os.getenv("BENCH_RESULTS"), "BENCH_RESULTS is not set")
local rows = {
  { "parse_10k", "streaming parse into Lua tables vs cjson.decode + the same walk, 10k records" },
  { "parse_100k", "the same, 100k records" },
  { "parse_1M", "the same, 1M records" },
  { "requests_api", "client:get_services_by_id (decoded), 1,000 requests on one connection,"
    .. " vs a plain C libcurl loop" },
  { "requests_task", "the same inside geoservices.run" },
  { "requests_raw", "transport.perform vs the C loop" },
  { "requests_core", "for reference: the core alone (driver:perform of the client's request, decoded in C)" },
  { "requests_floor", "for reference: driver:perform + the answer built by Lua's own table constructor (no parse)" },
  { "parse_rss", "peak RSS of the streaming parse, 10k to 1M" },
  { "replica_rss_first", "issue 28: createReplica -> store, client peak RSS, id first" },
  { "replica_rss_last", "the same, id last" },
  { "replica_speed_first", "client time (download + fill) vs ogr2ogr of the same data, id first" },
  { "replica_speed_last", "the same, id last" },
  { "replica_size_first", "the store's file vs ogr2ogr's GeoPackage, id first" },
  { "replica_size_last", "the same, id last" },
  { "shape_points_seq_rss", "issue 38: points with sequential GlobalIDs, client peak RSS" },
  { "shape_points_seq_speed", "the same, client time vs ogr2ogr" },
  { "shape_points_seq_size", "the same, the store's file vs ogr2ogr's" },
  { "shape_polygons_rss", "polygons of ~200 vertices with a hole, client peak RSS" },
  { "shape_polygons_speed", "the same, client time vs ogr2ogr" },
  { "shape_polygons_size", "the same, the store's file vs ogr2ogr's" },
  { "shape_wide_rss", "rows of 100 fields, client peak RSS" },
  { "shape_wide_speed", "the same, client time vs ogr2ogr" },
  { "shape_wide_size", "the same, the store's file vs ogr2ogr's" },
  { "shape_texts_rss", "rows with a 10 KB text, client peak RSS" },
  { "shape_texts_speed", "the same, client time vs ogr2ogr" },
  { "shape_texts_size", "the same, the store's file vs ogr2ogr's" },
  { "shape_attachments_rss", "features with 5 attachments of 1 MiB each, client peak RSS" },
  { "shape_scaling", "time per feature at the largest size vs the smallest (points, sequential GlobalIDs)" },
}
local got = {}
local f = io.open(path)
if f then
  for line in f:lines() do
    local key, value, target = line:match("^([^\t]+)\t([^\t]*)\t(.*)$")
    if key then got[key] = { value, target } end
  end
  f:close()
end
local w, nw = 0, 22
for _, r in ipairs(rows) do
  w = math.max(w, #r[2])
  if got[r[1]] then nw = math.max(nw, #got[r[1]][1]) end
end
print("Issues 17, 28 and 38, this run:")
print(("  %-" .. w .. "s  %-" .. nw .. "s  %s"):format("measure", "now", "target"))
for _, r in ipairs(rows) do
  local g = got[r[1]]
  print(("  %-" .. w .. "s  %-" .. nw .. "s  %s"):format(r[2], g and g[1] or "(not measured)", g and g[2] or ""))
end
