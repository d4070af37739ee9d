-- Change capture in the file itself (issue 27, part 1): plain SQL triggers
-- on each feature table queue every insert, update and delete, whoever
-- makes it (GDAL's ogrinfo -sql, the sqlite3 shell, the library), fold
-- edits of one feature as a user expects, give a row inserted without a
-- GlobalID a version 4 UUID, never refuse an edit, and leave the
-- library's own writes of downloaded data out. A store made before the
-- triggers gets them when it is opened.
local data = require "spec.support.store_data"
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local result_file = require "geoservices.store.sync.result_file"
local store = require "geoservices.store"

local q = helper.shell_quote

local REPLICA = { service = "Parcels", replicaID = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}",
                  syncModel = "perReplica", replicaServerGen = 5 }

-- A table without geometry: the sqlite3 shell can write it (a feature
-- table's R-tree triggers call ST_* functions only GDAL and the library
-- define).
local INSPECTIONS = {
  id = 5, name = "Inspections", type = "Table", objectIdField = "OBJECTID", globalIdField = "GlobalID",
  fields = {
    { name = "OBJECTID", type = "esriFieldTypeOID" },
    { name = "GlobalID", type = "esriFieldTypeGlobalID", length = 38 },
    { name = "NOTE", type = "esriFieldTypeString", length = 100 },
    { name = "SCORE", type = "esriFieldTypeInteger" },
  },
}

local UUID4 = "^{%x%x%x%x%x%x%x%x%-%x%x%x%x%-4%x%x%x%-[89AB]%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x}$"

local run = helper.run_shell

-- SQL through GDAL (its GeoPackage driver, its own SQLite connection)
local function ogr_sql(path, sql)
  local out, ok = run(("ogrinfo -q -sql %s %s"):format(q(sql), q(path)))
  assert(ok, out)
  assert.falsy(out:find("ERROR", 1, true), out)
  return out
end

-- SQL through the sqlite3 shell: no code of ours, nor GDAL's
local function shell_sql(path, sql)
  local out, ok = run(("sqlite3 %s %s"):format(q(path), q(sql)))
  assert(ok, out)
  return out
end

