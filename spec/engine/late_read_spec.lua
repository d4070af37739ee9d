-- Issue 34, F2: what a read made inside the late window may conclude. The
-- crew updates E01; a gateway answers 504 while the server applies that
-- sync 3 s later; another crew changes E01 in between. The crew's next sync,
-- still inside the late window, reads E01 holding the other crew's value:
-- that is no conflict yet (the crew's own request may still land over it),
-- and it is not one once it has landed. Before, that read called it a
-- conflict: the crew was told its edit was held back and its store took the
-- other crew's value, while the server held the crew's own. Both engines
-- (the store, st:sync; client:sync with a state file), against the emulator.
local helper = require "spec.helper"
local world = require "spec.support.engine_world"

describe("engine, a read inside the late window (a gateway's lost answer, another crew's edit):", function()
  local server, dir

  world.each_test(function(s, d) server, dir = s, d end)

  for _, w in ipairs(world.WAYS) do
    local way_name, make_way = w[1], w[2]
    -- Sync 1 updates E01, a gateway answers 504 while the server runs the request 3 s later, another
    -- crew changes E01 before that, and sync 2 reads it inside the late window: the checker, the
    -- client, the crew's way and the syncs' options.
    local function held_update_then_theirs()
      local c = world.checker()
      local cl = world.client(server, true)
      local way = make_way(server, cl, dir, "perReplica")
      local opts = { late_window = 60 }
      way.update(world.E01, { OWNER = "ours" })
      server:gateway("504", 3000)
      c.check(not way.sync(opts), "sync 1 succeeded through a 504")
      server:gateway(nil)
      server:crew_update(world.E01, { OWNER = "theirs" }) -- before the server ran sync 1's request
      local r2, e2 = way.sync(opts)
      c.check(r2, "sync 2 failed: " .. world.message_of(e2))
      return c, cl, way, opts
    end

    it(way_name .. ": another value read while the lost request may still land is not a conflict", function()
      local c, cl, way, opts = held_update_then_theirs()
      c.check(#way.conflicts() == 0, "sync 2 reported a conflict while the crew's request could still land")
      helper.wait_for("the server to run the request the gateway answered", function()
        return server:held() == 0
      end, 30)
      local r3, e3 = way.sync(opts)
      c.check(r3, "sync 3 failed: " .. world.message_of(e3))
      world.check_once(c, server, way.origin, "update", world.E01)
      local f = server:feature(world.E01)
      c.check(f and f.OWNER == "ours", "the server holds OWNER " .. tostring(f and f.OWNER))
      c.check(#way.failed() == 0, "failed() lists " .. #way.failed() .. " edit(s)")
      if way.st then
        -- the store holds what the server holds, and tells that ours replaced the other crew's value
        c.check(way.value(world.E01, "OWNER") == "ours", "the store holds OWNER "
          .. tostring(way.value(world.E01, "OWNER")) .. ", the server ours")
        local list = assert(way.st:conflicts())
        local k = list[1] or {}
        c.check(#list == 1 and k.outcome == "local_kept", ("the store keeps %d conflict(s), outcome %s"):format(
          #list, tostring(k.outcome)))
        c.check(type(k.server) == "table" and k.server.attributes.OWNER == "theirs",
          "the conflict does not keep the other crew's value")
        local resolved = assert(way.st:resolve(world.E01, "server"))
        c.check(resolved.queued == 1, "resolving with the server's version queued " .. resolved.queued)
        c.check(way.value(world.E01, "OWNER") == "theirs", "resolved, the store holds OWNER "
          .. tostring(way.value(world.E01, "OWNER")))
      else
        c.check(#way.conflicts() == 0, ("%d conflict(s) reported for an edit the server applied"):format(
          #way.conflicts()))
      end
      c.check(way.pending() == (way.st and 1 or 0), "edits queued or journaled: " .. way.pending())
      way.close()
      cl:close()
      c.done()
    end)

    -- The same, and the crew deletes E01 between sync 2 and 3 (its table held the other crew's value,
    -- downloaded during the hold): the delete's base is that value, while the server holds the crew's
    -- own once the request landed; the delete goes without a conflict.
    it(way_name .. ": an edit made during the hold goes once the held update landed, no false conflict", function()
      local c, cl, way, opts = held_update_then_theirs()
      way.delete(world.E01)
      helper.wait_for("the server to run the request the gateway answered", function()
        return server:held() == 0
      end, 30)
      for i = 3, 4 do
        local r, e = way.sync(opts)
        c.check(r, ("sync %d failed: %s"):format(i, world.message_of(e)))
      end
      for _, op in ipairs{ "update", "delete" } do
        world.check_once(c, server, way.origin, op, world.E01)
      end
      c.check(server:feature(world.E01) == nil, "the server still holds E01")
      c.check(#way.conflicts() == 0, ("%d conflict(s) reported: %s"):format(#way.conflicts(),
        tostring((way.conflicts()[1] or {}).message)))
      c.check(#way.failed() == 0, "failed() lists " .. #way.failed() .. " edit(s)")
      c.check(way.pending() == 0, "edits still queued or journaled: " .. way.pending())
      way.close()
      cl:close()
      c.done()
    end)
  end
end)
