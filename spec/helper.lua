-- Shared by the specs: starting and stopping the emulator as a real process,
-- and talking to its control routes. Loaded by busted through .busted.
local core = require "geoservices.core"
local json = require "geoservices.base.json"
local transport = require "geoservices.net.transport"

local helper = {}

local pwd = io.popen("pwd")
helper.ROOT = pwd:read("l")
pwd:close()
helper.FIXTURES = "file://" .. helper.ROOT .. "/spec/fixtures"

helper.TEST_TIMEOUT = 20 -- seconds any wait in a spec may take before it fails

-- The python3 the specs' doubles and pty drivers run under: Debian's (`make
-- deps` installs it; the GDAL checks need its python3-gdal). A `python3`
-- found first on PATH may be a wrapper: pyenv's shim, a bash script that
-- looks up a version before each start, took 1.1 s against 0.1 s here, and
-- the specs start a documented or scripted server in almost every test.
helper.PYTHON = "/usr/bin/python3"

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end
helper.shell_quote = shell_quote

local function read_all(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return text
end
helper.read_all = read_all

local function own_pid()
  local f = assert(io.open("/proc/self/stat"))
  local pid = f:read("n")
  f:close()
  return pid
end

helper.own_pid = own_pid

-- A process whose main thread shows Z (a zombie) may still have threads
-- exiting: they hold its files until the last one is gone, and with them its
-- POSIX locks (a store's, a state file's). Seen: a SIGKILLed child with a
-- JSON parse worker still held its SQLite lock when the spec's close needed
-- it, and the store's WAL was left (spec/store/gpkg_spec). Such a process
-- counts as alive until its thread count is down to the zombie itself.
local function process_alive(pid)
  local f = io.open("/proc/" .. pid .. "/status")
  if not f then return false end
  local status = f:read("a")
  f:close()
  if not status:match("\nState:%s*Z") then return true end
  return tonumber(status:match("\nThreads:%s*(%d+)")) ~= 1 -- a zombie has exited once its threads have
end
helper.process_alive = process_alive

function helper.sleep(seconds)
  local until_t = core.monotonic() + seconds
  local drv = core.driver()
  while core.monotonic() < until_t do drv:step(math.max(1, math.floor((until_t - core.monotonic()) * 1000))) end
  drv:close()
end

-- Every wait_for timeout is multiplied by this: a timeout only ends a spec
-- that hangs (no spec asserts a duration), and what it measures is the
-- machine; on a shared 2-core machine at load 18 a python3 server took 16 s
-- to print its first line, at load 28 more than the 30 s a scale of 3 gave.
-- GEOSERVICES_SPEC_WAIT_SCALE sets it (default 6).
helper.WAIT_SCALE = tonumber(os.getenv("GEOSERVICES_SPEC_WAIT_SCALE")) or 6

--- Polls `pred` until it returns a truthy value or `timeout` seconds (times
-- helper.WAIT_SCALE) pass; raises with `what` on timeout.
function helper.wait_for(what, pred, timeout)
  local deadline = core.monotonic() + (timeout or helper.TEST_TIMEOUT) * helper.WAIT_SCALE
  while true do
    local v = pred()
    if v then return v end
    if core.monotonic() > deadline then error("timed out waiting for " .. what, 2) end
    helper.sleep(0.02)
  end
end

--- For a scenario that needs the spec to act inside a window the emulator's
-- clock opens (a job's phase, a gateway's delay, a delayed answer): runs
-- `run(ms)` with each window length of `lengths` in turn until it returns
-- true, and returns that length. `run` asserts whatever it observed, and
-- returns false only when its ordered reads show a stalled machine let the
-- window close before the spec acted (so what the scenario proves was not
-- observed: it is run again, with a longer window); it leaves the world as
-- it found it. Raises when every length was missed. Keeps a spec fast on an
-- idle machine and right on a loaded one, without timing anything.
function helper.within_window(what, lengths, run)
  for _, ms in ipairs(lengths) do
    if run(ms) then return ms end
  end
  error(("%s: the window closed before the spec acted at every length (%s)"):format(what,
    table.concat(lengths, ", ")), 2)
end

-- One scratch directory per process, /tmp/geoservices-spec-XXXXXX, made on
-- first use: every path from helper.tmp_name and helper.tmp_dir is inside it,
-- and so is whatever the product puts next to them (a state file's .lock,
-- .journal and .results). It is removed when the Lua state closes: busted
-- exits with os.exit(code, true), a script that returns (or raises) closes
-- it too, so the finalizer of `scratch_guard` (anchored by this module) runs.
-- A plain os.exit(code) skips it: scripts call os.exit(code, true).
local SCRATCH_PREFIX = "/tmp/geoservices-spec-"
local scratch_dir, scratch_count = nil, 0

local function scratch()
  if not scratch_dir then
    local p = assert(io.popen("mktemp -d " .. shell_quote(SCRATCH_PREFIX .. "XXXXXX")))
    local d = p:read("l")
    p:close()
    assert(d and d:sub(1, #SCRATCH_PREFIX) == SCRATCH_PREFIX, "mktemp -d failed")
    scratch_dir = d
  end
  return scratch_dir
end

local scratch_guard = setmetatable({}, { __gc = function()
  local d = scratch_dir
  scratch_dir = nil
  -- only ever our own directory: /tmp/geoservices-spec-<mktemp's letters>, nothing else
  if d and d:match("^/tmp/geoservices%-spec%-[%w]+$") then os.execute("rm -rf -- " .. shell_quote(d)) end
end })
helper._scratch_guard = scratch_guard

--- The scratch directory of this process (made on first use, removed at exit).
function helper.scratch_dir()
  return scratch()
end

--- A fresh path in the scratch directory, created as an empty file (as
-- os.tmpname does); it goes with the directory, removing it is optional.
function helper.tmp_name()
  local d = scratch()
  scratch_count = scratch_count + 1
  local path = ("%s/t%05d"):format(d, scratch_count)
  assert(io.open(path, "wb")):close()
  return path
end

--- A new empty directory in the scratch directory; it goes with it, removing
-- it earlier is optional.
function helper.tmp_dir()
  local d = scratch()
  scratch_count = scratch_count + 1
  local path = ("%s/d%05d"):format(d, scratch_count)
  assert(os.execute("mkdir " .. shell_quote(path)))
  return path
end

--- Writes `text` to `path`, replacing it.
function helper.write_file(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

--- Fills the file system `path` is on: writes zeros to `path` until a write fails for want of
-- space (raises if none does within `max_bytes`, 64 MiB by default). In Lua rather than with dd:
-- under `make asan` every child gets the sanitizer preloaded, and dd's aligned_alloc(4096, 1024)
-- (bs=1k) aborts there ("invalid alignment requested"), leaving the disk as it was.
function helper.fill_disk(path, max_bytes)
  local f = assert(io.open(path, "wb"))
  f:setvbuf("no")
  local chunk, written = string.rep("\0", 1024), 0
  while written < (max_bytes or 64 * 1024 * 1024) do
    local ok, err = f:write(chunk)
    if not ok then
      f:close()
      assert(err:find("No space left", 1, true), err)
      return written
    end
    written = written + #chunk
  end
  f:close()
  error(("helper.fill_disk: %d bytes written to %s and still room"):format(written, path))
end

--- Runs the `geoservices` command the way the installed launcher does, as a
-- real process with this process's module paths and no terminal; returns
-- `{code =, out =, err =}`. `env` adds environment variables.
function helper.run_cli(args, env)
  local out, err = helper.tmp_name(), helper.tmp_name()
  local vars = { GEOSERVICES_TTY = "0", LUA_PATH = package.path, LUA_CPATH = package.cpath }
  for k, v in pairs(env or {}) do vars[k] = v end
  local assigns = {}
  for k, v in pairs(vars) do
    if v ~= false then assigns[#assigns + 1] = k .. "=" .. shell_quote(v) end
  end
  table.sort(assigns)
  local quoted = {}
  for i, a in ipairs(args) do quoted[i] = shell_quote(a) end
  local cmd = ("cd %s && env -u GEOSERVICES_URL -u GEOSERVICES_TOKEN %s lua5.4 -e %s /dev/null %s >%s 2>%s </dev/null")
    :format(shell_quote(helper.ROOT), table.concat(assigns, " "),
      shell_quote('os.exit(require("geoservices.cli").main(arg))'), table.concat(quoted, " "), shell_quote(out),
      shell_quote(err))
  local _, _, code = os.execute(cmd)
  local r = { code = code, out = read_all(out), err = read_all(err) }
  os.remove(out)
  os.remove(err)
  return r
end

--- Runs a shell command; returns its output (stdout and stderr) and
-- whether it exited 0.
function helper.run_shell(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  local ok = p:close()
  return out, ok
end

--- GDAL's GeoPackage validator on a file (Debian's python3-gdal, hence
-- /usr/bin/python3): its complaints, one a line, "" when clean. Req 152 is
-- left out: GDAL 3.6 reads the empty flag from the wrong bit and reports
-- every empty geometry, GDAL's own included (store_lossless_spec shows it).
function helper.validate_gpkg(path)
  local out = helper.run_shell("/usr/bin/python3 -m osgeo_utils.samples.validate_gpkg -k " .. shell_quote(path))
  local complaints = {}
  for line in out:gmatch("[^\n]+") do
    if not line:find("Req 152", 1, true) then complaints[#complaints + 1] = line end
  end
  return table.concat(complaints, "\n")
end

--- This process's resident memory, KiB (for the specs that check memory stays flat).
function helper.rss_kib()
  local text = read_all("/proc/self/status")
  return tonumber(text:match("VmRSS:%s+(%d+)"))
end

--- The JSON lines of a `--json` output, decoded; raises on a line that is not an event.
function helper.events(text)
  local list = {}
  for line in text:gmatch("[^\n]+") do
    local ev = json.decode(line)
    assert(type(ev) == "table" and ev.event, "not a JSON event line: " .. line)
    list[#list + 1] = ev
  end
  return list
end

--- The events of one name, in order.
function helper.find_events(list, name)
  local found = {}
  for _, ev in ipairs(list) do
    if ev.event == name then found[#found + 1] = ev end
  end
  return found
end

--- For a describe block: `serve(routes)` starts a scripted server (see
-- helper.start_scripted) and `stop_all()` (an after_each) stops every one it started.
function helper.scripted_servers()
  local servers = {}
  local function serve(routes)
    local s = helper.start_scripted{ routes = routes }
    servers[#servers + 1] = s
    return s
  end
  local function stop_all()
    for _, s in ipairs(servers) do s:stop() end
    servers = {}
  end
  return serve, stop_all
end

local Emulator = {}
Emulator.__index = Emulator

--- Starts `lua5.4 lua/geoservices/emulator/main.lua` on 127.0.0.1 and a free
-- port, with this process's module paths; returns a handle with url, port,
-- pid and control helpers. opts.data: data file (default the example world);
-- opts.args: more command-line arguments; opts.job_step_ms: each async job
-- status's time (100 ms unless given, here or as --job-step-ms in args).
function helper.start_emulator(opts)
  opts = opts or {}
  local log = helper.tmp_name()
  local pidfile = helper.tmp_name()
  local args = { "--port", "0", "--data", opts.data or "examples/data/world.json", "--exit-with", own_pid() }
  -- the emulator answers as the vendor documents by default; only its job
  -- statuses are shortened (1 s each by default), so specs stay fast
  local step_given = false
  for _, a in ipairs(opts.args or {}) do
    args[#args + 1] = a
    if a == "--job-step-ms" then step_given = true end
  end
  if not step_given then
    args[#args + 1] = "--job-step-ms"
    args[#args + 1] = tostring(opts.job_step_ms or 100)
  end
  local quoted = {}
  for i, a in ipairs(args) do quoted[i] = shell_quote(a) end
  local cmd = ("LUA_PATH=%s LUA_CPATH=%s %s lua/geoservices/emulator/main.lua %s > %s 2>&1 & echo $! > %s"):format(
    shell_quote(package.path), shell_quote(package.cpath), shell_quote(opts.lua or "lua5.4"),
    table.concat(quoted, " "), shell_quote(log), shell_quote(pidfile))
  assert(os.execute(cmd))
  local pid = helper.wait_for("emulator pid", function() return tonumber(read_all(pidfile)) end, 5)
  os.remove(pidfile)
  local url = helper.wait_for("emulator start-up line", function()
    local text = read_all(log) or ""
    if not process_alive(pid) then error("emulator exited: " .. text) end
    return text:match("listening on (https?://127%.0%.0%.1:%d+/server)")
  end, 10)
  local self = setmetatable({ url = url, pid = pid, log = log, driver = core.driver() }, Emulator)
  self.port = tonumber(url:match(":(%d+)/"))
  self.root = url:match("^(https?://[^/]+)")
  self.ca_file = opts.ca_file -- for an HTTPS emulator: its certificate
  return self
end

--- Stops the emulator by PID (INT, then KILL after 5 s) and waits for it.
-- INT, not TERM: the emulator stops as on Ctrl-C, closing itself, so the
-- result files it keeps without a state file (os.tmpname, /tmp/lua_XXXXXX)
-- are removed; TERM would end it without that and leave them in /tmp.
function Emulator:stop()
  if not self.pid then return end
  os.execute("kill -INT " .. self.pid .. " 2>/dev/null")
  local deadline = core.monotonic() + 5
  while process_alive(self.pid) and core.monotonic() < deadline do helper.sleep(0.02) end
  if process_alive(self.pid) then os.execute("kill -9 " .. self.pid .. " 2>/dev/null") end
  self.pid = nil
  self.driver:close()
  os.remove(self.log)
end

-- Calls a control route; returns the decoded JSON answer.
function Emulator:control(path, body)
  local spec = { url = self.root .. "/_emulator/" .. path, timeout_ms = 5000, ca_file = self.ca_file }
  if body then
    spec.method, spec.body, spec.content_type = "POST", json.encode(body), "application/json"
  end
  local response = assert(transport.perform(self.driver, spec))
  assert(response.status == 200, "control " .. path .. ": HTTP " .. response.status .. " " .. response.body)
  return assert(json.decode(response.body))
end

function Emulator:fault(fault) return self:control("faults", fault) end
function Emulator:reset() return self:control("reset", {}) end
function Emulator:requests() return self:control("requests") end

--- Count of requests the emulator received for one operation route.
function Emulator:count(route)
  return self:requests().counts[route] or 0
end

local Scripted = {}
Scripted.__index = Scripted

--- For a describe block of store specs: an emulator and a scratch directory.
-- Returns a table with `start` and `stop` (for busted's setup and teardown:
-- `setup(world.start); teardown(world.stop)`), `emu` and `dir` once started,
-- `client()` (alice's token) and `create(name[, params])`: createReplica into
-- `dir/NAME.gpkg` of `params` over `defaults` (by default layer 0 of Parcels,
-- perReplica); when a test before made that file, `dir/NAME-2.gpkg` and so on
-- (a describe block's tests share the directory). `opts.data(dir)`, when
-- given, writes the world the emulator serves into the scratch directory and
-- returns its path (default examples/data/world.json).
function helper.store_world(defaults, opts)
  defaults = defaults or { service = "Parcels", layers = { 0 }, syncModel = "perReplica" }
  local world = {}
  function world.start()
    world.dir = helper.tmp_dir()
    world.emu = helper.start_emulator(opts and opts.data and { data = opts.data(world.dir) } or nil)
  end
  function world.stop()
    world.emu:stop()
    os.execute("rm -rf " .. shell_quote(world.dir))
  end
  function world.client()
    return require("geoservices").client{ url = world.emu.url, token = "alice-token", timeout = 30 }
  end
  -- `geoservices ARGS...` as alice against this world's emulator: {code, out, err}
  function world.cli(...)
    return helper.run_cli({ "--url", world.emu.url, "--token", "alice-token", ... })
  end
  -- the server's replica of `service` (default Parcels) named `name`, or nil
  function world.replica_named(name, service)
    local c = world.client()
    local list = assert(c:list_replicas(service or "Parcels"))
    c:close()
    for _, r in ipairs(list) do
      if r.replicaName == name then return r end
    end
    return nil
  end
  function world.create(name, params)
    local p = { replicaName = name }
    for k, v in pairs(defaults) do p[k] = v end
    for k, v in pairs(params or {}) do p[k] = v end
    local path, n = world.dir .. "/" .. name .. ".gpkg", 1
    while true do
      local f = io.open(path, "rb")
      if not f then break end
      f:close()
      n = n + 1
      path = ("%s/%s-%d.gpkg"):format(world.dir, name, n)
    end
    return assert(require("geoservices").store.create(world.client(), path, p, { poll_interval = 0.05, timeout = 30 }))
  end
  return world
end

--- The features of layer `id` of `service` as its query gives them (every
-- field, the geometry with its Z and M), by GlobalID.
function helper.served_features(client, service, id)
  local url = require("geoservices.sync.service").url(client, service, id .. "/query")
  local doc = assert(client:post(url, { where = "1=1", outFields = "*", returnGeometry = "true", returnZ = "true",
                                        returnM = "true", f = "json" }))
  local out = {}
  for _, f in ipairs(doc.features) do out[f.attributes.GlobalID] = f end
  return out
end

--- Starts spec/support/scripted_server.py on 127.0.0.1 and a free port with
-- `script` (a table: `{routes = {{method =, path =, responses = {...}}}}`, see
-- that file); returns a handle with `root` (http://127.0.0.1:PORT), `url`
-- (root .. "/server"), `pid`, `requests()` (what it received) and `stop()`.
function helper.start_scripted(script)
  local dir = helper.tmp_dir()
  local f = assert(io.open(dir .. "/script.json", "wb"))
  f:write(json.encode(script))
  f:close()
  local cmd = (helper.PYTHON .. " spec/support/scripted_server.py %s %s --exit-with %d"
    .. " > %s 2>&1 & echo $! > %s"):format(
    shell_quote(dir .. "/script.json"), shell_quote(dir .. "/log.jsonl"), own_pid(), shell_quote(dir .. "/out"),
    shell_quote(dir .. "/pid"))
  assert(os.execute(cmd))
  local pid = helper.wait_for("scripted server pid", function() return tonumber(read_all(dir .. "/pid")) end, 5)
  local root = helper.wait_for("scripted server start-up line", function()
    local text = read_all(dir .. "/out") or ""
    if not process_alive(pid) then error("scripted server exited: " .. text) end
    return text:match("listening on (http://127%.0%.0%.1:%d+)")
  end, 10)
  return setmetatable({ root = root, url = root .. "/server", pid = pid, dir = dir }, Scripted)
end

--- The requests the scripted server received, in order: `{method =, path =, headers =, body =, peer_port =}`
-- (peer_port: the client's port, the same for requests on one reused connection).
function Scripted:requests()
  local list = {}
  for line in (read_all(self.dir .. "/log.jsonl") or ""):gmatch("[^\n]+") do list[#list + 1] = json.decode(line) end
  return list
end

--- Stops it by PID and removes its files.
function Scripted:stop()
  if not self.pid then return end
  os.execute("kill " .. self.pid .. " 2>/dev/null")
  local deadline = core.monotonic() + 5
  while process_alive(self.pid) and core.monotonic() < deadline do helper.sleep(0.02) end
  if process_alive(self.pid) then os.execute("kill -9 " .. self.pid .. " 2>/dev/null") end
  self.pid = nil
  os.execute("rm -rf " .. shell_quote(self.dir))
end

helper.Emulator = Emulator
package.loaded["spec.helper"] = helper
return helper
