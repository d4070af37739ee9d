-- The crash torture (`make torture`; a short version and its mutation check
-- run in `make test` through spec/sync/torture_spec.lua).
--
--   lua5.4 spec/torture/run.lua [RUNS] [SEED] [sync|store] [MODE...]
--
-- `sync`: client:sync with a state file (spec/torture/sync_mode.lua);
-- `store`: the replica store (spec/torture/store.lua). RUNS runs (200) are
-- spread over the modes: the emulator in its documented mode with
-- rollback_default true and false, each with a sync request over URL
-- transport, a sync request with embedded answers, and an async job (always
-- URL); then each server capability set of issue 34 (spec/torture/modes.lua:
-- perLayer only without rollback support, perReplica only with rollback
-- forced, a gateway answering 504 or dropping the answer while the server
-- applies the request 2 s later), each with a sync request and an async
-- job. MODE arguments keep only the modes whose label contains them all
-- ("rollback_default=false", "async", "gateway"...). In every run a process
-- is killed in a chosen phase (spec/torture/phases.lua), the emulator too in
-- some; the verdict comes from the server's own change log
-- (spec/torture/ledger.lua). Prints the phase table and the tally of each
-- mode, and a last line "torture <target> total: ...: PASS|FAIL"; exits 1
-- on any lost, duplicated, re-applied, stale, twice-downloaded or wrong
-- edit, or a mode that could not run.
--
-- TORTURE_WINDOW_SCALE=F in the environment multiplies each kill's delay
-- after its phase's marker (spec/torture/phases.lua): 0 kills at the
-- marker itself, where a loaded machine's kills land (the emulator killed
-- before it read the request: an add held one sync, then folded with the
-- next run's edit of its feature, as spec/store/fold_spec.lua shows).
--
-- TORTURE_DETAILS=N prints N lines of each mode's details (12); TORTURE_TRACE=<file>
-- appends, after each of A's syncs and children, A's journal (client:sync), or
-- store A's attempt, queue and generations beside the server's (store).
--
-- TORTURE_FORGET_JOURNAL=1 in the environment is the mutation check's: the
-- children's syncs get a journal that forgets each attempt as it leaves
-- (spec/torture/forgetful.lua), and the torture must fail.
local core = require "geoservices.core"
local mode_list = require "spec.torture.modes"
local report = require "spec.torture.report"

local RUNS = tonumber(arg[1]) or 200
local SEED = tonumber(arg[2]) or os.time()
local TARGET = arg[3] or "sync"
local filters = {}
for i = 4, #arg do filters[#filters + 1] = arg[i] end

local targets = { sync = "spec.torture.sync_mode", store = "spec.torture.store" }
if not targets[TARGET] then
  io.stderr:write("usage: lua5.4 spec/torture/run.lua [RUNS] [SEED] [sync|store] [MODE...]\n")
  os.exit(2)
end
local scenario = require(targets[TARGET])
math.randomseed(SEED)

local modes = mode_list.select(filters)
if #modes == 0 then
  io.stderr:write("no mode matches ", table.concat(filters, " "), "\n")
  os.exit(2)
end

local journal_off = require("spec.torture.forgetful").enabled()
local started = core.monotonic()
local results = {}
for i, mode in ipairs(modes) do
  local runs = RUNS // #modes + (i <= RUNS % #modes and 1 or 0)
  local t0 = core.monotonic()
  local ok, result = pcall(scenario.run_mode, mode, runs)
  if not ok then
    result = { mode = mode, counts = {}, tally = { problems = { "the torture itself failed: " .. tostring(result) },
                                                   errors = 1 } }
  end
  result.runs = runs
  results[#results + 1] = result
  io.stderr:write(("torture %s: %s, %d runs, %.0f s\n"):format(TARGET, mode.label, runs, core.monotonic() - t0))
end

report.print(results, { target = TARGET, title = scenario.TITLE, runs = RUNS, seed = SEED, journal_off = journal_off,
                        seconds = core.monotonic() - started })
os.exit(report.failures(results) == 0 and 0 or 1, true) -- closing the state removes the scratch directory
