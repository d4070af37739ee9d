-- Local file failures are kind "io" with the path and the cause in words
-- (issue 39 item 4): a full disk while a result file downloads (it was
-- "network"), a store on a read-only file system (it was "unable to open
-- database file"), a full disk under the store. Each on a small tmpfs this
-- spec mounts on a scratch folder and unmounts (the specs run as root).
local geoservices = require "geoservices"
local helper = require "spec.helper"

local q = helper.shell_quote
local run = helper.run_shell

describe("local file failures are io errors with the path and the cause (issue 39 item 4)", function()
  local world = helper.store_world()
  local mnt

  setup(function()
    world.start()
    mnt = world.dir .. "/mnt"
    assert(os.execute("mkdir -p " .. q(mnt)))
    local out, ok = run("mount -t tmpfs -o size=600k tmpfs " .. q(mnt))
    assert(ok, "mounting a tmpfs (the specs run as root): " .. out)
  end)
  teardown(function()
    run("umount " .. q(mnt))
    world.stop()
  end)

  local function fill()
    helper.fill_disk(mnt .. "/filler")
  end
  local function unfill() os.remove(mnt .. "/filler") end

  it("a result file saved to a full disk", function()
    fill()
    local path = mnt .. "/result.json"
    local res, err = world.client():create_replica("Parcels", { replicaName = "full-disk", layers = { 0 },
      syncModel = "perReplica" }, { output = path, poll_interval = 0.05 })
    unfill()
    assert.is_nil(res)
    assert.equal("io", err.kind, tostring(err))
    assert.equal(path, err.path)
    assert.truthy(tostring(err):find("No space left on device", 1, true), tostring(err))
    assert.truthy(tostring(err):find(path, 1, true), tostring(err))
  end)

  it("a store on a read-only file system, and one whose disk is full", function()
    local path = mnt .. "/store.gpkg"
    local st = world.create("ro", {})
    st:close()
    assert(os.execute(("cp %s %s"):format(q(world.dir .. "/ro.gpkg"), q(path))))
    st = assert(geoservices.store.open(path))
    fill()
    local ok, err
    for i = 1, 200 do
      ok, err = st:add(0, { attributes = { APN = "full-" .. i, OWNER = string.rep("y", 200) },
                            geometry = { x = 1, y = 2 } })
      if not ok then break end
    end
    st:close()
    unfill()
    assert.is_nil(ok)
    assert.equal("io", err.kind, tostring(err))
    assert.equal(path, err.path)
    assert.truthy(tostring(err):find("disk is full", 1, true) or tostring(err):find("No space left", 1, true),
      tostring(err))
    local out, mounted = run("mount -o remount,ro " .. q(mnt))
    assert(mounted, out)
    local opened
    opened, err = geoservices.store.open(path)
    run("mount -o remount,rw " .. q(mnt))
    if opened then opened:close() end
    assert.is_nil(opened)
    assert.equal("io", err.kind, tostring(err))
    assert.equal(path, err.path)
    assert.truthy(tostring(err):find("Read-only file system", 1, true), tostring(err))
  end)
end)
