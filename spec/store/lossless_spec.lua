-- The replica store keeps what the server holds (issue 28): Z and M
-- ordinates from the download to the upload, geometry columns and blobs
-- that GDAL's GeoPackage validator accepts for every geometry type.
local data = require "spec.support.store_data"
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local scripted = require "spec.support.scripted_store"
local store = require "geoservices.store"

local q = helper.shell_quote

local run = helper.run_shell

-- GDAL's validator (python3-gdal: the system Python, whatever python3 the PATH gives):
-- its complaints, and how many of them are GDAL 3.6's own mistake about
-- empty geometries. Its Req 152 check reads the empty flag from bit 3 of
-- the header's flags; 12-128r18 2.1.3 puts it in bit 4, where GDAL's own
-- writer puts it too (spec below): every empty geometry, ours or GDAL's, is
-- reported, and nothing else is excused.
local EMPTY_FLAG_COMPLAINT = "Req 152: Inconsistent empty_flag vs geometry content"
local function validate(path)
  local out = run("/usr/bin/python3 -m osgeo_utils.samples.validate_gpkg -k " .. q(path))
  local complaints, empty_flag = {}, 0
  for line in out:gmatch("[^\n]+") do
    if line == EMPTY_FLAG_COMPLAINT then empty_flag = empty_flag + 1 else complaints[#complaints + 1] = line end
  end
  return table.concat(complaints, "\n"), empty_flag
end

-- the Utilities service, its result file and the edits a sync sends (spec/support/scripted_store.lua)
local FIELDS, layer, gid, write_result = scripted.FIELDS, scripted.layer, scripted.gid, scripted.write_result

local function core_hex(s)
  return (s:gsub(".", function(c) return ("%02X"):format(c:byte()) end))
end

-- Coordinates whose every bit matters: 0.1 + 0.2 is not 0.3.
local Z, M = 512.25, 7.5
local X, Y = 6000000.123456789, 2000000.987654321
local ODD = 0.1 + 0.2

-- layer id -> its features (Esri JSON as a server sends them); geometries
-- with and without their own hasZ/hasM, z before and after the paths.
local ZM_FEATURES = {
  [0] = { -- a 3D pole with a measure
    { x = X, y = Y, z = Z, m = M },
    { x = X + 1, y = Y + 1, z = ODD }, -- no m: none stored
    { x = json.null }, -- empty
  },
  [1] = { -- lines with Z only; the second says so itself, after its paths
    { paths = { { { X, Y, Z }, { X + 10, Y + 10, Z + ODD } } } },
    { paths = { { { X, Y, 1 }, { X + 5, Y, 2 } }, { { X + 20, Y, 3 }, { X + 30, Y, 4 } } }, hasZ = true },
    { paths = json.array() }, -- empty
  },
  [2] = { -- polygons with M only: the third ordinate is the measure
    { rings = { { { X, Y, 1 }, { X, Y + 10, 2 }, { X + 10, Y + 10, 3 }, { X + 10, Y, 4 }, { X, Y, 1 } } } },
    { rings = json.array() }, -- empty
  },
  [3] = { -- multipoints with both
    { points = { { X, Y, Z, M }, { X + 1, Y + 2, ODD, -ODD } }, hasZ = true, hasM = true },
  },
}

local ZM_LAYERS = {
  layer(0, "Poles", "esriGeometryPoint", true, true),
  layer(1, "Mains", "esriGeometryPolyline", true, false),
  layer(2, "Zones", "esriGeometryPolygon", false, true),
  layer(3, "Marks", "esriGeometryMultipoint", true, true),
}

local REPLICA = scripted.replica("{5E1A0C2B-1111-4A5B-9C8D-000000000028}")

-- The WKT of one feature as ogrinfo prints it.
local function ogr_wkt(path, layer_name, where)
  local out, ok = run(("ogrinfo -q -al -where %s %s %s"):format(q(where), q(path), q(layer_name)))
  assert(ok, out)
  local GEOMETRY = { POINT = true, MULTIPOINT = true, LINESTRING = true, MULTILINESTRING = true, POLYGON = true,
                     MULTIPOLYGON = true, CIRCULARSTRING = true, COMPOUNDCURVE = true, CURVEPOLYGON = true,
                     MULTICURVE = true, MULTISURFACE = true }
  for line in out:gmatch("[^\n]+") do
    local keyword = line:match("^%s+(%u+) ")
    if GEOMETRY[keyword] then return line:match("^%s+(.-)%s*$") end
  end
  error("no geometry in:\n" .. out)
end

describe("the replica store keeps Z and M (issue 28)", function()
  local dir, path

  setup(function()
    dir = helper.tmp_dir()
    path = dir .. "/zm.gpkg"
    write_result(dir .. "/zm.json", ZM_FEATURES)
    local st = assert(store.create_from(path, REPLICA, ZM_LAYERS, dir .. "/zm.json"))
    st:close()
  end)

  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  it("declares each geometry column with the layer's z and m, and GDAL reads them so", function()
    local st <close> = assert(store.open(path))
    local rows = assert(st.db:rows("SELECT table_name, z, m FROM gpkg_geometry_columns "
      .. "WHERE table_name <> 'geoservices_conflicts' ORDER BY table_name"))
    assert.same({ { table_name = "Mains", z = 1, m = 0 }, { table_name = "Marks", z = 1, m = 1 },
                  { table_name = "Poles", z = 1, m = 1 }, { table_name = "Zones", z = 0, m = 1 } }, rows)
    local out = run("ogrinfo -so -al " .. q(path))
    assert.truthy(out:find("Layer name: Poles\nGeometry: 3D Measured Point", 1, true), out)
    assert.truthy(out:find("Layer name: Mains\nGeometry: 3D Multi Line String", 1, true), out)
    assert.truthy(out:find("Layer name: Zones\nGeometry: Measured Multi Polygon", 1, true), out)
    assert.truthy(out:find("Layer name: Marks\nGeometry: 3D Measured Multi Point", 1, true), out)
    assert.equal("POINT ZM (6000000.12345679 2000000.98765432 512.25 7.5)", ogr_wkt(path, "Poles", "OBJECTID = 1"))
    assert.equal("POINT ZM (6000001.12345679 2000001.98765432 0.3 nan)", ogr_wkt(path, "Poles", "OBJECTID = 2"))
    assert.equal("MULTILINESTRING Z ((6000000.12345679 2000000.98765432 1,6000005.12345679 2000000.98765432 2),"
      .. "(6000020.12345679 2000000.98765432 3,6000030.12345679 2000000.98765432 4))",
      ogr_wkt(path, "Mains", "OBJECTID = 2"))
    local zone = ogr_wkt(path, "Zones", "OBJECTID = 1")
    assert.truthy(zone:find("^MULTIPOLYGON M %(%(%(6000000.12345679 2000000.98765432 1,"), zone)
  end)

  it("gives every ordinate back through store:get, bit for bit", function()
    local st <close> = assert(store.open(path))
    local pole = assert(st:get(0, gid(0, 1))).geometry
    assert.same({ x = X, y = Y, z = Z, m = M }, json.decode(json.encode(pole)))
    local second = assert(st:get(0, gid(0, 2))).geometry
    assert.same({ x = X + 1, y = Y + 1, z = ODD }, json.decode(json.encode(second))) -- no m was sent: none
    local main = assert(st:get(1, gid(1, 1))).geometry
    assert.same({ hasZ = true, paths = { { { X, Y, Z }, { X + 10, Y + 10, Z + ODD } } } },
      json.decode(json.encode(main)))
    local zone = assert(st:get(2, gid(2, 1))).geometry
    assert.same({ hasM = true, rings = ZM_FEATURES[2][1].rings }, json.decode(json.encode(zone)))
    local marks = assert(st:get(3, gid(3, 1))).geometry
    assert.same(ZM_FEATURES[3][1], json.decode(json.encode(marks)))
    assert.equal(ODD, marks.points[2][3]) -- 0.30000000000000004, not 0.3
  end)

  it("uploads a pole moved through the library with its Z and M", function()
    local copy = dir .. "/moved.gpkg"
    assert(os.execute(("cp %s %s"):format(q(path), q(copy))))
    local st <close> = assert(store.open(copy))
    local pole = assert(st:get(0, gid(0, 1)))
    pole.geometry.x = pole.geometry.x + 2.5
    assert(st:update(0, { attributes = { GlobalID = gid(0, 1) }, geometry = pole.geometry }))
    local main = assert(st:get(1, gid(1, 1)))
    main.geometry.paths[1][2][1] = main.geometry.paths[1][2][1] + 1
    assert(st:update(1, { attributes = { GlobalID = gid(1, 1) }, geometry = main.geometry }))
    assert.same({ x = X + 2.5, y = Y, z = Z, m = M }, json.decode(json.encode(st:get(0, gid(0, 1)).geometry)))

    -- the server's version of each edited feature, read before the upload (the rebase, issue 36): unchanged
    local edits = scripted.uploaded(st, { [0] = { scripted.feature(0, 1, ZM_FEATURES[0][1]) },
                                          [1] = { scripted.feature(1, 1, ZM_FEATURES[1][1]) } })
    local by_layer = {}
    for _, e in ipairs(edits) do by_layer[e.id] = e.features.updates[1] end
    assert.same({ x = X + 2.5, y = Y, z = Z, m = M }, by_layer[0].geometry)
    assert.same({ hasZ = true, paths = { { { X, Y, Z }, { X + 11, Y + 10, Z + ODD } } } }, by_layer[1].geometry)
  end)
end)

describe("the replica store passes GDAL's GeoPackage validator (issue 28)", function()
  local dir

  setup(function() dir = helper.tmp_dir() end)
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  it("for every geometry type, single and multi-part, empty, with and without Z and M", function()
    local flat = dir .. "/flat.gpkg"
    data.write_result(dir .. "/flat.json", { [0] = 12, [1] = 12, [2] = 12, [3] = 12 })
    local st = assert(store.create_from(flat, REPLICA, data.layers(), dir .. "/flat.json"))
    -- and edited locally: a one-path line, a one-ring polygon, empty ones
    assert(st:add(2, { attributes = { NAME = "local" }, geometry = { paths = { { { 1, 2 }, { 3, 4 } } } } }))
    assert(st:add(3, { attributes = { NAME = "local" }, geometry = { rings = { { { 0, 0 }, { 0, 1 }, { 1, 0 } } } } }))
    assert(st:add(2, { attributes = { NAME = "empty" }, geometry = { paths = json.array() } }))
    st:close()
    local complaints, empties = validate(flat)
    assert.equal("", complaints)
    assert.equal(1, empties)

    local zm = dir .. "/zm.gpkg"
    write_result(dir .. "/zm.json", ZM_FEATURES)
    st = assert(store.create_from(zm, REPLICA, ZM_LAYERS, dir .. "/zm.json"))
    assert(st:add(0, { attributes = { NAME = "local" }, geometry = { x = 1, y = 2 } })) -- no z: NaN
    st:close()
    complaints, empties = validate(zm)
    assert.equal("", complaints)
    assert.equal(3, empties) -- the empty point, line and polygon of ZM_FEATURES
  end)

  it("writes an empty geometry as GDAL itself does (the validator's Req 152 complaint is its own)", function()
    local gdal = dir .. "/gdal-empty.gpkg"
    local out, ok = run(("/usr/bin/python3 -c %s %s"):format(q([[
import sys
from osgeo import ogr
ds = ogr.GetDriverByName('GPKG').CreateDataSource(sys.argv[1])
layer = ds.CreateLayer('t', None, ogr.wkbMultiLineString)
f = ogr.Feature(layer.GetLayerDefn())
f.SetGeometry(ogr.CreateGeometryFromWkt('MULTILINESTRING EMPTY'))
layer.CreateFeature(f)
ds = None
]]), q(gdal)))
    assert(ok, out)
    local complaints, empties = validate(gdal)
    assert.equal("", complaints)
    assert.equal(1, empties)
    local theirs = run(("sqlite3 %s 'SELECT hex(geom) FROM t'"):format(q(gdal)))
    local ours = core_hex(require("geoservices.core").gpkg_geometry({ paths = json.array() }, 0))
    assert.equal(theirs:gsub("%s", ""), ours)
  end)
end)

-- The layer's schema as GDAL (python3-gdal) reads it: domains, fields.
local GDAL_SCHEMA = [[
import json, sys
from osgeo import gdal, ogr
ds = gdal.OpenEx(sys.argv[1], gdal.OF_VECTOR)
out = {"domains": {}, "layers": {}}
for name in ds.GetFieldDomainNames() or []:
    d = ds.GetFieldDomain(name)
    if d.GetDomainType() == ogr.OFDT_CODED:
        out["domains"][name] = {"coded": {str(k): v for k, v in d.GetEnumeration().items()},
                                "description": d.GetDescription()}
    elif d.GetDomainType() == ogr.OFDT_RANGE:
        out["domains"][name] = {"min": d.GetMinAsDouble(), "max": d.GetMaxAsDouble(),
                                "description": d.GetDescription()}
for i in range(ds.GetLayerCount()):
    layer = ds.GetLayer(i)
    defn = layer.GetLayerDefn()
    fields = {}
    for j in range(defn.GetFieldCount()):
        f = defn.GetFieldDefn(j)
        fields[f.GetName()] = {"domain": f.GetDomainName(), "nullable": bool(f.IsNullable()),
                               "default": f.GetDefault(), "width": f.GetWidth()}
    out["layers"][layer.GetName()] = fields
print(json.dumps(out))
]]

local function gdal_schema(path)
  local out, ok = run(("/usr/bin/python3 -c %s %s"):format(q(GDAL_SCHEMA), q(path)))
  assert(ok, out)
  return json.decode(out:match("{.*}"))
end

local STATUS = { type = "codedValue", name = "PoleStatus", description = "whether a pole stands",
                 codedValues = { { name = "In service", code = 1 }, { name = "Retired", code = 2 } } }
local HEIGHT = { type = "range", name = "PoleHeight", range = { 0, 60.5 } }
local MATERIAL = { type = "codedValue", name = "PoleMaterial",
                   codedValues = { { name = "Wood", code = "WD" }, { name = "Steel", code = "ST" } } }

local SCHEMA_LAYERS = {
  { id = 0, name = "Poles", type = "Feature Layer", geometryType = "esriGeometryPoint",
    objectIdField = "OBJECTID", globalIdField = "GlobalID", extent = { spatialReference = { wkid = 4326 } },
    fields = {
      { name = "OBJECTID", type = "esriFieldTypeOID", alias = "Object ID", nullable = false, editable = false },
      { name = "GlobalID", type = "esriFieldTypeGlobalID", length = 38, nullable = false, editable = false },
      { name = "STATUS", type = "esriFieldTypeSmallInteger", alias = "Status", nullable = false, editable = true,
        defaultValue = 1, domain = STATUS },
      { name = "HEIGHT", type = "esriFieldTypeDouble", alias = "Height (m)", nullable = true, editable = true,
        domain = HEIGHT },
      { name = "MATERIAL", type = "esriFieldTypeString", length = 20, alias = "Material", nullable = true,
        editable = true, defaultValue = "WD", domain = MATERIAL },
      { name = "CREW", type = "esriFieldTypeString", length = 40, alias = "Crew", nullable = false, editable = true },
      { name = "NOTE", type = "esriFieldTypeString", alias = "NOTE", nullable = true, editable = true,
        domain = json.null, defaultValue = json.null },
      { name = "REMARK", type = "esriFieldTypeString", alias = "Note", nullable = true, editable = true },
    } },
  { id = 1, name = "Inspections", type = "Table", objectIdField = "OBJECTID", globalIdField = "GlobalID",
    fields = {
      { name = "OBJECTID", type = "esriFieldTypeOID", nullable = false, editable = false },
      { name = "GlobalID", type = "esriFieldTypeGlobalID", length = 38, nullable = false, editable = false },
      { name = "RESULT", type = "esriFieldTypeSmallInteger", alias = "Pole status", domain = STATUS },
    } },
}

describe("the replica store writes the layers' schema where GDAL and QGIS read it (issue 28)", function()
  local dir, path

  setup(function()
    dir = helper.tmp_dir()
    path = dir .. "/schema.gpkg"
    local st = assert(store.create_from(path, REPLICA, SCHEMA_LAYERS))
    st:close()
  end)

  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  it("gives GDAL the coded-value and range domains, once each, and the fields that use them", function()
    local schema = gdal_schema(path)
    assert.same({
      PoleStatus = { coded = { ["1"] = "In service", ["2"] = "Retired" }, description = "whether a pole stands" },
      PoleHeight = { min = 0, max = 60.5, description = "" },
      PoleMaterial = { coded = { WD = "Wood", ST = "Steel" }, description = "" },
    }, schema.domains)
    local poles = schema.layers.Poles
    -- nullability is the layer's metadata, not a NOT NULL the server's own nulls would break
    assert.same({ domain = "PoleStatus", nullable = true, default = "1", width = 0 }, poles.STATUS)
    assert.same({ domain = "PoleHeight", nullable = true, default = json.null, width = 0 }, poles.HEIGHT)
    assert.same({ domain = "PoleMaterial", nullable = true, default = "'WD'", width = 20 }, poles.MATERIAL)
    assert.same({ domain = "", nullable = true, default = json.null, width = 40 }, poles.CREW)
    assert.equal("PoleStatus", schema.layers.Inspections.RESULT.domain)
    local out = run("ogrinfo -so -al " .. q(path))
    assert.truthy(out:find("STATUS: Integer(Int16) (0.0) DEFAULT 1, domain name=PoleStatus", 1, true), out)
  end)

  it("keeps the aliases in gpkg_data_columns, registered as the schema extension, and passes the validator", function()
    local st <close> = assert(store.open(path))
    local rows = assert(st.db:rows("SELECT table_name, column_name, name, title, constraint_name "
      .. "FROM gpkg_data_columns ORDER BY table_name, column_name"))
    assert.same({
      { table_name = "Inspections", column_name = "RESULT", name = "Pole status", title = "Pole status",
        constraint_name = "PoleStatus" },
      { table_name = "Poles", column_name = "CREW", name = "Crew", title = "Crew" },
      { table_name = "Poles", column_name = "HEIGHT", name = "Height (m)", title = "Height (m)",
        constraint_name = "PoleHeight" },
      { table_name = "Poles", column_name = "MATERIAL", name = "Material", title = "Material",
        constraint_name = "PoleMaterial" },
      { table_name = "Poles", column_name = "OBJECTID", name = "Object ID", title = "Object ID" },
      { table_name = "Poles", column_name = "REMARK", name = "Note", title = "Note" },
      { table_name = "Poles", column_name = "STATUS", name = "Status", title = "Status",
        constraint_name = "PoleStatus" },
    }, rows)
    assert.same({ { n = 2 } }, st.db:rows("SELECT count(*) AS n FROM gpkg_extensions WHERE extension_name = "
      .. "'gpkg_schema' AND scope = 'read-write' AND column_name IS NULL"))
    local complaints, empties = validate(path)
    assert.equal("", complaints)
    assert.equal(0, empties)
  end)

  it("gives a local add the layer's defaults; a value the layer requires is not a NOT NULL of the file", function()
    local copy = dir .. "/adds.gpkg"
    assert(os.execute(("cp %s %s"):format(q(path), q(copy))))
    local st <close> = assert(store.open(copy))
    local added = assert(st:add(0, { attributes = { CREW = "B" }, geometry = { x = 1, y = 2 } }))
    local f = assert(st:get(0, added))
    assert.equal(1, f.attributes.STATUS)
    assert.equal("WD", f.attributes.MATERIAL)
    -- the server's rule is checked when the edit is synchronized; the file
    -- itself never refuses a null (the server's own data may hold one)
    assert(st.db:run('INSERT INTO "Poles" ("STATUS") VALUES (2)'))
    assert.equal(2, st:count(0))
  end)
end)

-- What GDAL makes of each layer's CRS: its name, projected or not, its authority.
local GDAL_CRS = [[
import json, sys
from osgeo import gdal
gdal.UseExceptions()
ds = gdal.OpenEx(sys.argv[1], gdal.OF_VECTOR)
out = {}
for i in range(ds.GetLayerCount()):
    layer = ds.GetLayer(i)
    sr = layer.GetSpatialRef()
    if layer.GetGeomType() == 0:
        continue
    out[layer.GetName()] = sr and {"name": sr.GetName(), "projected": bool(sr.IsProjected()),
                                   "authority": "%s:%s" % (sr.GetAuthorityName(None), sr.GetAuthorityCode(None))}
print(json.dumps(out))
]]

-- A WKT of the layer's own (a custom Lambert projection no authority knows).
local CUSTOM_WKT = 'PROJCS["Crew_Local_Lambert",GEOGCS["GCS_WGS_1984",DATUM["D_WGS_1984",SPHEROID["WGS_1984",'
  .. '6378137.0,298.257223563]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]],'
  .. 'PROJECTION["Lambert_Conformal_Conic"],PARAMETER["False_Easting",500000.0],PARAMETER["False_Northing",0.0],'
  .. 'PARAMETER["Central_Meridian",-100.5],PARAMETER["Standard_Parallel_1",33.0],'
  .. 'PARAMETER["Standard_Parallel_2",45.0],PARAMETER["Latitude_Of_Origin",39.0],UNIT["Meter",1.0]]'

describe("the replica store defines every layer's CRS in WKT (issue 28)", function()
  local dir

  setup(function() dir = helper.tmp_dir() end)
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  local function srs_layer(id, name, sr)
    return { id = id, name = name, type = "Feature Layer", geometryType = "esriGeometryPoint",
             objectIdField = "OBJECTID", globalIdField = "GlobalID", fields = FIELDS, spatialReference = sr }
  end

  it("writes the WKT of an Esri-only wkid, or the layer's own, where GDAL parses it", function()
    local path = dir .. "/srs.gpkg"
    local st = assert(store.create_from(path, REPLICA, {
      srs_layer(0, "Albers", { wkid = 102003, latestWkid = 102003 }),
      srs_layer(1, "Robinson", { wkid = 54030 }),
      srs_layer(2, "Custom", { wkt = CUSTOM_WKT }),
      srs_layer(3, "OwnWkt", { wkid = 102008, wkt = CUSTOM_WKT }),
    }))
    local rows = assert(st.db:rows("SELECT srs_id, organization, organization_coordsys_id, definition "
      .. "FROM gpkg_spatial_ref_sys WHERE srs_id > 4326 ORDER BY srs_id"))
    st:close()
    for _, r in ipairs(rows) do
      assert.truthy(r.definition:find("^PROJCS%[") or r.definition:find("^GEOGCS%["), r.definition)
    end
    local out, ok = run(("/usr/bin/python3 -c %s %s"):format(q(GDAL_CRS), q(path)))
    assert(ok, out)
    local crs = json.decode(out:match("{.*}"))
    assert.same({ name = "USA_Contiguous_Albers_Equal_Area_Conic", projected = true, authority = "ESRI:102003" },
      crs.Albers)
    assert.same({ name = "World_Robinson", projected = true, authority = "ESRI:54030" }, crs.Robinson)
    assert.equal("Crew_Local_Lambert", crs.Custom.name)
    assert.is_true(crs.Custom.projected)
    assert.equal("Crew_Local_Lambert", crs.OwnWkt.name) -- the layer's own WKT before any table
    local complaints = validate(path)
    assert.equal("", complaints)
    local info = run("ogrinfo -so -al " .. q(path))
    assert.falsy(info:find("ERROR", 1, true), info)
  end)
end)

describe("the replica store keeps dates of any year where GDAL reads them (issue 28)", function()
  local dir

  setup(function() dir = helper.tmp_dir() end)
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  -- epoch milliseconds of the server and the date GDAL should show for each
  local DATES = {
    { 253402300800000, "10000/01/01 00:00:00+00" },        -- year 10000
    { 253402300799999, "9999/12/31 23:59:59.999+00" },
    { 32503680000001, "3000/01/01 00:00:00.001+00" },
    { -1, "1969/12/31 23:59:59.999+00" },
    { -62135596800000, "0001/01/01 00:00:00+00" },
    { -62198755200000, "-001/01/01 00:00:00+00" },       -- before year 0
    { 971890876800000, "32767/12/31 00:00:00+00" },      -- the last year GDAL holds (16 bits)
    -- beyond 32767 GDAL has no form for a year: it reads the text as invalid
    -- (and shows no date), store:get still gives the server's value back
    { 3155760000000000, false },
  }

  it("writes DATETIME text for every one, which GDAL reads as the same instant, and store:get gives back", function()
    local path = dir .. "/dates.gpkg"
    local dates = { id = 0, name = "Dates", type = "Table", objectIdField = "OBJECTID", globalIdField = "GlobalID",
                    fields = { FIELDS[1], FIELDS[2], { name = "WHEN", type = "esriFieldTypeDate" } } }
    local adds = json.array()
    for i, d in ipairs(DATES) do
      adds[i] = { attributes = { OBJECTID = i, GlobalID = gid(0, i), WHEN = d[1] } }
    end
    helper.write_file(dir .. "/dates.json", json.encode{ edits = { { id = 0, features = { adds = adds } } } })
    local st <close> = assert(store.create_from(path, REPLICA, { dates }, dir .. "/dates.json"))
    assert.same({ { t = "text", n = #DATES } }, st.db:rows('SELECT typeof("WHEN") AS t, count(*) AS n FROM "Dates" '
      .. "GROUP BY 1"))
    for i, d in ipairs(DATES) do
      assert.equal(d[1], st:get(0, gid(0, i)).attributes.WHEN)
    end
    local out = run("ogrinfo -q -al " .. q(path) .. " Dates")
    assert.falsy(out:find("Unexpected data type", 1, true), out)
    local shown = {}
    for text in out:gmatch("WHEN %(DateTime%) = ([^\n]+)") do shown[#shown + 1] = text end
    local want = {}
    for _, d in ipairs(DATES) do want[#want + 1] = d[2] or nil end -- GDAL leaves an invalid one unset
    assert.same(want, shown)
    local _, invalid = out:gsub("Invalid content for record", "")
    assert.equal(1, invalid, out) -- the year 101972 alone
  end)
end)
