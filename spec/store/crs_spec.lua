-- Every CRS (issue 28, item 6): a store made from a service's replica
-- defines its layers' coordinate system in WKT that GDAL reads, whatever
-- code the service gives (EPSG, Web Mercator as 102100, an ESRI-only code),
-- from the service's own WKT when it gives one, else from PROJ's database;
-- a code nobody defines is reported by `geoservices status`, not left as a
-- silent 'undefined'.
local core = require "geoservices.core"
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local run = helper.run_shell

-- Each layer's CRS as GDAL reads it from the file (python3-gdal: the system Python).
local GDAL_CRS = [[
import json, sys
from osgeo import gdal
gdal.UseExceptions()
ds = gdal.OpenEx(sys.argv[1], gdal.OF_VECTOR)
out = {}
for i in range(ds.GetLayerCount()):
    layer = ds.GetLayer(i)
    sr = layer.GetSpatialRef()
    if layer.GetGeomType() == 0:
        continue
    out[layer.GetName()] = sr and {
        "name": sr.GetName(), "projected": bool(sr.IsProjected()),
        "authority": "%s:%s" % (sr.GetAuthorityName(None), sr.GetAuthorityCode(None))} or False
print(json.dumps(out))
]]

-- A projection of the service's own, which no authority knows.
local OWN_WKT = 'PROJCS["Crew_Local_Lambert",GEOGCS["GCS_WGS_1984",DATUM["D_WGS_1984",SPHEROID["WGS_1984",'
  .. '6378137.0,298.257223563]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]],'
  .. 'PROJECTION["Lambert_Conformal_Conic"],PARAMETER["False_Easting",500000.0],PARAMETER["False_Northing",0.0],'
  .. 'PARAMETER["Central_Meridian",-100.5],PARAMETER["Standard_Parallel_1",33.0],'
  .. 'PARAMETER["Standard_Parallel_2",45.0],PARAMETER["Latitude_Of_Origin",39.0],UNIT["Meter",1.0]]'

local UNKNOWN = 999999 -- neither EPSG nor ESRI has it

-- service name -> its spatialReference and what GDAL should read in the store
local CASES = {
  Crs4326 = { sr = { wkid = 4326, latestWkid = 4326 }, srs_id = 4326, organization = "EPSG",
              srs_name = "WGS 84 geodetic", -- the standard's own row (12-128r18 table 20)
              gdal = { name = "WGS 84", projected = false, authority = "EPSG:4326" } },
  CrsWebMercator = { sr = { wkid = 102100, latestWkid = 3857 }, srs_id = 3857, organization = "EPSG",
                     gdal = { name = "WGS 84 / Pseudo-Mercator", projected = true, authority = "EPSG:3857" } },
  Crs2193 = { sr = { wkid = 2193, latestWkid = 2193 }, srs_id = 2193, organization = "EPSG",
              gdal = { name = "NZGD2000 / New Zealand Transverse Mercator 2000", projected = true,
                       authority = "EPSG:2193" } },
  Crs102003 = { sr = { wkid = 102003, latestWkid = 102003 }, srs_id = 102003, organization = "ESRI",
                gdal = { name = "USA_Contiguous_Albers_Equal_Area_Conic", projected = true,
                         authority = "ESRI:102003" } },
  Crs54030 = { sr = { wkid = 54030 }, srs_id = 54030, organization = "ESRI",
               gdal = { name = "World_Robinson", projected = true, authority = "ESRI:54030" } },
  -- 102008 is in PROJ's database too (North_America_Albers_Equal_Area_Conic): the service's word wins
  CrsOwnWkt = { sr = { wkid = 102008, wkt = OWN_WKT }, srs_id = 102008, organization = "ESRI", own_wkt = true },
  CrsUnknown = { sr = { wkid = UNKNOWN }, srs_id = UNKNOWN, organization = "ESRI", unknown = true },
}

