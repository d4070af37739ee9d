-- A field's alias shows where the user looks (issue 41): in QGIS 3.22's
-- forms and attribute table, through a default style of the layer in the
-- GeoPackage's layer_styles table (QGIS loads a layer's default style from
-- there when it opens it; its OGR provider reads no alias of GDAL 3.6,
-- whose GeoPackage driver reads only column_name, mime_type and
-- constraint_name of gpkg_data_columns). The standard's gpkg_data_columns
-- keep the alias as name and title (GDAL from 3.7 on reads the name as the
-- field's alternative name), and GDAL's validator stays clean. What QGIS
-- itself shows: spec/qgis/aliases_in_qgis.lua (make test-qgis).
local helper = require "spec.helper"

local q = helper.shell_quote
local run = helper.run_shell

describe("field aliases where the user looks (issue 41)", function()
  local world = helper.store_world{ service = "Electric", layers = { 0, 1 }, syncModel = "perReplica" }
  setup(world.start)
  teardown(world.stop)

  it("a default style per layer in layer_styles holds the aliases; the standard's columns and validator stay right",
    function()
      local st <close> = world.create("aliases")
      local rows = assert(st.db:rows("SELECT f_table_name, f_geometry_column, styleName, useAsDefault, styleQML "
        .. "FROM layer_styles ORDER BY f_table_name"))
      assert.equal(2, #rows)
      assert.same({ "Lines", "geom", "Lines", 1 }, { rows[1].f_table_name, rows[1].f_geometry_column,
        rows[1].styleName, rows[1].useAsDefault })
      assert.truthy(rows[2].styleQML:find('<alias field="NAME" index="', 1, true), rows[2].styleQML)
      assert.truthy(rows[2].styleQML:find('name="Pole name"', 1, true), rows[2].styleQML)
      assert.same({ { name = "Pole name", title = "Pole name" } }, st.db:rows("SELECT name, title FROM "
        .. "gpkg_data_columns WHERE table_name = 'Poles' AND column_name = 'NAME'"))
      assert.equal("", helper.validate_gpkg(st.path))
      -- registered as QGIS registers it: GDAL lists it as a table, and reads the layers as before
      local out = run("ogrinfo -q " .. q(st.path))
      assert.truthy(out:find("layer_styles", 1, true), out)
      assert.falsy(out:find("ERROR", 1, true), out)
    end)
end)
