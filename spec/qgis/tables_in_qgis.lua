-- What QGIS 3.22 offers when a user opens the store itself (issue 37,
-- `make test-qgis`): the layers of its data source (the list of its
-- "Add layer" dialog and of its browser), each loading: the service's
-- layers, the conflicts and the pending and refused edits, the sync log, the
-- photos, and none of the library's own tables (which failed to load there).
-- The same through GDAL: spec/store/hidden_tables_spec.lua.
-- luacheck: std +busted
-- (run by `make test-qgis` alone: its name keeps it out of busted's default pattern)
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local run = helper.run_shell

local function offered(path)
  local out, ok = run("QT_QPA_PLATFORM=offscreen /usr/bin/python3 spec/qgis/qgis_schema.py layers " .. q(path))
  local last = out:match("([^\n]+)\n?$")
  local answer = last and json.decode(last)
  assert(ok and type(answer) == "table" and answer.ok, out)
  io.stderr:write(("\n[QGIS offers %d layers] %s\n"):format(#answer.layers, json.encode(answer.layers)))
  return answer.layers
end

describe("the store opened in QGIS (issue 37)", function()
  local world = helper.store_world{ service = "Utilities", layers = { 0, 1, 2, 3 }, syncModel = "perLayer" }
  setup(world.start)
  teardown(world.stop)

  local function check(path)
    local names, invalid = {}, {}
    for _, l in ipairs(offered(path)) do
      names[#names + 1] = l.name
      if not l.valid then invalid[#invalid + 1] = l.name end
    end
    table.sort(names)
    assert.same({ "Inspections", "Mains", "Pressure_zones", "Valves", "geoservices_attachments",
                  "geoservices_conflict_fields", "geoservices_conflicts", "geoservices_pending", "geoservices_rejected",
                  "geoservices_sync_log" }, names)
    assert.same({}, invalid)
  end

  it("offers the service's layers and the tables meant for its user, each loading", function()
    local st = world.create("network")
    local path = st.path
    st:close()
    check(path)
  end)

  it("offers the same for a store made before (format 9) once any command opened it", function()
    local path = world.dir .. "/format9.gpkg"
    assert(os.execute(("cp spec/fixtures/store/format9.gpkg %s"):format(q(path))))
    assert(require("geoservices").store.open(path)):close()
    check(path)
  end)
end)
