-- `make bench`: prints one table of measurements taken in this run. Each
-- measurement runs in its own process so that its peak RSS is its own.
-- A benchmark, not a test: it prints, it does not fail on speed.
local common = require "spec.bench.common"
local sizes = { 10000, 100000, 1000000 }
if os.getenv("BENCH_SIZES") then
  sizes = {}
  for s in os.getenv("BENCH_SIZES"):gmatch("%d+") do sizes[#sizes + 1] = tonumber(s) end
end
local dir = os.getenv("BENCH_DIR") or "build/bench"
local lua = os.getenv("LUA") or "lua5.4"
os.execute("mkdir -p " .. dir)

local run = common.run

local function measure(method, target)
  local line = run(("%s spec/bench/parse_one.lua %s %s"):format(lua, method, target))
  local m, secs, bytes, records, rss = line:match("^(%S+) (%S+) (%d+) (%d+) (%d+)")
  assert(m, "unexpected output: " .. line)
  return { seconds = tonumber(secs), bytes = tonumber(bytes), records = tonumber(records), rss = tonumber(rss) }
end

local function file_for(n)
  local path = ("%s/sync_%d.json"):format(dir, n)
  local f = io.open(path)
  if f then f:close() else run(("%s spec/bench/generate.lua %d %s"):format(lua, n, path)) end
  return path
end

local function mib(kib) return kib / 1024 end

-- The parse comparison, both sides in one process (spec/bench/parse.lua);
-- the end-to-end rows below compare process with process, so the parse-only
-- time they quote is that of a process running only the stream.
local size_list = {}
for i, n in ipairs(sizes) do size_list[i] = tostring(n) end
if not os.execute(("%s spec/bench/parse.lua %s"):format(lua, table.concat(size_list, " "))) then
  error("the parse benchmark failed")
end
local last_file = file_for(sizes[#sizes])
local last_stream = measure("stream", last_file)

-- End to end: download and parse pipelined, against download only, both
-- from a local HTTP server of the emulator's HTTP layer.
local log = dir .. "/serve.log"
local url, pid = common.serve(lua, "spec/bench/serve_file.lua", last_file, log)
local ok, err = pcall(function()
  assert(url, "file server did not start")
  local e2e = measure("download", url)
  local dl = measure("download_only", url)
  print()
  print(("End to end (%d records, %.1f MB over HTTP on 127.0.0.1):"):format(e2e.records, e2e.bytes / 1e6))
  print(("  download + streaming parse  %8.3f s  peak RSS %7.1f MiB"):format(e2e.seconds, mib(e2e.rss)))
  print(("  download only               %8.3f s  peak RSS %7.1f MiB"):format(dl.seconds, mib(dl.rss)))
  print(("  parse only (from file)      %8.3f s"):format(last_stream.seconds))
  print(("  end to end / parse only     %8.2fx   (target <= 1.2x)"):format(e2e.seconds / last_stream.seconds))
end)
os.execute("kill " .. pid)
if not ok then error(err) end

local form = run(("%s spec/bench/form_encode.lua 100000"):format(lua))
local n, bytes, c_time, lua_time = form:match("form (%d+) (%d+) (%S+) (%S+)")
print()
print(("Form encoding of %s features' edits (%.1f MB of JSON):"):format(n, tonumber(bytes) / 1e6))
print(("  C lookup-table encoder %8.3f s   pure-Lua gsub encoder %8.3f s   ratio %.1fx (target >= 20x)"):format(
  tonumber(c_time), tonumber(lua_time), tonumber(lua_time) / tonumber(c_time)))

-- The replica store (issue 15): a result's records applied into a GeoPackage
-- beside ogr2ogr converting the same features (its own table; same files).
print()
local store_sizes = {}
for i, size in ipairs(sizes) do store_sizes[i] = tostring(size) end
if not os.execute(("%s spec/bench/store.lua %s %s"):format(lua, dir, table.concat(store_sizes, " "))) then
  error("the store benchmark failed")
end

-- createReplica -> store (issue 28): both key orders, beside ogr2ogr (time, file size)
print()
if not os.execute(("%s spec/bench/store_key_order.lua %s %s"):format(lua, dir, table.concat(store_sizes, " "))) then
  error("the createReplica -> store benchmark failed")
end

-- createReplica -> store by data shape (issue 38): sequential GlobalIDs, polygons, wide rows, long
-- texts, by the Lua API and the CLI beside ogr2ogr; the time per feature at each size
print()
if not os.execute(("%s spec/bench/shapes.lua %s %s"):format(lua, dir, table.concat(store_sizes, " "))) then
  error("the data-shape benchmark failed")
end

-- The photo-link scan at each store open and sync (issue 37): attachments of 4-12 KiB, up to
-- 100,000 of them (about 1 GB), with and without the index of the photos not linked yet
print()
local photo_sizes = {}
for _, size in ipairs(sizes) do if size <= 100000 then photo_sizes[#photo_sizes + 1] = tostring(size) end end
if #photo_sizes > 0 and not os.execute(("BENCH_PHOTO_KB=8 %s spec/bench/link_orphans.lua %s %s"):format(lua, dir,
  table.concat(photo_sizes, " "))) then
  error("the photo-link benchmark failed")
end
