-- The service's schema changed on the server (issue 37): the next sync
-- takes it in place, queued edits kept (geoservices.store.sync.server_schema).
-- Driven as a user and an administrator do it: the administrator's
-- addToDefinition / deleteFromDefinition / updateDefinition on the
-- emulator, edits made with GDAL (ogrinfo -sql) and the store's API,
-- `geoservices sync` and `geoservices status`.
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local geoservices = require "geoservices"

local q = helper.shell_quote
local run = helper.run_shell

local VALVE1 = "{3C5E7A90-1B2D-4F60-8A1C-000000000301}"
local VALVE2 = "{3C5E7A90-1B2D-4F60-8A1C-000000000302}"

local STATUS = { name = "STATUS", type = "esriFieldTypeString", length = 10, alias = "Valve status",
                 defaultValue = "open", domain = { type = "codedValue", name = "ValveStatus",
                 codedValues = { { name = "Open", code = "open" }, { name = "Shut", code = "shut" } } } }

describe("a schema change on the server, taken by the next sync", function()
  local emu, dir, n = nil, nil, 0
  setup(function()
    dir = helper.tmp_dir()
    emu = helper.start_emulator()
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. q(dir))
  end)
  before_each(function() emu:reset() end)

  local function client(token)
    return geoservices.client{ url = emu.url, token = token or "alice-token", timeout = 30 }
  end
  local function admin(op, body)
    local c = client("admin-token")
    local doc = assert(c:post(c:url_for("admin/services/Utilities.FeatureServer/2/" .. op),
      { [op] = json.encode(body), f = "json" }))
    c:close()
    return doc
  end
  local function create()
    n = n + 1
    local c = client()
    local st = assert(geoservices.store.create(c, ("%s/s%d.gpkg"):format(dir, n), { service = "Utilities",
      layers = { 2 }, replicaName = "s" .. n, syncModel = "perLayer" }, { timeout = 30, poll_interval = 0.05 }))
    c:close()
    local path = st.path
    st:close()
    return path
  end
  local function sql(path, text)
    local out, ok = run(("ogrinfo -q -sql %s %s"):format(q(text), q(path)))
    assert(ok, out)
  end
  local function rows(path, text)
    local st = assert(geoservices.store.open(path))
    local r = assert(st.db:rows(text))
    st:close()
    return r
  end
  local function cli_sync(path)
    local r = helper.run_cli({ "sync", path }, { GEOSERVICES_URL = emu.url, GEOSERVICES_TOKEN = "alice-token" })
    assert.equal(0, r.code, r.err .. r.out)
    return r.out .. r.err
  end
  local function clean(path)
    assert.equal("", helper.validate_gpkg(path))
    local out, ok = run("ogrinfo -q " .. q(path))
    assert(ok, out)
    assert.falsy(out:find("ERROR", 1, true), out)
  end
  local function changelog()
    return emu:control("changelog?service=Utilities").entries
  end

  describe("a field added", function()
    it("becomes a column with the server's values, alias and domain; queued edits go once, without it", function()
      local a, b = create(), create()
      sql(a, "UPDATE Valves SET VALVEID = 'V-1a' WHERE GlobalID = '" .. VALVE1 .. "'")
      admin("addToDefinition", { fields = { STATUS } })
      -- another crew takes the field and shuts valve 2
      cli_sync(b)
      sql(b, "UPDATE Valves SET STATUS = 'shut' WHERE GlobalID = '" .. VALVE2 .. "'")
      cli_sync(b)
      local before = #changelog()
      local out = cli_sync(a)
      assert.truthy(out:find("layer Valves: the server added field STATUS: taken in place (2 values downloaded)", 1,
        true), out)
      assert.falsy(out:find("not made with", 1, true), out)
      local values = {}
      for _, r in ipairs(rows(a, "SELECT GlobalID, VALVEID, STATUS FROM Valves")) do values[r.GlobalID] = r end
      assert.same({ GlobalID = VALVE1, VALVEID = "V-1a", STATUS = "open" }, values[VALVE1])
      assert.equal("shut", values[VALVE2].STATUS)
      -- the queued update went once, and sent VALVEID alone
      local sent = {}
      for i, e in ipairs(changelog()) do if i > before then sent[#sent + 1] = e end end
      assert.equal(1, #sent)
      assert.equal(VALVE1, sent[1].globalId)
      assert.is_nil(sent[1].attributes.STATUS)
      assert.equal("V-1a", sent[1].attributes.VALVEID)
      -- its alias and domain where GDAL and QGIS read them
      assert.same({ { title = "Valve status", constraint_name = "ValveStatus" } },
        rows(a, "SELECT title, constraint_name FROM gpkg_data_columns WHERE table_name = 'Valves' "
          .. "AND column_name = 'STATUS'"))
      assert.same({ { value = "open" }, { value = "shut" } }, rows(a, "SELECT value FROM gpkg_data_column_constraints "
        .. "WHERE constraint_name = 'ValveStatus' AND value <> '' ORDER BY value"))
      local style = rows(a, "SELECT styleQML FROM layer_styles WHERE f_table_name = 'Valves'")[1].styleQML
      assert.truthy(style:find('field="STATUS"', 1, true), style)
      assert.truthy(style:find('name="Valve status"', 1, true), style)
      -- the field is captured now: an edit of it is queued and sent, within its domain
      sql(a, "UPDATE Valves SET STATUS = 'shut' WHERE GlobalID = '" .. VALVE1 .. "'")
      local st = assert(geoservices.store.open(a))
      local pending = assert(st:pending())
      assert.equal(1, #pending)
      assert.equal("shut", pending[1].feature.attributes.STATUS)
      st:close()
      cli_sync(a)
      assert.equal("shut", helper.served_features(client(), "Utilities", 2)[VALVE1].attributes.STATUS)
      clean(a)
    end)

    it("ends with the server's values also where the server's download carries every feature", function()
      emu:control("settings", { schema_change_touches_features = true })
      local a = create()
      sql(a, "UPDATE Valves SET VALVEID = 'V-1t' WHERE GlobalID = '" .. VALVE1 .. "'")
      admin("addToDefinition", { fields = { STATUS } })
      local c = client()
      local st = assert(geoservices.store.open(a))
      local result = assert(st:sync(c, { timeout = 30, poll_interval = 0.05 }))
      st:close()
      c:close()
      assert.equal(2, result.applied) -- both valves came down again, with the field
      local values = {}
      for _, r in ipairs(rows(a, "SELECT GlobalID, VALVEID, STATUS FROM Valves")) do values[r.GlobalID] = r end
      assert.same({ GlobalID = VALVE1, VALVEID = "V-1t", STATUS = "open" }, values[VALVE1])
      assert.equal("open", values[VALVE2].STATUS)
      assert.equal("V-1t", helper.served_features(client(), "Utilities", 2)[VALVE1].attributes.VALVEID)
      emu:control("settings", { schema_change_touches_features = json.null })
      clean(a)
    end)

    it("never takes a user's local-only field of the same name: it is renamed, its values kept", function()
      local a = create()
      sql(a, "ALTER TABLE Valves ADD COLUMN STATUS TEXT")
      sql(a, "UPDATE Valves SET STATUS = 'mine' WHERE GlobalID = '" .. VALVE1 .. "'")
      admin("addToDefinition", { fields = { STATUS } })
      local out = cli_sync(a)
      assert.truthy(out:find("yours is renamed STATUS_local (its values kept, not synchronized), the server's is "
        .. "STATUS", 1, true), out)
      local r = rows(a, "SELECT STATUS, STATUS_local FROM Valves WHERE GlobalID = '" .. VALVE1 .. "'")
      assert.same({ { STATUS = "open", STATUS_local = "mine" } }, r)
      -- nothing of it was sent
      for _, e in ipairs(changelog()) do assert.is_nil(e.attributes and e.attributes.STATUS_local) end
      local s = helper.run_cli({ "status", a }, {})
      assert.truthy((s.out .. s.err):find("local-only field STATUS_local", 1, true), s.out .. s.err)
      clean(a)
    end)
  end)

  it("is listed by the sync's result, layer by layer", function()
    local path = create()
    admin("addToDefinition", { fields = { STATUS } })
    admin("deleteFromDefinition", { fields = { { name = "TURNS" } } })
    local c = client()
    local st = assert(geoservices.store.open(path))
    local result = assert(st:sync(c, { timeout = 30, poll_interval = 0.05 }))
    assert.same({ { layer = 2, table = "Valves", added = { "STATUS" }, dropped = { "TURNS" }, changed = {} } },
      result.schema_changes)
    -- the next sync finds nothing more to take
    result = assert(st:sync(c, { timeout = 30, poll_interval = 0.05 }))
    assert.same({}, result.schema_changes)
    st:close()
    c:close()
    -- a line of the sync log says what was taken
    local log = rows(path, "SELECT message FROM geoservices_sync_log WHERE operation = 'schema'")
    assert.equal(1, #log)
    assert.truthy(log[1].message:find("the server added field STATUS", 1, true), log[1].message)
  end)

  it("keeps a project the user saved in QGIS, and says so", function()
    local a = create()
    local name = a:match("([^/]+)%.gpkg$")
    sql(a, "UPDATE qgis_projects SET metadata = '" .. json.encode{ last_modified_time = "2026-01-01T00:00:00",
      last_modified_user = "ann" } .. "', content = '00' WHERE name = '" .. name .. "'")
    admin("addToDefinition", { fields = { STATUS } })
    local out = cli_sync(a)
    assert.truthy(out:find("the QGIS project " .. name .. " in the file was saved by ann: kept as it is", 1, true), out)
    assert.same({ { content = "00" } }, rows(a, "SELECT content FROM qgis_projects"))
    assert.equal(2, #rows(a, "SELECT STATUS FROM Valves WHERE STATUS = 'open'"))
  end)

  -- a user's project as QGIS 3.22 saves it (a .qgz of deflated entries, the
  -- .qgs and the .qgd of its auxiliary storage), made from the one in the file
  -- with the user's own alias of VALVEID; `check` compares it after the sync
  local USER_PROJECT = [==[
import binascii, json, sqlite3, sys, zipfile, io
path, name, mode = sys.argv[1], sys.argv[2], sys.argv[3]
db = sqlite3.connect(path)
QGD = b"SQLite format 3\0" + bytes(range(256)) * 40
if mode == "save":
    content = db.execute("SELECT content FROM qgis_projects WHERE name = ?", (name,)).fetchone()[0]
    qgs = zipfile.ZipFile(io.BytesIO(binascii.unhexlify(content))).read(name + ".qgs").decode("utf-8")
    mine = '<alias field="VALVEID" index="3" name="Valve tag"/>'
    qgs = qgs.replace('<alias field="VALVEID" index="3" name=""/>', mine, 1)
    assert mine in qgs
    for project in (name, "field work"):
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as w:
            w.writestr(project + ".qgs", qgs)
            w.writestr(project + ".qgd", QGD)
        db.execute("INSERT OR REPLACE INTO qgis_projects (name, metadata, content) VALUES (?, ?, ?)", (project,
            json.dumps({"last_modified_time": "2026-01-01T00:00:00", "last_modified_user": "ann"}),
            binascii.hexlify(out.getvalue()).decode()))
    db.commit()
    open(path + ".qgs", "w").write(qgs)
else:
    was = open(path + ".qgs").read().split("\n")
    out = {}
    for project, content, meta in db.execute("SELECT name, content, metadata FROM qgis_projects ORDER BY name"):
        z = zipfile.ZipFile(io.BytesIO(binascii.unhexlify(content)))
        assert z.read(project + ".qgd") == QGD, "the .qgd changed"
        qgs = z.read(project + ".qgs").decode("utf-8").split("\n")
        added = [l for l in qgs if l not in was]
        assert [l for l in qgs if l not in added] == was, "more than lines added"
        out[project] = {"added": added, "user": json.loads(meta)["last_modified_user"]}
    print("ADDED " + json.dumps(out))
]==]

  it("writes the added fields' aliases and read-only states into the projects a user saved, nothing else", function()
    local a = create()
    local name = a:match("([^/]+)%.gpkg$")
    local out, ok = run(("%s -c %s %s %s save"):format(helper.PYTHON, q(USER_PROJECT), q(a), q(name)))
    assert(ok, out)
    admin("addToDefinition", { fields = { STATUS, { name = "CHECKED_BY", type = "esriFieldTypeString", length = 20,
      editable = false } } })
    local synced = cli_sync(a)
    for _, p in ipairs{ name, "field work" } do
      assert.truthy(synced:find("the QGIS project " .. p .. " in the file was saved by ann: kept, with the alias and "
        .. "read-only states of the fields the server added written into it (nothing else of it changed)", 1, true),
        synced)
    end
    local function check()
      out, ok = run(("%s -c %s %s %s check"):format(helper.PYTHON, q(USER_PROJECT), q(a), q(name)))
      assert(ok, out)
      return json.decode((assert(out:match("ADDED (%b{})"), out)))
    end
    local added = { '  <alias field="STATUS" index="5" name="Valve status"/>',
                    '  <field name="CHECKED_BY" editable="0"/>' }
    assert.same({ [name] = { added = added, user = "ann" }, ["field work"] = { added = added, user = "ann" } }, check())
    -- a second sync with nothing new leaves them alone
    cli_sync(a)
    assert.same({ [name] = { added = added, user = "ann" }, ["field work"] = { added = added, user = "ann" } }, check())
    os.remove(a .. ".qgs")
    clean(a)
  end)

  describe("a field deleted", function()
    it("stays a local-only column with its values; queued edits of it are reported, their other fields sent", function()
      local a = create()
      sql(a, "UPDATE Valves SET VALVEID = 'V-1d', TURNS = 9 WHERE GlobalID = '" .. VALVE1 .. "'")
      local st = assert(geoservices.store.open(a))
      local added = assert(st:add(2, { attributes = { VALVEID = "V-new", TURNS = 3 },
        geometry = { x = -122.41, y = 37.77 } }))
      st:close()
      admin("deleteFromDefinition", { fields = { { name = "TURNS" } } })
      local before = #changelog()
      local r = helper.run_cli({ "sync", a }, { GEOSERVICES_URL = emu.url, GEOSERVICES_TOKEN = "alice-token" })
      local out = r.out .. r.err
      assert.truthy(out:find("layer Valves: field TURNS was deleted on the server: its column stays here with its "
        .. "values, a local-only field (not synchronized)", 1, true), out)
      assert.truthy(out:find("the queued update of " .. VALVE1 .. " changed field TURNS, which the server deleted: "
        .. "that change is not sent", 1, true), out)
      assert.truthy(out:find("the queued add of " .. added .. " changed field TURNS", 1, true), out)
      -- both edits went once, without TURNS
      local sent = {}
      for i, e in ipairs(changelog()) do if i > before then sent[e.globalId] = e end end
      assert.equal("V-1d", sent[VALVE1].attributes.VALVEID)
      assert.is_nil(sent[VALVE1].attributes.TURNS)
      assert.equal("V-new", sent[added].attributes.VALVEID)
      assert.is_nil(sent[added].attributes.TURNS)
      local served = helper.served_features(client(), "Utilities", 2)
      assert.equal("V-1d", served[VALVE1].attributes.VALVEID)
      assert.truthy(served[added])
      -- the values stay here
      local kept = {}
      for _, row in ipairs(rows(a, "SELECT GlobalID, TURNS FROM Valves")) do kept[row.GlobalID] = row.TURNS end
      assert.equal(9, kept[VALVE1])
      assert.equal(3, kept[added])
      -- what was not sent is reported with the failed edits, and status says so
      st = assert(geoservices.store.open(a))
      local failed = assert(st:failed())
      assert.equal(0, #assert(st:pending()))
      st:close()
      assert.equal(2, #failed)
      for _, f in ipairs(failed) do
        assert.truthy(f.description:find("field TURNS was deleted on the server", 1, true), f.description)
      end
      local s = helper.run_cli({ "status", a }, {})
      assert.truthy((s.out .. s.err):find("layer Valves: field TURNS deleted on the server: kept in this file with its "
        .. "values, a local-only field (not synchronized)", 1, true), s.out .. s.err)
      assert.truthy((s.out .. s.err):find("2 failed", 1, true), s.out .. s.err)
      -- an edit of it is not queued any more
      sql(a, "UPDATE Valves SET TURNS = 1 WHERE GlobalID = '" .. VALVE1 .. "'")
      st = assert(geoservices.store.open(a))
      assert.equal(0, #assert(st:pending()))
      st:close()
      clean(a)
    end)

    it("keeps its alias, marked local only, its coded values' names, and no rule of the server", function()
      local a = create()
      -- the administrator gave TURNS an alias and a range, and added STATUS with coded values
      admin("updateDefinition", { fields = { { name = "TURNS", alias = "Turns to close",
        domain = { type = "range", name = "TurnsRange", range = { 0, 25 } } } } })
      admin("addToDefinition", { fields = { STATUS } })
      cli_sync(a)
      sql(a, "UPDATE Valves SET TURNS = 9, STATUS = 'shut' WHERE GlobalID = '" .. VALVE1 .. "'")
      cli_sync(a)
      admin("deleteFromDefinition", { fields = { { name = "TURNS" }, { name = "STATUS" } } })
      cli_sync(a)
      -- the form's label says the field is this file's alone; the names of the codes stay (a value map);
      -- a range is no rule any more (QGIS's range widget would hold a value to it)
      local columns = {}
      for _, r in ipairs(rows(a, "SELECT column_name, name, title, constraint_name FROM gpkg_data_columns "
        .. "WHERE table_name = 'Valves' AND column_name IN ('TURNS', 'STATUS')")) do columns[r.column_name] = r end
      assert.same({ column_name = "TURNS", name = "Turns to close (local only)",
        title = "Turns to close (local only)" }, columns.TURNS)
      assert.same({ column_name = "STATUS", name = "Valve status (local only)", title = "Valve status (local only)",
        constraint_name = "ValveStatus" }, columns.STATUS)
      assert.same({ { value = "open" }, { value = "shut" } }, rows(a, "SELECT value FROM gpkg_data_column_constraints "
        .. "WHERE constraint_name = 'ValveStatus' AND value <> '' ORDER BY value"))
      local style = rows(a, "SELECT styleQML FROM layer_styles WHERE f_table_name = 'Valves'")[1].styleQML
      assert.truthy(style:find('field="TURNS" index="%d+" name="Turns to close %(local only%)"'), style)
      assert.truthy(style:find('field="STATUS" index="%d+" name="Valve status %(local only%)"'), style)
      -- an edit outside the old rules is the user's own: kept, nothing refused, nothing queued
      sql(a, "UPDATE Valves SET TURNS = 99, STATUS = 'ajar' WHERE GlobalID = '" .. VALVE1 .. "'")
      local out = cli_sync(a)
      assert.falsy(out:find("domain", 1, true), out)
      local s = helper.run_cli({ "status", a }, {})
      assert.falsy((s.out .. s.err):find("domain", 1, true), s.out .. s.err)
      assert.same({ { TURNS = 99, STATUS = "ajar" } }, rows(a, "SELECT TURNS, STATUS FROM Valves WHERE GlobalID = '"
        .. VALVE1 .. "'"))
      local st = assert(geoservices.store.open(a))
      assert.equal(0, #assert(st:pending()))
      assert.equal(0, #assert(st:failed()))
      st:close()
      -- a later schema change leaves the mark as it is (never marked twice)
      admin("updateDefinition", { fields = { { name = "VALVEID", alias = "Valve id" } } })
      cli_sync(a)
      assert.same({ { title = "Turns to close (local only)" } }, rows(a, "SELECT title FROM gpkg_data_columns "
        .. "WHERE table_name = 'Valves' AND column_name = 'TURNS'"))
      clean(a)
    end)

    it("without an alias, is named local only in the form all the same", function()
      local a = create()
      admin("deleteFromDefinition", { fields = { { name = "TURNS" } } })
      cli_sync(a)
      assert.same({ { name = "TURNS (local only)", title = "TURNS (local only)" } }, rows(a, "SELECT name, title "
        .. "FROM gpkg_data_columns WHERE table_name = 'Valves' AND column_name = 'TURNS'"))
      local style = rows(a, "SELECT styleQML FROM layer_styles WHERE f_table_name = 'Valves'")[1].styleQML
      assert.truthy(style:find('field="TURNS" index="%d+" name="TURNS %(local only%)"'), style)
      clean(a)
    end)
  end)

  describe("a field's domain and alias changed", function()
    it("are the store's rules: a queued value outside the new domain is refused naming it, and stays", function()
      local a = create()
      sql(a, "UPDATE Valves SET TURNS = 30 WHERE GlobalID = '" .. VALVE1 .. "'")
      admin("updateDefinition", { fields = { { name = "TURNS", alias = "Turns to close",
        domain = { type = "range", name = "TurnsRange", range = { 0, 25 } } } } })
      local before = #changelog()
      local r = helper.run_cli({ "sync", a }, { GEOSERVICES_URL = emu.url, GEOSERVICES_TOKEN = "alice-token" })
      local out = r.out .. r.err
      assert.truthy(out:find("layer Valves: the server changed field TURNS", 1, true), out)
      assert.truthy(out:find("field TURNS holds 30, outside the range 0 to 25 of its domain TurnsRange", 1, true), out)
      assert.equal(before, #changelog())
      assert.same({ { title = "Turns to close", constraint_name = "TurnsRange" } },
        rows(a, "SELECT title, constraint_name FROM gpkg_data_columns WHERE table_name = 'Valves' "
          .. "AND column_name = 'TURNS'"))
      assert.same({ { constraint_type = "range", min = 0, max = 25 } }, rows(a, "SELECT constraint_type, min, max "
        .. "FROM gpkg_data_column_constraints WHERE constraint_name = 'TurnsRange'"))
      local style = rows(a, "SELECT styleQML FROM layer_styles WHERE f_table_name = 'Valves'")[1].styleQML
      assert.truthy(style:find('name="Turns to close"', 1, true), style)
      local st = assert(geoservices.store.open(a))
      assert.equal(1, #assert(st:pending()))
      st:close()
      -- fixed within the new range, it goes
      sql(a, "UPDATE Valves SET TURNS = 20 WHERE GlobalID = '" .. VALVE1 .. "'")
      cli_sync(a)
      assert.equal(20, helper.served_features(client(), "Utilities", 2)[VALVE1].attributes.TURNS)
      clean(a)
    end)

    it("a shorter length, a field made read-only: the length refuses, the form shows it read-only", function()
      local a = create()
      sql(a, "UPDATE Valves SET VALVEID = 'V-123456' WHERE GlobalID = '" .. VALVE2 .. "'")
      admin("updateDefinition", { fields = { { name = "VALVEID", length = 5 }, { name = "TURNS", editable = false } } })
      local r = helper.run_cli({ "sync", a }, { GEOSERVICES_URL = emu.url, GEOSERVICES_TOKEN = "alice-token" })
      local out = r.out .. r.err
      assert.truthy(out:find("field VALVEID holds 8 characters, more than its 5", 1, true), out)
      local style = rows(a, "SELECT styleQML FROM layer_styles WHERE f_table_name = 'Valves'")[1].styleQML
      assert.truthy(style:find('<field name="TURNS" editable="0"/>', 1, true), style)
      assert.falsy(style:find('<field name="VALVEID" editable="0"/>', 1, true), style)
      clean(a)
    end)
  end)

  -- (issue 37) the column declares what the store declares on create (schema.layer_spec: a String's length
  -- TEXT(n), an Integer MEDIUMINT...): the table is made again with it, its rows, fids, triggers, indexes and
  -- R-tree kept, so that GDAL and QGIS show the server's width and type
  describe("a field's width or type changed", function()
    local function declared(path, column)
      for _, r in ipairs(rows(path, "SELECT name, type FROM pragma_table_info('Valves')")) do
        if r.name == column then return r.type end
      end
    end
    -- what the table carries besides its rows: its triggers and indexes by name, its R-tree's entries
    local function shape(path)
      local names = {}
      for _, r in ipairs(rows(path, "SELECT type || ' ' || name AS n FROM sqlite_master WHERE tbl_name = 'Valves' "
        .. "AND type IN ('trigger', 'index') ORDER BY name")) do names[#names + 1] = r.n end
      local rtree = rows(path, "SELECT (SELECT count(*) FROM rtree_Valves_geom) AS entries, (SELECT count(*) FROM "
        .. "Valves WHERE geom IS NOT NULL) AS features, (SELECT seq FROM sqlite_sequence WHERE name = 'Valves') "
        .. "AS seq")[1]
      return { names = names, entries = rtree.entries, features = rtree.features, seq = rtree.seq }
    end
    local function gdal_field(path, name)
      local out, ok = run("ogrinfo -so " .. q(path) .. " Valves")
      assert(ok, out)
      return out:match("\n" .. name .. ": ([^\n]+)")
    end
    local function sent_since(before)
      local sent, count = {}, 0
      for i, e in ipairs(changelog()) do
        if i > before then
          sent[e.globalId] = e
          count = count + 1
        end
      end
      return sent, count
    end

    it("a String's length: the column declares the new width, values and queued edits kept", function()
      local a = create()
      -- one local feature deleted: its fid is never given again
      local st = assert(geoservices.store.open(a))
      local gone = assert(st:add(2, { attributes = { VALVEID = "V-x" }, geometry = { x = -122.4, y = 37.7 } }))
      st:close()
      sql(a, "DELETE FROM Valves WHERE GlobalID = '" .. gone .. "'")
      sql(a, "UPDATE Valves SET VALVEID = 'V-1 north gate' WHERE GlobalID = '" .. VALVE1 .. "'")
      local was = shape(a)
      assert.equal("TEXT(20)", declared(a, "VALVEID"))
      admin("updateDefinition", { fields = { { name = "VALVEID", length = 40 } } })
      local before = #changelog()
      local out = cli_sync(a)
      assert.truthy(out:find("layer Valves: field VALVEID is TEXT(40) in this file now (it was TEXT(20)), as the "
        .. "server's definition says: its values kept", 1, true), out)
      assert.equal("TEXT(40)", declared(a, "VALVEID"))
      assert.equal("String (40.0)", gdal_field(a, "VALVEID"))
      assert.same(was, shape(a))
      local values = {}
      for _, r in ipairs(rows(a, "SELECT GlobalID, VALVEID, TURNS FROM Valves")) do values[r.GlobalID] = r end
      assert.same({ GlobalID = VALVE1, VALVEID = "V-1 north gate", TURNS = 21 }, values[VALVE1])
      assert.same({ GlobalID = VALVE2, VALVEID = "V-2", TURNS = 14 }, values[VALVE2])
      -- the queued update went once, VALVEID alone
      local sent, count = sent_since(before)
      assert.equal(1, count)
      assert.same({ GlobalID = VALVE1, VALVEID = "V-1 north gate" }, sent[VALVE1].attributes)
      clean(a)
      -- edits are captured as before, a new feature gets a new fid and its R-tree entry
      sql(a, "UPDATE Valves SET VALVEID = 'V-2 south' WHERE GlobalID = '" .. VALVE2 .. "'")
      st = assert(geoservices.store.open(a))
      assert.equal(1, #assert(st:pending()))
      local added = assert(st:add(2, { attributes = { VALVEID = "V-3" }, geometry = { x = -122.41, y = 37.71 } }))
      st:close()
      local fids = rows(a, "SELECT fid FROM Valves WHERE GlobalID = '" .. added .. "'")
      assert.is_true(fids[1].fid > was.seq)
      assert.equal(was.entries + 1, shape(a).entries)
      cli_sync(a)
      -- shorter: the values longer than the new width are kept, and named
      admin("updateDefinition", { fields = { { name = "VALVEID", length = 5 } } })
      out = cli_sync(a)
      assert.equal("TEXT(5)", declared(a, "VALVEID"))
      assert.truthy(out:find("layer Valves: field VALVEID is TEXT(5) in this file now (it was TEXT(40)), as the "
        .. "server's definition says: its values kept; 2 of them are longer than 5 characters (kept as they are, in "
        .. VALVE1 .. ", " .. VALVE2 .. "; an edit that sends one is refused here until it is changed)", 1, true), out)
      assert.same({ { VALVEID = "V-1 north gate" } }, rows(a, "SELECT VALVEID FROM Valves WHERE GlobalID = '"
        .. VALVE1 .. "'"))
      clean(a)
    end)

    it("made again, keeps what other tables' triggers do with it: a related inspection added in SQL is linked",
      function()
      n = n + 1
      local c = client()
      local st = assert(geoservices.store.create(c, ("%s/s%d.gpkg"):format(dir, n), { service = "Utilities",
        replicaName = "s" .. n, syncModel = "perLayer" }, { timeout = 30, poll_interval = 0.05 }))
      c:close()
      local a = st.path
      st:close()
      admin("updateDefinition", { fields = { { name = "VALVEID", length = 60 } } })
      cli_sync(a)
      assert.equal("TEXT(60)", declared(a, "VALVEID"))
      -- the relation's triggers are on Inspections and name Valves
      sql(a, "INSERT INTO Inspections (VALVEID, RESULT) VALUES ('V-2', 'tight')")
      assert.same({ { VALVEID = "V-2" } }, rows(a, "SELECT v.VALVEID FROM gpkgext_geoservices_relation_Valves_"
        .. "Inspections_0 AS m JOIN Valves AS v ON v.fid = m.base_id JOIN Inspections AS i ON i.fid = m.related_id "
        .. "WHERE i.RESULT = 'tight'"))
      clean(a)
    end)

    it("a field's type (deleted and added again, the vendor's way): the column takes the new type, values "
      .. "converted; a queued edit goes once, or is held where the server's value changed too", function()
      local a = create()
      local st = assert(geoservices.store.open(a))
      local added = assert(st:add(2, { attributes = { VALVEID = "V-3", TURNS = 5 }, geometry = { x = -122.4,
        y = 37.7 } }))
      st:close()
      cli_sync(a)
      sql(a, "UPDATE Valves SET TURNS = 12 WHERE GlobalID = '" .. VALVE1 .. "'")
      sql(a, "UPDATE Valves SET VALVEID = 'V-2t' WHERE GlobalID = '" .. VALVE2 .. "'")
      local was = shape(a)
      admin("deleteFromDefinition", { fields = { { name = "TURNS" } } })
      admin("addToDefinition", { fields = { { name = "TURNS", type = "esriFieldTypeString", length = 8 } } })
      local before = #changelog()
      local r = helper.run_cli({ "sync", a }, { GEOSERVICES_URL = emu.url, GEOSERVICES_TOKEN = "alice-token" })
      local out = r.out .. r.err
      assert.equal(3, r.code, out) -- a conflict held
      assert.truthy(out:find("layer Valves: the server changed the type of field TURNS from esriFieldTypeSmallInteger "
        .. "to esriFieldTypeString: its column is TEXT(8) in this file now (it was SMALLINT), its values kept", 1,
        true), out)
      assert.equal("TEXT(8)", declared(a, "TURNS"))
      assert.equal("String (8.0)", gdal_field(a, "TURNS"))
      assert.same(was, shape(a))
      -- a feature not edited here keeps its value, as the new type holds it; the server made the field anew
      -- (no values there): the sync says where the two differ, and what gives the server's
      assert.same({ { TURNS = "5", t = "text" } }, rows(a, "SELECT TURNS, typeof(TURNS) AS t FROM Valves WHERE "
        .. "GlobalID = '" .. added .. "'"))
      assert.truthy(out:find("layer Valves: field TURNS holds another value on the server than in this file for 1 "
        .. "feature not edited here (" .. added .. "): the server made the field anew, without its old values; this "
        .. "file keeps its own (never sent); a new replica (geoservices replica create), or a later change of the "
        .. "feature on the server, has the server's", 1, true), out)
      -- the update that left TURNS alone went once, without it
      local sent, count = sent_since(before)
      assert.equal(1, count)
      assert.same({ GlobalID = VALVE2, VALVEID = "V-2t" }, sent[VALVE2].attributes)
      -- the server made TURNS anew, without values: the change of it made here is held, never sent over
      -- that, and kept with the conflicts, as the new type holds it
      st = assert(geoservices.store.open(a))
      local conflicts = assert(st:conflicts())
      assert.equal(1, #conflicts)
      assert.equal(VALVE1, conflicts[1].globalId)
      local turns
      for _, dif in ipairs(conflicts[1].differences) do if dif.field == "TURNS" then turns = dif end end
      assert.same({ "12", true }, { turns["local"], turns.conflict })
      -- sent once when the user says so
      assert(st:resolve(VALVE1, "local"))
      st:close()
      before = #changelog()
      cli_sync(a)
      sent, count = sent_since(before)
      assert.equal(1, count)
      assert.same({ GlobalID = VALVE1, TURNS = "12" }, sent[VALVE1].attributes)
      assert.equal("12", helper.served_features(client(), "Utilities", 2)[VALVE1].attributes.TURNS)
      st = assert(geoservices.store.open(a))
      assert.equal(0, #assert(st:pending()))
      assert.equal(0, #assert(st:failed()))
      st:close()
      clean(a)
    end)

    it("a value the new type cannot hold is kept as it was and named, never deleted", function()
      local a = create()
      local st = assert(geoservices.store.open(a))
      local added = assert(st:add(2, { attributes = { VALVEID = "7" }, geometry = { x = -122.4, y = 37.7 } }))
      st:close()
      admin("deleteFromDefinition", { fields = { { name = "VALVEID" } } })
      admin("addToDefinition", { fields = { { name = "VALVEID", type = "esriFieldTypeInteger" } } })
      local before = #changelog()
      local out = cli_sync(a)
      assert.truthy(out:find("layer Valves: the server changed the type of field VALVEID from esriFieldTypeString to "
        .. "esriFieldTypeInteger: its column is MEDIUMINT in this file now (it was TEXT(20)), its values kept; 2 of "
        .. "them are not an integer (kept as they are, in " .. VALVE1 .. ", " .. VALVE2 .. "; an edit that sends one "
        .. "is refused here until it is changed)", 1, true), out)
      assert.equal("MEDIUMINT", declared(a, "VALVEID"))
      assert.truthy(out:find("layer Valves: field VALVEID holds another value on the server than in this file for 2 "
        .. "features not edited here (" .. VALVE1 .. ", " .. VALVE2 .. "): the server made the field anew", 1, true),
        out)
      assert.same({ { GlobalID = VALVE1, VALVEID = "V-1" }, { GlobalID = VALVE2, VALVEID = "V-2" },
        { GlobalID = added, VALVEID = 7 } }, rows(a, "SELECT GlobalID, VALVEID FROM Valves ORDER BY fid"))
      -- the queued add went once, with the value as the new type holds it
      local sent, count = sent_since(before)
      assert.equal(1, count)
      assert.equal(7, sent[added].attributes.VALVEID)
      clean(a)
    end)
  end)
end)
