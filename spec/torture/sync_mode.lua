-- The torture of client:sync with a state file, in one mode. Each run:
-- replica A's user makes two adds, an update of an earlier feature and
-- (every third run) a delete; a child process (spec/support/sync_child.lua)
-- synchronizes A with them and is killed in the run's target phase (or
-- the emulator is, with the child's request in flight). In every other run
-- with an update, replica B then edits the feature A updated. Then A
-- synchronizes again WITHOUT the edits: what the killed process had taken
-- on must come from its journal, nowhere else. B downloads after every run.
local forgetful = require "spec.torture.forgetful"
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local helper = require "spec.helper"
local reported = require "spec.torture.reported"
local scenario = require "spec.torture.scenario"
local strike = require "spec.torture.strike"

local M = {}

M.REPLICA_ID = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
M.TITLE = "client:sync (state file)"

local TRANSPORTS = { url = "esriTransportTypeUrl", embedded = "esriTransportTypeEmbedded" }

-- A's sync in this process until it succeeds (the lock of a child still
-- running is waited for); what it reported goes to the ledger.
-- TORTURE_TRACE=<file> in the environment: after each of A's syncs (and each
-- child), what happened and A's journal are appended to the file, to trace a failure.
local function trace(ctx, what)
  local path = os.getenv("TORTURE_TRACE")
  if not path then return end
  local f = io.open(path, "a")
  f:write(("== %s %s run %s\n%s\n"):format(ctx.mode.label, what, tostring(ctx.run),
    helper.read_all(ctx.state_a .. ".journal") or "(no journal)"))
  f:close()
end

local function sync_a(ctx, mode)
  local last
  for _ = 1, 30 do
    local c = geoservices.client{ url = ctx.emu.url, token = "alice-token", timeout = 30 }
    local r, err = c:sync(ctx.state_a, nil, { lock_timeout = 60, timeout = 60, poll_interval = 0.05,
      params = { async = mode.async or nil, transportType = not mode.async and TRANSPORTS[mode.transport] or nil },
      journal = forgetful.option(), late_window = mode.late_window })
    c:close()
    if r then
      ctx.ledger:report(reported.of(r))
      trace(ctx, "after A's sync: " .. require("geoservices.base.json").encode(reported.of(r)))
      return true
    end
    -- a failed sync's error is the only report of what it read back in conflict or rejected
    -- (the journal forgets a settled edit): the user was told there
    if err then ctx.ledger:report(reported.of(err)) end
    last = err
    helper.sleep(0.2)
  end
  return nil, "replica A's sync never succeeded: " .. tostring(last and last.message)
end

function M.run_mode(mode, runs)
  local late = mode.late_window and tostring(mode.late_window) -- the children's late_window
  local ctx = scenario.start(mode, M.REPLICA_ID)
  if ctx.setup_error then return scenario.abort(ctx, 0, ctx.setup_error) end
  ctx.state_a = ctx.dir .. "/crew-a.json"
  local state = { service = "Parcels", replicaID = M.REPLICA_ID, model = "perReplica", replicaServerGen = 1 }
  if mode.model and mode.model ~= "perReplica" then -- a replica of the mode's model, made for it
    local made, err = scenario.new_replica(ctx.emu, "torture-a", mode.model)
    if not made then return scenario.abort(ctx, 0, err) end
    state = made
    scenario.set_origin(ctx, made.replicaID)
  end
  helper.write_file(ctx.state_a, json.encode(state))
  for run = 1, runs do
    local e = geoservices.edits()
    ctx.run = run
    local plan = scenario.user_edits(ctx, run)
    for _, add in ipairs(plan.adds) do
      add.gid = e:add(0, { attributes = { OWNER = add.value, APN = ("t%d"):format(run) },
                           geometry = { x = -117 - run / 1000, y = 34 } })
    end
    if plan.update then e:update(0, { attributes = { GlobalID = plan.update.gid, OWNER = plan.update.value } }) end
    if plan.delete then e:delete(0, plan.delete) end
    scenario.record_edits(ctx, plan, run)
    scenario.refuse_ahead(ctx, plan, run)
    local edits_path = ctx.dir .. "/edits.json"
    helper.write_file(edits_path, e:encode())
    local hit = strike.run{
      dir = ctx.dir, emu = ctx.emu, mode = mode, target = scenario.target(ctx, run),
      script = "spec/support/sync_child.lua",
      args = { ctx.emu.url, ctx.state_a, edits_path, mode.async and "async" or "sync", "60" },
      env = { TORTURE_TRANSPORT = not mode.async and mode.transport or nil, TORTURE_LATE_WINDOW = late },
      kill_emulator = scenario.emulator_kill(ctx, run),
    }
    scenario.count_hit(ctx, hit)
    trace(ctx, "after the child " .. tostring(hit.child_phase) .. " emu " .. tostring(hit.emulator_phase))
    if helper.read_all(ctx.state_a .. ".journal") then ctx.journals_seen = ctx.journals_seen + 1 end
    scenario.interfere(ctx, plan, run, hit)
    scenario.kill_while_verifying(ctx, run, "spec/support/sync_child.lua",
      { ctx.emu.url, ctx.state_a, "-", mode.async and "async" or "sync", "60" },
      { TORTURE_TRANSPORT = not mode.async and mode.transport or nil, TORTURE_LATE_WINDOW = late })
    local ok, err = sync_a(ctx, mode)
    if not ok then return scenario.abort(ctx, run, err) end
    ctx.b:sync(ctx.emu.url)
  end
  -- the users sync again later while edits are held (a lost answer's, in its late window): B first,
  -- so that A's last syncs download what B's held edits bring
  local b_settled = ctx.b:settle(ctx.emu.url)
  local ok, err = scenario.settle(function() return sync_a(ctx, mode) end, function()
    return helper.read_all(ctx.state_a .. ".journal") ~= nil
  end)
  if not ok then return scenario.abort(ctx, runs, err) end
  ctx.b:sync(ctx.emu.url)
  local tally = scenario.analyse(ctx, {})
  if helper.read_all(ctx.state_a .. ".journal") then
    tally.stuck = (tally.stuck or 0) + 1
    tally.problems[#tally.problems + 1] = "replica A's journal is still there after its last sync"
  end
  if not b_settled then
    tally.stuck = (tally.stuck or 0) + 1
    tally.problems[#tally.problems + 1] = "replica B's journal still holds edits after its last syncs"
  end
  return scenario.finish(ctx, tally)
end

return M
