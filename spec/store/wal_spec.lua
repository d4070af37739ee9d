-- Living beside QGIS (issue 27, part 4): a store is created in WAL mode
-- (and a store made before is switched to it when opened), so a reader
-- holding the file open in a transaction (QGIS, GDAL, the sqlite3 shell)
-- never makes a sync fail; a sync waits for another writer up to its
-- busy_timeout (the library option and the CLI's --busy-timeout), then
-- fails with kind "busy" having sent nothing.
local core = require "geoservices.core"
local helper = require "spec.helper"
local store = require "geoservices.store"

local q = helper.shell_quote

local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"

local run = helper.run_shell

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- A background shell command; its pid.
local function spawn(cmd)
  local out = run(("(%s) > /dev/null 2>&1 & echo $!"):format(cmd))
  return assert(tonumber(out:match("(%d+)")), out)
end

-- A shell loop that waits until `release` exists (60 s at most): a hold the spec ends itself
-- (a hold for a time ended under a spec stalled that long).
local function until_released(release)
  return ("n=0; while [ ! -e %s ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done"):format(q(release))
end

local function journal_mode(path)
  local db = assert(core.store_open(path, { readonly = true }))
  local mode = db:rows("PRAGMA journal_mode")[1].journal_mode
  db:close()
  return mode
end

describe("replica store beside other readers and writers", function()
  local emu, dir

  local world = helper.store_world()
  setup(function()
    world.start()
    emu, dir = world.emu, world.dir
  end)
  teardown(world.stop)
  before_each(function() emu:reset() end)

  local client, create = world.client, world.create

  it("creates its file in WAL mode, and switches a store made before to it when opening it", function()
    local st = create("wal")
    local path = st.path
    st:close()
    assert.is_false(exists(path .. "-wal")) -- closed: nothing left beside it
    assert.equal("wal", journal_mode(path))
    local old = dir .. "/old.gpkg"
    assert(os.execute(("cp spec/fixtures/store/format2.gpkg %s"):format(q(old))))
    assert.equal("delete", journal_mode(old))
    assert(store.open(old)):close()
    assert.equal("wal", journal_mode(old))
  end)

  it("synchronizes while another process holds the file open in a read transaction", function()
    local st = create("reader")
    local path = st.path
    assert(st:update(0, { attributes = { GlobalID = PARCEL1, OWNER = "while read" } }))
    st:close()
    -- the sqlite3 shell in a read transaction until the spec ends it (as QGIS and GDAL hold theirs)
    local marker, release = dir .. "/reading", dir .. "/reading.release"
    local pid = spawn(("(echo 'BEGIN; SELECT count(*) FROM Parcels;'; echo '.shell touch %s'; %s; "
      .. "echo 'COMMIT;') | sqlite3 %s"):format(q(marker), until_released(release), q(path)))
    helper.wait_for("the reader to hold its transaction", function() return exists(marker) end, 5)
    st = assert(store.open(path, { busy_timeout = 0.5 }))
    local result, err = st:sync(client())
    assert.is_truthy(result, tostring(err))
    assert.equal(1, result.uploaded)
    assert.is_true(helper.process_alive(pid), "the reader still held the file")
    assert.same({}, st:pending())
    st:close()
    helper.write_file(release, "")
    helper.wait_for("the reader to end", function() return not helper.process_alive(pid) end, 10)
  end)

  it("refuses a busy_timeout that is no number of seconds, naming the option", function()
    local st = create("bad-timeout")
    st:close()
    for _, bad in ipairs{ -1, 0 / 0, math.huge, "5" } do
      local ok, err = pcall(store.open, st.path, { busy_timeout = bad })
      assert.is_false(ok)
      assert.matches("busy_timeout must be a number of seconds", tostring(err))
    end
  end)

  it("waits for another writer up to its busy_timeout, else fails busy having sent nothing", function()
    local st = create("writer")
    local path = st.path
    assert(st:update(0, { attributes = { GlobalID = PARCEL1, OWNER = "after the writer" } }))
    -- the store's own busy_timeout far beyond any stall of a loaded machine (its default 5 s
    -- left a bound of 4 s 1 s of room): a sync that waited it out, not its own, takes all of it
    local own = 10 * helper.WAIT_SCALE
    st:close()
    st = assert(store.open(path, { busy_timeout = own }))
    -- the writer holds its lock until the spec writes `release` (a hold for a time ended under a
    -- spec stalled that long, and the sync went through)
    local function hold(name)
      local marker, release = dir .. "/writing-" .. name, dir .. "/writing-" .. name .. ".release"
      local pid = spawn(("(echo 'BEGIN IMMEDIATE;'; echo '.shell touch %s'; %s; echo 'COMMIT;') | sqlite3 %s")
        :format(q(marker), until_released(release), q(path)))
      helper.wait_for("the writer to hold the lock", function() return exists(marker) end, 5)
      return pid, release
    end
    local c = client()
    local before = emu:count("synchronizeReplica")
    local pid, release = hold("first")
    local t0 = core.monotonic()
    local result, err = st:sync(c, { busy_timeout = 0.3 })
    assert.is_nil(result)
    assert.equal("busy", err.kind)
    -- its own busy_timeout, not the store's (a bound under that, not a measure of 0.3 s)
    local took = core.monotonic() - t0
    assert.truthy(took < own / 2, tostring(took))
    assert.equal(before, emu:count("synchronizeReplica")) -- nothing sent
    helper.write_file(release, "")
    helper.wait_for("the writer to end", function() return not helper.process_alive(pid) end, 10)
    pid, release = hold("second")
    t0 = core.monotonic()
    -- the writer lets go a second after t0, while the sync waits for it
    assert(os.execute(("(sleep 1; touch %s) > /dev/null 2>&1 &"):format(q(release))))
    result, err = st:sync(c, { busy_timeout = 10 })
    assert.is_truthy(result, tostring(err))
    assert.truthy(core.monotonic() - t0 >= 0.5, "it waited for the writer")
    assert.equal(1, result.uploaded)
    helper.wait_for("the writer to end", function() return not helper.process_alive(pid) end, 10)
    -- the store's own busy_timeout is back for what follows
    assert.same({ { timeout = own * 1000 } }, st.db:rows("PRAGMA busy_timeout"))
    st:close()
  end)

  it("takes --busy-timeout on the command line", function()
    local st = create("cli")
    local path = st.path
    assert(st:update(0, { attributes = { GlobalID = PARCEL1, OWNER = "from the CLI" } }))
    st:close()
    local marker = dir .. "/cli-writing"
    spawn(("(echo 'BEGIN IMMEDIATE;'; echo '.shell touch %s'; sleep 1.5; echo 'COMMIT;') | sqlite3 %s"):format(
      q(marker), q(path)))
    helper.wait_for("the writer to hold the lock", function() return exists(marker) end, 5)
    local out, ok = run(("LUA_PATH=%s LUA_CPATH=%s lua5.4 -e %s /dev/null --url %s --token alice-token sync "
      .. "--busy-timeout 10 %s"):format(q(package.path), q(package.cpath),
      q('os.exit(require("geoservices.cli").main(arg))'), q(emu.url), q(path)))
    assert(ok, out)
    st = assert(store.open(path))
    assert.same({}, st:pending())
    st:close()
  end)
end)
