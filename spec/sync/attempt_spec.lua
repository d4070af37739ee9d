-- The attempt engine (geoservices.sync.attempt) once, with a fake journal
-- kept in memory, against the emulator: when the attempt is made durable,
-- what is committed (the generation rule), what is abandoned, what is read
-- back and what stays provisional, what the rebase hook sees. The state
-- file's and the store's journals each have their own spec
-- (spec/sync/state_journal_spec.lua, spec/sync/store_journal_spec.lua).
local attempt = require "geoservices.sync.attempt"
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local outcome = require "geoservices.sync.outcome"
local transport = require "geoservices.net.transport"

local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"

local function norm(gid) return (tostring(gid):upper():gsub("[{}]", "")) end

-- The 2.1 list of edit items `{op =, gid =, feature =}` (layer 0).
local function edits_of(items)
  if #items == 0 then return nil end
  local f = { adds = json.array(), updates = json.array(), deleteIds = json.array() }
  for _, it in ipairs(items) do
    if it.op == "add" then f.adds[#f.adds + 1] = it.feature
    elseif it.op == "update" then f.updates[#f.updates + 1] = it.feature
    else f.deleteIds[#f.deleteIds + 1] = it.gid end
  end
  return json.array{ { id = 0, features = f } }
end

-- A journal in memory: a queue of items, the attempt in flight, the
-- generation, and every call in order (with the server's count of
-- synchronizeReplica requests at that moment).
local function fake_journal(emu)
  local j = { service = "Parcels", what = "the fake journal", kept_in = "in memory", gen = 1, queue = {},
              applied = {}, failed = {}, conflicts = {}, calls = {} }
  local function log(name, extra)
    local c = { name = name, sent = emu:count("synchronizeReplica") }
    for k, v in pairs(extra or {}) do c[k] = v end
    j.calls[#j.calls + 1] = c
    return c
  end
  function j.names()
    local out = {}
    for _, c in ipairs(j.calls) do out[#out + 1] = c.name end
    return out
  end
  function j.call(name)
    for _, c in ipairs(j.calls) do if c.name == name then return c end end
  end
  function j:pending()
    log("pending")
    if not self.attempt then return false end
    self.current = self.attempt.items
    return { status_url = self.attempt.status_url, params = self.attempt.params, edits = edits_of(self.current),
             provisional = self.attempt.provisional, held_once = self.attempt.held_once,
             uploaded = self.attempt.uploaded }
  end
  -- the uploaded edits file (editsUploadId) the attempt carries: kept, not judged
  function j:uploaded() return self.attempt and self.attempt.uploaded end
  function j:entries()
    local list = {}
    for _, it in ipairs(self.current or {}) do
      list[#list + 1] = { key = outcome.key(it.op, 0, "feature", it.gid), layer = 0, op = it.op, globalId = it.gid,
                          feature = it.feature, base = it.base }
    end
    return list
  end
  function j.job_fields() return { replicaID = CREW1, expect = { replicaID = CREW1 } } end
  function j.enough() return false end
  function j:request(opts)
    log("request")
    local params = { replicaID = CREW1, replicaServerGen = self.gen, syncDirection = opts.direction }
    for k, v in pairs(opts.params or {}) do params[k] = v end
    return params
  end
  function j:capabilities() return self.caps_kept end
  function j:keep_capabilities(caps)
    log("keep_capabilities")
    self.caps_kept = caps
  end
  function j:keys()
    local keys = {}
    for _, it in ipairs(self.current or {}) do keys[#keys + 1] = outcome.key(it.op, 0, "feature", it.gid) end
    return keys
  end
  function j:take(_, resolution, opts)
    log("take", { resolution = resolution, only = opts.only })
    self.held = nil
    if resolution.summary and resolution.summary.held > 0 then
      self.held = self.attempt -- kept, not sent by this sync
    end
    local taken, left = {}, {}
    for _, it in ipairs(self.queue) do
      if not opts.only or opts.only[outcome.key(it.op, 0, "feature", it.gid)] then taken[#taken + 1] = it
      else left[#left + 1] = it end
    end
    self.current, self.queue = taken, left
    return { edits = edits_of(self.current), entries = self:entries() }
  end
  function j.call_opts() return {} end
  function j:begin(fields)
    log("begin", { fields = fields })
    if not self.held then
      self.attempt = { items = self.current, params = { rollbackOnFailure = fields.rollbackOnFailure },
                       uploaded = fields.editsUploadId and tostring(fields.editsUploadId) }
    end
    return true
  end
  function j:record_job(url)
    self.attempt.status_url = url
    return true
  end
  -- each item's fate; `keep`: those without one stay in the attempt, else back in the queue
  local function settle(verdicts, keep)
    local left = {}
    for _, it in ipairs(j.current or {}) do
      local v = verdicts[outcome.key(it.op, 0, "feature", it.gid)]
      if v == outcome.APPLIED then j.applied[#j.applied + 1] = it
      elseif type(v) == "table" and v.conflict then j.conflicts[#j.conflicts + 1] = it
      elseif type(v) == "table" then j.failed[#j.failed + 1] = it
      elseif keep then left[#left + 1] = it
      else j.queue[#j.queue + 1] = it end
    end
    return left
  end
  function j:commit(_, settled)
    log("commit", { gens = settled.gens })
    settle(settled.verdicts, false)
    if settled.gens then self.gen = settled.gens.replicaServerGen end
    self.attempt, self.current = self.held, nil
    return true
  end
  function j:settle_read(verdicts, _, how)
    log("settle_read", { provisional = how.provisional == true, hold = how.hold == true, verdicts = verdicts,
                         uploaded = how.uploaded })
    local keep = how.provisional or how.hold
    local left = settle(verdicts, keep)
    local item = how.uploaded and how.uploaded.kept and how.uploaded.id or nil
    self.attempt = (#left > 0 or item) and { items = left, params = self.attempt and self.attempt.params,
                                   provisional = true, held_once = how.hold or nil, uploaded = item } or nil
    self.current = left
    return { unsettled = how.hold and 0 or #left, held = how.hold and #left or 0, resent = {} }
  end
  function j:abandon()
    log("abandon")
    if self.held then
      self.attempt = self.held
      return true
    end
    for _, it in ipairs(self.current or {}) do self.queue[#self.queue + 1] = it end
    self.attempt, self.current = nil, nil
    return true
  end
  function j.note_read() end
  function j.fold_read() end
  return j
end

describe("the attempt engine, with a journal in memory", function()
  local emu, c
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    c = geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 }
  end)
  after_each(function() c:close() end)

  -- How often the server applied an edit of this GlobalID (its change log).
  local function applied_on_server(op, gid)
    local n = 0
    for _, e in ipairs(emu:control("changelog?service=Parcels").entries) do
      if e.op == op and norm(e.globalId) == norm(gid) and not e.refused and not e.rolled_back then n = n + 1 end
    end
    return n
  end

  local function add_item(apn)
    local gid = "{" .. norm(("%08X-0000-4000-8000-%012X"):format(math.random(0, 0x7fffffff), math.random(0, 2^40)))
      .. "}"
    return { op = "add", gid = gid, feature = { attributes = { GlobalID = gid, APN = apn },
                                                geometry = { x = -117.2, y = 34.1 } } }
  end

  it("journals the attempt before its request leaves, then commits each edit and the generation", function()
    local j = fake_journal(emu)
    j.queue = { add_item("engine-1") }
    local result = assert(attempt.run(c, j, {}))
    assert.same({ "pending", "request", "take", "keep_capabilities", "begin", "commit" }, j.names())
    assert.equal(0, j.call("begin").sent, "journaled before the request left")
    assert.equal(1, #j.applied)
    assert.equal(1, applied_on_server("add", j.applied[1].gid))
    assert.is_true(j.gen > 1, "the generation moved with the downloaded data")
    assert.equal(j.gen, result.replicaServerGen)
    assert.is_nil(j.attempt)
  end)

  it("keeps the generation on an upload-only answer (it counts no downloaded data)", function()
    local j = fake_journal(emu)
    j.queue = { add_item("engine-upload") }
    assert(attempt.run(c, j, { direction = "upload" }))
    assert.is_nil(j.call("commit").gens)
    assert.equal(1, j.gen)
    assert.equal(1, #j.applied)
  end)

  it("abandons a request the server refused whole: nothing applied, the edit back in the queue", function()
    local j = fake_journal(emu)
    local item = add_item("engine-refused")
    j.queue = { item }
    emu:fault{ route = "synchronizeReplica", kind = "error", attempts = { 1 } }
    local result, err = attempt.run(c, j, {})
    assert.is_nil(result)
    assert.is_falsy(err.outcome_unknown)
    assert.same({ "pending", "request", "take", "keep_capabilities", "begin", "abandon" }, j.names())
    assert.same({ item }, j.queue)
    assert.equal(0, applied_on_server("add", item.gid))
  end)

  it("reads a lost answer back at once: an edit applied settles, nothing is sent again", function()
    local j = fake_journal(emu)
    local item = add_item("engine-lost-applied")
    j.queue = { item }
    emu:fault{ route = "synchronizeReplica", kind = "reset", phase = "after", attempts = { 1 } }
    local result, err = attempt.run(c, j, {})
    assert.is_nil(result)
    assert.is_true(err.outcome_unknown)
    assert.is_true(j.call("settle_read").provisional)
    assert.same({ item }, j.applied)
    assert.is_nil(j.attempt)
    assert(attempt.run(c, j, {}))
    assert.equal(1, applied_on_server("add", item.gid))
    assert.is_true(j.gen > 1, "the next sync downloaded")
  end)

  it("holds an edit a lost answer does not show applied one sync, then reads it again before sending it",
    function()
      local j = fake_journal(emu)
      local item = add_item("engine-lost-not-applied")
      j.queue = { item }
      emu:fault{ route = "synchronizeReplica", kind = "reset", phase = "before", attempts = { 1 } }
      local _, err = attempt.run(c, j, {})
      assert.is_true(err.outcome_unknown)
      assert.is_true(j.call("settle_read").provisional)
      assert.same({ item }, j.attempt.items, "provisional: it stays in the attempt, not in the queue")
      assert.same({}, j.queue)
      -- the next sync: still not on the server (it may come late): held, nothing sent, the sync goes through
      j.calls = {}
      assert(attempt.run(c, j, {}))
      assert.is_true(j.call("settle_read").hold)
      assert.same({ item }, j.attempt.items)
      assert.equal(0, applied_on_server("add", item.gid))
      assert.is_nil(j.call("begin").fields.edits, "nothing sent while it is held")
      -- the one after: read again, not there, sent
      j.calls = {}
      assert(attempt.run(c, j, {}))
      assert.same({ "pending", "settle_read", "request", "take", "begin", "commit" }, j.names())
      assert.is_false(j.call("settle_read").hold)
      assert.equal("not_applied", j.call("settle_read").verdicts[outcome.key("add", 0, "feature", item.gid)])
      assert.equal(1, applied_on_server("add", item.gid))
      assert.same({ item }, j.applied)
    end)

  it("a lost answer applied late, found by the held read: settled applied, never sent again", function()
    local j = fake_journal(emu)
    local item = add_item("engine-late")
    j.queue = { item }
    emu:fault{ route = "synchronizeReplica", kind = "reset", phase = "before", attempts = { 1 } }
    assert.is_nil(attempt.run(c, j, {}))
    -- the server applies it late (another request carrying the same add, as the held one would)
    assert(c:synchronize_replica("Parcels", { replicaID = CREW1, replicaServerGen = 1, edits = edits_of{ item } }))
    assert(attempt.run(c, j, {}))
    assert.same({ item }, j.applied)
    assert.is_nil(j.attempt)
    assert.equal(1, applied_on_server("add", item.gid))
  end)

  -- An edits file uploaded to the emulator (an add of `gid`, layer 0); its itemID.
  local function upload_add(gid)
    local text = json.encode{ { id = 0, features = { adds = { { attributes = { GlobalID = gid, APN = "UPLOADED" },
      geometry = { x = -117.2, y = 34.1 } } } } } }
    local boundary = "----attempt-spec"
    local body = table.concat{ "--", boundary, '\r\nContent-Disposition: form-data; name="f"\r\n\r\njson\r\n',
      "--", boundary, '\r\nContent-Disposition: form-data; name="file"; filename="edits.json"\r\n',
      "Content-Type: application/json\r\n\r\n", text, "\r\n--", boundary, "--\r\n" }
    local resp = assert(transport.perform(emu.driver, { url = emu.url .. "/Parcels/FeatureServer/uploads/upload",
      method = "POST", body = body, content_type = "multipart/form-data; boundary=" .. boundary,
      timeout_ms = 10000 }))
    return assert(json.decode(resp.body).item.itemID)
  end

  it("keeps an uploaded edits file whose answer is lost, holds it one sync (refusing it again), then settles it "
    .. "unknown, never sending it again (F4)", function()
    local j = fake_journal(emu)
    local gid = add_item("unused").gid
    local id = upload_add(gid)
    local with_file = { params = { editsUploadId = id, editsUploadFormat = "json" } }
    emu:fault{ route = "synchronizeReplica", kind = "reset", phase = "before", attempts = { 1 } }
    local r1, e1 = attempt.run(c, j, with_file)
    assert.is_nil(r1)
    assert.is_true(e1.outcome_unknown)
    assert.truthy(e1.message:find(id, 1, true), "the error names the uploaded item")
    assert.same({ id = id, kept = true }, { id = j.call("settle_read").uploaded.id,
                                            kept = j.call("settle_read").uploaded.kept })
    assert.equal(id, j.attempt.uploaded, "provisional: the item stays in the attempt")
    -- the next sync holds it: the same file passed again is refused before anything is sent
    local sent = emu:count("synchronizeReplica")
    local r2, e2 = attempt.run(c, j, with_file)
    assert.is_nil(r2)
    assert.equal("invalid", e2.kind)
    assert.equal("editsUploadId", e2.parameter)
    assert.equal(sent, emu:count("synchronizeReplica"), "nothing sent with the refusal")
    assert.equal(id, j.attempt.uploaded)
    -- without it the held sync goes through (it downloads), the item still kept
    j.calls = {}
    local r3 = assert(attempt.run(c, j, {}))
    assert.is_true(r3.resolved.uploaded.kept)
    assert.equal(id, j.attempt.uploaded)
    -- the one after settles it unknown: reported, forgotten, never sent again
    j.calls = {}
    local r4 = assert(attempt.run(c, j, {}))
    assert.same({ id = id, outcome = "unknown", kept = false }, { id = r4.resolved.uploaded.id,
      outcome = r4.resolved.uploaded.outcome, kept = r4.resolved.uploaded.kept })
    assert.is_nil(j.attempt)
    assert.equal(0, applied_on_server("add", gid), "the uploaded edits were sent again")
  end)

  it("reads back an answer that leaves an edit unknown, and commits the server's verdict", function()
    emu:control("settings", { rollback_default = false })
    local j = fake_journal(emu)
    -- an update of a feature the server holds, sent over URL transport: no per-edit results
    local item = { op = "update", gid = PARCEL1, feature = { attributes = { GlobalID = PARCEL1, OWNER = "engine" } } }
    j.queue = { item }
    assert(attempt.run(c, j, { params = { transportType = "url" } }))
    assert.equal(1, emu:count("query"), "the outcome was read back")
    assert.same({ item }, j.applied)
    assert.equal(1, applied_on_server("update", PARCEL1))
  end)

  it("splits a request refused whole where rollback is forced: the refused edit failed, the rest applied (F3)",
    function()
      -- perReplica only, no supportsRollbackOnFailure: the server rolls every failed request back
      emu:control("settings", { supports_rollback_on_failure = false, supports_per_layer_sync = false })
      local PARCEL3 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E03}"
      local e = geoservices.edits()
      e:delete(0, PARCEL3)
      assert(c:synchronize_replica("Parcels", { replicaID = "{5E1A0C2B-2222-4A5B-9C8D-000000000002}",
                                                replicaServerGen = 1, edits = e }))
      local j = fake_journal(emu)
      local refused = { op = "update", gid = PARCEL3, feature = { attributes = { GlobalID = PARCEL3, OWNER = "x" } } }
      local good1, good2, good3 = add_item("engine-split-1"), add_item("engine-split-2"), add_item("engine-split-3")
      j.queue = { good1, refused, good2, good3 }
      local result = assert(attempt.run(c, j, {}))
      assert.same({ refused }, j.failed)
      assert.equal(3, #j.applied)
      for _, it in ipairs{ good1, good2, good3 } do assert.equal(1, applied_on_server("add", it.gid)) end
      assert.equal(0, applied_on_server("update", PARCEL3))
      assert.same({}, j.queue)
      assert.is_nil(j.attempt)
      -- the refusal names the edit: it fails with those words and is not sent again
      local sent = 0
      for _, entry in ipairs(emu:control("changelog?service=Parcels").entries) do
        if entry.op == "update" and norm(entry.globalId) == norm(PARCEL3) and not entry.rolled_back then
          sent = sent + 1
        end
      end
      assert.equal(1, sent, "the refused update was sent once")
      assert.equal(1, result.split.refused)
      assert.is_true(j.gen > 1, "the changes downloaded in the same sync")
      assert.truthy(j.call("settle_read").verdicts[outcome.key("update", 0, "feature", PARCEL3)].description
        :find("Object is missing", 1, true), "failed with the server's words")
    end)

  it("does not split a request refused whole for another reason: its edits back in the queue", function()
    emu:control("settings", { supports_rollback_on_failure = false, supports_per_layer_sync = false })
    local j = fake_journal(emu)
    local item = add_item("engine-not-split")
    j.queue = { item }
    -- every synchronizeReplica refused: the replica's trouble, not the edit's
    emu:fault{ route = "synchronizeReplica", kind = "error" }
    local result, err = attempt.run(c, j, {})
    assert.is_nil(result)
    assert.equal("server", err.kind)
    assert.same({ item }, j.queue)
    assert.same({}, j.failed)
  end)

  it("gives the rebase hook the rows before they are journaled, and sends only what it returns", function()
    local j = fake_journal(emu)
    local keep, hold = add_item("engine-sent"), add_item("engine-held")
    j.queue = { keep, hold }
    local seen
    function j:rebase(_, taken)
      seen = { entries = #taken.entries, sent = emu:count("synchronizeReplica"), begun = j.call("begin") ~= nil }
      self.current = { keep }
      self.conflicts[#self.conflicts + 1] = hold
      return { edits = edits_of(self.current), entries = self:entries() }
    end
    assert(attempt.run(c, j, {}))
    assert.same({ entries = 2, sent = 0, begun = false }, seen)
    assert.equal(1, applied_on_server("add", keep.gid))
    assert.equal(0, applied_on_server("add", hold.gid))
    assert.same({ keep }, j.applied)
    assert.same({ hold }, j.conflicts)
  end)
end)
