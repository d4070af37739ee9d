-- QGIS itself changes a store's schema (issue 37 item 3, `make test-qgis`):
-- a field added in QGIS (SURVEYOR) and filled in is kept when another crew's
-- edit of the feature comes down, and never sent; a field renamed in QGIS
-- blocks no command; the pending and refused edits load in QGIS.
-- luacheck: std +busted
-- (run by `make test-qgis` alone: its name keeps it out of busted's default pattern)
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local run = helper.run_shell

local function qgis(...)
  local args = {}
  for i, a in ipairs{ ... } do args[i] = q(a) end
  local out, ok = run("QT_QPA_PLATFORM=offscreen /usr/bin/python3 spec/qgis/qgis_schema.py " .. table.concat(args, " "))
  local last = out:match("([^\n]+)\n?$")
  local answer = last and json.decode(last)
  assert(ok and type(answer) == "table" and answer.ok, out)
  return answer
end

local function value(path, sql)
  return (run("sqlite3 " .. q(path) .. " " .. q(sql)):gsub("%s+$", ""))
end

describe("schema edits made in QGIS", function()
  local world = helper.store_world({ service = "Electric", layers = { 0, 1 }, syncModel = "perReplica" })
  setup(world.start)
  teardown(world.stop)

  local function cli(args)
    return helper.run_cli(args, { GEOSERVICES_URL = world.emu.url, GEOSERVICES_TOKEN = "alice-token" })
  end

  it("keep a field QGIS added, rename one without blocking, and list the pending edits", function()
    local a, b = world.create("qgis-a"), world.create("qgis-b")
    local pa, pb = a.path, b.path
    a:close()
    b:close()
    local gid = value(pa, "SELECT GlobalID FROM Poles WHERE fid = 1")
    local answer = qgis("addfield", pa, "Poles", "SURVEYOR", "1", "ann")
    assert.is_true(answer.committed, json.encode(answer.errors))
    assert.equal("ann", value(pa, "SELECT SURVEYOR FROM Poles WHERE fid = 1"))
    assert.equal("0", value(pa, "SELECT count(*) FROM gpkgext_geoservices_edits"))
    local out, ok = run(("ogrinfo -q -sql %s %s"):format(q("UPDATE Poles SET NAME = 'crew-b' WHERE GlobalID = '"
      .. gid .. "'"), q(pb)))
    assert(ok, out)
    assert.equal(0, cli{ "sync", pb }.code)
    local r = cli{ "sync", pa }
    assert.equal(0, r.code, r.err)
    assert.equal("crew-b|ann", value(pa, "SELECT NAME, SURVEYOR FROM Poles WHERE fid = 1"))
    r = cli{ "status", pa }
    assert.truthy(r.out:find("local-only field SURVEYOR", 1, true), r.out)
    -- a field renamed through QGIS: every command still works and says so
    answer = qgis("rename", pa, "Lines", "VOLTAGE", "KV")
    assert.is_true(answer.committed, json.encode(answer.errors))
    r = cli{ "status", pa }
    assert.equal(0, r.code, r.err)
    assert.truthy(r.out:find("field VOLTAGE is not in the table any more (renamed to KV)", 1, true), r.out)
    out, ok = run(("ogrinfo -q -sql %s %s"):format(q("UPDATE Poles SET HEIGHT = 5.5 WHERE fid = 2"), q(pa)))
    assert(ok, out)
    -- the layers QGIS offers: the pending edit readable there
    local layers = {}
    for _, l in ipairs(qgis("layers", pa).layers) do layers[l.name] = l end
    assert.is_true(layers.Poles.valid)
    assert.is_true(layers.geoservices_pending.valid)
    assert.equal(1, layers.geoservices_pending.count)
    assert.is_true(layers.geoservices_rejected.valid)
    r = cli{ "sync", pa }
    assert.equal(0, r.code, r.err)
    assert.equal("0", value(pa, "SELECT count(*) FROM gpkgext_geoservices_edits"))
    assert.equal("", helper.validate_gpkg(pa))
  end)

  it("a field of the service deleted in QGIS is refused in words that say what to do", function()
    local st = world.create("deleted")
    local path = st.path
    st:close()
    local answer = qgis("deletefield", path, "Poles", "HEIGHT")
    io.stderr:write("\n[QGIS deleting HEIGHT] " .. json.encode(answer.errors) .. "\n")
    assert.is_false(answer.committed)
    local words = table.concat(answer.errors, "\n")
    assert.truthy(words:find("Poles: a field of the service cannot be deleted in its replica store; hide it in QGIS "
      .. "(Attributes Form: Hidden) or delete it on the server (lua-geoservices) after drop column: no such column: "
      .. "OLD.HEIGHT", 1, true), words)
    assert.equal("1", value(path, "SELECT count(*) FROM pragma_table_info('Poles') WHERE name = 'HEIGHT'"))
  end)
end)
