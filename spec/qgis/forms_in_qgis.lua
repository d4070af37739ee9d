-- The fields a QGIS 3.22 user cannot edit in a feature's form (issue 37,
-- `make test-qgis`): those the service fills in itself, read-only as the
-- service marks them: the OBJECTID and the GlobalID, a field whose
-- `editable` is false, the editor tracking fields its `editFieldsInfo`
-- names; the others editable. Through the layer's default style (the
-- layer opened alone) and through the project in the store.
-- luacheck: std +busted
-- (run by `make test-qgis` alone: its name keeps it out of busted's default pattern)
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local run = helper.run_shell

local QGIS_FORMS = [==[
import json, os, sys
from qgis.core import QgsApplication, QgsProject, QgsVectorLayer
app = QgsApplication([], False)
app.initQgis()
def read_only(l):
    cfg = l.editFormConfig()
    return {f.name(): cfg.readOnly(i) for i, f in enumerate(l.fields())}
alone = QgsVectorLayer("%s|layername=%s" % (sys.argv[1], sys.argv[2]), sys.argv[2], "ogr")
p = QgsProject.instance()
p.read("geopackage:%s?projectName=%s" % (sys.argv[1], sys.argv[3]))
print("FORMS " + json.dumps({"alone": read_only(alone), "project": read_only(p.mapLayersByName(sys.argv[2])[0])}))
sys.stdout.flush()
os._exit(0)
]==]

describe("the feature forms in QGIS (issue 37)", function()
  local emu, dir
  setup(function()
    dir = helper.tmp_dir()
    -- the Utilities service whose valves keep editor tracking (as a real layer resource gives it) and a
    -- field the service alone writes
    local world = json.decode(helper.read_all(helper.ROOT .. "/examples/data/world.json"))
    for _, layer in ipairs(world.featureServices.Utilities.layers) do
      if layer.name == "Valves" then
        local fields = layer.fields
        fields[#fields + 1] = { name = "INSTALLED_BY", type = "esriFieldTypeString", length = 50, editable = false }
        fields[#fields + 1] = { name = "last_edited_user", type = "esriFieldTypeString", length = 255 }
        fields[#fields + 1] = { name = "last_edited_date", type = "esriFieldTypeDate", length = 8 }
        layer.editFieldsInfo = { editorField = "last_edited_user", editDateField = "last_edited_date" }
      end
    end
    helper.write_file(dir .. "/world.json", json.encode(world))
    emu = helper.start_emulator{ data = dir .. "/world.json" }
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. q(dir))
  end)

  it("leave read-only the fields the service fills in, the others editable", function()
    local c = require("geoservices").client{ url = emu.url, token = "alice-token", timeout = 30 }
    local st = assert(require("geoservices").store.create(c, dir .. "/forms.gpkg", { service = "Utilities",
      layers = { 0, 1, 2, 3 }, replicaName = "forms", syncModel = "perLayer" }, { timeout = 30, poll_interval = 0.05 }))
    st:close()
    local out, ok = run(("QT_QPA_PLATFORM=offscreen /usr/bin/python3 -c %s %s Valves forms"):format(q(QGIS_FORMS),
      q(dir .. "/forms.gpkg")))
    assert(ok, out)
    local forms = json.decode((assert(out:match("FORMS (%b{})"), out)))
    io.stderr:write("\n[QGIS read-only fields of Valves] " .. json.encode(forms) .. "\n")
    local expected = { fid = false, OBJECTID = true, GlobalID = true, VALVEID = false, TURNS = false,
                       INSTALLED_BY = true, last_edited_user = true, last_edited_date = true }
    assert.same(expected, forms.alone)
    assert.same(expected, forms.project)
  end)
end)
