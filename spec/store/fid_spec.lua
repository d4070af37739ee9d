-- Every feature editable in QGIS (issue 27, part 2): a feature table's fid
-- is local and positive (never QGIS's marker of an unsaved feature), the
-- server's OBJECTID a column of its own, recorded after the sync that
-- assigns it (from the add's result or read back from the server); a local
-- add and another crew's feature that the server gives the same number
-- both stay; a downloaded update keeps the row's fid; a store made before
-- is rebuilt so on open.
local data = require "spec.support.store_data"
local geoservices = require "geoservices"
local helper = require "spec.helper"
local store = require "geoservices.store"

local q = helper.shell_quote

local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"

local run = helper.run_shell

local function ogr_sql(path, sql)
  local out, ok = run(("ogrinfo -q -sql %s %s"):format(q(sql), q(path)))
  assert(ok, out)
  assert.falsy(out:find("ERROR", 1, true), out)
  return out
end

-- GDAL's validator, without its complaint about empty geometries (see store_lossless_spec)
local validate = helper.validate_gpkg

-- fid, OBJECTID of each GlobalID of a table
local function ids(st, layer)
  local by = {}
  for _, r in ipairs(assert(st.db:rows(('SELECT fid, OBJECTID, GlobalID FROM "%s"'):format(st.layers[layer].table)))) do
    by[r.GlobalID] = { fid = r.fid, oid = r.OBJECTID }
  end
  return by
end

describe("replica store fids", function()
  local emu, dir

  local world = helper.store_world()
  setup(function()
    world.start()
    emu, dir = world.emu, world.dir
  end)
  teardown(world.stop)
  before_each(function() emu:reset() end)

  local function client() return geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 } end

  local function create(name)
    local path = dir .. "/" .. name .. ".gpkg"
    os.remove(path)
    return assert(geoservices.store.create(client(), path, { service = "Parcels", layers = { 0 }, replicaName = name,
      syncModel = "perReplica" }, { poll_interval = 0.05, timeout = 30 })), path
  end

  -- the server's OBJECTID of a GlobalID
  local function server_oid(gid)
    local f = emu:control("state").featureServices.Parcels.layers["0"].features[gid]
    return f and f.attributes.OBJECTID
  end

  it("keeps a local fid beside the server's OBJECTID: GDAL's FID column is fid, OBJECTID a field", function()
    local st, path = create("layout")
    local info = assert(st.db:rows(('PRAGMA table_info("%s")'):format(st.layers[0].table)))
    local pk = {}
    for _, c in ipairs(info) do pk[c.name] = c.pk end
    assert.same({ 1, 0 }, { pk.fid, pk.OBJECTID })
    local out = run("ogrinfo -so " .. q(path) .. " Parcels")
    assert.truthy(out:find("FID Column = fid", 1, true), out)
    assert.truthy(out:find("OBJECTID: Integer", 1, true), out)
    for gid, id in pairs(ids(st, 0)) do
      assert.equal(server_oid(gid), id.oid)
      assert.is_true(id.fid > 0)
    end
    st:close()
  end)

  it("gives local adds positive fids and the server's OBJECTID after the sync; a crew's equal number stays apart",
    function()
    local st1, path1 = create("crew-1")
    local st2 = create("crew-2")
    local c = client()
    -- crew 1 offline: an add by the library, one made in GDAL
    local lib = assert(st1:add(0, { attributes = { APN = "library add" }, geometry = { x = -117.2, y = 34.1 } }))
    ogr_sql(path1, "INSERT INTO Parcels (APN) VALUES ('gdal add')")
    local gdal = st1.db:rows("SELECT GlobalID FROM Parcels WHERE APN = 'gdal add'")[1].GlobalID
    local before = ids(st1, 0)
    for _, gid in ipairs{ lib, gdal } do
      assert.is_true(before[gid].fid > 0, "a positive fid")
      assert.is_nil(before[gid].oid, "no OBJECTID before the server gives one")
    end
    -- crew 2 adds first: the server gives its feature the number of crew 1's first local fid
    local theirs = assert(st2:add(0, { attributes = { APN = "crew 2 add" }, geometry = { x = -117.3, y = 34.2 } }))
    assert(st2:sync(c))
    assert.equal(before[lib].fid, server_oid(theirs))
    -- crew 1 syncs: both its adds go, crew 2's comes, nothing is replaced
    local result = assert(st1:sync(c))
    assert.equal(2, result.uploaded)
    local after = ids(st1, 0)
    assert.equal(6, st1:count(0))
    for _, gid in ipairs{ lib, gdal } do
      assert.equal(before[gid].fid, after[gid].fid, "the fid QGIS knows stays")
      assert.equal(server_oid(gid), after[gid].oid)
    end
    assert.equal(server_oid(theirs), after[theirs].oid)
    assert.are_not.equal(after[lib].fid, after[theirs].fid)
    assert.equal("library add", st1:get(0, lib).attributes.APN)
    assert.equal("gdal add", st1:get(0, gdal).attributes.APN)
    assert.same({}, st1:pending())
    st1:close()
    st2:close()
  end)

  it("keeps the fid of a row a download updates", function()
    local st1 = create("keep-1")
    local st2 = create("keep-2")
    local c = client()
    local fid = ids(st1, 0)[PARCEL1].fid
    assert(st2:update(0, { attributes = { GlobalID = PARCEL1, OWNER = "crew 2" } }))
    assert(st2:sync(c))
    assert(st1:sync(c))
    assert.equal("crew 2", st1:get(0, PARCEL1).attributes.OWNER)
    assert.equal(fid, ids(st1, 0)[PARCEL1].fid)
    assert.same({}, st1:pending())
    st1:close()
    st2:close()
  end)

  it("records the OBJECTID of an add whose answer was lost, read back from the server", function()
    local st = create("lost")
    local gid = assert(st:add(0, { attributes = { APN = "answer lost" }, geometry = { x = -117.2, y = 34.1 } }))
    emu:fault{ route = "synchronizeReplica", kind = "reset", attempts = { 1 } }
    local result, err = st:sync(client())
    assert.is_nil(result)
    assert.is_table(err.verified, tostring(err))
    assert.equal(1, err.verified.applied)
    assert.is_truthy(server_oid(gid))
    assert.equal(server_oid(gid), ids(st, 0)[gid].oid)
    assert.same({}, st:pending())
    st:close()
  end)

  it("rebuilds a store made before (format 2) on open: fids positive, the R-tree right, GDAL content", function()
    local path = dir .. "/old.gpkg"
    assert(os.execute(("cp spec/fixtures/store/format2.gpkg %s"):format(q(path))))
    local st = assert(store.open(path))
    local by = ids(st, 0)
    -- downloaded rows keep the fid they had (their OBJECTID); local adds get positive ones
    assert.same({ fid = 1, oid = 1 }, by[data.gid(0, 1)])
    assert.same({ fid = 3, oid = 3 }, by[data.gid(0, 3)])
    local a1, a2 = by["{AAAAAAAA-0000-4000-8000-000000000001}"], by["{AAAAAAAA-0000-4000-8000-000000000002}"]
    assert.is_nil(a1.oid)
    assert.is_nil(a2.oid)
    assert.is_true(a1.fid > 3 and a2.fid > 3 and a1.fid ~= a2.fid)
    assert.equal(4, #assert(st:pending()))
    -- a new add gets the next fid, never one used before
    local gid = assert(st:add(0, { attributes = { NAME = "after" }, geometry = { x = 7, y = 8 } }))
    assert.is_true(ids(st, 0)[gid].fid > math.max(a1.fid, a2.fid))
    st:close()
    -- the R-tree finds the moved rows where they are
    local out = run(("ogrinfo -q -spat 2 3 6 7 %s Hydrants"):format(q(path)))
    assert.truthy(out:find("added 1", 1, true), out)
    assert.truthy(out:find("added 2", 1, true), out)
    assert.falsy(out:find("feature 1", 1, true), out)
    assert.equal("", validate(path))
  end)
end)
