-- What the README says of the sqlite3 shell (issue 37 item 4), run as it
-- says: the shell reads a store and edits a table without geometry (the
-- edit is queued and reaches the server); a layer's edits need GDAL's ST_
-- functions, which the GeoPackage R-tree triggers call: the shell refuses
-- them whole (nothing half-written, nothing queued), and ogrinfo -sql does them.
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local run = helper.run_shell

local function sqlite(path, sql)
  return run("sqlite3 " .. q(path) .. " " .. q(sql))
end

describe("the sqlite3 shell on a store", function()
  local world = helper.store_world({ service = "Utilities", layers = { 2, 3 }, syncModel = "perLayer" })
  setup(world.start)
  teardown(world.stop)

  it("reads it and edits a table without geometry; a layer's edit is refused whole, as the README says", function()
    local readme = helper.read_all(helper.ROOT .. "/README.md")
    assert.truthy(readme:find("`sqlite3` edits only tables without geometry", 1, true))
    local st = world.create("shell")
    local path = st.path
    st:close()
    local out, ok = sqlite(path, "SELECT count(*) FROM Valves")
    assert.is_true(ok, out)
    assert.truthy(out:match("^%d+"), out)
    -- a table without geometry: queued by the plain-SQL capture triggers
    out, ok = sqlite(path, "UPDATE Inspections SET RESULT = 'shell-edit' WHERE fid = "
      .. "(SELECT min(fid) FROM Inspections)")
    assert.is_true(ok, out)
    assert.equal("1", (sqlite(path, "SELECT count(*) FROM gpkgext_geoservices_edits"):gsub("%s+", "")))
    -- a layer: the R-tree triggers need ST_IsEmpty, which only GDAL (or SpatiaLite) registers
    out, ok = sqlite(path, "UPDATE Valves SET VALVEID = VALVEID WHERE fid = (SELECT min(fid) FROM Valves)")
    assert.falsy(ok, out)
    assert.truthy(out:find("no such function: ST_IsEmpty", 1, true), out)
    assert.equal("1", (sqlite(path, "SELECT count(*) FROM gpkgext_geoservices_edits"):gsub("%s+", "")))
    -- the same edit through GDAL goes
    out, ok = run(("ogrinfo -q -sql %s %s"):format(q("UPDATE Valves SET VALVEID = VALVEID || '-x' WHERE fid = "
      .. "(SELECT min(fid) FROM Valves)"), q(path)))
    assert.is_true(ok, out)
    assert.equal("2", (sqlite(path, "SELECT count(*) FROM gpkgext_geoservices_edits"):gsub("%s+", "")))
    -- the shell's edit reaches the server
    local c = world.client()
    st = require("geoservices").store.open(path)
    local result, err = st:sync(c)
    st:close()
    assert.is_table(result, tostring(err))
    local body = assert(c:download(world.emu.url .. "/Utilities/FeatureServer/3/query?f=json&outFields=*&where="
      .. ("RESULT = 'shell-edit'"):gsub("[^%w]", function(ch) return ("%%%02X"):format(ch:byte()) end)))
    c:close()
    assert.equal(1, #json.decode(body).features, body)
  end)
end)
