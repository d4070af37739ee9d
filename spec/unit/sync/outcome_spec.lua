-- The fate of each uploaded edit as the vendor documents synchronizeReplica
-- (geoservices.sync.outcome), and reading unknown ones back from the server
-- (geoservices.sync.verify) with a scripted client: every open point both ways.
local json = require "geoservices.base.json"
local outcome = require "geoservices.sync.outcome"
local verify = require "geoservices.sync.verify"

local ADD, UPD, DEL = "{AAAA0000-0000-4000-8000-000000000001}", "{BBBB0000-0000-4000-8000-000000000002}",
  "{CCCC0000-0000-4000-8000-000000000003}"

local function sent()
  return outcome.sent_edits{ edits = { { id = 0, features = {
    adds = { { attributes = { GlobalID = ADD, NAME = "a" } } },
    updates = { { attributes = { GlobalID = UPD, NAME = "new" } } },
    deleteIds = { DEL } } } } }
end

local function sink(results)
  local s = { failed_edits = {}, answered = {}, results = 0 }
  for _, r in ipairs(results or {}) do
    s.results = s.results + 1
    s.answered[outcome.key(r.op, 0, "feature", r.gid)] = true
    if not r.ok then
      s.failed_edits[#s.failed_edits + 1] = { layer = 0, op = r.op, target = "feature", globalId = r.gid,
                                              code = 1019, description = "Object is missing." }
    end
  end
  return s
end

local function verdicts(results, ctx)
  local v = outcome.classify(sent(), sink(results), ctx)
  return v[outcome.key("add", 0, "feature", ADD)], v[outcome.key("update", 0, "feature", UPD)],
    v[outcome.key("delete", 0, "feature", DEL)]
end

describe("sync.outcome", function()
  it("lists what a request carries, keyed without case or braces", function()
    local s = sent()
    assert.equal(3, s.count)
    assert.equal(outcome.key("add", 0, "feature", ADD), outcome.key("add", 0, "feature", ADD:lower():sub(2, -2)))
    assert.is_nil(outcome.sent_edits{ replicaID = "x" })
  end)

  it("every result listed: successes applied, the failure rejected", function()
    local a, u, d = verdicts({ { op = "add", gid = ADD, ok = true }, { op = "update", gid = UPD, ok = false },
      { op = "delete", gid = DEL, ok = true } }, { succeeded = true, rollback = false })
    assert.equal("applied", a)
    assert.equal(1019, u.code)
    assert.equal("applied", d)
  end)

  it("skipped-only results with rollbackOnFailure false: the unlisted were applied", function()
    local a, u, d = verdicts({ { op = "update", gid = UPD, ok = false } }, { succeeded = true, rollback = false })
    assert.equal("applied", a)
    assert.equal(1019, u.code)
    assert.equal("applied", d)
  end)

  it("no results at all with rollbackOnFailure false (URL, async): unknown", function()
    local a, u, d = verdicts({}, { succeeded = true, rollback = false })
    assert.equal("unknown", a)
    assert.equal("unknown", u)
    assert.equal("unknown", d)
  end)

  it("no results with rollbackOnFailure true and a success: all applied (all or nothing)", function()
    local a, u, d = verdicts({}, { succeeded = true, rollback = true })
    assert.equal("applied", a)
    assert.equal("applied", u)
    assert.equal("applied", d)
  end)

  it("a job that ended CompletedWithErrors (any spelling) leaves the unlisted unknown", function()
    for _, status in ipairs{ "CompletedWithErrors", "Completed With Errors", "completed_with_errors" } do
      local a = verdicts({}, { succeeded = true, rollback = true, status = status })
      assert.equal("unknown", a, status)
    end
  end)

  it("rollback is in effect by the server's rules: the parameter where supportsRollbackOnFailure, else the model",
    function()
      local honoured = outcome.capabilities_of{ supportsRollbackOnFailure = true, supportsPerLayerSync = true }
      assert.is_true(outcome.rollback_in_effect(true, honoured))
      assert.is_false(outcome.rollback_in_effect(false, honoured))
      -- the vendor's example service and WildfireSync: perLayer only, no rollback support: always skipped
      local wildfire = outcome.capabilities_of{ supportsRollbackOnFailure = false, supportsPerReplicaSync = false,
                                                supportsPerLayerSync = true, supportsAsync = true }
      assert.is_false(outcome.rollback_in_effect(true, wildfire))
      -- perReplica only (absent supportsPerLayerSync is false), no rollback support: always all or nothing
      local forced = outcome.capabilities_of{ supportsRollbackOnFailure = "false", supportsPerReplicaSync = "true" }
      assert.is_true(outcome.rollback_in_effect(false, forced))
      -- both models and no promise: nothing certain
      assert.is_nil(outcome.rollback_in_effect(true, outcome.capabilities_of{ supportsPerLayerSync = true }))
      -- not known (the bare operation): as sent
      assert.is_true(outcome.rollback_in_effect(true, nil))
      assert.same({ supportsRollbackOnFailure = false, supportsPerReplicaSync = false, supportsPerLayerSync = true,
                    supportsAsync = true }, wildfire)
    end)

  it("a Completed job on a service that skips failed edits whatever was sent: the unlisted are unknown (F1)",
    function()
      local wildfire = outcome.capabilities_of{ supportsRollbackOnFailure = false, supportsPerReplicaSync = false,
                                                supportsPerLayerSync = true }
      local a, u = verdicts({}, { succeeded = true, rollback = outcome.rollback_in_effect(true, wildfire),
                                  status = "Completed" })
      assert.equal("unknown", a)
      assert.equal("unknown", u)
    end)

  it("a direction that does not upload settles nothing by default", function()
    local a = verdicts({}, { succeeded = true, rollback = true, direction = "download" })
    assert.equal("unknown", a)
    local b = verdicts({}, { succeeded = true, rollback = true, layer_directions = { [0] = "upload" },
                             direction = "download" })
    assert.equal("applied", b)
  end)
end)

