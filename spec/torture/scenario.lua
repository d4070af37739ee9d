-- What the two tortures (client:sync, spec/torture/sync_mode.lua; the
-- store, spec/torture/store.lua) share in one mode: a fresh emulator in the
-- mode's settings, the ledger, replica B, the user's edits of each run, the
-- run's target phase and whether the emulator dies in it, the phase counts,
-- and the verdict from the server's change log.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local crew_b = require "spec.torture.crew_b"
local emulator = require "spec.torture.emulator"
local ledger_mod = require "spec.torture.ledger"
local phases = require "spec.torture.phases"
local strike = require "spec.torture.strike"

local M = {}

--- A mode's context: `dir`, `emu` (started), `ledger`, `b`, `pool` (A's live
-- features), `counts` (phase -> {child =, emulator =}).
function M.start(mode, a_origin)
  local dir = helper.tmp_dir()
  local settings = { rollback_default = mode.rollback, job_step_ms = 40, job_phase_ms = {} }
  for k, v in pairs(mode.settings or {}) do settings[k] = v end
  local emu = emulator.new(dir, settings)
  local ok, err = pcall(emu.start, emu)
  local b_state = nil -- the example world's perReplica replica B, unless the mode's model differs
  if ok and mode.model and mode.model ~= "perReplica" then
    b_state, err = M.new_replica(emu, "torture-b", mode.model)
    ok = b_state ~= nil
  end
  -- a late window holds edits over as many runs as answers keep being lost (a gateway loses one
  -- request in three, and each loss holds again): any later run's edit may carry a held one
  local ledger = ledger_mod.new(a_origin or "", b_state and b_state.replicaID or crew_b.REPLICA_ID,
    (mode.late_window or 0) > 0 and math.huge or 1)
  local ctx = { mode = mode, dir = dir, emu = emu, ledger = ledger,
                b = crew_b.new(dir, ledger, b_state, mode.late_window), pool = {},
                counts = {}, journals_seen = 0, in_flight_runs = 0, setup_error = not ok and err or nil,
                b_replica_id = b_state and b_state.replicaID or crew_b.REPLICA_ID }
  return ctx
end

--- A new replica of layer 0 of Parcels in sync model `model` (createReplica):
-- its state file's fields (geoservices.replica), or nil, message.
function M.new_replica(emu, name, model)
  local c = geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 }
  local r, err = c:create_replica("Parcels", { layers = { 0 }, replicaName = name, syncModel = model,
    transportType = "esriTransportTypeEmbedded" }, { poll_interval = 0.05, timeout = 30 })
  c:close()
  if not r then return nil, "createReplica of " .. name .. ": " .. tostring(err and err.message) end
  return r:replica_state()
end

--- Sets replica A's GlobalID once it is known (the store creates its replica).
function M.set_origin(ctx, a_origin)
  ctx.ledger.a_origin = ledger_mod.norm(a_origin)
end

