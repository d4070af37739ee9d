-- A geometry the store cannot represent (issue 28, bad input): a polyline
-- in a point layer, a geometry of no kind the store knows, a coordinate that
-- is not a number. It is never stored as NULL silently, nor as a blob of
-- another type than its column's: the feature's row is there, its geometry
-- column holds an empty geometry of the layer's type (or NULL), the server's
-- JSON is kept (gpkgext_geoservices_original_geometries), `st:status()` and
-- `geoservices status STORE` name it with its layer, GlobalID and reason,
-- and an attribute edit sends the server's geometry back, never a degraded one.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote

local LINE_IN_POINTS = "{AAAAAAAA-0000-4000-8000-000000000001}"
local UNKNOWN_SHAPE = "{AAAAAAAA-0000-4000-8000-000000000002}"
local NOT_A_NUMBER = "{AAAAAAAA-0000-4000-8000-000000000003}"
local EMPTY_POINT = "{AAAAAAAA-0000-4000-8000-000000000004}"
local BAD_PATH = "{BBBBBBBB-0000-4000-8000-000000000001}"

local SERVED = {
  [LINE_IN_POINTS] = { paths = { { { -117.1, 34.0 }, { -117.2, 34.1 } } } },
  [UNKNOWN_SHAPE] = { foo = { 1, 2 } },
  [NOT_A_NUMBER] = { x = "abc", y = 34.05 },
  [EMPTY_POINT] = { x = "NaN", y = "NaN" }, -- Esri's empty point: nothing lost, nothing to report
  [BAD_PATH] = { paths = { { { "a", 34.0 }, { -117.2, 34.1 }, { -117.3, 34.2 } } } },
}

