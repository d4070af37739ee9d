--- THE HELD ATTEMPT CARRIED by a store's sync: the queued edits of
-- features the held edits do not touch go while those are held
-- (geoservices.sync.attempt: THE LATE WINDOW), as client:sync's do
-- (geoservices.sync.state_journal: `params.held`).
--
-- The store keeps one attempt at a time (Store:attempt(): the latest row of
-- gpkgext_geoservices_attempts). A sync that holds the rows of a lost answer
-- (its attempt read back, the rows the server does not show left in it)
-- joins the queue rows it sends to that SAME attempt (Store:begin_attempt's
-- `into`), in one transaction that also writes the attempt's parameters:
-- this request's, and `held = {lost_at =, uploaded =}` (the held rows' late
-- window and uploaded edits file). The rows it takes are queued rows
-- (attempt_id NULL) of layers that upload, of no feature a held row
-- touches: an edit of a held feature stays queued until its feature is no
-- longer held (an update never reaches the server before its held add; the
-- queue folds it into the held row if that one goes back to the queue).
-- Local attachment edits wait until nothing is held (their parent may be a
-- held add).
--
-- The sync knows which rows are held (those its read left) and which it
-- sent; the file need not: a process killed while the attempt carries
-- `held` leaves one attempt whose rows are all read back together by the
-- next sync, as a lost answer's (Journal:pending: provisional, held once,
-- its window from the later of `held.lost_at` and the request's `sent_at`).
-- Nothing is lost (every row is in the attempt or queued) and nothing is
-- sent twice (a row of the attempt is only read until the window ends).
--
-- Once the sync's own rows are settled (its answer committed, read back
-- after its failure, or abandoned: nothing left), they leave the attempt as
-- any attempt's do (Store:end_attempt), the held rows stay (`keep_seqs`),
-- and the attempt's parameters become a held attempt's again (@{params}),
-- in the same transaction. Its generation stays marked unknown while rows
-- are held (geoservices.store.sync.integrity: our own late request is no
-- other copy's); the generations move with the data the answer counts.
-- The job of an async request sent while rows are held is not journaled
-- (its answer, if lost, is read back with the held rows, as its download
-- is asked again). Internal (geoservices.store.sync.journal).
-- @module geoservices.store.sync.held
-- @local
local commit = require "geoservices.store.sync.commit"

local held = {}

--- The set of features (commit.feature_key) the rows touch.
function held.features(rows)
  local set = {}
  for _, r in ipairs(rows or {}) do set[commit.feature_key(r.layer, r.globalId)] = true end
  return set
end

--- The set of the rows' seqs.
function held.seqs(rows)
  local set = {}
  for _, r in ipairs(rows or {}) do set[r.seq] = true end
  return set
end

--- Whether a queued row may go with a request made while `busy` (@{features}
-- of the held rows) is held.
function held.free(busy, r)
  return not busy[commit.feature_key(r.layer, r.globalId)]
end

--- The `held` record of an attempt that carries held rows: `info` is the
-- hold (`lost_at`, `uploaded`).
function held.record(info)
  return { lost_at = info.lost_at, uploaded = info.uploaded }
end

--- The record an attempt's parameters carry (@{record}), or nil.
function held.of(params)
  return type(params) == "table" and type(params.held) == "table" and params.held or nil
end

--- The parameters of the attempt once the sync's own rows left it: a held
-- attempt's (provisional, held once, the held rows' window and uploaded
-- file), the request's others kept (its direction...). `lost`: the sync's
-- own request lost too, at that time (os.time), rows of it left in the
-- attempt: the window runs from then for all, and they are held once first.
-- @tparam table params the attempt's parameters
-- @tparam table info the hold (`lost_at`, `uploaded`)
-- @tparam[opt] integer lost
function held.params(params, info, lost)
  local out = {}
  for k, v in pairs(type(params) == "table" and params or {}) do out[k] = v end
  out.held, out.sent_at = nil, nil
  out.provisional, out.held_once, out.lost_at, out.uploaded = true, true, info.lost_at, info.uploaded
  if math.type(lost) == "integer" then
    out.held_once, out.lost_at = nil, math.max(lost, math.tointeger(info.lost_at) or 0)
  end
  return out
end

return held
