-- The fault matrix: every injected fault against every operation it applies
-- to. For each case it asserts the outcome (success after retry, or the
-- documented error kind and message), the number of requests the emulator
-- received per route, that a replica state file is byte-identical after a
-- failure, and, on the emulator side, that no feature was added twice and no
-- edit lost once the synchronization eventually succeeded. The last test
-- prints the table fault x operation x outcome (also written to
-- build/fault_matrix.md).
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local transport = require "geoservices.net.transport"
local helper = require "spec.helper"

local PARCELS_ID = "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c"
local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local PARCEL2 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}"
local LICENSE = "examples/data/sample.prvc"
local FAST_RETRY = { attempts = 3, base_delay = 0.02, max_delay = 0.1 }
local BASE_FEATURES = 3 -- parcels in layer 0 of the example data

local rows = {}

local function record(fault, operation, outcome, counts)
  local parts = {}
  for route, n in pairs(counts or {}) do parts[#parts + 1] = ("%s=%d"):format(route, n) end
  table.sort(parts)
  rows[#rows + 1] = { fault = fault, operation = operation, outcome = outcome, requests = table.concat(parts, " ") }
end

local function describe_outcome(result, err)
  if not result then
    local detail = err.code ~= nil and tostring(err.code) or (err.kind == "http" and ("HTTP " .. err.status))
    if err.kind == "protocol" and not err.code then detail = "invalid JSON" end
    local text = detail and (err.kind .. " " .. detail) or err.kind
    if err.pending then text = text .. " (pending: the next sync re-attaches)"
    elseif err.outcome_unknown then text = text .. " (outcome unknown: read back from the server)" end
    if err.attempts and err.attempts > 1 then text = text .. (" after %d attempts"):format(err.attempts) end
    return text
  end
  if type(result) == "table" and result.partial then return "ok (partial: CompletedWithErrors)" end
  return "ok"
end

local function tmp_path()
  local p = helper.tmp_name()
  os.remove(p)
  return p
end

local function valid_configure_params()
  return {
    username = "siteadmin", password = "Pa55word-SECRET-x1", email = "siteadmin@example.com",
    fullName = "Site Administrator", securityQuestionIdx = 3, securityQuestionAns = "ANSWER-SECRET-x2",
    userLicenseTypeId = "creatorUT", licenseFile = LICENSE,
    volumesConfig = geoservices.volumes{ storage_class = "standard" },
  }
end

-- Kills the emulator like a crash (no clean shutdown) and waits until it is gone.
local function crash(emu)
  os.execute("kill -9 " .. emu.pid .. " 2>/dev/null")
  helper.wait_for("the emulator to die", function() return not helper.process_alive(emu.pid) end, 5)
  emu.pid = nil
  emu.driver:close()
  os.remove(emu.log)
end

describe("fault matrix", function()
  local emu
  setup(function()
    emu = helper.start_emulator{ args = { "--configure-seconds", "0.01" } }
  end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    emu:control("settings", { job_step_ms = 20 })
  end)

  local function client(opts)
    local o = { url = emu.url, token = "admin-token", retry = FAST_RETRY, timeout = 5 }
    for k, v in pairs(opts or {}) do o[k] = v end
    return geoservices.client(o)
  end

  local function counts()
    return emu:requests().counts
  end

  local function state()
    return emu:control("state").featureServices.Parcels
  end

  local function new_replica()
    return assert(geoservices.replica(tmp_path(), {
      service = "Parcels", replicaID = CREW1, model = "perReplica", replicaServerGen = 1,
      syncDirection = "bidirectional",
    }))
  end

  -- One add (client-side GlobalID), one update, one delete.
  local function new_edits()
    local e = geoservices.edits()
    local gid = e:add(0, { attributes = { APN = "matrix-add" }, geometry = { x = -117.2, y = 34.1 } })
    e:update(0, { attributes = { GlobalID = PARCEL1, OWNER = "Matrix Owner" } })
    e:delete(0, PARCEL2)
    return e, gid
  end

  -- The emulator holds each edit exactly once: the add once (and no other
  -- feature with its APN), the update, the delete.
  local function assert_applied_once(gid)
    local layer = state().layers["0"]
    local n, same_apn = 0, 0
    for _, f in pairs(layer.features) do
      n = n + 1
      if f.attributes.APN == "matrix-add" then same_apn = same_apn + 1 end
    end
    assert.equal(1, same_apn, "the add is on the server exactly once")
    assert.is_not_nil(layer.features[gid])
    assert.equal(BASE_FEATURES + 1 - 1, n) -- one added, one deleted
    assert.equal("Matrix Owner", layer.features[PARCEL1].attributes.OWNER)
    assert.is_nil(layer.features[PARCEL2])
  end

  local function assert_not_applied(gid)
    local layer = state().layers["0"]
    assert.is_nil(layer.features[gid])
    assert.is_not_nil(layer.features[PARCEL2])
  end

  -- ------------------------------------------------------------------ reads
  local READS = {
    { name = "getServicesById", route = "getServicesById",
      run = function(c) return c:get_services_by_id{ PARCELS_ID } end },
    { name = "snapshots/list", route = "snapshots/list",
      run = function(c) return c:list_snapshots("nb-street-trees") end },
    { name = "root resource", route = "root", run = function(c) return c:configure_status() end },
  }

  -- fault, expected outcome for reads: ok (requests 2) or error kind (requests n)
  local READ_CASES = {
    { label = "reset before the response (1st attempt)", fault = { kind = "reset", attempts = { 1 } }, ok = true,
      requests = 2 },
    { label = "reset mid-body (1st attempt)", fault = { kind = "reset_mid_body", attempts = { 1 } }, ok = true,
      requests = 2 },
    { label = "HTTP 502 (1st attempt)", fault = { kind = "status", status = 502, attempts = { 1 } }, ok = true,
      requests = 2 },
    { label = "HTTP 503 (1st attempt)", fault = { kind = "status", status = 503, attempts = { 1 } }, ok = true,
      requests = 2 },
    { label = "HTTP 429 (1st attempt)", fault = { kind = "status", status = 429, attempts = { 1 } }, ok = true,
      requests = 2 },
    { label = "HTTP 503 always", fault = { kind = "status", status = 503 }, kind = "http", requests = 3,
      message = "after 3 attempts" },
    { label = "reset always", fault = { kind = "reset" }, kind = "network", code = "empty_reply", requests = 3 },
    { label = "HTTP 500", fault = { kind = "status", status = 500 }, kind = "http", requests = 1 },
    { label = "truncated body", fault = { kind = "truncate" }, kind = "protocol", requests = 1 },
    { label = "invalid JSON", fault = { kind = "invalid_json" }, kind = "protocol", requests = 1 },
    { label = "delay beyond the deadline", fault = { kind = "delay", delay_ms = 1500 }, kind = "timeout",
      requests = 1, client = { timeout = 0.3 } },
    { label = "498 expired token (static token)", fault = { kind = "error", code = 498, message = "Invalid token." },
      kind = "auth", code = 498, requests = 1 },
    { label = "499 token required", fault = { kind = "error", code = 499, message = "Token Required." },
      kind = "auth", code = 499, requests = 1 },
    { label = "403 forbidden", fault = { kind = "error", code = 403, message = "You do not have permissions." },
      kind = "auth", code = 403, requests = 1 },
  }

  for _, case in ipairs(READ_CASES) do
    for _, op in ipairs(READS) do
      it(("%s: %s"):format(case.label, op.name), function()
        local fault = {}
        for k, v in pairs(case.fault) do fault[k] = v end
        fault.route = op.route
        emu:fault(fault)
        local result, err = op.run(client(case.client))
        local c = counts()
        record(case.label, op.name, describe_outcome(result, err), c)
        if case.ok then
          assert.is_not_nil(result, err and tostring(err))
        else
          assert.is_nil(result)
          assert.equal(case.kind, err.kind, tostring(err))
          if case.code then assert.equal(case.code, err.code) end
          if case.message then assert.matches(case.message, err.message, 1, true) end
        end
        assert.equal(case.requests, c[op.route])
      end)
    end
  end

  it("498 expired token with a token provider: refreshed once, then ok", function()
    emu:fault{ route = "getServicesById", kind = "error", code = 498, message = "Invalid token.", attempts = { 1 } }
    local asked = 0
    local c = client{ token = function() asked = asked + 1; return "admin-token" end }
    local result, err = c:get_services_by_id{ PARCELS_ID }
    record("498 expired token (token provider)", "getServicesById", describe_outcome(result, err), counts())
    assert.is_not_nil(result, err and tostring(err))
    assert.equal(2, asked)
    assert.equal(2, emu:count("getServicesById"))
  end)

  it("HTTP 503 with Retry-After: waits as asked, then ok", function()
    emu:fault{ route = "getServicesById", kind = "status", status = 503, headers = { ["Retry-After"] = "1" },
               attempts = { 1 } }
    local started = transport.now()
    local result, err = client():get_services_by_id{ PARCELS_ID }
    record("HTTP 503 + Retry-After: 1", "getServicesById", describe_outcome(result, err), counts())
    assert.is_not_nil(result, err and tostring(err))
    assert.is_true(transport.now() - started >= 0.95)
    assert.equal(2, emu:count("getServicesById"))
  end)

  it("HTTP 503 with a Retry-After past the deadline: fails at once, saying why", function()
    -- the deadline is far beyond any stall of a loaded machine (a request that
    -- outlived a 2 s one failed as a timeout), the Retry-After past it
    local deadline = 10 * helper.WAIT_SCALE
    local asked = 2 * deadline
    emu:fault{ route = "getServicesById", kind = "status", status = 503,
               headers = { ["Retry-After"] = tostring(asked) } }
    local waits = {}
    local started = transport.now()
    local result, err = client{ timeout = deadline, retry = { attempts = 3, max_retry_after = asked } }
      :get_services_by_id({ PARCELS_ID }, { on_retry = function(_, delay) waits[#waits + 1] = delay end })
    local took = transport.now() - started
    record(("HTTP 503 + Retry-After: %d (deadline %d s)"):format(asked, deadline), "getServicesById",
           describe_outcome(result, err), counts())
    assert.is_nil(result)
    assert.equal("http", err.kind)
    assert.equal(asked, err.retry_after)
    assert.matches(("retry after %d s, past the deadline"):format(asked), err.message, 1, true)
    -- no wait was planned (a wait for Retry-After is a retry: on_retry is told
    -- before it), and it did not sit out the deadline either: that takes
    -- `deadline` seconds, half of it is more than any stall
    assert.same({}, waits)
    assert.is_true(took < deadline / 2, tostring(took))
    assert.equal(1, emu:count("getServicesById"))
  end)

  it("connection refused (server down): every operation fails clearly, nothing changes", function()
    local down = "http://127.0.0.1:1/server"
    local c = client{ url = down }
    local r = new_replica()
    local before = helper.read_all(r.path)
    local ops = {
      { "getServicesById", function() return c:get_services_by_id{ PARCELS_ID } end },
      { "snapshots/list", function() return c:list_snapshots("nb-street-trees") end },
      { "root resource", function() return c:configure_status() end },
      { "sync (download)", function() return c:sync(r, nil) end },
      { "sync (edits)", function() return c:sync(r, (new_edits())) end },
      { "configure", function() return c:configure(valid_configure_params(), { poll_interval = 0.01 }) end },
    }
    for _, op in ipairs(ops) do
      local result, err = op[2]()
      record("connection refused (server down)", op[1], describe_outcome(result, err), { total = 0 })
      assert.is_nil(result)
      assert.equal("network", err.kind)
      assert.equal("couldnt_connect", err.code)
      assert.equal(3, err.attempts) -- nothing was sent: retried, then given up
    end
    assert.equal(before, helper.read_all(r.path))
    os.remove(r.path)
  end)

  -- ------------------------------------------------------------------ sync
  -- A synchronizeReplica with edits under faults that hit after the server
  -- applied them (the answer is lost) or before (refused). An edit-carrying
  -- request is never repeated once it may have left: its outcome is unknown
  -- and read back from the server (the layer query), in the same call.
  local SYNC_CASES = {
    { label = "reset before the response (1st attempt)", fault = { kind = "reset", attempts = { 1 } },
      unknown = true },
    { label = "reset mid-body (1st attempt)", fault = { kind = "reset_mid_body", attempts = { 1 } }, unknown = true },
    { label = "truncated body (1st attempt)", fault = { kind = "truncate", attempts = { 1 } }, unknown = true },
    { label = "invalid JSON (1st attempt)", fault = { kind = "invalid_json", attempts = { 1 } }, unknown = true },
    { label = "HTTP 500 (1st attempt)", fault = { kind = "status", status = 500, attempts = { 1 } }, unknown = true },
    { label = "HTTP 502 (1st attempt)", fault = { kind = "status", status = 502, attempts = { 1 } }, unknown = true },
    { label = "HTTP 503 (1st attempt)", fault = { kind = "status", status = 503, attempts = { 1 } }, unknown = true },
    { label = "HTTP 429 (1st attempt)", fault = { kind = "status", status = 429, attempts = { 1 } }, requests = 2,
      ok = true },
    { label = "HTTP 500 always", fault = { kind = "status", status = 500 }, unknown = true },
    { label = "498 expired token (static token)", fault = { kind = "error", code = 498, message = "Invalid token." },
      kind = "auth" },
    { label = "499 token required", fault = { kind = "error", code = 499, message = "Token Required." },
      kind = "auth" },
    { label = "403 forbidden", fault = { kind = "error", code = 403, message = "Forbidden." }, kind = "auth" },
  }

  for _, case in ipairs(SYNC_CASES) do
    for _, transport_type in ipairs{ "embedded", "url" } do
      local op_name = ("sync (edits, %s)"):format(transport_type)
      it(("%s: %s"):format(case.label, op_name), function()
        local fault = { route = "synchronizeReplica" }
        for k, v in pairs(case.fault) do fault[k] = v end
        emu:fault(fault)
        local r = new_replica()
        local before = helper.read_all(r.path)
        local e, gid = new_edits()
        local result, err = client():sync(r, e, { params = { transportType = transport_type } })
        local c = counts()
        record(case.label, op_name, describe_outcome(result, err), c)
        assert.equal(case.requests or 1, c.synchronizeReplica, "an edit-carrying request is sent once")
        if case.ok then
          assert.is_not_nil(result, err and tostring(err))
          assert.same({}, result.failed_edits)
          assert.equal(result.replicaServerGen, json.decode(helper.read_all(r.path)).replicaServerGen)
          assert_applied_once(gid)
        elseif case.unknown then
          assert.is_nil(result)
          assert.is_true(err.outcome_unknown)
          assert.is_nil(err.message:find("resend", 1, true), "never told to send again what may be applied")
          assert.is_true((c.query or 0) >= 1, "the outcome is read back from the server")
          assert.equal(before, helper.read_all(r.path), "the generation did not move")
          -- the next sync sends only what the server was shown not to have
          emu:control("faults/clear", {})
          local again = assert(client():sync(r, nil, { params = { transportType = transport_type } }))
          assert.same({}, again.failed_edits)
          assert_applied_once(gid)
        else
          assert.is_nil(result)
          assert.equal(case.kind, err.kind)
          assert.equal(before, helper.read_all(r.path), "state file unchanged")
          assert_not_applied(gid)
          assert.is_nil(io.open(r.path .. ".journal"), "refused whole: nothing is left to resolve")
        end
        os.remove(r.path)
      end)
    end
  end

  it("delay beyond the deadline: the outcome is read back, never re-sent; the next sync completes it", function()
    emu:fault{ route = "synchronizeReplica", kind = "delay", delay_ms = 1200, attempts = { 1 } }
    local r = new_replica()
    local before = helper.read_all(r.path)
    local e, gid = new_edits()
    local result, err = client{ timeout = 0.3 }:sync(r, e)
    record("delay beyond the deadline", "sync (edits, embedded)", describe_outcome(result, err), counts())
    assert.is_nil(result)
    assert.equal("timeout", err.kind)
    assert.is_true(err.outcome_unknown)
    assert.equal(before, helper.read_all(r.path))
    assert.equal(1, emu:count("synchronizeReplica"))
    helper.sleep(1) -- let the delayed request be applied
    local again = assert(client():sync(r))
    record("delay beyond the deadline, then sync again", "sync (edits, embedded)", describe_outcome(again), counts())
    assert_applied_once(gid)
    assert.equal(1, emu:count("synchronizeReplica") - 1, "the edits were not sent a second time")
  end)

  it("an add without GlobalID is never re-issued: its outcome stays unknown", function()
    emu:fault{ route = "synchronizeReplica", kind = "reset", attempts = { 1 } }
    local r = new_replica()
    local before = helper.read_all(r.path)
    local edits = json.encode{ { id = 0, features = { adds = { { attributes = { APN = "no-gid" } } } } } }
    local result, err = client():sync(r, edits)
    record("reset (add without GlobalID)", "sync (edits, embedded)", describe_outcome(result, err), counts())
    assert.is_nil(result)
    assert.equal("network", err.kind)
    assert.is_true(err.ambiguous)
    assert.equal(1, emu:count("synchronizeReplica"))
    assert.equal(before, helper.read_all(r.path))
  end)

  it("rollbackOnFailure = true is never re-issued either; the outcome is read back", function()
    emu:fault{ route = "synchronizeReplica", kind = "reset", attempts = { 1 } }
    local r = new_replica()
    local e, gid = new_edits()
    local result, err = client():sync(r, e, { params = { rollbackOnFailure = true, transportType = "url" } })
    record("reset (rollbackOnFailure = true)", "sync (edits, embedded)", describe_outcome(result, err), counts())
    assert.is_nil(result)
    assert.is_true(err.outcome_unknown)
    assert.equal(1, emu:count("synchronizeReplica"))
    assert(client():sync(r, nil, { params = { transportType = "url" } }))
    assert_applied_once(gid)
  end)

  it("sync without edits is retried as a read", function()
    local faults = { { kind = "reset", attempts = { 1 } }, { kind = "status", status = 502, attempts = { 1 } } }
    for _, fault in ipairs(faults) do
      emu:reset()
      fault.route = "synchronizeReplica"
      emu:fault(fault)
      local r = new_replica()
      local result, err = client():sync(r, nil)
      record(fault.kind == "reset" and "reset before the response (1st attempt)" or "HTTP 502 (1st attempt)",
        "sync (download)", describe_outcome(result, err), counts())
      assert.is_not_nil(result, err and tostring(err))
      assert.equal(2, emu:count("synchronizeReplica"))
      os.remove(r.path)
    end
    local r = new_replica()
    local before = helper.read_all(r.path)
    emu:reset()
    emu:fault{ route = "synchronizeReplica", kind = "truncate" }
    local result, err = client():sync(r, nil)
    record("truncated body", "sync (download)", describe_outcome(result, err), counts())
    assert.is_nil(result)
    assert.equal("protocol", err.kind)
    assert.equal(before, helper.read_all(r.path))
    os.remove(r.path)
  end)

  -- ------------------------------------------------------------------ async jobs
  local function async_sync(c, r, e, extra)
    local opts = { params = { async = true, transportType = "url" }, poll_interval = 0.02 }
    for k, v in pairs(extra or {}) do opts[k] = v end
    return c:sync(r, e, opts)
  end

  local ASYNC_CASES = {
    -- a submission whose answer was lost started a job the client does not
    -- know: its outcome is read back at the next sync, after the job ran
    { label = "reset before the response (1st attempt)", fault = { route = "synchronizeReplica", kind = "reset",
      attempts = { 1 } }, kind = "network", later = true },
    { label = "status poll reset (1st, 2nd attempts)", fault = { route = "jobs", kind = "reset", attempts = { 1, 2 } },
      ok = true },
    { label = "status poll HTTP 503 (1st attempt)", fault = { route = "jobs", kind = "status", status = 503,
      attempts = { 1 } }, ok = true },
    { label = "result file reset mid-body (1st attempt)", fault = { route = "results", kind = "reset_mid_body",
      attempts = { 1 } }, ok = true, requests = { results = 2 } },
    { label = "result file HTTP 502 (1st attempt)", fault = { route = "results", kind = "status", status = 502,
      attempts = { 1 } }, ok = true, requests = { results = 2 } },
    -- polls failing: the job's outcome is pending, the next sync re-attaches
    { label = "status URL 404", fault = { route = "jobs", kind = "status", status = 404 }, kind = "job",
      code = "job_not_found", pending = true },
    -- a chunk that came short is asked again (a read: the retry policy's 3 attempts), then the
    -- sync fails saying so, the generation unmoved; the job is re-attached to by the next sync
    { label = "result file truncated", fault = { route = "results", kind = "truncate" }, kind = "protocol",
      code = "short_body", message = "result file is not complete", requests = { results = 3 }, pending = true },
    -- the result file is gone: the edits are read back, the changes asked again
    { label = "result file 404", fault = { route = "results", kind = "status", status = 404 }, kind = "http",
      later = true },
    -- an all-or-nothing job that failed applied nothing: read back, its edits
    -- go again at once in a synchronous request (whose results name any refusal)
    { label = "job ending Failed", settings = { job_outcome = "Failed" }, ok = true, submissions = 2 },
    { label = "job ending CompletedWithErrors", settings = { job_outcome = "CompletedWithErrors" }, ok = true,
      partial = true },
  }

  for _, case in ipairs(ASYNC_CASES) do
    it(("%s: async sync (edits, url)"):format(case.label), function()
      if case.fault then emu:fault(case.fault) end
      if case.settings then emu:control("settings", case.settings) end
      local r = new_replica()
      local before = helper.read_all(r.path)
      local e, gid = new_edits()
      local result, err = async_sync(client(), r, e)
      local c = counts()
      record(case.label, "async sync (edits, url)", describe_outcome(result, err), c)
      for route, n in pairs(case.requests or {}) do assert.equal(n, c[route], route) end
      assert.equal(case.submissions or 1, c.synchronizeReplica, "the edits are submitted once")
      if case.ok then
        assert.is_not_nil(result, err and tostring(err))
        if case.partial then assert.is_true(result.partial) end
        assert.equal(result.replicaServerGen, json.decode(helper.read_all(r.path)).replicaServerGen)
        assert_applied_once(gid)
      else
        assert.is_nil(result)
        assert.equal(case.kind, err.kind, tostring(err))
        if case.code then assert.equal(case.code, err.code) end
        if case.message then assert.matches(case.message, err.message, 1, true) end
        assert.equal(before, helper.read_all(r.path), "state file unchanged")
        if case.pending then assert.is_true(err.pending) end
        if case.pending or case.later then
          assert.is_nil(err.message:find("resend", 1, true))
          emu:control("faults/clear", {})
          helper.sleep(0.3) -- the job runs its course
          local again = assert(async_sync(client(), r, nil))
          assert.is_not_nil(again)
          -- pending: the job is re-attached to; later: the edits were read
          -- back, and only the changes are asked again (no edits)
          assert.equal(case.pending and 1 or 2, emu:count("synchronizeReplica"), "the edits were not submitted again")
          assert_applied_once(gid)
        else
          assert_not_applied(gid)
        end
      end
      os.remove(r.path)
    end)
  end

  it("result file in Range chunks: a reset mid-chunk resumes at that chunk", function()
    emu:fault{ route = "results", kind = "reset_mid_body", attempts = { 2 } }
    local r = new_replica()
    local e, gid = new_edits()
    local c = client{ download_chunk = 64 }
    local result, err = async_sync(c, r, e)
    local counted = counts()
    record("result file reset mid-body in chunk 2 (64-byte Range chunks)", "async sync (edits, url)",
      describe_outcome(result, err), counted)
    assert.is_not_nil(result, err and tostring(err))
    -- the file needs several 64-byte chunks; each is fetched once, plus the one that was cut
    assert.is_true(counted.results >= 3)
    assert_applied_once(gid)
    os.remove(r.path)
  end)

  -- ------------------------------------------------------------------ configure
  local CONFIGURE_CASES = {
    { label = "reset before the response", fault = { kind = "reset" }, ok = true },
    { label = "reset mid-body", fault = { kind = "reset_mid_body" }, ok = true },
    { label = "HTTP 500", fault = { kind = "status", status = 500 }, ok = true },
    { label = "invalid JSON", fault = { kind = "invalid_json" }, ok = true },
    { label = "HTTP 503 (refused)", fault = { kind = "status", status = 503 }, kind = "http",
      message = "safe to call configure again" },
    { label = "HTTP 429 (1st attempt)", fault = { kind = "status", status = 429, attempts = { 1 } }, ok = true,
      requests = 2 },
    { label = "403 forbidden", fault = { kind = "error", code = 403, message = "Forbidden." }, kind = "auth" },
    { label = "delay beyond the deadline", fault = { kind = "delay", delay_ms = 800 }, ok = true,
      opts = { request_timeout = 0.3 } },
  }

  for _, case in ipairs(CONFIGURE_CASES) do
    it(("%s: configure (never re-sent; re-attaches)"):format(case.label), function()
      local fault = { route = "configure" }
      for k, v in pairs(case.fault) do fault[k] = v end
      emu:fault(fault)
      local opts = { poll_interval = 0.01, timeout = helper.TEST_TIMEOUT }
      for k, v in pairs(case.opts or {}) do opts[k] = v end
      local root, err = client():configure(valid_configure_params(), opts)
      local c = counts()
      local how = (c.configure or 0) == 1 and case.fault.kind ~= "error" and "re-attached, " or ""
      record(case.label, "configure", root and ("ok (%sstate %s)"):format(how, root.status.state)
        or describe_outcome(nil, err), c)
      assert.equal(case.requests or 1, c.configure, "configure is sent once")
      if case.ok then
        assert.is_not_nil(root, err and tostring(err))
        assert.equal("ready", root.status.state)
      else
        assert.is_nil(root)
        assert.equal(case.kind, err.kind)
        if case.message then assert.matches(case.message, err.message, 1, true) end
        assert.not_matches("SECRET", tostring(err))
      end
    end)
  end

  -- ------------------------------------------------------------------ restart
  describe("a restart of the emulator in the middle of an async job", function()
    local state_file, restarted

    after_each(function()
      if restarted then restarted:stop() end
      restarted = nil
      if state_file then
        os.execute(("rm -rf %s %s %s"):format(helper.shell_quote(state_file),
          helper.shell_quote(state_file .. ".results"), helper.shell_quote(state_file .. ".journal")))
      end
    end)

    local function start(port)
      local args = { "--configure-seconds", "0.01", "--state-file", state_file }
      if port then
        args[#args + 1] = "--port"
        args[#args + 1] = tostring(port)
      end
      return helper.start_emulator{ args = args }
    end

    for _, keep_state in ipairs{ true, false } do
      local label = keep_state and "restart mid-job (state persisted)" or "restart mid-job (state lost)"
      it(label, function()
        state_file = tmp_path()
        local first = start()
        first:control("settings", { job_step_ms = 150 })
        local c = client{ url = first.url }
        local r = new_replica()
        local before = helper.read_all(r.path)
        local e, gid = new_edits()
        local op = assert(c:sync(r, e, { params = { async = true, transportType = "url" }, wait = false }))
        crash(first)
        if not keep_state then os.remove(state_file) end
        local port = first.port
        -- the port is taken again (a restart slowed by a loaded machine may take longer than 10 s: the
        -- wait is scaled, as every wait, and no duration is asserted)
        restarted = helper.wait_for("a restart on the same port", function()
          local ok, emu2 = pcall(start, port)
          return ok and emu2
        end, 10)
        local result, err = op:wait{ poll_interval = 0.05, timeout = helper.TEST_TIMEOUT }
        local cnt = restarted:requests().counts
        record(label, "async sync (edits, url)", describe_outcome(result, err), cnt)
        if keep_state then
          assert.is_not_nil(result, err and tostring(err))
          assert.equal(result.replicaServerGen, json.decode(helper.read_all(r.path)).replicaServerGen)
          local layer = restarted:control("state").featureServices.Parcels.layers["0"]
          assert.is_not_nil(layer.features[gid])
          assert.is_nil(layer.features[PARCEL2])
          assert.is_true(cnt.jobs >= 1)
          assert.equal(1, cnt.results)
        else
          assert.is_nil(result)
          assert.equal("job", err.kind)
          assert.equal("job_not_found", err.code)
          assert.equal(before, helper.read_all(r.path))
          -- the next sync finds the job gone, reads the edits' outcome back
          -- (the server lost them) and sends them, once
          assert(c:sync(r, nil, { poll_interval = 0.05 }))
          local layer = restarted:control("state").featureServices.Parcels.layers["0"]
          assert.is_not_nil(layer.features[gid])
          assert.is_nil(layer.features[PARCEL2])
          assert.equal(1, restarted:requests().counts.synchronizeReplica)
        end
        os.remove(r.path)
      end)
    end
  end)

  it("prints the table fault x operation x outcome", function()
    assert.is_true(#rows > 50)
    local w = { 0, 0, 0 }
    for _, row in ipairs(rows) do
      w[1] = math.max(w[1], #row.fault)
      w[2] = math.max(w[2], #row.operation)
      w[3] = math.max(w[3], #row.outcome)
    end
    local lines = { ("| %-" .. w[1] .. "s | %-" .. w[2] .. "s | %-" .. w[3] .. "s | %s |"):format(
      "fault", "operation", "outcome", "requests received") }
    lines[2] = ("|%s|%s|%s|%s|"):format(("-"):rep(w[1] + 2), ("-"):rep(w[2] + 2), ("-"):rep(w[3] + 2), "---")
    for _, row in ipairs(rows) do
      lines[#lines + 1] = ("| %-" .. w[1] .. "s | %-" .. w[2] .. "s | %-" .. w[3] .. "s | %s |"):format(
        row.fault, row.operation, row.outcome, row.requests)
    end
    local text = table.concat(lines, "\n") .. "\n"
    os.execute("mkdir -p build")
    local f = io.open("build/fault_matrix.md", "w")
    if f then
      f:write(text)
      f:close()
    end
    io.stdout:write("\n", text)
  end)
end)