-- The example world with the features above: four in Parcels (points), one in Mains (polylines).
local function world_with_bad_geometries(path)
  local data = assert(json.decode(assert(helper.read_all("examples/data/world.json"))))
  local parcels = data.featureServices.Parcels.layers[1]
  local mains = data.featureServices.Utilities.layers[1]
  local function add(layer, gid)
    local f = json.decode(json.encode(layer.features[1]))
    f.attributes.GlobalID = gid
    f.geometry = SERVED[gid]
    layer.features[#layer.features + 1] = f
  end
  for _, gid in ipairs{ LINE_IN_POINTS, UNKNOWN_SHAPE, NOT_A_NUMBER, EMPTY_POINT } do add(parcels, gid) end
  add(mains, BAD_PATH)
  helper.write_file(path, json.encode(data))
end

describe("a geometry the store cannot represent", function()
  local emu, dir

  setup(function()
    dir = helper.tmp_dir()
    world_with_bad_geometries(dir .. "/world.json")
    emu = helper.start_emulator{ data = dir .. "/world.json" }
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. q(dir))
  end)

  local function client() return geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 } end

  local function sql(path, query)
    local out = helper.run_shell(("sqlite3 -json %s %s"):format(q(path), q(query)))
    return out
  end

  local st, path
  setup(function()
    path = dir .. "/bad.gpkg"
    st = assert(geoservices.store.create(client(), path, { service = "Parcels", layers = { 0 }, replicaName = "bad",
      syncModel = "perReplica" }, { poll_interval = 0.05 }))
  end)

  it("keeps the feature's row and the server's JSON, and no blob of another type than the column's", function()
    assert.equal(7, st:count(0))
    local rows = json.decode(sql(path, "SELECT GlobalID AS gid, geom IS NULL AS null_geom, "
      .. "hex(substr(geom, 4, 1)) AS flags, hex(substr(geom, 9 + CASE (unicode(substr(geom, 4, 1)) >> 1) & 7 "
      .. "WHEN 0 THEN 0 WHEN 1 THEN 32 ELSE 48 END + 1, 1)) AS wkb_type FROM Parcels WHERE GlobalID LIKE '{AAAA%'"))
    assert.equal(4, #rows)
    for _, r in ipairs(rows) do
      -- NULL, or an empty (flags bit 0x10) point (WKB type 1): never a line in a point column
      if r.null_geom == 0 then
        assert.equal(0x10, tonumber(r.flags, 16) & 0x10, r.gid .. " holds a non-empty blob")
        assert.equal("01", r.wkb_type, r.gid .. " holds a blob of another type than POINT")
      end
    end
    local kept = {}
    for _, r in ipairs(json.decode(sql(path, "SELECT global_id, geometry FROM "
      .. "gpkgext_geoservices_original_geometries"))) do
      kept[r.global_id] = json.decode(r.geometry)
    end
    for _, gid in ipairs{ LINE_IN_POINTS, UNKNOWN_SHAPE, NOT_A_NUMBER } do
      assert.same(SERVED[gid], kept[gid], gid .. " kept as the server sent it")
    end
    assert.is_nil(kept[EMPTY_POINT])
    assert.equal("", helper.validate_gpkg(path))
  end)

  it("is named by st:status() and geoservices status with its layer, GlobalID and reason", function()
    local s = assert(st:status())
    local by_gid = {}
    for _, u in ipairs(s.unrepresentable or {}) do by_gid[u.globalId] = u end
    assert.equal(3, #(s.unrepresentable or {}))
    assert.equal("Parcels", by_gid[LINE_IN_POINTS].layer)
    assert.truthy(by_gid[LINE_IN_POINTS].reason:find("polyline in a point layer", 1, true))
    assert.truthy(by_gid[UNKNOWN_SHAPE].reason:find("foo", 1, true))
    assert.truthy(by_gid[NOT_A_NUMBER].reason:find("not a number", 1, true))
    assert.truthy(tostring(s):find("3 geometries the store cannot represent", 1, true), tostring(s))
    local out = helper.run_cli({ "status", path }).out
    assert.truthy(out:find("3 geometries the store cannot represent", 1, true), out)
    assert.truthy(out:find("Parcels " .. LINE_IN_POINTS .. ": a polyline in a point layer", 1, true), out)
  end)

  it("sends the server's geometry back with an attribute edit, never a degraded one", function()
    assert.same(SERVED[LINE_IN_POINTS], st:get(0, LINE_IN_POINTS).geometry)
    -- as a GIS user would, through GDAL (the store's triggers capture it)
    local out, ok = helper.run_shell(("ogrinfo -q -sql %s %s"):format(q(("UPDATE Parcels SET OWNER = 'edited' "
      .. "WHERE GlobalID IN ('%s', '%s')"):format(LINE_IN_POINTS, NOT_A_NUMBER)), q(path)))
    assert(ok, out)
    local result = assert(st:sync(client()))
    assert.equal(2, result.uploaded, tostring(result))
    local features = emu:control("state").featureServices.Parcels.layers["0"].features
    assert.equal("edited", features[LINE_IN_POINTS].attributes.OWNER)
    assert.same(SERVED[LINE_IN_POINTS], features[LINE_IN_POINTS].geometry)
    assert.equal("edited", features[NOT_A_NUMBER].attributes.OWNER)
    assert.same(SERVED[NOT_A_NUMBER], features[NOT_A_NUMBER].geometry)
  end)

  it("keeps a path's point whose coordinate is not a number in the kept JSON of a polyline layer", function()
    local upath = dir .. "/mains.gpkg"
    local ust = assert(geoservices.store.create(client(), upath, { service = "Utilities", layers = { 0 },
      replicaName = "mains", syncModel = "perLayer" }, { poll_interval = 0.05 }))
    local s = assert(ust:status())
    assert.equal(1, #(s.unrepresentable or {}))
    assert.equal(BAD_PATH, s.unrepresentable[1].globalId)
    assert.truthy(s.unrepresentable[1].reason:find("not a number", 1, true))
    assert.same(SERVED[BAD_PATH], ust:get(0, BAD_PATH).geometry)
    ust:close()
  end)
end)
