-- No one's edit is silently overwritten (issue 36): two stores of one
-- service, crew B edits and syncs first, then crew A's edit of the same
-- feature, queued offline, goes with a plain sync. Before an update or a
-- delete is sent, the store reads the server's version of the feature and
-- merges field by field: what only A changed is sent, what only B changed
-- stays, and the five cases of the issue's table give B's value kept, A
-- told, the conflict listed with its values and resolvable both ways; the
-- disjoint case merges with no conflict.
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local P1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local P2 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}"

describe("a sync rebases local edits onto the server's changes", function()
  local world = helper.store_world()
  setup(world.start)
  teardown(world.stop)
  before_each(function() world.emu:reset() end)

  local function server(gid)
    local f = world.emu:control("state").featureServices.Parcels.layers["0"].features[gid]
    return f and not f.deleted and f or nil
  end

  local n = 0
  local function crew(name)
    n = n + 1
    return world.create(("%s-%d"):format(name, n))
  end

  -- Crew B makes its edit and syncs; crew A makes its own, queued.
  local function two_crews(b_edit, a_edit)
    local a, b = crew("crew-a"), crew("crew-b")
    b_edit(b)
    assert(b:sync(world.client()))
    a_edit(a)
    return a, b
  end

  local function differences(k)
    local by = {}
    for _, d in ipairs(k.differences) do by[d.field] = d end
    return by
  end

  it("same field, different values: B's value kept, A told, the conflict listed with values", function()
    local a, b = two_crews(function(b) assert(b:update(0, { attributes = { GlobalID = P1, OWNER = "B's owner" } })) end,
      function(a) assert(a:update(0, { attributes = { GlobalID = P1, OWNER = "A's owner", APN = "A's apn" } })) end)
    local result = assert(a:sync(world.client()))
    -- B's value is on the server; A's edit went nowhere (held back whole: the default policy, manual)
    assert.equal("B's owner", server(P1).attributes.OWNER)
    assert.equal("101-200-01", server(P1).attributes.APN)
    -- A is told, in counts that cannot contradict each other
    assert.equal(1, #result.conflicts)
    local k = result.conflicts[1]
    assert.same({ "update", P1, "field", "manual", "held" }, { k.op, k.globalId, k.kind, k.policy, k.outcome })
    assert.same({ sent = 0, merged = 0, conflicts = 1, held = 1, server_kept = 0, local_kept = 0, rejected = 0,
                  refused = 0 }, {
      sent = result.summary.sent, merged = result.summary.merged, conflicts = result.summary.conflicts,
      held = result.summary.held, server_kept = result.summary.server_kept, local_kept = result.summary.local_kept,
      rejected = result.summary.rejected, refused = result.summary.refused })
    assert.equal(0, result.uploaded)
    -- the store shows the server's version; the local one is kept in the conflicts, with its values
    assert.equal("B's owner", a:get(0, P1).attributes.OWNER)
    local kept = assert(a:conflicts())
    assert.equal(1, #kept)
    local d = differences(kept[1])
    assert.same({ "Jane Smith", "A's owner", "B's owner", true }, { d.OWNER.base, d.OWNER["local"], d.OWNER.server,
                                                                    d.OWNER.conflict })
    assert.same({ "101-200-01", "A's apn", "101-200-01", false }, { d.APN.base, d.APN["local"], d.APN.server,
                                                                   d.APN.conflict })
    assert.same({}, a:pending())
    -- GDAL (and so QGIS) reads the conflicts as a layer with the local geometry and the values in words
    local out = helper.run_shell("ogrinfo -ro -al -q " .. helper.shell_quote(a.path) .. " geoservices_conflicts "
      .. "geoservices_conflict_fields")
    assert.truthy(out:find("POINT (-117.19584274292 34.0567890123457)", 1, true), out)
    assert.truthy(out:find('differences (String) = APN: base "101-200-01", here "A\'s apn", server "101-200-01"; '
      .. 'OWNER: base "Jane Smith", here "A\'s owner", server "B\'s owner" (both changed)', 1, true), out)
    assert.truthy(out:find("local_value (String) = A's owner", 1, true), out)
    assert.equal("", helper.validate_gpkg(a.path))
    -- nothing more goes at the next sync; B's store is untouched by it
    assert(a:sync(world.client()))
    assert.equal("B's owner", server(P1).attributes.OWNER)
    assert(b:sync(world.client()))
    assert.equal("B's owner", b:get(0, P1).attributes.OWNER)
    a:close()
    b:close()
  end)

  it("different fields: merged per field, no conflict", function()
    local a, b = two_crews(function(b) assert(b:update(0, { attributes = { GlobalID = P1, OWNER = "B's owner" } })) end,
      function(a) assert(a:update(0, { attributes = { GlobalID = P1, APN = "A's apn" } })) end)
    local result = assert(a:sync(world.client()))
    assert.same({}, result.conflicts)
    assert.same({ 0, 1, 0 }, { result.summary.sent, result.summary.merged, result.summary.conflicts })
    assert.equal(1, result.uploaded)
    assert.same({ "B's owner", "A's apn" }, { server(P1).attributes.OWNER, server(P1).attributes.APN })
    assert.same({ "B's owner", "A's apn" }, { a:get(0, P1).attributes.OWNER, a:get(0, P1).attributes.APN })
    assert.same({}, a:conflicts())
    a:close()
    b:close()
  end)

  it("A updates, B deleted: the delete stays, A's update kept as a conflict, not a failure", function()
    local a, b = two_crews(function(b) assert(b:delete(0, P1)) end,
      function(a) assert(a:update(0, { attributes = { GlobalID = P1, OWNER = "A's owner" } })) end)
    local result = assert(a:sync(world.client()))
    assert.is_nil(server(P1))
    assert.same({}, result.failed_edits)
    assert.same({}, result.rejected)
    assert.equal(1, #result.conflicts)
    assert.same({ "update_delete", "held" }, { result.conflicts[1].kind, result.conflicts[1].outcome })
    assert.is_nil(a:get(0, P1))
    local kept = assert(a:conflicts())
    assert.equal("A's owner", kept[1].feature.attributes.OWNER)
    assert.equal(json.null, kept[1].server)
    a:close()
    b:close()
  end)

  it("A deletes, B updated: B's update stays, A's delete kept as a conflict", function()
    local a, b = two_crews(function(b) assert(b:update(0, { attributes = { GlobalID = P1, OWNER = "B's owner" } })) end,
      function(a) assert(a:delete(0, P1)) end)
    local result = assert(a:sync(world.client()))
    assert.equal("B's owner", server(P1).attributes.OWNER)
    assert.equal(1, #result.conflicts)
    assert.same({ "delete", "delete_update" }, { result.conflicts[1].op, result.conflicts[1].kind })
    -- the feature is back in A's store with B's values
    assert.equal("B's owner", a:get(0, P1).attributes.OWNER)
    local d = differences(assert(a:conflicts())[1])
    assert.same({ "Jane Smith", "B's owner", true }, { d.OWNER.base, d.OWNER.server, d.OWNER.conflict })
    a:close()
    b:close()
  end)

  it("both moved the point: B's move kept, A's move kept as a conflict", function()
    local a, b = two_crews(function(b) assert(b:update(0, { attributes = { GlobalID = P1 },
                                                           geometry = { x = -117.1, y = 34.1 } })) end,
      function(a) assert(a:update(0, { attributes = { GlobalID = P1 }, geometry = { x = -117.3, y = 34.3 } })) end)
    local result = assert(a:sync(world.client()))
    assert.same({ -117.1, 34.1 }, { server(P1).geometry.x, server(P1).geometry.y })
    assert.equal(1, #result.conflicts)
    assert.equal("move", result.conflicts[1].kind)
    assert.same({ -117.1, 34.1 }, { a:get(0, P1).geometry.x, a:get(0, P1).geometry.y })
    local kept = assert(a:conflicts())[1]
    assert.same({ -117.3, 34.3 }, { kept.feature.geometry.x, kept.feature.geometry.y })
    assert.is_true(differences(kept).geometry.conflict)
    a:close()
    b:close()
  end)

  it("the rest of the queue syncs while a conflict is held back", function()
    local a, b = two_crews(function(b) assert(b:update(0, { attributes = { GlobalID = P1, OWNER = "B's owner" } })) end,
      function(a)
        assert(a:update(0, { attributes = { GlobalID = P1, OWNER = "A's owner" } }))
        assert(a:update(0, { attributes = { GlobalID = P2, OWNER = "A's other" } }))
      end)
    local result = assert(a:sync(world.client()))
    assert.same({ 1, 1 }, { result.summary.sent, result.summary.held })
    assert.equal("A's other", server(P2).attributes.OWNER)
    assert.equal("B's owner", server(P1).attributes.OWNER)
    a:close()
    b:close()
  end)

  describe("resolve", function()
    local function conflicted()
      return two_crews(function(b) assert(b:update(0, { attributes = { GlobalID = P1, OWNER = "B's owner" } })) end,
        function(a) assert(a:update(0, { attributes = { GlobalID = P1, OWNER = "A's owner", APN = "A's apn" } })) end)
    end

    it("--with local queues the local version on top of the server's: the next sync sends it", function()
      local a, b = conflicted()
      assert(a:sync(world.client()))
      local done = assert(a:resolve(P1, "local"))
      assert.equal(1, done.count)
      assert.same({}, a:conflicts())
      assert.equal("A's owner", a:get(0, P1).attributes.OWNER)
      assert.equal(1, #a:pending())
      assert.equal(0, a:status().conflicts)
      local result = assert(a:sync(world.client()))
      assert.same({}, result.conflicts)
      assert.same({ "A's owner", "A's apn" }, { server(P1).attributes.OWNER, server(P1).attributes.APN })
      a:close()
      b:close()
    end)

    it("--with server drops the local version", function()
      local a, b = conflicted()
      assert(a:sync(world.client()))
      assert(a:resolve(P1, "server"))
      assert.same({}, a:conflicts())
      assert.same({}, a:pending())
      assert.equal("B's owner", a:get(0, P1).attributes.OWNER)
      assert(a:sync(world.client()))
      assert.same({ "B's owner", "101-200-01" }, { server(P1).attributes.OWNER, server(P1).attributes.APN })
      a:close()
      b:close()
    end)

    it("--with base restores the values before both edits", function()
      local a, b = conflicted()
      assert(a:sync(world.client()))
      assert(a:resolve(P1, "base"))
      assert.equal("Jane Smith", a:get(0, P1).attributes.OWNER)
      assert(a:sync(world.client()))
      assert.equal("Jane Smith", server(P1).attributes.OWNER)
      a:close()
      b:close()
    end)

    it("an unknown GlobalID or choice is refused naming it", function()
      local a = crew("crew-a")
      local ok, err = a:resolve(P1, "local")
      assert.is_nil(ok)
      assert.same({ "invalid", "global_id" }, { err.kind, err.parameter })
      assert.has_error(function() a:resolve(P1, "mine") end, "store:resolve: with must be local, server or base")
      a:close()
    end)
  end)

  describe("the command line", function()
    local function cli(args)
      local full = { "--url", world.emu.url, "--token", "alice-token" }
      for _, a in ipairs(args) do full[#full + 1] = a end
      return helper.run_cli(full)
    end

    it("sync says what happened in the same words as --json and the Lua result; conflicts shows the values; "
      .. "resolve and status follow", function()
      local a, b = two_crews(function(b)
          assert(b:update(0, { attributes = { GlobalID = P1, OWNER = "B's owner" } }))
        end, function(a)
          assert(a:update(0, { attributes = { GlobalID = P1, OWNER = "A's owner" } }))
          assert(a:update(0, { attributes = { GlobalID = P2, OWNER = "A's other" } }))
        end)
      local path = a.path
      a:close()
      local r = cli{ "--json", "sync", path }
      assert.equal(3, r.code, r.err) -- partial: an edit held back
      local ev = helper.find_events(helper.events(r.out), "replica")[1]
      assert.same({ sent = 1, merged = 0, conflicts = 1, held = 1, server_kept = 0, local_kept = 0, rejected = 0,
                    refused = 0, requeued = 0, downloaded = 1 }, ev.summary)
      assert.equal("1 sent, 0 merged, 1 conflict (1 held back), 0 rejected by the server, 0 refused here, "
        .. "1 downloaded", ev.summary_text)
      r = cli{ "conflicts", path }
      assert.equal(0, r.code, r.err)
      assert.matches("update  Parcels  " .. P1:gsub("%p", "%%%0") .. "  field %(policy manual%), held", r.out)
      assert.truthy(r.out:find('OWNER  base "Jane Smith", here "A\'s owner", server "B\'s owner"  (both changed)',
        1, true), r.out)
      assert.truthy(r.out:find("conflict policy manual", 1, true), r.out)
      r = cli{ "--json", "conflicts", path }
      local k = helper.find_events(helper.events(r.out), "conflict")[1]
      assert.same({ "OWNER", "Jane Smith", "A's owner", "B's owner", true }, { k.differences[1].field,
        k.differences[1].base, k.differences[1]["local"], k.differences[1].server, k.differences[1].conflict })
      r = cli{ "status", path }
      assert.truthy(r.out:find("1 conflict (geoservices conflicts", 1, true), r.out)
      r = cli{ "resolve", path, P1 }
      assert.equal(2, r.code)
      r = cli{ "resolve", path, P1, "--with", "local" }
      assert.equal(0, r.code, r.err)
      assert.truthy(r.out:find("1 conflict resolved with the local version; 1 edit queued", 1, true), r.out)
      r = cli{ "status", path }
      assert.truthy(r.out:find("0 conflicts", 1, true), r.out)
      r = cli{ "sync", path }
      assert.equal(0, r.code, r.err)
      assert.truthy(r.out:find("1 sent, 0 merged, 0 conflicts, 0 rejected by the server, 0 refused here", 1, true),
        r.out)
      assert.equal("A's owner", server(P1).attributes.OWNER)
      b:close()
    end)

    it("a policy per sync (--conflicts) and per store (conflicts --policy)", function()
      local a, b = two_crews(function(b)
          assert(b:update(0, { attributes = { GlobalID = P1, OWNER = "B's owner" } }))
        end, function(a)
          assert(a:update(0, { attributes = { GlobalID = P1, OWNER = "A's owner", APN = "A's apn" } }))
        end)
      local path = a.path
      a:close()
      local r = cli{ "--json", "sync", "--conflicts", "server", path }
      assert.equal(0, r.code, r.err)
      local ev = helper.find_events(helper.events(r.out), "replica")[1]
      assert.same({ 1, 0, 1 }, { ev.summary.server_kept, ev.summary.held, ev.summary.conflicts })
      -- the server's owner stays, our APN went
      assert.same({ "B's owner", "A's apn" }, { server(P1).attributes.OWNER, server(P1).attributes.APN })
      -- listed all the same, and resolvable the other way
      r = cli{ "--json", "conflicts", path }
      local k = helper.find_events(helper.events(r.out), "conflict")[1]
      assert.same({ "server", "server_kept" }, { k.policy, k.outcome })
      -- per store
      r = cli{ "conflicts", "--policy", "local", path }
      assert.truthy(r.out:find("conflict policy local", 1, true), r.out)
      local st = assert(require("geoservices").store.open(path))
      assert.equal("local", st:conflict_policy())
      assert(b:update(0, { attributes = { GlobalID = P2, OWNER = "B again" } }))
      assert(b:sync(world.client()))
      assert(st:update(0, { attributes = { GlobalID = P2, OWNER = "A again" } }))
      local result = assert(st:sync(world.client()))
      assert.same({ 1, 1 }, { result.summary.local_kept, result.summary.conflicts })
      assert.equal("A again", server(P2).attributes.OWNER)
      -- B gets A's value at its next sync (that it went over B's is known to A alone: A's conflicts list it)
      local rb = assert(b:sync(world.client()))
      assert.equal("A again", b:get(0, P2).attributes.OWNER)
      assert.equal(1, rb.summary.downloaded)
      st:close()
      b:close()
    end)
  end)

  describe("attachments", function()
    local VALVE_PHOTO = "{3C5E7A90-1B2D-4F60-8A1C-0000000003A1}"
    local VALVE_PDF = "{3C5E7A90-1B2D-4F60-8A1C-0000000003A2}"
    local m = 0
    local function valves(name)
      m = m + 1
      return assert(require("geoservices").store.create(world.client(), ("%s/%s-v%d.gpkg"):format(world.dir, name, m),
        { service = "Utilities", layers = { 2 }, replicaName = name .. m, syncModel = "perLayer",
          returnAttachments = true }, { poll_interval = 0.05, timeout = 30 }))
    end
    local function rename(st, gid, name)
      assert(st.db:run("UPDATE geoservices_attachments SET name = ? WHERE global_id = ?", name, gid))
    end
    local function on_server(gid)
      local a = world.emu:control("state").featureServices.Utilities.layers["2"].attachments[gid]
      return a and not a.deleted and a or nil
    end

    it("a delete of an attachment the server changed, an update of one it deleted: held back, told, kept", function()
      local a, b = valves("crew-a"), valves("crew-b")
      rename(b, VALVE_PHOTO, "b-photo.jpg")
      assert(b:delete_attachment(VALVE_PDF))
      assert(b:sync(world.client()))
      assert(a:delete_attachment(VALVE_PHOTO))
      rename(a, VALVE_PDF, "a-report.pdf")
      local result = assert(a:sync(world.client()))
      -- B's rename stands, B's delete too
      assert.equal("b-photo.jpg", on_server(VALVE_PHOTO).name)
      assert.is_nil(on_server(VALVE_PDF))
      assert.equal(2, result.summary.held)
      local told = {}
      for _, k in ipairs(result.conflicts) do
        if k.kind == "attachment" then told[k.globalId] = k.outcome end
      end
      assert.same({ [VALVE_PHOTO] = "held", [VALVE_PDF] = "held" }, told)
      local failed = {}
      for _, f in ipairs(assert(a:failed())) do
        if f.kind == "attachment" then failed[f.globalId] = f.description end
      end
      assert.matches("^conflict: the server changed this attachment since", failed[VALVE_PHOTO])
      assert.matches("^conflict: the server deleted this attachment since", failed[VALVE_PDF])
      a:close()
      b:close()
    end)

    it("edits of different attachments of one feature both go", function()
      local a, b = valves("crew-a"), valves("crew-b")
      rename(b, VALVE_PHOTO, "b-photo.jpg")
      assert(b:sync(world.client()))
      rename(a, VALVE_PDF, "a-report.pdf")
      local result = assert(a:sync(world.client()))
      assert.same({}, result.conflicts)
      assert.same({ "b-photo.jpg", "a-report.pdf" }, { on_server(VALVE_PHOTO).name, on_server(VALVE_PDF).name })
      a:close()
      b:close()
    end)
  end)
end)
