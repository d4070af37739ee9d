-- A service that declares less than its data holds (issue 41): its layer
-- resource says hasZ = false, hasM = false, its geometries carry Z and M.
-- The store never flattens them silently: a 2D column keeps the server's
-- geometry beside the blob (as for the geometries it cannot represent),
-- st:get gives it back, `status` names each, and an edit never uploads a
-- geometry with fewer ordinates than the server's: moving vertices keeps
-- the server's Z and M of each, an edit that adds or removes vertices is
-- refused (it stays queued), an attribute edit sends no geometry.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local run = helper.run_shell

local POLE_1 = "{7A1E0C3D-5B2F-4C6A-9E8D-000000000001}"
local POLE_2 = "{7A1E0C3D-5B2F-4C6A-9E8D-000000000002}"
local POLE_3 = "{7A1E0C3D-5B2F-4C6A-9E8D-000000000003}"
local LINE_1 = "{7A1E0C3D-5B2F-4C6A-9E8D-000000000101}"
local LINE_2 = "{7A1E0C3D-5B2F-4C6A-9E8D-000000000102}"

local function layer_named(world, name)
  for _, l in ipairs(world.featureServices.Electric.layers) do
    if l.name == name then return l end
  end
  error("no layer " .. name)
end

-- The example world whose Electric layers declare no Z and no M.
local function under_declared(dir)
  local world = json.decode(helper.read_all("examples/data/world.json"))
  for _, name in ipairs{ "Poles", "Lines" } do
    local l = layer_named(world, name)
    l.hasZ, l.hasM = false, false
  end
  local path = dir .. "/world.json"
  helper.write_file(path, json.encode(world))
  return path, world
end

local function served(client, id) return helper.served_features(client, "Electric", id) end

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
        geom.SetPoint_2D(i, geom.GetX(i) + float(sys.argv[4]), geom.GetY(i) + float(sys.argv[5]))
move(g)
f.SetGeometry(g)
layer.SetFeature(f)
ds = None
]]

describe("a service that declares no Z and no M over data that has them (issue 41)", function()
  local world -- the example world as the emulator serves it, under-declared
  local store_world = helper.store_world({ service = "Electric", layers = { 0, 1 }, syncModel = "perReplica" }, {
    data = function(dir)
      local path
      path, world = under_declared(dir)
      return path
    end,
  })
  setup(store_world.start)
  teardown(store_world.stop)
  local client, create = store_world.client, store_world.create

  it("keeps the server's geometries whole in 2D columns, and status names each", function()
    local st <close> = create("kept")
    assert.same({ x = -117.1952, y = 34.0561, z = 512.25, m = 7.5 },
      json.decode(json.encode(st:get(0, POLE_1).geometry)))
    local line = layer_named(world, "Lines").features[1].geometry
    assert.same(line, json.decode(json.encode(st:get(1, LINE_1).geometry)))
    local s = assert(st:status())
    assert.equal(5, s.unrepresentable.count)
    local reasons = {}
    for _, u in ipairs(s.unrepresentable) do reasons[u.globalId] = u.reason end
    assert.equal("Z and M values in a layer declared without them (stored without them; the server's are kept)",
      reasons[POLE_1])
    assert.equal("coordinates with numbers past x and y in a layer declared without Z and M (stored without them; "
      .. "the server's are kept)", reasons[LINE_2]) -- no flags of its own: their meaning is unknown
    local r = helper.run_cli{ "status", st.path }
    assert.equal(0, r.code, r.err)
    assert.truthy(r.out:find("5 geometries the store cannot represent:", 1, true), r.out)
    assert.truthy(r.out:find("layer Poles " .. POLE_1 .. ": Z and M values in a layer declared without them", 1, true),
      r.out)
  end)

  it("never uploads a geometry with fewer ordinates than the server's", function()
    local st = create("edits")
    local path = st.path
    -- an attribute edit: no geometry sent
    assert(st:update(0, { attributes = { GlobalID = POLE_1, NAME = "P-1 checked" } }))
    -- the library moves pole 2 and a vertex of line 1
    local pole = assert(st:get(0, POLE_2))
    pole.geometry.x = pole.geometry.x + 0.0005
    assert(st:update(0, { attributes = { GlobalID = POLE_2 }, geometry = pole.geometry }))
    local line = assert(st:get(1, LINE_1))
    line.geometry.paths[1][2][2] = line.geometry.paths[1][2][2] + 0.0005
    assert(st:update(1, { attributes = { GlobalID = LINE_1 }, geometry = line.geometry }))
    st:close()
    -- GDAL moves pole 3 and line 2 (in 2D: the file holds no more)
    for _, m in ipairs{ { "Poles", POLE_3 }, { "Lines", LINE_2 } } do
      local out, ok = run(("/usr/bin/python3 -c %s %s %s %s 0.001 -0.0005"):format(q(GDAL_MOVE), q(path),
        q(m[1]), q(m[2])))
      assert(ok, out)
    end
    st = assert(geoservices.store.open(path))
    local c = client()
    assert(st:sync(c))
    local poles, lines = served(c, 0), served(c, 1)
    assert.same({ x = -117.1952, y = 34.0561, z = 512.25, m = 7.5 }, poles[POLE_1].geometry)
    assert.equal("P-1 checked", poles[POLE_1].attributes.NAME)
    assert.same({ x = -117.1931 + 0.0005, y = 34.0563, z = 509.75, m = 15.0 }, poles[POLE_2].geometry)
    assert.same({ x = -117.191 + 0.001, y = 34.0566 - 0.0005, z = 0.1 + 0.2, m = 22.5 }, poles[POLE_3].geometry)
    assert.same({ paths = { { { -117.1952, 34.0561, 524.75, 0 }, { -117.1931, 34.0563 + 0.0005, 521.25, 0.2 },
                              { -117.191, 34.0566, 519.5, 0.4 } } } }, lines[LINE_1].geometry)
    local moved = json.decode(json.encode(layer_named(world, "Lines").features[2].geometry))
    for _, part in ipairs(moved.paths) do
      for _, v in ipairs(part) do v[1], v[2] = v[1] + 0.001, v[2] - 0.0005 end
    end
    assert.same(moved, lines[LINE_2].geometry)
    -- and the store gives back what the server holds
    for id, features in pairs{ [0] = poles, [1] = lines } do
      for gid, f in pairs(features) do
        assert.same(f.geometry, json.decode(json.encode(st:get(id, gid).geometry)), gid)
      end
    end
    st:close()
  end)

  it("refuses an edit that adds a vertex to a line whose server Z and M the column cannot hold", function()
    local st <close> = create("vertex")
    local line = assert(st:get(1, LINE_1))
    table.insert(line.geometry.paths[1], 2, { -117.194, 34.0562 })
    assert(st:update(1, { attributes = { GlobalID = LINE_1 }, geometry = line.geometry }))
    local c = client()
    local before = served(c, 1)[LINE_1].geometry
    st:sync(c)
    local s = assert(st:status())
    assert.equal(1, s.pending.total) -- kept, not sent
    assert.same(before, served(c, 1)[LINE_1].geometry)
    local refused = assert(st:pending())
    local text = tostring(refused[1] and refused[1].refused or "")
    assert.truthy(text:find("Z or M values", 1, true), text)
  end)
end)
