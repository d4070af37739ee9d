-- Issue 34, F3 by halves: a perReplica-only service without
-- supportsRollbackOnFailure (rollback forced) whose refusal of a request
-- names no edit (the emulator's rollback_names_edits false: only the
-- documented "Operation rolled back.", code 1003). One edit among sixteen
-- is one the server refuses. client:sync with a state file sends an add
-- whose APN is longer than the field's 20 characters (field_lengths: "Setting
-- of value for APN failed.", code 1016); the store refuses such a value itself
-- before sending, so its bad edit is an update of E03, which another crew
-- deletes right before the store's request runs (after what the store read
-- first: a race). What a user must see, in the same sync, for both engines:
-- the fifteen good adds uploaded, each applied once; the bad one reported
-- failed with the server's words (the store: failed, or in conflict with
-- the delete it downloads while it halves);
-- the sync itself a success; and the requests bounded by the halving: the
-- whole request, one without edits, then two per level of halving
-- (2 + 2 * log2(16) = 10), not one per edit. A second sync sends nothing again.
local world = require "spec.support.engine_world"

local GOOD, BAD_AT = 15, 11
local LONG_APN = "APN-LONGER-THAN-20-CHARS" -- 24 characters, the field holds 20

describe("engine, F3 by halves (rollback forced, the refusal names no edit), the emulator:", function()
  local server, dir

  world.each_test(function(s, d) server, dir = s, d end, { supports_rollback_on_failure = false,
    supports_per_layer_sync = false, rollback_names_edits = false, field_lengths = true })

  for _, w in ipairs(world.WAYS) do
    local way_name, make_way = w[1], w[2]
    it(way_name .. ": the good edits upload, the refused one is reported with the server's words, "
      .. "in log2 requests", function()
      local c, cl, way = world.crew(server, make_way, dir)
      local good, bad = {}, nil
      local store = way.name == "store"
      for i = 1, GOOD + 1 do
        if i == BAD_AT and store then
          way.update(world.E03, { OWNER = "crew A" })
          bad = world.E03
          server:crew_delete_before_next_sync(world.E03)
        elseif i == BAD_AT then
          bad = way.add{ APN = LONG_APN, OWNER = "crew A" }
        else
          good[#good + 1] = way.add{ APN = ("HALF-%02d"):format(i), OWNER = "crew A" }
        end
      end
      local before = server:sync_requests()
      world.synced(c, way, 1)
      local requests = server:sync_requests() - before
      c.check(requests <= 2 + 2 * 4, ("sync 1 made %d synchronizeReplica requests for 16 edits (at most 10 by "
        .. "halves)"):format(requests))
      c.check(requests >= 3, ("sync 1 made %d requests: the halving was not exercised"):format(requests))
      local _, applied = world.tally(server, way.origin)
      for _, gid in ipairs(good) do
        local key = "add|" .. world.norm(gid)
        c.check((applied[key] or 0) == 1, ("the good add %s applied %d times"):format(gid, applied[key] or 0))
      end
      local op = store and "update" or "add"
      c.check(not applied[op .. "|" .. world.norm(bad)], "the refused edit is applied on the server")
      local failed, conflicts = way.failed(), way.conflicts()
      local listed = #failed == 1 and world.has(failed, op, bad)
        or store and #failed == 0 and #conflicts == 1 and world.has(conflicts, op, bad)
      c.check(listed, ("failed() lists %d edits, conflicts() %d: not the refused %s alone"):format(#failed,
        #conflicts, op))
      local words = tostring((failed[1] or conflicts[1] or {}).message)
      c.check(store or words:find("rolled back", 1, true) or words:find("APN", 1, true),
        "the refused add is not reported with the server's words: " .. words)
      c.check(way.pending() == 0, ("%d edit(s) still queued after sync 1"):format(way.pending()))
      local sent = server:sync_requests()
      world.synced(c, way, 2)
      c.check(server:sync_requests() - sent == 1, "sync 2 made more than one request")
      local attempts = world.tally(server, way.origin)
      for _, gid in ipairs(good) do
        local key = "add|" .. world.norm(gid)
        c.check((attempts[key] or 0) == 1, ("the good add %s sent %d times"):format(gid, attempts[key] or 0))
      end
      world.finish(c, cl, way)
    end)
  end
end)
