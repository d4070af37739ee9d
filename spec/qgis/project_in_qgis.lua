-- What a QGIS 3.22 user gets opening the project in the store (issue 37,
-- `make test-qgis`, not in `make test`): QGIS reads it from the GeoPackage
-- (geopackage:PATH?projectName=NAME, as its browser opens it), every layer of
-- the service valid and drawn in the service's style, the edits' layers in a
-- group of their own, and the relations valid: a valve's inspections, its attachments.
-- luacheck: std +busted
-- (run by `make test-qgis` alone: its name keeps it out of busted's default pattern)
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local geoservices = require "geoservices"

local q = helper.shell_quote
local run = helper.run_shell

local QGIS_PROJECT = [==[
import json, sys
from qgis.core import QgsApplication, QgsProject, QgsFeatureRequest
app = QgsApplication([], False)
app.initQgis()
p = QgsProject.instance()
ok = p.read("geopackage:%s?projectName=%s" % (sys.argv[1], sys.argv[2]))
root = p.layerTreeRoot()
def renderer(l):
    r = l.renderer() if hasattr(l, "renderer") else None
    if r is None:
        return None
    if r.type() == "RuleRenderer":
        return [r.type(), [[x.filterExpression(), x.symbol().color().name()] for x in r.rootRule().children()]]
    if r.type() == "singleSymbol":
        return [r.type(), r.symbol().color().name()]
    return [r.type(), len(r.categories()) if r.type() == "categorizedSymbol" else len(r.ranges())]
relations = {}
for r in p.relationManager().relations().values():
    parent = r.referencedLayer()
    children = 0
    if r.isValid():
        for f in parent.getFeatures():
            children += len(list(r.getRelatedFeatures(f)))
    relations[r.name()] = {"valid": r.isValid(), "child": r.referencingLayer().name() if r.referencingLayer() else None,
                           "parent": parent.name() if parent else None, "children": children}
out = {"read": ok,
       "layers": {l.name(): {"valid": l.isValid(), "features": l.featureCount(), "crs": l.crs().authid(),
                             "renderer": renderer(l)} for l in p.mapLayers().values()},
       "top": [c.name() for c in root.children()],
       "groups": {g.name(): [c.name() for c in g.children()] for g in root.findGroups()},
       "relations": relations}
# the conflicts layer rendered alone: its magenta pixels
from qgis.core import QgsMapSettings, QgsMapRendererSequentialJob
from qgis.PyQt.QtCore import QSize
from qgis.PyQt.QtGui import QColor
c = p.mapLayersByName("Conflicts")[0]
ms = QgsMapSettings()
ms.setLayers([c])
ms.setBackgroundColor(QColor(255, 255, 255))
ms.setOutputSize(QSize(200, 200))
ms.setDestinationCrs(c.crs())
ms.setExtent(p.mapLayersByName("Valves")[0].extent().buffered(0.002))
job = QgsMapRendererSequentialJob(ms)
job.start()
job.waitForFinished()
img = job.renderedImage()
out["conflict_pixels"] = sum(1 for y in range(img.height()) for x in range(img.width())
                             if QColor(img.pixel(x, y)).name() == "#e600a9")
print("PROJECT " + json.dumps(out))
]==]

local function load(path, name)
  local out, ok = run(("QT_QPA_PLATFORM=offscreen /usr/bin/python3 -c %s %s %s"):format(q(QGIS_PROJECT), q(path),
    q(name)))
  assert(ok, out)
  local p = json.decode((assert(out:match("PROJECT (%b{})"), out)))
  io.stderr:write(("\n[QGIS project %s] read %s; top %s; groups %s; layers %s; relations %s; conflict pixels %d\n")
    :format(name, tostring(p.read), json.encode(p.top), json.encode(p.groups), json.encode(p.layers),
    json.encode(p.relations), p.conflict_pixels))
  return p
end

describe("QGIS 3.22 opens the project in the store (issue 37)", function()
  local world = helper.store_world{ service = "Utilities", layers = { 0, 1, 2, 3 }, syncModel = "perLayer" }
  setup(world.start)
  teardown(world.stop)

  local function check(p)
    assert.is_true(p.read)
    assert.same({ "Mains", "Pressure zones", "Valves", "Inspections", "Edits to check", "Attachments" }, p.top)
    assert.same({ "Conflicts", "Pending edits", "Rejected edits" }, p.groups["Edits to check"])
    for name, l in pairs(p.layers) do assert.is_true(l.valid, name) end
    assert.same({ 3, "EPSG:4326" }, { p.layers.Mains.features, p.layers.Mains.crs })
    assert.same({ "singleSymbol", "#73b2ff" }, p.layers["Pressure zones"].renderer)
    assert.same({ valid = true, child = "Inspections", parent = "Valves", children = 2 }, p.relations.Inspections)
    assert.same({ valid = true, child = "Attachments", parent = "Valves" },
      { valid = p.relations["Attachments of Valves"].valid, child = p.relations["Attachments of Valves"].child,
        parent = p.relations["Attachments of Valves"].parent })
  end

  it("as replica create wrote it; a conflict drawn in the conflicts' colour", function()
    local st <close> = world.create("network")
    -- a conflict on a valve as the library records one (its local geometry)
    assert(st.db:exec("INSERT INTO geoservices_conflicts (layer_id, op, global_id, detected_at, layer_name, kind, "
      .. "geom) SELECT 2, 'update', GlobalID, '2026-12-02T00:00:00Z', 'Valves', 'update/update', geom FROM Valves "
      .. "LIMIT 1"))
    local p = load(st.path, "network")
    check(p)
    assert.same({ "RuleRenderer", { { "geometry_type($geometry) = 'Point'", "#e600a9" },
      { "geometry_type($geometry) = 'Line'", "#e600a9" }, { "geometry_type($geometry) = 'Polygon'", "#e600a9" } } },
      p.layers.Conflicts.renderer)
    assert.is_true(p.conflict_pixels > 0, "no conflict drawn")
  end)

  it("in a store made before it, once opened for writing", function()
    local path
    do
      local st <close> = world.create("older")
      path = st.path
    end
    assert(run(("sqlite3 %s %s"):format(q(path), q("DROP TABLE qgis_projects; UPDATE gpkgext_geoservices_replica SET "
      .. "format = 8"))))
    local st <close> = assert(geoservices.store.open(path))
    st:close()
    check(load(path, "older"))
  end)
end)
