-- The torture of the replica store (store:sync), in one mode. Each run:
-- replica A's user queues two adds, an update of an earlier feature and
-- (every third run) a delete in store A; a child process
-- (spec/support/store_child.lua) synchronizes A and is killed in the run's
-- target phase (or the emulator is, with the child's request in flight).
-- In every other run with an update, replica B then edits the feature A
-- updated. Then A synchronizes again (in this process) until it succeeds,
-- and B downloads. At the end the store's values of every feature A
-- touched are compared with the server's, feature by feature.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local ledger_norm = require("spec.torture.ledger").norm
local reported = require "spec.torture.reported"
local scenario = require "spec.torture.scenario"
local strike = require "spec.torture.strike"

local M = {}

M.TITLE = "store:sync (replica store)"

local TRANSPORTS = { url = "esriTransportTypeUrl", embedded = "esriTransportTypeEmbedded" }

-- What the store lists for its user: rejected edits and conflicts.
local function store_reports(st)
  local list = {}
  for how, rows in pairs{ failed_edits = st:failed() or {}, conflicts = st.conflicts and st:conflicts() or {} } do
    for _, r in ipairs(rows) do
      list[#list + 1] = { op = r.op, globalId = r.globalId, how = how, value = reported.value_of(r) }
    end
  end
  return list
end

-- With the journal off (the mutation check), a forgotten attempt leaves the
-- server's generation ahead of the store's, and the copy check would refuse
-- every later sync of A: the check would then measure the copy check, over
-- one to three runs. A then adopts its own copy (parent and child alike),
-- so the check runs its full count and counts what the missing journal loses.
local function adopt_copy()
  return require("spec.torture.forgetful").enabled()
end

-- TORTURE_TRACE=<file> in the environment: after each child and each of A's
-- syncs (a failed one with its error), store A's attempt, queue and
-- generation are appended to the file, to trace a failure.
local function trace(ctx, what)
  local path = os.getenv("TORTURE_TRACE")
  if not path then return end
  local st = assert(geoservices.store.open(ctx.path_a))
  local a, rep, queue = st:attempt(), st:replica() or {}, st:pending() or {}
  st:close()
  local server = assert(ctx.emu:control("state")).featureServices.Parcels
  local on_server = server.replicas[rep.replicaID] or server.replicas[tostring(rep.replicaID):gsub("[{}]", "")] or {}
  local lines = { ("== %s %s run %s: store generation %s, server's replica %s, service %s; info %s"):format(
    ctx.mode.label, what, tostring(ctx.run), tostring(rep.replicaServerGen), tostring(on_server.gen),
    tostring(server.gen), require("geoservices.base.json").encode(rep.info or {})) }
  if a then
    lines[#lines + 1] = ("attempt %s state %s status %s params %s"):format(tostring(a.id), tostring(a.state),
      tostring(a.status_url), require("geoservices.base.json").encode(a.params or {}))
  end
  for _, r in ipairs(queue) do
    lines[#lines + 1] = ("  queued %s %s %s attempt %s"):format(tostring(r.seq), tostring(r.op),
      tostring(r.globalId), tostring(r.attempt))
  end
  local f = io.open(path, "a")
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
end

-- A's sync in this process until it succeeds (the lock of a child still
-- running is waited for); what it reported goes to the ledger.
local function sync_a(ctx, mode)
  local last
  for _ = 1, 30 do
    local st = assert(geoservices.store.open(ctx.path_a))
    local r, err = st:sync(ctx.client, { lock_timeout = 60, timeout = 60, poll_interval = 0.05,
      adopt_copy = adopt_copy(), journal = require("spec.torture.forgetful").option(), late_window = mode.late_window,
      params = { async = mode.async or nil, transportType = not mode.async and TRANSPORTS[mode.transport] or nil } })
    if r then
      ctx.ledger:report(reported.of(r))
      ctx.ledger:report(store_reports(st))
      st:close()
      trace(ctx, "sync")
      return true
    end
    st:close()
    last = err
    trace(ctx, "failed sync: " .. tostring(err and err.message))
    helper.sleep(0.2)
  end
  return nil, "store A's sync never succeeded: " .. tostring(last and last.message)
end

-- An update as GDAL and QGIS make it: an SQL UPDATE of the feature table
-- from GDAL's own connection (ogrinfo -sql; the store's UPDATE capture
-- trigger queues it), where st:update is captured by the delete and insert ones.
local function sql_update(ctx, gid, value)
  local sql = ("UPDATE Parcels SET OWNER = '%s' WHERE GlobalID = '%s'"):format(value, gid)
  local out, ok = helper.run_shell(("ogrinfo -q -sql %s %s"):format(helper.shell_quote(sql),
    helper.shell_quote(ctx.path_a)))
  assert(ok, "ogrinfo UPDATE of " .. gid .. ": " .. tostring(out))
  ctx.sql_updates = (ctx.sql_updates or 0) + 1
end

