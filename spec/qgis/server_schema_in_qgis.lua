-- What a QGIS 3.22 user sees after the service's administrator added a
-- field with a coded-value domain and the store synchronized (issue 37,
-- `make test-qgis`, not in `make test`): the project in the store shows the
-- field, with its alias, its values and a value map of its domain's codes.
-- luacheck: std +busted
-- (run by `make test-qgis` alone: its name keeps it out of busted's default pattern)
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local geoservices = require "geoservices"

local q = helper.shell_quote
local run = helper.run_shell

local QGIS_FIELD = [==[
import json, sys
from qgis.core import QgsApplication, QgsProject
app = QgsApplication([], False)
app.initQgis()
p = QgsProject.instance()
ok = p.read("geopackage:%s?projectName=%s" % (sys.argv[1], sys.argv[2]))
layer = p.mapLayersByName(sys.argv[3])[0]
i = layer.fields().indexOf(sys.argv[4])
out = {"read": ok, "valid": layer.isValid(), "index": i}
if i >= 0:
    w = layer.editorWidgetSetup(i)
    out.update({"alias": layer.fields()[i].alias(), "widget": w.type(), "config": w.config(),
                "read_only": layer.editFormConfig().readOnly(i),
                "values": sorted(str(f[sys.argv[4]]) for f in layer.getFeatures())})
print("FIELD " + json.dumps(out))
]==]

-- A user's change saved in the project in the file, as QGIS saves it (Project > Save To > GeoPackage)
local QGIS_SAVE = [==[
import sys
from qgis.core import QgsApplication, QgsProject
app = QgsApplication([], False)
app.initQgis()
p = QgsProject.instance()
uri = "geopackage:%s?projectName=%s" % (sys.argv[1], sys.argv[2])
assert p.read(uri)
layer = p.mapLayersByName(sys.argv[3])[0]
layer.setFieldAlias(layer.fields().indexOf(sys.argv[4]), sys.argv[5])
assert p.write(uri)
print("SAVED")
]==]

describe("QGIS 3.22 after the server added a field (issue 37)", function()
  local emu, dir
  setup(function()
    dir = helper.tmp_dir()
    emu = helper.start_emulator()
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. q(dir))
  end)
  before_each(function() emu:reset() end)

  it("shows the field in the project with its alias, values and a value map", function()
    local c = geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 }
    local st = assert(geoservices.store.create(c, dir .. "/valves.gpkg", { service = "Utilities", layers = { 2 },
      replicaName = "valves", syncModel = "perLayer" }, { timeout = 30, poll_interval = 0.05 }))
    local a = geoservices.client{ url = emu.url, token = "admin-token", timeout = 30 }
    assert(a:post(a:url_for("admin/services/Utilities.FeatureServer/2/addToDefinition"), { f = "json",
      addToDefinition = json.encode{ fields = { { name = "STATUS", type = "esriFieldTypeString", length = 10,
        alias = "Valve status", defaultValue = "open", domain = { type = "codedValue", name = "ValveStatus",
        codedValues = { { name = "Open", code = "open" }, { name = "Shut", code = "shut" } } } } } } }))
    a:close()
    assert(st:sync(c, { timeout = 30, poll_interval = 0.05 }))
    st:close()
    c:close()
    local out, ok = run(("QT_QPA_PLATFORM=offscreen /usr/bin/python3 -c %s %s valves Valves STATUS"):format(
      q(QGIS_FIELD), q(dir .. "/valves.gpkg")))
    assert(ok, out)
    local f = json.decode((assert(out:match("FIELD (%b{})"), out)))
    io.stderr:write("\n[QGIS project, Valves.STATUS after the server added it] " .. json.encode(f) .. "\n")
    assert.is_true(f.read)
    assert.is_true(f.valid)
    assert.is_true(f.index >= 0)
    assert.equal("Valve status", f.alias)
    assert.equal("ValueMap", f.widget)
    local codes = {}
    for _, entry in ipairs(f.config.map or {}) do
      for name, code in pairs(entry) do codes[#codes + 1] = name .. "=" .. code end
    end
    table.sort(codes)
    assert.same({ "Open=open", "Shut=shut" }, codes)
    assert.same({ "open", "open" }, f.values)
  end)

  it("shows the fields with aliases, read-only states in a project the user saved in QGIS, theirs kept", function()
    local c = geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 }
    local st = assert(geoservices.store.create(c, dir .. "/saved.gpkg", { service = "Utilities", layers = { 2 },
      replicaName = "saved", syncModel = "perLayer" }, { timeout = 30, poll_interval = 0.05 }))
    local out, ok = run(("QT_QPA_PLATFORM=offscreen /usr/bin/python3 -c %s %s saved Valves VALVEID %s"):format(
      q(QGIS_SAVE), q(dir .. "/saved.gpkg"), q("Valve tag")))
    assert(ok and out:find("SAVED", 1, true), out)
    local a = geoservices.client{ url = emu.url, token = "admin-token", timeout = 30 }
    assert(a:post(a:url_for("admin/services/Utilities.FeatureServer/2/addToDefinition"), { f = "json",
      addToDefinition = json.encode{ fields = { { name = "STATUS", type = "esriFieldTypeString", length = 10,
        alias = "Valve status", defaultValue = "open", domain = { type = "codedValue", name = "ValveStatus",
        codedValues = { { name = "Open", code = "open" }, { name = "Shut", code = "shut" } } } },
        { name = "CHECKED_BY", type = "esriFieldTypeString", length = 20, editable = false } } } }))
    a:close()
    local result = assert(st:sync(c, { timeout = 30, poll_interval = 0.05 }))
    st:close()
    c:close()
    local said = table.concat(result.store_notes or {}, "\n")
    local function field(name)
      out, ok = run(("QT_QPA_PLATFORM=offscreen /usr/bin/python3 -c %s %s saved Valves %s"):format(
        q(QGIS_FIELD), q(dir .. "/saved.gpkg"), name))
      assert(ok, out)
      local f = json.decode((assert(out:match("FIELD (%b{})"), out)))
      io.stderr:write(("\n[QGIS, the user's saved project, Valves.%s after the server added STATUS] %s\n"):format(
        name, json.encode(f)))
      assert.is_true(f.read)
      assert.is_true(f.valid)
      assert.is_true(f.index >= 0)
      return f
    end
    local status = field("STATUS")
    assert.equal("Valve status", status.alias, said)
    assert.equal("ValueMap", status.widget)
    assert.same({ "open", "open" }, status.values)
    assert.is_false(status.read_only)
    assert.is_true(field("CHECKED_BY").read_only) -- the service fills it in
    local valveid = field("VALVEID")
    assert.equal("Valve tag", valveid.alias) -- the user's own, kept
    assert.is_false(valveid.read_only)
  end)

  it("shows a field the server deleted as local only: its label says so, its codes' names stay", function()
    local c = geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 }
    local st = assert(geoservices.store.create(c, dir .. "/kept.gpkg", { service = "Utilities", layers = { 2 },
      replicaName = "kept", syncModel = "perLayer" }, { timeout = 30, poll_interval = 0.05 }))
    local a = geoservices.client{ url = emu.url, token = "admin-token", timeout = 30 }
    local function admin(op, body)
      assert(a:post(a:url_for("admin/services/Utilities.FeatureServer/2/" .. op), { f = "json",
        [op] = json.encode(body) }))
    end
    admin("updateDefinition", { fields = { { name = "TURNS", alias = "Turns to close",
      domain = { type = "range", name = "TurnsRange", range = { 0, 25 } } } } })
    admin("addToDefinition", { fields = { { name = "KIND", type = "esriFieldTypeString", length = 10,
      alias = "Valve kind", defaultValue = "gate", domain = { type = "codedValue", name = "ValveKind",
      codedValues = { { name = "Gate", code = "gate" }, { name = "Ball", code = "ball" } } } } } })
    assert(st:sync(c, { timeout = 30, poll_interval = 0.05 }))
    admin("deleteFromDefinition", { fields = { { name = "TURNS" }, { name = "KIND" } } })
    a:close()
    assert(st:sync(c, { timeout = 30, poll_interval = 0.05 }))
    st:close()
    c:close()
    local function field(name)
      local out, ok = run(("QT_QPA_PLATFORM=offscreen /usr/bin/python3 -c %s %s kept Valves %s"):format(
        q(QGIS_FIELD), q(dir .. "/kept.gpkg"), name))
      assert(ok, out)
      local f = json.decode((assert(out:match("FIELD (%b{})"), out)))
      io.stderr:write(("\n[QGIS project, Valves.%s after the server deleted it] %s\n"):format(name, json.encode(f)))
      assert.is_true(f.read)
      assert.is_true(f.valid)
      assert.is_true(f.index >= 0)
      return f
    end
    local turns = field("TURNS")
    assert.equal("Turns to close (local only)", turns.alias)
    assert.not_equal("Range", turns.widget) -- the server's range holds it no more
    local kind = field("KIND")
    assert.equal("Valve kind (local only)", kind.alias)
    assert.equal("ValueMap", kind.widget)
    assert.same({ "gate", "gate" }, kind.values)
  end)
end)
