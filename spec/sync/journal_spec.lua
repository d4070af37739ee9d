-- The journal and the lock of client:sync, with real processes: a client
-- killed (SIGKILL) while it waits for an answer or polls a job leaves its
-- attempt journaled beside the state, and the next sync resolves it with
-- every edit applied exactly once; two processes on one state file never
-- interleave.
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local q = helper.shell_quote
local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"

local tmp_dir, write = helper.tmp_dir, helper.write_file

-- Starts spec/support/sync_child.lua in the background; returns its pid and output file.
local function child(url, state, edits_path, mode, lock_timeout)
  local out = helper.tmp_name()
  local pidfile = helper.tmp_name()
  local cmd = ("LUA_PATH=%s LUA_CPATH=%s lua5.4 spec/support/sync_child.lua %s %s %s %s %s > %s 2>&1 & "
    .. "echo $! > %s"):format(
    q(package.path), q(package.cpath), q(url), q(state), q(edits_path or "-"), q(mode or "sync"),
    q(tostring(lock_timeout or "")), q(out), q(pidfile))
  assert(os.execute(cmd))
  local pid = helper.wait_for("child pid", function() return tonumber(helper.read_all(pidfile)) end, 5)
  os.remove(pidfile)
  return pid, out
end

local function outcome(out)
  local line = (helper.read_all(out) or ""):match("({.-})%s*$")
  return line and json.decode(line)
end

local function wait_exit(pid)
  helper.wait_for("child exit", function() return not helper.process_alive(pid) end, 60)
end

