-- client:resume_sync and the state file's journal (issue 34). An older
-- sync's job (async, wait = false: its operation saved with op:to_json())
-- was finished by a later client:sync; then a sync's add is lost on its way
-- (the connection reset before the server read the request: the add stays
-- journaled, provisional). Resuming the older operation afterwards gives its
-- result, and must leave the journal alone: the next sync holds the add, the
-- one after sends it, and the server applies it once. Before, the resumed
-- result advanced the state and removed the journal: the add was never sent.
-- (The uploaded edits file kept the same way: spec/engine/uploads_spec.)
local world = require "spec.support.engine_world"

describe("engine, client:resume_sync of an older job, the emulator:", function()
  local server, dir

  world.each_test(function(s, d) server, dir = s, d end, { job_step_ms = 50 })

  it("keeps the add a later sync journaled after its request was lost: sent once, applied once", function()
    local c = world.checker()
    local cl = world.client(server, true)
    local way = world.state_way(server, cl, dir, "perReplica")
    local op = assert(way.sync{ params = { async = true }, wait = false })
    local rb, eb = cl:sync(way.path, nil, { poll_interval = 0.05, timeout = world.SYNC_TIMEOUT })
    c.check(rb and rb.reattached, "the next sync did not finish the job: " .. world.message_of(eb))
    local added = way.add{ APN = "RESUME-KEPT", OWNER = "crew A" }
    assert(server.emu:control("faults", { route = "synchronizeReplica", kind = "reset", phase = "before",
                                          attempts = { server:sync_requests() + 1 } }))
    c.check(not way.sync(), "the sync whose request was reset reported success")
    c.check(way.pending() == 1, "the lost add is not journaled")
    local resumed = assert(cl:resume_sync(op:to_json()))
    local rr, er = resumed:wait{ poll_interval = 0.05 }
    c.check(rr, "the resumed job gave no result: " .. world.message_of(er))
    c.check(way.pending() == 1, "the resumed job's result cleared the journal of the lost add")
    for n = 2, 3 do
      local r, e = way.sync()
      c.check(r, ("sync %d failed: %s"):format(n, world.message_of(e)))
    end
    c.check(way.pending() == 0, "the journal is still there after two more syncs")
    world.check_once(c, server, way.origin, "add", added)
    cl:close()
    c.done()
  end)
end)
