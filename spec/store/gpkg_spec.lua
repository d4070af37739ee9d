-- The replica store as a GeoPackage (issue 15): what GDAL's ogrinfo reads
-- from a store filled through the C fast path, a SIGKILL in the middle of
-- an apply, and two processes on one store.
local core = require "geoservices.core"
local data = require "spec.support.store_data"
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local store = require "geoservices.store"

local q = helper.shell_quote

local run = helper.run_shell

local function read_all(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- A child lua5.4 with this process's module paths, in the background; its
-- pid. Its output goes to `log`.
local function spawn(dir, name, source, args, log)
  local script = dir .. "/" .. name
  local f = assert(io.open(script, "wb"))
  f:write(source)
  f:close()
  local quoted = {}
  for i, a in ipairs(args) do quoted[i] = q(a) end
  local cmd = ("LUA_PATH=%s LUA_CPATH=%s lua5.4 %s %s > %s 2>&1 & echo $!"):format(q(package.path),
    q(package.cpath), q(script), table.concat(quoted, " "), q(log))
  local out = run(cmd)
  return assert(tonumber(out:match("(%d+)")), out)
end

local REPLICA = {
  service = "Utilities", replicaID = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}", replicaName = "crew-1",
  syncModel = "perReplica", syncDirection = "bidirectional", replicaServerGen = 1,
}
local COUNTS = { [0] = 120, [1] = 60, [2] = 90, [3] = 150 }

