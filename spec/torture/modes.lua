-- The torture's modes: what the emulator is set to and how replica A
-- synchronizes. The documented server with rollback_default true and false,
-- each with a sync request over URL transport, one with embedded answers
-- and an async job; then each server capability set of issue 34, with a
-- sync request (URL) and an async job:
--
-- * WildfireSync: supportsRollbackOnFailure false and perLayer only (the
--   server skips a failed edit whatever rollbackOnFailure says); the
--   replicas are perLayer;
-- * perReplica only without supportsRollbackOnFailure: rollback forced;
--   in these two, every third run B deletes the feature A is about to
--   update, so the server really refuses an edit (`refusals`);
-- * a gateway that answers every third synchronizeReplica with a 504, or
--   drops the answer, while the server applies the request 2 s later; the
--   syncs' late_window (5 s) holds the edits of a lost answer until then.
--
-- A mode: `label`, `async`, `transport`, `rollback` (rollback_default),
-- `settings` (more emulator settings), `model` (of the replicas A and B:
-- perReplica unless said), `refusals` (real refusals: scenario.refuse_ahead),
-- `group` ("documented" or "capabilities": a filter selects a group by its
-- name), `late_window` (the syncs' option: the gateway modes hold edits of a
-- lost answer 5 s, past the server's 2 s delay and its job; the other async
-- modes 3 s: a job a killed child submitted runs on in the live emulator,
-- and the child may have died before it noted the job's address; the
-- others 0: a killed emulator never applies a request late, a live one ends
-- a request its killed child sent at once, and a hold of the default's 660 s
-- would outlast the torture), `index` (its place in the list), `kind_index`
-- (its place among the modes of its kind, async or not).
local M = {}

-- The async modes' late window, seconds (above).
M.ASYNC_LATE_WINDOW = 3

local CAPABILITY_SETS = {
  { label = "caps=wildfire", model = "perLayer", refusals = true,
    settings = { supports_rollback_on_failure = false, supports_per_replica_sync = false } },
  { label = "caps=rollback-forced", refusals = true,
    settings = { supports_rollback_on_failure = false, supports_per_layer_sync = false } },
  { label = "gateway=504", late_window = 5,
    settings = { gateway = "504", gateway_every = 3, gateway_delay_ms = 2000 } },
  { label = "gateway=drop", late_window = 5,
    settings = { gateway = "drop", gateway_every = 3, gateway_delay_ms = 2000 } },
}

--- Every mode, in order.
function M.all()
  local list = {}
  for _, rollback in ipairs{ true, false } do
    for _, m in ipairs{ { async = false, transport = "url" }, { async = false, transport = "embedded" },
                        { async = true, transport = "url" } } do
      m.rollback, m.group, m.late_window = rollback, "documented", m.async and M.ASYNC_LATE_WINDOW or 0
      m.label = ("rollback_default=%s %s %s"):format(tostring(rollback), m.async and "async" or "sync",
        m.async and "(url)" or m.transport)
      list[#list + 1] = m
    end
  end
  for _, set in ipairs(CAPABILITY_SETS) do
    for _, async in ipairs{ false, true } do
      list[#list + 1] = { async = async, transport = "url", rollback = true, settings = set.settings,
                          model = set.model, refusals = set.refusals, group = "capabilities",
                          late_window = set.late_window or (async and M.ASYNC_LATE_WINDOW or 0),
                          label = ("%s %s"):format(set.label, async and "async" or "sync url") }
    end
  end
  return list
end

--- The modes whose label contains every one of `filters` (or whose group
-- is named by it), numbered.
function M.select(filters)
  local out, kinds = {}, {}
  for _, m in ipairs(M.all()) do
    local keep = true
    for _, f in ipairs(filters or {}) do keep = keep and (m.label:find(f, 1, true) ~= nil or m.group == f) end
    if keep then
      out[#out + 1] = m
      m.index = #out
      -- its place among the kept modes of its kind (async or not): the run's target phase turns with it
      -- (scenario.target), so that every kind's modes share out all of its phases
      kinds[m.async == true] = (kinds[m.async == true] or 0) + 1
      m.kind_index = kinds[m.async == true]
    end
  end
  return out
end

return M
