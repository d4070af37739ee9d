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

--- Starts `lua script file` in the background (a server of the emulator's HTTP
-- layer that prints "serving on URL"), its output in `log`: the URL (nil if it
-- did not start within 10 s) and the pid, to kill.
function common.serve(lua, script, file, log)
  local pid = common.run(("%s %s %s > %s 2>&1 & echo $!"):format(lua, script, file, log)):match("%d+")
  for _ = 1, 100 do
    local f = io.open(log)
    local url = f and f:read("a"):match("serving on (%S+)")
    if f then f:close() end
    if url then return url, pid end
    os.execute("sleep 0.1")
  end
  return nil, pid
end

--- ogr2ogr -f GPKG of an Esri JSON FeatureSet into `out`: seconds, peak RSS (KiB) and the
-- file's size. VmHWM only grows, so the last reading of /proc/PID/status
-- before the process is gone is its peak (read every 20 ms). Raises unless
-- the file holds `n` features.
function common.ogr2ogr(featureset, out, n)
  local core = require "geoservices.core"
  os.remove(out)
  local log = out .. ".log"
  local t0 = core.monotonic()
  local pid = tonumber(common.run(("ogr2ogr -f GPKG %s %s > %s 2>&1 & echo $!"):format(out, featureset, log))
    :match("%d+"))
  local rss, drv = 0, core.driver()
  while true do
    local f = io.open("/proc/" .. pid .. "/status")
    local text = f and f:read("a")
    if f then f:close() end
    local hwm = text and tonumber(text:match("VmHWM:%s*(%d+)"))
    if not hwm then break end -- gone, or a zombie (no memory left to read)
    if hwm > rss then rss = hwm end
    drv:step(20)
  end
  drv:close()
  local secs = core.monotonic() - t0
  local count = common.run(("ogrinfo -so -al %s 2>&1"):format(out)):match("Feature Count: (%d+)")
  if tonumber(count) ~= n then error(("ogr2ogr wrote %s features of %d:\n%s"):format(tostring(count), n,
    common.run("cat " .. log))) end
  os.remove(log)
  return secs, rss, tonumber(common.run("stat -c %s " .. out))
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
