-- An edit made while its feature's add is in an attempt of unknown outcome
-- (geoservices.store.capture: a row in flight is never touched, a new one
-- follows it) joins that add when the add goes back to the queue
-- (Store:end_attempt's fold), as the capture joins unsent edits: the add
-- then sends the feature as it is now. Here the add's first request never
-- reaches the server (the connection reset before it is read: a lost
-- answer, read back as not shown), the next sync holds it one sync
-- (geoservices.sync.attempt's requeue rule; the syncs' late_window 0: a
-- server whose work ends with its answer), the user edits the feature,
-- and the sync after that sends it again. What a user must see: the edits
-- on the server exactly once, the server's and the table's values the last
-- ones made, nothing queued, failed or in conflict. This is also what the
-- store crash torture met under load (spec/sync/torture_ledger_spec.lua).
local helper = require "spec.helper"

-- the store states rollbackOnFailure false with edits (per-edit results name a refused edit)
local URL = { transportType = "esriTransportTypeUrl" }

describe("an edit of a feature whose add is held", function()
  local world = helper.store_world()
  setup(world.start)
  teardown(world.stop)

  local n = 0
  -- A store whose add of a new feature (OWNER v-add) is held in its attempt, never seen by the server;
  -- `params`: its syncs' extra parameters.
  local function held_add(params)
    n = n + 1
    local st = world.create("fold-" .. n)
    local c = world.client()
    local gid = assert(st:add(0, { attributes = { OWNER = "v-add", APN = "FOLD-" .. n },
                                   geometry = { x = -117 - n / 100, y = 34 } }))
    assert(world.emu:fault{ route = "synchronizeReplica", kind = "reset", phase = "before",
                            attempts = { world.emu:count("synchronizeReplica") + 1 } })
    local r1, e1 = st:sync(c, { params = params, late_window = 0 })
    world.emu:control("faults/clear", {})
    assert.is_nil(r1)
    assert.truthy(tostring(e1.message):find("not shown applied yet", 1, true), tostring(e1.message))
    assert(st:sync(c, { params = params, late_window = 0 })) -- holds it: sends no edit
    local q = st:pending()
    assert.equal(1, #q)
    assert.same({ "add", true }, { q[1].op, q[1].attempt ~= nil })
    return st, c, gid, q[1].feature
  end

  -- The server's change log of one feature: {op, OWNER, refused} in order.
  local function log_of(gid)
    local key = gid:upper():gsub("[{}]", "")
    local list = {}
    for _, e in ipairs(world.emu:control("changelog?service=Parcels").entries) do
      if type(e.globalId) == "string" and e.globalId:upper():gsub("[{}]", "") == key then
        list[#list + 1] = { e.op, e.attributes and e.attributes.OWNER or false, e.refused == true }
      end
    end
    return list
  end

  local function server_owner(gid)
    local features = world.emu:control("state").featureServices.Parcels.layers["0"].features
    for k, f in pairs(features) do
      if k:upper():gsub("[{}]", "") == gid:upper():gsub("[{}]", "") then return f.attributes.OWNER end
    end
    return nil
  end

  local function nothing_left(st)
    assert.same({ 0, 0, 0 }, { #st:pending(), #st:failed(), #st:conflicts() })
  end

  it("an update goes in the add, once", function()
    local st, c, gid = held_add(URL)
    assert(st:update(0, { attributes = { GlobalID = gid, OWNER = "v-upd" } }))
    assert(st:sync(c, { params = URL, late_window = 0 }))
    assert.same({ { "add", "v-upd", false } }, log_of(gid))
    assert.equal("v-upd", server_owner(gid))
    assert.equal("v-upd", st:get(0, gid).attributes.OWNER)
    nothing_left(st)
    st:close()
  end)

  it("a delete and the add go as nothing", function()
    local st, c, gid = held_add(URL)
    assert(st:delete(0, gid))
    assert(st:sync(c, { params = URL, late_window = 0 }))
    assert.same({}, log_of(gid))
    assert.is_nil(server_owner(gid))
    nothing_left(st)
    st:close()
  end)

  -- per-edit results name the refused add (rollbackOnFailure false, as the store states it), or the
  -- request is refused whole and split (rollbackOnFailure true; an async job)
  local WAYS = {
    { "url", { transportType = "esriTransportTypeUrl" } },
    { "embedded", { transportType = "esriTransportTypeEmbedded" } },
    { "url, rollbackOnFailure true", { transportType = "esriTransportTypeUrl", rollbackOnFailure = true } },
    { "async", { async = true } },
  }
  for _, way in ipairs(WAYS) do
    it("an update still reaches the server when the add's first request lands late, just before it goes again ("
      .. way[1] .. ")", function()
      local params = way[2]
      local st, c, gid, sent = held_add(params)
      assert(st:update(0, { attributes = { GlobalID = gid, OWNER = "v-upd" } }))
      -- the first request, applied late by the server: right before the next synchronizeReplica is handled
      -- (after the store read the add back as not there and joined the update to it)
      assert(world.emu:control("race", { service = "Parcels", replicaID = st:replica().replicaID,
                                         edits = { { id = 0, features = { adds = { sent } } } } }))
      assert(st:sync(c, { params = params, late_window = 0 })) -- the add refused as a copy of itself: read back
      assert(st:sync(c, { params = params, late_window = 0 })) -- the update
      assert.equal("v-upd", server_owner(gid))
      assert.equal("v-upd", st:get(0, gid).attributes.OWNER)
      local applied = {}
      for _, e in ipairs(log_of(gid)) do
        if not e[3] then applied[#applied + 1] = e[1] .. " " .. tostring(e[2]) end
      end
      assert.same({ "add v-add", "update v-upd" }, applied)
      nothing_left(st)
      st:close()
    end)

    it("an add alone whose first request lands late, just before it goes again, is applied once, not refused ("
      .. way[1] .. ")", function()
      local params = way[2]
      local st, c, gid, sent = held_add(params)
      assert(world.emu:control("race", { service = "Parcels", replicaID = st:replica().replicaID,
                                         edits = { { id = 0, features = { adds = { sent } } } } }))
      local result = assert(st:sync(c, { params = params, late_window = 0 }))
      assert.same({}, result.failed_edits or {})
      assert.equal("v-add", server_owner(gid))
      local applied = {}
      for _, e in ipairs(log_of(gid)) do
        if not e[3] then applied[#applied + 1] = e[1] .. " " .. tostring(e[2]) end
      end
      assert.same({ "add v-add" }, applied)
      nothing_left(st)
      st:close()
    end)
  end
end)