--- The user's edits of run `run`: two adds, an update of one of A's earlier
-- features, and every third run a delete of another. Values are unique:
-- the change log tells each edit's attempts apart by them.
function M.user_edits(ctx, run)
  local m = ctx.mode.index
  local plan = { adds = { { value = ("t%d-%d-add1"):format(m, run) }, { value = ("t%d-%d-add2"):format(m, run) } } }
  if #ctx.pool > 0 then
    local i = math.random(#ctx.pool)
    plan.update = { gid = ctx.pool[i], value = ("t%d-%d-upd"):format(m, run) }
    if run % 3 == 0 and #ctx.pool > 2 then
      local j = math.random(#ctx.pool - 1)
      if j >= i then j = j + 1 end
      plan.delete, plan.delete_index = ctx.pool[j], j
    end
  end
  return plan
end

--- In a mode with `refusals`, every third run with an update: B's replica
-- deletes the feature A is about to update, right before A's next
-- synchronizeReplica runs (an emulator race: after anything A read from the
-- server first), so that the server refuses A's update, a real rejection: A
-- must report it, never lose it silently nor reject A's other edits with it.
-- The feature leaves A's pool. B deletes only a feature it holds (B's
-- download brought it): A's add of it may be held in its late window, not
-- on the server yet, and a crew edits only what it has (M.b_holds).
function M.refuse_ahead(ctx, plan, run)
  if not (ctx.mode.refusals and plan.update and run % 3 == 2 and M.b_holds(ctx, plan.update.gid)) then return end
  plan.update.refused = true
  plan.update.entry.expect_rejection = true
  for i, gid in ipairs(ctx.pool) do
    if gid == plan.update.gid then table.remove(ctx.pool, i) break end
  end
  ctx.expected_rejections = ctx.expected_rejections or {}
  ctx.expected_rejections[ledger_mod.norm(plan.update.gid)] = true
  ctx.ledger:record("b", "delete", plan.update.gid, nil, run)
  ctx.emu:race(ctx.b_replica_id, { { id = 0, features = { deleteIds = { plan.update.gid } } } })
end

--- Into the ledger (after the GlobalIDs of the adds are known) and the pool.
function M.record_edits(ctx, plan, run)
  for _, add in ipairs(plan.adds) do ctx.ledger:record("a", "add", add.gid, add.value, run) end
  if plan.update then plan.update.entry = ctx.ledger:record("a", "update", plan.update.gid, plan.update.value, run) end
  if plan.delete then
    ctx.ledger:record("a", "delete", plan.delete, nil, run)
    table.remove(ctx.pool, plan.delete_index)
  end
  for _, add in ipairs(plan.adds) do ctx.pool[#ctx.pool + 1] = add.gid end
end

--- The run's target phase: the mode's phases in turn, each mode of its kind
-- (async or not: their phases differ) starting three further on, so that a
-- short torture (three runs a mode) still aims at every phase in at least
-- two modes. (Counted over every mode, the capability group's four async
-- modes, every other one, all started at the same phase: none was killed
-- with its job just submitted.)
function M.target(ctx, run)
  local targets = phases.targets(ctx.mode)
  return targets[(((ctx.mode.kind_index or ctx.mode.index) - 1) * 3 + run - 1) % #targets + 1]
end

--- Whether the emulator is killed in this run: with a request of the child
-- in flight, two runs in three ("alone": the child lives on and sees the
-- server vanish and come back; "with_child": both die).
function M.emulator_kill(ctx, run)
  local plan = phases.plan(M.target(ctx, run), ctx.mode)
  if not plan.in_flight then return false end
  ctx.in_flight_runs = ctx.in_flight_runs + 1
  local k = ctx.in_flight_runs % 3
  return (k == 1 and "alone") or (k == 2 and "with_child") or false
end

function M.count_hit(ctx, hit)
  for who, phase in pairs{ child = hit.child_phase, emulator = hit.emulator_phase } do
    local c = ctx.counts[phase] or {}
    c[who] = (c[who] or 0) + 1
    ctx.counts[phase] = c
  end
  local outcome = hit.child:outcome()
  if outcome and outcome.reported then ctx.ledger:report(outcome.reported) end
end

--- In every third run, the sync after the kill is a child too, killed
-- while it reads the server to settle the unknown outcome the first kill
-- left (the emulator instead in every sixth run); a sync that reads
-- nothing is not killed ("missed"). `args`: the child's, without edits.
function M.kill_while_verifying(ctx, run, script, args, env)
  if run % 3 ~= 0 then return end
  local hit = strike.run{ dir = ctx.dir, emu = ctx.emu, mode = ctx.mode, target = "verify", script = script,
    args = args, env = env, kill_emulator = run % 6 == 0 and "alone" or false }
  M.count_hit(ctx, hit)
  return hit
end

--- Whether B holds a feature of A's (downloaded it): a crew edits only what
-- it has. A's add held one sync (geoservices.sync.attempt's requeue rule) is
-- not on the server yet: B's update of it would be refused, and the ledger
-- would expect B's value.
function M.b_holds(ctx, gid)
  return type(ctx.ledger.b_view[ledger_mod.norm(gid)]) == "string"
end

--- In every other run with an update, B edits the feature A updated, after
-- A's sync was interrupted and before A syncs again: A's value is older.
function M.interfere(ctx, plan, run, hit)
  if plan.update and run % 2 == 0 and not plan.update.refused and M.b_holds(ctx, plan.update.gid) then
    -- whether A's request had left before B's edit (the child passed "sent")
    for _, marker in ipairs(hit.child:markers()) do
      if marker == "sent" then plan.update.entry.left_before_b = true end
    end
    ctx.b:update(ctx.emu.url, plan.update.gid, ("b%d-%d"):format(ctx.mode.index, run), run)
  end
end

--- In every odd run with a feature to spare, B edits one of A's features
-- that A's edits of this run leave alone, BEFORE A's interrupted sync: the
-- killed child itself downloads B's change (and is killed in its commit,
-- say); A's next sync must bring it again. Returns B's edit, or nil.
function M.crew_change_first(ctx, plan, run)
  if run % 2 == 0 then return nil end
  local mine = {}
  if plan.update then mine[plan.update.gid] = true end
  if plan.delete then mine[plan.delete] = true end
  local spare = {}
  for _, gid in ipairs(ctx.pool) do
    if not mine[gid] and M.b_holds(ctx, gid) then spare[#spare + 1] = gid end
  end
  if #spare == 0 then return nil end
  local gid = spare[math.random(#spare)]
  ctx.b:update(ctx.emu.url, gid, ("b%d-%d-first"):format(ctx.mode.index, run), run)
  ctx.b_first = (ctx.b_first or 0) + 1
  return gid
end

--- A's last sync, `sync()`, then again a second apart while `held()` says
-- edits are still held (a lost answer's, in the mode's late window) or
-- queued, at most 30 times: as a user syncs again later (a gateway loses
-- one request in three, and each loss holds again for the window).
function M.settle(sync, held)
  local ok, err = sync()
  for _ = 1, 30 do
    if not ok or not held() then break end
    helper.sleep(1)
    ok, err = sync()
  end
  return ok, err
end

--- The counts from the server's change log and final values; `views`: the
-- replicas holding data (name -> function(gid) -> value or false).
function M.analyse(ctx, views)
  local changelog = ctx.emu:changelog("Parcels")
  local server = ctx.emu:features("Parcels", 0)
  local tally = ctx.ledger:analyse(changelog, server, views)
  tally.journals_seen = ctx.journals_seen
  tally.b_first = ctx.b_first
  tally.sql_updates = ctx.sql_updates
  return tally
end

function M.finish(ctx, tally)
  ctx.emu:stop()
  os.execute("rm -rf " .. helper.shell_quote(ctx.dir))
  return { mode = ctx.mode, counts = ctx.counts, tally = tally }
end

--- A mode that could not go on (A never synchronized again): counted as an error.
function M.abort(ctx, run, message)
  local ok, tally = pcall(M.analyse, ctx, {})
  if not ok then
    tally = { problems = {}, lost = 0, duplicated = 0, reapplied = 0, stale = 0, downloaded_twice = 0, wrong = 0 }
  end
  tally.errors = (tally.errors or 0) + 1
  table.insert(tally.problems, 1, ("stopped after run %d: %s"):format(run, tostring(message)))
  return M.finish(ctx, tally)
end

return M
