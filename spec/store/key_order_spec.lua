-- The replica store's memory does not depend on where a layer entry's "id"
-- comes (issue 28): a createReplica result may write it after the layer's
-- features (the emulator's encoder does, and the vendor documents no key
-- order), and the store then keeps the records waiting on disk, not in
-- memory. Each store is made in a process of its own, whose peak RSS is its
-- own (spec/bench/store_create_one.lua, as `make bench` measures it).
local helper = require "spec.helper"

local q = helper.shell_quote
local RECORDS = 200000
local LIMIT_KIB = 64 * 1024

local run = helper.run_shell

local function lua(script, ...)
  local args = {}
  for i, a in ipairs{ ... } do args[i] = q(tostring(a)) end
  return run(("LUA_PATH=%s LUA_CPATH=%s lua5.4 %s %s"):format(q(package.path), q(package.cpath), q(script),
    table.concat(args, " ")))
end

-- What the store holds, summed up: the same rows give the same line.
local function summary(path)
  local out, ok = run(("sqlite3 %s %s"):format(q(path), q("SELECT count(*), sum(OBJECTID), count(DISTINCT GlobalID), "
    .. "sum(length(DESCRIPTION)), sum(F11), min(UPDATED), max(UPDATED), sum(ST_MinX(geom) IS NULL) "
    .. "FROM parcels_0")))
  if not ok then -- the sqlite3 shell lacks our ST_ functions: the R-tree's count instead
    out, ok = run(("sqlite3 %s %s"):format(q(path), q("SELECT count(*), sum(OBJECTID), count(DISTINCT GlobalID), "
      .. "sum(length(DESCRIPTION)), sum(F11), min(UPDATED), max(UPDATED), "
      .. "(SELECT count(*) FROM rtree_parcels_0_geom) FROM parcels_0")))
  end
  assert(ok, out)
  return out
end

describe("the replica store's memory whatever a layer's key order (issue 28)", function()
  local dir

  setup(function()
    dir = helper.tmp_dir()
    for _, order in ipairs{ "first", "last" } do
      local out, ok = lua("spec/bench/generate_replica.lua", RECORDS, order, ("%s/%s.json"):format(dir, order))
      assert(ok, out)
    end
  end)

  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  it("stays under 64 MiB with a layer's id after its 200k features, as before them, and stores the same"
    .. " #rss", function()
    local peak, rows = {}, {}
    for _, order in ipairs{ "first", "last" } do
      local out, ok = lua("spec/bench/store_create_one.lua", ("%s/%s.json"):format(dir, order),
        ("%s/%s.gpkg"):format(dir, order))
      assert(ok, out)
      local n, kib, counted = out:match("^create %S+ (%d+) (%d+) (%d+)")
      assert(n, out)
      assert.equal(RECORDS, tonumber(n))
      peak[order] = tonumber(kib)
      -- the fill's progress counts records as the file goes, waiting ones included
      assert.is_true(tonumber(counted) > 0, order .. ": no progress report counted a record before the end")
      rows[order] = summary(("%s/%s.gpkg"):format(dir, order))
    end
    assert.is_true(peak.first < LIMIT_KIB, ("id first: peak RSS %d KiB"):format(peak.first))
    assert.is_true(peak.last < LIMIT_KIB, ("id last: peak RSS %d KiB"):format(peak.last))
    assert.equal(rows.first, rows.last)
    assert.truthy(rows.last:find("^" .. RECORDS .. "|"), rows.last)
    -- the records that waited were kept in a file beside the store, gone once it was made
    local listing = run("ls -A " .. q(dir))
    assert.equal("first.gpkg\nfirst.json\nlast.gpkg\nlast.json\n", listing)
  end)

  it("stays under 64 MiB through createReplica, the download and the fill, with the id last #rss", function()
    -- a server answering createReplica with the file (spec/bench/serve_replica.lua); the
    -- download counts the records it saves: an id-last layer waits as a count there
    local log = dir .. "/serve.log"
    local pid = run(("LUA_PATH=%s LUA_CPATH=%s lua5.4 spec/bench/serve_replica.lua %s > %s 2>&1 & echo $!"):format(
      q(package.path), q(package.cpath), q(dir .. "/last.json"), q(log))):match("%d+")
    local ok, err = pcall(function()
      local url = helper.wait_for("the replica server", function()
        local f = io.open(log)
        local text = f and f:read("a")
        if f then f:close() end
        return text and text:match("serving on (%S+)")
      end, 10)
      local out, done = lua("spec/bench/store_download_one.lua", url, dir .. "/downloaded.gpkg")
      assert(done, out)
      local n, kib = out:match("^download_create %S+ (%d+) (%d+)")
      assert.equal(RECORDS, tonumber(n), out)
      assert.is_true(tonumber(kib) < LIMIT_KIB, ("peak RSS %s KiB"):format(kib))
      assert.equal(summary(dir .. "/last.gpkg"), summary(dir .. "/downloaded.gpkg"))
    end)
    os.execute("kill " .. pid)
    os.remove(dir .. "/downloaded.gpkg")
    os.remove(log)
    assert(ok, err)
  end)
end)

describe("a store made from the emulator with a layer's id first or last (issue 28)", function()
  local geoservices = require "geoservices"
  local emu, dir

  local world = helper.store_world()
  setup(function()
    world.start()
    emu, dir = world.emu, world.dir
  end)
  teardown(world.stop)

  -- the rows of a store's Parcels table, in GlobalID order
  local function rows_of(st)
    local out = {}
    for _, r in ipairs(st.db:rows("SELECT GlobalID, OBJECTID, APN, hex(geom) AS g FROM Parcels ORDER BY GlobalID")) do
      out[#out + 1] = table.concat({ r.GlobalID, r.OBJECTID, r.APN, r.g }, "|")
    end
    return out
  end

  for _, transport in ipairs{ "esriTransportTypeUrl", "esriTransportTypeEmbedded" } do
    it("stores the same features whichever comes first, " .. transport, function()
      local stored = {}
      for _, position in ipairs{ "first", "last" } do
        emu:control("settings", { layer_id_position = position })
        local c = geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 }
        -- what the server wrote: the id before the features, or after them
        -- (curl without `make asan`'s preloaded runtime, which hangs it at start-up)
        local text = run(("env -u LD_PRELOAD curl -s %s -d f=json -d layers=0 -d replicaName=look-%s "
          .. "-d transportType=%s -d returnAttachments=false -d syncModel=perReplica -d dataFormat=json "
          .. "-d token=alice-token")
          :format(q(emu.url .. "/Parcels/FeatureServer/createReplica"), position, transport))
        if transport == "esriTransportTypeUrl" then
          local url = assert(text:match('"responseUrl":"([^"]+)"'), text)
          text = run(("env -u LD_PRELOAD curl -s %s"):format(q((url:gsub("\\/", "/")))))
        end
        local id_at, features_at = text:find('"id":0', 1, true), text:find('"features":', 1, true)
        assert.truthy(id_at and features_at, text:sub(1, 200))
        assert.equal(position == "first", id_at < features_at, text:sub(1, 200))

        local st = assert(geoservices.store.create(c, ("%s/%s-%s.gpkg"):format(dir, transport, position),
          { service = "Parcels", layers = { 0 }, replicaName = position, syncModel = "perReplica",
            transportType = transport }, { timeout = 30 }))
        stored[position] = rows_of(st)
        st:close()
      end
      emu:control("settings", { layer_id_position = require("geoservices.base.json").null })
      assert.is_true(#stored.first >= 3, tostring(#stored.first))
      assert.same(stored.first, stored.last)
    end)
  end
end)

