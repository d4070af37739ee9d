-- The replica store end to end (issue 15), against the emulator: stores
-- created by createReplica that GDAL reads, stores exchanging edits through
-- the server, snapshot layers, rejected edits, unregister, a sync killed at
-- random moments, and two processes on one store.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote

local run = helper.run_shell

local new_dir = helper.tmp_dir

-- ogrinfo -so -al: { [layer name] = {count =, geometry =} }
local function ogr_layers(path)
  local out, ok = run("ogrinfo -so -al " .. q(path))
  assert(ok, out)
  local layers = {}
  for block in (out .. "\nLayer name: "):gmatch("Layer name: (.-)\n%f[L]") do
    local name = block:match("^([^\n]+)")
    layers[name] = { count = tonumber(block:match("Feature Count: (%d+)")),
                     geometry = block:match("Geometry: ([^\n]+)") }
  end
  return layers
end

-- A background child (spec/support/store_child.lua) with this process's paths; its pid.
local function spawn(args, log)
  local quoted = {}
  for i, a in ipairs(args) do quoted[i] = q(a) end
  local out = run(("LUA_PATH=%s LUA_CPATH=%s lua5.4 spec/support/store_child.lua %s > %s 2>&1 & echo $!"):format(
    q(package.path), q(package.cpath), table.concat(quoted, " "), q(log)))
  return assert(tonumber(out:match("(%d+)")), out)
end

local function wait_exit(pid)
  helper.wait_for("child " .. pid .. " to exit", function() return not helper.process_alive(pid) end, 60)
end

-- OWNER -> how many features have it, in layer 0 of a store
local function owners(st)
  local rows = assert(st.db:rows(('SELECT "OWNER" AS o, count(*) AS n FROM "%s" GROUP BY "OWNER"'):format(
    st.layers[0].table)))
  local by = {}
  for _, r in ipairs(rows) do if r.o then by[r.o] = r.n end end
  return by
end

