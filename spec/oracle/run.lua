-- The conflict matrix against the emulator (`make oracle`; a short version
-- and its mutation check run in `make test` through spec/oracle/oracle_spec.lua).
--
--   lua5.4 spec/oracle/run.lua [CASES] [SEED] [--policy=manual|server|local] [--without-rebase]
--
-- CASES cases (10000) of spec/oracle/matrix.lua, 250 a batch, each batch a
-- fresh emulator state, replica stores made from it and a random
-- interleaving of their edits and syncs; what the server and the stores
-- end with is held against spec/oracle/model.lua under the policy (manual by default).
-- Prints the counts and a last line "oracle: ... PASS|FAIL"; exits 1 unless
-- 0 lost, 0 false conflicts, 0 silent winners and 0 mismatches.
--
-- --without-rebase is the mutation check: the store's rebase step
-- (geoservices.store.sync.rebase.hook, the attempt engine's rebase hook) is
-- replaced, in this process only, by one that sends the edits as they are,
-- before the store's journal is loaded; the oracle must then fail. Nothing
-- in the library knows of it.
local args, without_rebase, policy = {}, false, "manual"
for _, a in ipairs(arg) do
  if a == "--without-rebase" then without_rebase = true
  elseif a:match("^%-%-policy=") then policy = a:match("=(.*)$")
  else args[#args + 1] = a end
end
local CASES = tonumber(args[1]) or 10000
local SEED = tonumber(args[2]) or os.time()

if without_rebase then
  local real = require "geoservices.store.sync.rebase"
  package.loaded["geoservices.store.sync.rebase"] = setmetatable({
    hook = function(_, _, taken) return taken end,
  }, { __index = real })
end

local core = require "geoservices.core"
local driver = require "spec.oracle.driver"
local helper = require "spec.helper"
local matrix = require "spec.oracle.matrix"

local started = core.monotonic()
local emu = helper.start_emulator()
local dir = helper.tmp_dir()
local ok, counts = pcall(driver.run, { emu = emu, dir = dir, batches = matrix.batches(CASES, 250, SEED),
  policy = policy, log = function(line) io.stderr:write(line, "\n") end })
emu:stop()
os.execute("rm -rf " .. helper.shell_quote(dir))
if not ok then
  print("oracle: could not run: " .. tostring(counts))
  os.exit(1, true)
end
for _, line in ipairs(driver.report(counts)) do print(line) end
local clean = driver.clean(counts)
print(("oracle%s, policy %s (seed %d, %.0f s): %d cases, %d lost, %d false conflicts, %d silent winners: %s")
  :format(without_rebase and " without the rebase step" or "", policy, SEED, core.monotonic() - started, counts.cases,
  counts.lost,
  counts.false_conflicts, counts.silent, clean and "PASS" or "FAIL"))
os.exit(clean and 0 or 1, true)
