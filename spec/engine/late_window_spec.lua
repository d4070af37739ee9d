-- Issue 34, F2, a server slower than the syncs that follow: a gateway
-- answers 504 (or drops the answer) while the server applies the request,
-- or submits the async job, 3 s later. Three syncs come before that: the
-- first one after the lost answer holds its edits (always), and with the
-- `late_window` option the next ones hold them too until the window after
-- the lost answer has passed, so that nothing is sent again while the
-- server may still apply it; once the server applied it, a sync reads it
-- back. What a user must see, for both engines (the store, st:sync;
-- client:sync with a state file), sync and async: each edit applied once
-- and sent once (the server's change log), nothing left queued, no sync
-- refused as another copy.
local helper = require "spec.helper"
local world = require "spec.support.engine_world"

local E01 = world.E01
local DELAY_MS = 3000

describe("engine, the late window (a gateway's lost answer, the server 3 s behind):", function()
  local server, dir

  world.each_test(function(s, d) server, dir = s, d end)

  for _, w in ipairs(world.WAYS) do
    local way_name, make_way = w[1], w[2]
    for _, mode in ipairs{ { "504", false }, { "drop", true } } do
      local gateway, async = mode[1], mode[2]
      it(("%s, gateway %s%s: nothing sent again within the window, each edit applied once"):format(way_name,
        gateway, async and ", async" or ""), function()
        -- syncs 2 and 3, and the count of what reached the server, come before the server applies
        -- sync 1 (DELAY_MS later): when it holds nothing once they are counted, a spec stalled past
        -- the delay counted the late request itself, and the crew begins again on the server's data
        -- with a longer delay (helper.within_window)
        local c, cl, way, added
        local opts = { late_window = 60, params = { async = async or nil } }
        helper.within_window("syncs 2 and 3 while sync 1's request is held", { DELAY_MS, 4 * DELAY_MS,
                             16 * DELAY_MS }, function(delay_ms)
          if way then server:reset() end
          c = world.checker()
          cl = world.client(server, true)
          way = make_way(server, cl, way and helper.tmp_dir() or dir, "perReplica")
          added = way.add{ APN = "WINDOW-NEW", OWNER = "crew A" }
          way.update(E01, { OWNER = "crew A" })
          server:gateway(gateway, delay_ms)
          local r1 = way.sync(opts)
          c.check(not r1, "sync 1 succeeded through a lost answer")
          server:gateway(nil)
          for i = 2, 3 do -- before the server applied sync 1
            local r, e = way.sync(opts)
            c.check(r, ("sync %d failed: %s"):format(i, world.message_of(e)))
          end
          local attempts = world.tally(server, way.origin)
          if server:held() == 0 then -- counted after the late request landed
            c.done()
            way.close()
            cl:close()
            return false
          end
          c.check((attempts["add|" .. world.norm(added)] or 0) == 0 and (attempts["update|" .. E01] or 0) == 0,
            "an edit reached the server before the late request did: it was sent again within the window")
          return true
        end)
        helper.wait_for("the server to apply the request the gateway answered (and its job to end)", function()
          return server:held() == 0
        end, 30)
        local r4, e4 = way.sync(opts)
        c.check(r4, "sync 4 failed: " .. world.message_of(e4))
        c.check(way.pending() == 0, ("%d edit(s) still queued or journaled after sync 4"):format(way.pending()))
        world.check_once(c, server, way.origin, "add", added)
        world.check_once(c, server, way.origin, "update", E01)
        c.check(#way.failed() == 0, "failed() lists an edit the server applied")
        way.close()
        cl:close()
        c.done()
      end)
    end

    -- By default the window is the vendor's server's own limits (660 s): a server that never shows the
    -- edits (the gateway dropped the request, the server keeps it 10 minutes) gets nothing again from
    -- the syncs that follow within the test; the store says what it holds and until when.
    it(way_name .. ", by default: a lost answer's edits stay held through the syncs that follow", function()
      local c = world.checker()
      local cl = world.client(server, true)
      local way = make_way(server, cl, dir, "perReplica")
      local added = way.add{ APN = "WINDOW-DEFAULT", OWNER = "crew A" }
      server:gateway("drop", 600000)
      c.check(not way.sync{ late_window = "default" }, "sync 1 succeeded through a dropped answer")
      server:gateway(nil)
      local last
      for i = 2, 4 do
        local r, e = way.sync{ late_window = "default" }
        c.check(r, ("sync %d failed: %s"):format(i, world.message_of(e)))
        last = r or last
      end
      local attempts = world.tally(server, way.origin)
      c.check((attempts["add|" .. world.norm(added)] or 0) == 0,
        "the add was sent again while the server may still apply the lost request")
      c.check(way.pending() == 1, "the add is no longer queued or journaled")
      if way.st then
        local notes = table.concat(last and last.store_notes or {}, "\n")
        c.check(notes:match("held: 1 edit%(s%) of a synchronization whose answer was lost: the server may still "
          .. "apply them until %d%d%d%d%-%d%d%-%d%d %d%d:%d%d:%d%d UTC"), "sync 4's notes do not say what is held "
          .. "and until when: " .. notes)
        c.check(notes:find("--late-window", 1, true), "sync 4's notes do not name --late-window: " .. notes)
      end
      way.close()
      cl:close()
      c.done()
    end)
  end

  -- A download (no edits) whose answer the gateway lost runs on the server 2 s later and moves the
  -- replica's generation there after the store's next sync learnt it: the store's own late request,
  -- not another copy's. Within the window the copy check lets it be; after it, the store learns the
  -- server's generation, and a real copy is refused again.
  it("store: its own download landing late is not taken for another copy", function()
    local c = world.checker()
    local cl = world.client(server, true)
    local way = world.store_way(server, cl, dir, "perReplica")
    local opts = { late_window = 60 }
    server:gateway("504", 2000)
    c.check(not way.sync(opts), "sync 1 succeeded through a 504")
    server:gateway(nil)
    local r2, e2 = way.sync(opts)
    c.check(r2, "sync 2 failed: " .. world.message_of(e2))
    helper.wait_for("the server to run the request the gateway answered", function()
      return server:held() == 0
    end, 30)
    local r3, e3 = way.sync(opts)
    c.check(r3, "sync 3 (the late download landed) failed: " .. world.message_of(e3))
    local r4, e4 = way.sync{ late_window = 0 } -- the window over: the store learns the server's generation
    c.check(r4, "sync 4 failed: " .. world.message_of(e4))
    local r5, e5 = way.sync{ late_window = 0 }
    c.check(r5, "sync 5 failed: " .. world.message_of(e5))
    way.close()
    cl:close()
    c.done()
  end)
end)
