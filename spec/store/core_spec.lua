-- The C side of the replica store (geoservices.Store, core.gpkg_geometry,
-- core.esri_geometry): lifecycle as liolib's, the statement helpers, the
-- fast path's rules (a transaction, no re-entry, errors of the receiver).
local core = require "geoservices.core"
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local function tmpfile()
  local p = helper.tmp_name()
  os.remove(p)
  return p .. ".gpkg"
end

local LAYER = {
  id = 0, table = "pts", geometry_column = "geom", geometry_kind = "point", srs_id = 4326, globalid = "GlobalID",
  oid = "OBJECTID",
  columns = { { name = "OBJECTID", type = "integer" }, { name = "GlobalID", type = "guid" },
              { name = "NAME", type = "text" }, { name = "D", type = "date" } },
}

local function open_with_table(path)
  local db = assert(core.store_open(path, { create = true }))
  assert(db:exec([[CREATE TABLE pts (OBJECTID INTEGER PRIMARY KEY, geom POINT, GlobalID TEXT UNIQUE, NAME TEXT,
    D DATETIME); CREATE TABLE gpkg_contents (table_name TEXT PRIMARY KEY, last_change, min_x, min_y, max_x, max_y)]]))
  assert(db:layer(LAYER))
  return db
end

describe("geoservices.Store", function()
  local paths = {}
  local function path()
    paths[#paths + 1] = tmpfile()
    return paths[#paths]
  end
  teardown(function()
    for _, p in ipairs(paths) do
      os.remove(p)
      os.remove(p .. "-journal")
    end
  end)

  it("follows liolib's lifecycle: tostring, idempotent close, use after close raises", function()
    local db = assert(core.store_open(path(), { create = true }))
    assert.matches("^geoservices%.Store %(0x%x+%)$", tostring(db))
    assert.is_true(db:close())
    assert.is_true(db:close())
    assert.matches("^geoservices%.Store %(0x%x+, closed%)$", tostring(db))
    assert.has_error(function() db:exec("SELECT 1") end, "attempt to use a closed Store")
    assert.has_error(function() db:rows("SELECT 1") end, "attempt to use a closed Store")
  end)

  it("closes on leaving a <close> scope, even with an error, and rolls back what was open", function()
    local p = path()
    local ok = pcall(function()
      local db <close> = open_with_table(p)
      assert(db:begin())
      assert(db:run("INSERT INTO pts (GlobalID) VALUES ('x')"))
      error("leaving")
    end)
    assert.is_false(ok)
    local db <close> = assert(core.store_open(p))
    assert.same({ { n = 0 } }, db:rows("SELECT count(*) AS n FROM pts"))
  end)

  it("survives collection with a transaction open and a module reload", function()
    local p = path()
    do
      local db = open_with_table(p)
      assert(db:begin())
      assert(db:put(0, { attributes = { GlobalID = "{A}" } }))
    end
    collectgarbage()
    collectgarbage()
    local kept = assert(core.store_open(p))
    package.loaded["geoservices.core"] = nil
    local again = require "geoservices.core"
    package.loaded["geoservices.core"] = core
    local db <close> = assert(again.store_open(p))
    assert.same({ { n = 0 } }, db:rows("SELECT count(*) AS n FROM pts")) -- rolled back by the collection
    assert.same({ { n = 0 } }, kept:rows("SELECT count(*) AS n FROM pts"))
    kept:close()
  end)

  it("binds and reads values with run and rows; returns failures with a stable code", function()
    local db <close> = open_with_table(path())
    local changes, rowid = db:run("INSERT INTO pts (OBJECTID, GlobalID, NAME) VALUES (?, ?, ?)", 7, "{A}", nil)
    assert.equal(1, changes)
    assert.equal(7, rowid)
    assert(db:run("INSERT INTO pts (GlobalID, NAME) VALUES (?, ?)", "{B}", json.null))
    assert.same({ { OBJECTID = 7, GlobalID = "{A}" }, { OBJECTID = 8, GlobalID = "{B}" } },
      db:rows("SELECT OBJECTID, GlobalID, NAME FROM pts ORDER BY OBJECTID"))
    assert.same({ { x = 1.5, b = "\0\1" } }, db:rows("SELECT ? AS x, ? AS b", 1.5, "\0\1"))
    local ok, msg, code = db:run("INSERT INTO pts (GlobalID) VALUES (?)", "{A}")
    assert.is_nil(ok)
    assert.matches("UNIQUE", msg)
    assert.equal("constraint", code)
    ok, msg, code = db:rows("SELECT nope FROM pts")
    assert.is_nil(ok)
    assert.matches("nope", msg)
    assert.equal("sqlite", code)
    ok, msg = db:exec("NOT SQL")
    assert.is_nil(ok)
    assert.matches("syntax", msg)
    assert.has_error(function() db:run("SELECT ?", {}) end)
    assert.has_error(function() db:run("SELECT ?", 1, 2) end)
    assert.has_error(function() db:commit() end, "store: commit() without a transaction")
    assert.is_true(db:rollback()) -- nothing to undo is fine
  end)

  it("applies records only inside a transaction, and never re-entered", function()
    local db <close> = open_with_table(path())
    local rec = core.records()
    assert(rec:feed('{"edits":[{"id":0,"features":{"adds":[{"attributes":{"OBJECTID":1,"GlobalID":"{A}",'
      .. '"D":86400000},"geometry":{"x":1,"y":2}}]},"addResults":[]}],"tail":1}'))
    assert(rec:finish())
    assert.has_error(function() db:apply(rec) end, "store:apply needs a transaction (store:begin())")
    assert(db:begin())
    assert.has_error(function()
      db:apply(rec, function() db:apply(rec) end)
    end, "store:apply is not re-entrant")
    -- the failed apply drained the tape: nothing is applied twice
    assert.same({ 0, 0 }, { db:apply(rec) })
    assert(db:rollback())

    rec = core.records()
    assert(rec:feed('{"edits":[{"id":0,"features":{"adds":[{"attributes":{"OBJECTID":1,"GlobalID":"{A}",'
      .. '"D":86400000},"geometry":{"x":1,"y":2}}]}}],"tail":1}'))
    assert(rec:finish())
    assert(db:begin())
    local got = {}
    local applied, delivered = db:apply(rec, function(kind, layer, value, key)
      got[#got + 1] = { kind, layer, value, key }
    end)
    assert.equal(1, applied)
    assert.equal(1, delivered)
    assert.same({ { "layer", 0 }, { "field", nil, 1, "tail" } }, got)
    assert(db:commit())
    assert.same({ { D = "1970-01-02T00:00:00.000Z" } }, db:rows("SELECT D FROM pts"))
    assert.same({ add = 1 }, db:applied())
    local f = db:get(0, "{A}")
    assert.same({ OBJECTID = 1, GlobalID = "{A}", NAME = json.null, D = 86400000 }, f.attributes)
    assert.same({ x = 1, y = 2 }, f.geometry)
    assert.is_nil(db:get(0, "{B}"))
    assert.equal(1, db:remove(0, "{A}"))
    assert.equal(0, db:remove(0, "{A}"))
  end)

  it("raises the receiver's error once the tape is drained", function()
    local db <close> = open_with_table(path())
    local rec = core.records()
    assert(rec:feed('{"a":1,"b":2}'))
    assert(rec:finish())
    assert(db:begin())
    local calls = 0
    assert.has_error(function()
      db:apply(rec, function() calls = calls + 1; error("receiver failed") end)
    end)
    assert.equal(1, calls)
    assert.same({ 0, 0 }, { db:apply(rec) })
    db:rollback()
  end)

  it("returns a record it cannot take as nil, message, 'data'", function()
    local db <close> = open_with_table(path())
    local rec = core.records()
    assert(rec:feed('{"edits":[{"id":0,"features":{"adds":[{"attributes":{"OBJECTID":1}}]}}]}'))
    assert(rec:finish())
    assert(db:begin())
    local n, msg, code = db:apply(rec)
    assert.is_nil(n)
    assert.matches("no GlobalID", msg)
    assert.equal("data", code)
    db:rollback()
  end)

  it("raises on a bad layer spec", function()
    local db <close> = open_with_table(path())
    assert.has_error(function() db:layer{ id = 1 } end)
    assert.has_error(function() db:layer{ id = 1, table = "pts", globalid = "G", columns = {} } end,
      "store:layer: 'G' is not a column")
    assert.has_error(function() db:put(5, {}) end, "store: layer 5 is not registered")
    local ok, msg = db:layer{ id = 1, table = "missing", globalid = "G", columns = { { name = "G", type = "guid" } } }
    assert.is_nil(ok)
    assert.matches("missing", msg)
  end)
end)

describe("core.gpkg_geometry and core.esri_geometry", function()
  it("encode Esri geometries and decode them back", function()
    local cases = {
      { x = -117.25, y = 34.5 },
      { points = { { 1, 2 }, { 3, 4 } } },
      { paths = { { { 0, 0 }, { 1, 1 } } } },
      { paths = { { { 0, 0 }, { 1, 1 } }, { { 2, 2 }, { 3, 3 } } } },
      { rings = { { { 0, 0 }, { 0, 10 }, { 10, 10 }, { 10, 0 }, { 0, 0 } },
                  { { 2, 2 }, { 8, 2 }, { 8, 8 }, { 2, 8 }, { 2, 2 } } } },
    }
    for _, g in ipairs(cases) do
      local blob, env = core.gpkg_geometry(g, 3857)
      assert.equal("GP", blob:sub(1, 2))
      assert.equal(4, #env)
      local back, srs = core.esri_geometry(blob)
      assert.equal(3857, srs)
      assert.same(g, json.decode(json.encode(back)))
    end
    local blob, env = core.gpkg_geometry({ x = "NaN" }, 4326)
    assert.is_nil(env)
    assert.same({ x = json.null }, core.esri_geometry(blob))
    local none, msg = core.esri_geometry("GP\0\1garbage")
    assert.is_nil(none)
    assert.matches("truncated", msg)
    -- true curves are geometries (issue 28: store_curves_spec); a table of no known shape is not
    assert.has_error(function() core.gpkg_geometry({ curves = {} }) end)
    assert.has_error(function() core.gpkg_geometry({ rings = { { { 0 } } } }) end)
  end)
end)