describe("replica store sync (issue 15)", function()
  local emu, client, dir

  setup(function()
    emu = helper.start_emulator()
    client = geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 }
  end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    dir = new_dir()
  end)
  after_each(function() os.execute("rm -rf " .. q(dir)) end)

  local function create(name, params, opts)
    local p = { service = "Parcels", layers = { 0, 1 }, replicaName = name }
    for k, v in pairs(params or {}) do p[k] = v end
    return assert(geoservices.store.create(client, dir .. "/" .. name .. ".gpkg", p,
      opts or { poll_interval = 0.05, timeout = 30 }))
  end

  for _, model in ipairs{ "perReplica", "perLayer" } do
    for _, async in ipairs{ true, false } do
      it(("creates a %s store (%s) that ogrinfo reads with the server's counts"):format(model,
        async and "async" or "sync"), function()
        local name = ("c-%s-%s"):format(model, async and "async" or "sync")
        local st = create(name, { syncModel = model, async = async })
        local created = st.created
        assert.equal(model, created.syncModel)
        local layers = ogr_layers(st.path)
        for _, id in ipairs{ 0, 1 } do
          local spec = st.layers[id]
          local n = created.counts[id].features
          assert.is_true(n > 0)
          assert.equal(n, st:count(id))
          assert.same({ count = n, geometry = "Point" }, layers[spec.table])
        end
        local rep = st:replica()
        assert.equal(created.replicaID, rep.replicaID)
        assert.equal(model, rep.syncModel)
        if model == "perLayer" then
          assert.equal(2, #rep.layerServerGens)
        else
          assert.equal(created.replicaServerGen, rep.replicaServerGen)
        end
        -- the server knows it
        local info = assert(client:replica_info("Parcels", rep.replicaID))
        assert.equal(rep.replicaID, info.replicaID)
        st:close()
      end)
    end
  end

  it("refuses a perReplica store on a service without per-replica sync, sending no createReplica", function()
    local before, layers_before = emu:count("createReplica"), emu:count("layerInfo")
    local st, err = geoservices.store.create(client, dir .. "/u.gpkg", { service = "Utilities",
      replicaName = "u", syncModel = "perReplica" })
    assert.is_nil(st)
    assert.equal("invalid", err.kind)
    assert.matches("perReplica", err.message)
    assert.equal(before, emu:count("createReplica"))
    assert.equal(layers_before, emu:count("layerInfo")) -- refused on the service's resource alone
    assert.is_nil(io.open(dir .. "/u.gpkg"))
    -- perLayer works there, polylines and polygons included
    local u = assert(geoservices.store.create(client, dir .. "/u2.gpkg", { service = "Utilities",
      replicaName = "u2", syncModel = "perLayer" }, { poll_interval = 0.05 }))
    local layers = ogr_layers(u.path)
    for id, spec in pairs(u.layers) do
      if spec.geometry_kind ~= "none" then assert.equal(u:count(id), layers[spec.table].count) end
    end
    u:close()
  end)

  it("exchanges local edits between two stores over several rounds, each change arriving once", function()
    local a, b = create("a", { syncModel = "perReplica" }), create("b", { syncModel = "perLayer" })
    local base = a:count(0)
    assert.equal(base, b:count(0))
    local a_gids, b_gids = {}, {}
    for round = 1, 4 do
      a_gids[round] = assert(a:add(0, { attributes = { OWNER = "a" .. round }, geometry = { x = round, y = 1 } }))
      b_gids[round] = assert(b:add(0, { attributes = { OWNER = "b" .. round }, geometry = { x = round, y = 2 } }))
      if round > 1 then -- each updates the other's feature of the last round
        assert(a:update(0, { attributes = { GlobalID = b_gids[round - 1], ACRES = round } }))
        assert(b:update(0, { attributes = { GlobalID = a_gids[round - 1], ACRES = 10 + round } }))
      end
      local ra = assert(a:sync(client))
      assert.equal(round > 1 and 2 or 1, ra.uploaded)
      assert.equal(0, ra.applied) -- b's changes of the round before came with a's last sync
      local rb = assert(b:sync(client))
      assert.equal(round > 1 and 2 or 1, rb.uploaded)
      -- a's add, and a's update of b's feature (b's own changes never come back)
      assert.equal(round > 1 and 2 or 1, rb.applied)
      local ra2 = assert(a:sync(client))
      assert.equal(0, ra2.uploaded)
      assert.equal(round > 1 and 2 or 1, ra2.applied)
      assert.same({}, a:pending())
      assert.same({}, b:pending())
    end
    for _, st in ipairs{ a, b } do
      assert.equal(base + 8, st:count(0))
      local by = owners(st)
      for round = 1, 4 do
        assert.equal(1, by["a" .. round])
        assert.equal(1, by["b" .. round])
      end
      assert.same({}, st:failed())
    end
    -- the updates crossed: values and server OBJECTIDs agree in both stores
    for round = 1, 3 do
      for _, gid in ipairs{ a_gids[round], b_gids[round] } do
        local fa, fb = a:get(0, gid), b:get(0, gid)
        assert.same(fb.attributes, fa.attributes)
        assert.is_true(fa.attributes.OBJECTID > 0)
      end
    end
    a:close()
    b:close()
  end)

  it("replaces a snapshot layer's data, dropping the local edits it overwrote", function()
    local a = create("a", { syncModel = "perReplica" })
    local s = create("s", { syncModel = "perLayer" })
    assert(a:add(1, { attributes = {}, geometry = { x = 5, y = 5 } }))
    assert(a:sync(client))
    local mine = assert(s:add(1, { attributes = {}, geometry = { x = 6, y = 6 } }))
    local r = assert(s:sync(client, { directions = { [1] = "snapshot" } }))
    assert.equal("edits_and_data", r.response)
    -- layer 1 is the server's: a's hydrant in, s's own local add gone (snapshot: no upload)
    local fresh = create("fresh", { syncModel = "perReplica" })
    assert.equal(fresh:count(1), s:count(1))
    assert.is_nil(s:get(1, mine))
    assert.same({}, s:pending())
    assert.equal(1, #r.overwritten)
    assert.equal(mine, r.overwritten[1].globalId)
    local layers = ogr_layers(s.path)
    assert.equal(fresh:count(1), layers[s.layers[1].table].count)
    for _, st in ipairs{ a, s, fresh } do st:close() end
  end)

  it("keeps the edits the server rejects in store:failed(), and the server's state wins", function()
    -- (an update of a feature another replica deleted is a conflict since issue 36: spec/store/conflicts_rebase_spec;
    -- an add of a GlobalID the server has already is refused)
    local a, b = create("a", { syncModel = "perReplica" }), create("b", { syncModel = "perReplica" })
    local gid = "{5A1E0C2D-7B3F-4E6A-9C8D-0F1E2D3C4B5A}"
    assert(a:add(0, { attributes = { GlobalID = gid, OWNER = "first" }, geometry = { x = 1, y = 1 } }))
    assert(a:sync(client))
    assert(b:add(0, { attributes = { GlobalID = gid, OWNER = "too late" }, geometry = { x = 2, y = 2 } }))
    local r = assert(b:sync(client))
    assert.equal(1, #r.failed_edits)
    assert.equal(1, #r.rejected)
    assert.equal(1, r.summary.rejected)
    local failed = b:failed()
    assert.equal(1, #failed)
    assert.equal("add", failed[1].op)
    assert.equal(gid, failed[1].globalId)
    assert.equal(-2147217395, failed[1].code)
    assert.matches("already exists", failed[1].description)
    assert.same({}, b:pending())
    -- the download brought the server's: its state
    assert.equal("first", b:get(0, gid).attributes.OWNER)
    assert.equal(1, #r.overwritten)
    assert.is_true(r.overwritten[1].sent)
    -- the CLI shows them
    local out, ok = run(("LUA_PATH=%s LUA_CPATH=%s lua5.4 -e %s /dev/null --url %s --json replica failed %s"):format(
      q(package.path), q(package.cpath), q('os.exit(require("geoservices.cli").main(arg))'), q(emu.url), q(b.path)))
    assert(ok, out)
    local ev = json.decode(out:match("^[^\n]+"))
    assert.equal("failed_edit", ev.event)
    assert.equal(-2147217395, ev.code)
    assert.equal(gid, ev.globalId)
    a:close()
    b:close()
  end)

  it("unregisters the replica; a sync is then refused", function()
    local a = create("a", { syncModel = "perReplica" })
    local id = a:replica().replicaID
    assert(a:unregister(client))
    local r, err = a:sync(client)
    assert.is_nil(r)
    assert.equal("invalid", err.kind)
    assert.matches("unregistered", err.message)
    local info, ierr = client:replica_info("Parcels", id)
    assert.is_nil(info)
    assert.truthy(ierr)
    a:close()
    -- still a GeoPackage GDAL reads
    assert.truthy(ogr_layers(dir .. "/a.gpkg").Parcels)
  end)

  it("resolves a sync killed at random moments with nothing duplicated or lost", function()
    emu:control("settings", { job_step_ms = 60 })
    local a = create("a", { syncModel = "perReplica" })
    local path = a.path
    local base = a:count(0)
    a:close()
    math.randomseed(15)
    local rounds = 6
    for round = 1, rounds do
      local st = assert(geoservices.store.open(path))
      for i = 1, 2 do
        assert(st:add(0, { attributes = { OWNER = ("k%d.%d"):format(round, i) }, geometry = { x = round, y = i } }))
      end
      st:close()
      local log = dir .. "/child.log"
      local pid = spawn({ emu.url, path, round % 2 == 0 and "async" or "sync" }, log)
      helper.sleep(math.random() * 0.5)
      os.execute("kill -9 " .. pid .. " 2>/dev/null")
      wait_exit(pid)
      st = assert(geoservices.store.open(path))
      local result, err
      for _ = 1, 40 do -- a job still running on the server refuses a re-send (busy): try again
        result, err = st:sync(client, { poll_interval = 0.05, timeout = 30 })
        if result then break end
        helper.sleep(0.25)
      end
      assert(result, err and tostring(err))
      assert.same({}, st:pending())
      assert.same({}, st:failed())
      st:close()
    end
    -- the server has each change once: a new store of the replica's data
    local fresh = create("fresh", { syncModel = "perReplica" })
    assert.equal(base + 2 * rounds, fresh:count(0))
    local by = owners(fresh)
    local st = assert(geoservices.store.open(path))
    local mine = owners(st)
    for round = 1, rounds do
      for i = 1, 2 do
        assert.equal(1, by[("k%d.%d"):format(round, i)])
        assert.equal(1, mine[("k%d.%d"):format(round, i)])
      end
    end
    assert.equal(base + 2 * rounds, st:count(0))
    st:close()
    fresh:close()
  end)

  it("two processes on one store: busy at once, or a bounded wait", function()
    local a = create("a", { syncModel = "perReplica" })
    local path = a.path
    a:close()
    -- a write transaction held by another process, until it is told to let go
    local log = dir .. "/hold.log"
    local pid = spawn({ emu.url, path, "hold" }, log)
    helper.wait_for("the child's transaction", function() return (helper.read_all(log) or ""):find("holding") end, 10)
    local st = assert(geoservices.store.open(path, { busy_timeout = 0.1 }))
    local gid, err = st:add(0, { attributes = { OWNER = "x" }, geometry = { x = 0, y = 0 } })
    assert.is_nil(gid)
    assert.equal("busy", err.kind)
    st:close()
    helper.write_file(path .. ".release", "")
    st = assert(geoservices.store.open(path, { busy_timeout = 10 }))
    assert.truthy(st:add(0, { attributes = { OWNER = "x" }, geometry = { x = 0, y = 0 } }))
    wait_exit(pid)
    os.remove(path .. ".release")
    -- a sync running in another process; a spec stalled past the child's
    -- whole sync before its own gets the lock: it runs again with longer steps
    helper.within_window("a sync while the child's runs", { 300, 1200, 4800 }, function(step_ms)
      emu:control("settings", { job_step_ms = step_ms })
      log = dir .. "/sync.log"
      local sent = emu:count("synchronizeReplica")
      pid = spawn({ emu.url, path, "async" }, log)
      -- its request reached the server: it holds the store's lock
      helper.wait_for("the child's sync", function() return emu:count("synchronizeReplica") > sent end, 10)
      local r, serr = st:sync(client)
      if r then -- it got the lock: the child's sync had ended before it began
        wait_exit(pid)
        assert(st:add(0, { attributes = { OWNER = "x" }, geometry = { x = 0, y = 0 } })) -- for the next child to send
        return false
      end
      assert.equal("busy", serr.kind)
      assert(st:sync(client, { lock_timeout = 60, poll_interval = 0.05 }))
      wait_exit(pid)
      local child = json.decode(helper.read_all(log):match("\n(%b{})"))
      assert.is_true(child.ok)
      assert.equal(1, child.uploaded)
      return true
    end)
    assert.same({}, st:pending())
    st:close()
  end)
end)
