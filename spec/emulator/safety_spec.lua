-- The emulator behaves as the tests believe (issue 14): a request's edits
-- are applied all or nothing, malformed and non-finite edits are refused
-- with a 400 naming their position, an async job imports its edits in its
-- ImportChanges phase (exactly once, across a SIGKILL and a restart with
-- --state-file), an editsUploadId naming no uploaded item is refused, and the
-- state file survives a SIGKILL at any moment. Raw HTTP is used where the
-- client would refuse to send what is tested.
local core = require "geoservices.core"
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local saved_states = require "geoservices.emulator.state_file"
local transport = require "geoservices.net.transport"
local helper = require "spec.helper"

local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local CREW2 = "{5E1A0C2B-2222-4A5B-9C8D-000000000002}"
local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local GID = "{AAAAAAAA-0000-4000-8000-000000000001}"
local VALID = ('{"attributes":{"GlobalID":"%s","APN":"valid-add"},"geometry":{"x":-117.2,"y":34.1}}'):format(GID)
local SYNC_PATH = "/Parcels/FeatureServer/synchronizeReplica"
-- the answers these tests read the edits or per-edit results of are asked for embedded
-- (the emulator answers with a URL when none is named, as the vendor documents)
local EMBEDDED = { "transportType", "esriTransportTypeEmbedded" }

local function tmp_path()
  local p = helper.tmp_name()
  os.remove(p)
  return p
end

