-- Issue 34, F1 and F3: outcomes come from what the server promises. Each
-- case drives both engines (the store, st:sync; client:sync with a state
-- file) against the emulator in the capability set named, and against the
-- documented-server double (spec/support/documented_server.py) in the same
-- set. The crew updates E03 and adds a feature; another crew deletes E03
-- right before the crew's sync reaches the server (after anything the sync
-- read first: a race), so the server refuses the update (1019), a real
-- rejection. (A delete made earlier may be seen before sending and the
-- update held back as a conflict: the "earlier" cases, where failed() or
-- conflicts() may list it.)
--
-- F1, the WildfireSync set (supportsRollbackOnFailure false, perLayer
-- only: the server skips a failed edit whatever rollbackOnFailure says),
-- --async: the job ends Completed; the refused update must be in failed()
-- (or in conflicts(), where a sync holds it back before sending: the other
-- crew's delete came first) with the add applied once, not taken as
-- applied "because all or nothing". Without --async the same day is a
-- control.
--
-- F3, perReplica only without supportsRollbackOnFailure (rollback forced:
-- the server refuses the whole request for one failed edit): the refused
-- update must be found and reported, while the good add uploads and the
-- other crew's change downloads in the same sync; a second sync is clean.
local world = require "spec.support.engine_world"

local E01, E03 = world.E01, world.E03

local SETS = {
  F1 = { model = "perLayer", emulator = { supports_rollback_on_failure = false, supports_per_replica_sync = false },
         documented = { sync_capabilities = { supportsRollbackOnFailure = false, supportsPerReplicaSync = false,
                                              supportsPerLayerSync = true } } },
  F3 = { model = "perReplica", emulator = { supports_rollback_on_failure = false, supports_per_layer_sync = false },
         documented = { sync_capabilities = { supportsRollbackOnFailure = false, supportsPerReplicaSync = true,
                                              supportsPerLayerSync = false } } },
}

local SERVERS = {
  { "the emulator", function(set) return world.emulator(set.emulator) end },
  { "the documented double", function(set) return world.documented(set.documented) end },
}

-- One crew's day in capability set `set`: E03 deleted by the other crew (and, for `download`, E01
-- updated by it); the crew updates E03 and adds a feature; two syncs with `opts`.
local function day(server, way, opts, download, earlier)
  local c = world.checker()
  if earlier then server:crew_delete(E03) end
  if download then server:crew_update(E01, { OWNER = "crew B" }) end
  way.update(E03, { OWNER = "crew A" })
  local added = way.add{ APN = "ENGINE-NEW", OWNER = "crew A" }
  if not earlier then server:crew_delete_before_next_sync(E03) end
  local r1, e1 = way.sync(opts)
  c.check(r1, "sync 1 failed: " .. world.message_of(e1))
  if r1 and way.name == "store" then
    c.check(r1.uploaded == 1, ("sync 1: uploaded %s, not 1 (the add)"):format(tostring(r1.uploaded)))
  end
  c.check(way.pending() == 0, ("%d edit(s) still queued after sync 1"):format(way.pending()))
  local failed, conflicts = way.failed(), way.conflicts()
  if earlier then
    -- refused by the server (failed()), or held back as a conflict with the other crew's delete before
    -- it was sent (conflicts(): a sync that reads the server first): reported either way, never vanished
    c.check(world.has(failed, "update", E03) or world.has(conflicts, "update", E03),
      "the update of E03, which the server refuses, is neither in failed() nor in conflicts(): the edit vanished")
  else
    c.check(world.has(failed, "update", E03),
      "the update of E03, which the server refused, is not in failed(): the edit vanished")
  end
  for _, f in ipairs(failed) do
    c.check(f.op == "update" and f.globalId == E03, ("failed() lists %s %s"):format(f.op, tostring(f.globalId)))
  end
  local attempts, applied = world.tally(server, way.origin)
  local key = "add|" .. world.norm(added)
  c.check((applied[key] or 0) == 1, ("the add applied %d times on the server"):format(applied[key] or 0))
  c.check((attempts[key] or 0) <= 1, ("the add sent %d times"):format(attempts[key] or 0))
  c.check(not applied["update|" .. E03], "the update of E03 applied")
  c.check(server:feature(added) ~= nil, "the add is not on the server")
  if download then
    c.check(way.value(E01, "OWNER") == "crew B",
      "the other crew's change of E01 was not downloaded by sync 1: OWNER " .. tostring(way.value(E01, "OWNER")))
  end
  local r2, e2 = way.sync(opts)
  c.check(r2, "sync 2 failed: " .. world.message_of(e2))
  attempts = world.tally(server, way.origin)
  c.check((attempts[key] or 0) <= 1, ("after sync 2: the add sent %d times"):format(attempts[key] or 0))
  c.check((attempts["update|" .. E03] or 0) <= 1,
    ("the refused update was sent %d times"):format(attempts["update|" .. E03] or 0))
  c.done()
end

for _, s in ipairs(SERVERS) do
  local server_name, start = s[1], s[2]
  for _, w in ipairs(world.WAYS) do
    local way_name, make_way = w[1], w[2]
    describe(("engine, %s, %s:"):format(way_name, server_name), function()
      local begin = world.each_crew(start, make_way)

      it("F1 WildfireSync set, --async: the refused update is in failed(), the add applied once", function()
        local server, way = begin(SETS.F1)
        day(server, way, { params = { async = true } })
      end)

      it("F1 WildfireSync set, --async, the delete made before the crew's edits: reported", function()
        local server, way = begin(SETS.F1)
        day(server, way, { params = { async = true } }, false, true)
      end)

      it("F1 WildfireSync set, without --async (control): the refused update is in failed()", function()
        local server, way = begin(SETS.F1)
        day(server, way, {})
      end)

      it("F3 perReplica only, rollback forced: the refused edit reported, the rest uploads and downloads",
        function()
          local server, way = begin(SETS.F3)
          day(server, way, {}, true)
        end)

      it("F3 perReplica only, rollback forced, --async: the same", function()
        local server, way = begin(SETS.F3)
        day(server, way, { params = { async = true } }, true)
      end)

      it("F3 perReplica only, rollback forced, the delete made before the crew's edits: the same", function()
        local server, way = begin(SETS.F3)
        day(server, way, {}, true, true)
      end)
    end)
  end
end