-- A client whose query answers from a table of features.
local function fake_client(features, fail)
  local posted = {}
  return {
    posted = posted,
    url_for = function(_, path) return "http://127.0.0.1:1/server/" .. path end,
    post = function(_, url, fields)
      posted[#posted + 1] = { url = url, fields = fields }
      if fail then return nil, { kind = "network", message = "refused" } end
      local out = json.array()
      for gid, f in pairs(features) do
        if fields.where:upper():find(gid:upper():gsub("[{}]", ""), 1, true) then out[#out + 1] = f end
      end
      return { features = out }
    end,
  }
end

local function entries(base)
  return {
    { key = "a", layer = 0, op = "add", globalId = ADD, feature = { attributes = { GlobalID = ADD } } },
    { key = "u", layer = 0, op = "update", globalId = UPD, feature = { attributes = { GlobalID = UPD, NAME = "new" },
      geometry = { x = 1, y = 2 } }, base = base },
    { key = "d", layer = 0, op = "delete", globalId = DEL },
  }
end

describe("sync.verify", function()
  it("reads the layer by GlobalID: an add found and a delete gone are applied, an update holding its values too",
    function()
      local c = fake_client{
        [ADD] = { attributes = { GlobalID = ADD, OBJECTID = 41 } },
        [UPD] = { attributes = { GlobalID = UPD, OBJECTID = 7, NAME = "new" }, geometry = { x = 1, y = 2 } },
      }
      local v, oids = assert(verify.edits(c, "Parcels", entries()))
      assert.equal("applied", v.a)
      assert.equal("applied", v.u)
      assert.equal("applied", v.d)
      assert.equal(41, oids.a)
      assert.equal(1, #c.posted)
      assert.matches("Parcels/FeatureServer/0/query", c.posted[1].url, 1, true)
      assert.matches("GlobalID IN", c.posted[1].fields.where, 1, true)
    end)

  it("an update the server does not hold: not applied when it still holds the base, else a conflict", function()
    local server = { [UPD] = { attributes = { GlobalID = UPD, NAME = "old" }, geometry = { x = 1, y = 2 } },
                     [DEL] = { attributes = { GlobalID = DEL } } }
    local base = { attributes = { GlobalID = UPD, NAME = "old" }, geometry = { x = 1, y = 2 } }
    local v = assert(verify.edits(fake_client(server), "Parcels", entries(base)))
    assert.equal("not_applied", v.a)
    assert.equal("not_applied", v.u)
    assert.equal("not_applied", v.d)
    server[UPD].attributes.NAME = "someone else's"
    v = assert(verify.edits(fake_client(server), "Parcels", entries(base)))
    assert.is_true(v.u.conflict)
    assert.equal("someone else's", v.u.server.attributes.NAME)
    -- without a base an update not held is never sent again: a conflict
    server[UPD].attributes.NAME = "old"
    v = assert(verify.edits(fake_client(server), "Parcels", entries(nil)))
    assert.is_true(v.u.conflict)
  end)

  it("an update of a feature the server did not have when it left is not applied, not a conflict", function()
    local v = assert(verify.edits(fake_client{}, "Parcels", entries(false)))
    assert.equal("not_applied", v.u)
    v = assert(verify.edits(fake_client{}, "Parcels", entries(nil)))
    assert.is_true(v.u.conflict) -- unknown before: someone may have deleted it since
  end)

  it("after a completed request an edit not applied was skipped by the server: rejected", function()
    local v = assert(verify.edits(fake_client{}, "Parcels", entries(), { completed = true }))
    assert.equal("skipped", v.a.code)
  end)

  it("after a completed request an update of a feature the server no longer holds was refused: rejected (F1)",
    function()
      local base = { attributes = { GlobalID = UPD, NAME = "old" }, geometry = { x = 1, y = 2 } }
      local v = assert(verify.edits(fake_client{}, "Parcels", entries(base), { completed = true }))
      assert.equal("missing", v.u.code)
      assert.is_nil(v.u.conflict)
      -- after a lost answer it stays a conflict: never sent again over the delete
      v = assert(verify.edits(fake_client{}, "Parcels", entries(base)))
      assert.is_true(v.u.conflict)
    end)

  it("finds the GlobalID field whatever the case the server spells it in", function()
    local c = fake_client{ [ADD] = { attributes = { GLOBALID = ADD, OBJECTID = 3 } } }
    local v = assert(verify.edits(c, "Parcels", { entries()[1] }))
    assert.equal("applied", v.a)
  end)

  it("a query that fails resolves nothing", function()
    local v, err = verify.edits(fake_client({}, true), "Parcels", entries())
    assert.is_nil(v)
    assert.equal("network", err.kind)
  end)

  it("asks in batches of 100", function()
    local list = {}
    for i = 1, 250 do
      list[i] = { key = i, layer = 0, op = "add", globalId = ("{%08X-0000-4000-8000-000000000000}"):format(i) }
    end
    local c = fake_client{}
    assert(verify.edits(c, "Parcels", list))
    assert.equal(3, #c.posted)
  end)
end)
