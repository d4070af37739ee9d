-- Issue 34, F5: an upload-only sync moves no download generation. Its
-- answer (NoEdits) carries the server's new generation, but nothing was
-- downloaded up to it: a later two-way sync must still download what other
-- crews changed before (and after) the upload-only one. The store keeps its
-- generation and gets it right; client:sync with a state file saved the
-- answer's generation and missed the other crew's change: the two engines
-- disagreed. Both are driven here, against the emulator and the documented
-- double.
local world = require "spec.support.engine_world"

local E01, E03 = world.E01, world.E03

local SERVERS = {
  { "the emulator", function() return world.emulator() end },
  { "the documented double", function() return world.documented() end },
}

for _, s in ipairs(SERVERS) do
  local server_name, start = s[1], s[2]
  for _, w in ipairs(world.WAYS) do
    local way_name, make_way = w[1], w[2]
    describe(("engine, %s, %s: F5"):format(way_name, server_name), function()
      local begin = world.each_crew(start, make_way)

      it("a two-way sync after an upload-only one downloads what other crews changed before it", function()
        local server, way = begin()
        local c = world.checker()
        server:crew_update(E01, { OWNER = "crew B before" })
        local added = way.add{ APN = "UPLOAD-ONLY", OWNER = "crew A" }
        local r1, e1 = way.sync{ direction = "upload" }
        c.check(r1, "the upload-only sync failed: " .. world.message_of(e1))
        c.check(way.pending() == 0, "the add is still queued after the upload-only sync")
        c.check(server:feature(added) ~= nil, "the add is not on the server")
        server:crew_update(E03, { OWNER = "crew B after" })
        local r2, e2 = way.sync()
        c.check(r2, "the two-way sync failed: " .. world.message_of(e2))
        c.check(way.value(E01, "OWNER") == "crew B before",
          "the other crew's change made before the upload-only sync was never downloaded: OWNER "
          .. tostring(way.value(E01, "OWNER")))
        c.check(way.value(E03, "OWNER") == "crew B after",
          "the other crew's change made after it was not downloaded: OWNER " .. tostring(way.value(E03, "OWNER")))
        local _, applied = world.tally(server, way.origin)
        local key = "add|" .. world.norm(added)
        c.check((applied[key] or 0) == 1, ("the add applied %d times"):format(applied[key] or 0))
        c.done()
      end)
    end)
  end
end
