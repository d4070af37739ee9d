-- Bad input refused at sync time (issue 27, part 7): a store edited into a
-- state the server cannot take (a geometry of the wrong type or one that
-- cannot be read, a value of the wrong type for its field, text longer
-- than its field, a missing required field, a GlobalID that is not one) is
-- refused per edit, naming the layer, the GlobalID and the rule; nothing is
-- sent for that edit, the rest of the queue goes, and the edit stays queued
-- until the feature is fixed. The edit itself was never refused: a trigger
-- never aborts a user's edit.
local core = require "geoservices.core"
local data = require "spec.support.store_data"
local geoservices = require "geoservices"
local helper = require "spec.helper"
local store = require "geoservices.store"

local q = helper.shell_quote

local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local PARCEL2 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}"
local PARCEL3 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E03}"

local run = helper.run_shell

local function ogr_sql(path, sql)
  local out, ok = run(("ogrinfo -q -sql %s %s"):format(q(sql), q(path)))
  assert(ok, out)
  return out
end

local function norm(gid) return (tostring(gid):upper():gsub("[{}]", "")) end

describe("bad input refused at sync time", function()
  local emu, dir

  local world = helper.store_world()
  setup(function()
    world.start()
    emu, dir = world.emu, world.dir
  end)
  teardown(world.stop)
  before_each(function() emu:reset() end)

  local client, create = world.client, world.create

  -- the GlobalIDs a replica's accepted edits touched, in the server's change log
  local function sent_gids(st)
    local rid, set = norm(st:replica().replicaID), {}
    for _, e in ipairs(emu:control("changelog?service=Parcels").entries) do
      if norm(e.origin) == rid then set[norm(e.globalId)] = true end
    end
    return set
  end

  it("refuses each bad edit naming layer, GlobalID and rule; sends the rest; sends a fixed one later", function()
    local st = create("bad")
    local path = st.path
    -- a point made by GDAL's SQL function: a SpatiaLite blob, not a GeoPackage geometry
    ogr_sql(path, "INSERT INTO Parcels (APN, geom) VALUES ('spatialite', ST_GeomFromText('POINT(1 2)', 4326))")
    local unreadable = st.db:rows("SELECT GlobalID FROM Parcels WHERE APN = 'spatialite'")[1].GlobalID
    -- a polygon in the point layer
    local polygon = core.gpkg_geometry({ rings = { { { 0, 0 }, { 0, 1 }, { 1, 1 }, { 0, 0 } } } }, 4326)
    assert(st.db:run("INSERT INTO Parcels (APN, geom) VALUES ('polygon', CAST(? AS BLOB))", polygon))
    local wrong_kind = st.db:rows("SELECT GlobalID FROM Parcels WHERE APN = 'polygon'")[1].GlobalID
    -- text in an integer field; text longer than its field (APN holds 20)
    ogr_sql(path, ("UPDATE Parcels SET ASSESSED = 'a lot' WHERE GlobalID = '%s'"):format(PARCEL1))
    ogr_sql(path, ("UPDATE Parcels SET APN = '%s' WHERE GlobalID = '%s'"):format(("9"):rep(21), PARCEL2))
    -- a GlobalID that is not one
    assert(st.db:run("INSERT INTO Parcels (APN, GlobalID) VALUES ('bad id', 'not-a-guid')"))
    -- and a sound edit
    assert(st:update(0, { attributes = { GlobalID = PARCEL3, OWNER = "sound" } }))
    assert.equal(6, #st:pending())

    local result = assert(st:sync(client()))
    assert.equal(1, result.uploaded)
    assert.equal(5, #result.refused)
    local by = {}
    for _, r in ipairs(result.refused) do
      assert.equal(0, r.layer)
      assert.equal("Parcels", r.layer_name)
      by[r.globalId] = r.rule
    end
    assert.matches("geometry cannot be read", by[unreadable])
    assert.matches("polygon geometry in a point layer", by[wrong_kind])
    assert.matches("ASSESSED", by[PARCEL1])
    assert.matches("integer", by[PARCEL1])
    assert.matches("APN", by[PARCEL2])
    assert.matches("more than its 20", by[PARCEL2])
    assert.matches("not a GlobalID", by["not-a-guid"])
    -- nothing of them reached the server; the sound one did
    local sent = sent_gids(st)
    assert.is_true(sent[norm(PARCEL3)])
    for gid in pairs(by) do assert.is_nil(sent[norm(gid)], gid) end
    -- they stay queued, listed with their rule
    local pending = assert(st:pending())
    assert.equal(5, #pending)
    for _, e in ipairs(pending) do assert.is_string(e.refused) end
    -- the message of the whole names them
    assert.matches("5 local edits refused", tostring(result.refused))
    -- fixed in the table, it goes with the next sync
    ogr_sql(path, ("UPDATE Parcels SET ASSESSED = 5 WHERE GlobalID = '%s'"):format(PARCEL1))
    result = assert(st:sync(client()))
    assert.equal(1, result.uploaded)
    assert.equal(4, #result.refused)
    assert.is_true(sent_gids(st)[norm(PARCEL1)])
    st:close()
  end)

  it("refuses an add missing a field the layer requires, and an update that empties it", function()
    local layers = data.layers()
    layers[1].fields[3].nullable, layers[1].fields[3].editable = false, true -- NAME required
    local result = dir .. "/required.json"
    data.write_result(result, { [0] = 2 })
    local st = assert(store.create_from(dir .. "/required.gpkg", { service = "Utilities", syncModel = "perReplica",
      replicaID = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}", replicaServerGen = 1 }, { layers[1] }, result))
    -- taken locally (the table does not refuse it: QGIS's edit is never aborted)
    local gid = assert(st:add(0, { attributes = { COUNT = 1 }, geometry = { x = 1, y = 2 } }))
    assert(st:update(0, { attributes = { GlobalID = data.gid(0, 1), NAME = geoservices.null } }))
    assert(st:update(0, { attributes = { GlobalID = data.gid(0, 2), COUNT = 9 } }))
    local id, rows, refused = assert(st:begin_attempt{})
    assert.equal(1, #rows)
    assert.equal(data.gid(0, 2), rows[1].globalId)
    assert.equal(2, #refused)
    for _, r in ipairs(refused) do
      assert.matches("NAME", r.rule)
      assert.matches("required", r.rule)
    end
    assert.same({ gid, data.gid(0, 1) }, { refused[1].globalId, refused[2].globalId })
    assert(st:end_attempt(id, { [rows[1].seq] = true }))
    assert.equal(2, #st:pending())
    st:close()
  end)
end)
