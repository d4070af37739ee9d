-- `make bench`, the parse comparison (issue 17): the streaming parse into
-- Lua tables (core.records(), the file read with rec:read_all: the worker
-- thread reads and parses while this one builds the records; every record
-- walked)
-- against cjson.decode of the whole document plus the same walk, measured
-- inside one process for both sides alike: after the interpreter has
-- started and the modules are loaded (both timed apart), BENCH_REPS rounds
-- (by size: 9 at 10k, 5 at 100k, 3 at 1M) alternate the two sides, each
-- after a full collection, and the minimum and the median of each side are
-- kept. The peak RSS of the streaming parse comes from a process that runs
-- only it (spec/bench/parse_one.lua). A benchmark: it prints, never fails
-- on speed.
--   lua5.4 spec/bench/parse.lua N...           the table, one process per size
--   lua5.4 spec/bench/parse.lua --one FILE R   one size (prints a result line)
-- BENCH_DIR: where the generated files are (made by spec/bench/generate.lua).
local clock = os.clock
local t_start = clock() -- CPU seconds of the interpreter so far (its start-up)
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("BUILD") or "build") .. "/?.so;" .. package.cpath
local common = require "spec.bench.common"

-- children find the same modules
local lua = ("LUA_PATH='%s' LUA_CPATH='%s' %s"):format(package.path, package.cpath, os.getenv("LUA") or "lua5.4")
local dir = os.getenv("BENCH_DIR") or "build/bench"

local median, min = common.median, common.min

-- One size, in this process ---------------------------------------------------

local function one(path, reps)
  local r0 = clock()
  local core = require "geoservices.core"
  local cjson = require "cjson"
  local require_cpu = clock() - r0
  local now = core.monotonic

  local walk = common.walk -- the same walk for both sides

  local records = 0
  local function on_record(kind, _, value)
    if kind == "add" or kind == "update" then
      records = records + 1
      walk(value)
    end
  end

  local bytes = 0
  local function stream()
    local f = assert(io.open(path, "rb"))
    local rec = core.records()
    bytes = assert(rec:read_all(f, on_record)) -- the worker reads and parses, this thread builds the records
    f:close()
    assert(rec:finish())
    rec:drain(on_record)
    rec:close()
  end

  local function with_cjson()
    local f = assert(io.open(path, "rb"))
    local text = f:read("a")
    f:close()
    local doc = cjson.decode(text)
    text = nil -- luacheck: ignore
    for _, layer in ipairs(doc.edits) do
      for _, list in ipairs{ layer.features.adds, layer.features.updates } do
        for _, record in ipairs(list) do
          records = records + 1
          walk(record)
        end
      end
    end
  end

  local function timed(fn)
    collectgarbage()
    collectgarbage()
    records = 0
    local t0 = now()
    fn()
    return now() - t0, records
  end

  local s, c = {}, {}
  local n_stream, n_cjson
  for round = 1, reps do
    -- alternate which side goes first, so neither always follows the other's garbage
    if round % 2 == 1 then
      s[round], n_stream = timed(stream)
      c[round], n_cjson = timed(with_cjson)
    else
      c[round], n_cjson = timed(with_cjson)
      s[round], n_stream = timed(stream)
    end
  end
  assert(n_stream == n_cjson, "record counts differ")
  print(("one %d %d %.6f %.6f %.6f %.6f %.6f %.6f"):format(bytes, n_stream, min(s), median(s), min(c), median(c),
    t_start, require_cpu))
end

if arg[1] == "--one" then
  one(arg[2], tonumber(arg[3]))
  return
end

-- The table: one process per size ------------------------------------------

local run = common.run

local function file_for(n)
  local path = ("%s/sync_%d.json"):format(dir, n)
  local f = io.open(path)
  if f then f:close() else run(("%s spec/bench/generate.lua %d %s"):format(lua, n, path)) end
  return path
end

local sizes = {}
for i = 1, #arg do sizes[#sizes + 1] = assert(tonumber(arg[i]), "sizes are numbers") end
if #sizes == 0 then sizes = { 10000, 100000, 1000000 } end

