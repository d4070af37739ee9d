--- The journal of a replica state file (client:sync): the attempt engine's
-- journal interface (geoservices.sync.attempt) kept in `<state>.journal`
-- beside the state (geoservices.sync.replica).
--
-- The journal holds the attempt in flight: the edits it carries (2.1 list),
-- the parameters that matter to their outcome, the server's values of the
-- features it updates read just before it left (`bases`: an update the
-- server does not hold is then told apart from one someone else overwrote),
-- the generations it was sent from, and the job's status address once
-- known. It goes with the state write that moves the generations, or when
-- the server is known to have applied none of it. Edits read back as not
-- applied stay journaled and are sent again with the next request: the
-- caller's own edits of a call are merged with them (an edit both carry is
-- sent once; one the journal settled is never sent twice). While edits are
-- held (a lost answer's, geoservices.sync.attempt), the caller's edits of a
-- feature they touch wait with them, journaled (`params.waiting`), and go
-- with the first sync after their feature is no longer held: an update
-- never reaches the server before its feature's add. A waiting update was
-- handed over when the server held some values of its feature, and the held
-- edits would give it others (`params.waiting_bases`): it goes only where the
-- server holds either then (or with the held edits, sent again), and is a
-- conflict, reported and not sent, where another crew changed the feature
-- since. A request with an uploaded edits file (`editsUploadId`)
-- is journaled too (`params.uploaded`), and kept, provisional then held, as
-- the engine decides (geoservices.sync.attempt: UPLOADED EDITS FILES).
--
-- AN UPDATE APPLIED LATE over another crew's values (the store's side:
-- geoservices.store.sync.late): while updates are held, what a download
-- hands the caller of their features is journaled with them (`delivered`:
-- the last values, by the update's key). When a later read shows a held
-- update applied after the download gave the caller other values of its
-- feature, the server holds this update's values over those (the server's
-- order: the last writer wins) while the caller holds the other crew's: the
-- caller's on_change is handed the feature as the server holds it now
-- (`update`; without on_change it goes in `result.edits`, unless the download
-- brings that feature again), and `result.conflicts` tells it, outcome
-- `local_kept`, with the other crew's values (`server`) the update replaced
-- (`result.resolved.late` lists the same). Where the caller edited the
-- feature again since (edits waiting for the held ones, or this call's),
-- those edits go next and nothing is told. The same when the held update
-- is sent again after its window (`delivered` stays journaled with it, the
-- request sending it again lost too, say) and the answer or a later read
-- shows it applied.
-- @module geoservices.sync.state_journal
-- @local
local compare = require "geoservices.sync.compare"
local edits_mod = require "geoservices.sync.edits"
local json = require "geoservices.base.json"
local outcome = require "geoservices.sync.outcome"
local verify = require "geoservices.sync.verify"

local M = {}

local Journal = {}
Journal.__index = Journal

local PARTS = { features = "feature", attachments = "attachment" }
local LISTS = { adds = "add", updates = "update", deleteIds = "delete" }

local function gid_of(part, item)
  if type(item) ~= "table" then return item end
  if part == "features" then return type(item.attributes) == "table" and item.attributes.GlobalID or nil end
  return item.globalId
end

-- Calls fn(key, layer, target, op, gid, item) for each edit of a 2.1 list.
local function each_edit(list, fn)
  for _, entry in ipairs(type(list) == "table" and list or {}) do
    local layer = math.tointeger(entry.id) or entry.id
    for part, target in pairs(PARTS) do
      local p = entry[part]
      for name, op in pairs(LISTS) do
        for _, item in ipairs(type(p) == "table" and p[name] or {}) do
          local gid = gid_of(part, item)
          fn(outcome.key(op, layer, target, gid), layer, target, op, gid, item)
        end
      end
    end
  end
end
M.each_edit = each_edit

-- The 2.1 list of the edits for which keep(key) is true (nil when none).
local function select_edits(list, keep, item_of)
  local out, by_layer, n = json.array(), {}, 0
  each_edit(list, function(key, layer, target, op, _, item)
    if not keep(key) then return end
    if item_of then item = item_of(key, item) end
    local entry = by_layer[layer]
    if not entry then
      entry = { id = layer }
      by_layer[layer] = entry
      out[#out + 1] = entry
    end
    local part = target == "feature" and "features" or "attachments"
    local name = op == "add" and "adds" or op == "update" and "updates" or "deleteIds"
    entry[part] = entry[part] or {}
    entry[part][name] = entry[part][name] or json.array()
    local l = entry[part][name]
    l[#l + 1] = item
    n = n + 1
  end)
  return n > 0 and out or nil
end

-- Two edits of one key (an update of a feature, twice): the later's
-- values over the earlier's, the earlier's other fields kept.
local function joined(earlier, later)
  if type(earlier) ~= "table" or type(later) ~= "table" or type(earlier.attributes) ~= "table"
     or type(later.attributes) ~= "table" then
    return later
  end
  local out = {}
  for k, v in pairs(earlier) do out[k] = v end
  for k, v in pairs(later) do out[k] = v end
  out.attributes = json.object()
  for k, v in pairs(earlier.attributes) do out.attributes[k] = v end
  for k, v in pairs(later.attributes) do out.attributes[k] = v end
  return out
end

-- The union of two 2.1 lists, `second` the later: an edit both carry is
-- sent once, with the later's values joined to the earlier's (the caller's
-- update of a feature over the journal's older one, which is sent again
-- or waits: the older values must never go over the newer).
local function merged_edits(first, second)
  if first == nil then return second end
  if second == nil then return first end
  local both = json.array()
  for _, e in ipairs(first) do both[#both + 1] = e end
  for _, e in ipairs(second) do both[#both + 1] = e end
  local latest = {}
  each_edit(both, function(key, _, _, _, _, item) latest[key] = joined(latest[key], item) end)
  local taken = {}
  return select_edits(both, function(key)
    if taken[key] then return false end
    taken[key] = true
    return true
  end, function(key) return latest[key] end)
end

-- Whether update `later` sets every value `earlier` (an update, or nil) sets: its fields but
-- the server's own keys, its geometry.
local function sets_again(later, earlier)
  if type(earlier) ~= "table" then return true end
  if type(later) ~= "table" then return false end
  if earlier.geometry ~= nil and later.geometry == nil then return false end
  local mine = type(later.attributes) == "table" and later.attributes or {}
  for k in pairs(type(earlier.attributes) == "table" and earlier.attributes or {}) do
    if mine[k] == nil and k ~= "GlobalID" and k ~= "OBJECTID" then return false end
  end
  return true
end

-- The feature an edit's key names (layer, target, GlobalID): its key without the operation.
local function feature_of(key)
  return (key:gsub("^[^|]*|", ""))
end

-- The set of features the edits of a 2.1 list touch.
local function features_of(list)
  local set = {}
  each_edit(list, function(key) set[feature_of(key)] = true end)
  return set
end

-- The edits of a call as a 2.1 table (what the journal keeps); nil when none.
local function call_edits(edits)
  if edits == nil or (edits_mod.is(edits) and edits:is_empty()) then return nil end
  if edits_mod.is(edits) then return edits:to_table() end
  if type(edits) == "string" then
    local list = json.decode(edits)
    if type(list) == "table" then return list end
  end
  return edits -- refused with its message by the validation
end

-- The feature edits of a list as verification entries; `bases` the
-- server's values of updated features read just before they were sent.
local function entries_of(list, bases)
  local out = {}
  each_edit(list, function(key, layer, target, op, gid, item)
    if target == "feature" and type(gid) == "string" then
      out[#out + 1] = { key = key, layer = layer, op = op, globalId = gid,
                        feature = type(item) == "table" and item or nil, base = bases and bases[key] }
    end
  end)
  return out
end

-- The server's values of the features a request updates, read before it
-- is sent and journaled with it. A failed read leaves them unknown (such an
-- update then counts as a conflict when its answer is lost).
local function read_bases(client, r, edits)
  local by_layer = {}
  each_edit(edits, function(key, layer, target, op, gid)
    if target == "feature" and op == "update" and type(gid) == "string" then
      by_layer[layer] = by_layer[layer] or {}
      by_layer[layer][#by_layer[layer] + 1] = { key = key, gid = gid }
    end
  end)
  local bases
  for layer, list in pairs(by_layer) do
    local gids = {}
    for i, e in ipairs(list) do gids[i] = e.gid end
    local found = verify.query(client, r.service, layer, gids, { geometry = true })
    if not found then return bases end
    for _, e in ipairs(list) do
      bases = bases or {}
      -- false: the server had no such feature when the update left
      bases[e.key] = found[outcome.normalize_gid(e.gid)] or false
    end
  end
  return bases
end

-- Folds verification verdicts into a result (or a resolution record):
-- conflicts and skipped edits reported, counts kept.
local function record_verdicts(into, verdicts, entries)
  into.conflicts = into.conflicts or {}
  into.failed_edits = into.failed_edits or {}
  into.verified = (into.verified or 0)
  into.applied, into.requeued = into.applied or 0, into.requeued or 0
  for _, e in ipairs(entries) do
    local v = verdicts[e.key]
    if v ~= nil then
      into.verified = into.verified + 1
      if v == outcome.APPLIED then into.applied = into.applied + 1 end
      if v == "not_applied" then into.requeued = into.requeued + 1 end
      if into.outcomes then into.outcomes[e.key] = v end
      if type(v) == "table" and v.conflict then
        into.conflicts[#into.conflicts + 1] = { layer = e.layer, op = e.op, globalId = e.globalId,
          sent = e.feature, server = v.server, description = v.description }
      elseif type(v) == "table" then
        into.failed_edits[#into.failed_edits + 1] = { layer = e.layer, op = e.op, target = "feature",
          globalId = e.globalId, code = v.code, description = v.description }
      end
    end
  end
end

-- The values the held edits `list` (with their `bases`) leave each feature with, by feature
-- (feature_of a key): an add's, an update's joined over its base. A delete leaves none.
local function held_values(list, bases)
  local out = {}
  each_edit(list, function(key, _, target, op, _, item)
    if target ~= "feature" or type(item) ~= "table" then return end
    if op == "add" then
      out[feature_of(key)] = item
    elseif op == "update" then
      local base = bases and bases[key]
      out[feature_of(key)] = joined(type(base) == "table" and base or out[feature_of(key)], item)
    end
  end)
  return out
end

--- What a re-attached job's operation needs of the replica: what its
-- answer must agree with (this replica, generations forward).
-- @param r the replica
-- @treturn table the expectation (geoservices.sync.result.check)
function M.expectation(r)
  local layers
  if r.state.model == "perLayer" then
    layers = {}
    for _, l in ipairs(r.state.layers or {}) do layers[l.id] = math.tointeger(l.serverGen) end
  end
  return { replicaID = r.replicaID, replicaServerGen = math.tointeger(r.state.replicaServerGen), layer_gens = layers }
end

--- A journal of the replica `r` (opened, under its lock) for one call of
-- client:sync with the caller's `edits`.
-- @param client the client
-- @param r the replica (geoservices.sync.replica)
-- @param edits the call's edits (builder, 2.1 table, JSON text or nil)
-- @tparam[opt] function on_change the caller's receiver of downloaded changes (`on_change(layer, kind,
--   record)`): handed the feature an update applied late holds (see the module's description)
-- @treturn table the journal
function M.new(client, r, edits, on_change)
  return setmetatable({ client = client, r = r, service = r.service, edits = edits, what = "this replica",
                        kept_in = "journaled", model = r.state.model, on_change = on_change }, Journal)
end

-- The edits an attempt holds: those it sent, and those an earlier sync held
-- with it (`params.held`), with their bases.
local function attempt_edits(a)
  local params = type(a.params) == "table" and a.params or {}
  local held = type(params.held) == "table" and params.held or nil
  local bases = {}
  for k, v in pairs(type(params.bases) == "table" and params.bases or {}) do bases[k] = v end
  -- the held edits' bases, for those still held only: one of a held update that settled since is
  -- stale, and would stand for the base of the caller's later update of its feature
  local held_keys = {}
  each_edit(held and held.edits, function(key) held_keys[key] = true end)
  for k, v in pairs(held and type(held.bases) == "table" and held.bases or {}) do
    if held_keys[k] then bases[k] = v end
  end
  return merged_edits(held and held.edits or nil, a.edits), bases
end

function Journal:pending()
  local a = self.r.attempt
  if not a then return false end
  local edits, bases = attempt_edits(a)
  self.current = { edits = edits, bases = bases }
  local params = type(a.params) == "table" and a.params or {}
  -- edits of the caller's that wait for held ones (Journal:take)
  self.waiting = type(params.waiting) == "table" and params.waiting or nil
  self.waiting_bases = type(params.waiting_bases) == "table" and params.waiting_bases or nil
  -- a request sent while edits were held and interrupted before its answer (a process killed):
  -- the held edits are still a lost answer's, their late window goes on
  local held = type(params.held) == "table" and params.held or nil
  self.item = params.uploaded or (held and held.uploaded) or nil
  -- what downloads gave the caller of the held updates' features (AN UPDATE APPLIED LATE)
  local delivered = params.delivered
  self.delivered = type(delivered) == "table" and next(delivered) and delivered or nil
  return { status_url = a.status_url, params = params, edits = a.edits,
           provisional = params.provisional == true or held ~= nil, held_once = params.held_once == true or held ~= nil,
           lost_at = math.tointeger(params.lost_at) or (held and math.tointeger(held.lost_at)),
           sent_at = math.tointeger(params.sent_at), uploaded = self.item }
end

-- The uploaded edits file (editsUploadId) the attempt in hand carries, or nil.
function Journal:uploaded()
  return self.item
end

function Journal:entries()
  local c = self.current or {}
  return entries_of(c.edits, c.bases)
end

function Journal:job_fields(_, opts)
  local r = self.r
  return { replicaID = r.replicaID, replica_path = r.path, on_change = opts.on_change,
           output = opts.output and (opts.output .. ".resolved.json") or nil, on_progress = opts.on_progress,
           expect = M.expectation(r) }
end

-- A re-attached job's result answers the call when the caller sends no
-- edits of its own and none wait (or the replica is closed).
function Journal:enough()
  return self.r.state.closed or (self.edits == nil and self.waiting == nil)
end

function Journal:request(opts)
  local params = self.r:request_params()
  for k, v in pairs(opts.params or {}) do params[k] = v end
  self.close = params.closeReplica
  return params
end

-- The service's syncCapabilities kept in the state (saved with its next write).
function Journal:capabilities()
  return self.r.state.syncCapabilities
end

function Journal:keep_capabilities(caps)
  self.r.state.syncCapabilities = caps
  self.caps_unsaved = true
end

function Journal:keys()
  local keys = {}
  each_edit((self.current or {}).edits, function(key) keys[#keys + 1] = key end)
  return keys
end

-- Waiting edits whose feature is no longer held, about to go. A waiting update was handed over
-- when the server held `seen` of its feature, while held edits would give it `held`
-- (`waiting_bases[key] = {seen =, held =}`): it goes where the server holds either still (had it
-- gone at once it would have replaced `seen`; our own held edits may have landed since); where
-- the server holds its own values nothing goes; where it holds other values (another crew changed
-- the feature since) or no longer has the feature, the update is a conflict, reported with the
-- resolution's and never sent. Returns the edits that go (nil: none), or nil, err (the server
-- could not be read).
function Journal:release(list, resolution)
  local bases = self.waiting_bases or {}
  -- the held edits sent again now (the server does not show them) carry their waiting ones with them
  local resending = features_of(resolution.summary and resolution.summary.resend)
  local all = entries_of(list)
  local verdicts = {}
  for _, which in ipairs{ "seen", "held" } do
    -- the second base only for those the first did not settle as going or applied
    local entries = {}
    for _, e in ipairs(all) do
      local b, v = bases[e.key], verdicts[e.key]
      if e.op == "update" and type(b) == "table" and type(b[which]) == "table" and not resending[feature_of(e.key)]
        and (v == nil or (type(v) == "table" and v.conflict == true)) then
        e.base = b[which]
        entries[#entries + 1] = e
      end
    end
    if #entries > 0 then
      local read, err = verify.edits(self.client, self.service, entries, { completed = false })
      if not read then return nil, err end
      for k, v in pairs(read) do verdicts[k] = v end
    end
  end
  local checked = {}
  for _, e in ipairs(all) do
    if verdicts[e.key] ~= nil then checked[#checked + 1] = e end
  end
  if #checked == 0 then return list end
  local into = resolution.summary or resolution.result
  if not into then
    resolution.summary = outcome.resolution{ settled = {} }
    into = resolution.summary
  end
  record_verdicts(into, verdicts, checked)
  return select_edits(list, function(key)
    local v = verdicts[key]
    if v ~= nil and bases[key] then bases[key] = nil end
    return v == nil or v == "not_applied"
  end)
end

function Journal:take(params, resolution, opts)
  if opts and opts.only then
    -- a part of a split: only those of the refused request's edits
    local edits = select_edits(self.pool, function(key) return opts.only[key] ~= nil end)
    self.resent = nil
    self.journaling = type(edits) == "table" or params.async == true
    self.current = { edits = edits }
    if not self.journaling and self.r.attempt then self.r:clear_attempt() end
    return { edits = edits, entries = entries_of(edits) }
  end
  local mine = call_edits(self.edits)
  local read = resolution.summary
  if read and read.settled and type(mine) == "table" then
    -- the caller passed again edits the journal already settled: never twice. The same edit: an add
    -- or a delete of the feature, an update with the values it sent; a new update of the feature
    -- (other values) is the caller's next edit and goes
    local again = {}
    each_edit(mine, function(key, _, _, op, _, item)
      local done = read.settled[key]
      if done and (op ~= "update" or (type(done) == "table" and type(item) == "table"
          and compare.holds(item, done) and compare.holds(done, item))) then
        again[key] = true
      end
    end)
    mine = select_edits(mine, function(key) return not again[key] end)
  end
  if self.held then
    -- an edit of a feature the held edits touch waits for them (journaled with them, not sent):
    -- sent alone it would reach the server before them (an update before its feature's add).
    -- Those already waiting go on waiting while their feature is held; once it is not (its held
    -- edits settled while others stay held) they go now, joined to the caller's edits of the
    -- feature (the later's values win): kept waiting, they would reach the server after a newer
    -- edit of the caller's sent meanwhile
    local features = features_of(self.held.edits)
    local function is_held(key) return features[feature_of(key)] == true end
    local released = select_edits(self.waiting, function(key) return not is_held(key) end)
    local going, err = self:release(released, resolution)
    if err then return nil, err end
    mine = merged_edits(going, type(mine) == "table" and mine or nil)
    local wait = select_edits(mine, is_held)
    mine = select_edits(mine, function(key) return not is_held(key) end)
    if wait then
      -- each waiting update's bases: what the server holds of its feature now, and what the held
      -- edits would give it; its first wait's, unless the caller's update sets again every value
      -- the waiting one carries (then none of them was made on the older bases)
      local values = held_values(self.held.edits, self.held.bases)
      local seen = read_bases(self.client, self.r, wait) or {}
      local carried = {}
      each_edit(self.waiting, function(key, _, _, _, _, item) carried[key] = item end)
      each_edit(wait, function(key, _, _, op, _, item)
        if op == "update" then
          self.waiting_bases = self.waiting_bases or {}
          if self.waiting_bases[key] == nil or sets_again(item, carried[key]) then
            self.waiting_bases[key] = { seen = seen[key], held = values[feature_of(key)] }
          end
        end
      end)
      -- journaled at once: the caller handed them over, a process killed now must not lose them
      -- (the released ones stay in that journal until j:begin journals the request carrying them)
      self.waiting = merged_edits(self.waiting, wait)
      local ok, werr = self:write_held()
      if not ok then return nil, werr end
    end
    if released then self.waiting, self.released = select_edits(self.waiting, is_held), released end
  elseif self.waiting then
    local going, err = self:release(self.waiting, resolution)
    if err then return nil, err end
    mine, self.waiting = merged_edits(going, type(mine) == "table" and mine or nil), nil
  end
  self.resent = read and read.resend or nil
  local edits = merged_edits(self.resent, mine)
  self.pool = type(edits) == "table" and edits or nil
  -- an uploaded edits file carries edits too: journaled before it leaves
  self.journaling = type(edits) == "table" or params.async == true or params.editsUploadId ~= nil
  self.current = { edits = type(edits) == "table" and edits or nil }
  if not self.journaling and self.r.attempt and not self.held then
    self.r:clear_attempt() -- settled, and nothing of it is sent again
  end
  return { edits = edits, entries = entries_of(self.current.edits) }
end

-- Engine options never passed down.
local OWN = { params = true, lock_timeout = true, discard = true, after_failed_job = true, journal = true,
              journal_wrapped = true, late_window = true }

function Journal:call_opts(opts)
  local call = {}
  for k, v in pairs(opts) do
    if not OWN[k] then call[k] = v end
  end
  call.replica_path = self.r.path
  if self.held and opts.on_change then
    -- what the download gives the caller of the held updates' features is remembered with them
    local on_change = opts.on_change
    call.on_change = function(layer, kind, record)
      self:note_delivered(layer, kind, record)
      return on_change(layer, kind, record)
    end
  end
  return call
end

-- AN UPDATE APPLIED LATE: the values a download gave the caller of a
-- feature a held update changes (the last ones), journaled with it.
function Journal:note_delivered(layer, kind, record)
  if not self.held or (kind ~= "add" and kind ~= "update") or type(record) ~= "table"
     or type(record.attributes) ~= "table" then
    return
  end
  if self.held_updates == nil or self.held_updates.of ~= self.held then
    local set = {}
    each_edit(self.held.edits, function(key, _, target, op)
      if target == "feature" and op == "update" then set[key] = true end
    end)
    self.held_updates = { of = self.held, keys = set }
  end
  local gid = record.attributes.GlobalID
  if type(gid) ~= "string" then
    for k, v in pairs(record.attributes) do
      if type(k) == "string" and k:lower() == "globalid" then gid = v end
    end
  end
  local key = type(gid) == "string" and outcome.key("update", layer, "feature", gid)
  if key and self.held_updates.keys[key] then
    self.delivered = self.delivered or {}
    self.delivered[key] = record
  end
end

-- The same for a download the caller takes from `result.edits`.
local function note_downloaded(j, edits)
  for _, entry in ipairs(type(edits) == "table" and edits or {}) do
    local layer = math.tointeger(entry.id) or entry.id
    local f = type(entry.features) == "table" and entry.features or {}
    for _, name in ipairs{ "adds", "updates" } do
      for _, record in ipairs(type(f[name]) == "table" and f[name] or {}) do
        j:note_delivered(layer, name == "adds" and "add" or "update", record)
      end
    end
  end
end

local HOLDS = "the server holds this edit's values (given to on_change, or in result.edits), the other crew's are "
  .. "in `server` (send them again to restore them)"
local LATE = "the server applied this update late (its answer was lost), after another crew had changed the "
  .. "feature, and replaced that crew's values with this edit's: " .. HOLDS
local RESENT = "this update, sent again after its answer was lost, replaced the values of another crew's that a "
  .. "download had given you while it was held: " .. HOLDS

-- The held updates a read shows applied after a download gave the caller
-- other values of their features (`verdicts`, `entries`: settle_read's; or
-- the answer's, with `description` RESENT: updates sent again after it):
-- the caller is handed the feature as the server holds it, and each is
-- listed (the conflicts told: outcome local_kept).
local function landed_late(j, verdicts, entries, description)
  local late = {}
  if not j.delivered then return late end
  -- features the caller edited again since: those edits go next (over the values the server holds)
  local since, mine = features_of(j.waiting), call_edits(j.edits)
  for f in pairs(type(mine) == "table" and features_of(mine) or {}) do since[f] = true end
  local own = { GlobalID = true, OBJECTID = true } -- the server fills them
  for _, e in ipairs(entries) do
    local theirs = j.delivered[e.key]
    if e.op == "update" and verdicts[e.key] == outcome.APPLIED and type(theirs) == "table"
       and type(e.feature) == "table" and not since[feature_of(e.key)]
       and not compare.holds(theirs, e.feature, own) then
      local now = joined(theirs, e.feature) -- what the server holds: this edit's values over theirs
      late[#late + 1] = { layer = e.layer, op = e.op, globalId = e.globalId, sent = e.feature, server = theirs,
                          feature = now, outcome = "local_kept", description = description or LATE }
      if j.on_change then j.on_change(e.layer, "update", now) end
    end
  end
  for key, v in pairs(verdicts) do
    if v ~= "not_applied" then j.delivered[key] = nil end
  end
  if not next(j.delivered) then j.delivered = nil end
  return late
end

function Journal:begin(fields)
  if not self.journaling then return true end
  -- after the parameters were checked, before anything of them leaves
  local edits = type(fields.edits) == "table" and fields.edits or json.array()
  local bases = type(fields.edits) == "table" and read_bases(self.client, self.r, fields.edits) or nil
  self.current = { edits = type(fields.edits) == "table" and fields.edits or nil, bases = bases }
  if fields.editsUploadId ~= nil then self.item = tostring(fields.editsUploadId) end
  return self.r:begin_attempt(edits, {
    syncDirection = fields.syncDirection, transportType = fields.transportType,
    rollbackOnFailure = fields.rollbackOnFailure == true or fields.rollbackOnFailure == "true",
    async = fields.async == true, bases = bases, held = self.held, waiting = self.waiting,
    waiting_bases = self.waiting and self.waiting_bases or nil,
    uploaded = fields.editsUploadId ~= nil and self.item or nil, delivered = self.delivered,
    sent_at = os.time() }) -- the request carrying the caller's edits: it may run late (attempt's late window)
end

-- The journal of edits held one sync (geoservices.sync.attempt): provisional,
-- read again by the next sync, which sends them when the server still does
-- not show them.
function Journal:write_held()
  return self.r:begin_attempt(self.held.edits or json.array(), { provisional = true, held_once = true,
    bases = self.held.bases, lost_at = self.held.lost_at, waiting = self.waiting,
    waiting_bases = self.waiting and self.waiting_bases or nil,
    uploaded = self.held.uploaded, delivered = self.delivered })
end

function Journal:record_job(status_url)
  -- with held edits the journal is not re-attached to: what it sent is read back instead
  if self.held then return true end
  return self.r:attempt_job(status_url)
end

-- The state after a result: the generations (when the rule moves them),
-- closed, the journal cleared.
function Journal:commit(result, settled)
  if self.close then result.closed = true end
  if #settled.read_entries > 0 then record_verdicts(result, settled.read, settled.read_entries) end
  -- held updates sent again and applied over what a download gave the caller meanwhile
  local c = self.current or {}
  for _, k in ipairs(landed_late(self, settled.verdicts, entries_of(c.edits, c.bases), RESENT)) do
    self.late = self.late or {}
    self.late[#self.late + 1] = k
  end
  if self.held and not self.on_change then note_downloaded(self, result.edits) end
  self:tell_late(result)
  if self.held then
    -- the held edits' journal first: a provisional journal outlives the generations' move
    local ok, err = self:write_held()
    if not ok then return nil, err end
    if settled.gens then return self.r:advance(result, { keep_journal = true }) end
    self.r.state.closed = result.closed or self.r.state.closed
    return self.r:save()
  end
  if settled.gens then return self.r:advance(result) end
  -- an upload-only answer: the generations stay (the attempt engine's rule)
  if (result.closed and not self.r.state.closed) or self.caps_unsaved then
    self.r.state.closed = result.closed or self.r.state.closed
    local ok, err = self.r:save()
    if not ok then
      self.r.state.closed = nil
      return nil, err
    end
    self.caps_unsaved = nil
  end
  self.r:clear_attempt()
  return true
end

-- AN UPDATE APPLIED LATE, told in the result of the sync that found it:
-- `result.conflicts`; and in `result.edits` (a caller without on_change),
-- unless the download brought the feature again (what the server holds now).
function Journal:tell_late(result)
  if not self.late then return end
  result.conflicts = result.conflicts or {}
  for _, k in ipairs(self.late) do
    result.conflicts[#result.conflicts + 1] = { layer = k.layer, op = k.op, globalId = k.globalId, sent = k.sent,
      server = k.server, outcome = k.outcome, description = k.description }
    if not self.on_change and type(result.edits) == "table" then
      local entry
      for _, e in ipairs(result.edits) do
        if (math.tointeger(e.id) or e.id) == k.layer then entry = e end
      end
      if not entry then
        entry = { id = k.layer, features = { adds = json.array(), updates = json.array(), deleteIds = json.array() } }
        result.edits[#result.edits + 1] = entry
      end
      if not features_of({ entry })[feature_of(outcome.key("update", k.layer, "feature", k.globalId))] then
        entry.features = entry.features or {}
        entry.features.updates = entry.features.updates or json.array()
        entry.features.updates[#entry.features.updates + 1] = k.feature
      end
    end
  end
  self.late = nil
end

function Journal:settle_read(verdicts, _, how)
  local c = self.current or {}
  local entries = entries_of(c.edits, c.bases)
  local resolution = outcome.resolution{ settled = {} }
  record_verdicts(resolution, verdicts, entries)
  resolution.late = landed_late(self, verdicts, entries)
  if #resolution.late > 0 then
    self.late = self.late or {}
    for _, k in ipairs(resolution.late) do self.late[#self.late + 1] = k end
  end
  -- each settled edit, by its key: what it sent (Journal:take tells the same edit passed again from
  -- the caller's next one)
  local sent = {}
  for _, e in ipairs(entries) do sent[e.key] = e.feature end
  for key, v in pairs(verdicts) do
    if v ~= "not_applied" then resolution.settled[key] = sent[key] or true end
  end
  resolution.resend = select_edits(c.edits, function(key)
    return verdicts[key] == "not_applied" or verdicts[key] == nil -- attachments cannot be read: kept
  end)
  resolution.unsettled = resolution.resend and #entries_of(resolution.resend) or 0
  if resolution.resend and resolution.unsettled == 0 then resolution.unsettled = 1 end
  resolution.held = 0
  local attempt = self.r.attempt
  -- an uploaded edits file the engine keeps stays journaled with the edits not shown
  local item = how.uploaded and how.uploaded.kept and how.uploaded.id or nil
  self.item = item
  if how.hold and (resolution.resend or item) then
    -- still not shown after a lost answer: held one sync more, not sent now
    self.held = { edits = resolution.resend, bases = c.bases, lost_at = how.lost_at, uploaded = item }
    self.holding = true -- the engine keeps the uploaded file while this sync holds it
    resolution.held, resolution.unsettled, resolution.resend = resolution.unsettled, 0, nil
    local ok, err = self:write_held()
    if not ok then return nil, err end
  elseif self.held and not resolution.resend then
    -- this sync's own request, read back after it failed, left nothing: the edits it holds stay
    -- journaled (read again by the next sync), with the caller's that wait for them
    local ok, err = self:write_held()
    if not ok then return nil, err end
  elseif how.provisional and attempt and item and not resolution.resend then
    -- only the uploaded file is left: journaled, the next sync reads the server again first
    local params = {}
    for k, v in pairs(type(attempt.params) == "table" and attempt.params or {}) do params[k] = v end
    params.provisional, params.lost_at, params.uploaded = true, how.lost_at, item
    local ok, err = self.r:begin_attempt(json.array(), params)
    if not ok then return nil, err end
  elseif not resolution.resend and self.waiting then
    -- settled; the edits that waited for it stay journaled until they are sent
    local ok, err = self.r:begin_attempt(json.array(), { waiting = self.waiting,
      waiting_bases = self.waiting_bases })
    if not ok then return nil, err end
  elseif not resolution.resend then
    self.r:clear_attempt()
  elseif how.provisional and attempt then
    -- what is left stays journaled: the next sync reads it again before sending it
    local params = {}
    for k, v in pairs(type(attempt.params) == "table" and attempt.params or {}) do params[k] = v end
    params.provisional, params.bases, params.lost_at, params.uploaded = true, c.bases, how.lost_at, item
    local ok, err = self.r:begin_attempt(resolution.resend, params)
    if not ok then return nil, err end
  elseif attempt and type(attempt.params) == "table" and attempt.params.sent_at ~= nil then
    -- read back after an answer that ended the server's work: the request cannot run late any
    -- more, so the attempt is no longer one a process left waiting for its answer (sent_at)
    local params = {}
    for k, v in pairs(attempt.params) do params[k] = v end
    params.sent_at = nil
    local ok, err = self.r:begin_attempt(attempt.edits or json.array(), params)
    if not ok then return nil, err end
  end
  resolution.resent = {}
  if not how.provisional then
    each_edit(resolution.resend, function(key) resolution.resent[key] = true end)
  end
  self.current = { edits = resolution.resend, bases = c.bases }
  return resolution
end

function Journal:abandon()
  if self.held then
    -- waiting edits this request carried wait again (nothing of it was applied)
    if self.released then self.waiting, self.released = merged_edits(self.released, self.waiting), nil end
    self:write_held()
  elseif self.resent and self.r.attempt then
    -- the earlier attempt's edits this request carried stay journaled
    self.r:begin_attempt(self.resent, self.r.attempt.params)
  else
    self.r:clear_attempt()
  end
  return true
end

-- The edits read back in conflict or rejected, one line (the first few):
-- after a failed sync its error is the only report of them (the journal
-- forgets a settled edit), and its message is what the CLI prints.
local SHOWN = 3
-- `listed_in`: where the error lists them (the message names it).
local function named(summary, listed_in)
  local out, n = {}, 0
  for _, list in ipairs{ { summary.conflicts, "in conflict" }, { summary.failed_edits, "rejected" } } do
    for _, e in ipairs(list[1] or {}) do
      n = n + 1
      if n <= SHOWN then
        out[#out + 1] = ("%s of %s in layer %s %s (%s)"):format(e.op, tostring(e.globalId), tostring(e.layer),
          list[2], tostring(e.description))
      end
    end
  end
  if n == 0 then return "" end
  return ("; %s%s (%s: not sent again)"):format(table.concat(out, "; "),
    n > SHOWN and ("; and %d more"):format(n - SHOWN) or "", listed_in)
end

function Journal.note_read(_, err, summary)
  err.verified, err.conflicts = summary.verified, summary.conflicts
  if summary.failed_edits and #summary.failed_edits > 0 then err.failed_edits = summary.failed_edits end
  local left = summary.resend and #entries_of(summary.resend) or 0
  err.message = err.message .. ("; read back from the server: %d edit(s) settled, %d not shown applied yet (read "
    .. "again by the next sync before they are sent)%s"):format(summary.verified - left, left,
    named(summary, "err.conflicts, err.failed_edits"))
end

function Journal.note_resolved(_, err, summary)
  local told = named(summary, "err.resolved")
  if told == "" then return end
  err.message = err.message .. "; an earlier synchronization's edits, read back first" .. told
end

function Journal.fold_read(_, result, summary)
  result.resolved = summary
  result.conflicts = result.conflicts or {}
  for _, k in ipairs(summary.conflicts or {}) do result.conflicts[#result.conflicts + 1] = k end
  result.failed_edits = result.failed_edits or {}
  for _, f in ipairs(summary.failed_edits or {}) do result.failed_edits[#result.failed_edits + 1] = f end
end

return M
