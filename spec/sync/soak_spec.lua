-- Soak: 10,000 requests through one client, some of them failing and
-- retried, with no growth in open file descriptors or Lua memory beyond a
-- small bound.
local geoservices = require "geoservices"
local helper = require "spec.helper"

local PARCELS_ID = "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c"
local REQUESTS = 10000
local WARM_UP = 500

local function open_fds()
  local p = assert(io.popen("ls /proc/" .. helper.own_pid() .. "/fd"))
  local n = 0
  for _ in p:lines() do n = n + 1 end
  p:close()
  return n - 1 -- the pipe of this very listing
end

local function lua_kib()
  collectgarbage("collect")
  collectgarbage("collect")
  return collectgarbage("count")
end

describe("soak", function()
  local emu
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)

  it(("%d requests through one client leak neither descriptors nor memory"):format(REQUESTS), function()
    emu:reset()
    -- one request in fifty is reset before its response and retried
    local failing = {}
    for n = 1, REQUESTS + WARM_UP, 50 do failing[#failing + 1] = n end
    emu:fault{ route = "getServicesById", kind = "reset", attempts = failing }
    local client = geoservices.client{ url = emu.url, token = "admin-token", retry = { base_delay = 0.001 } }
    local function one(i)
      local services, err = client:get_services_by_id{ PARCELS_ID }
      if not services then error(("request %d: %s"):format(i, tostring(err))) end
    end
    for i = 1, WARM_UP do one(i) end
    local fds0, mem0 = open_fds(), lua_kib()
    local fds_max = fds0
    for i = 1, REQUESTS do
      one(i)
      if i % 1000 == 0 then fds_max = math.max(fds_max, open_fds()) end
    end
    local fds1, mem1 = open_fds(), lua_kib()
    client:close()
    io.stdout:write(("\nsoak: %d requests (+%d warm-up, %d reset and retried): fds %d -> %d (max %d), "
      .. "Lua memory %.0f KiB -> %.0f KiB\n"):format(REQUESTS, WARM_UP, #failing, fds0, fds1, fds_max, mem0, mem1))
    assert.is_true(fds_max <= fds0 + 2, "descriptors grew")
    assert.is_true(mem1 <= mem0 + 256, ("Lua memory grew from %.0f to %.0f KiB"):format(mem0, mem1))
    assert.equal(REQUESTS + WARM_UP + #failing, emu:count("getServicesById"))
  end)
end)
