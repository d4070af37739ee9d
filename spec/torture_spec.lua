-- The short version of `make torture` (spec/torture/run.lua): client
-- processes killed with SIGKILL at random moments, the emulator killed and
-- restarted in a share of the runs; nothing duplicated, lost or skipped.
local helper = require "spec.helper"

local q = helper.shell_quote

describe("crash torture (short)", function()
  it("kills clients and the emulator at random; every edit ends on the server exactly once", function()
    local out = helper.tmp_name()
    local cmd = ("cd %s && LUA_PATH=%s LUA_CPATH=%s lua5.4 spec/torture/run.lua 15 > %s 2>&1"):format(
      q(helper.ROOT), q(package.path), q(package.cpath), q(out))
    local ok = os.execute(cmd)
    local text = helper.read_all(out) or ""
    os.remove(out)
    assert.is_true(ok == true, text)
    local tally = text:match("torture: runs [^\n]+")
    assert.truthy(tally, text)
    assert.truthy(tally:find("duplicates 0, lost 0, skipped by B 0, downloaded twice by B 0", 1, true), tally)
    assert.truthy(tally:find("runs 15,", 1, true), tally)
  end)

  it("kills store syncs at random; every add ends in both stores and on the server exactly once", function()
    local out = helper.tmp_name()
    local cmd = ("cd %s && LUA_PATH=%s LUA_CPATH=%s lua5.4 spec/torture/run.lua 8 %d store > %s 2>&1"):format(
      q(helper.ROOT), q(package.path), q(package.cpath), os.time(), q(out))
    local ok = os.execute(cmd)
    local text = helper.read_all(out) or ""
    os.remove(out)
    assert.is_true(ok == true, text)
    local tally = text:match("store torture seed [^\n]+")
    assert.truthy(tally, text)
    assert.truthy(tally:find(": 8 runs,", 1, true), tally)
    assert.truthy(tally:find(", 0 problems", 1, true), tally)
  end)
end)
