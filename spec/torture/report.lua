-- The torture's printout: the phase table (where the kills landed), the
-- tally of each mode, the first problems of each, a line of kills per phase
-- and the total line (both read by spec/sync/torture_spec.lua).
local phases = require "spec.torture.phases"

local M = {}

local function n(v) return v or 0 end
-- how many lines of each mode's details are printed
local DETAILS = tonumber(os.getenv("TORTURE_DETAILS")) or 12

-- The counts that fail a torture, with their names in the total line.
M.FAILING = {
  { "lost", "lost" }, { "false_conflicts", "false conflicts" }, { "false_rejections", "false rejections" },
  { "duplicated", "duplicated" },
  { "reapplied", "re-applied" }, { "stale", "stale" }, { "downloaded_twice", "downloaded twice" },
  { "wrong", "wrong values" }, { "stuck", "stuck" }, { "errors", "errors" },
}

-- The tally table's columns: heading, tally key ("runs": the mode's runs).
local COLUMNS = {
  { "runs", "runs" }, { "adds", "adds" }, { "updates", "updates" }, { "deletes", "deletes" },
  { "B edits", "b_updates" }, { "B first", "b_first" }, { "B raced", "raced" }, { "SQL upd", "sql_updates" },
  { "lost", "lost" }, { "folded", "folded" }, { "false confl", "false_conflicts" },
  { "false rej", "false_rejections" },
  { "dup adds", "duplicated" }, { "re-applied", "reapplied" }, { "stale", "stale" },
  { "late", "late_imports" }, { "dl twice", "downloaded_twice" }, { "wrong", "wrong" }, { "stuck", "stuck" },
  { "errors", "errors" },
  { "conflicts", "conflicts" }, { "reported", "reported" }, { "upd resent", "resent_updates" },
  { "del resent", "resent_deletes" },
}

--- The sum of the failing counts of every mode (0: the torture passed).
function M.failures(results)
  local sum = 0
  for _, r in ipairs(results) do
    for _, f in ipairs(M.FAILING) do sum = sum + n(r.tally[f[1]]) end
    if r.tally.degraded then sum = sum + 1 end
  end
  return sum
end

local function tally_table(results)
  local out = {}
  local head = { ("%-38s"):format("mode") }
  for _, c in ipairs(COLUMNS) do head[#head + 1] = (" %" .. math.max(#c[1], 4) .. "s"):format(c[1]) end
  out[1] = table.concat(head)
  for _, r in ipairs(results) do
    local line = { ("%-38s"):format(r.mode.label) }
    for _, c in ipairs(COLUMNS) do
      local v = c[2] == "runs" and r.runs or r.tally[c[2]]
      line[#line + 1] = (" %" .. math.max(#c[1], 4) .. "d"):format(n(v))
    end
    out[#out + 1] = table.concat(line)
  end
  return table.concat(out, "\n")
end

local function kills_line(results)
  local kills, emulator = {}, 0
  for _, r in ipairs(results) do
    for phase, c in pairs(r.counts) do
      kills[phase] = n(kills[phase]) + n(c.child) + n(c.emulator)
      emulator = emulator + n(c.emulator)
    end
  end
  local cells = {}
  for _, phase in ipairs(phases.ORDER) do
    cells[#cells + 1] = ("%s %d"):format(phases.TITLES[phase], n(kills[phase]))
  end
  return table.concat(cells, ", ") .. (", emulator mid-request %d"):format(emulator)
end

--- Prints everything; `info`: target, title, runs, seed, journal_off, seconds.
function M.print(results, info)
  print(("torture %s: %d runs over %d modes, seed %d%s"):format(info.title, info.runs, #results, info.seed,
    info.journal_off and ", JOURNAL FORGETTING (TORTURE_FORGET_JOURNAL=1)" or ""))
  print("kills by phase (of the client; of the emulator with a request of the client in flight, in parentheses):")
  local rows = {}
  for _, r in ipairs(results) do rows[#rows + 1] = { label = r.mode.label, counts = r.counts } end
  print(phases.format(rows))
  print("tally by mode (from the server's change log; late: an update sent before B's edit, imported after it by "
    .. "the job, not counted as stale):")
  print(tally_table(results))
  for _, r in ipairs(results) do
    -- the failures first (a failure's lines follow it, indented), then the notes
    local problems, notes, into = {}, {}, nil
    for _, p in ipairs(r.tally.problems or {}) do
      if not (p:match("^%s") and into) then into = p:match("^note:") and notes or problems end
      into[#into + 1] = p
    end
    table.move(notes, 1, #notes, #problems + 1, problems)
    if #problems > 0 then
      print(("details of %s (%d; \"note:\" lines fail nothing):"):format(r.mode.label, #problems))
      for i = 1, math.min(#problems, DETAILS) do print("  " .. problems[i]) end
      if #problems > DETAILS then
        print(("  ... and %d more (TORTURE_DETAILS=N shows N)"):format(#problems - DETAILS))
      end
    end
    if r.tally.degraded then print("  " .. r.tally.degraded) end
  end
  print(("torture %s kills: %s"):format(info.target, kills_line(results)))
  local sql, first, raced = 0, 0, 0
  for _, r in ipairs(results) do
    sql, first, raced = sql + n(r.tally.sql_updates), first + n(r.tally.b_first), raced + n(r.tally.raced)
  end
  -- (no comma inside a name: torture_spec reads the line as "name N, name N")
  print(("torture %s edits: by SQL UPDATE %d, B's before A's killed sync %d, A's update refused after B's racing "
    .. "delete and reported %d"):format(info.target, sql, first, raced))
  local cells, runs = {}, 0
  for _, r in ipairs(results) do runs = runs + r.runs end
  for _, f in ipairs(M.FAILING) do
    local sum = 0
    for _, r in ipairs(results) do sum = sum + n(r.tally[f[1]]) end
    cells[#cells + 1] = ("%s %d"):format(f[2], sum)
  end
  print(("torture %s total: runs %d, %s, seed %d, %.0f s: %s"):format(info.target, runs, table.concat(cells, ", "),
    info.seed, info.seconds, M.failures(results) == 0 and "PASS" or "FAIL"))
end

return M
