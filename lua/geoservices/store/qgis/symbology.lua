--- A layer's symbols and labels as the service draws them (issue 37): the
-- `drawingInfo` of its layer resource (simple, unique value and class breaks
-- renderers, esriSMS/esriSLS/esriSFS symbols, labelingInfo) as the QGIS 3.22
-- QML elements of its default style (`renderer-v2`, `labeling`, `layerOpacity`).
--
-- The service's JSON: ArcGIS REST API, "Renderer objects" and "Symbol
-- objects" (developers.arcgis.com/documentation/common-data-types/renderer-objects.htm,
-- symbol-objects.htm): colors are [r, g, b, alpha 0-255], sizes and widths in
-- points, transparency 0-100. What the service gives and QGIS cannot draw
-- (a picture marker, a second or third unique-value field, a visual variable)
-- falls back to a plain symbol of the layer's geometry: the layer still draws.
-- @module geoservices.store.qgis.symbology
-- @local

local symbology = {}

local function xml(s)
  return (tostring(s):gsub("[&<>\"']", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;",
                                         ["'"] = "&apos;" }))
end

-- an Esri color [r, g, b, a] as QGIS writes one: "r,g,b,a"; none is transparent
local function color(c)
  if type(c) ~= "table" then return "0,0,0,0" end
  local parts = {}
  for i = 1, 4 do
    local v = math.tointeger(math.floor((tonumber(c[i]) or (i == 4 and 255 or 0)) + 0.5)) or 0
    parts[i] = tostring(math.max(0, math.min(255, v)))
  end
  return table.concat(parts, ",")
end

local function num(v, default)
  v = tonumber(v)
  if not v then return default end
  return v
end

local MARKERS = { esriSMSCircle = "circle", esriSMSSquare = "square", esriSMSDiamond = "diamond",
                  esriSMSCross = "cross", esriSMSX = "cross2", esriSMSTriangle = "triangle" }
local LINES = { esriSLSSolid = "solid", esriSLSDash = "dash", esriSLSDot = "dot", esriSLSDashDot = "dash dot",
                esriSLSDashDotDot = "dash dot dot", esriSLSNull = "no" }
local FILLS = { esriSFSSolid = "solid", esriSFSNull = "no", esriSFSHorizontal = "horizontal",
                esriSFSVertical = "vertical", esriSFSCross = "cross", esriSFSDiagonalCross = "diagonal_x",
                esriSFSBackwardDiagonal = "b_diagonal", esriSFSForwardDiagonal = "f_diagonal" }

-- the QGIS symbol type of a layer's geometry kind (schema.layer_spec's geometry_kind)
local function kind_of(geometry_kind)
  local k = tostring(geometry_kind or ""):upper()
  if k:find("POLYGON") or k:find("SURFACE") then return "fill" end
  if k:find("LINE") or k:find("CURVE") then return "line" end
  if k:find("POINT") then return "marker" end
  return nil
end

