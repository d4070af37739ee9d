-- What a QGIS 3.22 user sees of a layer opened from the store (issue 37,
-- `make test-qgis`, not in `make test`): the service's own symbols (simple,
-- unique value and class breaks renderers of its drawingInfo) and labels,
-- drawn by QGIS itself, with the aliases the default style also carries.
-- luacheck: std +busted
-- (run by `make test-qgis` alone: its name keeps it out of busted's default pattern)
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local run = helper.run_shell

-- QGIS opens the layer as a user does (its default style applies), describes
-- its renderer and labels, and renders it alone to an image: the pixels of
-- each colour asked for, and how many distinct colours the image has.
local QGIS_RENDER = [==[
import json, sys
from qgis.core import (QgsApplication, QgsVectorLayer, QgsMapSettings, QgsMapRendererSequentialJob)
from qgis.PyQt.QtCore import QSize
from qgis.PyQt.QtGui import QColor
app = QgsApplication([], False)
app.initQgis()
layer = QgsVectorLayer(sys.argv[1] + "|layername=" + sys.argv[2], sys.argv[2], "ogr")
r = layer.renderer()
out = {"valid": layer.isValid(), "renderer": r.type(),
       "aliases": {f.name(): f.alias() for f in layer.fields()}, "labels": layer.labelsEnabled(),
       "label_field": layer.labeling().settings().fieldName if layer.labeling() else None}
if r.type() == "categorizedSymbol":
    out["classes"] = [[c.value(), c.label(), c.symbol().color().name()] for c in r.categories()]
elif r.type() == "graduatedSymbol":
    out["classes"] = [[g.lowerValue(), g.upperValue(), g.label(), g.symbol().color().name()] for g in r.ranges()]
else:
    out["classes"] = [[r.symbol().color().name()]]
ms = QgsMapSettings()
ms.setLayers([layer])
ms.setBackgroundColor(QColor(255, 255, 255))
ms.setOutputSize(QSize(300, 300))
ms.setDestinationCrs(layer.crs())
ms.setExtent(layer.extent().buffered(0.002))
job = QgsMapRendererSequentialJob(ms)
job.start()
job.waitForFinished()
img = job.renderedImage()
colours = {}
for y in range(img.height()):
    for x in range(img.width()):
        c = QColor(img.pixel(x, y))
        key = "%d,%d,%d" % (c.red(), c.green(), c.blue())
        colours[key] = colours.get(key, 0) + 1
out["distinct"] = len(colours)
out["pixels"] = {want: colours.get(want, 0) for want in sys.argv[3:]}
print("RENDER " + json.dumps(out))
]==]

local function render(path, layer, ...)
  local args = { ... }
  for i, a in ipairs(args) do args[i] = q(a) end
  local out, ok = run(("QT_QPA_PLATFORM=offscreen /usr/bin/python3 -c %s %s %s %s"):format(q(QGIS_RENDER),
    q(path), q(layer), table.concat(args, " ")))
  assert(ok, out)
  local r = json.decode((assert(out:match("RENDER (%b{})"), out)))
  assert.is_true(r.valid)
  -- what QGIS showed, for the issue's closing note
  io.stderr:write(("\n[QGIS %s] renderer %s, classes %s, labels %s (%s), %d distinct colours, pixels %s\n"):format(
    layer, r.renderer, json.encode(r.classes), tostring(r.labels), r.labels and r.label_field or "none", r.distinct,
    json.encode(r.pixels)))
  return r
end

describe("QGIS 3.22 draws a layer of the store as the service does (issue 37)", function()
  local world = helper.store_world{ service = "Electric", layers = { 0, 1 }, syncModel = "perReplica" }
  setup(world.start)
  teardown(world.stop)

  it("class breaks: each pole in its height's colour, its name as label, its aliases kept", function()
    local st <close> = world.create("styles-qgis")
    -- the world's poles are 10.25 m, 11 m and 12.5 m high: one in each class
    local r = render(st.path, "Poles", "56,168,0", "255,170,0", "230,0,0")
    assert.equal("graduatedSymbol", r.renderer)
    assert.same({ { 0, 10.5, "up to 10.5 m", "#38a800" }, { 10.5, 12, "10.5 to 12 m", "#ffaa00" },
                  { 12, 20, "over 12 m", "#e60000" } }, r.classes)
    assert.is_true(r.labels)
    assert.equal("NAME", r.label_field)
    assert.equal("Pole name", r.aliases.NAME)
    for colour, n in pairs(r.pixels) do assert.is_true(n > 0, colour .. " not drawn") end
    assert.is_true(r.distinct > 3, "distinct colours: " .. r.distinct)
  end)

  it("unique values: each line in its voltage's colour, other values in the default symbol", function()
    local st <close> = world.create("styles-qgis-lines")
    local r = render(st.path, "Lines", "230,0,0", "0,92,230")
    assert.equal("categorizedSymbol", r.renderer)
    assert.same({ { "12", "12 kV", "#e60000" }, { "4", "4 kV", "#005ce6" }, { "", "other voltages", "#828282" } },
      r.classes)
    assert.is_false(r.labels)
    for colour, n in pairs(r.pixels) do assert.is_true(n > 0, colour .. " not drawn") end
    assert.is_true(r.distinct > 2, "distinct colours: " .. r.distinct)
  end)

  it("simple: every zone in the service's fill", function()
    local st <close> = world.create("styles-qgis-zones",
      { service = "Utilities", layers = { 1 }, syncModel = "perLayer" })
    local r = render(st.path, "Pressure_zones", "115,178,255")
    assert.equal("singleSymbol", r.renderer)
    assert.same({ { "#73b2ff" } }, r.classes)
    assert.is_true(r.pixels["115,178,255"] > 1000, json.encode(r.pixels))
    assert.is_true(r.distinct > 2, "distinct colours: " .. r.distinct)
  end)
end)