local function queue_edits(ctx, plan, run)
  local st = assert(geoservices.store.open(ctx.path_a))
  for _, add in ipairs(plan.adds) do
    add.gid = assert(st:add(0, { attributes = { OWNER = add.value, APN = ("t%d"):format(run) },
                                 geometry = { x = -117 - run / 1000, y = 34 } }))
  end
  if plan.update and run % 2 == 0 then
    st:close() -- GDAL writes the file from a connection of its own
    sql_update(ctx, plan.update.gid, plan.update.value)
    st = assert(geoservices.store.open(ctx.path_a))
  elseif plan.update then
    assert(st:update(0, { attributes = { GlobalID = plan.update.gid, OWNER = plan.update.value } }))
  end
  if plan.delete then assert(st:delete(0, plan.delete)) end
  st:close()
end

function M.run_mode(mode, runs)
  local late = mode.late_window and tostring(mode.late_window) -- the children's late_window
  local ctx = scenario.start(mode)
  if ctx.setup_error then return scenario.abort(ctx, 0, ctx.setup_error) end
  ctx.client = geoservices.client{ url = ctx.emu.url, token = "alice-token", timeout = 30 }
  ctx.path_a = ctx.dir .. "/a.gpkg"
  local created, cerr = geoservices.store.create(ctx.client, ctx.path_a, { service = "Parcels", layers = { 0 },
    replicaName = "torture-a", syncModel = mode.model or "perReplica" }, { poll_interval = 0.05 })
  if not created then return scenario.abort(ctx, 0, "store A: " .. tostring(cerr and cerr.message)) end
  scenario.set_origin(ctx, created:replica().replicaID)
  created:close()
  for run = 1, runs do
    local plan = scenario.user_edits(ctx, run)
    queue_edits(ctx, plan, run)
    scenario.crew_change_first(ctx, plan, run)
    scenario.record_edits(ctx, plan, run)
    scenario.refuse_ahead(ctx, plan, run)
    local hit = strike.run{
      dir = ctx.dir, emu = ctx.emu, mode = mode, target = scenario.target(ctx, run),
      script = "spec/support/store_child.lua",
      args = { ctx.emu.url, ctx.path_a, mode.async and "async" or "sync", "60" },
      env = { TORTURE_TRANSPORT = not mode.async and mode.transport or nil,
              TORTURE_ADOPT_COPY = adopt_copy() and "1" or nil, TORTURE_LATE_WINDOW = late },
      kill_emulator = scenario.emulator_kill(ctx, run),
    }
    scenario.count_hit(ctx, hit)
    ctx.run = run
    trace(ctx, ("child killed at %s (emulator %s)"):format(tostring(hit.child_phase), tostring(hit.emulator_phase)))
    scenario.interfere(ctx, plan, run, hit)
    local verifying = scenario.kill_while_verifying(ctx, run, "spec/support/store_child.lua",
      { ctx.emu.url, ctx.path_a, mode.async and "async" or "sync", "60" },
      { TORTURE_TRANSPORT = not mode.async and mode.transport or nil,
        TORTURE_ADOPT_COPY = adopt_copy() and "1" or nil, TORTURE_LATE_WINDOW = late })
    if verifying then
      trace(ctx, ("verifying child killed at %s (emulator %s)"):format(tostring(verifying.child_phase),
        tostring(verifying.emulator_phase)))
    end
    local ok, err = sync_a(ctx, mode)
    if not ok then
      ctx.client:close()
      return scenario.abort(ctx, run, err)
    end
    ctx.b:sync(ctx.emu.url)
  end
  -- the users sync again later while edits are held (a lost answer's, in its late window): B first,
  -- so that A's last syncs download what B's held edits bring
  local b_settled = ctx.b:settle(ctx.emu.url)
  local ok, err = scenario.settle(function() return sync_a(ctx, mode) end, function()
    local st = assert(geoservices.store.open(ctx.path_a))
    local held = st:attempt() ~= false or #(st:pending() or {}) > 0
    st:close()
    return held
  end)
  ctx.client:close()
  if not ok then return scenario.abort(ctx, runs, err) end
  ctx.b:sync(ctx.emu.url)
  local st = assert(geoservices.store.open(ctx.path_a))
  local tally = scenario.analyse(ctx, { ["store A"] = function(gid)
    local f = st:get(0, "{" .. gid .. "}") or st:get(0, gid)
    return f and f.attributes.OWNER or false
  end })
  local pending, failed = st:pending() or {}, {}
  for _, f in ipairs(st:failed() or {}) do -- the updates of features B deleted first are rightly there
    if not (f.op == "update" and (ctx.expected_rejections or {})[ledger_norm(f.globalId)]) then
      failed[#failed + 1] = f
    end
  end
  if #pending > 0 then
    tally.stuck = (tally.stuck or 0) + #pending
    tally.problems[#tally.problems + 1] = ("store A still queues %d edits after its last sync"):format(#pending)
  end
  -- nothing else in this torture is refused by the server: a listed rejection is a wrong one
  if #failed > 0 then
    tally.stuck = (tally.stuck or 0) + #failed
    tally.problems[#tally.problems + 1] = ("store A lists %d rejected edits, none was refused"):format(#failed)
  end
  st:close()
  if not b_settled then
    tally.stuck = (tally.stuck or 0) + 1
    tally.problems[#tally.problems + 1] = "replica B's journal still holds edits after its last syncs"
  end
  return scenario.finish(ctx, tally)
end

return M
