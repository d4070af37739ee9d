-- A photo added to a feature as QGIS's form or GDAL/SQL adds one (issue 37
-- item 2): a row of the media table with only its name, content type and
-- bytes, and a row of the layer's mapping table naming the feature and the
-- photo; none of the store's own columns filled in. It is captured (a
-- GlobalID made as for features, its feature from the mapping row),
-- uploaded once, and the server holds its bytes.
local helper = require "spec.helper"

local q = helper.shell_quote
local run = helper.run_shell

local JPEG = "FFD8FFE000104A46494600010100000100010000FFD9"

describe("an attachment added with plain SQL", function()
  local world = helper.store_world({ service = "Utilities", layers = { 2, 3 }, syncModel = "perLayer" })
  setup(world.start)
  teardown(world.stop)

  local function sqlite(path, sql)
    local out, ok = run("sqlite3 " .. q(path) .. " " .. q(sql))
    assert.is_true(ok, out)
    return (out:gsub("%s+$", ""))
  end

  it("gets a GlobalID and its feature from the mapping row, and reaches the server once with its bytes", function()
    local st = world.create("photo")
    local path = st.path
    st:close()
    local valve = sqlite(path, "SELECT GlobalID FROM Valves WHERE fid = 1")
    -- what QGIS's relation editor (or a script) writes: the media row, then the link
    sqlite(path, "INSERT INTO geoservices_attachments (name, content_type, data) VALUES ('valve.jpg', 'image/jpeg', "
      .. "X'" .. JPEG .. "'); INSERT INTO gpkgext_geoservices_attachments_Valves (base_id, related_id) "
      .. "VALUES (1, last_insert_rowid())")
    local gid = sqlite(path, "SELECT global_id FROM geoservices_attachments WHERE name = 'valve.jpg'")
    assert.truthy(gid:match("^{%x%x%x%x%x%x%x%x%-%x%x%x%x%-4%x%x%x%-[89AB]%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x}$"), gid)
    assert.equal("2|" .. valve, sqlite(path, "SELECT layer_id, parent_global_id FROM geoservices_attachments "
      .. "WHERE name = 'valve.jpg'"))
    local r = helper.run_cli({ "sync", path }, { GEOSERVICES_URL = world.emu.url, GEOSERVICES_TOKEN = "alice-token" })
    assert.equal(0, r.code, r.err .. r.out)
    r = helper.run_cli({ "sync", path }, { GEOSERVICES_URL = world.emu.url, GEOSERVICES_TOKEN = "alice-token" })
    assert.equal(0, r.code, r.err .. r.out)
    -- another replica gets the photo with its bytes: the server has it, once
    local other = world.create("other", { returnAttachments = true })
    local opath = other.path
    other:close()
    assert.equal(JPEG .. "|" .. valve, sqlite(opath, "SELECT hex(data), parent_global_id FROM geoservices_attachments "
      .. "WHERE name = 'valve.jpg'"))
    assert.equal("0", sqlite(path, "SELECT count(*) FROM gpkgext_geoservices_attachment_edits"))
    assert.equal("", helper.validate_gpkg(path))
    -- GDAL reads the media table without a complaint, and sees no value to fill in for global_id
    local out, ok = run("ogrinfo -ro -so " .. q(path) .. " geoservices_attachments")
    assert.is_true(ok, out)
    assert.falsy(out:find("ERROR", 1, true), out)
    assert.truthy(out:find("global_id: String (0.0) UNIQUE\n", 1, true), out)
  end)

  it("works in a store made before (format 6) once any command opened it", function()
    local st = world.create("old")
    local path = st.path
    st:close()
    -- the media table as a format 6 store declared it: global_id NOT NULL, no trigger making it
    sqlite(path, "DROP TRIGGER geoservices_attachments_global_id; PRAGMA writable_schema = ON; "
      .. "UPDATE sqlite_master SET sql = replace(sql, "
      .. "substr(sql, instr(sql, 'global_id TEXT'), instr(sql, ', layer_id') - instr(sql, 'global_id TEXT')), "
      .. "'global_id TEXT NOT NULL UNIQUE') WHERE name = 'geoservices_attachments'; PRAGMA writable_schema = OFF; "
      .. "UPDATE gpkgext_geoservices_replica SET format = 6")
    local insert = "INSERT INTO geoservices_attachments (name, content_type, data) VALUES ('old.jpg', 'image/jpeg', "
      .. "X'" .. JPEG .. "'); INSERT INTO gpkgext_geoservices_attachments_Valves (base_id, related_id) "
      .. "VALUES (1, last_insert_rowid())"
    local out, ok = run("sqlite3 " .. q(path) .. " " .. q(insert))
    assert.falsy(ok, out)
    assert.truthy(out:find("NOT NULL constraint failed: geoservices_attachments.global_id", 1, true), out)
    local r = helper.run_cli({ "status", path })
    assert.equal(0, r.code, r.err)
    assert.equal(tostring(require("geoservices.store.file.schema").FORMAT),
      sqlite(path, "SELECT format FROM gpkgext_geoservices_replica"))
    sqlite(path, insert)
    assert.equal("1", sqlite(path, "SELECT count(*) FROM gpkgext_geoservices_attachment_edits WHERE op = 'add'"))
    assert.equal("ok", sqlite(path, "PRAGMA integrity_check"))
  end)

  it("named by its feature's GlobalID alone, as QGIS's relation editor adds it, is queued and reaches the server",
    function()
      local st = world.create("by-parent")
      local path = st.path
      st:close()
      local valve = sqlite(path, "SELECT GlobalID FROM Valves WHERE fid = 2")
      -- the project's relation is on parent_global_id: QGIS writes the media row alone
      sqlite(path, "INSERT INTO geoservices_attachments (name, content_type, parent_global_id, data) VALUES "
        .. "('form.jpg', 'image/jpeg', '" .. valve .. "', X'" .. JPEG .. "')")
      local env = { GEOSERVICES_URL = world.emu.url, GEOSERVICES_TOKEN = "alice-token" }
      local r = helper.run_cli({ "pending", path }, env)
      assert.equal(0, r.code, r.err)
      assert.truthy(r.out:find("form.jpg", 1, true), r.out)
      assert.equal("2|" .. valve, sqlite(path, "SELECT layer_id, parent_global_id FROM geoservices_attachments "
        .. "WHERE name = 'form.jpg'"))
      r = helper.run_cli({ "sync", path }, env)
      assert.equal(0, r.code, r.err .. r.out)
      local other = world.create("by-parent-other", { returnAttachments = true })
      local opath = other.path
      other:close()
      assert.equal(JPEG .. "|" .. valve, sqlite(opath, "SELECT hex(data), parent_global_id "
        .. "FROM geoservices_attachments WHERE name = 'form.jpg'"))
      assert.equal("0", sqlite(path, "SELECT count(*) FROM gpkgext_geoservices_attachment_edits WHERE sent_at IS NULL"))
    end)

  -- The scan that finds such photos runs at every open and every sync: it reads
  -- only the photos not linked yet, never each attachment the server gave
  -- (100,000 photos of 4-12 KiB: 0.24 s of a 0.25 s open scanning the media table's
  -- pages, spec/bench/link_orphans.lua)
  it("is found by a search of the photos not linked yet, never a scan of every attachment, old stores too", function()
    local attachments = require "geoservices.store.file.attachments"
    local geoservices = require "geoservices"
    local st = world.create("scan")
    local path = st.path
    st:close()
    -- a store made before the index: it gains it when opened
    sqlite(path, "DROP INDEX IF EXISTS geoservices_attachments_unlinked")
    st = assert(geoservices.store.open(path))
    local lines = {}
    for _, r in ipairs(assert(st.db:rows("EXPLAIN QUERY PLAN " .. attachments.unlinked_sql{ table = "Valves",
      globalid = "GlobalID", map = attachments.mapping_table{ table = "Valves" } }, 2))) do
      lines[#lines + 1] = r.detail
    end
    st:close()
    local text = table.concat(lines, "\n")
    assert.matches("SEARCH a USING COVERING INDEX geoservices_attachments_unlinked", text)
    assert.falsy(text:find("SCAN a", 1, true), text)
    assert.equal("", helper.validate_gpkg(path))
  end)
end)
