-- The service's symbols and labels in the store's default styles (issue 37):
-- the emulator serves the world's drawingInfo in the layer resource, and
-- `replica create` writes it into layer_styles as QGIS 3.22's QML (class
-- breaks, unique values, simple; labels), beside the aliases the style
-- already held. What QGIS itself draws: spec/qgis/styles_in_qgis.lua (make test-qgis).
local helper = require "spec.helper"

describe("the service's drawing in the store's default styles (issue 37)", function()
  local world = helper.store_world{ service = "Electric", layers = { 0, 1 }, syncModel = "perReplica" }
  setup(world.start)
  teardown(world.stop)

  it("the layer resource serves the world's drawingInfo", function()
    local layer = assert(world.client():layer_info("Electric", 0))
    assert.equal("classBreaks", layer.drawingInfo.renderer.type)
    assert.equal("HEIGHT", layer.drawingInfo.renderer.field)
    assert.equal("[NAME]", layer.drawingInfo.labelingInfo[1].labelExpression)
  end)

  it("class breaks and labels for the poles, unique values for the lines, the aliases kept", function()
    local st <close> = world.create("styles")
    local qml = {}
    for _, r in ipairs(assert(st.db:rows("SELECT f_table_name, styleQML FROM layer_styles WHERE useAsDefault"))) do
      qml[r.f_table_name] = r.styleQML
    end
    local poles = assert(qml.Poles)
    assert.truthy(poles:find('type="graduatedSymbol" attr="HEIGHT"', 1, true), poles)
    assert.truthy(poles:find('<range lower="10.5" upper="12" symbol="1" label="10.5 to 12 m" render="true"/>', 1,
      true), poles)
    assert.truthy(poles:find('<prop k="color" v="255,170,0,255"/>', 1, true), poles)
    assert.truthy(poles:find('labelsEnabled="1"', 1, true), poles)
    assert.truthy(poles:find('fieldName="NAME"', 1, true), poles)
    assert.truthy(poles:find('name="Pole name"', 1, true), poles)
    local lines = assert(qml.Lines)
    assert.truthy(lines:find('type="categorizedSymbol" attr="VOLTAGE"', 1, true), lines)
    assert.truthy(lines:find('<category value="4" symbol="1" label="4 kV" render="true"/>', 1, true), lines)
    assert.truthy(lines:find('<category value="" symbol="2" label="other voltages" render="true"/>', 1, true), lines)
    assert.truthy(lines:find('labelsEnabled="0"', 1, true), lines)
    assert.equal("", helper.validate_gpkg(st.path))
  end)

  it("mark read-only in QGIS's forms the fields the service fills in, in a store made before too", function()
    local path
    do
      local st <close> = world.create("read-only")
      path = st.path
      local qml = assert(st.db:rows("SELECT styleQML FROM layer_styles WHERE f_table_name = 'Poles'"))[1].styleQML
      assert.truthy(qml:find('styleCategories="Symbology|Labeling|Fields|Forms"', 1, true), qml)
      assert.truthy(qml:find(' <editable>\n  <field name="OBJECTID" editable="0"/>\n  <field name="GlobalID" '
        .. 'editable="0"/>\n </editable>\n', 1, true), qml)
      -- as a store of format 10 was: no editable state in its styles
      assert(st.db:exec("UPDATE layer_styles SET styleQML = replace(replace(styleQML, '|Forms', ''), "
        .. "substr(styleQML, instr(styleQML, ' <editable>'), instr(styleQML, '</editable>') + 12 - "
        .. "instr(styleQML, ' <editable>')), ''); UPDATE gpkgext_geoservices_replica SET format = 10"))
      qml = assert(st.db:rows("SELECT styleQML FROM layer_styles WHERE f_table_name = 'Poles'"))[1].styleQML
      assert.falsy(qml:find("editable", 1, true), qml)
    end
    local st <close> = assert(require("geoservices").store.open(path))
    local qml = assert(st.db:rows("SELECT styleQML FROM layer_styles WHERE f_table_name = 'Poles'"))[1].styleQML
    assert.truthy(qml:find('<field name="OBJECTID" editable="0"/>', 1, true), qml)
  end)
end)
