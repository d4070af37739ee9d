-- The local edits waiting and those the server refused, loadable in QGIS
-- and GDAL (issue 37 item 1): read-only views registered as attributes,
-- listed beside the layers when the file is opened as QGIS 3.22 opens it
-- (GDAL's LIST_ALL_TABLES=YES), readable, refusing edits; a store made
-- before gets them on its first open for writing.
local helper = require "spec.helper"

local q = helper.shell_quote
local run = helper.run_shell

-- the layers as QGIS 3.22 lists them (it opens a GeoPackage with LIST_ALL_TABLES=YES), and the rows of two
local LIST = [[
import sys
from osgeo import gdal
ds = gdal.OpenEx(sys.argv[1], gdal.OF_VECTOR, open_options=["LIST_ALL_TABLES=YES"])
for i in range(ds.GetLayerCount()):
    print("layer", ds.GetLayer(i).GetName())
for name in ("geoservices_pending", "geoservices_rejected"):
    lyr = ds.GetLayerByName(name)
    for f in (lyr or []):
        print("row", name, f.GetFID(), f.GetField("layer"), f.GetField("edit"), f.GetField("GlobalID"))
]]

local function gdal_list(path)
  local out, ok = run(("/usr/bin/python3 -c %s %s"):format(q(LIST), q(path)))
  assert.is_true(ok, out)
  local layers, rows = {}, {}
  for line in out:gmatch("[^\n]+") do
    local name = line:match("^layer (.+)$")
    if name then layers[name] = true end
    if line:match("^row ") then rows[#rows + 1] = line:sub(5) end
  end
  return layers, rows, out
end

local function sqlite(path, sql)
  local out, ok = run("sqlite3 " .. q(path) .. " " .. q(sql))
  assert.is_true(ok, out)
  return (out:gsub("%s+$", ""))
end

describe("the pending and refused edits in QGIS", function()
  local world = helper.store_world({ service = "Electric", layers = { 0, 1 }, syncModel = "perReplica" })
  setup(world.start)
  teardown(world.stop)

  it("are read-only layers of the file, listed as QGIS lists them, with the queued edit", function()
    local st = world.create("views")
    local path = st.path
    st:close()
    local gid = sqlite(path, "SELECT GlobalID FROM Poles WHERE fid = 2")
    local out, ok = run(("ogrinfo -q -sql %s %s"):format(q("UPDATE Poles SET HEIGHT = 9.5 WHERE fid = 2"), q(path)))
    assert.is_true(ok, out)
    local layers, rows, text = gdal_list(path)
    assert.is_true(layers.geoservices_pending, text)
    assert.is_true(layers.geoservices_rejected, text)
    local seq = sqlite(path, "SELECT seq FROM gpkgext_geoservices_edits")
    assert.same({ ("geoservices_pending %s Poles update %s"):format(seq, gid) }, rows)
    -- a view takes no edit: the queue is the library's
    out = run("sqlite3 " .. q(path) .. " " .. q("DELETE FROM geoservices_pending"))
    assert.truthy(out:find("cannot modify geoservices_pending because it is a view", 1, true), out)
    assert.equal("1", sqlite(path, "SELECT count(*) FROM gpkgext_geoservices_edits"))
    assert.equal("", helper.validate_gpkg(path))
  end)

  it("come to a store made before (format 7) on its first open for writing", function()
    local st = world.create("views-old")
    local path = st.path
    st:close()
    sqlite(path, "DROP VIEW geoservices_pending; DROP VIEW geoservices_rejected; DELETE FROM gpkg_contents WHERE "
      .. "table_name IN ('geoservices_pending', 'geoservices_rejected'); UPDATE gpkgext_geoservices_replica "
        .. "SET format = 7")
    local layers = gdal_list(path)
    assert.is_nil(layers.geoservices_pending)
    local r = helper.run_cli({ "status", path })
    assert.equal(0, r.code, r.err)
    layers = gdal_list(path)
    assert.is_true(layers.geoservices_pending)
    assert.is_true(layers.geoservices_rejected)
    assert.equal(tostring(require("geoservices.store.file.schema").FORMAT),
      sqlite(path, "SELECT format FROM gpkgext_geoservices_replica"))
    assert.equal("", helper.validate_gpkg(path))
  end)
end)
