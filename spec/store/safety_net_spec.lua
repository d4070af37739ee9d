-- Issue 35, part 1: what a user of a replica store would lose if one of
-- three small, plausible bugs crept in, each shown end to end against the
-- emulator (spec/mutations/ plants each bug and checks these fail):
--   * a kill inside the commit of a download (another crew's change
--     arriving): the store's generation moves only with the data it counts,
--     so the next sync downloads the change again;
--   * a request the server refuses as a whole (an error answer, not an
--     ambiguous one): every edit stays queued and the next sync sends each once;
--   * an update in flight that goes back to the queue after its feature was
--     deleted locally: the delete is what the next sync sends.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote

local F1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local F2 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}"
local CREW2 = "{5E1A0C2B-2222-4A5B-9C8D-000000000002}" -- a replica of the example world

-- The emulator's work ends with its answer (no gateway in front): a request whose process died
-- cannot still run, so the sync after such a kill is given no late window (the library's default
-- holds those edits while the server could still run the request: spec/engine/interrupted_spec).
local NO_LATE_RUN = { late_window = 0 }

local function norm(gid) return (tostring(gid):upper():gsub("[{}]", "")) end

describe("store safety net", function()
  local world = helper.store_world()
  setup(world.start)
  teardown(world.stop)
  before_each(function() world.emu:reset() end)

  -- a store sync in a child process that kills itself at `step` (spec/support/kill_child.lua)
  local function killed_sync(st, step, mode)
    local out, ok = helper.run_shell(("LUA_PATH=%s LUA_CPATH=%s lua5.4 spec/support/kill_child.lua %s %s %s %s"):format(
      q(package.path), q(package.cpath), q(world.emu.url), q(st.path), step, mode or ""))
    assert.is_falsy(ok, out)
    assert.matches("@" .. step, out, 1, true)
  end

  -- the other crew (replica crew-2, a client:sync state file) sets OWNER of a feature
  local function other_crew_update(gid, owner)
    local path = world.dir .. "/crew-2.json"
    if not helper.read_all(path) then
      helper.write_file(path, json.encode{ service = "Parcels", replicaID = CREW2, model = "perReplica",
                                           replicaServerGen = 1 })
    end
    local e = geoservices.edits()
    e:update(0, { attributes = { GlobalID = gid, OWNER = owner } })
    assert(world.client():sync(path, e))
  end

  -- the server's accepted edits of one replica, by "op GlobalID"
  local function applied_by(st)
    local rid, seen = norm(st:replica().replicaID), {}
    for _, e in ipairs(world.emu:control("changelog?service=Parcels").entries) do
      if norm(e.origin) == rid and not e.refused and not e.rolled_back then
        local k = e.op .. " " .. norm(e.globalId)
        seen[k] = (seen[k] or 0) + 1
      end
    end
    return seen
  end

  local function server_has(gid)
    for g, f in pairs(world.emu:control("state").featureServices.Parcels.layers["0"].features) do
      if norm(g) == norm(gid) then return f end
    end
    return nil
  end

  it("a kill inside the commit of another crew's change keeps the generation with its data", function()
    local st = world.create("commit-kill")
    local gen = st:replica().replicaServerGen
    other_crew_update(F1, "crew 2 was here")
    killed_sync(st, "commit")
    -- what the killed sync was writing is gone, and so is its generation
    assert.equal(gen, st:replica().replicaServerGen)
    assert.is_not.equal("crew 2 was here", st:get(0, F1).attributes.OWNER)
    -- the next sync downloads the change again: the store equals the server
    local result = assert(st:sync(world.client()))
    assert.is_true(result.applied >= 1)
    assert.equal("crew 2 was here", st:get(0, F1).attributes.OWNER)
    assert.is_true(st:replica().replicaServerGen > gen)
    -- and a later sync finds nothing left behind
    assert(st:sync(world.client()))
    assert.equal("crew 2 was here", st:get(0, F1).attributes.OWNER)
    st:close()
  end)

  it("a request refused as a whole keeps every edit queued; the next sync sends each once", function()
    local st = world.create("refused")
    local gids = {}
    for i = 1, 3 do gids[i] = assert(st:add(0, { attributes = { APN = "refused-" .. i } })) end
    -- an error answer (HTTP 200 with an error body, as the server sends): the request ran nothing
    world.emu:fault{ route = "synchronizeReplica", kind = "error", attempts = { 1 } }
    local result, err = st:sync(world.client())
    assert.is_nil(result)
    assert.is_falsy(err.outcome_unknown)
    local pending = assert(st:pending())
    assert.equal(3, #pending)
    for _, e in ipairs(pending) do assert.equal("add", e.op) end
    assert.same({}, applied_by(st))
    result = assert(st:sync(world.client()))
    assert.equal(3, result.uploaded)
    assert.equal(0, #assert(st:pending()))
    local seen = applied_by(st)
    for _, gid in ipairs(gids) do assert.equal(1, seen["add " .. norm(gid)], gid) end
    st:close()
  end)

  it("an update in flight, then a local delete of its feature: the delete reaches the server", function()
    local st = world.create("requeue")
    assert(st:update(0, { attributes = { GlobalID = F2, OWNER = "edited offline" } }))
    -- the sync dies as its request is about to leave: the update is in flight, never sent
    killed_sync(st, "send")
    assert.is_truthy(st:attempt())
    assert.is_not_nil(server_has(F2))
    -- the crew deletes the feature before syncing again
    assert(st:delete(0, F2))
    local result = assert(st:sync(world.client(), NO_LATE_RUN))
    assert.is_not_nil(result.resolved)
    assert.is_nil(server_has(F2))
    assert.equal(1, applied_by(st)["delete " .. norm(F2)])
    assert.is_nil(applied_by(st)["update " .. norm(F2)])
    assert.equal(0, #assert(st:pending()))
    -- nothing left that a later sync refuses
    assert(st:sync(world.client()))
    st:close()
  end)

  it("a delete and an update in flight that never left: read back, not applied, sent by the next sync", function()
    local st = world.create("in-flight")
    assert(st:delete(0, F2))
    assert(st:update(0, { attributes = { GlobalID = F1, OWNER = "never left" } }))
    killed_sync(st, "send")
    assert.is_not_nil(server_has(F2))
    assert.is_not.equal("never left", server_has(F1).attributes.OWNER)
    assert(st:sync(world.client(), NO_LATE_RUN))
    assert.is_nil(server_has(F2))
    assert.equal("never left", server_has(F1).attributes.OWNER)
    assert.equal(1, applied_by(st)["delete " .. norm(F2)])
    assert.equal(1, applied_by(st)["update " .. norm(F1)])
    assert.equal(0, #assert(st:pending()))
    st:close()
  end)

  it("edits applied whose answer was lost: read back as applied, never sent again", function()
    local st = world.create("answer-lost")
    local added = assert(st:add(0, { attributes = { APN = "answer lost" } }))
    assert(st:update(0, { attributes = { GlobalID = F1, OWNER = "answer lost" } }))
    killed_sync(st, "answer") -- the server applied both; their answer died with the process
    assert(st:sync(world.client()))
    assert(st:sync(world.client()))
    local seen = applied_by(st)
    assert.equal(1, seen["add " .. norm(added)])
    assert.equal(1, seen["update " .. norm(F1)])
    assert.equal(0, #assert(st:pending()))
    assert.same({}, assert(st:failed()))
    -- every attempt the server saw: none refused as a duplicate either
    local attempts = 0
    for _, e in ipairs(world.emu:control("changelog?service=Parcels").entries) do
      if norm(e.globalId) == norm(added) then attempts = attempts + 1 end
    end
    assert.equal(1, attempts)
    st:close()
  end)
end)
