-- `geoservices status` and `pending` only read, so they work where the
-- store cannot be written (issue 39 item 4): on a read-only medium (a tmpfs
-- this spec mounts and remounts read-only; the specs run as root, where
-- chmod stops nothing) and on a full disk (a small tmpfs filled up).
-- A store is in WAL mode: after a clean close it is one file, but a store
-- copied while open (or left by a crash) has its last commits in
-- STORE-wal, and SQLite's immutable open would not see them; those edits
-- are listed too, with or without the STORE-shm beside them.
local geoservices = require "geoservices"
local helper = require "spec.helper"

local q = helper.shell_quote
local run = helper.run_shell

describe("status and pending on a read-only medium and a full disk (issue 39)", function()
  local world = helper.store_world()
  local mnt, src

  local function edit(st, apn)
    assert(st:add(0, { attributes = { APN = apn, OWNER = "ro" }, geometry = { x = 1, y = 2 } }))
  end

  setup(function()
    world.start()
    assert.equal("0", (run("id -u")):match("%d+"), "this spec mounts a tmpfs: run it as root (as CI does)")
    mnt = world.dir .. "/mnt"
    assert(os.execute("mkdir -p " .. q(mnt)))
    local out, ok = run("mount -t tmpfs -o size=2m tmpfs " .. q(mnt))
    assert(ok, "mounting a tmpfs: " .. out)
    local st = world.create("crew", {})
    edit(st, "RO-1")
    st:close()
    src = world.dir .. "/crew.gpkg"
  end)
  teardown(function()
    run("mount -o remount,rw " .. q(mnt))
    -- (lazily when a failed test left a connection open there: no mount outlives the spec)
    run(("umount %s || umount -l %s"):format(q(mnt), q(mnt)))
    world.stop()
  end)

  local function read_only(yes)
    local out, ok = run(("mount -o remount,%s %s"):format(yes and "ro" or "rw", q(mnt)))
    assert(ok, out)
  end

  -- a copy of the store in mnt/NAME/ with its edit RO-1 (closed cleanly), and
  -- with `open_edit` a second edit committed while a connection is still
  -- open, the files copied at that moment (`files`: the suffixes copied)
  local function place(name, open_edit, files)
    local dir = mnt .. "/" .. name
    assert(os.execute("mkdir -p " .. q(dir)))
    if not open_edit then
      assert(os.execute(("cp %s %s/"):format(q(src), q(dir))))
      return dir .. "/crew.gpkg"
    end
    local path = world.dir .. "/" .. name .. ".gpkg"
    assert(os.execute(("cp %s %s"):format(q(src), q(path))))
    local st = assert(geoservices.store.open(path))
    edit(st, open_edit)
    for _, suffix in ipairs(files) do
      assert(os.execute(("cp %s %s"):format(q(path .. suffix), q(dir .. "/crew.gpkg" .. suffix))))
    end
    st:close()
    local wal = helper.read_all(dir .. "/crew.gpkg-wal")
    assert.truthy(wal and #wal > 0, "the copy's last commit is in its -wal")
    return dir .. "/crew.gpkg"
  end

  local function assert_lists(path, apns)
    local r = helper.run_cli{ "status", path }
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find(("%d local edits? %%(Parcels: %d adds?%%)"):format(#apns, #apns)), r.out .. r.err)
    r = helper.run_cli{ "pending", path }
    assert.equal(0, r.code, r.out .. r.err)
    local lines = 0
    for line in r.out:gmatch("[^\n]+") do
      if line:find("^  add ") then lines = lines + 1 end
    end
    assert.equal(#apns, lines, r.out)
    for _, apn in ipairs(apns) do assert.truthy(r.out:find('APN="' .. apn .. '"', 1, true), r.out) end
    r = helper.run_cli{ "--json", "status", path }
    assert.equal(0, r.code, r.out .. r.err)
    local listed = helper.run_cli{ "conflicts", path } -- the advice of status: it reads too
    assert.equal(0, listed.code, listed.out .. listed.err)
    assert.truthy(listed.out:find("no conflicts", 1, true), listed.out)
    return r
  end

  it("a store closed cleanly, on a read-only medium", function()
    local path = place("clean")
    read_only(true)
    local ok, err = pcall(assert_lists, path, { "RO-1" })
    read_only(false)
    assert(ok, err)
  end)

  it("a store whose last commit is in its -wal (with its -shm), on a read-only medium", function()
    local path = place("walshm", "RO-2", { "", "-wal", "-shm" })
    read_only(true)
    local ok, err = pcall(assert_lists, path, { "RO-1", "RO-2" })
    read_only(false)
    assert(ok, err)
  end)

  it("a store whose last commit is in its -wal, without its -shm, on a read-only medium", function()
    local path = place("walonly", "RO-3", { "", "-wal" })
    read_only(true)
    local ok, err = pcall(function()
      assert_lists(path, { "RO-1", "RO-3" })
      -- said, since SQLite cannot read it in place: what was done, and the copy is gone after
      local tmp = world.dir .. "/tmpdir"
      assert(os.execute("mkdir -p " .. q(tmp)))
      local r = helper.run_cli({ "status", path }, { TMPDIR = tmp })
      assert.equal(0, r.code, r.out .. r.err)
      assert.truthy(r.err:find(path .. "-wal holds the store's last commits", 1, true), r.err)
      assert.truthy(r.err:find("read from a copy in " .. tmp, 1, true), r.err)
      assert.equal("", (run("ls -A " .. q(tmp))))
    end)
    read_only(false)
    assert(ok, err)
  end)

  it("a store on a full disk", function()
    local path = place("full")
    helper.fill_disk(mnt .. "/filler")
    local ok, err = pcall(assert_lists, path, { "RO-1" })
    os.remove(mnt .. "/filler")
    assert(ok, err)
  end)

  -- not root: a folder the user cannot write (EACCES, where root's chmod stops nothing)
  it("a store in a folder the user cannot write, read as another user", function()
    local dir = (run("mktemp -d /tmp/geoservices-theirs-XXXXXX")):gsub("%s+$", "") -- a folder others can enter
    finally(function() os.execute("rm -rf " .. q(dir)) end)
    assert(os.execute(("cp %s %s/ && chmod 755 %s && chmod 644 %s/crew.gpkg"):format(q(src), q(dir), q(dir), q(dir))))
    for _, command in ipairs{ "status", "pending", "conflicts" } do
      local out, ok = run(("cd / && setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/tmp "
        .. "GEOSERVICES_TTY=0 LUA_PATH=%s LUA_CPATH=%s lua5.4 -e %s /dev/null %s %s"):format(
        q(helper.ROOT .. "/lua/?.lua;" .. helper.ROOT .. "/lua/?/init.lua;" .. package.path),
        q(helper.ROOT .. "/build/?.so;" .. package.cpath), q('os.exit(require("geoservices.cli").main(arg))'),
        command, q(dir .. "/crew.gpkg")))
      assert(ok, command .. ": " .. out)
      if command == "pending" then assert.truthy(out:find('APN="RO-1"', 1, true), out) end
    end
  end)

  it("the store library opens a store on a read-only medium when asked to open it read-only", function()
    local path = place("lib")
    read_only(true)
    local st, err = geoservices.store.open(path, { readonly = true })
    local list = st and st:pending()
    if st then st:close() end
    read_only(false)
    assert.is_table(st, tostring(err))
    assert.equal(1, #list)
  end)
end)
