-- The emulator of one torture mode, as a process the torture may SIGKILL at
-- any moment (with a request of a child in flight) and restart on the same
-- port with its --state-file: the replicas, jobs, result files and change
-- log survive, the faults (not part of the state) do not.
local core = require "geoservices.core"
local json = require "geoservices.base.json"
local transport = require "geoservices.net.transport"
local helper = require "spec.helper"

local q = helper.shell_quote

local Emulator = {}
Emulator.__index = Emulator

local M = {}

--- A new emulator (not started) keeping its state in `dir`; `settings` are
-- posted after every start (the torture's mode: rollback_default...).
function M.new(dir, settings)
  return setmetatable({ dir = dir, port = 0, state_file = dir .. "/emulator-state", settings = settings,
                        starts = 0 }, Emulator)
end

function Emulator:start()
  local log, pidfile = self.dir .. "/emulator.log", self.dir .. "/emulator.pid"
  self:keep_log()
  os.remove(log)
  os.remove(pidfile)
  local cmd = ("LUA_PATH=%s LUA_CPATH=%s lua5.4 lua/geoservices/emulator/main.lua --port %d --data %s "
    .. "--state-file %s --exit-with %d > %s 2>&1 & echo $! > %s"):format(q(package.path), q(package.cpath),
      self.port, q("examples/data/world.json"), q(self.state_file), helper.own_pid(), q(log), q(pidfile))
  assert(os.execute(cmd))
  self.pid = helper.wait_for("emulator pid", function() return tonumber(helper.read_all(pidfile)) end, 5)
  local pid = self.pid
  -- the port of a killed emulator may still be held for a moment: a bind
  -- failure is retried, anything else is an error
  self.url = helper.wait_for("emulator start-up", function()
    local text = helper.read_all(log) or ""
    if not helper.process_alive(pid) then
      if text:match("[Aa]ddress already in use") or text:match("bind") then return "retry" end
      error("emulator exited: " .. text)
    end
    return text:match("listening on (http://127%.0%.0%.1:%d+/server)")
  end, 15)
  if self.url == "retry" then
    helper.sleep(0.2)
    return self:start()
  end
  self.port = tonumber(self.url:match(":(%d+)/"))
  self.root = self.url:match("^(http://[^/]+)")
  self.starts = self.starts + 1
  local ok, err = self:apply_settings(self.settings)
  if not ok then error(err, 0) end
end

--- With TORTURE_TRACE=<file> in the environment, what the emulator printed
-- (a request the gateway held that failed, say) is appended to <file>.emulator
-- before a restart removes it.
function Emulator:keep_log()
  local trace = os.getenv("TORTURE_TRACE")
  local text = trace and helper.read_all(self.dir .. "/emulator.log")
  if not text or text == "" then return end
  local f = io.open(trace .. ".emulator", "a")
  f:write(("== emulator start %d's output\n%s\n"):format(self.starts, text))
  f:close()
end

--- SIGKILL: whatever it was doing (a delayed answer, a job) stops there.
function Emulator:kill()
  if not self.pid then return end
  os.execute("kill -9 " .. self.pid .. " 2>/dev/null")
  local pid = self.pid
  helper.wait_for("emulator exit", function() return not helper.process_alive(pid) end, 10)
  self.pid = nil
end

--- Stops it for good (SIGINT: it closes itself) and waits.
function Emulator:stop()
  if not self.pid then return end
  os.execute("kill -INT " .. self.pid .. " 2>/dev/null")
  local pid = self.pid
  local deadline = core.monotonic() + 5
  while helper.process_alive(pid) and core.monotonic() < deadline do helper.sleep(0.02) end
  if helper.process_alive(pid) then os.execute("kill -9 " .. pid .. " 2>/dev/null") end
  self.pid = nil
  self:keep_log()
end

--- A control route: GET, or POST of `body` as JSON. Returns the decoded
-- answer, or nil, status, body text when it is not a 200.
function Emulator:control(path, body)
  local drv = core.driver()
  local spec = { url = self.root .. "/_emulator/" .. path, timeout_ms = 10000 }
  if body then spec.method, spec.body, spec.content_type = "POST", json.encode(body), "application/json" end
  local resp, msg = transport.perform(drv, spec)
  drv:close()
  if not resp then error("emulator control " .. path .. ": " .. tostring(msg), 2) end
  if resp.status ~= 200 then return nil, resp.status, resp.body end
  return json.decode(resp.body)
end

--- Posts settings one by one, so that a setting this emulator does not know
-- is named in the error instead of hiding the others.
function Emulator:apply_settings(settings)
  local names = {}
  for name in pairs(settings or {}) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local value = settings[name]
    if type(value) == "table" and next(value) == nil then value = json.object() end
    local ok, status, body = self:control("settings", { [name] = value })
    if not ok then
      return nil, ("the emulator refuses setting %s = %s (HTTP %s: %s)"):format(name, json.encode(value),
        tostring(status), tostring(body))
    end
  end
  return true
end

--- A delay of every answer of one route (the operation runs first: its
-- effect is saved before the answer waits), for the run's target phase.
function Emulator:delay(route, ms)
  assert(self:control("faults", { route = route, kind = "delay", delay_ms = ms }))
end

--- Another replica's edits synchronized right before the next
-- synchronizeReplica (POST /_emulator/race): after what that request's
-- client read from the server.
function Emulator:race(replica_id, edits)
  assert(self:control("race", { service = "Parcels", replicaID = replica_id, edits = edits }))
end

function Emulator:clear_faults()
  assert(self:control("faults/clear", {}))
end

--- The server's change log of a service: `{entries =, gen =, source =}`.
-- `source` is "changelog" (GET /_emulator/changelog: every applied and
-- refused edit with what was sent) or "state" (an emulator without that
-- route: the applied edits of /_emulator/state, without attributes or
-- refusals, so only some counts can be made).
function Emulator:changelog(service)
  local log, status = self:control("changelog?service=" .. service)
  if log then return { entries = log.entries or {}, gen = log.gen, source = "changelog" } end
  if status ~= 404 then error("emulator changelog: HTTP " .. tostring(status), 2) end
  local svc = assert(self:control("state")).featureServices[service]
  return { entries = svc.log or {}, gen = svc.gen, source = "state" }
end

--- The live features of a service's layer: GlobalID -> {attributes =, geometry =}.
function Emulator:features(service, layer)
  local svc = assert(self:control("state")).featureServices[service]
  return svc.layers[tostring(layer)].features
end

return M
