-- Issue 34, F2: late application is expected, not a copy. A gateway in
-- front of the server answers 504 (or drops the connection) while the
-- server goes on and applies the request 2 s later; an async kick-off's
-- answer is lost the same way and its job runs later. Each case drives
-- both engines (the store, st:sync; client:sync with a state file) against
-- the emulator (setting gateway) and the documented double (the same).
--
-- The crew adds a feature, updates E01 and deletes E02; sync 1 meets the
-- gateway; sync 2 follows at once (the server has not applied sync 1 yet),
-- or only once the server applied it ("after"); syncs 3 and 4 follow, and the other crew's
-- change of E03 (made after the late application) must download. What a
-- user must see: no sync refused as "another copy of this store", each
-- edit applied exactly once (never re-applied, never sent blindly), no
-- false rejection, nothing left queued. For the store, --adopt-copy after
-- the late application never re-sends an edit of unknown outcome.
local helper = require "spec.helper"
local world = require "spec.support.engine_world"

local E01, E02, E03 = world.E01, world.E02, world.E03
local DELAY_MS = 2000

local SERVERS = {
  { "the emulator", function() return world.emulator() end },
  { "the documented double", function() return world.documented{ job_seconds = 0.3 } end },
}

local function wait_applied(server)
  helper.wait_for("the server to apply the request the gateway answered (and its job to end)", function()
    return server:held() == 0
  end, 15)
end

-- The day; `opts` of every sync, `mode` of the gateway, `after`: sync 2 once the server applied
-- sync 1 (else at once), `adopt` (store): sync 2 with adopt_copy (as the copy refusal advised).
local function day(server, way, opts, mode, after, adopt)
  local c = world.checker()
  local added = way.add{ APN = "LATE-NEW", OWNER = "crew A" }
  way.update(E01, { OWNER = "crew A" })
  way.delete(E02)
  server:gateway(mode, DELAY_MS)
  local r1, e1 = way.sync(opts)
  c.check(not r1, "sync 1 reported success through the gateway's " .. mode)
  -- what is unknown, named as it is: the three edits, no uploaded edits file
  local said = world.message_of(e1)
  c.check(said:find("the outcome of the 3 edit(s) it carried is unknown", 1, true) and not said:find("uploaded edits",
    1, true), "sync 1's error does not say the outcome of its 3 edits is unknown: " .. said)
  server:gateway(nil)
  local errs = {}
  local function sync(n, o)
    local r, e = way.sync(o)
    if not r then errs[#errs + 1] = ("sync %d: %s"):format(n, world.message_of(e)) end
    return r, e
  end
  if after then wait_applied(server) end
  local o2 = opts
  if adopt then
    o2 = { adopt_copy = true }
    for k, v in pairs(opts) do o2[k] = v end
  end
  sync(2, o2) -- at once, the server not having applied sync 1 yet (it waits DELAY_MS), or after
  wait_applied(server)
  sync(3, opts)
  server:crew_update(E03, { OWNER = "crew B" })
  local r4 = sync(4, opts)
  c.check(r4, "the last sync failed")
  for _, e in ipairs(errs) do
    c.check(not e:find("another copy", 1, true), "refused as a copy after a late application: " .. e)
  end
  c.check(#errs == 0, "a sync after sync 1 failed: " .. table.concat(errs, " | "))
  c.check(way.pending() == 0, ("%d edit(s) still queued"):format(way.pending()))
  local attempts, applied = world.tally(server, way.origin)
  local function n(t, k) return t[k] or 0 end
  local add, upd, del = "add|" .. world.norm(added), "update|" .. E01, "delete|" .. E02
  c.check(n(applied, add) == 1, ("the add applied %d times"):format(n(applied, add)))
  c.check(n(applied, upd) == 1, ("the update of E01 applied %d times (re-applied)"):format(n(applied, upd)))
  c.check(n(applied, del) == 1, ("the delete applied %d times"):format(n(applied, del)))
  c.check(n(attempts, add) <= 2, ("the add sent %d times"):format(n(attempts, add)))
  c.check(n(attempts, del) <= 2, ("the delete sent %d times"):format(n(attempts, del)))
  local failed = way.failed()
  for _, f in ipairs(failed) do
    c.check(false, ("false rejection: failed() lists %s %s, which the server applied"):format(f.op, f.globalId))
  end
  for _, f in ipairs(way.conflicts()) do
    c.check(false, ("conflicts() lists %s %s: no one else edited it"):format(f.op, f.globalId))
  end
  c.check(server:feature(added) ~= nil, "the add is not on the server")
  c.check(server:feature(E02) == nil, "E02 is still on the server")
  local on_server = server:feature(E01)
  c.check(on_server and on_server.OWNER == "crew A", "the update of E01 is not on the server")
  c.check(way.value(E03, "OWNER") == "crew B",
    "the other crew's later change of E03 was not downloaded: OWNER " .. tostring(way.value(E03, "OWNER")))
  c.check(way.exists(added), "the add is not in the crew's copy")
  c.check(not way.exists(E02), "E02 is still in the crew's copy")
  c.done()
end

for _, s in ipairs(SERVERS) do
  local server_name, start = s[1], s[2]
  for _, w in ipairs(world.WAYS) do
    local way_name, make_way = w[1], w[2]
    describe(("engine, %s, %s: F2"):format(way_name, server_name), function()
      local begin = world.each_crew(start, make_way)

      for _, case in ipairs{
        { "a gateway's 504, the request applied 2 s later, sync 2 at once", {}, "504", false },
        { "a gateway's 504, sync 2 after the late application", {}, "504", true },
        { "a dropped answer, the request applied 2 s later, sync 2 at once", {}, "drop", false },
        { "an async kick-off answered 504, its job run later, sync 2 at once", { params = { async = true } },
          "504", false },
        { "an async kick-off answered 504, sync 2 after its job ran", { params = { async = true } }, "504", true },
      } do
        it(case[1] .. ": exactly once, never taken for a copy, no false rejection", function()
          local server, way = begin()
          day(server, way, case[2], case[3], case[4])
        end)
      end

      if way_name == "store" then
        it("--adopt-copy after the late application re-sends nothing of unknown outcome", function()
          local server, way = begin()
          day(server, way, {}, "504", true, true)
        end)
      end
    end)
  end
end
