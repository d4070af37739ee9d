-- A photo added to a valve through QGIS's form (issue 37, `make test-qgis`):
-- the project in the store, the valve's attachments relation, the child
-- feature made as the relation editor makes it and committed by QGIS
-- (spec/qgis/qgis_photo.py). The next sync uploads it once, and another
-- replica downloads it from the server with its bytes.
-- luacheck: std +busted
-- (run by `make test-qgis` alone: its name keeps it out of busted's default pattern)
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local run = helper.run_shell

local JPEG = "FFD8FFE000104A46494600010100000100010000FFD9"

describe("a photo added in QGIS's form (issue 37)", function()
  local world = helper.store_world{ service = "Utilities", layers = { 0, 1, 2, 3 }, syncModel = "perLayer" }
  setup(world.start)
  teardown(world.stop)

  local function sqlite(path, sql)
    local out, ok = run("sqlite3 " .. q(path) .. " " .. q(sql))
    assert.is_true(ok, out)
    return (out:gsub("%s+$", ""))
  end

  it("reaches the server once with its bytes", function()
    local st = world.create("photo")
    local path = st.path
    st:close()
    local photo = world.dir .. "/valve.jpg"
    helper.write_file(photo, (JPEG:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end)))
    local out, ok = run(("QT_QPA_PLATFORM=offscreen /usr/bin/python3 spec/qgis/qgis_photo.py %s photo %s")
      :format(q(path), q(photo)))
    local answer = json.decode((assert(out:match("([^\n]+)\n?$"), out)))
    io.stderr:write("\n[QGIS adds a photo] " .. json.encode(answer) .. "\n")
    assert(ok and answer.ok, out)
    assert.same({ true, true, true, { "SUCCESS: 1 feature(s) added." } },
      { answer.relation_valid, answer.added, answer.committed, answer.errors })
    assert.equal("|" .. answer.parent .. "|" .. JPEG, sqlite(path, "SELECT layer_id, parent_global_id, hex(data) "
      .. "FROM geoservices_attachments WHERE name = 'valve.jpg'"))
    local env = { GEOSERVICES_URL = world.emu.url, GEOSERVICES_TOKEN = "alice-token" }
    -- what the user sees before the sync: the photo waits to be sent
    local r = helper.run_cli({ "pending", path }, env)
    assert.equal(0, r.code, r.err .. r.out)
    assert.truthy(r.out:find("valve.jpg", 1, true), r.out)
    r = helper.run_cli({ "sync", path }, env)
    assert.equal(0, r.code, r.err .. r.out)
    r = helper.run_cli({ "sync", path }, env)
    assert.equal(0, r.code, r.err .. r.out)
    assert.equal("0", sqlite(path, "SELECT count(*) FROM gpkgext_geoservices_attachment_edits"))
    -- another replica gets the photo with its bytes: the server has it, once
    local other = world.create("other", { returnAttachments = true })
    local opath = other.path
    other:close()
    assert.equal(JPEG .. "|" .. answer.parent, sqlite(opath, "SELECT hex(data), parent_global_id "
      .. "FROM geoservices_attachments WHERE name = 'valve.jpg'"))
  end)
end)