describe("client:sync journal and lock", function()
  local emu, dir
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    dir = tmp_dir()
  end)
  after_each(function() os.execute("rm -rf " .. q(dir)) end)

  local function new_state()
    local path = dir .. "/crew-1.json"
    write(path, json.encode{ service = "Parcels", replicaID = CREW1, model = "perReplica", replicaServerGen = 1 })
    return path
  end

  local function edits_file(n)
    local e = geoservices.edits()
    local gids = {}
    for i = 1, n do
      gids[i] = e:add(0, { attributes = { APN = ("journal-%d"):format(i) }, geometry = { x = -117, y = 34 } })
    end
    local path = dir .. "/edits.json"
    write(path, e:encode())
    return path, gids
  end

  local function client() return geoservices.client{ url = emu.url, token = "alice-token" } end

  -- A child that syncs `state` (the edits file `edits`, or none) as an async job of steps `step_ms`,
  -- killed (SIGKILL) once the journal holds the job's address. False when it ended before the kill
  -- (it printed its outcome).
  local function killed_while_polling(state, edits, step_ms)
    emu:control("settings", { job_step_ms = step_ms })
    local pid, out = child(emu.url, state, edits, "async")
    helper.wait_for("the job's address in the journal", function()
      local j = helper.read_all(state .. ".journal")
      return j and json.decode(j).status_url
    end)
    os.execute("kill -9 " .. pid)
    wait_exit(pid)
    return not outcome(out)
  end

  -- The next sync of `state` (no edits of its own) re-attaches to the killed child's job: its
  -- result synchronizes the replica, nothing is submitted again and the journal is gone.
  local function reattaches(state)
    local submitted = emu:count("synchronizeReplica")
    local result = assert(client():sync(state, nil, { poll_interval = 0.05 }))
    assert.is_true(result.reattached)
    assert.equal(submitted, emu:count("synchronizeReplica"))
    assert.is_nil(helper.read_all(state .. ".journal"))
  end

  local function count_on_server(gids)
    local features = emu:control("state").featureServices.Parcels.layers["0"].features
    local n = 0
    for _, gid in ipairs(gids) do
      if features[gid] then n = n + 1 end
    end
    return n
  end

  it("a client killed while waiting for the answer leaves a journal; the next sync applies each edit once", function()
    local state = new_state()
    local before = helper.read_all(state)
    local edits, gids = edits_file(3)
    -- the answer comes long after the kill, however long the spec is stalled before it (nobody waits for it)
    emu:fault{ route = "synchronizeReplica", kind = "delay", delay_ms = 60000, attempts = { 1 } }
    local pid = child(emu.url, state, edits)
    helper.wait_for("the request to reach the emulator", function() return emu:count("synchronizeReplica") >= 1 end)
    helper.sleep(0.3) -- the edits are applied, the answer is delayed
    os.execute("kill -9 " .. pid)
    wait_exit(pid)
    assert.equal(before, helper.read_all(state)) -- the generation did not move
    local journal = json.decode(assert(helper.read_all(state .. ".journal")))
    assert.equal(3, #journal.edits[1].features.adds)
    assert.equal(3, count_on_server(gids))
    -- the next sync (no edits of its own) resolves the attempt first
    local c = client()
    local submitted = emu:count("synchronizeReplica")
    local result = assert(c:sync(state))
    -- read back from the server, not sent again: 3 applied
    assert.truthy(result.resolved)
    assert.equal(3, result.resolved.verified)
    assert.equal("read back from the server: 3 edit(s) applied, 0 rejected, 0 conflict(s), 0 to send again",
      tostring(result.resolved))
    assert.equal(submitted + 1, emu:count("synchronizeReplica")) -- this sync's own download, without edits
    assert.equal(3, count_on_server(gids))
    assert.is_nil(helper.read_all(state .. ".journal"))
    assert.is_true(json.decode(helper.read_all(state)).replicaServerGen > 1)
  end)

  -- The job runs four steps; a spec stalled past them lets the child finish
  -- its sync before the kill (it printed its outcome): what the test is about
  -- did not happen, and it runs again with longer steps.
  local STEPS = { 400, 1600, 6400 }

  it("a client killed while polling an async job re-attaches to the job instead of submitting again", function()
    helper.within_window("the kill while the child polls", STEPS, function(step_ms)
      emu:reset()
      local state = new_state()
      local edits, gids = edits_file(2)
      if not killed_while_polling(state, edits, step_ms) then return false end -- it ended before the kill
      reattaches(state)
      assert.equal(2, count_on_server(gids))
      return true
    end)
  end)

  it("a download-only async sync killed while polling re-attaches to its job too", function()
    helper.within_window("the kill while the child polls", STEPS, function(step_ms)
      emu:reset()
      local state = new_state()
      if not killed_while_polling(state, nil, step_ms) then return false end -- it ended before the kill
      reattaches(state)
      return true
    end)
  end)

  it("a second process gets kind busy at once, or waits with lock_timeout; never an interleaving", function()
    helper.within_window("the second sync while the first holds the lock", { 300, 1200, 4800 }, function(step_ms)
      emu:reset()
      local state = new_state()
      emu:control("settings", { job_step_ms = step_ms })
      local pid, out = child(emu.url, state, nil, "async")
      helper.wait_for("the first sync to hold the lock", function()
        return (helper.read_all(out) or ""):find("started", 1, true) and emu:count("synchronizeReplica") >= 1
      end)
      local c = client()
      local result, err = c:sync(state)
      if result then -- it got the lock: the first sync had ended before it began
        wait_exit(pid)
        assert.is_true(outcome(out).ok, helper.read_all(out))
        return false
      end
      assert.equal("busy", err.kind)
      local waited = assert(c:sync(state, nil, { lock_timeout = 30 }))
      wait_exit(pid)
      local first = outcome(out)
      assert.is_true(first.ok, helper.read_all(out))
      -- the waiting sync started from the first one's generation and moved past it
      assert.is_true(waited.replicaServerGen >= first.generation)
      assert.equal(waited.replicaServerGen, json.decode(helper.read_all(state)).replicaServerGen)
      return true
    end)
  end)

  it("a lost answer with rollbackOnFailure is read back at once; the next sync sends only its own edits", function()
    local state = new_state()
    local edits, gids = edits_file(2)
    emu:fault{ route = "synchronizeReplica", kind = "reset", attempts = { 1 } }
    local c = client()
    local text = helper.read_all(edits)
    local _, err = c:sync(state, text, { params = { rollbackOnFailure = true } })
    assert.is_true(err.outcome_unknown)
    assert.equal(2, err.verified)
    assert.is_nil(helper.read_all(state .. ".journal"), "settled: nothing is left to send")
    local e2 = geoservices.edits()
    local gid3 = e2:add(0, { attributes = { APN = "journal-new" } })
    local result = assert(c:sync(state, e2, { params = { rollbackOnFailure = true } }))
    assert.equal(1, result.succeeded)
    assert.equal(2, emu:count("synchronizeReplica"))
    assert.equal(3, count_on_server{ gids[1], gids[2], gid3 })
  end)

  it("a state that cannot be saved after the server applied the edits says so (edits_applied)", function()
    local state = new_state()
    emu:control("settings", { job_step_ms = 50 })
    local c = client()
    local e = geoservices.edits()
    e:add(0, { attributes = { APN = "unsaved" } })
    local result, err = c:sync(state, e, { params = { async = true }, poll_interval = 0.02,
      on_status = function()
        -- the state's place becomes a directory: the rename of the new state fails
        os.remove(state)
        os.execute("mkdir -p " .. q(state))
      end })
    assert.is_nil(result)
    assert.equal("io", err.kind)
    assert.is_true(err.edits_applied)
  end)
end)
