-- What a QGIS 3.22 user sees of a field's alias (issue 41, `make test-qgis`,
-- not in `make test`): the store's default style (layer_styles) gives the
-- field its alias, which QGIS's forms and attribute table show.
-- luacheck: std +busted
-- (run by `make test-qgis` alone: its name keeps it out of busted's default pattern)
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local run = helper.run_shell

-- What QGIS (python3-qgis, headless) makes of a layer's fields: name -> alias.
local QGIS_ALIASES = [[
import json, sys
from qgis.core import QgsApplication, QgsVectorLayer
app = QgsApplication([], False)
app.initQgis()
layer = QgsVectorLayer(sys.argv[1] + "|layername=" + sys.argv[2], "l", "ogr")
print("ALIASES " + json.dumps({f.name(): f.alias() for f in layer.fields()}))
]]

-- A field's alias and its widget (a coded-value domain is a value map): name -> {alias, widget, map}.
local QGIS_WIDGET = [[
import json, sys
from qgis.core import QgsApplication, QgsVectorLayer
app = QgsApplication([], False)
app.initQgis()
layer = QgsVectorLayer(sys.argv[1] + "|layername=" + sys.argv[2], "l", "ogr")
i = layer.fields().indexOf(sys.argv[3])
w = layer.editorWidgetSetup(i)
print("WIDGET " + json.dumps({"alias": layer.fields()[i].alias(), "type": w.type(), "config": w.config()}))
]]

describe("QGIS 3.22 shows a field's alias (issue 41)", function()
  local world = helper.store_world{ service = "Electric", layers = { 0, 1 }, syncModel = "perReplica" }
  setup(world.start)
  teardown(world.stop)

  it("in the layer's fields, as the server names them", function()
    local st <close> = world.create("aliases-qgis")
    local out, ok = run(("QT_QPA_PLATFORM=offscreen /usr/bin/python3 -c %s %s Poles"):format(q(QGIS_ALIASES),
      q(st.path)))
    assert(ok, out)
    local aliases = json.decode((assert(out:match("ALIASES (%b{})"), out)))
    assert.equal("Pole name", aliases.NAME)
    assert.equal("Height (m)", aliases.HEIGHT)
    assert.equal("", aliases.OBJECTID) -- an alias equal to the name is none
  end)

  it("beside the value map of a coded-value domain, which the style leaves as it is", function()
    local store = require "geoservices.store"
    local path = world.dir .. "/domain.gpkg"
    local status = { type = "codedValue", name = "PoleStatus",
                     codedValues = { { name = "In service", code = 1 }, { name = "Retired", code = 2 } } }
    local st = assert(store.create_from(path, { service = "S", replicaID = "{5E1A0C2B-1111-4A5B-9C8D-000000000041}",
      syncModel = "perReplica", syncDirection = "bidirectional", replicaServerGen = 1 }, { {
        id = 0, name = "Poles", type = "Feature Layer", geometryType = "esriGeometryPoint", objectIdField = "OBJECTID",
        globalIdField = "GlobalID", extent = { spatialReference = { wkid = 4326 } }, fields = {
          { name = "OBJECTID", type = "esriFieldTypeOID" },
          { name = "GlobalID", type = "esriFieldTypeGlobalID", length = 38 },
          { name = "STATUS", type = "esriFieldTypeSmallInteger", alias = "Status", domain = status } } } }))
    st:close()
    local out, ok = run(("QT_QPA_PLATFORM=offscreen /usr/bin/python3 -c %s %s Poles STATUS"):format(q(QGIS_WIDGET),
      q(path)))
    assert(ok, out)
    local w = json.decode((assert(out:match("WIDGET (%b{})"), out)))
    assert.equal("Status", w.alias)
    assert.equal("ValueMap", w.type)
    assert.same({ { ["In service"] = "1" }, { Retired = "2" } }, w.config.map)
  end)
end)
