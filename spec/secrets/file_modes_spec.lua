-- Which mode each file the library writes has, and that a save never
-- changes it (issue 30). Files that may hold a token are 0600: the token
-- `geoservices login` stores, the emulator's state file (its tokens). Every
-- other file is made as the process's umask says, 0644 with the usual 022:
-- a replica state, its journal, a sync's changes (opts.output). A file that
-- exists keeps the mode it has across every save (a state file turned 0600
-- after its first save).
local geoservices = require "geoservices"
local core = require "geoservices.core"
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local q = helper.shell_quote
local REPLICA = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"

local function mode(path)
  local p = io.popen("stat -c %a " .. q(path) .. " 2>/dev/null")
  local text = p:read("a")
  p:close()
  return text:match("%d+")
end

-- A new file's mode under this process's umask (0644 under 022).
local function new_file_mode()
  local p = io.popen("umask")
  local umask = tonumber(p:read("a"):match("%d+"), 8)
  p:close()
  return ("%o"):format(438 & ~umask) -- 0666
end

describe("file modes", function()
  local dir
  before_each(function() dir = helper.tmp_dir() end)
  after_each(function() os.execute("rm -rf " .. q(dir)) end)

  it("write_file_atomic: a new file as the umask says, an existing one keeps its mode, a given mode is kept", function()
    local path = dir .. "/a.json"
    assert(core.write_file_atomic(path, "1"))
    assert.equal(new_file_mode(), mode(path))
    for _, m in ipairs{ "640", "604", "600", "644" } do
      os.execute("chmod " .. m .. " " .. q(path))
      assert(core.write_file_atomic(path, "2"))
      assert.equal(m, mode(path))
    end
    os.execute("chmod 644 " .. q(path))
    assert(core.write_file_atomic(path, "secret", tonumber("600", 8)))
    assert.equal("600", mode(path))
    assert.equal("secret", helper.read_all(path))
  end)

  it("a replica state file: made as the umask says, the same mode after every save", function()
    local path = dir .. "/crew.json"
    local r = assert(geoservices.replica(path, { service = "Parcels", replicaID = REPLICA, replicaServerGen = 1 }))
    assert.equal(new_file_mode(), mode(path))
    assert(r:save())
    assert.equal(new_file_mode(), mode(path))
    -- one written by hand (0644, or whatever its owner chose) stays so
    local by_hand = dir .. "/by-hand.json"
    helper.write_file(by_hand, json.encode{ service = "Parcels", replicaID = REPLICA, replicaServerGen = 1 })
    for _, m in ipairs{ "644", "640" } do
      os.execute("chmod " .. m .. " " .. q(by_hand))
      local opened = assert(geoservices.replica(by_hand))
      assert(opened:begin_attempt(json.array(), {}))
      assert.equal(new_file_mode(), mode(by_hand .. ".journal"))
      assert(opened:save())
      assert.equal(m, mode(by_hand))
    end
  end)

  describe("against the emulator", function()
    local emu, state_file
    setup(function()
      state_file = helper.tmp_name()
      os.remove(state_file)
      emu = helper.start_emulator{ args = { "--state-file", state_file } }
    end)
    teardown(function()
      emu:stop()
      os.remove(state_file)
      os.remove(state_file .. ".journal")
    end)

    it("a sync's state and its changes (opts.output) as the umask says; the stored login token 0600", function()
      local c = geoservices.client{ url = emu.url, token = "admin-token" }
      local path = dir .. "/crew.json"
      helper.write_file(path, json.encode{ service = "Parcels", replicaID = REPLICA, replicaServerGen = 1 })
      os.execute("chmod 644 " .. q(path))
      assert(c:sync(path, nil, { output = dir .. "/changes.json", params = { transportType = "url" } }))
      assert.equal("644", mode(path))
      assert.equal(new_file_mode(), mode(dir .. "/changes.json"))
      local r = helper.run_cli({ "--url", emu.url, "--username", "admin", "--password-file",
                                 dir .. "/password", "login" }, { XDG_CONFIG_HOME = dir .. "/config" })
      assert.equal(2, r.code) -- no password file yet: nothing stored
      helper.write_file(dir .. "/password", "admin-pass1\n")
      r = helper.run_cli({ "--url", emu.url, "--username", "admin", "--password-file", dir .. "/password",
                           "login" }, { XDG_CONFIG_HOME = dir .. "/config" })
      assert.equal(0, r.code, r.err)
      local p = io.popen("find " .. q(dir .. "/config") .. " -type f")
      local stored = p:read("l")
      p:close()
      assert.truthy(stored, "no token stored")
      assert.equal("600", mode(stored))
    end)

    it("the emulator's state file (it holds tokens) is 0600, and stays so", function()
      emu:reset() -- a control request: the state is saved after it
      helper.wait_for("the emulator's state file", function() return mode(state_file) end, 5)
      assert.equal("600", mode(state_file))
      os.execute("chmod 644 " .. q(state_file))
      emu:reset()
      assert.equal("600", mode(state_file))
    end)
  end)
end)
