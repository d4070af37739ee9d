-- What a GIS user does to a store's schema in QGIS, GDAL or the sqlite3
-- shell (issue 37 item 3): a field added is a local-only field, kept across
-- downloads and syncs and listed by status; a field renamed or deleted
-- leaves every command working, says what changed and what to do, and the
-- queued edits of the rest still reach the server.
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local run = helper.run_shell

local function sql(path, text)
  local out, ok = run(("ogrinfo -q -sql %s %s"):format(q(text), q(path)))
  assert.is_true(ok, out)
  return out
end

local function value(path, text)
  return (run("sqlite3 " .. q(path) .. " " .. q(text)):gsub("%s+$", ""))
end

describe("schema edits in a store", function()
  local world = helper.store_world({ service = "Electric", layers = { 0, 1 }, syncModel = "perReplica" })
  setup(world.start)
  teardown(world.stop)

  local function cli(args)
    return helper.run_cli(args, { GEOSERVICES_URL = world.emu.url, GEOSERVICES_TOKEN = "alice-token" })
  end

  local function server_pole(gid)
    local c = world.client()
    local body = assert(c:download(world.emu.url .. "/Electric/FeatureServer/0/query?f=json&outFields=*&where="
      .. ("GlobalID = '" .. gid .. "'"):gsub("[^%w]", function(ch) return ("%%%02X"):format(ch:byte()) end)))
    c:close()
    return json.decode(body).features[1].attributes
  end

  it("keeps a field the user added (SURVEYOR) when another crew's edit of the feature is downloaded", function()
    local a, b = world.create("added-a"), world.create("added-b")
    local pa, pb = a.path, b.path
    a:close()
    b:close()
    -- GDAL adds the field (as QGIS's "add field" does), the sqlite3 shell another one
    sql(pa, "ALTER TABLE Poles ADD COLUMN SURVEYOR TEXT")
    assert.equal("", value(pa, "ALTER TABLE Poles ADD COLUMN CHECKED INTEGER"))
    sql(pa, "UPDATE Poles SET SURVEYOR = 'ann', CHECKED = 1 WHERE fid = 1")
    local gid = value(pa, "SELECT GlobalID FROM Poles WHERE fid = 1")
    -- a local-only field's edit is nothing to send
    assert.equal("0", value(pa, "SELECT count(*) FROM gpkgext_geoservices_edits"))
    local r = cli{ "status", pa }
    assert.equal(0, r.code, r.err)
    assert.truthy(r.out:find("local-only fields SURVEYOR, CHECKED: kept in this file, not synchronized", 1, true),
      r.out)
    -- another crew edits the feature; this store downloads it
    sql(pb, "UPDATE Poles SET NAME = 'crew-b' WHERE GlobalID = '" .. gid .. "'")
    r = cli{ "sync", pb }
    assert.equal(0, r.code, r.err)
    r = cli{ "sync", pa }
    assert.equal(0, r.code, r.err)
    assert.equal("crew-b|ann|1", value(pa, "SELECT NAME, SURVEYOR, CHECKED FROM Poles WHERE fid = 1"))
    -- a local edit of the same feature goes, without the local-only fields; they stay across syncs
    sql(pa, "UPDATE Poles SET NAME = 'crew-a', SURVEYOR = 'bob' WHERE fid = 1")
    r = cli{ "sync", pa }
    assert.equal(0, r.code, r.err)
    local server = server_pole(gid)
    assert.equal("crew-a", server.NAME)
    assert.is_nil(server.SURVEYOR)
    r = cli{ "sync", pa }
    assert.equal(0, r.code, r.err)
    assert.equal("crew-a|bob|1", value(pa, "SELECT NAME, SURVEYOR, CHECKED FROM Poles WHERE fid = 1"))
    -- the file stays a valid GeoPackage
    assert.equal("", helper.validate_gpkg(pa))
  end)

  it("a renamed field blocks nothing: every command says what changed, the other edits are sent", function()
    local a = world.create("renamed")
    local pa = a.path
    a:close()
    local gid1 = value(pa, "SELECT GlobalID FROM Poles WHERE fid = 1")
    local gid2 = value(pa, "SELECT GlobalID FROM Poles WHERE fid = 2")
    -- an edit queued before the rename, then the rename (QGIS's field rename is this ALTER TABLE)
    sql(pa, "UPDATE Poles SET HEIGHT = 11.5 WHERE fid = 1")
    sql(pa, "ALTER TABLE Poles RENAME COLUMN NAME TO POLE_NAME")
    local r = cli{ "status", pa }
    assert.equal(0, r.code, r.err)
    assert.truthy(r.out:find("layer Poles: field NAME is not in the table any more (renamed to POLE_NAME): it is no "
      .. "longer synchronized", 1, true), r.out)
    assert.truthy(r.out:find('ALTER TABLE "Poles" RENAME COLUMN "POLE_NAME" TO "NAME"', 1, true), r.out)
    assert.truthy(r.out:find("1 queued edit of the layer sends the other fields only", 1, true), r.out)
    r = cli{ "pending", pa }
    assert.equal(0, r.code, r.err)
    assert.truthy(r.out:find("HEIGHT=11.5", 1, true), r.out)
    assert.truthy(r.err:find("field NAME is not in the table any more", 1, true), r.err)
    -- edits after the rename are captured for the table as it is now
    sql(pa, "UPDATE Poles SET HEIGHT = 22.5, POLE_NAME = 'renamed-edit' WHERE fid = 2")
    r = cli{ "discard", pa, gid2 }
    assert.equal(0, r.code, r.err .. r.out)
    sql(pa, "UPDATE Poles SET HEIGHT = 33.5 WHERE fid = 2")
    r = cli{ "sync", pa }
    assert.equal(0, r.code, r.err .. r.out)
    assert.equal(11.5, server_pole(gid1).HEIGHT)
    assert.equal(33.5, server_pole(gid2).HEIGHT)
    assert.equal("P-2", server_pole(gid2).NAME) -- the local-only column's value never reached NAME
    assert.equal("0", value(pa, "SELECT count(*) FROM gpkgext_geoservices_edits"))
    -- renamed back and opened once (as the note says): synchronized again
    sql(pa, "ALTER TABLE Poles RENAME COLUMN POLE_NAME TO NAME")
    r = cli{ "status", pa }
    assert.falsy(r.out:find("not in the table", 1, true), r.out)
    sql(pa, "UPDATE Poles SET NAME = 'back' WHERE fid = 1")
    r = cli{ "sync", pa }
    assert.equal(0, r.code, r.err .. r.out)
    assert.equal("back", server_pole(gid1).NAME)
  end)

  it("a deleted layer blocks nothing: made again empty, the other layers' edits sent, its own discardable", function()
    local a = world.create("dropped one") -- (a space: the command it advises quotes the path)
    local pa = a.path
    a:close()
    local pole = value(pa, "SELECT GlobalID FROM Poles WHERE fid = 1")
    local line = value(pa, "SELECT GlobalID FROM Lines WHERE fid = 1")
    sql(pa, "UPDATE Poles SET HEIGHT = 44.5 WHERE fid = 1")
    sql(pa, "UPDATE Lines SET VOLTAGE = 999 WHERE fid = 1")
    -- as QGIS's browser deletes a layer (GDAL: the table and its registration)
    sql(pa, "DROP TABLE Lines")
    local r = cli{ "status", pa }
    assert.equal(0, r.code, r.err)
    assert.truthy(r.out:find("layer Lines: its table was deleted (nothing is deleted on the server): made again, "
      .. "empty", 1, true), r.out)
    assert.truthy(r.out:find("1 queued edit of it lost its values with the table: not sent, listed by "
      .. "geoservices replica failed", 1, true), r.out)
    -- that command, as printed, lists it
    local advised = assert(r.out:match("listed by geoservices (replica failed [^\n]+)"), r.out)
    local quoted_path = assert(advised:match("^replica failed '(.*)'$"), advised)
    local listed = cli{ "replica", "failed", quoted_path }
    assert.equal(0, listed.code, listed.err)
    assert.truthy(listed.out:find("1 rejected local edit", 1, true), listed.out)
    assert.equal(line .. "|not sent: table Lines was deleted with the feature's values (in QGIS or with DROP TABLE)",
      value(pa, "SELECT global_id, description FROM gpkgext_geoservices_failed_edits"))
    r = cli{ "pending", pa }
    assert.equal(0, r.code, r.err)
    assert.truthy(r.out:find("HEIGHT=44.5", 1, true), r.out)
    r = cli{ "sync", pa }
    assert.equal(44.5, server_pole(pole).HEIGHT, r.err .. r.out)
    assert.equal(0, r.code, r.err .. r.out)
    assert.equal("0", value(pa, "SELECT count(*) FROM gpkgext_geoservices_edits"))
    -- the table is back, registered, and takes edits again
    sql(pa, "INSERT INTO Lines (LINEID, VOLTAGE) VALUES ('L-new', 11)")
    assert.equal("1", value(pa, "SELECT count(*) FROM gpkgext_geoservices_edits WHERE op = 'add'"))
    assert.equal("", helper.validate_gpkg(pa))
  end)
end)