local function ops(st)
  local list = {}
  for _, e in ipairs(assert(st:pending())) do list[#list + 1] = e.op .. " " .. e.globalId end
  return list
end

describe("replica store change capture", function()
  local dir, n

  setup(function() dir = helper.tmp_dir() end)
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  -- a store whose layers 0 (points) and 3 (polygons) hold features 1..3 as
  -- downloaded, and an empty table (layer 5)
  local function fresh()
    n = (n or 0) + 1
    local result = ("%s/r%d.json"):format(dir, n)
    data.write_result(result, { [0] = 3, [3] = 3 })
    local layers = data.layers()
    layers[#layers + 1] = INSPECTIONS
    local path = ("%s/c%d.gpkg"):format(dir, n)
    return assert(store.create_from(path, REPLICA, layers, result)), path
  end

  it("queues nothing for the data a store was created with, and captures from then on", function()
    local st = fresh()
    assert.same({}, st:pending())
    assert.same({ { enabled = 1 } }, st.db:rows("SELECT enabled FROM gpkgext_geoservices_capture"))
    st:close()
  end)

  it("queues an UPDATE made through GDAL once, with the values before it as its base", function()
    local st, path = fresh()
    local gid = data.gid(3, 1)
    ogr_sql(path, ("UPDATE Parcels SET NAME = 'renamed in GDAL' WHERE GlobalID = '%s'"):format(gid))
    local pending = assert(st:pending())
    assert.equal(1, #pending)
    assert.same({ "update", 3, gid }, { pending[1].op, pending[1].layer, pending[1].globalId })
    assert.same({ GlobalID = gid, NAME = "renamed in GDAL" }, pending[1].feature.attributes)
    assert.is_nil(pending[1].feature.geometry) -- it did not move
    local before = data.feature(3, 1)
    assert.equal(before.attributes.NAME, pending[1].base.attributes.NAME)
    assert.equal(before.attributes.UPDATED, pending[1].base.attributes.UPDATED) -- a date, in milliseconds
    assert.same(before.geometry.rings[1][1], pending[1].base.geometry.rings[1][1])
    -- a second update folds in and keeps the first base
    ogr_sql(path, ("UPDATE Parcels SET COUNT = 99 WHERE GlobalID = '%s'"):format(gid))
    pending = assert(st:pending())
    assert.equal(1, #pending)
    assert.same({ GlobalID = gid, NAME = "renamed in GDAL", COUNT = 99 }, pending[1].feature.attributes)
    assert.equal(before.attributes.NAME, pending[1].base.attributes.NAME)
    -- an UPDATE that changes no value queues nothing
    ogr_sql(path, ("UPDATE Hydrants SET NAME = NAME WHERE GlobalID = '%s'"):format(data.gid(0, 1)))
    assert.equal(1, #st:pending())
    st:close()
  end)

  it("gives a row inserted without a GlobalID a version 4 UUID and queues one add", function()
    local st, path = fresh()
    ogr_sql(path, "INSERT INTO Hydrants (NAME) VALUES ('added in GDAL')")
    shell_sql(path, "INSERT INTO Inspections (NOTE, SCORE) VALUES ('added in sqlite3', 4)")
    local rows = st.db:rows("SELECT GlobalID FROM Hydrants WHERE NAME = 'added in GDAL'")
    local gdal_gid = rows[1].GlobalID
    assert.matches(UUID4, gdal_gid)
    local shell_gid = st.db:rows("SELECT GlobalID FROM Inspections")[1].GlobalID
    assert.matches(UUID4, shell_gid)
    assert.are_not.equal(gdal_gid, shell_gid)
    assert.same({ "add " .. gdal_gid, "add " .. shell_gid }, ops(st))
    local pending = st:pending()
    assert.same({ GlobalID = shell_gid, NOTE = "added in sqlite3", SCORE = 4 }, pending[2].feature.attributes)
    assert.is_nil(pending[2].base)
    st:close()
  end)

  it("folds edits of one feature: add+update is an add, add+delete nothing, update+delete a delete", function()
    local st, path = fresh()
    shell_sql(path, "INSERT INTO Inspections (NOTE, SCORE) VALUES ('first', 1); "
      .. "UPDATE Inspections SET SCORE = 2 WHERE NOTE = 'first'; "
      .. "INSERT INTO Inspections (NOTE, SCORE) VALUES ('gone', 1); DELETE FROM Inspections WHERE NOTE = 'gone'")
    local kept = st.db:rows("SELECT GlobalID FROM Inspections WHERE NOTE = 'first'")[1].GlobalID
    assert.same({ "add " .. kept }, ops(st))
    assert.equal(2, st:pending()[1].feature.attributes.SCORE) -- the add sends the latest values
    -- update then delete: the delete, with the values before the update
    local gid = data.gid(0, 2)
    ogr_sql(path, ("UPDATE Hydrants SET NAME = 'changed first' WHERE GlobalID = '%s'"):format(gid))
    ogr_sql(path, ("DELETE FROM Hydrants WHERE GlobalID = '%s'"):format(gid))
    assert.same({ "add " .. kept, "delete " .. gid }, ops(st))
    local delete = st:pending()[2]
    assert.is_nil(delete.feature)
    assert.equal(data.name(0, 2), delete.base.attributes.NAME)
    -- a delete, then the same GlobalID inserted again: an update of it
    shell_sql(path, ("INSERT INTO Inspections (GlobalID, NOTE) VALUES ('%s', 'x')"):format(data.gid(5, 1)))
    local seq = st:pending()[3].seq
    assert(st.db:run("DELETE FROM gpkgext_geoservices_edits WHERE seq = ?", seq)) -- as if downloaded
    shell_sql(path, ("DELETE FROM Inspections WHERE GlobalID = '%s'"):format(data.gid(5, 1)))
    shell_sql(path, ("INSERT INTO Inspections (GlobalID, NOTE) VALUES ('%s', 'back')"):format(data.gid(5, 1)))
    local back = st:pending()[3]
    assert.same({ "update", data.gid(5, 1) }, { back.op, back.globalId })
    assert.equal("x", back.base.attributes.NOTE)
    assert.same({ GlobalID = data.gid(5, 1), NOTE = "back" }, back.feature.attributes)
    st:close()
  end)

  it("queues the library's own edits through the same triggers, folded with edits made elsewhere", function()
    local st, path = fresh()
    local gid = data.gid(3, 2)
    assert(st:update(3, { attributes = { GlobalID = gid, NAME = "by the library" } }))
    ogr_sql(path, ("UPDATE Parcels SET COUNT = 7 WHERE GlobalID = '%s'"):format(gid))
    local pending = assert(st:pending())
    assert.equal(1, #pending)
    assert.same({ GlobalID = gid, NAME = "by the library", COUNT = 7 }, pending[1].feature.attributes)
    assert.equal(data.name(3, 2), pending[1].base.attributes.NAME)
    local added = assert(st:add(0, { attributes = { NAME = "library add" }, geometry = { x = 1, y = 2 } }))
    ogr_sql(path, ("DELETE FROM Hydrants WHERE GlobalID = '%s'"):format(added))
    assert.same({ "update " .. gid }, ops(st))
    st:close()
  end)

  it("treats a GlobalID changed by hand as a delete of the old one and an add of the new", function()
    local st, path = fresh()
    local old, new = data.gid(0, 3), "{BBBBBBBB-0000-4000-8000-000000000001}"
    ogr_sql(path, ("UPDATE Hydrants SET GlobalID = '%s' WHERE GlobalID = '%s'"):format(new, old))
    assert.same({ "delete " .. old, "add " .. new }, ops(st))
    st:close()
  end)

  it("never refuses an edit: a blob where text was declared is taken and queued", function()
    local st, path = fresh()
    shell_sql(path, "INSERT INTO Inspections (NOTE, SCORE) VALUES (X'00FF', 'not a number')")
    assert.equal(1, #st.db:rows("SELECT * FROM Inspections"))
    assert.equal(1, #st.db:rows("SELECT * FROM gpkgext_geoservices_edits"))
    shell_sql(path, "UPDATE Inspections SET NOTE = 'text again'")
    shell_sql(path, "DELETE FROM Inspections")
    assert.same({}, st:pending()) -- add, update, delete: nothing to send
    st:close()
  end)

  it("does not capture the library's writes of downloaded data, and keeps capture on after them", function()
    local st = fresh()
    assert(st:update(0, { attributes = { GlobalID = data.gid(0, 1), NAME = "mine" } }))
    local result = dir .. "/download.json"
    -- the server's changes: features 4..5 of layer 3 added, feature 3 of layer 0 deleted
    data.write_result(result, { [0] = 0, [3] = 5 }, { deletes = { [0] = { data.gid(0, 3) } } })
    assert(st:transaction(function() return result_file.apply(st, result) end))
    assert.equal(5, st:count(3))
    assert.is_nil(st:get(0, data.gid(0, 3)))
    assert.same({ "update " .. data.gid(0, 1) }, ops(st))
    assert.same({ { enabled = 1 } }, st.db:rows("SELECT enabled FROM gpkgext_geoservices_capture"))
    -- a snapshot layer's replacement: cleared, not deleted feature by feature
    assert(st:transaction(function() return st:clear_layer(3) end))
    assert.equal(0, st:count(3))
    assert.equal(1, #st:pending())
    -- an apply that fails half-way leaves capture on too
    local bad = dir .. "/bad.json"
    helper.write_file(bad, '{"edits":[{"id":3,"features":{"adds":[{"attributes":{"GlobalID":"{X}"}},')
    local ok = st:transaction(function() return result_file.apply(st, bad) end)
    assert.is_nil(ok)
    assert.same({ { enabled = 1 } }, st.db:rows("SELECT enabled FROM gpkgext_geoservices_capture"))
    st:close()
  end)

  describe("a store made before the triggers (format 2)", function()
    local function old_store()
      n = (n or 0) + 1
      local path = ("%s/old%d.gpkg"):format(dir, n)
      assert(os.execute(("cp spec/fixtures/store/format2.gpkg %s"):format(q(path))))
      return path
    end

    it("gets them when opened: its queued edits kept, an edit made in GDAL queued", function()
      local path = old_store()
      local st = assert(store.open(path))
      assert.equal(require("geoservices.store.file.schema").FORMAT,
        st.db:rows("SELECT format FROM gpkgext_geoservices_replica")[1].format)
      local before = ops(st)
      assert.same({ "update " .. data.gid(3, 1), "add {AAAAAAAA-0000-4000-8000-000000000001}",
                    "add {AAAAAAAA-0000-4000-8000-000000000002}", "delete " .. data.gid(0, 2) }, before)
      local pending = st:pending()
      assert.same({ GlobalID = data.gid(3, 1), NAME = "renamed offline" }, pending[1].feature.attributes)
      assert.equal("hole 1", pending[1].base.attributes.NAME)
      assert.same({ GlobalID = "{AAAAAAAA-0000-4000-8000-000000000001}", NAME = "added 1" },
        pending[2].feature.attributes)
      st:close()
      ogr_sql(path, ("UPDATE Parcels SET NAME = 'in GDAL' WHERE GlobalID = '%s'"):format(data.gid(3, 3)))
      ogr_sql(path, ("UPDATE Parcels SET COUNT = 5 WHERE GlobalID = '%s'"):format(data.gid(3, 1)))
      st = assert(store.open(path))
      pending = st:pending()
      assert.equal(5, #pending)
      assert.same({ "update", data.gid(3, 3), "in GDAL" }, { pending[5].op, pending[5].globalId,
        pending[5].feature.attributes.NAME })
      -- folded into the old update, whose base it keeps
      assert.same({ GlobalID = data.gid(3, 1), NAME = "renamed offline", COUNT = 5 }, pending[1].feature.attributes)
      assert.equal(1, #assert(st:conflicts()))
      st:close()
    end)

    it("is read as it is when opened read-only", function()
      local path = old_store()
      local st = assert(store.open(path, { readonly = true }))
      assert.equal(4, #assert(st:pending()))
      assert.same({}, st.db:rows("SELECT name FROM sqlite_master WHERE name LIKE 'gpkgext_geoservices_capture%'"))
      st:close()
    end)
  end)

  it("keeps a feature's values exact through its base (dates, doubles, nulls)", function()
    local st, path = fresh()
    local gid = data.gid(0, 1)
    ogr_sql(path, ("UPDATE Hydrants SET AREA = NULL, UPDATED = '2001-02-03T04:05:06.789Z' WHERE GlobalID = '%s'")
      :format(gid))
    local e = assert(st:pending())[1]
    assert.equal(json.null, e.feature.attributes.AREA)
    assert.equal(981173106789, e.feature.attributes.UPDATED)
    assert.equal(1700000001000, e.base.attributes.UPDATED)
    assert.equal(1 / 7, e.base.attributes.AREA) -- every digit
    st:close()
  end)
end)
