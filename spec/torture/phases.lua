-- Where a torture kill lands: the phases of a synchronization, how a run
-- aims at one (a pause of the child, a delay of the emulator's answers,
-- longer job statuses) and, from the markers the child printed before it
-- died, where the kill really landed.
local M = {}

--- The phases, in the order of a synchronization (the columns of the table).
M.ORDER = { "send", "submit", "import", "poll", "download", "commit", "verify", "missed" }
M.TITLES = {
  send = "before send", submit = "job submitted", import = "server imports", poll = "polling",
  download = "downloading",
  commit = "commit", verify = "verifying", missed = "missed",
}

--- The phases a mode can aim at: polling only with an async job, and with
-- one "submit": its submission has left, the job runs, its answer (the
-- status address) is not back yet.
function M.targets(mode)
  if mode.async then return { "send", "submit", "import", "poll", "download", "commit" } end
  return { "send", "import", "download", "commit" }
end

--- How a run aims at `target` in `mode`: `pause` (the child's marker to
-- pause at), `marker` (the parent kills after it appears), `window` (the
-- kill's delay after the marker, seconds: [lo, hi]), `delay` (an emulator
-- delay of one route's answers, {route =, ms =}), `settings` (temporary
-- emulator settings), `in_flight` (a request of the child is held by the
-- emulator then: the emulator itself may be killed).
function M.plan(target, mode)
  if target == "send" then
    return { pause = "send", marker = "send", window = { 0.02, 0.3 } }
  elseif target == "submit" then
    -- the job is made at once and runs; the answer that names it waits
    return { marker = "sent", window = { 0.02, 0.4 }, delay = { route = "synchronizeReplica", ms = 500 },
             in_flight = true }
  elseif target == "import" and not mode.async then
    -- the edits are applied and saved at once; the answer waits
    return { marker = "sent", window = { 0.05, 0.4 }, delay = { route = "synchronizeReplica", ms = 500 },
             in_flight = true }
  elseif target == "import" then
    -- the job: InProgress, then ImportChanges (the edits applied on entering it)
    return { marker = "answered", window = { 0.0, 0.55 },
             settings = { job_phase_ms = { InProgress = 300, ImportChanges = 300 } } }
  elseif target == "poll" then
    return { marker = "poll", window = { 0.03, 0.25 }, delay = { route = "jobs", ms = 300 }, in_flight = true }
  elseif target == "download" and mode.transport == "embedded" and not mode.async then
    return { pause = "receiving", marker = "receiving", window = { 0.02, 0.3 } }
  elseif target == "download" then
    return { marker = "download", window = { 0.03, 0.4 }, delay = { route = "results", ms = 500 }, in_flight = true }
  elseif target == "verify" then
    -- an unknown outcome being read from the server (the layer's query)
    return { marker = "verify", window = { 0.03, 0.25 }, delay = { route = "query", ms = 300 }, in_flight = true }
  elseif target == "commit" then
    return { pause = "commit", marker = "commit", window = { 0.02, 0.3 } }
  end
  error("no plan for phase " .. tostring(target))
end

--- The phase a kill landed in, from the markers printed before it (the
-- last one that is not "failed": a failed request leaves the phase as it was).
function M.landed(markers, mode)
  local last
  for i = #markers, 1, -1 do
    if markers[i] ~= "failed" then last = markers[i] break end
  end
  if last == nil or last == "send" then return "send" end
  if last == "sent" then return mode.async and "submit" or "import" end
  if last == "answered" then
    if mode.async then return "import" end
    return mode.transport == "embedded" and "commit" or "download"
  end
  if last == "poll" then return "poll" end
  if last == "polled" then return "import" end
  if last == "download" or last == "receiving" then return "download" end
  if last == "downloaded" or last == "commit" then return "commit" end
  if last == "verify" or last == "verified" then return "verify" end
  return "missed" -- "done": the sync had returned
end

--- A table of counts: `rows` = {{label =, counts = {phase -> {child =, emulator =}}}}.
function M.format(rows)
  local out = {}
  local head = { ("%-38s"):format("mode") }
  local widths = {}
  for i, p in ipairs(M.ORDER) do
    widths[i] = math.max(#M.TITLES[p], 10)
    head[#head + 1] = (" %" .. widths[i] .. "s"):format(M.TITLES[p])
  end
  out[#out + 1] = table.concat(head)
  for _, row in ipairs(rows) do
    local line = { ("%-38s"):format(row.label) }
    for i, p in ipairs(M.ORDER) do
      local c = row.counts[p] or {}
      local cell = tostring(c.child or 0)
      if (c.emulator or 0) > 0 then cell = cell .. ("(emu %d)"):format(c.emulator) end
      line[#line + 1] = (" %" .. widths[i] .. "s"):format(cell)
    end
    out[#out + 1] = table.concat(line)
  end
  return table.concat(out, "\n")
end

return M
