-- What the `make bench` scripts share: running a step, the statistics of
-- their rounds, a process's peak RSS, and the one walk of a record that
-- both sides of the parse comparison do.
local common = {}

--- Runs a shell command; returns its output, raises (with the output) when it fails.
function common.run(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local ok = p:close()
  if not ok then error("benchmark step failed: " .. cmd .. "\n" .. out, 0) end
  return out
end

function common.median(list)
  local s = {}
  for i, v in ipairs(list) do s[i] = v end
  table.sort(s)
  local n = #s
  if n % 2 == 1 then return s[(n + 1) // 2] end
  return (s[n // 2] + s[n // 2 + 1]) / 2
end

function common.min(list)
  local m = math.huge
  for _, v in ipairs(list) do m = math.min(m, v) end
  return m
end

--- This process's peak RSS in KiB (VmHWM).
function common.peak_rss_kib()
  local f = assert(io.open("/proc/self/status"))
  local text = f:read("a")
  f:close()
  return tonumber(text:match("VmHWM:%s*(%d+)"))
end

-- The same walk for every side: touch every attribute and coordinate.
local touched = 0
function common.walk(record)
  local attrs = record.attributes
  if attrs then
    for _, v in pairs(attrs) do
      if v ~= nil then touched = touched + 1 end
    end
  end
  local g = record.geometry
  if g then touched = touched + (g.x and 1 or 0) + (g.y and 1 or 0) end
end

return common
