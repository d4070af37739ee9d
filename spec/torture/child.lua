-- A torture child process (spec/support/sync_child.lua or store_child.lua)
-- with phase markers on (spec/torture/markers.lua): started in the
-- background, watched through its output file, killed with SIGKILL.
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local q = helper.shell_quote

local Child = {}
Child.__index = Child

local M = {}

local serial = 0

--- Starts `script` with `args`; `env` adds environment variables (the
-- markers are always on).
function M.start(dir, script, args, env)
  serial = serial + 1
  local out, pidfile = ("%s/child-%d.out"):format(dir, serial), ("%s/child-%d.pid"):format(dir, serial)
  local vars = { "TORTURE_MARKERS=1" }
  for k, v in pairs(env or {}) do vars[#vars + 1] = k .. "=" .. q(v) end
  table.sort(vars)
  local quoted = {}
  for i, a in ipairs(args) do quoted[i] = q(a) end
  local cmd = ("%s LUA_PATH=%s LUA_CPATH=%s lua5.4 %s %s > %s 2>&1 & echo $! > %s"):format(
    table.concat(vars, " "), q(package.path), q(package.cpath), script, table.concat(quoted, " "), q(out), q(pidfile))
  assert(os.execute(cmd))
  local pid = helper.wait_for("child pid", function() return tonumber(helper.read_all(pidfile)) end, 5)
  os.remove(pidfile)
  return setmetatable({ pid = pid, out = out }, Child)
end

--- The markers printed so far, in order.
function Child:markers()
  local list = {}
  for name in (helper.read_all(self.out) or ""):gmatch("@(%a+)\n") do list[#list + 1] = name end
  return list
end

function Child:alive()
  return helper.process_alive(self.pid)
end

--- Waits until the child prints `marker` (true), exits first (false), or
-- `timeout` seconds pass (false).
function Child:wait_marker(marker, timeout)
  local found = false
  helper.wait_for("child marker " .. marker, function()
    local text = helper.read_all(self.out) or ""
    if text:find("@" .. marker .. "\n", 1, true) then found = true return true end
    return not self:alive()
  end, timeout or 60)
  return found
end

function Child:kill()
  os.execute("kill -9 " .. self.pid .. " 2>/dev/null")
  self:wait_exit(10)
end

function Child:wait_exit(timeout)
  local pid = self.pid
  helper.wait_for("child exit", function() return not helper.process_alive(pid) end, timeout or 180)
end

--- The JSON line it printed last (its outcome), or nil (killed).
function Child:outcome()
  local line = (helper.read_all(self.out) or ""):match("\n({[^\n]*})%s*$")
  return line and json.decode(line)
end

--- Its whole output (for an error message).
function Child:text()
  return helper.read_all(self.out) or ""
end

return M