-- ogrinfo -so -al, one table per layer: geometry, count, SRS text.
local function ogr_summary(path)
  local out, ok = run("ogrinfo -so -al " .. q(path))
  assert(ok, out)
  local layers = {}
  local at = out:find("Layer name: ", 1, true)
  while at do
    local next_at = out:find("\nLayer name: ", at, true)
    local block = out:sub(at + #"Layer name: ", next_at and next_at - 1 or #out)
    at = next_at and next_at + 1
    local name = block:match("^([^\n]+)")
    layers[name] = {
      geometry = block:match("\nGeometry: ([^\n]+)"),
      count = tonumber(block:match("\nFeature Count: (%d+)")),
      srs = block,
    }
  end
  return layers, out
end

describe("replica store GeoPackage", function()
  local dir, path

  setup(function()
    dir = helper.tmp_dir()
    path = dir .. "/crew-1.gpkg"
    local result = dir .. "/first.json"
    data.write_result(result, COUNTS)
    local st = assert(store.create_from(path, REPLICA, data.layers(), result))
    st:close()
  end)

  teardown(function()
    os.execute("rm -rf " .. q(dir))
  end)

  it("holds the first result: every feature, the result's generation, a log line", function()
    local st <close> = assert(store.open(path))
    for id, n in pairs(COUNTS) do assert.equal(n, st:count(id)) end
    local replica = assert(st:replica())
    assert.equal(42, replica.replicaServerGen) -- the result's, over the info's 1
    assert.equal("perReplica", replica.syncModel)
    assert.equal("{5E1A0C2B-1111-4A5B-9C8D-000000000001}", replica.replicaID)
    local log = assert(st.db:rows("SELECT * FROM geoservices_sync_log"))
    assert.equal(1, #log)
    assert.equal("create", log[1].operation)
    assert.equal(420, log[1].downloaded)
    assert.same({ { application_id = 0x47504B47 } }, st.db:rows("PRAGMA application_id"))
    assert.same({ { user_version = 10300 } }, st.db:rows("PRAGMA user_version"))
    assert.same({ { integrity_check = "ok" } }, st.db:rows("PRAGMA integrity_check"))
    assert.same({ { freelist_count = 0 } }, st.db:rows("PRAGMA freelist_count")) -- no garbage left behind
    for _, t in ipairs{ "Hydrants", "Survey_marks", "Pipes", "Parcels" } do
      assert.same({ { ["rtreecheck('rtree_" .. t .. "_geom')"] = "ok" } },
        st.db:rows(("SELECT rtreecheck('rtree_%s_geom')"):format(t)))
    end
  end)

  it("is read by ogrinfo: every layer with its geometry type, SRS and feature count", function()
    local layers, out = ogr_summary(path)
    local expected = {
      Hydrants = { "Point", 120, 'ID%["EPSG",3857%]' },
      Survey_marks = { "Multi Point", 60, 'ID%["EPSG",4326%]' },
      Pipes = { "Multi Line String", 90, 'ID%["EPSG",2227%]' },
      Parcels = { "Multi Polygon", 150, 'ID%["EPSG",3857%]' },
    }
    for name, e in pairs(expected) do
      local l = layers[name]
      assert(l, "no layer " .. name .. " in:\n" .. out)
      assert.equal(e[1], l.geometry, name)
      assert.equal(e[2], l.count, name)
      assert.truthy(l.srs:find(e[3]), name .. " SRS:\n" .. l.srs)
      assert.truthy(l.srs:find("FID Column = fid", 1, true), name) -- local; the OBJECTID a field
      assert.truthy(l.srs:find("OBJECTID: Integer", 1, true), name)
      assert.truthy(l.srs:find("UPDATED: DateTime", 1, true), name)
    end
    -- the feature layers, the sync log, the conflicts and their fields, the views of the pending and refused
    -- edits, the layers' default styles (QGIS's own table, which GDAL lists as it does in any GeoPackage
    -- QGIS styled, and QGIS's browser hides), none of our internal tables
    local names = {}
    for name in pairs(layers) do names[#names + 1] = name end
    table.sort(names)
    assert.same({ "Hydrants", "Parcels", "Pipes", "Survey_marks", "geoservices_conflict_fields",
                  "geoservices_conflicts", "geoservices_pending", "geoservices_rejected", "geoservices_sync_log",
                  "layer_styles" }, names)
    assert.falsy(out:find("ERROR", 1, true), out)
    assert.falsy(out:find("Warning", 1, true), out)
  end)

  -- every polygon and polyline is MULTI, one part or more (the column's type:
  -- GeoPackage requirement 32, see csrc/store/geom.h)
  it("gives ogrinfo the polygon with a hole, the two-part polygon and the polylines as the expected WKT", function()
    local function wkt(layer, where)
      local out, ok = run(("ogrinfo -q -al -where %s %s %s"):format(q(where), q(path), q(layer)))
      assert(ok, out)
      assert.falsy(out:find("ERROR", 1, true), out)
      local GEOMETRY = { POINT = true, MULTIPOINT = true, LINESTRING = true, MULTILINESTRING = true,
                         POLYGON = true, MULTIPOLYGON = true }
      for line in out:gmatch("[^\n]+") do
        local text, keyword = line:match("^%s+((%u+) %(.*)$")
        if text and GEOMETRY[keyword] then return text end
      end
    end
    -- i = 1: square(-12999000, 4000000, 500) with hole(+100, +100, 200), rings as the server sent them
    assert.equal("MULTIPOLYGON (((-12999000 4000000,-12999000 4000500,-12998500 4000500,-12998500 4000000,"
      .. "-12999000 4000000),(-12998900 4000100,-12998700 4000100,-12998700 4000300,-12998900 4000300,"
      .. "-12998900 4000100)))", wkt("Parcels", "NAME = 'hole 1'"))
    -- i = 2: two clockwise rings, two polygons
    assert.equal("MULTIPOLYGON (((-12998000 4000000,-12998000 4000300,-12997700 4000300,-12997700 4000000,"
      .. "-12998000 4000000)),((-12997400 4000600,-12997400 4000900,-12997100 4000900,-12997100 4000600,"
      .. "-12997400 4000600)))", wkt("Parcels", "NAME = 'multi 2'"))
    assert.equal("MULTIPOLYGON (((-12997000 4000000,-12997000 4000500,-12996500 4000500,-12996500 4000000,"
      .. "-12997000 4000000)))", wkt("Parcels", "NAME = 'square 3'"))
    assert.equal("MULTILINESTRING ((6000100 2000100,6000150 2000120,6000190 2000100))", wkt("Pipes", "OBJECTID = 1"))
    assert.equal("MULTILINESTRING ((6000200 2000200,6000240 2000240),(6000260 2000200,6000290 2000230))",
      wkt("Pipes", "OBJECTID = 2"))
    assert.equal("MULTIPOINT ((-119.99 35.0),(-119.989 35.002),(-119.987 35.0))", wkt("Survey_marks", "OBJECTID = 1"))
    assert.equal("POINT (-12999989.5 4000000.25)", wkt("Hydrants", "OBJECTID = 1"))
  end)

  it("has a working R-tree: a spatial filter in ogrinfo finds what the extents say", function()
    -- parcels 1..150 lie on a 100 x 2 grid of 1000 m cells from (-13000000, 4000000)
    local out, ok = run(("ogrinfo -so -spat -13000000 4000000 -12995001 4000999 %s Parcels"):format(q(path)))
    assert(ok, out)
    assert.equal(4, tonumber(out:match("Feature Count: (%d+)")), out) -- 1..4 (5 starts at the edge, 100 above)
    local st <close> = assert(store.open(path))
    assert.same({ { n = 150 } }, st.db:rows('SELECT count(*) AS n FROM "rtree_Parcels_geom"'))
    local c = st.db:rows("SELECT min_x, max_y FROM gpkg_contents WHERE table_name = 'Parcels'")[1]
    assert.equal(-13000000, c.min_x) -- i = 100
    assert.equal(4000000 + 1000 + 900, c.max_y) -- the second part of "multi 101"
  end)

  it("keeps dates as ISO 8601 text and gives the server's values back through store:get", function()
    local st <close> = assert(store.open(path))
    assert.same({ { UPDATED = "2023-11-14T22:13:21.000Z", REF = "{AAAAAAAA-0000-4000-8000-000000000001}" } },
      st.db:rows('SELECT UPDATED, REF FROM "Hydrants" WHERE OBJECTID = 1'))
    local f = assert(st:get(3, data.gid(3, 1)))
    local want = data.feature(3, 1)
    assert.same(want.attributes, f.attributes)
    assert.same(want.geometry, json.decode(json.encode(f.geometry)))
    assert.equal("integer", math.type(f.attributes.UPDATED))
    f = assert(st:get(2, data.gid(2, 2):lower():sub(2, -2))) -- any spelling of the GlobalID
    assert.same(data.geometry(2, 2), json.decode(json.encode(f.geometry)))
  end)

  it("applies updates and deletes through the C path in one transaction", function()
    local copy = dir .. "/apply.gpkg"
    assert(os.execute(("cp %s %s"):format(q(path), q(copy))))
    local st <close> = assert(store.open(copy))
    local rec = core.records()
    local doc = json.encode{ replicaServerGen = 43, edits = { {
      id = 3,
      features = {
        updates = { { attributes = { OBJECTID = 2, GlobalID = data.gid(3, 2), NAME = "changed" },
                      geometry = data.geometry(3, 1) } },
        deleteIds = { data.gid(3, 3), data.gid(3, 4) },
      },
    } } }
    assert(rec:feed(doc))
    assert(rec:finish())
    local fields = {}
    local applied, delivered = assert(st:transaction(function(s)
      local n, d = s:apply(rec, function(kind, _, value, key) if kind == "field" then fields[key] = value end end)
      if not n then return nil, d end
      assert(s:set_generations(fields))
      return n, d
    end))
    assert.equal(3, applied)
    assert.equal(1, delivered)
    assert.equal(148, st:count(3))
    assert.equal("changed", st:get(3, data.gid(3, 2)).attributes.NAME)
    assert.equal(43, st:generations().replicaServerGen)
    assert.same({ { n = 148 } }, st.db:rows('SELECT count(*) AS n FROM "rtree_Parcels_geom"'))
    local out = run(("ogrinfo -q -al -where \"NAME = 'changed'\" %s Parcels"):format(q(copy)))
    assert.truthy(out:find("MULTIPOLYGON (((-12999000 4000000,", 1, true), out)
  end)

  it("is left as it was by a process killed (SIGKILL) in the middle of an apply", function()
    local big = dir .. "/big.json"
    data.write_result(big, { [0] = 6000, [3] = 6000 })
    local child = [[
      local core = require "geoservices.core"
      local store = require "geoservices.store"
      local st = assert(store.open(arg[1]))
      assert(st.db:exec("PRAGMA cache_size = 20")) -- spill pages into the file early
      assert(st.db:begin())
      local marked = false
      while true do -- the same result again and again: always inside the transaction
        local f = assert(io.open(arg[2], "rb"))
        local rec = core.records()
        while true do
          local chunk = f:read(8192)
          if not chunk then break end
          assert(rec:feed(chunk))
          assert(st:apply(rec))
          if not marked then
            marked = true
            local m = assert(io.open(arg[3], "w"))
            m:write("applying\n")
            m:close()
          end
        end
        f:close()
      end
    ]]
    for round, delay in ipairs{ 0, 0.05, 0.3, 1.0 } do
      local target = ("%s/kill-%d.gpkg"):format(dir, round)
      assert(os.execute(("cp %s %s"):format(q(path), q(target))))
      local before = read_all(target)
      local marker = ("%s/kill-%d.marker"):format(dir, round)
      local pid = spawn(dir, "killed.lua", child, { target, big, marker }, dir .. "/killed.log")
      helper.wait_for("the child to start applying", function()
        return exists(marker) or not helper.process_alive(pid)
      end)
      assert(helper.process_alive(pid), read_all(dir .. "/killed.log"))
      helper.sleep(delay)
      os.execute("kill -9 " .. pid)
      helper.wait_for("the child to die", function() return not helper.process_alive(pid) end)
      -- the store is in WAL mode: the open transaction's pages went to the
      -- WAL, never committed; the next open ignores them
      assert.truthy(exists(target .. "-wal"), "the WAL of the open transaction")
      local st = assert(store.open(target))
      for id, n in pairs(COUNTS) do assert.equal(n, st:count(id)) end
      assert.same({ { integrity_check = "ok" } }, st.db:rows("PRAGMA integrity_check"))
      st:close()
      -- closed: the WAL is gone, nothing of the killed transaction left
      assert.is_false(exists(target .. "-wal"), "round " .. round .. ": a WAL left")
      assert.equal(#before, #read_all(target), "round " .. round)
      assert.truthy(before == read_all(target), "round " .. round .. ": the file is byte for byte as it was")
      local layers = ogr_summary(target)
      assert.equal(150, layers.Parcels.count)
    end
  end)

  it("leaves no store behind a process killed while it creates one", function()
    local big = dir .. "/big-create.json"
    data.write_result(big, { [0] = 4000, [3] = 4000 })
    local target = dir .. "/never.gpkg"
    local marker = dir .. "/create.marker"
    local child = [[
      local core = require "geoservices.core"
      local store = require "geoservices.store"
      local data = require "spec.support.store_data"
      store.create_from(arg[1], { syncModel = "perReplica" }, data.layers(), function(apply)
        local marked = false
        while true do -- never done: the kill comes first
          local f = assert(io.open(arg[2], "rb"))
          local rec = core.records()
          for chunk in function() return f:read(8192) end do
            assert(rec:feed(chunk))
            assert(apply(rec))
            if not marked then
              marked = true
              local m = assert(io.open(arg[3], "w"))
              m:write("creating\n")
              m:close()
            end
          end
          f:close()
        end
      end)
    ]]
    local pid = spawn(dir, "creator.lua", child, { target, big, marker }, dir .. "/creator.log")
    helper.wait_for("the child to start creating", function()
      return exists(marker) or not helper.process_alive(pid)
    end)
    assert(helper.process_alive(pid), read_all(dir .. "/creator.log"))
    helper.sleep(0.2)
    os.execute("kill -9 " .. pid)
    helper.wait_for("the child to die", function() return not helper.process_alive(pid) end)
    assert.falsy(exists(target))
    local st = assert(store.create_from(target, REPLICA, data.layers(), big)) -- the path is still free
    assert.equal(4000, st:count(3))
    st:close()
  end)

  it("lets a second process wait a bounded time for the lock, then fail with kind busy", function()
    local target = dir .. "/shared.gpkg"
    assert(os.execute(("cp %s %s"):format(q(path), q(target))))
    local marker = dir .. "/holder.marker"
    local holder = [[
      local core = require "geoservices.core"
      local store = require "geoservices.store"
      local st = assert(store.open(arg[1]))
      assert(st:add(0, { attributes = { NAME = "held" }, geometry = { x = 1, y = 2 } }))
      assert(st.db:begin())
      assert(st.db:run('UPDATE "Hydrants" SET NAME = ? WHERE OBJECTID = 1', "holder"))
      local m = assert(io.open(arg[2], "w"))
      m:write("holding\n")
      m:close()
      -- held until the spec writes the release file (a hold for a time ends under a spec stalled
      -- that long), 60 s at most
      local drv, stop = core.driver(), core.monotonic() + 60
      while core.monotonic() < stop and not io.open(arg[3]) do drv:step(20) end
      assert(st.db:commit())
      st:close()
    ]]
    local release = dir .. "/holder.release"
    local pid = spawn(dir, "holder.lua", holder, { target, marker, release }, dir .. "/holder.log")
    helper.wait_for("the holder to take the lock", function()
      return exists(marker) or not helper.process_alive(pid)
    end)
    assert(helper.process_alive(pid), read_all(dir .. "/holder.log"))

    local st <close> = assert(store.open(target, { busy_timeout = 0.3 }))
    assert.equal(120 + 1, st:count(0)) -- reading goes on while the other writes
    local t0 = core.monotonic()
    local gid, err = st:add(0, { attributes = { NAME = "second" }, geometry = { x = 3, y = 4 } })
    local waited = core.monotonic() - t0
    assert.is_nil(gid)
    assert.equal("busy", err.kind)
    assert.truthy(tostring(err):find("locked", 1, true), tostring(err))
    -- bounded: the holder holds until told, so a wait past busy_timeout would have ended in
    -- success, not busy (a duration bound here failed whenever the machine stalled)
    assert.truthy(waited >= 0.25, "waited " .. waited .. " s")
    assert.equal(0, #st:pending() - 1) -- nothing of ours was queued (the holder's own add is there)

    -- with a longer timeout the same add waits for the holder and goes through
    local patient <close> = assert(store.open(target, { busy_timeout = 10 }))
    helper.write_file(release, "")
    gid = assert(patient:add(0, { attributes = { NAME = "second" }, geometry = { x = 3, y = 4 } }))
    helper.wait_for("the holder to exit", function() return not helper.process_alive(pid) end)
    assert.equal(120 + 2, patient:count(0))
    assert.equal("holder", patient:get(0, data.gid(0, 1)).attributes.NAME)
    assert.equal("second", patient:get(0, gid).attributes.NAME)
    assert.equal(3, #patient:pending()) -- the holder's plain SQL update was captured too
  end)
end)
