-- The short version of `make torture` (spec/torture/run.lua) and its
-- mutation check. Client processes are killed with SIGKILL in every phase
-- of a synchronization (before the request leaves, while the server
-- imports, while a job is polled, while the result downloads, while the
-- store commits), the emulator too with a request in flight, in each mode;
-- the server's own change log must show every edit applied exactly once.
-- Then the same torture with a journal that forgets each attempt as it
-- leaves (TORTURE_FORGET_JOURNAL=1: the children give the sync the wrapper
-- of spec/torture/forgetful.lua as opts.journal) must report lost or
-- duplicated edits: the tally can fail.
--
-- Two groups of modes (spec/torture/modes.lua). By default (`make test`,
-- CI: about 60 s alone) the documented server: rollback_default true and
-- false, sync over URL, sync embedded, async. TORTURE_MODES=capabilities
-- (`make torture-modes`, in `make test-slow`) the server capability sets of
-- issue 34 instead: WildfireSync, perReplica only with rollback forced (in
-- these two B's delete races A's update: a real refusal, which must be
-- reported and never counted as a false rejection) and a gateway that
-- answers 504 or drops the answer while the server applies the request
-- late; each with a sync request and an async job. Three runs in each mode.
local helper = require "spec.helper"

local q = helper.shell_quote

local GROUP = os.getenv("TORTURE_MODES") or "documented"
assert(GROUP == "documented" or GROUP == "capabilities", "TORTURE_MODES: documented or capabilities")
-- three runs in each mode: the odd ones with a feature to spare let B edit one first
local RUNS = GROUP == "documented" and 18 or 24

-- The counts of a line "name N, name N, ...".
local function counts_of(line)
  local counts = {}
  for segment in line:gmatch("[^,:]+") do
    local name, n = segment:match("^%s*(.-)%s+(%d+)$")
    if name then counts[name] = tonumber(n) end
  end
  return counts
end

-- Runs the torture; returns whether it passed, its output, the total line's
-- counts (and the line) and the kills line's counts.
local function torture(target, env)
  local out = helper.tmp_name()
  local seed = os.time()
  local cmd = ("cd %s && %s LUA_PATH=%s LUA_CPATH=%s lua5.4 spec/torture/run.lua %d %d %s %s > %s 2>&1"):format(
    q(helper.ROOT), env or "", q(package.path), q(package.cpath), RUNS, seed, target, GROUP, q(out))
  local ok = os.execute(cmd)
  local text = helper.read_all(out) or ""
  os.remove(out)
  local total = text:match("torture " .. target .. " total: [^\n]+")
  local kills = text:match("torture " .. target .. " kills: [^\n]+")
  assert.truthy(total and kills, text)
  return ok == true, text, counts_of(total), total, counts_of(kills)
end

describe(("crash torture (short, %s modes)"):format(GROUP), function()
  for _, target in ipairs{ "sync", "store" } do
    it(target .. ": kills in every phase, the emulator's too; every edit on the server exactly once", function()
      local ok, text, counts, line, kills = torture(target)
      assert.is_true(ok, text)
      assert.equal(RUNS, counts.runs, line)
      for _, name in ipairs{ "lost", "false conflicts", "false rejections", "duplicated", "re-applied", "stale",
                             "downloaded twice", "wrong values", "stuck", "errors" } do
        assert.equal(0, counts[name], name .. ": " .. text)
      end
      for _, phase in ipairs{ "before send", "job submitted", "server imports", "polling", "downloading",
                              "commit" } do
        assert.is_true(kills[phase] > 0, "no kill " .. phase .. ":\n" .. text)
      end
      local edits = counts_of(text:match("torture " .. target .. " edits: [^\n]+") or "")
      if target == "store" then
        -- the store's blind spots: updates made by SQL (GDAL, QGIS), another crew's change
        -- downloaded by the killed sync itself
        assert.is_true((edits["by SQL UPDATE"] or 0) > 0, text)
        assert.is_true((edits["B's before A's killed sync"] or 0) > 0, text)
      end
      if GROUP == "capabilities" then
        -- the real refusals: B's delete raced A's update (both capability sets), the server
        -- refused it and A's user was told
        assert.is_true((edits["A's update refused after B's racing delete and reported"] or 0) >= 2, text)
      end
      assert.is_true(kills["emulator mid-request"] > 0, "the emulator was never killed mid-request:\n" .. text)
    end)

    -- the mutation check, in the documented group (CI): the capability modes' journal is the same
    if GROUP == "documented" then
      it(target .. ": with a journal that forgets, the same torture reports lost or duplicated edits", function()
        local ok, text, counts = torture(target, "TORTURE_FORGET_JOURNAL=1")
        assert.is_false(ok, "the torture passed with a journal that forgets: either its tally cannot fail, or the "
          .. "sync does not use the journal it is given (opts.journal)\n" .. text)
        assert.is_true(counts.lost + counts.duplicated + counts["re-applied"] > 0, text)
        -- what stops it is the missing journal, never the copy check refusing store A
        assert.is_nil(text:find("synchronized by another copy", 1, true), text)
      end)
    end
  end
end)
