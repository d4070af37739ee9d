-- `make bench`, concurrency section (issue 6). Prints a table; asserts
-- nothing about speed.
--  1. BENCH_REPLICAS (64) synchronizations of as many replicas against the
--     emulator with BENCH_LATENCY_MS (200) of injected latency per request:
--     sequential wall time, concurrent wall time (one geoservices.gather),
--     and the ratio of the concurrent time to one sync's time (target <= 2).
-- (Sequential small requests against a plain C libcurl loop are measured by
-- spec/bench/requests.lua.)
-- Run from the repository root after `make`:
--   lua5.4 spec/bench/concurrency.lua        (LUA_PATH/LUA_CPATH optional)
local build = os.getenv("BUILD") or "build"
package.path = "lua/?.lua;lua/?/init.lua;./?.lua;" .. package.path
package.cpath = build .. "/?.so;" .. package.cpath

local geoservices = require "geoservices"
local core = require "geoservices.core"
local helper = require "spec.helper"
local fleet = require "spec.support.fleet"

local REPLICAS = tonumber(os.getenv("BENCH_REPLICAS")) or 64
local LATENCY_MS = tonumber(os.getenv("BENCH_LATENCY_MS")) or 200

local now = core.monotonic
local rows = {}
local function row(what, value, note)
  rows[#rows + 1] = { what, value, note or "" }
end

local function timed(fn)
  local t0 = now()
  fn()
  return now() - t0
end

-- 1. Many synchronizations at once -------------------------------------------

local function sync_section()
  local data, ids = fleet.write(REPLICAS)
  local emu = helper.start_emulator{ data = data }
  local ok, err = pcall(function()
    emu:control("settings", { job_step_ms = LATENCY_MS })
    emu:fault{ route = "*", kind = "delay", delay_ms = LATENCY_MS }
    local client = geoservices.client{ url = emu.url, token = "alice-token" }
    local function sync(i, async)
      local params = { replicaID = ids[i], replicaServerGen = 1 }
      if async then params.async, params.transportType = true, "url" end
      return assert(client:synchronize_replica("Parcels", params, { poll_interval = LATENCY_MS / 1000 }))
    end
    local function batch(async)
      local fns = {}
      for i = 1, REPLICAS do fns[i] = function() return sync(i, async) end end
      local values, errs = geoservices.gather(fns)
      for i = 1, REPLICAS do assert(values[i], tostring(errs[i])) end
    end

    sync(1) -- warm-up: the connection and the emulator's first answers
    local sequential = timed(function() for i = 1, REPLICAS do sync(i) end end)
    local one = sequential / REPLICAS
    local concurrent = timed(function() batch(false) end)
    row(("%d syncs, sequential"):format(REPLICAS), ("%.2f s"):format(sequential),
      ("%.0f ms per sync, %d ms latency"):format(one * 1000, LATENCY_MS))
    row(("%d syncs, concurrent (gather)"):format(REPLICAS), ("%.2f s"):format(concurrent),
      ("%.1fx faster than sequential"):format(sequential / concurrent))
    row("concurrent / one sync", ("%.2f"):format(concurrent / one), "target <= 2")

    local one_async = timed(function() sync(1, true) end)
    local concurrent_async = timed(function() batch(true) end)
    row("one async sync (submit, polls, download)", ("%.2f s"):format(one_async))
    row(("%d async syncs, concurrent"):format(REPLICAS), ("%.2f s"):format(concurrent_async),
      ("%.2f x one async sync"):format(concurrent_async / one_async))
    client:close()
  end)
  emu:stop()
  os.remove(data)
  if not ok then error(err, 0) end
end

sync_section()

local w1, w2 = 0, 0
for _, r in ipairs(rows) do
  w1, w2 = math.max(w1, #r[1]), math.max(w2, #r[2])
end
print("concurrency (issue 6)")
for _, r in ipairs(rows) do
  print(("  %-" .. w1 .. "s  %" .. w2 .. "s  %s"):format(r[1], r[2], r[3]))
end
