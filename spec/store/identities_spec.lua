-- Identities stay true (issue 36 item 4): what QGIS does to a store's rows
-- is done here with plain SQL, as QGIS writes it. A split or a duplicate
-- copies the original's OBJECTID and GlobalID: the copy gets a GlobalID of
-- its own and no OBJECTID until the sync records the server's, so no two
-- rows share one; a feature pasted from another layer keeps the source's
-- GlobalID in QGIS: the store gives it one of its own, unique across the
-- whole store, so the server never holds one GlobalID in two layers.
local helper = require "spec.helper"

local P1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local P3 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E03}" -- OBJECTID 3 (the next Hydrant is 2)

local function norm(gid) return (tostring(gid):upper():gsub("[{}]", "")) end

describe("a store's identities", function()
  local world = helper.store_world{ service = "Parcels", layers = { 0, 1 }, syncModel = "perReplica" }
  setup(world.start)
  teardown(world.stop)

  local function server_layer(id)
    local list = {}
    for gid, f in pairs(world.emu:control("state").featureServices.Parcels.layers[tostring(id)].features) do
      if not f.deleted then list[norm(gid)] = f end
    end
    return list
  end

  it("a split's copy: its own GlobalID, no OBJECTID until the server's, never two rows with one", function()
    local st = world.create("split")
    local original = assert(st:get(0, P1)).attributes.OBJECTID
    assert(st.db:exec(([[INSERT INTO "Parcels" ("OBJECTID", "GlobalID", "APN", "OWNER", "%s")
      SELECT "OBJECTID", "GlobalID", 'split part', "OWNER", "%s" FROM "Parcels" WHERE "GlobalID" = '%s']]):format(
      st.layers[0].geometry_column, st.layers[0].geometry_column, P1)))
    local rows = assert(st.db:rows([[SELECT "GlobalID" AS g, "OBJECTID" AS oid FROM "Parcels"
      WHERE "APN" = 'split part']]))
    assert.equal(1, #rows)
    local copy = rows[1].g
    assert.are_not.equal(P1, copy)
    assert.is_nil(rows[1].oid) -- not the original's
    assert.equal(original, st:get(0, P1).attributes.OBJECTID)
    assert(st:sync(world.client()))
    local oid = st:get(0, copy).attributes.OBJECTID
    assert.equal(server_layer(0)[norm(copy)].attributes.OBJECTID, oid)
    assert.are_not.equal(original, oid)
    local twice = assert(st.db:rows([[SELECT "OBJECTID" FROM "Parcels" GROUP BY "OBJECTID" HAVING count(*) > 1]]))
    assert.same({}, twice)
    st:close()
  end)

  it("a feature pasted from another layer gets a GlobalID of its own: one GlobalID in one layer on the server",
    function()
      local st = world.create("paste")
      assert(st.db:exec(([[INSERT INTO "Hydrants" ("OBJECTID", "GlobalID", "FACILITYID", "%s")
        SELECT "OBJECTID", "GlobalID", 'pasted', "%s" FROM "Parcels" WHERE "GlobalID" = '%s']]):format(
        st.layers[1].geometry_column, st.layers[0].geometry_column, P3)))
      local rows = assert(st.db:rows([[SELECT "GlobalID" AS g, "OBJECTID" AS oid FROM "Hydrants"
        WHERE "FACILITYID" = 'pasted']]))
      local pasted = rows[1].g
      assert.are_not.equal(P3, pasted)
      local copied = rows[1].oid -- the Parcel's, copied: no other Hydrant holds it, it stays until the sync
      -- one add of the new GlobalID in layer 1, nothing queued for layer 0
      local pending = assert(st:pending())
      assert.equal(1, #pending)
      assert.same({ "add", 1, pasted }, { pending[1].op, pending[1].layer, pending[1].globalId })
      assert(st:sync(world.client()))
      assert.is_table(server_layer(1)[norm(pasted)])
      -- the server's OBJECTID replaces the copied one
      local oid = server_layer(1)[norm(pasted)].attributes.OBJECTID
      assert.are_not.equal(copied, oid)
      assert.equal(oid, st:get(1, pasted).attributes.OBJECTID)
      assert.is_nil(server_layer(1)[norm(P3)])
      assert.is_table(server_layer(0)[norm(P3)])
      st:close()
    end)

  it("a row inserted with another layer's GlobalID queues an add of its own, nothing of that feature", function()
    local st = world.create("regid")
    local hydrant = assert(st.db:rows([[SELECT "GlobalID" AS g FROM "Hydrants" LIMIT 1]]))[1].g
    -- an insert repeating a Parcel's GlobalID in Hydrants: renumbered, and no edit of P1 queued
    assert(st.db:exec(([[INSERT INTO "Hydrants" ("GlobalID", "FACILITYID") VALUES ('%s', 'dup')]]):format(P1)))
    for _, e in ipairs(assert(st:pending())) do
      assert.are_not.equal(P1, e.globalId)
      assert.are_not.equal("delete", e.op)
    end
    assert.is_table(st:get(1, hydrant))
    st:close()
  end)
end)
