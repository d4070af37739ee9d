-- Z and M end to end through the emulator (issue 41): a store made from the
-- example world's Electric service (3D measured poles whose layer says
-- nothing of Z and M, lines that declare them) keeps every ordinate; edits
-- made with the library and with GDAL reach the server with theirs; after
-- the sync every coordinate the layer's query gives (returnZ, returnM)
-- is the store's.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local run = helper.run_shell

local POLE_1 = "{7A1E0C3D-5B2F-4C6A-9E8D-000000000001}"
local POLE_2 = "{7A1E0C3D-5B2F-4C6A-9E8D-000000000002}"
local POLE_3 = "{7A1E0C3D-5B2F-4C6A-9E8D-000000000003}"
local LINE_1 = "{7A1E0C3D-5B2F-4C6A-9E8D-000000000101}"

-- The layer's features as its query gives them, by GlobalID.
local function served(client, id) return helper.served_features(client, "Electric", id) end

-- Every coordinate of an Esri geometry as a list of {x, y, z, m} (nil when absent).
local function coordinates(g, has_z, has_m)
  local out = {}
  if g.x ~= nil then
    out[1] = { g.x, g.y, g.z, g.m }
    return out
  end
  if g.hasZ ~= nil then has_z = g.hasZ end
  if g.hasM ~= nil then has_m = g.hasM end
  for _, part in ipairs(g.paths or g.rings or { g.points }) do
    for _, c in ipairs(part) do
      local z = has_z and c[3] or nil
      local m = has_m and c[has_z and 4 or 3] or nil
      out[#out + 1] = { c[1], c[2], z, m }
    end
  end
  return out
end

-- The WKT of one feature as ogrinfo prints it.
local function ogr_wkt(path, layer_name, where)
  local out, ok = run(("ogrinfo -q -al -where %s %s %s"):format(q(where), q(path), q(layer_name)))
  assert(ok, out)
  for line in out:gmatch("[^\n]+") do
    local keyword = line:match("^%s+(%u+) ")
    if keyword == "POINT" or keyword == "MULTILINESTRING" or keyword == "LINESTRING" then
      return line:match("^%s+(.-)%s*$")
    end
  end
  error("no geometry in:\n" .. out)
end

-- Moves feature `fid` of `layer` with GDAL (python3-gdal): x and y by dx, dy; Z and M kept.
local GDAL_MOVE = [[
import sys
from osgeo import ogr
ds = ogr.Open(sys.argv[1], 1)
layer = ds.GetLayerByName(sys.argv[2])
layer.SetAttributeFilter("GlobalID = '%s'" % sys.argv[3])
f = layer.GetNextFeature()
g = f.GetGeometryRef()
def move(geom):
    if geom.GetGeometryCount() > 0:
        for i in range(geom.GetGeometryCount()):
            move(geom.GetGeometryRef(i))
        return
    for i in range(geom.GetPointCount()):
        geom.SetPointZM(i, geom.GetX(i) + float(sys.argv[4]), geom.GetY(i) + float(sys.argv[5]),
                        geom.GetZ(i), geom.GetM(i))
move(g)
f.SetGeometry(g)
layer.SetFeature(f)
ds = None
]]

describe("Z and M end to end through the emulator (issue 41)", function()
  local world = helper.store_world{ service = "Electric", layers = { 0, 1 }, syncModel = "perReplica" }
  setup(world.start)
  teardown(world.stop)

  it("a store of a Z/M service keeps every ordinate, as GDAL reads it", function()
    local st <close> = world.create("zm-read")
    local out = run("ogrinfo -so -al " .. q(st.path))
    assert.truthy(out:find("Layer name: Poles\nGeometry: 3D Measured Point", 1, true), out)
    assert.truthy(out:find("Layer name: Lines\nGeometry: 3D Measured Multi Line String", 1, true), out)
    assert.equal("POINT ZM (-117.1952 34.0561 512.25 7.5)", ogr_wkt(st.path, "Poles", "NAME = 'P-1'"))
    assert.same({ x = -117.1952, y = 34.0561, z = 512.25, m = 7.5 },
      json.decode(json.encode(st:get(0, POLE_1).geometry)))
    local client = world.client()
    for id = 0, 1 do
      for gid, f in pairs(served(client, id)) do
        assert.same(coordinates(f.geometry, true, true), coordinates(st:get(id, gid).geometry, true, true), gid)
      end
    end
  end)

  it("edits made with the library and with GDAL reach the server with their Z and M, nothing flattened", function()
    local st = world.create("zm-edit")
    local path = st.path
    -- the library: pole 1 moved, line 1's middle vertex moved
    local pole = assert(st:get(0, POLE_1))
    pole.geometry.x = pole.geometry.x + 0.0005
    assert(st:update(0, { attributes = { GlobalID = POLE_1 }, geometry = pole.geometry }))
    local line = assert(st:get(1, LINE_1))
    line.geometry.paths[1][2][2] = line.geometry.paths[1][2][2] + 0.0005
    assert(st:update(1, { attributes = { GlobalID = LINE_1 }, geometry = line.geometry }))
    st:close()
    -- GDAL: an attribute of pole 2 through SQL, pole 3 and line 2 moved through OGR
    local out, ok = run(("ogrinfo -q %s -sql %s"):format(q(path),
      q("UPDATE Poles SET NAME = 'P-2 checked' WHERE GlobalID = '" .. POLE_2 .. "'")))
    assert(ok, out)
    for _, m in ipairs{ { "Poles", POLE_3 }, { "Lines", "{7A1E0C3D-5B2F-4C6A-9E8D-000000000102}" } } do
      out, ok = run(("/usr/bin/python3 -c %s %s %s %s 0.001 -0.0005"):format(q(GDAL_MOVE), q(path), q(m[1]), q(m[2])))
      assert(ok, out)
    end
    st = assert(geoservices.store.open(path))
    local client = world.client()
    assert(st:sync(client))
    local poles, lines = served(client, 0), served(client, 1)
    assert.same({ x = -117.1952 + 0.0005, y = 34.0561, z = 512.25, m = 7.5 }, poles[POLE_1].geometry)
    assert.equal("P-2 checked", poles[POLE_2].attributes.NAME)
    assert.same({ 509.75, 15.0 }, { poles[POLE_2].geometry.z, poles[POLE_2].geometry.m })
    assert.same({ -117.191 + 0.001, 34.0566 - 0.0005, 0.1 + 0.2, 22.5 },
      coordinates(poles[POLE_3].geometry)[1])
    assert.same({ -117.1931, 34.0563 + 0.0005, 521.25, 0.2 }, coordinates(lines[LINE_1].geometry, true, true)[2])
    -- every coordinate of every feature: the server's is the store's
    for id, features in pairs{ [0] = poles, [1] = lines } do
      for gid, f in pairs(features) do
        assert.same(coordinates(f.geometry, true, true), coordinates(st:get(id, gid).geometry, true, true), gid)
      end
    end
    st:close()
  end)
end)
