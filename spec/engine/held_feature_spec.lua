-- Issue 34, F2: an edit of a feature whose add is held. The crew adds a
-- feature; a gateway answers 504 while the server applies that sync 3 s
-- later; the crew then updates the feature and syncs at once, before the
-- server applied the add (the add is held, not sent again: the late
-- window). The update must wait for its add: sent alone, the server
-- refuses it ("Object is missing.", a false rejection) and the crew's
-- value never arrives. Once the server applied the add, the next sync
-- sends the update. Both engines (the store, st:sync; client:sync with a
-- state file), against the emulator: the add and the update each applied
-- once and sent once, nothing in failed(), the server holding the update.
local helper = require "spec.helper"
local world = require "spec.support.engine_world"

describe("engine, an edit of a feature whose add is held (a gateway's lost answer):", function()
  local server, dir

  world.each_test(function(s, d) server, dir = s, d end)

  for _, w in ipairs(world.WAYS) do
    local way_name, make_way = w[1], w[2]
    -- The add's request never reached the server (the connection reset before it was read), the
    -- crew deletes the feature while the add is held; the add goes again with the delete in one
    -- request over URL transport (no per-edit results): what the server's log shows is the add
    -- applied then deleted, and no edit may be reported rejected.
    it(way_name .. ": an add sent again with its feature's delete is not reported rejected", function()
      local c, cl, way = world.crew(server, make_way, dir)
      local opts = { params = { transportType = "esriTransportTypeUrl" } }
      local added = way.add{ APN = "HELD-DELETED", OWNER = "first" }
      server:lose_requests{ 1 }
      world.unsynced(c, way, 1, "a reset", opts)
      way.delete(added)
      for i = 2, 4 do world.synced(c, way, i, opts) end
      c.check(server:feature(added) == nil, "the server holds the deleted feature")
      world.check_settled(c, way)
      world.finish(c, cl, way)
    end)

    -- The same with an update of a feature the server holds: the update's request never reached
    -- the server, the crew then deletes the feature; the update goes again with the delete in one
    -- request over URL transport (no per-edit results). The server applies both; the feature absent
    -- is what the two make together: the update is neither rejected ("the server does not hold this
    -- feature") nor in conflict ("deleted on the server"), nor sent again after the delete.
    it(way_name .. ": an update sent again with its feature's delete is neither rejected nor a conflict", function()
      local c, cl, way = world.crew(server, make_way, dir)
      local opts = { params = { transportType = "esriTransportTypeUrl" } }
      way.update(world.E01, { OWNER = "held then deleted" })
      server:lose_requests{ 1 }
      world.unsynced(c, way, 1, "a reset", opts)
      way.delete(world.E01)
      for i = 2, 4 do world.synced(c, way, i, opts) end
      c.check(#way.conflicts() == 0, ("%d conflict(s) kept"):format(#way.conflicts()))
      c.check(server:feature(world.E01) == nil, "the server holds the deleted feature")
      world.check_settled(c, way)
      world.finish(c, cl, way)
    end)

    -- The add's request never reached the server, and neither did the next sync's own request (it
    -- holds the add): the add stays in the attempt, read again and sent by a later sync, applied once.
    it(way_name .. ": the held sync's own request lost, the held add is not forgotten", function()
      local c, cl, way = world.crew(server, make_way, dir)
      local added = way.add{ APN = "HELD-LOST", OWNER = "first" }
      -- sync 1's request and sync 2's (a download, which the client tries again: 3 attempts, each
      -- on a fresh connection) reset before the server reads them
      server:lose_requests{ 1, 2, 3, 4 }
      world.unsynced(c, way, 1, "a reset")
      world.unsynced(c, way, 2, "its resets")
      c.check(way.pending() == 1, "the held add is no longer queued or journaled after sync 2")
      for i = 3, 4 do world.synced(c, way, i) end
      world.check_once(c, server, way.origin, "add", added)
      c.check(way.pending() == 0, "edits still queued or journaled")
      world.finish(c, cl, way)
    end)

    -- The add's request never reached the server; the crew updates the feature while the add is
    -- held, and syncs twice within the late window, the second time with no new edit (a verifying
    -- sync, a batch run): the update still waits for its add (sent alone, the server refuses it,
    -- "Object is missing."), then both go in one request once the window is over.
    it(way_name .. ": the update waits for its add through a sync with no edit of its own", function()
      local c, cl, way = world.crew(server, make_way, dir)
      local opts = { late_window = 60 } -- syncs 2 and 3 come within it; 4 and 5 are given 0: it is over
      local added = way.add{ APN = "HELD-WAIT", OWNER = "first" }
      server:lose_requests{ 1 }
      world.unsynced(c, way, 1, "a reset", opts)
      way.update(added, { OWNER = "second" })
      for i = 2, 3 do
        world.synced(c, way, i, opts)
        local attempts = world.tally(server, way.origin)
        c.check((attempts["update|" .. world.norm(added)] or 0) == 0,
          ("sync %d sent the update before its add"):format(i))
      end
      for i = 4, 5 do world.synced(c, way, i, { late_window = 0 }) end
      local attempts, applied = world.check_once(c, server, way.origin, "add", added)
      local upd = "update|" .. world.norm(added)
      -- the store joins the update to the add it sends again (one request, the add carrying it)
      c.check((applied[upd] or 0) <= 1 and (attempts[upd] or 0) == (applied[upd] or 0),
        ("the update sent %d times, applied %d times"):format(attempts[upd] or 0, applied[upd] or 0))
      world.check_owner(c, server, added, "second")
      world.check_settled(c, way)
      world.finish(c, cl, way)
    end)

    -- An update waiting for its feature's held add, when that add is settled (the server applied it
    -- late) while another edit stays held: the waiting update goes then, not after the crew's newer
    -- update of the feature (sent at once, the feature no longer held): the older value must never
    -- reach the server after the newer one.
    it(way_name .. ": an update that waited for its add never reaches the server after a newer one", function()
      local c, cl, way = world.crew(server, make_way, dir)
      local held = { late_window = 60 }
      local x = way.add{ APN = "WAITED-X", OWNER = "first" }
      server:gateway("504", 1000) -- the server runs sync 1's request a second later
      world.unsynced(c, way, 1, "a 504", held)
      server:gateway(nil)
      way.update(x, { OWNER = "older" }) -- waits for the add
      local y = way.add{ APN = "WAITED-Y", OWNER = "other" }
      -- sync 2's own request (the add of Y) never reaches the server: Y is held too
      server:lose_requests()
      way.sync(held)
      world.wait_ran(server, "the server to run sync 1's request")
      world.synced(c, way, 3, held) -- the add of X shows applied; Y is still held
      way.update(x, { OWNER = "newer" })
      world.synced(c, way, 4, held)
      for i = 5, 6 do world.synced(c, way, i, { late_window = 0 }) end -- Y's wait is over
      world.check_owner(c, server, x, "newer", ", not the newer")
      -- nor is the older one held back as a conflict with the crew's own newer value
      c.check(#way.conflicts() == 0, ("%d conflict(s) reported"):format(#way.conflicts()))
      world.check_once(c, server, way.origin, "add", x)
      world.check_once(c, server, way.origin, "add", y)
      world.check_settled(c, way)
      world.finish(c, cl, way)
    end)

    -- An update waiting for its feature's held add, and another crew changes the feature once the
    -- add landed: the waiting update was made on the add's values, so sent now it would overwrite
    -- the other crew's newer value unseen. It is a conflict, kept and reported, never sent over it.
    -- Sync 2 must come while the server still holds sync 1's request (the gateway runs it a second
    -- later): a spec stalled past that found it run, sync 2 sent the update at once and there was no
    -- conflict to find. When the server holds nothing after sync 2, the crew begins again on the
    -- server's data with a longer delay (helper.within_window).
    it(way_name .. ": an update that waited for its add is a conflict when another crew changed it since",
      function()
        local c, cl, way, x
        helper.within_window("sync 2 while sync 1's request is held", { 1000, 4000, 16000 }, function(delay_ms)
          if way then server:reset() end
          c, cl, way = world.crew(server, make_way, helper.tmp_dir())
          x = way.add{ APN = "WAITED-THEIRS", OWNER = "first" }
          server:gateway("504", delay_ms) -- the server runs sync 1's request that much later
          world.unsynced(c, way, 1, "a 504", { late_window = 60 })
          server:gateway(nil)
          way.update(x, { OWNER = "ours" }) -- waits for the add
          world.synced(c, way, 2, { late_window = 60 })
          if server:held() > 0 then return true end
          world.finish(c, cl, way) -- what syncs 1 and 2 were checked for stands
          return false
        end)
        world.wait_ran(server, "the server to run sync 1's request")
        server:crew_update(x, { OWNER = "theirs" })
        for i = 3, 4 do world.synced(c, way, i, { late_window = 0 }) end
        world.check_owner(c, server, x, "theirs", ": the waiting update overwrote the other crew's newer value")
        c.check(world.has(way.conflicts(), "update", x), ("the update is not reported in conflict (%d conflicts)")
          :format(#way.conflicts()))
        world.check_once(c, server, way.origin, "add", x)
        world.finish(c, cl, way)
      end)

    -- A held update found in conflict (another crew changed the feature) by a sync whose own request
    -- then fails: the journal settles the conflict (never sent again), so that failed sync is the
    -- only one that can tell it. Its error must (err.conflicts), or the crew never learns of it.
    it(way_name .. ": a conflict found by a sync whose own request then fails is told by its error", function()
      local c, cl, way = world.crew(server, make_way, dir)
      way.update(world.E01, { OWNER = "ours" })
      server:lose_requests()
      world.unsynced(c, way, 1, "a reset", { late_window = 60 })
      server:crew_update(world.E01, { OWNER = "theirs" })
      world.synced(c, way, 2, { late_window = 0 }) -- holds the update once (the engine's rule)
      c.check(#way.conflicts() == 0, "sync 2 called the held update a conflict")
      local y = way.add{ APN = "AFTER-CONFLICT", OWNER = "y" }
      -- sync 3 reads the held update (a conflict now: the hold is over), then its own request fails
      assert(server.emu:control("faults", { route = "synchronizeReplica", kind = "error", attempts = {
        server:sync_requests() + 1 } }))
      world.unsynced(c, way, 3, "an error answer", { late_window = 0 })
      if not way.st then
        -- (the store keeps the held update in its attempt when the sync fails: read again next)
        c.check(world.has(way.conflicts(), "update", world.E01), ("the conflict is not told by the failed sync "
          .. "(%d conflicts)"):format(#way.conflicts()))
      end
      world.check_owner(c, server, world.E01, "theirs")
      world.synced(c, way, 4, { late_window = 0 })
      c.check(world.has(way.conflicts(), "update", world.E01), "the conflict is not told")
      world.check_owner(c, server, world.E01, "theirs")
      if way.st then -- (client:sync's caller hands a refused request's edits again itself)
        c.check(server:feature(y) ~= nil, "the add of y did not reach the server")
      end
      world.finish(c, cl, way)
    end)

    -- Two updates of the feature, each made and synced while its add is held: both wait, and what
    -- reaches the server is the later one's values (joined to the earlier's other fields), never
    -- the earlier's over them.
    it(way_name .. ": two updates made while its add is held: the later values reach the server", function()
      local c, cl, way = world.crew(server, make_way, dir)
      local held = { late_window = 60 }
      local added = way.add{ APN = "HELD-TWICE", OWNER = "first" }
      server:lose_requests{ 1 }
      world.unsynced(c, way, 1, "a reset", held)
      way.update(added, { OWNER = "second", APN = "HELD-TWICE-2" })
      world.synced(c, way, 2, held)
      way.update(added, { OWNER = "third" })
      world.synced(c, way, 3, held)
      for i = 4, 5 do world.synced(c, way, i, { late_window = 0 }) end
      world.check_owner(c, server, added, "third", ", not the later third")
      local f = server:feature(added)
      c.check(f and f.APN == "HELD-TWICE-2", "the server holds APN " .. tostring(f and f.APN)
        .. ": the earlier update's other field was dropped")
      local attempts, applied = world.tally(server, way.origin)
      local add = "add|" .. world.norm(added)
      c.check((applied[add] or 0) == 1 and (attempts[add] or 0) == 1, ("the add sent %d, applied %d times"):format(
        attempts[add] or 0, applied[add] or 0))
      world.check_settled(c, way)
      world.finish(c, cl, way)
    end)

    -- Sync 1 carries an add and an update of E01 and its answer is lost (a gateway's 504, the server
    -- running the request later). The crew then updates another feature (E03), and the added one
    -- again, and syncs within the late window: the E03 update must reach the server at once (it
    -- does not wait for the held edits of other features), the held edits are not sent again, the
    -- update of the added feature waits for its add, and sync 2 still says what it holds. After the
    -- window everything settles, each edit applied once, nothing left queued. Sync 2 must come
    -- while the server still holds sync 1's request (helper.within_window).
    it(way_name .. ": another feature's edit goes while a lost answer's edits are held", function()
      local c, cl, way, added, r2
      local held = { late_window = 60 }
      helper.within_window("sync 2 while sync 1's request is held", { 2000, 8000, 24000 }, function(delay_ms)
        if way then server:reset() end
        c, cl, way = world.crew(server, make_way, way and helper.tmp_dir() or dir)
        added = way.add{ APN = "HELD-OTHERS", OWNER = "first" }
        way.update(world.E01, { OWNER = "held" })
        server:gateway("504", delay_ms) -- the server runs sync 1's request that much later
        world.unsynced(c, way, 1, "a 504", held)
        server:gateway(nil)
        way.update(world.E03, { OWNER = "not held" })
        way.update(added, { OWNER = "second" }) -- waits for its add
        r2 = world.synced(c, way, 2, held)
        local attempts = world.tally(server, way.origin)
        if server:held() == 0 then -- counted after the late request landed
          world.finish(c, cl, way)
          return false
        end
        c.check((attempts["add|" .. world.norm(added)] or 0) == 0 and (attempts["update|" .. world.E01] or 0) == 0,
          "sync 2 sent the held edits again within the window")
        c.check((attempts["update|" .. world.norm(added)] or 0) == 0, "sync 2 sent the update before its add")
        return true
      end)
      world.check_owner(c, server, world.E03, "not held", ": sync 2 did not send the other feature's update")
      local found = r2 and r2.resolved or {}
      c.check((found.held or 0) == 2, ("sync 2 says %s edit(s) held, 2 expected"):format(tostring(found.held)))
      if way.st then
        local notes = table.concat(r2 and r2.store_notes or {}, "\n")
        c.check(notes:match("held: 2 edit%(s%) of a synchronization whose answer was lost"),
          "sync 2's notes do not say what is held: " .. notes)
      end
      world.wait_ran(server, "the server to run sync 1's request")
      for i = 3, 4 do world.synced(c, way, i, { late_window = 0 }) end
      world.check_once(c, server, way.origin, "add", added)
      world.check_once(c, server, way.origin, "update", world.E01)
      world.check_once(c, server, way.origin, "update", world.E03)
      world.check_once(c, server, way.origin, "update", added)
      world.check_owner(c, server, world.E01, "held")
      world.check_owner(c, server, added, "second")
      c.check(#way.conflicts() == 0, ("%d conflict(s) reported"):format(#way.conflicts()))
      world.check_settled(c, way)
      world.finish(c, cl, way)
    end)

    it(way_name .. ": the update waits for its add, then goes once", function()
      local c, cl, way = world.crew(server, make_way, dir)
      local opts = { late_window = 60 }
      local added = way.add{ APN = "HELD-ADD", OWNER = "first" }
      server:gateway("504", 3000)
      world.unsynced(c, way, 1, "a 504", opts)
      server:gateway(nil)
      way.update(added, { OWNER = "second" })
      world.synced(c, way, 2, opts) -- the add is held: the server has not applied it yet
      local attempts = world.tally(server, way.origin)
      c.check((attempts["update|" .. world.norm(added)] or 0) == 0,
        "the update left before its add reached the server")
      world.wait_ran(server, "the server to apply the request the gateway answered")
      world.synced(c, way, 3, { late_window = 0 })
      world.synced(c, way, 4, { late_window = 0 })
      for _, op in ipairs{ "add", "update" } do
        world.check_once(c, server, way.origin, op, added)
      end
      world.check_owner(c, server, added, "second")
      world.check_settled(c, way)
      world.finish(c, cl, way)
    end)
  end

  -- client:sync's caller hands over an update of a feature whose earlier update is held, after
  -- another crew changed the feature (the server held theirs when the caller made it): had it
  -- gone at once it would have replaced theirs, as any update client:sync is handed does. It
  -- goes once the hold is over, no conflict (the held one, sent before theirs, is the conflict).
  it("state file: an update handed over after another crew's change, while its feature is held, goes",
    function()
      local c, cl, way = world.crew(server, world.state_way, dir)
      way.update(world.E01, { OWNER = "ours 1" })
      server:lose_requests()
      world.unsynced(c, way, 1, "a reset", { late_window = 60 })
      server:crew_update(world.E01, { OWNER = "theirs" })
      world.synced(c, way, 2, { late_window = 60 }) -- holds "ours 1"
      way.update(world.E01, { OWNER = "ours 2" })
      world.synced(c, way, 3, { late_window = 60 }) -- "ours 2" waits
      for i = 4, 5 do world.synced(c, way, i, { late_window = 0 }) end
      world.check_owner(c, server, world.E01, "ours 2")
      c.check(#way.conflicts() == 1, ("%d conflict(s) reported, 1 expected (ours 1 over theirs)"):format(
        #way.conflicts()))
      c.check(way.pending() == 0, "edits still queued or journaled")
      world.finish(c, cl, way)
    end)

  -- The base of a held update stays journaled (with the held edits) after that update settled
  -- while another stays held; the crew's next update of the feature then went with its own base,
  -- and when its answer was lost too, the old base was read over its own: the server holding the
  -- crew's earlier value looked like someone else's change (a false conflict, the update never sent).
  it("state file: a settled held update's base is not taken for a later update's of its feature", function()
    local c, cl, way = world.crew(server, world.state_way, dir)
    local held = { late_window = 60 }
    way.update(world.E01, { OWNER = "u1" })
    server:gateway("504", 1500) -- sync 1's request runs 1.5 s later
    world.unsynced(c, way, 1, "a 504", held)
    server:gateway(nil)
    way.update(world.E02, { OWNER = "w1" })
    server:lose_requests()
    world.unsynced(c, way, 2, "a reset", held) -- holds u1; w1 never reaches the server
    world.wait_ran(server, "the server to run sync 1's request")
    world.synced(c, way, 3, held) -- u1 shows applied; w1 stays held
    way.update(world.E01, { OWNER = "u2" })
    server:lose_requests()
    world.unsynced(c, way, 4, "a reset", held) -- u2's request never reaches the server
    for i = 5, 6 do world.synced(c, way, i, { late_window = 0 }) end
    world.check_owner(c, server, world.E01, "u2", ", not u2")
    c.check(#way.conflicts() == 0, ("%d conflict(s) reported"):format(#way.conflicts()))
    c.check(way.pending() == 0, "edits still queued or journaled")
    world.finish(c, cl, way)
  end)

  -- An update waits for its feature's held update, made on what the server held then ("theirs 1");
  -- the other crew changes the feature again, the crew downloads that ("theirs 2") and updates the
  -- same fields again: the waiting update now carries only values made on "theirs 2". It went with
  -- the first wait's base all the same: the server holding "theirs 2" looked like a change made
  -- since, a false conflict, the crew's last update never sent (make torture, client:sync,
  -- gateway=504 sync url, seed 602).
  it("state file: a waiting update the crew made again over a newer download goes on that download", function()
    local c, cl, way = world.crew(server, world.state_way, dir)
    local held = { late_window = 60 }
    way.update(world.E01, { OWNER = "ours 1" })
    server:lose_requests()
    world.unsynced(c, way, 1, "a reset", held) -- "ours 1" never reaches the server: held
    server:crew_update(world.E01, { OWNER = "theirs 1" })
    way.update(world.E01, { OWNER = "ours 2" })
    world.synced(c, way, 2, held) -- "ours 2" waits, made on "theirs 1"
    server:crew_update(world.E01, { OWNER = "theirs 2" })
    world.synced(c, way, 3, held) -- downloads "theirs 2"
    c.check(way.value(world.E01, "OWNER") == "theirs 2", "sync 3 did not download theirs 2: "
      .. tostring(way.value(world.E01, "OWNER")))
    way.update(world.E01, { OWNER = "ours 3" })
    world.synced(c, way, 4, held) -- "ours 3" joins the waiting update, made on "theirs 2"
    for i = 5, 6 do world.synced(c, way, i, { late_window = 0 }) end
    world.check_owner(c, server, world.E01, "ours 3")
    local listed = {}
    for _, k in ipairs(way.conflicts()) do listed[#listed + 1] = tostring(k.sent and k.sent.attributes
      and k.sent.attributes.OWNER or k.op) end
    c.check(#listed <= 1, ("%d conflict(s) reported (%s): at most ours 1 over theirs"):format(#listed,
      table.concat(listed, ", ")))
    c.check(way.pending() == 0, "edits still queued or journaled")
    world.finish(c, cl, way)
  end)

  -- The crew's update of E01 is held (a 504; the server applies it later); the crew updates E01
  -- again and hands that to the sync whose read finds the first one applied. The journal took the
  -- new update for the one it had just settled (the same feature, the same operation) and dropped
  -- it: never sent, never journaled, nothing said (make torture, store target, replica B,
  -- gateway=504 async, seed 1305: B's last update lost).
  it("state file: a new update of a feature whose held update the same sync finds applied is sent", function()
    local c, cl, way = world.crew(server, world.state_way, dir)
    way.update(world.E01, { OWNER = "ours 1" })
    server:gateway("504", 500)
    world.unsynced(c, way, 1, "a 504", { late_window = 60 })
    server:gateway(nil)
    world.wait_ran(server, "the server to run sync 1's request")
    way.update(world.E01, { OWNER = "ours 2" })
    world.synced(c, way, 2, { late_window = 60 }) -- reads "ours 1" applied
    world.synced(c, way, 3, { late_window = 0 })
    world.check_owner(c, server, world.E01, "ours 2", ", not ours 2: the crew's last update was dropped")
    c.check(#way.conflicts() == 0, ("%d conflict(s) reported"):format(#way.conflicts()))
    c.check(way.pending() == 0, "edits still queued or journaled")
    world.finish(c, cl, way)
  end)
end)
