-- Deleting a field of the service in the store (issue 37): GDAL, QGIS and
-- the sqlite3 shell delete a field with ALTER TABLE DROP COLUMN, which the
-- capture triggers refuse (they read each field). The refusal says in
-- words what it is and what to do instead, before SQLite's own words: not
-- a trigger error naming OLD.MATERIAL. A field the user added is theirs to
-- delete. A store made before gets the words at its first open for writing.
-- What QGIS shows: spec/qgis/schema_in_qgis.lua (make test-qgis).
local helper = require "spec.helper"
local geoservices = require "geoservices"

local q = helper.shell_quote
local run = helper.run_shell

local WORDS = "Poles: a field of the service cannot be deleted in its replica store; hide it in QGIS "
  .. "(Attributes Form: Hidden) or delete it on the server (lua-geoservices)"

local function value(path, text)
  return (run("sqlite3 " .. q(path) .. " " .. q(text) .. " 2>&1"):gsub("%s+$", ""))
end

describe("a field of the service deleted in the store", function()
  local world = helper.store_world({ service = "Electric", layers = { 0, 1 }, syncModel = "perReplica" })
  setup(world.start)
  teardown(world.stop)

  it("is refused in words that say what to do; a field the user added is deleted", function()
    local st = world.create("fields")
    local path = st.path
    st:close()
    -- GDAL (as QGIS deletes a field)
    local out = run(("ogrinfo -q -sql %s %s 2>&1"):format(q("ALTER TABLE Poles DROP COLUMN HEIGHT"), q(path)))
    assert.truthy(out:find("error in trigger " .. WORDS .. " after drop column: no such column: OLD.HEIGHT", 1, true),
      out)
    -- the sqlite3 shell
    out = value(path, "ALTER TABLE Poles DROP COLUMN NAME")
    assert.truthy(out:find("error in trigger " .. WORDS, 1, true), out)
    assert.equal("1", value(path, "SELECT count(*) FROM pragma_table_info('Poles') WHERE name IN ('NAME')"))
    assert.equal("", value(path, "ALTER TABLE Poles ADD COLUMN SURVEYOR TEXT"))
    assert.equal("", value(path, "ALTER TABLE Poles DROP COLUMN SURVEYOR"))
    -- the store still captures and sends (GDAL's UPDATE, as QGIS's)
    out = run(("ogrinfo -q -sql %s %s 2>&1"):format(q("UPDATE Poles SET HEIGHT = 77.25 WHERE fid = 1"), q(path)))
    assert.equal("", out)
    st = assert(geoservices.store.open(path))
    assert.equal(1, #assert(st:pending()))
    local r = assert(st:sync(world.client()))
    assert.equal(1, r.summary.sent, require("geoservices.base.json").encode(r.summary))
    st:close()
  end)

  it("is refused in those words in a store made before, once any command opened it", function()
    local st = world.create("older")
    local path = st.path
    st:close()
    -- as a store of format 10 was: no words, its capture triggers alone
    assert.equal("", value(path, ('DROP TRIGGER "%s"; DROP TRIGGER "%s"; UPDATE gpkgext_geoservices_replica '
      .. "SET format = 10"):format(WORDS, (WORDS:gsub("^Poles", "Lines")))))
    local out = value(path, "ALTER TABLE Poles DROP COLUMN HEIGHT")
    assert.truthy(out:find("error in trigger geoservices_Poles_update after drop column", 1, true), out)
    assert(geoservices.store.open(path)):close()
    out = value(path, "ALTER TABLE Poles DROP COLUMN HEIGHT")
    assert.truthy(out:find("error in trigger " .. WORDS .. " after drop column: no such column: OLD.HEIGHT", 1, true),
      out)
  end)
end)
