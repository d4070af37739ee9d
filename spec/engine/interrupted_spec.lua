-- Issue 34, F2: a process that dies waiting for its answer. The crew adds
-- a feature; the request leaves, a gateway holds it (the server runs it
-- 2 s later) and the process dies before it could note the answer lost
-- (a laptop shut, a kill: the journal says only that the request was
-- begun). The crew's next sync comes at once, while the server is still
-- running that request: it must not send the add again (the server would
-- then hold it twice, or refuse the second as a duplicate); the late
-- window runs from when the request left. Both engines (the store,
-- st:sync; client:sync with a state file), against the emulator.
local helper = require "spec.helper"
local world = require "spec.support.engine_world"

-- The process "dies" right after its request was answered with a 504: the journal wrapper raises
-- before the engine reads the outcome back or notes when the answer was lost.
local function dying(j)
  return setmetatable({ settle_read = function() error("the process was killed", 0) end }, { __index = j })
end

describe("engine, a sync whose process died waiting for its answer (the server still running it):", function()
  local server, dir

  world.each_test(function(s, d) server, dir = s, d end)

  for _, w in ipairs(world.WAYS) do
    local way_name, make_way = w[1], w[2]
    it(way_name .. ": the next sync holds its edits until the server ran it, then nothing goes twice", function()
      -- sync 2 comes before the server runs sync 1's request (2 s later): when it holds nothing
      -- then, a spec stalled past the delay let it run, and the crew begins again on the server's
      -- data with a longer delay (helper.within_window)
      local c, cl, way, added
      local opts = { late_window = 60 }
      helper.within_window("sync 2 while sync 1's request is held", { 2000, 8000, 32000 }, function(delay_ms)
        if way then server:reset() end
        c, cl, way = world.crew(server, make_way, way and helper.tmp_dir() or dir)
        added = way.add{ APN = "INTERRUPTED", OWNER = "first" }
        server:gateway("504", delay_ms)
        pcall(way.sync, { late_window = 60, journal = dying }) -- raised: its process is gone
        server:gateway(nil)
        local held = server:held()
        if held == 0 and server:feature(added) then -- it ran already
          world.finish(c, cl, way)
          return false
        end
        c.check(held == 1, "the gateway does not hold sync 1's request: " .. tostring(held))
        world.synced(c, way, 2, opts) -- at once: the server has not run sync 1's request yet
        return true
      end)
      world.wait_ran(server, "the server to run the request the gateway answered")
      world.synced(c, way, 3, opts)
      world.check_once(c, server, way.origin, "add", added)
      world.check_settled(c, way)
      world.finish(c, cl, way)
    end)

    -- The same with a sync that carries no edit (a download): the server runs it late and moves
    -- the replica's generation; that is this replica's own request, not another copy's.
    it(way_name .. ": a killed download run late by the server is not taken for another copy", function()
      local c, cl, way = world.crew(server, make_way, dir)
      local opts = { late_window = 60 }
      server:crew_update(world.E02, { OWNER = "to download" })
      server:gateway("504", 1000)
      pcall(way.sync, { late_window = 60, journal = dying }) -- raised: its process is gone
      server:gateway(nil)
      world.synced(c, way, 2, opts) -- at once: the server has not run sync 1's request yet
      world.wait_ran(server, "the server to run the request the gateway answered")
      world.synced(c, way, 3, opts)
      world.finish(c, cl, way)
    end)
  end
end)