local function props(list)
  local out = {}
  for _, kv in ipairs(list) do
    out[#out + 1] = ('     <prop k="%s" v="%s"/>'):format(xml(kv[1]), xml(kv[2]))
  end
  return table.concat(out, "\n")
end

-- one symbol layer: QGIS's SimpleMarker, SimpleLine or SimpleFill from an Esri symbol (or a plain one)
local function symbol_layer(kind, s)
  s = type(s) == "table" and s or {}
  local outline = type(s.outline) == "table" and s.outline or {}
  local class, p
  if kind == "marker" then
    local plain = s.type ~= "esriSMS"
    class = "SimpleMarker"
    p = { { "name", MARKERS[s.style] or "circle" },
          { "color", plain and "90,90,90,255" or color(s.color) },
          { "outline_color", plain and "35,35,35,255" or color(outline.color) },
          { "outline_style", (plain or s.outline) and "solid" or "no" },
          { "outline_width", tostring(num(outline.width, plain and 0.75 or 0)) }, { "outline_width_unit", "Point" },
          { "size", tostring(num(s.size, 8)) }, { "size_unit", "Point" },
          { "angle", tostring(-num(s.angle, 0)) } }
  elseif kind == "line" then
    local line = s.type == "esriSLS" and s or (type(s.outline) == "table" and s.outline) or {}
    class = "SimpleLine"
    p = { { "line_color", line.color and color(line.color) or "90,90,90,255" },
          { "line_style", LINES[line.style] or "solid" },
          { "line_width", tostring(num(line.width, 1)) }, { "line_width_unit", "Point" } }
  else
    local plain = s.type ~= "esriSFS"
    class = "SimpleFill"
    p = { { "color", plain and "190,190,190,255" or color(s.color) },
          { "style", plain and "solid" or (FILLS[s.style] or "solid") },
          { "outline_color", (plain or not s.outline) and "35,35,35,255" or color(outline.color) },
          { "outline_style", (plain or s.outline) and (LINES[outline.style] or "solid") or "no" },
          { "outline_width", tostring(num(outline.width, 0.75)) }, { "outline_width_unit", "Point" } }
  end
  return ('    <layer class="%s" enabled="1" locked="0" pass="0">\n%s\n    </layer>'):format(class, props(p))
end

local function symbol(kind, name, s)
  return ('   <symbol type="%s" name="%s" alpha="1" clip_to_extent="1" force_rhr="0">\n%s\n   </symbol>'):format(
    kind, xml(name), symbol_layer(kind, s))
end

local function value_text(v)
  if math.type(v) == "float" and v == math.floor(v) and v > -2 ^ 53 and v < 2 ^ 53 then
    return tostring(math.tointeger(v))
  end
  return tostring(v)
end

-- QGIS's renderer-v2 element from an Esri renderer
local function renderer(kind, r)
  r = type(r) == "table" and r or {}
  local head = '  <renderer-v2 %s symbollevels="0" enableorderby="0" forceraster="0">\n'
  if r.type == "uniqueValue" and type(r.field1) == "string" and type(r.uniqueValueInfos) == "table" then
    local cats, syms = {}, {}
    for i, info in ipairs(r.uniqueValueInfos) do
      local name = tostring(i - 1)
      cats[#cats + 1] = ('   <category value="%s" symbol="%s" label="%s" render="true"/>'):format(
        xml(value_text(info.value)), name, xml(info.label or value_text(info.value)))
      syms[#syms + 1] = symbol(kind, name, info.symbol)
    end
    if r.defaultSymbol ~= nil and r.defaultSymbol ~= false then
      -- the category of an empty value draws every other value
      local name = tostring(#syms)
      cats[#cats + 1] = ('   <category value="" symbol="%s" label="%s" render="true"/>'):format(name,
        xml(type(r.defaultLabel) == "string" and r.defaultLabel or "other values"))
      syms[#syms + 1] = symbol(kind, name, r.defaultSymbol)
    end
    return head:format(('type="categorizedSymbol" attr="%s"'):format(xml(r.field1)))
      .. "  <categories>\n" .. table.concat(cats, "\n") .. "\n  </categories>\n  <symbols>\n"
      .. table.concat(syms, "\n") .. "\n  </symbols>\n  </renderer-v2>"
  elseif r.type == "classBreaks" and type(r.field) == "string" and type(r.classBreakInfos) == "table" then
    local ranges, syms = {}, {}
    local lower = num(r.minValue, nil)
    for i, info in ipairs(r.classBreakInfos) do
      local upper = num(info.classMaxValue, 0)
      local low = num(info.classMinValue, lower or upper)
      local name = tostring(i - 1)
      ranges[#ranges + 1] = ('   <range lower="%s" upper="%s" symbol="%s" label="%s" render="true"/>'):format(
        value_text(low), value_text(upper), name,
        xml(info.label or (value_text(low) .. " - " .. value_text(upper))))
      syms[#syms + 1] = symbol(kind, name, info.symbol)
      lower = upper
    end
    return head:format(('type="graduatedSymbol" attr="%s" graduatedMethod="GraduatedColor"'):format(xml(r.field)))
      .. "  <ranges>\n" .. table.concat(ranges, "\n") .. "\n  </ranges>\n  <symbols>\n"
      .. table.concat(syms, "\n") .. "\n  </symbols>\n  </renderer-v2>"
  end
  return head:format('type="singleSymbol"') .. "  <symbols>\n"
    .. symbol(kind, "0", r.type == "simple" and r.symbol or nil) .. "\n  </symbols>\n  </renderer-v2>"
end

-- the field a label shows: "[NAME]" (labelExpression) or "$feature.NAME" (Arcade), when it is one field
local function label_field(info)
  local arcade = type(info.labelExpressionInfo) == "table" and info.labelExpressionInfo.expression
  local f = type(arcade) == "string" and arcade:match("^%s*%$feature%.([%w_]+)%s*$")
  if not f and type(info.labelExpression) == "string" then f = info.labelExpression:match("^%s*%[([^%]]+)%]%s*$") end
  return f
end

-- QGIS's labeling element from the first labelingInfo that names one field
local function labeling(label_infos)
  if type(label_infos) ~= "table" then return nil end
  for _, info in ipairs(label_infos) do
    local field = type(info) == "table" and label_field(info)
    if field then
      local ts = type(info.symbol) == "table" and info.symbol or {}
      local font = type(ts.font) == "table" and ts.font or {}
      return '  <labeling type="simple">\n   <settings calloutType="simple">\n'
        .. ('    <text-style fieldName="%s" isExpression="0" fontFamily="%s" fontSize="%s" fontSizeUnit="Point" '
          .. 'textColor="%s" textOpacity="1"/>\n'):format(xml(field), xml(font.family or "Sans Serif"),
          value_text(num(font.size, 9)), ts.color and color(ts.color) or "0,0,0,255")
        .. "   </settings>\n  </labeling>"
    end
  end
  return nil
end

--- The QML elements of a layer's symbology and labels, or nil when the service draws nothing QGIS can.
-- @tparam table spec the layer's spec (schema.layer_spec: geometry_kind)
-- @tparam ?table drawing_info the layer resource's `drawingInfo`
-- @treturn ?string the elements, to go inside the QML's `qgis` element
-- @treturn ?boolean whether labels are on
function symbology.qml(spec, drawing_info)
  local kind = kind_of(spec.geometry_kind)
  if not kind or type(drawing_info) ~= "table" then return nil end
  local parts = { renderer(kind, drawing_info.renderer) }
  local labels = drawing_info.labelingInfo ~= nil and labeling(drawing_info.labelingInfo)
  if labels then parts[#parts + 1] = labels end
  local transparency = num(drawing_info.transparency, 0)
  parts[#parts + 1] = ("  <layerOpacity>%s</layerOpacity>"):format(
    value_text(math.max(0, math.min(100, 100 - transparency)) / 100))
  return table.concat(parts, "\n"), labels ~= nil
end

--- The renderer of a table of any geometry (a GeoPackage GEOMETRY column, as the
-- conflicts' layer): one rule per kind, each in the given colour.
-- @tparam {number,...} rgba an Esri color
-- @treturn string the renderer-v2 element
function symbology.any_geometry(rgba)
  local outline = { color = { 0, 0, 0, 255 }, width = 1 }
  local rules = { { "Point", "marker", { type = "esriSMS", style = "esriSMSDiamond", color = rgba, size = 11,
                                          outline = outline } },
                  { "Line", "line", { type = "esriSLS", style = "esriSLSSolid", color = rgba, width = 3 } },
                  { "Polygon", "fill", { type = "esriSFS", style = "esriSFSBackwardDiagonal", color = rgba,
                                          outline = { color = rgba, width = 2 } } } }
  local lines, syms = {}, {}
  for i, r in ipairs(rules) do
    lines[#lines + 1] = ([[   <rule key="%s" filter="geometry_type($geometry) = '%s'" symbol="%d" label="%s"/>]])
      :format(r[1]:lower(), r[1], i - 1, r[1]:lower() .. "s")
    syms[#syms + 1] = symbol(r[2], tostring(i - 1), r[3])
  end
  return '  <renderer-v2 type="RuleRenderer" symbollevels="0" enableorderby="0" forceraster="0">\n'
    .. '  <rules key="root">\n' .. table.concat(lines, "\n") .. "\n  </rules>\n  <symbols>\n"
    .. table.concat(syms, "\n") .. "\n  </symbols>\n  </renderer-v2>"
end

return symbology
