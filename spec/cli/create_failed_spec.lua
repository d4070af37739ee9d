-- A create that fails after the server made the replica strands nothing
-- (issue 39 item 2): when the store cannot be written (a full disk), the
-- replica is unregistered at once and the command says so; when even that
-- fails, the error names the command that does it, and that command works.
-- A tmpfs of 150 KiB stands for the full disk (root, as CI runs).
local helper = require "spec.helper"

local q = helper.shell_quote

describe("replica create on a full disk", function()
  local world = helper.store_world()
  local mnt
  setup(function()
    world.start()
    assert.equal("0", (helper.run_shell("id -u")):match("%d+"), "this spec mounts a tmpfs: run it as root (as CI does)")
    mnt = helper.tmp_dir()
    local out, ok = helper.run_shell(("mount -t tmpfs -o size=150k tmpfs %s"):format(q(mnt)))
    assert(ok, out)
  end)
  teardown(function()
    helper.run_shell(("umount %s"):format(q(mnt)))
    world.stop()
  end)

  local gs = world.cli

  local function on_server(name) return world.replica_named(name) end

  it("unregisters the replica it made and says so; nothing is left", function()
    local path = mnt .. "/full-1.gpkg"
    local r = gs("replica", "create", "Parcels", "--layers", "0,1", "--name", "full-1", "--poll-interval", "0.05",
      path)
    assert.equal(1, r.code, r.out .. r.err)
    assert.truthy(r.err:find("full", 1, true), r.err)
    assert.truthy(r.err:find("was unregistered, nothing is left on the server", 1, true), r.err)
    assert.is_nil(on_server("full-1"))
    assert.is_nil(helper.read_all(path .. ".job.json"))
    assert.is_nil(helper.read_all(path))
  end)

  it("names the command that unregisters it when it cannot, and that command works", function()
    world.emu:fault{ route = "unRegisterReplica", kind = "status", status = 503 }
    local path = mnt .. "/full-2.gpkg"
    local r = gs("replica", "create", "Parcels", "--layers", "0,1", "--name", "full-2", "--poll-interval", "0.05",
      path)
    world.emu:control("faults/clear", {})
    assert.equal(1, r.code, r.out .. r.err)
    local made = on_server("full-2")
    assert.is_table(made, "the replica is still on the server")
    local cmd = r.err:match("unregister it with `geoservices ([^`]+)`")
    assert.is_string(cmd, r.err)
    local args = {}
    for w in cmd:gsub("'", ""):gmatch("%S+") do args[#args + 1] = w end
    local r2 = helper.run_cli(args)
    assert.equal(0, r2.code, cmd .. "\n" .. r2.out .. r2.err)
    assert.is_nil(on_server("full-2"))
  end)
end)