-- The interpreter's own start, apart: spawning lua5.4 that does nothing.
local function spawn_ms()
  local core = require "geoservices.core"
  local times = {}
  for i = 1, 5 do
    local t0 = core.monotonic()
    run((os.getenv("LUA") or "lua5.4") .. " -e ''")
    times[i] = (core.monotonic() - t0) * 1000
  end
  return median(times)
end

local results = os.getenv("BENCH_RESULTS") -- where the summary rows go (spec/bench/summary.lua)
local function result(key, value, target)
  if not results then return end
  local f = assert(io.open(results, "a"))
  f:write(key, "\t", value, "\t", target, "\n")
  f:close()
end

print("Streaming parse into Lua tables (every record walked) vs cjson.decode of the whole document + the same walk,")
print("in one process for both sides; rounds alternate the sides, each after a full collection")
print(("%-9s %6s %5s | %-15s %7s | %-15s | %-13s | %9s | %s"):format("records", "MB", "rounds", "stream s min/med",
  "MB/s", "cjson s min/med", "speedup m/med", "peak RSS", "target"))
local rss_seen, start_ms, require_ms = {}, nil, nil
for _, n in ipairs(sizes) do
  local path = file_for(n)
  local reps = tonumber(os.getenv("BENCH_REPS")) or (n >= 1000000 and 3 or n >= 100000 and 5 or 9)
  local line = run(("%s spec/bench/parse.lua --one %s %d"):format(lua, path, reps))
  local bytes, records, s_min, s_med, c_min, c_med, start_cpu, req_cpu = line:match(
    "one (%d+) (%d+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)")
  assert(bytes, "unexpected output: " .. line)
  bytes, records = tonumber(bytes), tonumber(records)
  s_min, s_med, c_min, c_med = tonumber(s_min), tonumber(s_med), tonumber(c_min), tonumber(c_med)
  assert(records == n, "record count")
  start_ms, require_ms = tonumber(start_cpu) * 1000, tonumber(req_cpu) * 1000
  -- peak RSS: the streaming parse alone, in its own process
  local rss_line = run(("%s spec/bench/parse_one.lua stream %s"):format(lua, path))
  local rss = tonumber(rss_line:match("^stream %S+ %d+ %d+ (%d+)")) / 1024
  rss_seen[#rss_seen + 1] = rss
  local mb = bytes / 1e6
  local speed = c_med / s_med
  local target = n >= 1000000 and ">= 4x and >= 250 MB/s" or ">= 2.5x"
  print(("%-9d %6.1f %5d | %6.3f / %6.3f %7.0f | %6.3f / %6.3f | %5.2fx/%5.2fx | %5.1f MiB | %s"):format(n, mb,
    reps, s_min, s_med, mb / s_med, c_min, c_med, c_min / s_min, speed, rss, target))
  local label = n >= 1000000 and ("%dM"):format(n // 1000000) or ("%dk"):format(n // 1000)
  if n >= 1000000 then
    result("parse_" .. label, ("%.2fx (%.0f MB/s)"):format(speed, mb / s_med), ">= 4x and >= 250 MB/s")
  else
    result("parse_" .. label, ("%.2fx"):format(speed), ">= 2.5x")
  end
end
local lo, hi = min(rss_seen), 0
for _, r in ipairs(rss_seen) do hi = math.max(hi, r) end
print(("speedup: cjson's time / the stream's, by the minimum / by the median (the median is the row's figure);"
  .. " MB/s of the stream's median"))
print(("peak RSS of the streaming parse %.1f-%.1f MiB from %d to %d records (target <= 32 MiB, flat)"):format(lo, hi,
  sizes[1], sizes[#sizes]))
print(("not in the figures: starting %s %.1f ms (spawn to exit, median of 5), and in the measuring process its"
  .. " start-up %.1f ms CPU and require of geoservices.core + cjson %.1f ms CPU"):format(lua, spawn_ms(),
  start_ms or 0, require_ms or 0):gsub("LUA_PATH=%S+ LUA_CPATH=%S+ ", "") .. "")
result("parse_rss", ("%.1f-%.1f MiB"):format(lo, hi), "<= 32 MiB flat")
