-- True curves in the replica store (issue 28): circular arcs of Esri JSON
-- (curvePaths, curveRings: {"c": [end, point on the arc]}) stored as the
-- GeoPackage's curve types, which GDAL and QGIS read; Bézier and elliptic
-- segments cut into points for display while the server's JSON is kept, so
-- an unedited feature is never uploaded degraded and an edited one is
-- uploaded as what the user drew.
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local scripted = require "spec.support.scripted_store"
local store = require "geoservices.store"

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

local function qgis(...)
  local args = {}
  for i, a in ipairs{ ... } do args[i] = q(a) end
  local out, ok = run("QT_QPA_PLATFORM=offscreen /usr/bin/python3 spec/support/qgis_curves.py "
    .. table.concat(args, " "))
  assert(ok, out)
  return json.decode(out:match("{.*}"))
end

-- the Utilities service, its result file and the edits a sync sends (spec/support/scripted_store.lua)
local layer, gid = scripted.layer, scripted.gid

local LAYERS = {
  layer(0, "Mains", "esriGeometryPolyline"),
  layer(1, "Parcels", "esriGeometryPolygon"),
  layer(2, "Pipes", "esriGeometryPolyline", true),
  layer(3, "Ditches", "esriGeometryPolyline"),
}

-- layer id -> its geometries, as a server sends them
local CURVES = {
  [0] = {
    { curvePaths = { { { 0, 0 }, { c = { { 10, 0 }, { 5, 5 } } }, { 20, 0 } } } }, -- an arc, then a segment
    { paths = { { { 0, 10 }, { 20, 10 } } } },                                      -- straight
    { curvePaths = { { { 0, 20 }, { b = { { 30, 20 }, { 10, 30 }, { 20, 30 } } } } } }, -- a cubic Bézier
    { curvePaths = { { { 40, 0 }, { a = { { 30, 0 }, { 35, 0 }, 0, 0, 0, 5, 0.4 } } } } }, -- an elliptic arc
    { curvePaths = { { { 50, 0 }, { a = { { 60, 0 }, { 55, 0 }, 1, 1 } } } } }, -- a circular arc by its centre
    { curvePaths = { { { 0, 40 }, { q = { { 10, 40 } } } } } },                 -- a kind the store does not know
  },
  [1] = {
    { curveRings = { -- a disc with a round hole
      { { 0, 0 }, { c = { { 20, 0 }, { 10, 10 } } }, { c = { { 0, 0 }, { 10, -10 } } } },
      { { 5, 0 }, { c = { { 15, 0 }, { 10, -5 } } }, { c = { { 5, 0 }, { 10, 5 } } } } } },
    { rings = { { { 0, 20 }, { 0, 25 }, { 5, 25 }, { 5, 20 }, { 0, 20 } } } },
    { curveRings = { { { 0, 30 }, { 0, 40 }, { c = { { 10, 40 }, { 5, 45 } } }, { 10, 30 }, { 0, 30 } } } },
  },
  [2] = {
    { hasZ = true, curvePaths = { { { 0, 0, 5 }, { c = { { 10, 0, 7 }, { 5, 5 } } } } } },
  },
  [3] = {
    { paths = { { { 0, 0 }, { 1, 1 } } } },
  },
}

local function write_result(path) scripted.write_result(path, CURVES) end

local REPLICA = scripted.replica("{5E1A0C2B-1111-4A5B-9C8D-000000000029}")

-- The edits a sync of st sends, by GlobalID; the server's version of the edited features, read before
-- the upload (the rebase, issue 36), is unchanged.
local function uploaded(st)
  local features = json.array()
  for i, g in ipairs(CURVES[0]) do features[i] = scripted.feature(0, i, g) end
  local by_gid = {}
  for _, e in ipairs(scripted.uploaded(st, { [0] = features })) do
    for _, f in ipairs(e.features.updates or {}) do by_gid[f.attributes.GlobalID] = f end
  end
  return by_gid
end

-- JSON round trip: what a geometry is once encoded (arrays and objects alike).
local function plain(v) return json.decode(json.encode(v)) end

describe("the replica store keeps true curves (issue 28)", function()
  local dir, path

  setup(function()
    dir = helper.tmp_dir()
    path = dir .. "/curves.gpkg"
    write_result(dir .. "/curves.json")
    local st = assert(store.create_from(path, REPLICA, LAYERS, dir .. "/curves.json"))
    st:close()
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

  it("gives QGIS every curve feature, as curves", function()
    local mains = qgis("read", path, "Mains")
    assert.equal("MultiCurve", mains.layer)
    local parcels = qgis("read", path, "Parcels")
    assert.equal("MultiSurface", parcels.layer)
    for _, l in ipairs{ mains, parcels } do
      for _, f in ipairs(l.features) do
        assert.is_false(f.null, f.GlobalID)
        assert.is_false(f.empty, f.GlobalID)
      end
    end
    local curved = {}
    for _, f in ipairs(mains.features) do curved[f.GlobalID] = f.curved end
    assert.is_true(curved[gid(0, 1)])
    assert.is_false(curved[gid(0, 2)])
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

  it("uploads an unedited curve as the server sent it, an edited one as the user drew it", function()
    local copy = dir .. "/edited.gpkg"
    assert(os.execute(("cp %s %s"):format(q(path), q(copy))))
    -- QGIS moves the arc's middle and lengthens the line; redraws the Bézier as a line
    qgis("edit", copy, "Mains", gid(0, 1), "MULTICURVE(COMPOUNDCURVE(CIRCULARSTRING(0 0,5 -5,10 0),(10 0,25 0)))")
    qgis("edit", copy, "Mains", gid(0, 3), "MULTILINESTRING((0 20,15 25,30 20))")
    local st <close> = assert(store.open(copy))
    -- the library renames the elliptic arc and adds an arc of its own
    assert(st:update(0, { attributes = { GlobalID = gid(0, 4), NAME = "renamed" } }))
    local added = assert(st:add(0, { attributes = { NAME = "new" },
      geometry = { curvePaths = { { { 0, 50 }, { c = { { 10, 50 }, { 5, 55 } } } } } } }))
    assert.same({ curvePaths = { { { 0, 50 }, { c = { { 10, 50 }, { 5, 55 } } } } } }, plain(st:get(0, added).geometry))
    local sent = uploaded(st)
    assert.same({ curvePaths = { { { 0, 0 }, { c = { { 10, 0 }, { 5, -5 } } }, { 25, 0 } } } },
      plain(sent[gid(0, 1)].geometry))
    assert.same({ paths = { { { 0, 20 }, { 15, 25 }, { 30, 20 } } } }, plain(sent[gid(0, 3)].geometry))
    -- never a densified copy of what the server holds
    local ellipse = sent[gid(0, 4)]
    assert.equal("renamed", ellipse.attributes.NAME)
    if ellipse.geometry ~= nil then assert.same(plain(CURVES[0][4]), plain(ellipse.geometry)) end
    assert.equal("", validate(copy))
  end)
end)
