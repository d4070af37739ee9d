-- Form encoding of the edits of 100k features: the C encoder against a
-- pure-Lua gsub percent-encoder, on the same JSON text (median of 5 calls each).
--   lua5.4 spec/bench/form_encode.lua [N]
local core = require "geoservices.core"
local geoservices = require "geoservices"

local n = tonumber(arg[1]) or 100000
local e = geoservices.edits()
for i = 1, n do
  e:add(i % 4, { attributes = { APN = ("101-%06d"):format(i), OWNER = "Zoë Müller & Sons", ACRES = i / 7,
                                UPDATED = 1700000000000 + i, NOTES = "see \"deed\" 42/7" },
                 geometry = { x = -117.19584274291992 + i / 1e6, y = 34.056789012345678 } })
end
local text = e:encode()

local function lua_urlencode(s)
  return (s:gsub("[^%w%-%._~]", function(c) return ("%%%02X"):format(c:byte()) end))
end

-- Each side 5 times, the median kept: one call of either is mostly fresh
-- memory (the output is ~50 MB), and the first call's page faults alone
-- can triple it.
local function median_time(fn)
  local times, out = {}, nil
  for i = 1, 5 do
    collectgarbage()
    local t0 = core.monotonic()
    out = fn(text)
    times[i] = core.monotonic() - t0
  end
  table.sort(times)
  return times[3], out
end
local c_time, c_out = median_time(core.urlencode)
local lua_time, lua_out = median_time(lua_urlencode)
assert(c_out == lua_out, "the two encoders disagree")
print(("form %d %d %.6f %.6f"):format(n, #text, c_time, lua_time))
