-- `make bench`, per-request overhead (issue 17): BENCH_REQUESTS (1000)
-- sequential small requests over one keep-alive connection to the emulator,
-- each of them through
--   * a plain C libcurl loop (spec/bench/curl_loop.c: one easy handle,
--     curl_easy_perform, nothing else): the baseline;
--   * transport.perform (one core.request, the driver, the response table);
--   * client:get_services_by_id, decoded (validation, form encoding, the
--     retry driver, JSON decoding, result objects);
--   * the same inside geoservices.run (the scheduler's wake-ups too);
--   * for reference, the core alone: driver:perform of the request the
--     client builds, decoded by the core (no Lua layer around it);
--   * the floor of a decoded request, for reference: driver:perform of the
--     same request, then the answer's tables built by Lua's own table
--     constructor (a function compiled from the answer: no parsing, no
--     string made, no validation, no client; the body itself is dropped as
--     the C loop drops it). What a decoded request costs at the least.
-- BENCH_ROUNDS (11) rounds, the C loop and the five others interleaved in
-- each round so that they share the machine's noise; a row gives the median rate over the rounds
-- and the median of the per-round ratios to the C loop of the same round.
-- A benchmark: it prints, it never fails on speed.
--   lua5.4 spec/bench/requests.lua        (BUILD, BENCH_DIR optional)
local build = os.getenv("BUILD") or "build"
package.path = "lua/?.lua;lua/?/init.lua;./?.lua;" .. package.path
package.cpath = build .. "/?.so;" .. package.cpath

local common = require "spec.bench.common"
local json = require "geoservices.base.json"
local geoservices = require "geoservices"
local core = require "geoservices.core"
local transport = require "geoservices.net.transport"
local helper = require "spec.helper"

local REQUESTS = tonumber(os.getenv("BENCH_REQUESTS")) or 1000
local ROUNDS = tonumber(os.getenv("BENCH_ROUNDS")) or 11
local DIR = os.getenv("BENCH_DIR") or (build .. "/bench")
local PARCELS = "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c"
local now = core.monotonic

local run = common.run

local median = common.median

os.execute("mkdir -p " .. helper.shell_quote(DIR))
local curl_loop = DIR .. "/curl_loop"
run(("${CC:-cc} -std=c99 -D_POSIX_C_SOURCE=200809L -O2 -o %s spec/bench/curl_loop.c "
  .. "$(pkg-config --cflags --libs libcurl 2>/dev/null || echo -lcurl) 2>&1"):format(helper.shell_quote(curl_loop)))

-- Lua source of a function returning a fresh copy of `value` through table
-- constructors: strings and keys are constants of the chunk (interned when
-- it loads), arrays get the decoder's array metatable, null stays json.null.
local function constructor_of(value)
  local function lua_of(v)
    local t = type(v)
    if t == "table" then
      local parts = {}
      if json.is_array(v) then
        for i = 1, #v do parts[i] = lua_of(v[i]) end
        return "A{" .. table.concat(parts, ",") .. "}"
      end
      for k, item in pairs(v) do parts[#parts + 1] = ("[%q]=%s"):format(k, lua_of(item)) end
      return "{" .. table.concat(parts, ",") .. "}"
    elseif t == "string" then
      return ("%q"):format(v)
    elseif v == json.null then
      return "null"
    elseif math.type(v) == "float" then
      local text = ("%.17g"):format(v)
      return text:find("[.e]") and text or (text .. ".0") -- stays a float when whole
    end
    return tostring(v)
  end
  local source = "local A, null = ... return function() return " .. lua_of(value) .. " end"
  local array_mt = getmetatable(json.array())
  return assert(load(source, "=answer"))(function(t) return setmetatable(t, array_mt) end, json.null)
end

-- The same value: the floor must build exactly what the decoder builds.
local function same(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return a == b and math.type(a) == math.type(b) end
  if getmetatable(a) ~= getmetatable(b) then return false end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

local emu = helper.start_emulator()
local ok, err = pcall(function()
  local url = emu.url .. "/admin/services/getServicesById"
  -- the same body the client sends (f=json first, then the fields, the token last)
  local body = "f=json&serviceIDs=" .. PARCELS .. "&token=admin-token"

  local connects
  local function c_rate()
    local secs, n, c = run(("%s %s %d %s"):format(helper.shell_quote(curl_loop), helper.shell_quote(url),
      REQUESTS, helper.shell_quote(body))):match("^(%S+) (%d+) (%d+)")
    connects = tonumber(c)
    return tonumber(n) / tonumber(secs)
  end

  local driver = core.driver()
  local spec = { url = url, method = "POST", body = body } -- the request the client sends, as the C loop does
  local function raw_once()
    local response = assert(transport.perform(driver, spec))
    assert(response.status == 200)
  end
  local client = geoservices.client{ url = emu.url, token = "admin-token" }
  local ids = { PARCELS }
  local function client_once() assert(client:get_services_by_id(ids)) end

  local answer = assert(json.decode(assert(transport.perform(driver, spec)).body))
  local build_answer = constructor_of(answer)
  assert(same(build_answer(), answer), "the constructor builds another value than the decoder")
  -- the request the client builds (form fields, timeout, size limit, decoded by the core)
  local core_spec = { url = url, method = "POST", form = { "f", "json", "serviceIDs", PARCELS, "token", "admin-token" },
                      timeout_ms = 30000, max_response_bytes = 64 * 1024 * 1024, json = true }
  local function core_once()
    local response = assert(driver:perform(core_spec, 30000))
    assert(response.status == 200 and response.json.services)
  end
  local discard = { url = url, method = "POST", body = body, discard = true } -- as the C loop: the body dropped
  local function floor_once()
    assert(assert(driver:perform(discard, 30000)).status == 200)
    return build_answer()
  end

  local function lua_rate(once, in_task)
    for _ = 1, 50 do once() end -- warm: the connection, the emulator's caches
    collectgarbage()
    local t0 = now()
    if in_task then
      geoservices.run(function() for _ = 1, REQUESTS do once() end end)
    else
      for _ = 1, REQUESTS do once() end
    end
    return REQUESTS / (now() - t0)
  end

  -- every measured row once: what it runs, how it prints, its summary line (requests_<key>)
  local rows = {
    { key = "api", label = "client:get_services_by_id (decoded)", target = ">= 90 %", once = client_once },
    { key = "task", label = "  the same inside geoservices.run", target = ">= 85 %", once = client_once,
      in_task = true },
    { key = "raw", label = "transport.perform", target = ">= 95 %", once = raw_once },
    { key = "core", label = "core alone: driver:perform, decoded", target = "(reference)", once = core_once },
    { key = "floor", label = "floor: core + Lua's own constructor", target = "(reference)", once = floor_once },
  }
  local c_rates = {}
  for _, r in ipairs(rows) do r.rates, r.ratios = {}, {} end
  for round = 1, ROUNDS do
    local c = c_rate()
    c_rates[round] = c
    for _, r in ipairs(rows) do
      local rate = lua_rate(r.once, r.in_task)
      r.rates[round], r.ratios[round] = rate, rate / c
    end
  end

  print(("Per-request overhead: %d sequential small POSTs (getServicesById, %s), one keep-alive connection,"
    .. " %d rounds"):format(REQUESTS, "emulator on 127.0.0.1", ROUNDS))
  print(("  %-40s %12s %10s %s"):format("", "median rate", "% of C", "target"))
  print(("  %-40s %8.0f/s %10s   (%d connection(s) opened per run)"):format("plain C libcurl loop",
    median(c_rates), "", connects))
  local results = os.getenv("BENCH_RESULTS") -- the summary's rows (spec/bench/summary.lua)
  local f = results and assert(io.open(results, "a"))
  for _, r in ipairs(rows) do
    local lo, hi = math.huge, 0
    for _, v in ipairs(r.ratios) do lo, hi = math.min(lo, v), math.max(hi, v) end
    print(("  %-40s %8.0f/s %9.0f %%   %-11s (rounds %.0f-%.0f %%)"):format(r.label, median(r.rates),
      100 * median(r.ratios), r.target, 100 * lo, 100 * hi))
    if f then f:write("requests_", r.key, "\t", ("%.0f %%"):format(100 * median(r.ratios)), "\t", r.target, "\n") end
  end
  if f then f:close() end
  driver:close()
  client:close()
end)
emu:stop()
if not ok then error(err, 0) end
