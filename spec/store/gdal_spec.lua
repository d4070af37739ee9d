-- The store is the user's dataset (issue 27, "Done when"): GDAL alone
-- (ogrinfo -sql UPDATE/DELETE/INSERT, ogr2ogr -update -append) adds,
-- renames, moves and deletes features of a store, one of them added by the
-- library and synchronized before, one added by the library and not yet
-- synchronized; `geoservices sync` uploads each edit once (the emulator's
-- own change log), a second store receives them, GDAL's validator stays
-- clean and the R-tree finds the moved feature where it went.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote

local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local PARCEL2 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}"
local PARCEL3 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E03}"

local function norm(gid) return (tostring(gid):upper():gsub("[{}]", "")) end

local run = helper.run_shell

local function gdal(cmd)
  local out, ok = run(cmd)
  assert(ok, out)
  assert.falsy(out:find("ERROR", 1, true), out)
  return out
end

local function ogr_sql(path, sql)
  return gdal(("ogrinfo -q -sql %s %s"):format(q(sql), q(path)))
end

-- GDAL's validator: nothing but its own complaint about empty geometries (see store_lossless_spec)
local validate = helper.validate_gpkg

-- The APN of the features ogrinfo finds in a box (the R-tree answers the spatial filter)
local function found_in(path, xmin, ymin, xmax, ymax)
  local out = gdal(("ogrinfo -q -spat %s %s %s %s %s Parcels"):format(xmin, ymin, xmax, ymax, q(path)))
  local apns = {}
  for apn in out:gmatch("APN %(String%) = ([^\n]+)") do apns[#apns + 1] = apn end
  table.sort(apns)
  return apns
end

describe("a store edited with GDAL", function()
  local world = helper.store_world()
  setup(world.start)
  teardown(world.stop)
  local client, create = world.client, world.create

  -- op|GlobalID -> how many times a replica's edit of it reached the server
  local function server_edits(replica_id)
    local rid, counts = norm(replica_id), {}
    for _, e in ipairs(world.emu:control("changelog?service=Parcels").entries) do
      if norm(e.origin) == rid and not e.refused then
        local k = e.op .. "|" .. norm(e.globalId)
        counts[k] = (counts[k] or 0) + 1
      end
    end
    return counts
  end

  it("uploads each edit GDAL made once, a second store receives them, the GeoPackage stays valid", function()
    local st1, st2 = create("crew-1"), create("crew-2")
    local path1, path2 = st1.path, st2.path
    local replica1 = st1:replica().replicaID
    local c = client()
    -- added by the library and synchronized; added by the library and not yet synchronized
    local synced = assert(st1:add(0, { attributes = { APN = "lib synced" }, geometry = { x = -117.3, y = 34.3 } }))
    assert(st1:sync(c))
    local unsynced = assert(st1:add(0, { attributes = { APN = "lib local" }, geometry = { x = -117.4, y = 34.4 } }))
    st1:close()

    -- GDAL alone from here: rename, move, delete, insert, append
    ogr_sql(path1, ("UPDATE Parcels SET APN = 'renamed in GDAL' WHERE GlobalID = '%s'"):format(PARCEL1))
    ogr_sql(path1, ("UPDATE Parcels SET geom = AsGPB(ST_GeomFromText('POINT(-117.5 34.5)', 4326)) "
      .. "WHERE GlobalID = '%s'"):format(PARCEL2))
    ogr_sql(path1, ("DELETE FROM Parcels WHERE GlobalID = '%s'"):format(PARCEL3))
    ogr_sql(path1, ("UPDATE Parcels SET OWNER = 'GDAL on a synced add' WHERE GlobalID = '%s'"):format(synced))
    ogr_sql(path1, ("UPDATE Parcels SET APN = 'lib local, renamed' WHERE GlobalID = '%s'"):format(unsynced))
    ogr_sql(path1, "INSERT INTO Parcels (APN, ACRES, geom) VALUES ('sql insert', 0.5, "
      .. "AsGPB(ST_GeomFromText('POINT(-117.6 34.6)', 4326)))")
    local geojson = world.dir .. "/new.geojson"
    helper.write_file(geojson, json.encode{ type = "FeatureCollection", features = {
      { type = "Feature", properties = { APN = "appended 1", ASSESSED = 1000 },
        geometry = { type = "Point", coordinates = { -117.7, 34.7 } } },
      { type = "Feature", properties = { APN = "appended 2", ASSESSED = 2000 },
        geometry = { type = "Point", coordinates = { -117.8, 34.8 } } },
    } })
    gdal(("ogr2ogr -update -append -nln Parcels %s %s"):format(q(path1), q(geojson)))
    assert.equal("", validate(path1))

    -- the command line synchronizes it
    local r = helper.run_cli{ "--url", world.emu.url, "--token", "alice-token", "sync", path1 }
    assert.equal(0, r.code, r.out .. r.err)
    local st = assert(geoservices.store.open(path1))
    assert.same({}, st:pending())
    local gids = {}
    for _, apn in ipairs{ "sql insert", "appended 1", "appended 2" } do
      local row = st.db:rows("SELECT GlobalID, OBJECTID FROM Parcels WHERE APN = ?", apn)[1]
      assert.matches("^{%x+%-%x+%-4%x+%-[89AB]%x+%-%x+}$", row.GlobalID)
      assert.is_truthy(row.OBJECTID, apn .. " got the server's OBJECTID")
      gids[apn] = row.GlobalID
    end
    st:close()

    -- each edit reached the server once, and nothing else did
    local want = {
      ["update|" .. norm(PARCEL1)] = 1, ["update|" .. norm(PARCEL2)] = 1, ["delete|" .. norm(PARCEL3)] = 1,
      ["add|" .. norm(synced)] = 1, ["update|" .. norm(synced)] = 1, ["add|" .. norm(unsynced)] = 1,
      ["add|" .. norm(gids["sql insert"])] = 1, ["add|" .. norm(gids["appended 1"])] = 1,
      ["add|" .. norm(gids["appended 2"])] = 1,
    }
    assert.same(want, server_edits(replica1))

    -- a second store receives them
    local result = assert(st2:sync(c))
    assert.same({}, result.conflicts)
    assert.equal("renamed in GDAL", st2:get(0, PARCEL1).attributes.APN)
    assert.same({ x = -117.5, y = 34.5 }, st2:get(0, PARCEL2).geometry)
    assert.is_nil(st2:get(0, PARCEL3))
    assert.equal("GDAL on a synced add", st2:get(0, synced).attributes.OWNER)
    assert.equal("lib local, renamed", st2:get(0, unsynced).attributes.APN)
    assert.equal(2000, st2:get(0, gids["appended 2"]).attributes.ASSESSED)
    assert.equal(0.5, st2:get(0, gids["sql insert"]).attributes.ACRES)
    assert.same({}, st2:pending())
    st2:close()

    -- valid GeoPackages, whose R-trees find the moved parcel where it went
    for _, p in ipairs{ path1, path2 } do
      assert.equal("", validate(p))
      assert.same({ "101-200-02" }, found_in(p, -117.51, 34.49, -117.49, 34.51))
      assert.same({ "renamed in GDAL" }, found_in(p, -117.2, 34.05, -117.19, 34.06))
    end
    -- and a second sync of the first sends nothing again
    st = assert(geoservices.store.open(path1))
    result = assert(st:sync(c))
    assert.equal(0, result.uploaded)
    assert.same(want, server_edits(replica1))
    st:close()
  end)
end)