-- POSTs an urlencoded form ({{name, value}, ...}) to the emulator; returns
-- the HTTP status, the decoded body (or nil) and the raw response.
local function post(emu, path, fields)
  local parts = {}
  for _, kv in ipairs(fields) do parts[#parts + 1] = core.urlencode(kv[1]) .. "=" .. core.urlencode(kv[2]) end
  local resp = assert(transport.perform(emu.driver, {
    url = emu.url .. path, method = "POST", body = table.concat(parts, "&"),
    content_type = "application/x-www-form-urlencoded", timeout_ms = 10000,
  }))
  return resp.status, json.decode(resp.body), resp
end

-- synchronizeReplica of `replica` (CREW1) with an edits text as sent, and
-- other fields as given.
local function sync_raw(emu, edits_text, extra, replica)
  local fields = { { "f", "json" }, { "replicaID", replica or CREW1 }, { "replicaServerGen", "1" } }
  if edits_text then fields[#fields + 1] = { "edits", edits_text } end
  for _, kv in ipairs(extra or {}) do fields[#fields + 1] = kv end
  return post(emu, SYNC_PATH, fields)
end

local function parcels(emu)
  return emu:control("state").featureServices.Parcels
end

-- Change-log entries of one GlobalID.
local function log_entries(svc, gid)
  local out = {}
  for _, e in ipairs(svc.log) do
    if e.globalId == gid then out[#out + 1] = e end
  end
  return out
end

-- The state file as the emulator left it, decoded.
local function saved_state(path)
  return assert(saved_states.read(path))
end

local function start_with_state(state_file, port, extra)
  local args = { "--state-file", state_file }
  if port then
    args[#args + 1] = "--port"
    args[#args + 1] = tostring(port)
  end
  for _, a in ipairs(extra or {}) do args[#args + 1] = a end
  return helper.start_emulator{ args = args }
end

local function crash(emu)
  os.execute("kill -9 " .. emu.pid .. " 2>/dev/null")
  helper.wait_for("the emulator to die", function() return not helper.process_alive(emu.pid) end, 5)
  emu.pid = nil
  emu.driver:close()
  os.remove(emu.log)
end

-- Restarts on the same port (the old socket may linger a moment).
local function restart(state_file, port)
  return helper.wait_for("a restart on the same port", function()
    local ok, emu = pcall(start_with_state, state_file, port)
    return ok and emu
  end, 10)
end

local function remove_state(state_file)
  os.execute("rm -rf " .. helper.shell_quote(state_file) .. " " .. helper.shell_quote(state_file .. ".results") .. " "
    .. helper.shell_quote(state_file .. ".journal"))
end

describe("emulator: a request's edits are all or nothing", function()
  local emu
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function() emu:reset() end)

  it("adds [valid, 5]: HTTP 400 naming adds[2], the valid add not applied, no generation used", function()
    local before = parcels(emu)
    local status, body = sync_raw(emu, ('[{"id":0,"features":{"adds":[%s,5]}}]'):format(VALID))
    assert.equal(400, status)
    assert.equal(400, body.error.code)
    assert.is_string(body.error.message)
    assert.same({ "edits[1].features.adds[2]: must be a feature object" }, body.error.details)
    local after = parcels(emu)
    assert.is_nil(after.layers["0"].features[GID])
    assert.equal(before.gen, after.gen)
    assert.equal(#before.log, #after.log)
    -- the other replica downloads nothing of it
    local ok, down = sync_raw(emu, nil, { { "syncDirection", "download" }, EMBEDDED }, CREW2)
    assert.equal(200, ok)
    assert.is_nil(down.error)
    for _, layer in ipairs(down.edits) do assert.equal(0, #layer.features.adds) end
  end)

  local MALFORMED = {
    { ('[{"id":0,"features":{"adds":[%s,null]}}]'):format(VALID),
      "edits[1].features.adds[2]: must be a feature object" },
    { ('[{"id":0,"features":{"adds":[%s,{"geometry":{"x":1,"y":2}}]}}]'):format(VALID),
      "edits[1].features.adds[2].attributes: is required" },
    { ('[{"id":0,"features":{"adds":[%s,{"attributes":[1,2]}]}}]'):format(VALID),
      "edits[1].features.adds[2].attributes: must be an object" },
    { ('[{"id":0,"features":{"adds":[%s],"deleteIds":[7]}}]'):format(VALID),
      "edits[1].features.deleteIds[1]: must be a GlobalID string" },
    { '[{"id":0,"features":{"adds":{"a":1}}}]', "edits[1].features.adds: must be an array" },
    { ('[{"id":0,"features":{"adds":[%s]}},5]'):format(VALID), "edits[2]: must be a layer entry object" },
    { '[{"id":0,"features":5}]', "edits[1].features: must be an object" },
    { ('[{"id":"zero","features":{"adds":[%s]}}]'):format(VALID), "edits[1].id: must be an integer layer id" },
    { ('[{"id":0,"features":{"adds":[%s]}},{"id":9,"features":{"adds":[]}}]'):format(VALID),
      "edits[2].id: layer 9 is not part of this service" },
    { '{"id":0}', "edits: must be an array of layer entries" },
    { ('[{"id":0,"features":{"adds":[%s],"updates":[{"attributes":{"GlobalID":"%s","OWNER":{"a":1}}}]}}]'):format(
        VALID, PARCEL1), "edits[1].features.updates[1].attributes.OWNER: must be a string, number, boolean or null" },
    { ('[{"id":0,"features":{"adds":[%s,{"attributes":{"GlobalID":5}}]}}]'):format(VALID),
      "edits[1].features.adds[2].attributes.GlobalID: must be a string" },
    { ('[{"id":0,"features":{"adds":[%s,{"attributes":{"APN":"g"},"geometry":5}]}}]'):format(VALID),
      "edits[1].features.adds[2].geometry: must be an object" },
    { ('[{"id":0,"features":{"adds":[%s]},"attachments":{"adds":[{"globalId":5}]}}]'):format(VALID),
      "edits[1].attachments.adds[1].globalId: must be a string" },
  }
  for i, case in ipairs(MALFORMED) do
    it(("malformed edits #%d are refused whole: %s"):format(i, case[2]), function()
      local before = parcels(emu)
      local status, body = sync_raw(emu, case[1])
      assert.equal(400, status)
      assert.equal(400, body.error.code)
      assert.equal(case[2], body.error.details[1])
      local after = parcels(emu)
      assert.is_nil(after.layers["0"].features[GID])
      assert.equal(before.gen, after.gen)
      assert.equal(#before.log, #after.log)
      assert.equal("Jane Smith", after.layers["0"].features[PARCEL1].attributes.OWNER)
    end)
  end

  it("well-formed edits that fail are still reported per edit, the others applied and logged", function()
    local missing = "{00000000-0000-4000-8000-00000000dead}"
    local text = ('[{"id":0,"features":{"adds":[%s,{"attributes":{"GlobalID":"%s","APN":"dup"}}],'
      .. '"updates":[{"attributes":{"GlobalID":"%s","OWNER":"nobody"}}],"deleteIds":["%s"]}}]'):format(
      VALID, PARCEL1, missing, missing)
    local status, body = sync_raw(emu, text, { EMBEDDED, { "rollbackOnFailure", "false" } })
    assert.equal(200, status)
    local res = body.edits[1].features
    assert.is_true(res.addResults[1].success)
    assert.is_false(res.addResults[2].success)
    assert.equal(-2147217395, res.addResults[2].error.code)
    assert.is_false(res.updateResults[1].success)
    assert.equal(1019, res.updateResults[1].error.code)
    assert.is_false(res.deleteResults[1].success)
    local s = parcels(emu)
    assert.is_not_nil(s.layers["0"].features[GID])
    local entries = log_entries(s, GID)
    assert.equal(1, #entries)
    assert.equal("add", entries[1].op)
    assert.equal(body.replicaServerGen, entries[1].gen)
  end)

  it("rollbackOnFailure = true rolls back every edit of the request on one failed edit", function()
    local before = parcels(emu)
    local text = ('[{"id":0,"features":{"adds":[%s],"updates":[{"attributes":{"GlobalID":"%s","OWNER":"x"}}]}}]')
      :format(VALID, "{00000000-0000-4000-8000-00000000dead}")
    local _, body = sync_raw(emu, text, { { "rollbackOnFailure", "true" } })
    assert.is_table(body.error)
    local after = parcels(emu)
    assert.is_nil(after.layers["0"].features[GID])
    assert.equal(before.gen, after.gen)
    assert.equal(#before.log, #after.log)
  end)

  it("an editsUploadId naming no uploaded item is refused with a 400 naming it; nothing is applied", function()
    local before = parcels(emu)
    local status, body = sync_raw(emu, nil, { { "editsUploadId", "u1" }, { "editsUploadFormat", "JSON" } })
    assert.equal(400, status)
    assert.equal(400, body.error.code)
    assert.matches("editsUploadId", body.error.message .. " " .. table.concat(body.error.details or {}, " "))
    assert.equal(before.gen, parcels(emu).gen)
  end)
end)

describe("emulator: non-finite numbers in edits", function()
  local CASES = {
    { ('[{"id":0,"features":{"adds":[{"attributes":{"GlobalID":"%s","ACRES":1e400}}]}}]'):format(GID),
      "edits[1].features.adds[1].attributes.ACRES: must be a finite number" },
    { ('[{"id":0,"features":{"adds":[%s,{"attributes":{"APN":"g"},"geometry":{"x":-1e400,"y":0}}]}}]'):format(VALID),
      "edits[1].features.adds[2].geometry.x: must be a finite number" },
    { ('[{"id":0,"features":{"updates":[{"attributes":{"GlobalID":"%s","ACRES":-1e999}}]}}]'):format(PARCEL1),
      "edits[1].features.updates[1].attributes.ACRES: must be a finite number" },
  }
  local emu
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function() emu:reset() end)

  for i, case in ipairs(CASES) do
    it(("are refused with a 400 naming the position (#%d); later exports still work"):format(i), function()
      local before = parcels(emu)
      local status, body = sync_raw(emu, case[1])
      assert.equal(400, status)
      assert.equal(case[2], body.error.details[1])
      local after = parcels(emu)
      assert.equal(before.gen, after.gen)
      assert.equal(0.25, after.layers["0"].features[PARCEL1].attributes.ACRES)
      local ok, snap = sync_raw(emu, nil, { { "syncDirection", "snapshot" } }, CREW2)
      assert.equal(200, ok)
      assert.is_nil(snap.error)
    end)
  end

  it("never reach a state file: after a restart every export works", function()
    local state_file = tmp_path()
    local first = start_with_state(state_file)
    finally(function() remove_state(state_file) end)
    local status = sync_raw(first, CASES[1][1])
    assert.equal(400, status)
    crash(first)
    local again = start_with_state(state_file)
    finally(function() again:stop() end)
    local ok, snap = sync_raw(again, nil, { { "syncDirection", "snapshot" } }, CREW2)
    assert.equal(200, ok)
    assert.is_nil(snap.error)
    local url_status, url_body = sync_raw(again, nil, { { "transportType", "esriTransportTypeUrl" } }, CREW2)
    assert.equal(200, url_status)
    assert.is_string(url_body.URL)
  end)
end)

describe("emulator: async jobs import their edits in ImportChanges", function()
  local state_file, emu
  after_each(function()
    if emu then emu:stop() end
    emu = nil
    if state_file then remove_state(state_file) end
    state_file = nil
  end)

  local function submit(e, step_ms)
    e:control("settings", { job_step_ms = step_ms })
    local status, body = sync_raw(e, ('[{"id":0,"features":{"adds":[%s]}}]'):format(VALID),
      { { "async", "true" }, { "transportType", "esriTransportTypeUrl" } })
    assert.equal(200, status)
    assert.is_string(body.statusUrl, json.encode(body))
    return body.statusUrl
  end

  local function job_status(e, status_url)
    local resp = assert(transport.perform(e.driver, { url = status_url .. "?f=json", timeout_ms = 5000 }))
    return assert(json.decode(resp.body))
  end

  local function wait_status(e, status_url, wanted)
    return helper.wait_for("job status " .. wanted, function()
      local r = job_status(e, status_url)
      return r.status == wanted and r
    end)
  end

  -- The phase order: a status never goes back.
  local ORDER = { Pending = 1, InProgress = 2, ImportChanges = 3, ExportChanges = 4, Completed = 5 }

  -- Polls until the status is at or past `wanted` (a slowed poll may miss a
  -- phase that lasts a few hundred ms); returns that status resource.
  local function wait_past(e, status_url, wanted)
    return helper.wait_for("job status " .. wanted .. " or later", function()
      local r = job_status(e, status_url)
      return ORDER[r.status] and ORDER[r.status] >= ORDER[wanted] and r
    end)
  end

  it("nothing is applied before ImportChanges; afterwards exactly once, with its log entry", function()
    emu = helper.start_emulator()
    -- The job moves on by itself while the spec reads, so each read of the
    -- data is ordered against a read of the status: data read BEFORE a status
    -- that is still before the import must not hold the add; data read AFTER
    -- a status of the import or later must hold it (a status never goes back).
    -- A machine stalled longer than Pending between the submission and the
    -- first status read misses it: the job is run again with longer phases.
    helper.within_window("the first status read while the job is Pending", { 300, 1500, 6000 }, function(step_ms)
      emu:reset()
      local before = parcels(emu)
      local url = submit(emu, step_ms)
      local seen = {}
      helper.wait_for("the job to complete", function()
        local data_before = parcels(emu)
        local r = job_status(emu, url)
        if not seen[#seen] or seen[#seen] ~= r.status then seen[#seen + 1] = r.status end
        if r.status == "Pending" or r.status == "InProgress" then
          assert.is_nil(data_before.layers["0"].features[GID]) -- submitted, not imported
          assert.equal(before.gen, data_before.gen)
        elseif r.status == "ImportChanges" or r.status == "ExportChanges" then
          assert.is_not_nil(parcels(emu).layers["0"].features[GID])
        end
        return r.status == "Completed"
      end)
      -- The phases follow the clock, so a poll slowed by a loaded machine may
      -- miss one: what was seen must be in the server's order, first to last.
      assert.equal("Completed", seen[#seen])
      for i = 2, #seen do
        assert.is_true(ORDER[seen[i]] > ORDER[seen[i - 1]], table.concat(seen, ", "))
      end
      local after = parcels(emu)
      assert.is_not_nil(after.layers["0"].features[GID])
      assert.equal(1, #log_entries(after, GID))
      return seen[1] == "Pending"
    end)
  end)

  it("runs by itself: with nobody polling, the state file shows the edits applied once", function()
    state_file = tmp_path()
    emu = start_with_state(state_file)
    local url = submit(emu, 100)
    local id = url:match("/jobs/(%w+)$")
    -- the job's import and its data are saved together: whenever the
    -- emulator's own loop has got to (it imports 200 ms after submission,
    -- sooner than a stalled spec may read), the file holds both or neither
    local saved = saved_state(state_file)
    assert.equal(saved.jobs.by_id[id].imported == true, saved.feature_services.Parcels.layers[0].features[GID] ~= nil)
    -- no request at all while the job runs: only the file is read
    saved = helper.wait_for("the job's export in the state file", function()
      local s = saved_state(state_file)
      return s.jobs.by_id[id].exported and s
    end)
    assert.is_true(saved.jobs.by_id[id].imported)
    assert.is_not_nil(saved.feature_services.Parcels.layers[0].features[GID])
    local n = 0
    for _, e in ipairs(saved.feature_services.Parcels.log) do
      if e.globalId == GID then n = n + 1 end
    end
    assert.equal(1, n)
  end)

  it("killed before import: after a restart the job still runs and imports exactly once", function()
    -- a spec stalled past Pending and InProgress kills it after its import:
    -- then it runs again with longer phases
    helper.within_window("the kill before the import", { 400, 1600, 6400 }, function(step_ms)
      if state_file then remove_state(state_file) end
      state_file = tmp_path()
      local first = start_with_state(state_file)
      local url = submit(first, step_ms)
      local id = url:match("/jobs/(%w+)$")
      crash(first) -- during Pending
      local saved = saved_state(state_file)
      if saved.jobs.by_id[id].imported then -- the kill came after the import: missed
        assert.is_not_nil(saved.feature_services.Parcels.layers[0].features[GID]) -- saved with its data
        return false
      end
      assert.is_nil(saved.feature_services.Parcels.layers[0].features[GID])
      emu = restart(state_file, first.port)
      local done = wait_status(emu, url, "Completed")
      assert.is_string(done.resultUrl)
      assert.not_equal("", done.resultUrl)
      local s = parcels(emu)
      assert.is_not_nil(s.layers["0"].features[GID])
      assert.equal(1, #log_entries(s, GID))
      local resp = assert(transport.perform(emu.driver, { url = done.resultUrl, timeout_ms = 5000 }))
      assert.equal(200, resp.status)
      local doc = assert(json.decode(resp.body))
      assert.is_table(doc.edits) -- the changes to download; a result file never has per-edit results
      return true
    end)
  end)

  it("killed after import: after a restart it completes without importing again", function()
    -- killed in ImportChanges or ExportChanges; a poll stalled past both
    -- finds the job Completed: then it runs again with longer phases
    helper.within_window("the kill between the import and the end", { 400, 1600, 6400 }, function(step_ms)
      if state_file then remove_state(state_file) end
      state_file = tmp_path()
      local first = start_with_state(state_file)
      local url = submit(first, step_ms)
      local r = wait_past(first, url, "ImportChanges")
      crash(first)
      local saved = saved_state(state_file)
      assert.is_not_nil(saved.feature_services.Parcels.layers[0].features[GID])
      if r.status == "Completed" then return false end
      emu = restart(state_file, first.port)
      wait_status(emu, url, "Completed")
      local s = parcels(emu)
      assert.equal(1, #log_entries(s, GID))
      return true
    end)
  end)

  it("a sync with rollbackOnFailure whose edits fail at import ends Failed with nothing applied", function()
    emu = helper.start_emulator()
    emu:control("settings", { job_step_ms = 30 })
    local before = parcels(emu)
    local text = ('[{"id":0,"features":{"adds":[%s],"updates":[{"attributes":{"GlobalID":"%s","OWNER":"x"}}]}}]')
      :format(VALID, "{00000000-0000-4000-8000-00000000dead}")
    local status, body = sync_raw(emu, text, { { "async", "true" }, { "rollbackOnFailure", "true" } })
    assert.equal(200, status)
    local r = wait_status(emu, body.statusUrl, "Failed")
    assert.equal("", r.resultUrl)
    local after = parcels(emu)
    assert.is_nil(after.layers["0"].features[GID])
    assert.equal(before.gen, after.gen)
  end)

  it("malformed edits of an async request are refused at submission (400), no job", function()
    emu = helper.start_emulator()
    local status, body = sync_raw(emu, ('[{"id":0,"features":{"adds":[%s,5]}}]'):format(VALID),
      { { "async", "true" } })
    assert.equal(400, status)
    assert.equal("edits[1].features.adds[2]: must be a feature object", body.error.details[1])
  end)
end)

describe("emulator: SIGKILL at any moment with --state-file", function()
  it("every restart loads a whole state; every acknowledged add is kept, none twice", function()
    local state_file = tmp_path()
    local dir = tmp_path()
    assert(os.execute("mkdir -p " .. helper.shell_quote(dir)))
    finally(function()
      remove_state(state_file)
      os.execute("rm -rf " .. helper.shell_quote(dir))
    end)
    local emu = start_with_state(state_file)
    emu:control("settings", { job_step_ms = 20 })
    local acknowledged = {}
    math.randomseed(14)
    for round = 1, 6 do
      -- a burst of syncs with adds (some async) from a background shell, killed at a random moment
      local script = {}
      for i = 1, 40 do
        local gid = ("{BBBBBBBB-%04d-4000-8000-%012d}"):format(round, i)
        local body = ("f=json&transportType=esriTransportTypeEmbedded&replicaID=%s&replicaServerGen=1&edits=%s%s")
          :format(core.urlencode(CREW1),
          core.urlencode(('[{"id":0,"features":{"adds":[{"attributes":{"GlobalID":"%s","APN":"kill"}}]}}]')
            :format(gid)), i % 5 == 0 and "&async=true" or "")
        local file = ("%s/r%d_%d"):format(dir, round, i)
        local f = assert(io.open(file .. ".body", "wb"))
        f:write(body)
        f:close()
        -- once the port is closed (curl: 7, could not connect) the emulator is dead and the rest of the
        -- burst could only meet it closed too: the burst ends there (its requests are written, not sent)
        script[#script + 1] = ("env -u LD_PRELOAD curl -s --max-time 5 --data-binary @%s %s > %s.out; "
          .. "[ $? -ne 7 ] || exit 0"):format(helper.shell_quote(file .. ".body"),
          helper.shell_quote(emu.url .. SYNC_PATH), helper.shell_quote(file))
      end
      local sh = ("%s/burst%d.sh"):format(dir, round)
      local f = assert(io.open(sh, "wb"))
      f:write(table.concat(script, "\n"), "\n")
      f:close()
      local pidfile = sh .. ".pid"
      assert(os.execute(("sh %s > /dev/null 2>&1 & echo $! > %s"):format(helper.shell_quote(sh),
        helper.shell_quote(pidfile))))
      helper.sleep(0.05 + math.random() * 0.4)
      local port = emu.port
      crash(emu)
      local burst_pid = helper.read_all(pidfile):match("%d+")
      helper.wait_for("the burst to end", function() return not helper.process_alive(burst_pid) end, 15)
      for i = 1, 40 do
        local out = helper.read_all(("%s/r%d_%d.out"):format(dir, round, i))
        local doc = out and out ~= "" and json.decode(out)
        if type(doc) == "table" and doc.edits then
          acknowledged[("{BBBBBBBB-%04d-4000-8000-%012d}"):format(round, i)] = true
        end
      end
      emu = restart(state_file, port) -- raises if the state file does not load
    end
    finally(function() emu:stop() end)
    -- let any job that was submitted finish its import
    helper.sleep(0.5)
    local s = parcels(emu)
    local n_ack = 0
    for gid in pairs(acknowledged) do
      n_ack = n_ack + 1
      assert.is_not_nil(s.layers["0"].features[gid], gid .. " was acknowledged but is lost")
    end
    assert.is_true(n_ack > 0)
    local adds = {}
    for _, e in ipairs(s.log) do
      if e.op == "add" then
        assert.is_nil(adds[e.globalId], e.globalId .. " added twice")
        adds[e.globalId] = true
        assert.is_true(e.gen <= s.gen)
      end
    end
    for gid, f in pairs(s.layers["0"].features) do
      if f.attributes.APN == "kill" then assert.is_true(adds[gid], gid .. " has no change-log entry") end
    end
    -- no temporary file of the atomic writes is left next to the state file
    local p = io.popen("ls " .. helper.shell_quote(state_file) .. ".tmp* 2>/dev/null | wc -l")
    local leftovers = tonumber(p:read("a"))
    p:close()
    assert.equal(0, leftovers)
    -- the client still syncs against it
    local client = geoservices.client{ url = emu.url, token = "alice-token" }
    assert(client:synchronize_replica("Parcels", { replicaID = CREW2, replicaServerGen = 1 }))
  end)
end)

describe("emulator: large request bodies", function()
  local emu, dir
  setup(function()
    emu = helper.start_emulator{ args = { "--max-body", tostring(96 * 1024 * 1024) } }
    dir = tmp_path()
    assert(os.execute("mkdir -p " .. helper.shell_quote(dir)))
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. helper.shell_quote(dir))
  end)
  before_each(function() emu:reset() end)

  local function big_file(name, size)
    local path = dir .. "/" .. name
    local f = assert(io.open(path, "wb"))
    local block = string.rep("0123456789abcdef", 4096) -- 64 KiB
    for _ = 1, size // #block do f:write(block) end
    f:write(block:sub(1, size % #block))
    f:close()
    return path
  end

  -- curl in the foreground; returns the HTTP code and the body.
  local function curl(args)
    local out = dir .. "/curl.out"
    local parts = { "env -u LD_PRELOAD curl -s --max-time 120 -o", helper.shell_quote(out), "-w '%{http_code}'" }
    for _, a in ipairs(args) do parts[#parts + 1] = helper.shell_quote(a) end
    local p = io.popen(table.concat(parts, " "))
    local code = tonumber(p:read("a"))
    p:close()
    return code, helper.read_all(out)
  end

  local function vm_hwm_kib(pid)
    return tonumber(helper.read_all("/proc/" .. pid .. "/status"):match("VmHWM:%s*(%d+)"))
  end

  it("a 3 MiB multipart file part arrives whole, read from its own file", function()
    local path = big_file("license.bin", 3 * 1024 * 1024 + 7)
    local code, body = curl{ "-F", "f=json", "-F", "licenseFile=@" .. path .. ";type=application/octet-stream",
                             emu.root .. "/_emulator/echo" }
    assert.equal(200, code)
    local echo = json.decode(body)
    local file = echo.files.licenseFile
    assert.equal(3 * 1024 * 1024 + 7, file.length)
    assert.equal("0123456789abcdef0123456789abcdef", file.head)
    assert.equal(("0123456789abcdef"):rep(3):sub(-25) .. "0123456", file.tail)
    assert.is_true(file.spooled)
    assert.equal("json", echo.fields.f.head)
    assert.is_true(echo.body_length > 3 * 1024 * 1024)
  end)

  it("a 3 MiB urlencoded body is decoded from its spool file", function()
    local value = string.rep("x", 3 * 1024 * 1024)
    local path = dir .. "/form.txt"
    local f = assert(io.open(path, "wb"))
    f:write("f=json&big=", value, "&tail=%21")
    f:close()
    local code, body = curl{ "--data-binary", "@" .. path, emu.root .. "/_emulator/echo" }
    assert.equal(200, code)
    local echo = json.decode(body)
    assert.equal(#value, echo.fields.big.length)
    assert.equal("!", echo.fields.tail.head)
  end)

  it("synchronizeReplica with 2 MiB of edits (a spooled body) applies them", function()
    local adds = {}
    for i = 1, 6000 do
      adds[i] = ('{"attributes":{"GlobalID":"{CCCCCCCC-0000-4000-8000-%012d}","APN":"%s"},"geometry":{"x":1,"y":2}}')
        :format(i, string.rep("p", 300))
    end
    local edits = '[{"id":0,"features":{"adds":[' .. table.concat(adds, ",") .. ']}}]'
    local body = ("f=json&transportType=esriTransportTypeEmbedded&replicaID=%s&replicaServerGen=1&edits=%s")
      :format(core.urlencode(CREW1), core.urlencode(edits))
    assert.is_true(#body > 2 * 1024 * 1024)
    local path = dir .. "/sync.txt"
    local f = assert(io.open(path, "wb"))
    f:write(body)
    f:close()
    local code, out = curl{ "--data-binary", "@" .. path, emu.url .. SYNC_PATH }
    assert.equal(200, code)
    local doc = json.decode(out)
    assert.equal(6000, #doc.edits[1].features.addResults)
    assert.is_not_nil(parcels(emu).layers["0"].features["{CCCCCCCC-0000-4000-8000-000000006000}"])
  end)

  it("answers 413 above --max-body", function()
    local path = big_file("too_big.bin", 96 * 1024 * 1024 + 1)
    local code = curl{ "--data-binary", "@" .. path, emu.root .. "/_emulator/echo" }
    assert.equal(413, code)
    os.remove(path)
  end)

  it("receives a 64 MiB multipart file part without holding it in memory", function()
    local path = big_file("big.bin", 64 * 1024 * 1024)
    local before = vm_hwm_kib(emu.pid)
    local code, body = curl{ "-F", "licenseFile=@" .. path, emu.root .. "/_emulator/echo" }
    assert.equal(200, code)
    assert.equal(64 * 1024 * 1024, json.decode(body).files.licenseFile.length)
    local grown = vm_hwm_kib(emu.pid) - before
    -- under `make asan` freed memory sits in ASan's quarantine: RSS says nothing there
    if not (os.getenv("LD_PRELOAD") or ""):match("asan") then
      assert.is_true(grown < 24 * 1024, ("peak RSS grew by %d KiB"):format(grown))
    end
    os.remove(path)
  end)
end)

-- SIGTERM is how scripts, service managers and `make demo` stop the
-- emulator command: it stops as cleanly as on Ctrl-C, and the result files
-- it keeps in /tmp without a state file go with it.
describe("emulator command stopped by SIGTERM", function()
  it("removes its temporary result files and exits with 143 (128 + SIGTERM)", function()
    local dir = helper.tmp_dir()
    local q = helper.shell_quote
    assert(os.execute(("cd %s && (LUA_PATH=%s LUA_CPATH=%s lua5.4 lua/geoservices/emulator/main.lua --port 0 "
      .. "--data examples/data/world.json > %s 2>&1 & echo $! > %s; wait $!; echo $? > %s) &"):format(
      q(helper.ROOT), q(package.path), q(package.cpath), q(dir .. "/log"), q(dir .. "/pid"), q(dir .. "/code"))))
    local function read(name)
      local f = io.open(dir .. "/" .. name)
      if not f then return nil end
      local text = f:read("a")
      f:close()
      return text
    end
    local pid = helper.wait_for("emulator pid", function() return tonumber(read("pid")) end, 5)
    finally(function() os.execute("kill -9 " .. pid .. " 2>/dev/null") end)
    local url = helper.wait_for("listening line", function()
      return (read("log") or ""):match("listening on (http://127%.0%.0%.1:%d+/server)")
    end, 10)
    local emu = { url = url, driver = core.driver() }
    local status, body = sync_raw(emu, nil, { { "transportType", "esriTransportTypeUrl" } })
    assert.equal(200, status)
    local result = assert(transport.perform(emu.driver, { url = body.URL, timeout_ms = 10000 }))
    assert.equal(200, result.status)
    emu.driver:close()
    -- the file the emulator serves it from: a /tmp/lua_* file with exactly
    -- these bytes, made since the emulator started
    local kept
    local p = io.popen("find /tmp -maxdepth 1 -name 'lua_*' -type f -newer " .. q(dir .. "/pid") .. " 2>/dev/null")
    for path in p:lines() do
      local f = io.open(path, "rb")
      if f and f:seek("end") == #result.body then
        f:seek("set")
        if f:read("a") == result.body then kept = path end
      end
      if f then f:close() end
    end
    p:close()
    assert.is_string(kept, "the result file in /tmp")

    os.execute("kill -TERM " .. pid)
    local code = helper.wait_for("exit code", function() return tonumber(read("code")) end, 10)
    assert.equal(143, code)
    assert.matches("terminated; the emulator stopped", read("log"), 1, true)
    assert.is_nil(io.open(kept), kept .. " is left behind")
  end)
end)
