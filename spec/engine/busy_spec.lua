-- A replica busy with another synchronization: the server refuses the
-- request at once, before anything of it is done ("Replica ... is busy with
-- another synchronization.", code 409 in an error body: the emulator and the
-- documented double answer so while a job of the replica runs, a lost
-- kick-off's job running late, say). That refusal says nothing of the edits.
-- The engine took it for a refusal of the request's edits: it split the
-- request, its probe without edits went through (the job had ended), and the
-- one edit left was failed with the words "busy" (make torture, client:sync,
-- gateway=drop async, seed 807: a delete reported rejected, then applied).
-- What a user must see: the sync fails saying the replica is busy, nothing is
-- listed as failed, and the next sync applies the edit once. Both engines;
-- the answer is the emulator's fault (the refusal, then a free replica:
-- the timing the torture met, made certain).
local world = require "spec.support.engine_world"

for _, w in ipairs(world.WAYS) do
  local way_name, make_way = w[1], w[2]
  describe(("engine, %s: a replica busy with another synchronization"):format(way_name), function()
    local begin = world.each_crew(function() return world.emulator() end, make_way)

    for _, async in ipairs{ false, true } do
      it(("%s: its refusal is not the edit's, the next sync applies it once"):format(async and "async" or "sync"),
        function()
        local server, way = begin()
        way.update(world.E01, { OWNER = "crew A" })
        assert(server.emu:control("faults", { route = "synchronizeReplica", kind = "error", code = 409,
          message = ("Replica %s is busy with another synchronization."):format(way.origin), attempts = { 1 } }))
        local opts = { params = { async = async or nil } }
        local r1, e1 = way.sync(opts)
        assert.is_nil(r1, "the sync succeeded through the refusal")
        assert.matches("busy", world.message_of(e1))
        assert.are.same({}, way.failed())
        if way.pending() == 0 then way.update(world.E01, { OWNER = "crew A" }) end -- handed over again
        local r2, e2 = way.sync(opts)
        assert(r2, "the next sync failed: " .. world.message_of(e2))
        local _, applied = world.tally(server, way.origin)
        assert.are.equal(1, applied["update|" .. world.E01] or 0, "the update was not applied once")
        assert.are.same({}, way.failed())
        assert.are.equal(0, way.pending())
      end)
    end
  end)
end
