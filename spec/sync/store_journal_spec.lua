-- The store's journal (geoservices.store.sync.journal) on its own, through the
-- attempt engine's journal interface: what each step leaves in the store's
-- tables. The engine itself: spec/sync/attempt_spec.lua.
local helper = require "spec.helper"
local journal_mod = require "geoservices.store.sync.journal"
local outcome = require "geoservices.sync.outcome"

local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"

describe("the store's journal", function()
  local world = helper.store_world()
  setup(world.start)
  teardown(world.stop)

  local n = 0
  -- A store with a queued add and update, and its journal having taken them.
  local function taken()
    n = n + 1
    local st = world.create("journal-" .. n)
    local c = world.client()
    local gid = assert(st:add(0, { attributes = { APN = "store-journal" }, geometry = { x = -117.2, y = 34.1 } }))
    assert(st:update(0, { attributes = { GlobalID = PARCEL1, OWNER = "store-journal" } }))
    local j = journal_mod.new(st, c, assert(st:replica()), {})
    assert.is_false(j:pending())
    local params = assert(j:request({}))
    local t = assert(j:take(params, {}, {}))
    return st, j, t, gid
  end

  local function keys(gid)
    return outcome.key("add", 0, "feature", gid), outcome.key("update", 0, "feature", PARCEL1)
  end

  it("take records the attempt with its queue rows before anything is sent; begin adds how it is sent", function()
    local sent = world.emu:count("synchronizeReplica")
    local st, j, t = taken()
    assert.equal(sent, world.emu:count("synchronizeReplica"))
    assert.equal(2, #t.entries)
    local a = assert(st:attempt())
    for _, r in ipairs(assert(st:pending())) do assert.equal(a.id, r.attempt) end
    assert(j:begin{ syncDirection = "bidirectional", transportType = "esriTransportTypeEmbedded",
                    rollbackOnFailure = false })
    assert.equal("esriTransportTypeEmbedded", st:attempt().params.transportType)
    assert.is_false(st:attempt().params.rollbackOnFailure)
    assert(j:record_job("http://127.0.0.1:1/jobs/3"))
    assert.equal("http://127.0.0.1:1/jobs/3", st:attempt().status_url)
    -- a later sync finds it, with its rows
    local j2 = journal_mod.new(st, world.client(), assert(st:replica()), {})
    local pending = assert(j2:pending())
    assert.equal("http://127.0.0.1:1/jobs/3", pending.status_url)
    assert.equal(2, #j2:entries())
    st:close()
  end)

  it("settle_read after its own failure keeps the rows not shown applied in the attempt", function()
    local st, j, _, gid = taken()
    local add, update = keys(gid)
    local summary = assert(j:settle_read({ [add] = "not_applied", [update] = outcome.APPLIED }, {},
      { provisional = true }))
    assert.equal(1, summary.unsettled)
    local a = assert(st:attempt())
    local rows = assert(st:pending())
    assert.equal(1, #rows)
    assert.equal("add", rows[1].op)
    assert.equal(a.id, rows[1].attempt, "provisional: still in the attempt, read again by the next sync")
    assert.equal(1, #j:entries())
    st:close()
  end)

  it("settle_read of an earlier attempt puts the rows not applied back in the queue, to send now", function()
    local st, j, _, gid = taken()
    local add, update = keys(gid)
    assert(j:settle_read({ [add] = "not_applied", [update] = { conflict = true, server = {}, description = "x" } },
      {}, { provisional = false }))
    assert.is_false(st:attempt())
    local rows = assert(st:pending())
    assert.equal(1, #rows)
    assert.is_nil(rows[1].attempt)
    assert.equal(1, #assert(st:conflicts()))
    st:close()
  end)

  it("abandon puts every row back in the queue and forgets the attempt", function()
    local st, j = taken()
    assert(j:abandon())
    assert.is_false(st:attempt())
    local rows = assert(st:pending())
    assert.equal(2, #rows)
    for _, r in ipairs(rows) do assert.is_nil(r.attempt) end
    st:close()
  end)

  it("commit without generations (an upload-only answer) keeps the store's, and settles each row", function()
    local st, j, _, gid = taken()
    local add, update = keys(gid)
    local before = assert(st:replica()).replicaServerGen
    assert(j:commit({ replicaServerGen = before + 5, response = "no_edits" },
      { verdicts = { [add] = outcome.APPLIED, [update] = outcome.APPLIED }, object_ids = {}, gens = nil }))
    assert.equal(before, assert(st:replica()).replicaServerGen)
    assert.same({}, assert(st:pending()))
    assert.is_false(st:attempt())
    st:close()
  end)

  it("commit with generations moves them in the same transaction", function()
    local st, j, _, gid = taken()
    local add, update = keys(gid)
    local before = assert(st:replica()).replicaServerGen
    assert(j:commit({ replicaServerGen = before + 5, response = "edits" },
      { verdicts = { [add] = outcome.APPLIED, [update] = { code = 1019, description = "gone" } }, object_ids = {},
        gens = { replicaServerGen = before + 5 } }))
    assert.equal(before + 5, assert(st:replica()).replicaServerGen)
    assert.equal(1, #assert(st:failed()))
    st:close()
  end)
end)
