-- True curves in the replica store (issue 28): circular arcs of Esri JSON
-- (curvePaths, curveRings: {"c": [end, point on the arc]}) stored as the
-- GeoPackage's curve types, which GDAL and QGIS read; Bézier and elliptic
-- segments cut into points for display while the server's JSON is kept, so
-- an unedited feature is never uploaded degraded and an edited one is
-- uploaded as what the user drew.
-- QGIS's own reading and editing of these curves: spec/qgis/curves_in_qgis.lua (make test-qgis).
local curves = require "spec.support.curves_fixture"
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local store = require "geoservices.store"

local gid, CURVES, plain = curves.gid, curves.CURVES, curves.plain

local q = helper.shell_quote

local run = helper.run_shell

-- GDAL's validator: its complaints, but for its own about empty geometries (see store_lossless_spec)
local validate = helper.validate_gpkg

-- Every feature as GDAL reads it: layer -> GlobalID -> {wkt =, empty =}, and each layer's type.
local GDAL_READ = [[
import json, sys
from osgeo import ogr
ds = ogr.Open(sys.argv[1])
out = {}
for i in range(ds.GetLayerCount()):
    layer = ds.GetLayer(i)
    if layer.GetGeomType() == ogr.wkbNone:
        continue
    feats = {}
    for f in layer:
        g = f.GetGeometryRef()
        feats[f.GetField("GlobalID")] = {"wkt": g.ExportToIsoWkt() if g else None, "empty": g is None or g.IsEmpty()}
    out[layer.GetName()] = {"type": ogr.GeometryTypeToName(layer.GetGeomType()), "features": feats}
print(json.dumps(out))
]]

local function gdal_read(path)
  local out, ok = run(("/usr/bin/python3 -c %s %s"):format(q(GDAL_READ), q(path)))
  assert(ok, out)
  return json.decode(out:match("{.*}"))
end

describe("the replica store keeps true curves (issue 28)", function()
  local dir, path

  setup(function()
    dir = helper.tmp_dir()
    path = curves.make_store(dir)
  end)

  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  it("writes circular arcs as GeoPackage curve types, in curve columns only where curves came", function()
    local st <close> = assert(store.open(path))
    assert.same({
      { table_name = "Ditches", geometry_type_name = "MULTILINESTRING", z = 0 },
      { table_name = "Mains", geometry_type_name = "MULTICURVE", z = 0 },
      { table_name = "Parcels", geometry_type_name = "MULTISURFACE", z = 0 },
      { table_name = "Pipes", geometry_type_name = "MULTICURVE", z = 1 },
    }, st.db:rows("SELECT table_name, geometry_type_name, z FROM gpkg_geometry_columns "
      .. "WHERE table_name <> 'geoservices_conflicts' ORDER BY table_name"))
    local ext = {}
    for _, r in ipairs(st.db:rows("SELECT table_name, extension_name FROM gpkg_extensions WHERE extension_name "
      .. "LIKE 'gpkg_geom_%' AND scope = 'read-write' AND column_name = 'geom' ORDER BY 1, 2")) do
      ext[r.table_name] = (ext[r.table_name] and ext[r.table_name] .. " " or "") .. r.extension_name
    end
    assert.same({
      Mains = "gpkg_geom_CIRCULARSTRING gpkg_geom_COMPOUNDCURVE gpkg_geom_MULTICURVE",
      Parcels = "gpkg_geom_CIRCULARSTRING gpkg_geom_COMPOUNDCURVE gpkg_geom_CURVEPOLYGON gpkg_geom_MULTISURFACE",
      Pipes = "gpkg_geom_CIRCULARSTRING gpkg_geom_COMPOUNDCURVE gpkg_geom_MULTICURVE",
    }, ext)
    assert.equal("", validate(path))
  end)

  it("gives GDAL every curve feature, arcs exact, the others as points", function()
    local read = gdal_read(path)
    assert.equal("Multi Curve", read.Mains.type)
    assert.equal("Multi Surface", read.Parcels.type)
    assert.equal("3D Multi Curve", read.Pipes.type)
    assert.equal("Multi Line String", read.Ditches.type)
    for name, l in pairs(read) do
      for g, f in pairs(l.features) do assert.is_false(f.empty, name .. " " .. g) end
    end
    local mains, parcels = read.Mains.features, read.Parcels.features
    assert.equal("MULTICURVE (COMPOUNDCURVE (CIRCULARSTRING (0 0,5 5,10 0),(10 0,20 0)))", mains[gid(0, 1)].wkt)
    assert.equal("MULTILINESTRING ((0 10,20 10))", mains[gid(0, 2)].wkt)
    assert.truthy(mains[gid(0, 3)].wkt:find("^MULTILINESTRING %(%(0 20,.*,30 20%)%)$"), mains[gid(0, 3)].wkt)
    assert.truthy(mains[gid(0, 4)].wkt:find("^MULTILINESTRING %(%(40 0,.*,35 2 ?,.*,30 0%)%)$")
      or mains[gid(0, 4)].wkt:find("^MULTILINESTRING %(%(40 0,.*,30 0%)%)$"), mains[gid(0, 4)].wkt)
    assert.equal("MULTICURVE (COMPOUNDCURVE (CIRCULARSTRING (50 0,55 5,60 0)))", mains[gid(0, 5)].wkt)
    assert.equal("MULTILINESTRING ((0 40,10 40))", mains[gid(0, 6)].wkt)
    assert.equal("MULTISURFACE (CURVEPOLYGON (COMPOUNDCURVE (CIRCULARSTRING (0 0,10 10,20 0,10 -10,0 0)),"
      .. "COMPOUNDCURVE (CIRCULARSTRING (5 0,10 -5,15 0,10 5,5 0))))", parcels[gid(1, 1)].wkt)
    assert.equal("MULTIPOLYGON (((0 20,0 25,5 25,5 20,0 20)))", parcels[gid(1, 2)].wkt)
    assert.equal("MULTISURFACE (CURVEPOLYGON (COMPOUNDCURVE ((0 30,0 40),CIRCULARSTRING (0 40,5 45,10 40),"
      .. "(10 40,10 30,0 30))))", parcels[gid(1, 3)].wkt)
    -- the arc's middle has no z of its own: its ends' mean, never a NaN a renderer would meet
    assert.equal("MULTICURVE Z (COMPOUNDCURVE Z (CIRCULARSTRING Z (0 0 5,5 5 6,10 0 7)))",
      read.Pipes.features[gid(2, 1)].wkt)
    -- the R-tree holds the arcs' bulges: the disc's top is found above its points
    local out = run(("ogrinfo -q -spat 9 9.5 11 10.5 %s Parcels"):format(q(path)))
    assert.truthy(out:find(gid(1, 1), 1, true), out)
  end)


  it("gives every curve back as the server sent it, bit for bit", function()
    local st <close> = assert(store.open(path))
    for id = 0, 2 do
      for i, g in ipairs(CURVES[id]) do
        local got = assert(st:get(id, gid(id, i))).geometry
        if g.curvePaths or g.curveRings then
          assert.same(plain(g), plain(got), ("layer %d feature %d"):format(id, i))
        end
      end
    end
    -- a straight one reads as it was sent too
    assert.same(plain(CURVES[0][2]), plain(st:get(0, gid(0, 2)).geometry))
  end)
end)
