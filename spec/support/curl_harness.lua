-- The curl harness of the httpd specs: curl command lines started in the
-- background (their output, exit code and pid in temp files) while the test
-- drives srv:step(); shared by spec/emulator/httpd_spec.lua and httpd_spool_spec.lua.
local helper = require "spec.helper"

-- seconds any single wait may take before the test fails, scaled as every wait of the specs
-- (helper.WAIT_SCALE): it measures the machine, a loaded one starts a curl slowly
local h = { WAIT = 15 * helper.WAIT_SCALE }

local WAIT = h.WAIT
local tmpdir
local jobs = {} -- curl jobs started by the current test

local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function spit(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

local function shq(s)
  return "'" .. tostring(s):gsub("'", [['\'']]) .. "'"
end

-- Starts `curl args...` in the background; returns a job table whose files
-- receive the body (out), -w text (info), response headers (hdr), exit code.
local function curl(args)
  local id = #jobs + 1
  local base = ("%s/job%d"):format(tmpdir, id)
  local job = { out = base .. ".out", info = base .. ".info", hdr = base .. ".hdr",
                done = base .. ".done", pidfile = base .. ".pid" }
  -- env -u: under `make asan` LD_PRELOAD carries libasan, and curl hangs with it
  local parts = { "env", "-u", "LD_PRELOAD", "curl", "-s", "--max-time", "20",
                  "-D", shq(job.hdr), "-o", shq(job.out) }
  for _, a in ipairs(args) do parts[#parts + 1] = shq(a) end
  local cmd = ("(%s > %s 2>/dev/null & echo $! > %s; wait $!; echo $? > %s.tmp; mv %s.tmp %s) &")
    :format(table.concat(parts, " "), shq(job.info), shq(job.pidfile), shq(job.done),
            shq(job.done), shq(job.done))
  assert(os.execute(cmd))
  jobs[id] = job
  return job
end

local function finished(job)
  local s = slurp(job.done)
  if s and s:match("%d") then
    job.code = tonumber(s:match("%d+"))
    return true
  end
  return false
end

-- Steps srv until pred() is true; every exchange is passed to on_ex.
local function run_until(srv, pred, on_ex)
  local deadline = os.time() + WAIT
  while not pred() do
    if os.time() > deadline then error("timed out waiting", 2) end
    for _, ex in ipairs(srv:step(20)) do
      if on_ex then on_ex(ex) else error("unexpected exchange " .. ex.path) end
    end
  end
end

-- Collects n exchanges (without answering them).
local function collect(srv, n)
  local got = {}
  run_until(srv, function() return #got >= n end, function(ex) got[#got + 1] = ex end)
  return got
end

local function wait_job(srv, job, on_ex)
  run_until(srv, function() return finished(job) end, on_ex)
  return job.code
end

local function url(srv, path)
  return ("http://127.0.0.1:%d%s"):format(srv:port(), path)
end

--- A fresh temporary directory (with `sub`, a subdirectory made too) and
-- no jobs; returns the directory.
function h.begin(sub)
  tmpdir = helper.tmp_dir()
  if sub then assert(os.execute("mkdir -p " .. shq(tmpdir .. "/" .. sub))) end
  jobs = {}
  return tmpdir
end

--- Kills every curl still running, closes srv, removes the directory.
function h.finish(srv)
  for _, job in ipairs(jobs) do -- never leave a curl behind
    local pid = slurp(job.pidfile)
    if pid and pid:match("^%d+") and not finished(job) then
      os.execute("kill " .. pid:match("^%d+") .. " 2>/dev/null")
    end
  end
  if srv then srv:close() end
  os.execute("rm -rf " .. shq(tmpdir))
end

h.slurp, h.spit, h.shq, h.curl, h.finished = slurp, spit, shq, curl, finished
h.run_until, h.collect, h.wait_job, h.url = run_until, collect, wait_job, url
return h
