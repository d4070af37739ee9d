-- Stores written before format 4 keep working: a store of format 3 as the
-- library wrote it at commit f41c7a8 (its Lua, run in a child process
-- against this core and the emulator) is brought up to date when opened for
-- writing: its attachment queue takes updates, and attachment edits made
-- afterwards (sqlite3, as QGIS writes, or st:add_attachment) reach the server
-- with those it had queued; its EPSG rows get their WKT, so status reports no
-- unknown CRS; the service's relationships it kept in its layers' metadata
-- become related-table relations. Opening it again changes nothing.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local schema = require "geoservices.store.file.schema"

local q = helper.shell_quote
local run = helper.run_shell

local OLD_COMMIT = "f41c7a8" -- the last commit before today's schema changes (format 3)
local MAIN_1 = "{3C5E7A90-1B2D-4F60-8A1C-000000000101}"
local VALVE_1 = "{3C5E7A90-1B2D-4F60-8A1C-000000000301}"
local PHOTO = "{3C5E7A90-1B2D-4F60-8A1C-0000000003A1}" -- valve-v1.jpg, downloaded
local REPORT = "{3C5E7A90-1B2D-4F60-8A1C-0000000003A2}" -- inspection-2023.pdf, downloaded

-- Run by the old code: a store of the Utilities service (attachments on
-- Valves, Valves related to Inspections), a feature update and an
-- attachment add queued, not sent. Prints the queued add's GlobalID.
local MAKE_OLD = [[
local geoservices = require "geoservices"
local url, path = arg[1], arg[2]
local c = geoservices.client{ url = url, token = "alice-token", timeout = 30 }
local st = assert(geoservices.store.create(c, path, { service = "Utilities", layers = { 0, 1, 2, 3 },
  replicaName = "written-by-format-3", syncModel = "perLayer", returnAttachments = true }, { timeout = 30 }))
assert(#st.created.attachments.failed == 0)
assert(st:update(0, { attributes = { GlobalID = "]] .. MAIN_1 .. [[", MATERIAL = "queued offline" } }))
io.write(assert(st:add_attachment(2, "]] .. VALVE_1 .. [[", { name = "queued-before.txt",
  content_type = "text/plain", data = "queued before the upgrade" })))
assert(st.db:rows("SELECT format FROM geoservices_replica")[1].format == 3)
st:close()
]]

describe("a store written by an earlier version (format 3)", function()
  local emu, dir, old_path, queued_gid, n

  setup(function()
    dir = helper.tmp_dir()
    -- the Utilities service in an EPSG code the old code wrote 'undefined'
    local world = json.decode(helper.read_all(helper.ROOT .. "/examples/data/world.json"))
    world.featureServices.Utilities.spatialReference = { wkid = 2193, latestWkid = 2193 }
    helper.write_file(dir .. "/world.json", json.encode(world))
    emu = helper.start_emulator{ data = dir .. "/world.json" }
    local out, ok = run(("cd %s && mkdir %s && git archive %s lua | tar -x -C %s"):format(q(helper.ROOT),
      q(dir .. "/old"), OLD_COMMIT, q(dir .. "/old")))
    assert(ok, out)
    helper.write_file(dir .. "/make_old.lua", MAKE_OLD)
    old_path = dir .. "/old.gpkg"
    out, ok = run(("cd %s && LUA_PATH=%s LUA_CPATH=%s lua5.4 %s %s %s"):format(q(helper.ROOT),
      q(dir .. "/old/lua/?.lua;" .. dir .. "/old/lua/?/init.lua;;"), q(package.cpath), q(dir .. "/make_old.lua"),
      q(emu.url), q(old_path)))
    assert(ok, out)
    queued_gid = out:match("{[%x-]+}$")
    assert(queued_gid, out)
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. q(dir))
  end)

  local function copy()
    n = (n or 0) + 1
    local path = ("%s/copy%d.gpkg"):format(dir, n)
    assert(os.execute(("cp %s %s"):format(q(old_path), q(path))))
    return path
  end
  local function sqlite(path, sql)
    local out, ok = run("sqlite3 " .. q(path) .. " " .. q(sql))
    assert(ok, out)
    return out
  end
  local function queued(st)
    local list = {}
    for _, e in ipairs(st:attachment_edits()) do list[#list + 1] = e.op .. " " .. e.globalId end
    return list
  end
  local function client() return geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 } end

  it("is brought to format 4 (and on) when opened: its queue kept, every CRS defined, its relationships kept",
    function()
    local path = copy()
    assert.equal("3\n", sqlite(path, "SELECT format FROM geoservices_replica")) -- as format 3 named it
    assert.equal("EPSG|undefined\n", sqlite(path, "SELECT organization, definition FROM gpkg_spatial_ref_sys "
      .. "WHERE srs_id = 2193"))
    local st = assert(geoservices.store.open(path))
    assert.equal(11, schema.FORMAT) -- 5: conflicts readable and drawn (spec/store/conflicts_rebase_spec); 6: the
    -- GlobalID index on the whole GlobalID (issue 38: spec/store/gid_index_spec); 7: an attachment's GlobalID
    -- made when QGIS or SQL adds one without it (spec/store/attachments_from_sql_spec); 8: the queue and the
    -- refused edits as views QGIS loads (spec/store/edit_views_spec); 9: the QGIS project in the file
    -- (spec/store/project_spec); 10: the library's tables an extension's (spec/store/hidden_tables_spec); 11: the
    -- read-only fields in QGIS's forms (spec/qgis/forms_in_qgis, spec/store/styles_spec)
    assert.equal(schema.FORMAT, st.format)
    assert.same({ "add " .. queued_gid }, queued(st))
    local pending = assert(st:pending())
    assert.same({ { "update", MAIN_1, "queued offline" } },
      { { pending[1].op, pending[1].globalId, pending[1].feature.attributes.MATERIAL } })
    local s = assert(st:status())
    assert.same({}, s.unknownCrs)
    st:close()
    assert.equal(schema.FORMAT .. "\n", sqlite(path, "SELECT format FROM gpkgext_geoservices_replica"))
    -- the attachment queue takes updates (its CHECK constraint)
    assert.truthy(sqlite(path, "SELECT sql FROM sqlite_master WHERE name = 'gpkgext_geoservices_attachment_edits'")
      :find("'update'", 1, true))
    local row = sqlite(path, "SELECT organization, srs_name, definition FROM gpkg_spatial_ref_sys WHERE srs_id = 2193")
    assert.truthy(row:find('^EPSG|NZGD2000 / New Zealand Transverse Mercator 2000|PROJCS%["NZGD2000'), row)
    -- `geoservices status` of a store not opened since (status opens it for writing)
    local r = helper.run_cli{ "status", copy() }
    assert.equal(0, r.code, r.err)
    assert.truthy(r.out:find("Utilities", 1, true), r.out)
    assert.falsy(r.out:find("unknown CRS", 1, true), r.out)
    local info, ok = run("ogrinfo -so " .. q(path) .. " Valves")
    assert(ok, info)
    assert.truthy(info:find("NZGD2000 / New Zealand Transverse Mercator 2000", 1, true), info)
    -- the relationship the service described, from the layers' kept metadata, its rows made from the keys
    assert.equal("Valves|Inspections|attributes\n", sqlite(path, "SELECT base_table_name, related_table_name, "
      .. "relation_name FROM gpkgext_relations WHERE relation_name <> 'media'"))
    assert.equal("V-1|V-1\nV-2|V-2\n", sqlite(path, "SELECT v.VALVEID, i.VALVEID FROM "
      .. "gpkgext_geoservices_relation_Valves_Inspections_0 AS m JOIN Valves AS v ON v.fid = m.base_id "
      .. "JOIN Inspections AS i ON i.fid = m.related_id ORDER BY v.VALVEID"))
    assert.equal("", helper.validate_gpkg(path))
  end)

  it("uploads attachment edits made after the upgrade, and what it had queued, once", function()
    local path = copy()
    local st = assert(geoservices.store.open(path))
    local rid = st:replica().replicaID
    st:close()
    -- as QGIS or sqlite3 would: new bytes and a new name for one attachment, another deleted
    sqlite(path, ("UPDATE geoservices_attachments SET data = CAST('new photo' AS BLOB), name = 'valve-v1-new.txt', "
      .. "content_type = 'text/plain' WHERE global_id = '%s'; DELETE FROM geoservices_attachments "
      .. "WHERE global_id = '%s'"):format(PHOTO, REPORT))
    st = assert(geoservices.store.open(path))
    local added = assert(st:add_attachment(2, VALVE_1, { name = "added-after.txt", content_type = "text/plain",
      data = "added after the upgrade" }))
    assert.same({ "add " .. queued_gid, "update " .. PHOTO, "delete " .. REPORT, "add " .. added }, queued(st))
    local c = client()
    local result = assert(st:sync(c))
    assert.same({ applied = 4, requeued = 0, failed = {}, not_uploaded = {} }, result.attachment_edits)
    assert.same({}, queued(st))
    assert.same({}, assert(st:pending()))
    assert(st:sync(c)) -- nothing goes twice
    assert.same({}, queued(st))
    st:close()
    local counts = {}
    for _, e in ipairs(emu:control("changelog?service=Utilities").entries) do
      if e.origin == rid and not e.refused and not e.cascade then
        local k = ("%s %s %s"):format(e.target, e.op, e.globalId)
        counts[k] = (counts[k] or 0) + 1
      end
    end
    assert.same({ ["features update " .. MAIN_1] = 1, ["attachments add " .. queued_gid] = 1,
                  ["attachments update " .. PHOTO] = 1, ["attachments delete " .. REPORT] = 1,
                  ["attachments add " .. added] = 1 }, counts)
    -- the server's attachments of the valve
    local answer = assert(c:post(c:url_for("Utilities/FeatureServer/2/queryAttachments"),
      { f = "json", globalIds = VALVE_1 }))
    local names = {}
    for _, g in ipairs(answer.attachmentGroups) do
      for _, a in ipairs(g.attachmentInfos) do names[#names + 1] = a.name end
    end
    table.sort(names)
    assert.same({ "added-after.txt", "queued-before.txt", "valve-v1-new.txt" }, names)
    assert.equal("", helper.validate_gpkg(path))
  end)

  -- the file's content, line by line, sorted (a trigger made again moves in .dump's order)
  local function dump(path)
    local lines = {}
    for line in sqlite(path, ".dump"):gmatch("[^\n]+") do lines[#lines + 1] = line end
    table.sort(lines)
    return lines
  end

  it("changes nothing when opened again", function()
    local path = copy()
    assert(geoservices.store.open(path)):close()
    local before, version = dump(path), sqlite(path, "PRAGMA schema_version")
    assert(geoservices.store.open(path)):close()
    assert.same(before, dump(path))
    assert.equal(version, sqlite(path, "PRAGMA schema_version"))
  end)

  it("a format-3 store that already has today's tables changes only its format number", function()
    local path = dir .. "/today.gpkg"
    local st = assert(geoservices.store.create(client(), path, { service = "Utilities", layers = { 0, 1, 2, 3 },
      replicaName = "made-today", syncModel = "perLayer", returnAttachments = true }, { timeout = 30 }))
    st:close()
    sqlite(path, "UPDATE gpkgext_geoservices_replica SET format = 3")
    local before = dump(path)
    assert(geoservices.store.open(path)):close()
    assert.equal(schema.FORMAT .. "\n", sqlite(path, "SELECT format FROM gpkgext_geoservices_replica"))
    sqlite(path, "UPDATE gpkgext_geoservices_replica SET format = 3")
    assert.same(before, dump(path))
  end)
end)
