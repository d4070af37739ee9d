-- Conflicts kept (issue 27, part 3): when a download changes or deletes a
-- feature that has a local edit not sent (queued, or sent and not
-- applied), the server's version goes into the feature table and the
-- local one is kept in geoservices_conflicts (a table GDAL and QGIS list),
-- with the server's value, the time and the outcome; the sync's result
-- names it; the edit is never sent over the newer value. A queued edit the
-- download did not touch stays queued.
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote

local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local PARCEL2 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}"
local PARCEL3 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E03}"

local function norm(gid) return (tostring(gid):upper():gsub("[{}]", "")) end

local run = helper.run_shell

local validate = helper.validate_gpkg

describe("replica store conflicts", function()
  local emu

  local world = helper.store_world()
  setup(function()
    world.start()
    emu = world.emu
  end)
  teardown(world.stop)
  before_each(function() emu:reset() end)

  local client, create = world.client, world.create

  local function server_feature(gid)
    local f = emu:control("state").featureServices.Parcels.layers["0"].features[gid]
    return f and not f.deleted and f or nil
  end

  -- the accepted edits of a replica in the server's change log
  local function sent_by(st)
    local rid, list = norm(st:replica().replicaID), {}
    for _, e in ipairs(emu:control("changelog?service=Parcels").entries) do
      if norm(e.origin) == rid and not e.refused then list[#list + 1] = e.op .. " " .. e.globalId end
    end
    return list
  end

  it("keeps a queued update the download overwrote (--direction download): consistent and reported", function()
    local st1, st2 = create("crew-1"), create("crew-2")
    local c = client()
    assert(st1:update(0, { attributes = { GlobalID = PARCEL1, OWNER = "crew 1" } }))
    assert(st1:update(0, { attributes = { GlobalID = PARCEL3, OWNER = "crew 1, untouched" } }))
    assert(st2:update(0, { attributes = { GlobalID = PARCEL1, OWNER = "crew 2" } }))
    assert(st2:sync(c))
    local result = assert(st1:sync(c, { direction = "download" }))
    -- the result names the conflict on the side that lost
    assert.equal(1, #result.conflicts)
    local named = result.conflicts[1]
    assert.same({ "update", 0, PARCEL1, "server_kept" }, { named.op, named.layer, named.globalId, named.outcome })
    assert.is_nil(named.sent) -- it never left
    assert.equal("crew 1", named.feature.attributes.OWNER) -- the local version
    assert.equal("crew 2", named.server.attributes.OWNER)
    -- the store holds the server's version; the local one is kept
    assert.equal("crew 2", st1:get(0, PARCEL1).attributes.OWNER)
    local kept = assert(st1:conflicts())
    assert.equal(1, #kept)
    assert.same({ "update", PARCEL1, "server_kept" }, { kept[1].op, kept[1].globalId, kept[1].outcome })
    assert.equal("crew 1", kept[1].feature.attributes.OWNER)
    assert.is_table(kept[1].feature.geometry)
    assert.equal("crew 2", kept[1].server.attributes.OWNER)
    assert.is_table(kept[1].base)
    assert.matches("^%d%d%d%d%-%d%d%-%d%dT", kept[1].detected)
    -- the untouched edit stays queued; the overwritten one is never sent
    local pending = assert(st1:pending())
    assert.equal(1, #pending)
    assert.equal(PARCEL3, pending[1].globalId)
    assert(st1:sync(c))
    assert.same({ "update " .. PARCEL3 }, sent_by(st1))
    assert.equal("crew 2", server_feature(PARCEL1).attributes.OWNER)
    assert.equal("crew 1, untouched", server_feature(PARCEL3).attributes.OWNER)
    -- GDAL lists the conflicts as a table of the GeoPackage, which stays valid
    local out = run("ogrinfo -so " .. q(st1.path))
    assert.truthy(out:find("geoservices_conflicts", 1, true), out)
    assert.equal("", validate(st1.path))
    st1:close()
    st2:close()
  end)

  it("keeps a queued update of a feature the server deleted, and a queued delete of one it changed", function()
    local st1, st2 = create("crew-1"), create("crew-2")
    local c = client()
    assert(st1:update(0, { attributes = { GlobalID = PARCEL1, OWNER = "updated here" } }))
    assert(st1:delete(0, PARCEL2))
    assert(st2:delete(0, PARCEL1))
    assert(st2:update(0, { attributes = { GlobalID = PARCEL2, OWNER = "changed there" } }))
    assert(st2:sync(c))
    local result = assert(st1:sync(c, { direction = "download" }))
    assert.equal(2, #result.conflicts)
    -- the server deleted parcel 1: gone here too, the local update kept
    assert.is_nil(st1:get(0, PARCEL1))
    -- the server changed parcel 2: back here with its values, the local delete kept
    assert.equal("changed there", st1:get(0, PARCEL2).attributes.OWNER)
    local by = {}
    for _, k in ipairs(assert(st1:conflicts())) do by[k.globalId] = k end
    assert.equal("updated here", by[PARCEL1].feature.attributes.OWNER)
    assert.equal(json.null, by[PARCEL1].server)
    assert.equal("delete", by[PARCEL2].op)
    assert.is_nil(by[PARCEL2].feature)
    assert.equal("changed there", by[PARCEL2].server.attributes.OWNER)
    assert.same({}, st1:pending())
    st1:close()
    st2:close()
  end)

  it("drops a queued delete of a feature the server deleted too, without a conflict", function()
    local st1, st2 = create("crew-1"), create("crew-2")
    local c = client()
    assert(st1:delete(0, PARCEL2))
    assert(st2:delete(0, PARCEL2))
    assert(st2:sync(c))
    local result = assert(st1:sync(c, { direction = "download" }))
    assert.same({}, result.conflicts)
    assert.same({}, st1:pending())
    assert.same({}, st1:conflicts())
    st1:close()
    st2:close()
  end)

  it("keeps a local add of a snapshot layer the server's data replaced", function()
    local st = create("snap")
    local mine = assert(st:add(0, { attributes = { APN = "local only" }, geometry = { x = -117.2, y = 34.1 } }))
    local result = assert(st:sync(client(), { direction = "snapshot" }))
    assert.is_nil(st:get(0, mine))
    assert.equal(1, #result.conflicts)
    local kept = assert(st:conflicts())
    assert.same({ "add", mine, "local only" }, { kept[1].op, kept[1].globalId, kept[1].feature.attributes.APN })
    assert.equal(json.null, kept[1].server)
    assert.same({}, st:pending())
    st:close()
  end)
end)
