-- The replica store's local half (issue 15): creating and opening stores,
-- local edits applied and queued (the queue is the journal), the failed
-- edits, attempts in flight, generations, and every refusal.
local core = require "geoservices.core"
local data = require "spec.support.store_data"
local errors = require "geoservices.base.errors"
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local store = require "geoservices.store"

local tmpdir = helper.tmp_dir

local function listing(dir)
  local p = assert(io.popen("ls -A " .. dir))
  local out = p:read("a")
  p:close()
  return out
end

local REPLICA = { service = "Utilities", replicaID = "{5E1A0C2B-1111-4A5B-9C8D-000000000009}", syncModel = "perLayer",
                  layerServerGens = { { id = 0, serverGen = 7 }, { id = 3, serverGen = 9007199254740993 } },
                  syncLayers = { { id = 0, syncDirection = "download" } } }

describe("replica store, local half", function()
  local dir, n

  setup(function() dir = tmpdir() end)
  teardown(function() os.execute("rm -rf " .. dir) end)

  local function fresh(replica)
    n = (n or 0) + 1
    local path = ("%s/s%d.gpkg"):format(dir, n)
    return assert(store.create(path, replica or REPLICA, data.layers())), path
  end

  describe("create and open", function()
    it("creates an empty store and opens it again with its layers and generations", function()
      local st, path = fresh()
      for id = 0, 3 do assert.equal(0, st:count(id)) end
      st:close()
      st = assert(store.open(path))
      local r = assert(st:replica())
      assert.equal("perLayer", r.syncModel)
      assert.same({ 0, 1, 2, 3 }, r.layers)
      assert.same({ { id = 0, serverGen = 7 }, { id = 3, serverGen = 9007199254740993 } }, r.layerServerGens)
      assert.equal("integer", math.type(r.layerServerGens[2].serverGen))
      assert.equal("download", st.layers[0].sync_direction)
      assert.equal("Hydrants", st.layers[0].table)
      assert.matches("^replica store .*s%d+%.gpkg: replica {5E1A0C2B%-1111%-4A5B%-9C8D%-000000000009} %(perLayer%), "
        .. "4 layers, 0 pending edits$", tostring(st))
      st:close()
      assert.matches("%(closed%)$", tostring(st))
      assert.is_true(st:close()) -- idempotent
      assert.has_error(function() st:count(0) end, "attempt to use a closed replica store")
    end)

    it("takes layerServerGens as JSON text, and sibling generations", function()
      local st = fresh{ syncModel = "perLayer", layerServerGens = '[{"id":1,"serverGen":5,"serverSibGen":-1}]' }
      assert.same({ { id = 1, serverGen = 5, serverSibGen = -1 } }, st:generations().layerServerGens)
      assert(st:set_generations{ replicaServerGen = "12", replicaServerSibGen = 0 })
      local g = st:generations()
      assert.equal(12, g.replicaServerGen)
      assert.equal(0, g.replicaServerSibGen)
      st:close()
    end)

    it("never creates over an existing file, and leaves nothing behind when it fails", function()
      local _, path = fresh()
      local st, err = store.create(path, REPLICA, data.layers())
      assert.is_nil(st)
      assert.equal("invalid", err.kind)
      assert.equal("path", err.parameter)
      local bad = dir .. "/bad.gpkg"
      local layers = data.layers()
      layers[3].fields[2] = { name = "GUID2", type = "esriFieldTypeGUID" } -- no GlobalID field left
      layers[3].globalIdField = nil
      st, err = store.create(bad, REPLICA, layers)
      assert.is_nil(st)
      assert.equal("invalid", err.kind)
      assert.matches("layer 2 has no GlobalID", err.message)
      -- a broken first result: no file, no temporary file
      local result = dir .. "/broken.json"
      local f = assert(io.open(result, "wb"))
      f:write('{"edits":[{"id":0,"features":{"adds":[{"attributes":{"OBJECTID":1,"GlobalID":"{X}"}},')
      f:close()
      st, err = store.create_from(bad, REPLICA, data.layers(), result)
      assert.is_nil(st)
      assert.equal("protocol", err.kind)
      -- a record of a layer the store does not have
      f = assert(io.open(result, "wb"))
      f:write('{"edits":[{"id":9,"features":{"adds":[{"attributes":{"OBJECTID":1,"GlobalID":"{X}"}}]}}]}')
      f:close()
      st, err = store.create_from(bad, REPLICA, data.layers(), result)
      assert.is_nil(st)
      assert.equal("protocol", err.kind)
      assert.matches("layer 9", err.message)
      -- a source that gives up, and one that raises
      st, err = store.create_from(bad, REPLICA, data.layers(), function()
        return nil, errors.new("network", "reset")
      end)
      assert.is_nil(st)
      assert.equal("network", err.kind)
      assert.has_error(function()
        store.create_from(bad, REPLICA, data.layers(), function() error("boom") end)
      end)
      assert.falsy(listing(dir):find("bad", 1, true), listing(dir)) -- neither the store nor its temporary file
    end)

    it("feeds a first result through a source function (as a download would)", function()
      local result = dir .. "/stream.json"
      data.write_result(result, { [0] = 30, [3] = 12 }, { replicaServerGen = 77 })
      local seen = {}
      local st = assert(store.create_from(dir .. "/streamed.gpkg", { syncModel = "perReplica" }, data.layers(),
        function(apply)
          local rec = core.records()
          local f = assert(io.open(result, "rb"))
          for chunk in function() return f:read(100) end do
            assert(rec:feed(chunk))
            assert(apply(rec))
          end
          f:close()
          assert(rec:finish())
          return apply(rec)
        end, { on_record = function(kind, _, _, key) seen[#seen + 1] = kind .. (key and ("=" .. key) or "") end }))
      assert.equal(30, st:count(0))
      assert.equal(12, st:count(3))
      local r = st:replica()
      assert.equal(77, r.replicaServerGen)
      assert.equal("{5E1A0C2B-1111-4A5B-9C8D-000000000001}", r.replicaID) -- from the result
      assert.same({ "field=transportType", "field=responseType", "field=replicaID", "field=replicaServerGen",
                    "layer", "layer" }, seen)
      st:close()
    end)

    it("reports a result file's filling as it goes: on_fill(bytes, total, records), the last at the end", function()
      local result = dir .. "/big.json"
      data.write_result(result, { [0] = 12000, [3] = 3000 })
      local f = assert(io.open(result, "rb"))
      local size = f:seek("end")
      f:close()
      assert.is_true(size > 3 * 1024 * 1024) -- several of the 1 MiB steps
      local calls = {}
      local st = assert(store.create_from(dir .. "/filled.gpkg", REPLICA, data.layers(), result, {
        on_fill = function(bytes, total, records) calls[#calls + 1] = { bytes, total, records } end }))
      assert.is_true(#calls >= 4, #calls .. " reports")
      for i, c in ipairs(calls) do
        assert.equal(size, c[2])
        if i > 1 then
          assert.is_true(c[1] > calls[i - 1][1] and c[3] >= calls[i - 1][3], "bytes and records only grow")
        end
      end
      assert.same({ size, size, 15000 }, calls[#calls])
      assert.equal(12000, st:count(0))
      st:close()
    end)

    it("refuses files that are not stores", function()
      local st, err = store.open(dir .. "/none.gpkg")
      assert.is_nil(st)
      assert.equal("io", err.kind)
      local f = assert(io.open(dir .. "/text.gpkg", "wb"))
      f:write(("not a database "):rep(100))
      f:close()
      st, err = store.open(dir .. "/text.gpkg")
      assert.is_nil(st)
      assert.equal("io", err.kind)
      assert.equal("corrupt", err.code)
      local db = assert(core.store_open(dir .. "/plain.sqlite", { create = true }))
      assert(db:exec("CREATE TABLE t (x)"))
      db:close()
      st, err = store.open(dir .. "/plain.sqlite")
      assert.is_nil(st)
      assert.equal("not_a_store", err.code)
    end)

    it("raises on misuse", function()
      assert.has_error(function() store.open(42) end)
      assert.has_error(function() store.create({}, "x.gpkg", {}) end)
      assert.has_error(function() store.create(dir .. "/m.gpkg", "x", {}) end)
      local st = fresh()
      assert.has_error(function() st:add("0", {}) end)
      assert.has_error(function() st:add(0, "feature") end)
      assert.has_error(function() st:update(0, { attributes = { NAME = "no GlobalID" } }) end)
      assert.has_error(function() st:delete(0, 42) end)
      st:close()
    end)
  end)

  describe("local edits", function()
    it("adds a feature: a new GlobalID, a positive local fid, no OBJECTID yet, applied and queued", function()
      local st = fresh()
      local gid = assert(st:add(0, { attributes = { NAME = "new", UPDATED = 1700000000000 },
                                    geometry = { x = 1, y = 2 } }))
      assert.matches("^{%x+%-%x+%-4%x+%-%x+%-%x+}$", gid)
      local f = assert(st:get(0, gid))
      assert.equal(json.null, f.attributes.OBJECTID) -- the server gives it
      local fid = st.db:rows("SELECT fid FROM Hydrants WHERE GlobalID = ?", gid)[1].fid
      assert.equal(1, fid)
      assert.equal("new", f.attributes.NAME)
      assert.equal(1700000000000, f.attributes.UPDATED)
      assert.equal(json.null, f.attributes.COUNT)
      assert.same({ x = 1, y = 2 }, f.geometry)
      local gid2 = assert(st:add(0, { attributes = { GlobalID = "{aaaaaaaa-0000-4000-8000-00000000000b}" } }))
      assert.equal("{AAAAAAAA-0000-4000-8000-00000000000B}", gid2)
      assert.equal(json.null, st:get(0, gid2).attributes.OBJECTID)
      assert.equal(2, st.db:rows("SELECT fid FROM Hydrants WHERE GlobalID = ?", gid2)[1].fid)
      assert.equal(json.null, st:get(0, gid2).geometry or json.null)
      local pending = st:pending()
      assert.equal(2, #pending)
      assert.same({ "add", 0, gid }, { pending[1].op, pending[1].layer, pending[1].globalId })
      assert.same({ GlobalID = gid, NAME = "new", UPDATED = 1700000000000 }, pending[1].feature.attributes)
      assert.same({ x = 1, y = 2 }, pending[1].feature.geometry)
      -- the same GlobalID twice is refused
      local again, err = st:add(0, { attributes = { GlobalID = gid } })
      assert.is_nil(again)
      assert.equal("invalid", err.kind)
      assert.equal(2, #st:pending())
      st:close()
    end)

    it("refuses unknown layers and geometries of another kind", function()
      local st = fresh()
      local gid, err = st:add(7, { attributes = {} })
      assert.is_nil(gid)
      assert.equal("invalid", err.kind)
      assert.equal("layer", err.parameter)
      gid, err = st:add(3, { attributes = {}, geometry = { x = 1, y = 2 } })
      assert.is_nil(gid)
      assert.equal("geometry", err.parameter)
      assert.matches("polygon", err.message)
      local ok
      ok, err = st:update(0, { attributes = { GlobalID = "{AAAAAAAA-0000-4000-8000-000000000001}", NAME = "x" } })
      assert.is_nil(ok)
      assert.equal("invalid", err.kind)
      ok, err = st:delete(0, "{AAAAAAAA-0000-4000-8000-000000000001}")
      assert.is_nil(ok)
      assert.equal("invalid", err.kind)
      assert.same({}, st:pending())
      st:close()
    end)

    it("updates and deletes downloaded features, queueing each once", function()
      local result = dir .. "/down.json"
      data.write_result(result, { [3] = 6 })
      local st = assert(store.create_from(dir .. "/edits.gpkg", REPLICA, data.layers(), result))
      local gid = data.gid(3, 1)
      assert(st:update(3, { attributes = { GlobalID = gid, NAME = "renamed" } }))
      local f = st:get(3, gid)
      assert.equal("renamed", f.attributes.NAME)
      assert.equal(3, f.attributes.COUNT) -- the other attributes stay
      assert.equal(1, f.attributes.OBJECTID)
      assert.same(data.geometry(3, 1), json.decode(json.encode(f.geometry)))
      -- a second update folds into the queued one
      local rings = { { { 0, 0 }, { 0, 1 }, { 1, 1 }, { 0, 0 } } }
      assert(st:update(3, { attributes = { GlobalID = gid, COUNT = 99 }, geometry = { rings = rings } }))
      local pending = st:pending()
      assert.equal(1, #pending)
      assert.equal("update", pending[1].op)
      assert.same({ GlobalID = gid, NAME = "renamed", COUNT = 99 }, pending[1].feature.attributes)
      assert.same({ rings = rings }, pending[1].feature.geometry)
      assert.same(rings, json.decode(json.encode(st:get(3, gid).geometry.rings)))
      -- deleting it: the queued update gives way to the delete
      assert(st:delete(3, gid))
      assert.is_nil(st:get(3, gid))
      assert.equal(5, st:count(3))
      pending = st:pending()
      assert.equal(1, #pending)
      assert.same({ "delete", gid }, { pending[1].op, pending[1].globalId })
      assert.is_nil(pending[1].feature)
      -- the R-tree follows
      assert.same({ { n = 5 } }, st.db:rows('SELECT count(*) AS n FROM "rtree_Parcels_geom"'))
      st:close()
    end)

    it("forgets a feature added and deleted before it ever left", function()
      local st = fresh()
      local gid = assert(st:add(3, { attributes = { NAME = "tmp" }, geometry = data.geometry(3, 1) }))
      assert(st:update(3, { attributes = { GlobalID = gid, NAME = "tmp2" } }))
      local pending = st:pending()
      assert.equal(1, #pending)
      assert.equal("add", pending[1].op)
      assert.equal("tmp2", pending[1].feature.attributes.NAME)
      assert(st:delete(3, gid))
      assert.same({}, st:pending())
      assert.equal(0, st:count(3))
      assert.same({ { n = 0 } }, st.db:rows('SELECT count(*) AS n FROM "rtree_Parcels_geom"'))
      st:close()
    end)
  end)

  describe("attempts and failed edits", function()
    it("records an attempt before sending, then resolves it: done, failed, back in the queue", function()
      local st = fresh()
      local a = assert(st:add(0, { attributes = { NAME = "a" }, geometry = { x = 1, y = 1 } }))
      local b = assert(st:add(0, { attributes = { NAME = "b" }, geometry = { x = 2, y = 2 } }))
      local c = assert(st:add(0, { attributes = { NAME = "c" }, geometry = { x = 3, y = 3 } }))
      local id, rows = assert(st:begin_attempt{ params = { syncDirection = "bidirectional" } })
      assert.equal(3, #rows)
      local attempt = assert(st:attempt())
      assert.equal(id, attempt.id)
      assert.same({ a, b, c }, attempt.globalIds)
      assert(st:attempt_job(id, "https://host/jobs/1"))
      assert.equal("https://host/jobs/1", st:attempt().status_url)
      -- an edit made while the attempt is in flight is not folded into it
      assert(st:update(0, { attributes = { GlobalID = a, NAME = "a2" } }))
      assert.equal(4, #st:pending())
      assert(st:transaction(function(s)
        return s:end_attempt(id, { [rows[1].seq] = true,
                                   [rows[2].seq] = { code = 1019, description = "Object is missing." } })
      end))
      assert.is_false(st:attempt())
      local pending = st:pending()
      assert.equal(2, #pending)
      assert.same({ c, a }, { pending[1].globalId, pending[2].globalId })
      assert.is_nil(pending[1].attempt)
      local failed = st:failed()
      assert.equal(1, #failed)
      assert.same({ "add", b, 1019, "Object is missing." },
        { failed[1].op, failed[1].globalId, failed[1].code, failed[1].description })
      assert.equal("b", failed[1].feature.attributes.NAME)
      st:close()
    end)

    it("rolls a transaction back when its work fails or raises", function()
      local st = fresh()
      local ok, err = st:transaction(function(s)
        assert(s:add(0, { attributes = { NAME = "gone" } }))
        return nil, errors.new("network", "reset")
      end)
      assert.is_nil(ok)
      assert.equal("network", err.kind)
      assert.equal(0, st:count(0))
      assert.has_error(function()
        st:transaction(function(s)
          assert(s:add(0, { attributes = { NAME = "gone" } }))
          error("boom")
        end)
      end, "boom")
      assert.equal(0, st:count(0))
      assert.same({}, st:pending())
      assert.is_false(st.db:in_transaction())
      st:close()
    end)
  end)
end)
