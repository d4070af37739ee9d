-- `geoservices emulator --help` ends with examples (issue 39 item 6), and
-- each one starts an emulator as written (its fixed port made a free one,
-- its state file a scratch one), which is then stopped by PID.
local helper = require "spec.helper"
local main = require "geoservices.emulator.main"

local q = helper.shell_quote
local CLI = 'os.exit(require("geoservices.cli").main(arg))'

describe("the emulator's --help", function()
  it("ends with examples and names no placeholder", function()
    local r = helper.run_cli{ "emulator", "--help" }
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find("\nExamples:\n  geoservices emulator --port 8080\n", 1, true), r.out)
    assert.falsy(r.out:find("{base_url}", 1, true), r.out)
    for _, e in ipairs(main.EXAMPLES) do
      assert.truthy(r.out:find("geoservices emulator " .. e[1], 1, true), e[1])
    end
  end)

  for _, e in ipairs(main.EXAMPLES) do
    it("starts as its example says: " .. e[1], function()
      local dir = helper.tmp_dir()
      finally(function() os.execute("rm -rf " .. q(dir)) end)
      local args = {}
      for w in e[1]:gmatch("%S+") do
        if w == "/tmp/emu.json" then w = dir .. "/emu.json" end
        args[#args + 1] = w
      end
      for i, w in ipairs(args) do
        if w == "--port" then args[i + 1] = "0" end
      end
      args[#args + 1] = "--exit-with"
      args[#args + 1] = tostring(helper.own_pid())
      local quoted = {}
      for i, a in ipairs(args) do quoted[i] = q(a) end
      local log, pidfile = dir .. "/log", dir .. "/pid"
      assert(os.execute(("cd %s && { LUA_PATH=%s LUA_CPATH=%s lua5.4 -e %s /dev/null emulator %s >%s 2>&1 & "
        .. "echo $! >%s; }"):format(q(helper.ROOT), q(package.path), q(package.cpath), q(CLI),
          table.concat(quoted, " "), q(log), q(pidfile))))
      local pid = helper.wait_for("pid", function() return tonumber(helper.read_all(pidfile)) end, 5)
      finally(function() os.execute("kill -9 " .. pid .. " 2>/dev/null") end)
      local url = helper.wait_for("the listening line", function()
        local text = helper.read_all(log) or ""
        if not helper.process_alive(pid) then error("exited: " .. text) end
        return text:match("(http://127%.0%.0%.1:%d+/server)")
      end, 10)
      local c = require("geoservices").client{ url = url, token = "alice-token", timeout = 10 }
      local replicas, err = c:list_replicas("Parcels")
      c:close()
      assert.is_table(replicas, tostring(err)) -- it answers as a server

      os.execute("kill -INT " .. pid)
      helper.wait_for("the emulator to stop", function() return not helper.process_alive(pid) end, 10)
    end)
  end
end)
