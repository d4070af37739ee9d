-- Relationships the service describes (issue 28 item 5): the example
-- Utilities service relates its Valves layer (origin, keyField VALVEID) to
-- its Inspections table (destination, keyField VALVEID), one to many. A
-- store of both keeps the relation as the GeoPackage Related Tables
-- Extension (OGC 18-000) describes it, so GDAL reads it back; its mapping
-- rows follow the key fields when GDAL edits a table, and an inspection
-- added with GDAL alone reaches the server and a second store.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local run = helper.run_shell

local MAPPING = "gpkgext_geoservices_relation_Valves_Inspections_0"

local function sqlite(path, sql) return (run("sqlite3 " .. q(path) .. " " .. q(sql))) end

local function ogr_sql(path, sql)
  local out, ok = run(("ogrinfo -q -sql %s %s"):format(q(sql), q(path)))
  assert(ok, out)
  assert.falsy(out:find("ERROR", 1, true), out)
  return out
end

-- each valve's VALVEID and the RESULT of the inspections the mapping table links to it
local function linked(path)
  return sqlite(path, ("SELECT v.VALVEID || ' ' || i.RESULT FROM %s AS m JOIN Valves AS v ON v.fid = m.base_id "
    .. "JOIN Inspections AS i ON i.fid = m.related_id ORDER BY v.VALVEID, i.RESULT"):format(MAPPING))
end

-- the relationships GDAL reads from the file (python3-gdal: the system Python)
local function gdal_relationships(path)
  return run("/usr/bin/python3 -c " .. q("import sys\nfrom osgeo import gdal\n"
    .. "ds = gdal.OpenEx(sys.argv[1])\nfor n in sorted(ds.GetRelationshipNames() or []):\n"
    .. "  r = ds.GetRelationship(n)\n"
    .. "  print(r.GetLeftTableName(), r.GetRightTableName(), r.GetMappingTableName(), r.GetRelatedTableType(),\n"
    .. "        r.GetLeftMappingTableFields(), r.GetRightMappingTableFields())") .. " " .. q(path))
end

describe("a store's related table", function()
  local world = helper.store_world({ service = "Utilities", layers = { 2, 3 }, syncModel = "perLayer" })
  setup(world.start)
  teardown(world.stop)
  local client, create = world.client, world.create

  it("is described by the emulator on both sides, as the vendor's layer resource does", function()
    local c = client()
    local valves = assert(c:layer_info("Utilities", 2))
    local inspections = assert(c:layer_info("Utilities", 3))
    c:close()
    assert.same({ { id = 0, name = "Inspections", relatedTableId = 3, cardinality = "esriRelCardinalityOneToMany",
                    role = "esriRelRoleOrigin", keyField = "VALVEID", composite = false } }, valves.relationships)
    assert.same({ { id = 0, name = "Valves", relatedTableId = 2, cardinality = "esriRelCardinalityOneToMany",
                    role = "esriRelRoleDestination", keyField = "VALVEID", composite = false } },
      inspections.relationships)
    assert.equal("Table", inspections.type)
  end)

  it("is a relation GDAL reads, kept true for GDAL's edits, whose rows synchronize", function()
    local st1 = create("relations-1")
    local path1 = st1.path
    st1:close()

    -- the table is an attributes table; GDAL reads the relation; the file is valid
    assert.equal("Inspections|attributes\nValves|features\n", sqlite(path1,
      "SELECT table_name, data_type FROM gpkg_contents WHERE table_name IN ('Valves', 'Inspections') "
      .. "ORDER BY table_name"))
    -- (beside the valves' attachments, the media relation of store.attachments)
    assert.matches(("\nValves Inspections %s attributes ['base_id'] ['related_id']\n"):format(MAPPING),
      "\n" .. gdal_relationships(path1), 1, true)
    assert.equal("", helper.validate_gpkg(path1))
    -- what the service said of it, for status and users
    assert.equal(("0|Inspections|2|VALVEID|3|VALVEID|esriRelCardinalityOneToMany|0|%s\n"):format(MAPPING),
      sqlite(path1, "SELECT relationship_id, name, origin_layer_id, origin_key_field, destination_layer_id, "
        .. "destination_key_field, cardinality, composite, mapping_table FROM gpkgext_geoservices_relationships"))

    -- the mapping rows join each valve to its inspections
    assert.equal("V-1 Operable\nV-2 Stiff, 14 turns\n", linked(path1))

    -- GDAL alone: an inspection of V-2, re-keyed to V-1, one more of V-2
    ogr_sql(path1, "INSERT INTO Inspections (VALVEID, RESULT) VALUES ('V-2', 'added in GDAL')")
    assert.equal("V-1 Operable\nV-2 Stiff, 14 turns\nV-2 added in GDAL\n", linked(path1))
    ogr_sql(path1, "UPDATE Inspections SET VALVEID = 'V-1' WHERE RESULT = 'added in GDAL'")
    assert.equal("V-1 Operable\nV-1 added in GDAL\nV-2 Stiff, 14 turns\n", linked(path1))
    ogr_sql(path1, "INSERT INTO Inspections (VALVEID, RESULT) VALUES ('V-2', 'gone again')")
    ogr_sql(path1, "DELETE FROM Inspections WHERE RESULT = 'gone again'")
    assert.equal("V-1 Operable\nV-1 added in GDAL\nV-2 Stiff, 14 turns\n", linked(path1))
    -- a valve renamed takes its inspections' links away until they are renamed too
    ogr_sql(path1, "UPDATE Valves SET VALVEID = 'V-2b' WHERE VALVEID = 'V-2'")
    assert.equal("V-1 Operable\nV-1 added in GDAL\n", linked(path1))
    ogr_sql(path1, "UPDATE Valves SET VALVEID = 'V-2' WHERE VALVEID = 'V-2b'")
    assert.equal("V-1 Operable\nV-1 added in GDAL\nV-2 Stiff, 14 turns\n", linked(path1))
    assert.equal("", helper.validate_gpkg(path1))

    -- the mapping rows are derived: only the inspection (and the valve's two renames) are queued
    local st = assert(geoservices.store.open(path1))
    local queued = {}
    for _, e in ipairs(assert(st:pending())) do queued[#queued + 1] = e.layer .. " " .. e.op end
    table.sort(queued)
    assert.same({ "2 update", "3 add" }, queued)
    st:close()

    -- the command line synchronizes it: the server holds the inspection
    local r = helper.run_cli{ "--url", world.emu.url, "--token", "alice-token", "sync", path1 }
    assert.equal(0, r.code, r.out .. r.err)
    local c = client()
    local body = assert(c:download(world.emu.url .. "/Utilities/FeatureServer/3/query?f=json&outFields=*&"
      .. "where=" .. ("RESULT = 'added in GDAL'"):gsub("[^%w]", function(ch) return ("%%%02X"):format(ch:byte()) end)))
    local found = json.decode(body).features
    assert.equal(1, #found, body)
    assert.equal("V-1", found[1].attributes.VALVEID)
    -- after the download that followed, the links are still true
    assert.equal("V-1 Operable\nV-1 added in GDAL\nV-2 Stiff, 14 turns\n", linked(path1))
    c:close()

    -- a second store receives it, linked to its valve
    local st2 = create("relations-2")
    local path2 = st2.path
    st2:close()
    assert.equal("V-1 Operable\nV-1 added in GDAL\nV-2 Stiff, 14 turns\n", linked(path2))
    assert.equal("", helper.validate_gpkg(path2))
  end)
end)
