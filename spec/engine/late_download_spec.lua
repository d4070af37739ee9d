-- Issue 34, F2, a download: a synchronizeReplica that carries no edits is
-- repeated at once when its answer is lost (geoservices.net.retry: a read),
-- and the repeat is answered. But a gateway's 504 or a dropped connection
-- does not stop the server behind it: the first request still runs later
-- and moves the replica's generation on the server past the one the store
-- committed. That move is the crew's own, not another copy's (the torture's
-- false "another copy" stop in gateway=504 async: the store then refused
-- every later sync).
--
-- The gateway answers every second synchronizeReplica (504 or a dropped
-- connection); sync 1 passes it, sync 2's request meets it and its repeat
-- passes. Once the server has run the first request, another crew changes
-- E03, and sync 3 must succeed and bring that change: never refused as
-- "another copy of this store". Both engines, against the emulator and the
-- documented double, synchronous and async.
local helper = require "spec.helper"
local world = require "spec.support.engine_world"

local E03 = world.E03
local DELAY_MS = 1000

-- The gateway in front of the server answers every second synchronizeReplica.
local function every_second(server, mode)
  if server.kind == "emulator" then
    server:set{ gateway = mode, gateway_delay_ms = DELAY_MS, gateway_every = 2 }
  else
    server:set{ gateway = { mode = mode, delay_s = DELAY_MS / 1000, every = 2 } }
  end
end

local SERVERS = {
  { "the emulator", function() return world.emulator() end },
  { "the documented double", function() return world.documented{ job_seconds = 0.3 } end },
}

for _, s in ipairs(SERVERS) do
  local server_name, start = s[1], s[2]
  for _, w in ipairs(world.WAYS) do
    local way_name, make_way = w[1], w[2]
    describe(("engine, %s, %s: a download whose answer was lost"):format(way_name, server_name), function()
      local begin = world.each_crew(start, make_way)

      for _, case in ipairs{
        { "504", {} }, { "drop", {} }, { "504", { params = { async = true } } },
      } do
        local mode, opts = case[1], case[2]
        it(("%s%s: repeated, and the first request's late run is not taken for a copy"):format(mode,
          opts.params and ", async" or ""), function()
          local server, way = begin()
          every_second(server, mode)
          local before = server:sync_requests()
          assert(way.sync(opts), "sync 1 failed")
          local r2, e2 = way.sync(opts)
          assert(r2, "sync 2 (its request answered " .. mode .. ", repeated) failed: " .. world.message_of(e2))
          assert(server:sync_requests() - before >= 3, "sync 2's request was not repeated: the gateway missed it")
          server:gateway(nil)
          helper.wait_for("the server to run the request the gateway answered", function()
            return server:held() == 0
          end, 15)
          server:crew_update(E03, { OWNER = "crew B" })
          local r3, e3 = way.sync(opts)
          assert(r3, "sync 3 failed: " .. world.message_of(e3))
          assert.are.equal("crew B", way.value(E03, "OWNER"))
        end)
      end
    end)
  end
end
