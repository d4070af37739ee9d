-- Issue 34, F2: what a read made inside the late window may conclude. The
-- crew updates E01; a gateway answers 504 while the server applies that
-- sync 3 s later; another crew changes E01 in between. The crew's next sync,
-- still inside the late window, reads E01 holding the other crew's value:
-- that is no conflict yet (the crew's own request may still land over it),
-- and it is not one once it has landed. Before, that read called it a
-- conflict: the crew was told its edit was held back and its store took the
-- other crew's value, while the server held the crew's own. Both engines
-- (the store, st:sync; client:sync with a state file, its caller keeping its
-- copy from `result.edits` or from on_change), against the emulator.
--
-- Once the crew's request has landed, the server holds the crew's value
-- over the other crew's, which sync 2 had downloaded: the crew's copy must
-- follow the server, and the crew must be told that its late edit went over
-- a colleague's value (a conflict, outcome `local_kept`, keeping theirs).
-- The store did; client:sync told its caller nothing (its caller held the
-- other crew's value, the server the crew's own).
local helper = require "spec.helper"
local world = require "spec.support.engine_world"

describe("engine, a read inside the late window (a gateway's lost answer, another crew's edit):", function()
  local server, dir

  world.each_test(function(s, d) server, dir = s, d end)

  local ways = { world.WAYS[1], world.WAYS[2], { "state file, on_change", function(s, cl, d, model)
    return world.state_way(s, cl, d, model, false, { on_change = true })
  end } }
  for _, w in ipairs(ways) do
    local way_name, make_way = w[1], w[2]
    -- Sync 1 updates E01, a gateway answers 504 while the server runs the request 3 s later, another
    -- crew changes E01 before that, and sync 2 reads it inside the late window: the checker, the
    -- client, the crew's way and the syncs' options.
    -- The other crew's change and sync 2 must come before the server runs sync 1's request: a spec
    -- stalled past the delay found it run (the server holds nothing after sync 2), and the crew
    -- begins again on the server's data with a longer delay (helper.within_window).
    local function held_update_then_theirs()
      local c, cl, way
      local opts = { late_window = 60 }
      helper.within_window("sync 2 while sync 1's request is held", { 3000, 12000, 48000 }, function(delay_ms)
        if way then server:reset() end
        c, cl, way = world.crew(server, make_way, way and helper.tmp_dir() or dir)
        way.update(world.E01, { OWNER = "ours" })
        server:gateway("504", delay_ms)
        world.unsynced(c, way, 1, "a 504", opts)
        server:gateway(nil)
        server:crew_update(world.E01, { OWNER = "theirs" }) -- before the server ran sync 1's request
        world.synced(c, way, 2, opts)
        if server:held() > 0 then return true end
        world.finish(c, cl, way) -- what syncs 1 and 2 were checked for stands
        return false
      end)
      return c, cl, way, opts
    end

    it(way_name .. ": another value read while the lost request may still land is not a conflict; "
      .. "once it landed, the crew holds the server's value and is told it replaced the other crew's", function()
      local c, cl, way, opts = held_update_then_theirs()
      c.check(#way.conflicts() == 0, "sync 2 reported a conflict while the crew's request could still land")
      c.check(way.value(world.E01, "OWNER") == "theirs", "sync 2 did not bring the other crew's value")
      world.wait_ran(server, "the server to run the request the gateway answered")
      local r3 = world.synced(c, way, 3, opts)
      world.check_once(c, server, way.origin, "update", world.E01)
      world.check_owner(c, server, world.E01, "ours")
      c.check(#way.failed() == 0, "failed() lists " .. #way.failed() .. " edit(s)")
      -- what the crew holds is what the server holds
      c.check(way.value(world.E01, "OWNER") == "ours", ("the crew holds OWNER %s, the server ours"):format(
        tostring(way.value(world.E01, "OWNER"))))
      -- and it is told that ours replaced the other crew's value, which the report keeps
      local list = way.conflicts()
      local k = list[1] or {}
      c.check(#list == 1 and k.op == "update" and k.globalId == world.norm(world.E01) and k.outcome == "local_kept",
        ("the crew was told of %d conflict(s) (%s of %s, outcome %s), not of its update of E01 applied over "
          .. "another crew's value"):format(#list, tostring(k.op), tostring(k.globalId), tostring(k.outcome)))
      c.check(type(k.server) == "table" and type(k.server.attributes) == "table"
        and k.server.attributes.OWNER == "theirs", "the report does not keep the other crew's value")
      if way.st then
        local resolved = assert(way.st:resolve(world.E01, "server"))
        c.check(resolved.queued == 1, "resolving with the server's version queued " .. resolved.queued)
        c.check(way.value(world.E01, "OWNER") == "theirs", "resolved, the store holds OWNER "
          .. tostring(way.value(world.E01, "OWNER")))
      else
        -- in the result of the sync that found it, in plain words
        local told = type(r3) == "table" and r3.conflicts and r3.conflicts[1] or {}
        c.check(told.outcome == "local_kept" and type(told.description) == "string"
          and told.description:find("another crew", 1, true) ~= nil,
          "result.conflicts of sync 3 does not tell it: " .. tostring(told.description))
        -- told once: the next sync neither reports it again nor sends anything again
        world.synced(c, way, 4, opts)
        c.check(#way.conflicts() == 1, ("told of %d conflict(s) after sync 4"):format(#way.conflicts()))
        world.check_once(c, server, way.origin, "update", world.E01)
        c.check(way.value(world.E01, "OWNER") == "ours", "after sync 4 the crew holds OWNER "
          .. tostring(way.value(world.E01, "OWNER")))
      end
      c.check(way.pending() == (way.st and 1 or 0), "edits queued or journaled: " .. way.pending())
      world.finish(c, cl, way)
    end)

    -- The same, and sync 3, which reads the crew's update applied, then fails (the server refuses its
    -- request, 503): what the read found is told in its error (err.resolved), never found again.
    it(way_name .. ": a sync that reads the late landing and then fails tells it in its error", function()
      local c, cl, way, opts = held_update_then_theirs()
      world.wait_ran(server, "the server to run the request the gateway answered")
      assert(server.emu:control("faults", { route = "synchronizeReplica", kind = "status", status = 503 }))
      world.unsynced(c, way, 3, "a 503", opts)
      c.check(way.value(world.E01, "OWNER") == "ours", ("after sync 3 failed the crew holds OWNER %s, the "
        .. "server ours"):format(tostring(way.value(world.E01, "OWNER"))))
      local list = way.conflicts()
      local k = list[1] or {}
      c.check(#list == 1 and k.outcome == "local_kept" and type(k.server) == "table"
        and k.server.attributes.OWNER == "theirs", ("after sync 3 failed the crew was told of %d conflict(s) "
        .. "(outcome %s), not of its update applied over the other crew's value"):format(#list, tostring(k.outcome)))
      assert(server.emu:control("faults/clear", {}))
      world.synced(c, way, 4, opts)
      c.check(#way.conflicts() == 1, ("told of %d conflict(s) after sync 4"):format(#way.conflicts()))
      c.check(way.value(world.E01, "OWNER") == "ours", "after sync 4 the crew holds OWNER "
        .. tostring(way.value(world.E01, "OWNER")))
      world.check_once(c, server, way.origin, "update", world.E01)
      c.check(#way.failed() == 0, "failed() lists " .. #way.failed() .. " edit(s)")
      world.finish(c, cl, way)
    end)

    -- The same, and the crew deletes E01 between sync 2 and 3 (its table held the other crew's value,
    -- downloaded during the hold): the delete's base is that value, while the server holds the crew's
    -- own once the request landed; the delete goes without a conflict.
    it(way_name .. ": an edit made during the hold goes once the held update landed, no false conflict", function()
      local c, cl, way, opts = held_update_then_theirs()
      way.delete(world.E01)
      world.wait_ran(server, "the server to run the request the gateway answered")
      for i = 3, 4 do world.synced(c, way, i, opts) end
      for _, op in ipairs{ "update", "delete" } do
        world.check_once(c, server, way.origin, op, world.E01)
      end
      c.check(server:feature(world.E01) == nil, "the server still holds E01")
      c.check(#way.conflicts() == 0, ("%d conflict(s) reported: %s"):format(#way.conflicts(),
        tostring((way.conflicts()[1] or {}).message)))
      world.check_settled(c, way)
      world.finish(c, cl, way)
    end)

    -- client:sync reads an update's base when it sends it. The other crew changes E01 first; the
    -- crew's update of it (made on its older copy) goes over that value, and its request is lost
    -- before the server reads it. Sync 2, inside the late window, downloads the other crew's value;
    -- sync 3, after it, sends the update again (the server still holds its base) and it is applied.
    -- The crew's copy kept the other crew's value while the server held the crew's own, untold.
    if way_name ~= "store" then
      -- The crew's update of E01, made over the other crew's unseen value, held (its request reset
      -- before the server read it); sync 2 downloads the other crew's value: the checker, the client,
      -- the crew's way.
      local function held_over_theirs()
        local c, cl, way = world.crew(server, make_way, dir)
        server:crew_update(world.E01, { OWNER = "theirs" })
        way.update(world.E01, { OWNER = "ours" })
        server:lose_requests()
        world.unsynced(c, way, 1, "a reset", { late_window = 60 }) -- never reaches the server: held
        world.synced(c, way, 2, { late_window = 60 })
        c.check(way.value(world.E01, "OWNER") == "theirs", "sync 2 did not bring the other crew's value")
        return c, cl, way
      end

      it(way_name .. ": an update sent again after a download gave the crew another value: the crew holds "
        .. "the server's value and is told it replaced the other crew's", function()
        local c, cl, way = held_over_theirs()
        world.synced(c, way, 3, { late_window = 0 }) -- sent again and applied
        world.check_once(c, server, way.origin, "update", world.E01)
        world.check_owner(c, server, world.E01, "ours")
        c.check(way.value(world.E01, "OWNER") == "ours", ("the crew holds OWNER %s, the server ours"):format(
          tostring(way.value(world.E01, "OWNER"))))
        local k = way.conflicts()[1] or {}
        c.check(#way.conflicts() == 1 and k.outcome == "local_kept" and type(k.server) == "table"
          and k.server.attributes.OWNER == "theirs", ("told of %d conflict(s) (outcome %s), not of its update "
          .. "replacing the other crew's value"):format(#way.conflicts(), tostring(k.outcome)))
        world.check_settled(c, way)
        world.finish(c, cl, way)
      end)

      -- The same, and the request sending it again is lost too (a 504), the server applying it later:
      -- the sync that reads it applied tells the crew, as above. The journal of the request sending it
      -- again had dropped what the download had given the crew (make torture, store target, replica B,
      -- gateway=drop async, seed 1304).
      it(way_name .. ": an update sent again and lost again, applied late over the value a download gave the crew: "
        .. "the crew holds the server's value and is told", function()
        local c, cl, way = held_over_theirs()
        server:gateway("504", 500)
        world.unsynced(c, way, 3, "a 504", { late_window = 0 }) -- sent again; the server applies it later
        server:gateway(nil)
        world.wait_ran(server, "the server to run the request the gateway answered")
        world.synced(c, way, 4, { late_window = 0 }) -- reads it applied
        world.check_once(c, server, way.origin, "update", world.E01)
        world.check_owner(c, server, world.E01, "ours")
        c.check(way.value(world.E01, "OWNER") == "ours", ("the crew holds OWNER %s, the server ours"):format(
          tostring(way.value(world.E01, "OWNER"))))
        local k = way.conflicts()[1] or {}
        c.check(#way.conflicts() == 1 and k.outcome == "local_kept", ("told of %d conflict(s) (outcome %s), not of "
          .. "its update replacing the other crew's value"):format(#way.conflicts(), tostring(k.outcome)))
        world.check_settled(c, way)
        world.finish(c, cl, way)
      end)
    end
  end
end)
