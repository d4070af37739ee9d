-- The QGIS project in the store (issue 37): `replica create` writes it in
-- QGIS's own table (qgis_projects: the .qgz as hexadecimal text, as QGIS
-- 3.22 writes it), and a store made before gains it (and the service's
-- styles) at its first open for writing (format 9). What QGIS itself loads
-- from it: spec/qgis/project_in_qgis.lua (make test-qgis).
local helper = require "spec.helper"
local geoservices = require "geoservices"

local q = helper.shell_quote
local run = helper.run_shell

-- the .qgs inside a stored project (unzip of the decoded content)
local function qgs(path, name)
  local out, ok = run(("sqlite3 %s %s | xxd -r -p > %s.qgz && unzip -p %s.qgz"):format(q(path),
    q(("SELECT content FROM qgis_projects WHERE name = '%s'"):format(name)), q(path), q(path)))
  assert(ok, out)
  return out
end

describe("the QGIS project in the store (issue 37)", function()
  local world = helper.store_world{ service = "Utilities", layers = { 0, 1, 2, 3 }, syncModel = "perLayer" }
  setup(world.start)
  teardown(world.stop)

  it("is written by replica create: the service's layers, the edits' group, the relations", function()
    local st <close> = world.create("network")
    local rows = assert(st.db:rows("SELECT name, metadata, substr(content, 1, 8) AS magic FROM qgis_projects"))
    assert.equal(1, #rows)
    assert.equal("network", rows[1].name)
    assert.equal("504b0304", rows[1].magic) -- a zip, in hexadecimal as QGIS stores it
    assert.truthy(rows[1].metadata:find('"last_modified_time"', 1, true), rows[1].metadata)
    local text = qgs(st.path, "network")
    for _, t in ipairs({ "Mains", "Pressure_zones", "Valves", "Inspections", "geoservices_conflicts",
                         "geoservices_pending", "geoservices_rejected", "geoservices_attachments" }) do
      assert.truthy(text:find("./network.gpkg|layername=" .. t .. "</datasource>", 1, true), t)
    end
    assert.truthy(text:find('<layer-tree-group name="Edits to check"', 1, true), text)
    assert.truthy(text:find('name="Inspections" referencingLayer="geoservices_Inspections" '
      .. 'referencedLayer="geoservices_Valves"', 1, true), text)
    assert.truthy(text:find('<fieldRef referencingField="parent_global_id" referencedField="GlobalID"/>', 1, true),
      text)
    assert.truthy(text:find('<authid>EPSG:4326</authid>', 1, true), text)
    assert.equal("", helper.validate_gpkg(st.path))
  end)

  it("comes to a store made before it at its first open for writing, with the service's styles", function()
    local path
    do
      local st <close> = world.create("older")
      path = st.path
    end
    -- as a format-8 store was: no project, the aliases-only style
    assert(run(("sqlite3 %s %s"):format(q(path), q("DROP TABLE qgis_projects; UPDATE layer_styles SET styleQML = "
      .. "'<qgis styleCategories=\"Fields\"></qgis>', description = 'the server''s field aliases (written by "
      .. "geoservices)'; UPDATE gpkgext_geoservices_replica SET format = 8"))))
    local ro <close> = assert(geoservices.store.open(path, { readonly = true }))
    assert.equal(8, ro.format)
    ro:close()
    local st <close> = assert(geoservices.store.open(path))
    assert.equal(require("geoservices.store.file.schema").FORMAT, st.format)
    assert.same({ { name = "older" } }, st.db:rows("SELECT name FROM qgis_projects"))
    local styles = assert(st.db:rows("SELECT styleQML FROM layer_styles WHERE f_table_name = 'Pressure_zones'"))
    assert.equal(1, #styles)
    assert.truthy(styles[1].styleQML:find('<prop k="color" v="115,178,255,255"/>', 1, true), styles[1].styleQML)
    assert.truthy(qgs(path, "older"):find('<prop k="color" v="115,178,255,255"/>', 1, true))
  end)
end)
