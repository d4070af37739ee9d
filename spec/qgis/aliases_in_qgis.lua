-- What a QGIS 3.22 user sees of a field's alias (issue 41, `make test-qgis`,
-- not in `make test`): the store's default style (layer_styles) gives the
-- field its alias, which QGIS's forms and attribute table show.
-- luacheck: std +busted
-- (run by `make test-qgis` alone: its name keeps it out of busted's default pattern)
local helper = require "spec.helper"
local json = require "geoservices.json"

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
end)
