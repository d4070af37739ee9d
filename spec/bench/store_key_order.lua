-- The replica store made from a createReplica result whose layer entries
-- write their "id" before their features, then after them (issue 28): the
-- client's time (store.create_from from the downloaded file) and peak RSS,
-- each store in its own process.
--   lua5.4 spec/bench/store_key_order.lua BENCH_DIR SIZE...
-- Target: peak RSS <= 64 MiB in both orders at every size.
local common = require "spec.bench.common"

local dir = arg[1]
local sizes = {}
for i = 2, #arg do sizes[#sizes + 1] = tonumber(arg[i]) end
local lua = os.getenv("LUA") or "lua5.4"

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function result_file(n, order)
  local path = ("%s/replica_%d_%s.json"):format(dir, n, order)
  if not exists(path) then
    common.run(("%s spec/bench/generate_replica.lua %d %s %s.tmp && mv %s.tmp %s"):format(lua, n, order, path, path,
      path))
  end
  return path
end

local function create(source, n)
  local out = ("%s/key_order_%d.gpkg"):format(dir, n)
  local line = common.run(("%s spec/bench/store_create_one.lua %s %s"):format(lua, source, out))
  local size = common.run("stat -c %s " .. out)
  os.remove(out)
  local secs, records, rss = line:match("^create (%S+) (%d+) (%d+)")
  assert(secs and tonumber(records) == n, "unexpected output: " .. line)
  return tonumber(secs), tonumber(rss), tonumber(size)
end

print("Replica store from a createReplica result (one layer of points), its id before or after its features")
print(("%-9s | %-5s | %9s %10s %10s | %9s"):format("records", "id", "client s", "records/s", "peak RSS", "file MiB"))
for _, n in ipairs(sizes) do
  for _, order in ipairs{ "first", "last" } do
    local secs, rss, size = create(result_file(n, order), n)
    print(("%-9d | %-5s | %9.3f %10.0f %6.1f MiB | %9.1f"):format(n, order, secs, n / secs, rss / 1024,
      size / 1048576))
    io.stdout:flush()
  end
end
print("(target: peak RSS <= 64 MiB with the id first and last)")
