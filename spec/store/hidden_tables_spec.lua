-- The library's own tables are not offered as layers (issue 37): a QGIS
-- 3.22 user opening the store (QGIS opens a GeoPackage with GDAL's
-- LIST_ALL_TABLES=YES, which lists every table GDAL does not know as a
-- GeoPackage table of its own) sees the service's layers and the tables
-- meant for them (conflicts, pending and refused edits, the sync log, the
-- photos), not the queue, the journal or the mapping tables. The internal
-- tables are those of a GeoPackage extension of this library, registered
-- in gpkg_extensions (requirements 59, 60) and named as extension tables
-- are (gpkgext_, as the Related Tables Extension's gpkgext_relations),
-- which GDAL leaves out; the file stays valid. A store made before
-- (format 9) is renamed at its first open for writing, its queued edits,
-- photos and conflicts kept; opened read-only it is read as it is.
-- What QGIS itself lists: spec/qgis/schema_in_qgis.lua (make test-qgis).
local helper = require "spec.helper"
local geoservices = require "geoservices"

local q = helper.shell_quote
local run = helper.run_shell

-- the layer names ogrinfo lists (`options`: its open options), sorted
local function ogr_layers(path, options)
  local out, ok = run(("ogrinfo -ro -q %s %s"):format(options or "", q(path)))
  assert.is_true(ok, out)
  local names = {}
  for line in out:gmatch("[^\n]+") do
    local name = line:match("^%d+: (.-)$")
    if name then names[#names + 1] = (name:gsub(" %(.*%)$", "")) end
  end
  table.sort(names)
  return names, out
end

local function sqlite(path, sql)
  local out, ok = run("sqlite3 " .. q(path) .. " " .. q(sql))
  assert.is_true(ok, out)
  return (out:gsub("%s+$", ""))
end

-- what a user of the Utilities service is offered: its four layers, the
-- edits' tables, the photos; layer_styles and qgis_projects are QGIS's own
-- (QGIS leaves them out of its list itself)
local OFFERED = { "Inspections", "Mains", "Pressure_zones", "Valves", "geoservices_attachments",
                  "geoservices_conflict_fields", "geoservices_conflicts", "geoservices_pending",
                  "geoservices_rejected", "geoservices_sync_log", "layer_styles", "qgis_projects" }

-- the library's own tables of that store, as format 10 names them
local INTERNAL = { "gpkgext_geoservices_attachment_edits", "gpkgext_geoservices_attachments_Valves",
                   "gpkgext_geoservices_attachments_added", "gpkgext_geoservices_attempts",
                   "gpkgext_geoservices_capture", "gpkgext_geoservices_edits", "gpkgext_geoservices_failed_edits",
                   "gpkgext_geoservices_generations", "gpkgext_geoservices_layers",
                   "gpkgext_geoservices_relation_Valves_Inspections_0", "gpkgext_geoservices_relationships",
                   "gpkgext_geoservices_replica" }

local function without(list, name)
  local out = {}
  for _, v in ipairs(list) do if v ~= name then out[#out + 1] = v end end
  return out
end

-- the tables of the file that are neither GeoPackage's, SQLite's, an R-tree's nor a user's layer
local function registered_internal(path)
  local text = sqlite(path, "SELECT table_name || ' ' || extension_name || ' ' || scope FROM gpkg_extensions "
    .. "WHERE extension_name = 'geoservices_replica_store' ORDER BY table_name")
  local list = {}
  for line in text:gmatch("[^\n]+") do list[#list + 1] = line end
  return list
end

-- the registrations of the library's extension: its tables but the mapping tables (the Related Tables
-- Extension's, registered as such)
local function expected_registrations()
  local list = {}
  for _, t in ipairs(INTERNAL) do
    if not (t:find("_attachments_Valves", 1, true) or t:find("_relation_", 1, true)) then
      list[#list + 1] = t .. " geoservices_replica_store write-only"
    end
  end
  return list
end

describe("the library's own tables in GDAL and QGIS (issue 37)", function()
  local world = helper.store_world{ service = "Utilities", layers = { 0, 1, 2, 3 }, syncModel = "perLayer" }
  setup(world.start)
  teardown(world.stop)

  it("are not listed as QGIS lists a new store's layers; they are a registered extension's; the file is valid",
    function()
      local st = world.create("network")
      local path = st.path
      st:close()
      local names, out = ogr_layers(path, "-oo LIST_ALL_TABLES=YES")
      assert.same(OFFERED, names, out)
      names, out = ogr_layers(path)
      assert.same(without(OFFERED, "qgis_projects"), names, out)
      assert.same(INTERNAL, (function()
        local list = {}
        for line in sqlite(path, "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE "
          .. "'gpkgext_geoservices%' "
          .. "ORDER BY name"):gmatch("[^\n]+") do list[#list + 1] = line end
        return list
      end)())
      assert.same(expected_registrations(), registered_internal(path))
      assert.equal("", helper.validate_gpkg(path))
    end)

  it("of a store made before (format 9) are renamed at its first open for writing, nothing queued lost", function()
    local path = world.dir .. "/format9.gpkg"
    assert(os.execute(("cp spec/fixtures/store/format9.gpkg %s"):format(q(path))))
    -- as the fixture was: every table offered
    local names = ogr_layers(path, "-oo LIST_ALL_TABLES=YES")
    assert.is_true(#names > #OFFERED)
    local before
    do
      local ro <close> = assert(geoservices.store.open(path, { readonly = true }))
      assert.equal(9, ro.format)
      before = { pending = #assert(ro:pending()), attachments = #assert(ro:attachment_edits()),
                 conflicts = #assert(ro:conflicts()) }
    end
    assert.same({ pending = 2, attachments = 1, conflicts = 1 }, before)
    assert.equal("9", sqlite(path, "SELECT format FROM geoservices_replica"))
    local st <close> = assert(geoservices.store.open(path))
    assert.equal(require("geoservices.store.file.schema").FORMAT, st.format)
    assert.same(before, { pending = #assert(st:pending()), attachments = #assert(st:attachment_edits()),
                          conflicts = #assert(st:conflicts()) })
    -- the capture goes on into the renamed queue: an edit made with SQL, as QGIS makes it
    assert(st.db:exec("UPDATE Valves SET TURNS = 7 WHERE fid = 2"))
    assert.equal(3, #assert(st:pending()))
    st:close()
    local out
    names, out = ogr_layers(path, "-oo LIST_ALL_TABLES=YES")
    assert.same(OFFERED, names, out)
    assert.same(expected_registrations(), registered_internal(path))
    -- the photo's mapping and the related table's are renamed in the Related Tables Extension too
    assert.equal("gpkgext_geoservices_attachments_Valves\ngpkgext_geoservices_relation_Valves_Inspections_0",
      sqlite(path, "SELECT mapping_table_name FROM gpkgext_relations ORDER BY mapping_table_name"))
    assert.equal("", helper.validate_gpkg(path))
  end)
end)