describe("a replica store defines every layer's CRS (issue 28)", function()
  local emu, dir
  local stores = {} -- service name -> path of its store

  setup(function()
    dir = helper.tmp_dir()
    local world = json.decode(helper.read_all(helper.ROOT .. "/examples/data/world.json"))
    local parcels = world.featureServices.Parcels
    for name, case in pairs(CASES) do
      local svc = json.decode(json.encode(parcels))
      svc.spatialReference = case.sr
      svc.replicas = json.array()
      svc.layers = { svc.layers[1] }
      world.featureServices[name] = svc
    end
    helper.write_file(dir .. "/world.json", json.encode(world))
    emu = helper.start_emulator{ data = dir .. "/world.json" }
    local client = geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 }
    for name in pairs(CASES) do
      local path = dir .. "/" .. name .. ".gpkg"
      local st = assert(geoservices.store.create(client, path, { service = name, layers = { 0 },
        replicaName = name, syncModel = "perReplica" }, { poll_interval = 0.05, timeout = 30 }))
      st:close()
      stores[name] = path
    end
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. q(dir))
  end)

  local function srs_row(path)
    local out, ok = run(("sqlite3 -json %s %s"):format(q(path), q("SELECT s.srs_id, s.organization, "
      .. "s.organization_coordsys_id, s.srs_name, s.definition FROM gpkg_geometry_columns c "
      .. "JOIN gpkg_spatial_ref_sys s ON s.srs_id = c.srs_id "
      -- the service's layer (the store's own conflicts layer shares its CRS)
      .. "WHERE c.table_name NOT LIKE 'geoservices%'")))
    assert(ok, out)
    local rows = json.decode(out)
    assert.equal(1, #rows, out)
    return rows[1]
  end

  local function gdal_crs(path)
    local out, ok = run(("/usr/bin/python3 -c %s %s"):format(q(GDAL_CRS), q(path)))
    assert(ok, out)
    return json.decode(out:match("{.*}")).Parcels
  end

  for _, name in ipairs{ "Crs4326", "CrsWebMercator", "Crs2193", "Crs102003", "Crs54030" } do
    local case = CASES[name]
    it(("writes the WKT of %s:%d, which GDAL reads as %q"):format(case.organization, case.srs_id, case.gdal.name),
      function()
        local path = stores[name]
        local row = srs_row(path)
        assert.same({ case.srs_id, case.organization, case.srs_id },
          { row.srs_id, row.organization, row.organization_coordsys_id })
        assert.truthy(row.definition:find('^PROJCS%["') or row.definition:find('^GEOGCS%["'), row.definition)
        assert.truthy(row.definition:find(('AUTHORITY["%s","%d"]]'):format(case.organization, case.srs_id), 1, true),
          row.definition)
        assert.equal(case.srs_name or case.gdal.name, row.srs_name)
        assert.same(case.gdal, gdal_crs(path))
        assert.equal("", helper.validate_gpkg(path))
        local info, ok = run("ogrinfo -so " .. q(path) .. " Parcels")
        assert(ok, info)
        assert.falsy(info:find("ERROR", 1, true), info)
        assert.truthy(info:find(case.gdal.name, 1, true), info)
        assert.falsy(info:find("unknown", 1, true), info)
      end)
  end

  it("prefers the service's own WKT to any database", function()
    local path = stores.CrsOwnWkt
    local row = srs_row(path)
    assert.equal(OWN_WKT, row.definition)
    assert.equal("Crew_Local_Lambert", gdal_crs(path).name)
    assert.equal("", helper.validate_gpkg(path))
  end)

  it("reports a code no one defines: status says the layer's CRS is unknown", function()
    local path = stores.CrsUnknown
    local row = srs_row(path)
    assert.same({ UNKNOWN, "undefined" }, { row.srs_id, row.definition })
    assert.equal("", helper.validate_gpkg(path))
    local st = assert(geoservices.store.open(path))
    local s = assert(st:status())
    st:close()
    assert.same({ { layer = "Parcels", srs_id = UNKNOWN, organization = "ESRI", code = UNKNOWN } },
      s.unknownCrs and { { layer = s.unknownCrs[1].layer, srs_id = s.unknownCrs[1].srs_id,
        organization = s.unknownCrs[1].organization, code = s.unknownCrs[1].code } })
    assert.truthy(tostring(s):find("unknown CRS: Parcels (ESRI:999999)", 1, true), tostring(s))
    local r = helper.run_cli{ "status", path }
    assert.equal(0, r.code, r.err)
    assert.truthy(r.out:find("unknown CRS: Parcels ESRI:999999", 1, true), r.out)
    r = helper.run_cli{ "--json", "status", path }
    assert.equal(0, r.code, r.err)
    local ev = helper.events(r.out)[1]
    assert.same({ { layer = "Parcels", srs_id = UNKNOWN, organization = "ESRI", code = UNKNOWN } },
      ev.unknownCrs and { { layer = ev.unknownCrs[1].layer, srs_id = ev.unknownCrs[1].srs_id,
        organization = ev.unknownCrs[1].organization, code = ev.unknownCrs[1].code } })
    -- a store whose every CRS is defined says nothing of it
    st = assert(geoservices.store.open(stores.Crs102003))
    s = assert(st:status())
    st:close()
    assert.same({}, s.unknownCrs)
    assert.falsy(tostring(s):find("unknown CRS", 1, true))
  end)
end)

describe("core.srs_definition", function()
  it("gives WKT 1, the name and the authority that defines a code, EPSG first", function()
    local wkt, name, org = core.srs_definition(2193)
    assert.same({ "NZGD2000 / New Zealand Transverse Mercator 2000", "EPSG" }, { name, org })
    assert.truthy(wkt:find('^PROJCS%["NZGD2000'), wkt)
    wkt, name, org = core.srs_definition(102003)
    assert.same({ "USA_Contiguous_Albers_Equal_Area_Conic", "ESRI" }, { name, org })
    assert.truthy(wkt:find('AUTHORITY["ESRI","102003"]]', 1, true), wkt)
    -- the standard's 4326 row, written without PROJ, is PROJ's (and GDAL's) WKT
    assert.same({ require("geoservices.store.file.srs").WGS84_WKT, "WGS 84", "EPSG" }, { core.srs_definition(4326) })
    -- a geographic 3D CRS, which WKT 1 has no form for: its height as a vertical CRS, as GDAL writes it
    wkt = core.srs_definition(4979)
    assert.truthy(wkt:find('^COMPD_CS%["WGS 84 %+ Ellipsoid'), wkt)
  end)

  it("returns nil, a message and a code for an unknown code or no proj.db; a non-integer raises", function()
    assert.same({ nil, "neither EPSG:999999 nor ESRI:999999 is in PROJ's database", "unknown" },
      { core.srs_definition(UNKNOWN) })
    assert.same({ nil, "wkid 0 is no authority code", "unknown" }, { core.srs_definition(0) })
    assert.has_error(function() core.srs_definition("EPSG:4326") end)
    -- PROJ_DATA pointing nowhere: no crash, a message (another process: PROJ reads it at start)
    local out, ok = run(("cd %s && PROJ_DATA=/nonexistent LUA_CPATH=%s lua5.4 -e %s"):format(q(helper.ROOT),
      q(package.cpath), q('print(require("geoservices.core").srs_definition(2193))')))
    assert(ok, out)
    assert.equal("nil\tPROJ's database (proj.db) cannot be opened: set PROJ_DATA to its directory\tno_database\n",
      out)
  end)
end)
