-- What a sync whose answer was lost tells its caller of the edits it read
-- back (found by the crash torture, `make torture` seed 1700000001 "caps=
-- wildfire sync url": the emulator died with client:sync's request in
-- flight, after it applied it). Another crew deletes E03 right before the
-- crew's request runs (a race), the server applies the crew's add and
-- refuses its update of E03, and the answer is lost (the connection reset
-- after the server's work). The sync reads its edits back at once: the add
-- applied, the update in conflict with the delete. With a state file the
-- failed sync's error is the only report there is (the journal forgets a
-- settled edit): err.conflicts lists the update, and the error's message
-- (what the CLI prints) names it. The store keeps it in st:conflicts().
local world = require "spec.support.engine_world"

local E03 = world.E03

describe("engine, an answer lost after the server refused an edit of it:", function()
  local server, dir

  world.each_test(function(s, d) server, dir = s, d end)

  for _, w in ipairs(world.WAYS) do
    local way_name, make_way = w[1], w[2]
    it(way_name .. ": the update read back in conflict is reported, its GlobalID in the error's message", function()
      local c = world.checker()
      local cl = world.client(server, true)
      local way = make_way(server, cl, dir, "perReplica")
      local added = way.add{ APN = "LOST-ANSWER", OWNER = "crew A" }
      way.update(E03, { OWNER = "crew A" })
      server:crew_delete_before_next_sync(E03)
      assert(server.emu:control("faults", { route = "synchronizeReplica", kind = "reset", phase = "after",
                                            attempts = { 1 } }))
      local r1, e1 = way.sync{ params = { rollbackOnFailure = false } }
      c.check(not r1, "sync 1 succeeded through a reset answer")
      local message = world.message_of(e1)
      c.check(e1 and e1.outcome_unknown, "sync 1's outcome is not flagged unknown: " .. message)
      if way.name == "state file" then
        c.check(world.has(way.conflicts(), "update", E03), "err.conflicts does not list the update of E03")
        c.check(message:upper():find(world.norm(E03):gsub("[{}]", ""), 1, true),
          "the error's message does not name the update of E03 read back in conflict: " .. message)
      else
        c.check(world.has(way.conflicts(), "update", E03) or world.has(way.failed(), "update", E03),
          "st:conflicts() and st:failed() do not list the update of E03")
      end
      local r2, e2 = way.sync()
      c.check(r2, "sync 2 failed: " .. world.message_of(e2))
      local _, applied = world.check_once(c, server, way.origin, "add", added)
      c.check(not applied["update|" .. E03], "the update of E03 applied")
      way.close()
      cl:close()
      c.done()
    end)
  end
end)
