-- What a QGIS user sees of a store's conflicts (issue 36, `make test-qgis`,
-- not in `make test`): crew B edits and syncs first, crew A's edits of the
-- same features go with a plain sync and are held back; through QGIS's own
-- OGR provider (spec/qgis/qgis_conflicts.py, headless) the layer
-- geoservices_conflicts is valid, each conflict a feature at the local
-- version's place (a moved point where A moved it, a deleted one where it
-- was), drawn, with the base, local and server values in words, and
-- geoservices_conflict_fields holds them side by side.
-- luacheck: std +busted
-- (run by `make test-qgis` alone: its name keeps it out of busted's default pattern)
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote

local P1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local P2 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}"
local P3 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E03}"
local SHOWN_PNG = "/tmp/qgis_conflicts.png" -- where the lead looks at QGIS's drawing

describe("the conflicts in QGIS", function()
  local world = helper.store_world()
  setup(world.start)
  teardown(world.stop)

  it("are a layer QGIS draws at the local version's place, with the three values readable", function()
    local a, b = world.create("crew-a"), world.create("crew-b")
    assert(b:update(0, { attributes = { GlobalID = P1, OWNER = "B's owner" } }))
    assert(b:update(0, { attributes = { GlobalID = P2 }, geometry = { x = -117.1, y = 34.1 } }))
    assert(b:update(0, { attributes = { GlobalID = P3, APN = "B's apn" } }))
    assert(b:sync(world.client()))
    assert(a:update(0, { attributes = { GlobalID = P1, OWNER = "A's owner" } }))
    assert(a:update(0, { attributes = { GlobalID = P2 }, geometry = { x = -117.3, y = 34.3 } }))
    assert(a:delete(0, P3))
    local result = assert(a:sync(world.client()))
    assert.equal(3, result.summary.held)
    local path = a.path
    a:close()
    b:close()
    local out, ok = helper.run_shell(("QT_QPA_PLATFORM=offscreen /usr/bin/python3 spec/qgis/qgis_conflicts.py %s %s")
      :format(q(path), q(SHOWN_PNG)))
    assert(ok, out)
    local look = json.decode(out:match("([^\n]+)\n*$"))
    assert.is_true(look.valid, out)
    assert.equal(3, look.count)
    assert.equal(3, #look.features)
    local by = {}
    for _, f in ipairs(look.features) do by[f.global_id] = f end
    for _, f in ipairs(look.features) do
      assert.is_false(f.empty, f.global_id)
      assert.equal("held", f.outcome)
    end
    -- where the local version is: A's move, the deleted parcel where it was
    assert.same({ -117.3, 34.3 }, { by[P2].x, by[P2].y })
    assert.equal("move", by[P2].kind)
    assert.equal("delete_update", by[P3].kind)
    assert.near(-117.19655, by[P3].x, 1e-9)
    assert.equal('APN: base "101-200-03", here deleted, server "B\'s apn" (both changed)', by[P3].differences)
    assert.truthy(by[P1].differences:find('OWNER: base "Jane Smith", here "A\'s owner", server "B\'s owner" '
      .. "(both changed)", 1, true), by[P1].differences)
    assert.is_true(look.pixels > 0, "nothing drawn")
    local owner
    for _, r in ipairs(look.fields_table) do
      if r.field == "OWNER" and r.local_value == "A's owner" then owner = r end
    end
    assert.same({ "Jane Smith", "B's owner", 1 }, { owner.base_value, owner.server_value, owner.both_changed })
  end)
end)
