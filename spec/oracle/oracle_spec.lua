-- The conflict matrix, short (issue 36): 300 cases of spec/oracle/matrix.lua
-- (2 and 3 replicas; update, move, delete, add; same or other field and
-- value; random interleavings of edits and syncs) against the emulator,
-- held against the oracle of spec/oracle/model.lua: 0 values lost, 0 false
-- conflicts, 0 silent winners, 0 mismatches; under each policy (manual, the
-- default; server; local). `make oracle` runs 10,000.
-- Its mutation check: the same matrix with the store's rebase step removed
-- (in a child process, by spec/oracle/run.lua --without-rebase: nothing in
-- the library knows of it) must fail.
local driver = require "spec.oracle.driver"
local helper = require "spec.helper"
local matrix = require "spec.oracle.matrix"

local q = helper.shell_quote

describe("the conflict matrix", function()
  local emu, dir
  setup(function()
    emu = helper.start_emulator()
    dir = helper.tmp_dir()
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. q(dir))
  end)

  it("300 cases: nothing lost, no false conflict, no silent winner, each store and the server as the oracle says",
    function()
      local seed = 36 -- a fixed seed: the same cases every run (make oracle takes a new one each time)
      local counts = driver.run{ emu = emu, dir = dir, batches = matrix.batches(300, 100, seed), policy = "manual" }
      local lines = driver.report(counts)
      print("\n" .. table.concat(lines, "\n"))
      assert.equal(300, counts.cases)
      assert.is_true(counts.expected > 50, table.concat(lines, "\n")) -- the matrix makes conflicts to find
      assert.is_true(driver.clean(counts), table.concat(lines, "\n"))
    end)

  for _, policy in ipairs{ "server", "local" } do
    it(("300 cases under the policy %s: the oracle's values kept, every conflict listed"):format(policy), function()
      local counts = driver.run{ emu = emu, dir = dir, batches = matrix.batches(300, 100, 36), policy = policy }
      local lines = driver.report(counts)
      print("\n" .. policy .. ": " .. table.concat(lines, "\n"))
      assert.is_true(counts.expected > 50, table.concat(lines, "\n"))
      assert.is_true(driver.clean(counts), table.concat(lines, "\n"))
    end)
  end

  it("fails without the rebase step (the mutation check)", function()
    local out, ok = helper.run_shell(("cd %s && LUA_PATH=%s LUA_CPATH=%s lua5.4 spec/oracle/run.lua 100 36 "
      .. "--without-rebase 2>/dev/null"):format(q(helper.ROOT), q(package.path), q(package.cpath)))
    assert.falsy(ok, out) -- it exits 1
    local lost, silent = out:match("(%d+) lost, %d+ false conflicts, (%d+) silent winners: FAIL")
    assert(lost, out)
    assert.is_true(tonumber(lost) > 0 and tonumber(silent) > 0, out)
  end)
end)
