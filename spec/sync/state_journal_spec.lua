-- The state file's journal (geoservices.sync.state_journal) on its own,
-- through the attempt engine's journal interface: what each step leaves in
-- `<state>.journal` and the state file. The engine itself: spec/sync/attempt_spec.lua.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local outcome = require "geoservices.sync.outcome"
local replica_mod = require "geoservices.sync.replica"
local state_journal = require "geoservices.sync.state_journal"

local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"

describe("the state file's journal", function()
  local emu, dir, c
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    dir = helper.tmp_dir()
    c = geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 }
  end)
  after_each(function()
    c:close()
    os.execute("rm -rf " .. helper.shell_quote(dir))
  end)

  local function open_state()
    local path = dir .. "/crew-1.json"
    if not helper.read_all(path) then
      helper.write_file(path, json.encode{ service = "Parcels", replicaID = CREW1, model = "perReplica",
                                           replicaServerGen = 5 })
    end
    return assert(replica_mod.open(path))
  end

  local function journal_file(r) return helper.read_all(r.path .. ".journal") end

  -- A journal that took `edits` and began (as the engine does before sending).
  local function begun(edits)
    local r = open_state()
    local j = state_journal.new(c, r, edits)
    assert.is_false(j:pending())
    local params = j:request({})
    local taken = j:take(params, {})
    assert(j:begin{ edits = taken.edits, syncDirection = "bidirectional", rollbackOnFailure = false })
    return j, r, taken
  end

  local function one_add_and_update()
    local e = geoservices.edits()
    local gid = e:add(0, { attributes = { APN = "sj-add" } })
    e:update(0, { attributes = { GlobalID = PARCEL1, OWNER = "sj" } })
    return e, gid
  end

  it("begin writes the attempt, with the server's values of the features it updates, before anything is sent",
    function()
      local e = one_add_and_update()
      local _, r = begun(e)
      local saved = json.decode(assert(journal_file(r)))
      assert.equal("5", saved.from)
      assert.equal(0, emu:count("synchronizeReplica"))
      local base = saved.params.bases[outcome.key("update", 0, "feature", PARCEL1)]
      assert.is_table(base, "the update's base was read from the server")
      assert.is_not_nil(base.attributes.OWNER)
      -- a later process finds it, with the job's address once recorded
      local j2 = state_journal.new(c, assert(replica_mod.open(r.path)), nil)
      local a = assert(j2:pending())
      assert.equal(2, #j2:entries())
      assert.is_nil(a.status_url)
    end)

  it("record_job keeps the job's address in the journal", function()
    local j, r = begun(one_add_and_update())
    assert(j:record_job("http://127.0.0.1:1/jobs/7"))
    assert.equal("http://127.0.0.1:1/jobs/7", json.decode(journal_file(r)).status_url)
  end)

  it("commit moves the generations with downloaded data and drops the journal", function()
    local j, r = begun(one_add_and_update())
    assert(j:commit({ replicaServerGen = 9, response = "edits_and_data" },
      { gens = { replicaServerGen = 9 }, read = {}, read_entries = {}, verdicts = {} }))
    assert.equal(9, json.decode(helper.read_all(r.path)).replicaServerGen)
    assert.is_nil(journal_file(r))
  end)

  it("commit without generations (an upload-only answer) keeps the state's and drops the journal", function()
    local j, r = begun(one_add_and_update())
    assert(j:commit({ replicaServerGen = 9, response = "no_edits" },
      { gens = nil, read = {}, read_entries = {}, verdicts = {} }))
    assert.equal(5, json.decode(helper.read_all(r.path)).replicaServerGen)
    assert.is_nil(journal_file(r))
  end)

  it("settle_read after its own failure keeps only the edits not shown applied, journaled", function()
    local e, gid = one_add_and_update()
    local j, r = begun(e)
    local summary = assert(j:settle_read({ [outcome.key("add", 0, "feature", gid)] = "not_applied",
      [outcome.key("update", 0, "feature", PARCEL1)] = outcome.APPLIED }, {}, { provisional = true }))
    assert.equal(1, summary.unsettled)
    local saved = json.decode(assert(journal_file(r)))
    assert.equal(1, #saved.edits[1].features.adds)
    assert.is_nil(saved.edits[1].features.updates)
    assert.is_table(saved.params.bases, "the bases stay with what is left")
  end)

  it("settle_read with every edit settled drops the journal", function()
    local e, gid = one_add_and_update()
    local j, r = begun(e)
    assert(j:settle_read({ [outcome.key("add", 0, "feature", gid)] = outcome.APPLIED,
      [outcome.key("update", 0, "feature", PARCEL1)] = { code = 1019, description = "gone" } }, {},
      { provisional = true }))
    assert.is_nil(journal_file(r))
  end)

  it("abandon drops the caller's edits, and keeps an earlier attempt's it carried", function()
    local j, r = begun(one_add_and_update())
    assert(j:abandon())
    assert.is_nil(journal_file(r))
    -- an earlier attempt's edit, read back as not applied, goes with the next request
    local e, gid = one_add_and_update()
    r = select(2, begun(e))
    local j2 = state_journal.new(c, assert(replica_mod.open(r.path)), nil)
    assert(j2:pending())
    local read = assert(j2:settle_read({ [outcome.key("add", 0, "feature", gid)] = "not_applied",
      [outcome.key("update", 0, "feature", PARCEL1)] = outcome.APPLIED }, {}, { provisional = false }))
    local taken = j2:take(j2:request({}), { summary = read })
    assert.equal(1, #taken.entries)
    assert(j2:begin{ edits = taken.edits })
    assert(j2:abandon())
    local saved = json.decode(assert(journal_file(r)))
    assert.equal(1, #saved.edits[1].features.adds)
  end)

  -- A request sent while a lost answer's edits were held (they ride in params.held) and cut off
  -- before its answer (the process killed): the next sync must go on holding them while their
  -- late window lasts, never read them as a plain interrupted attempt and send them again while
  -- the server may still apply them (make torture-modes, gateway=drop: an add applied twice).
  it("a request sent while edits were held and interrupted keeps them held for their late window", function()
    helper.write_file(dir .. "/crew-1.json", json.encode{ service = "Parcels", replicaID = CREW1,
                                                          model = "perReplica", replicaServerGen = 1 })
    local r = open_state()
    local e = geoservices.edits()
    local gid = e:add(0, { attributes = { APN = "sj-held" }, geometry = { x = -117.2, y = 34.1 } })
    local lost_at = os.time()
    assert(r:begin_attempt(json.array(), { syncDirection = "bidirectional", rollbackOnFailure = false,
      held = { edits = e:to_table(), lost_at = lost_at } }))
    local j = state_journal.new(c, assert(replica_mod.open(r.path)), nil)
    local a = j:pending()
    assert.is_true(a.provisional)
    assert.is_true(a.held_once)
    assert.equal(lost_at, a.lost_at)
    assert.is_true(require("geoservices.sync.attempt").holds(a, 60))
    -- and a sync now sends nothing of it: the server never sees the add
    assert(c:sync(r.path, nil, { timeout = 30, late_window = 60 }))
    local log = emu:control("changelog?service=Parcels").entries
    for _, entry in ipairs(log) do
      assert.is_not.equal(outcome.normalize_gid(gid), outcome.normalize_gid(entry.globalId or ""),
        "the held add was sent again within its late window")
    end
    assert.truthy(journal_file(r), "the held add left the journal")
  end)
end)
