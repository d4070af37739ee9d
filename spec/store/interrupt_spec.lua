-- Ctrl-C while the store runs one long SQL statement (issue 38): an index
-- built over 1M rows, the settling of repeated GlobalIDs, the R-tree packed
-- at the commit run for seconds without coming back to Lua, where the
-- interpreter's Ctrl-C ("interrupted!", lua.c's hook) waits; the command
-- went on to the end of the statement, and a statement that ran for
-- minutes could not be stopped. Now the store's progress handler stops the
-- statement as soon as a Ctrl-C waits, and the error is the Ctrl-C's.
-- Under a real pseudo-terminal (spec/support/pty_ctrl_c.py types Ctrl-C).
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote

describe("Ctrl-C during a long statement of the store (issue 38)", function()
  local dir
  setup(function() dir = helper.tmp_dir() end)
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  -- Runs `script` under a pty, types Ctrl-C once `pattern` shows; its exit and output.
  local function ctrl_c(pattern, script)
    local path = dir .. "/script.lua"
    helper.write_file(path, script)
    local p = io.popen(("cd %s && "
      .. helper.PYTHON .. " spec/support/pty_ctrl_c.py %s 20 env LUA_PATH=%s LUA_CPATH=%s lua5.4 %s %s")
      :format(q(helper.ROOT), q(pattern), q(package.path), q(package.cpath), q(path), q(dir .. "/s.db")))
    local result = json.decode(p:read("a"))
    p:close()
    assert(result.matched, "never showed " .. pattern .. ": " .. result.output)
    return result
  end

  it("stops a statement of minutes at once, and the error is the Ctrl-C's", function()
    -- 300M rows of a recursive query: minutes; the pty gives it 20 s after the Ctrl-C
    local r = ctrl_c("counting", [[
local core = require "geoservices.core"
local db = assert(core.store_open(arg[1], { create = true }))
io.write("counting\n")
io.stdout:flush()
local rows = db:rows("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000000) "
  .. "SELECT count(*) AS n FROM c")
print("counted", rows and rows[1].n)
]])
    assert.equal(json.null, r.signal, "killed after 20 s: the Ctrl-C did not stop the statement\n" .. r.output)
    assert.equal(1, r.exit, r.output) -- lua.c: an error, "interrupted!"
    assert.truthy(r.output:find("interrupted!", 1, true), r.output)
    assert.falsy(r.output:find("counted", 1, true), r.output)
  end)

  it("raises it once: the code that catches it runs on, the store usable", function()
    local r = ctrl_c("counting", [[
local core = require "geoservices.core"
local db = assert(core.store_open(arg[1], { create = true }))
io.write("counting\n")
io.stdout:flush()
local ok, err = pcall(db.rows, db, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
  .. "WHERE x < 300000000) SELECT count(*) AS n FROM c")
print("caught", ok, err)
local rows = assert(db:rows("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000) "
  .. "SELECT count(*) AS n FROM c"))
for _ = 1, 100000 do local _ = {} end -- Lua code after it: no second interruption
print("then", rows[1].n)
]])
    assert.equal(json.null, r.signal, r.output)
    assert.equal(0, r.exit, r.output)
    assert.truthy(r.output:find("caught\tfalse\tinterrupted!", 1, true), r.output)
    assert.truthy(r.output:find("then\t100000", 1, true), r.output)
  end)

  it("calls on_tick while a long statement runs, so a display moves; the store is not usable from it", function()
    local core = require "geoservices.core"
    local db = assert(core.store_open(dir .. "/tick.db", { create = true }))
    local ticks, used = 0, nil
    db:on_tick(function()
      ticks = ticks + 1
      used = used or select(2, pcall(db.rows, db, "SELECT 1"))
    end)
    local sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) "
      .. "SELECT count(*) AS n FROM c"
    local rows = assert(db:rows(sql))
    assert.equal(3000000, rows[1].n)
    assert.is_true(ticks >= 5, ticks .. " ticks")
    assert.matches("cannot be used from its on_tick", used)
    db:on_tick(nil)
    ticks = 0
    assert(db:rows(sql))
    assert.equal(0, ticks)
    db:close()
  end)
end)
