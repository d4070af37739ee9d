-- Reconciling a re-sent synchronization: which edits a request carried, and
-- which failures of the re-sent request prove an earlier attempt applied them.
local errors = require "geoservices.errors"
local json = require "geoservices.json"
local reconcile = require "geoservices.sync.reconcile"

local DUPLICATE = -2147217395 -- "an object with this GlobalID already exists"
local MISSING = 1019          -- "Object is missing."

local EDITS = {
  { id = 0, features = {
      adds = { { attributes = { GlobalID = "{AAAA-1}", NAME = "a" } }, { attributes = { GlobalID = "{aaaa-2}" } } },
      updates = { { attributes = { GlobalID = "{UUUU-1}" } } },
      deleteIds = { "{DDDD-1}" } },
    attachments = { adds = { { globalId = "{ATT-1}", parentGlobalId = "{AAAA-1}" } }, deleteIds = { "{ATT-9}" } } },
  { id = 3, features = { deleteIds = { "dddd-3" } } },
}

local function failed(layer, op, target, gid, code)
  return { layer = layer, op = op, target = target, globalId = gid, code = code, description = "refused" }
end

local function result_with(failures, counts)
  return { failed_edits = failures, counts = counts, succeeded = 0 }
end

describe("reconcile.sent_edits", function()
  it("is nil for a request without edits, or with empty ones", function()
    assert.is_nil(reconcile.sent_edits{ replicaID = "{R}" })
    assert.is_nil(reconcile.sent_edits{ edits = {} })
    assert.is_nil(reconcile.sent_edits{ edits = { { id = 0, features = { adds = {}, deleteIds = {} } } } })
    assert.is_nil(reconcile.sent_edits{ edits = "[]" })
    assert.is_nil(reconcile.sent_edits{ edits = 42 })
  end)

  it("counts adds, updates and deletes of features and attachments", function()
    local sent = reconcile.sent_edits{ edits = EDITS }
    assert.equal(7, sent.count) -- layer 0: 2 + 1 + 1 features, 1 + 1 attachments; layer 3: 1
    assert.is_true(sent.identified)
  end)

  it("reads the edits from a JSON string just as from a table", function()
    local from_text = reconcile.sent_edits{ edits = json.encode(EDITS) }
    assert.same(reconcile.sent_edits{ edits = EDITS }, from_text)
    assert.equal(7, from_text.count)
  end)

  it("counts a request with only updates as carrying edits", function()
    local updates = { { attributes = { GlobalID = "{U}" } } }
    local sent = reconcile.sent_edits{ edits = { { id = 1, features = { updates = updates } } } }
    assert.equal(1, sent.count)
    assert.is_true(sent.identified)
  end)

  it("is not identified when an add lacks a GlobalID (re-sending it would add it twice)", function()
    for _, add in ipairs{ { attributes = { NAME = "x" } }, { attributes = { GlobalID = "" } }, {}, "junk" } do
      local sent = reconcile.sent_edits{ edits = { { id = 0, features = { adds = { add } } } } }
      assert.is_false(sent.identified)
      assert.equal(1, sent.count)
    end
    local sent = reconcile.sent_edits{ edits = { { id = 0, attachments = { adds = { { name = "photo.jpg" } } } } } }
    assert.is_false(sent.identified)
  end)
end)

describe("reconcile.apply", function()
  local sent
  before_each(function() sent = reconcile.sent_edits{ edits = EDITS } end)

  it("moves duplicate-GlobalID failures of re-sent adds to already_applied and counts them as succeeded", function()
    local dup = failed(0, "add", "feature", "{AAAA-1}", DUPLICATE)
    local other = failed(0, "add", "feature", "{AAAA-2}", 1000)
    local result = result_with({ dup, other }, { [0] = { succeeded = 1, failed = 2 } })
    assert.equal(result, reconcile.apply(result, sent))
    assert.same({ other }, result.failed_edits)
    assert.same({ dup }, result.already_applied)
    assert.is_true(dup.already_applied)
    assert.is_nil(other.already_applied)
    assert.same({ [0] = { succeeded = 2, failed = 1 } }, result.counts)
    assert.equal(1, result.succeeded)
    assert.is_true(result.reissued)
  end)

  it("matches GlobalIDs whatever their braces and case", function()
    local result = result_with{
      failed(0, "add", "feature", "AAAA-2", DUPLICATE),             -- sent as {aaaa-2}
      failed(0, "delete", "feature", "{dddd-1}", MISSING),          -- sent as {DDDD-1}
      failed(3, "delete", "feature", "{DDDD-3}", MISSING),          -- sent as dddd-3
      failed(0, "add", "attachment", "att-1", DUPLICATE),           -- sent as {ATT-1}
      failed(0, "delete", "attachment", "{Att-9}", MISSING),        -- sent as {ATT-9}
    }
    reconcile.apply(result, sent)
    assert.same({}, result.failed_edits)
    assert.equal(5, #result.already_applied)
    assert.equal(5, result.succeeded)
  end)

  it("moves 1019 failures of re-sent deletes", function()
    local f = failed(3, "delete", "feature", "dddd-3", MISSING)
    local result = result_with({ f }, { [3] = { succeeded = 0, failed = 1 } })
    reconcile.apply(result, sent)
    assert.same({ f }, result.already_applied)
    assert.same({ [3] = { succeeded = 1, failed = 0 } }, result.counts)
  end)

  it("keeps every other failure", function()
    local keep = {
      failed(0, "add", "feature", "{NOT-SENT}", DUPLICATE),         -- an add this request did not carry
      failed(0, "add", "feature", "{AAAA-1}", MISSING),             -- the wrong code for an add
      failed(0, "delete", "feature", "{DDDD-1}", DUPLICATE),        -- the wrong code for a delete
      failed(0, "delete", "feature", "{NOT-SENT}", MISSING),        -- a delete this request did not carry
      failed(0, "update", "feature", "{UUUU-1}", DUPLICATE),        -- updates are never reconciled
      failed(5, "add", "feature", "{AAAA-1}", DUPLICATE),           -- sent to layer 0, not 5
      failed(0, "add", "attachment", "{AAAA-1}", DUPLICATE),        -- sent as a feature, not an attachment
      failed(0, "delete", "feature", "{ATT-9}", MISSING),           -- sent as an attachment delete
    }
    local copy = {}
    for i, f in ipairs(keep) do copy[i] = f end
    local result = result_with(copy, { [0] = { succeeded = 0, failed = 7 }, [5] = { succeeded = 0, failed = 1 } })
    reconcile.apply(result, sent)
    assert.same(keep, result.failed_edits)
    assert.same({}, result.already_applied)
    assert.equal(0, result.succeeded)
    assert.same({ [0] = { succeeded = 0, failed = 7 }, [5] = { succeeded = 0, failed = 1 } }, result.counts)
    assert.is_true(result.reissued)
  end)

  it("works on a result without counts or failures", function()
    local result = reconcile.apply({ failed_edits = { failed(0, "add", "feature", "{AAAA-1}", DUPLICATE) } }, sent)
    assert.equal(1, result.succeeded)
    assert.equal(1, #result.already_applied)
    result = reconcile.apply({}, sent)
    assert.same({}, result.failed_edits)
    assert.same({}, result.already_applied)
  end)
end)

describe("reconcile errors", function()
  it("ambiguous_error marks the error and says how to re-send, once", function()
    local err = errors.new("network", "connection reset", { code = "recv" })
    assert.equal(err, reconcile.ambiguous_error(err))
    assert.is_true(err.ambiguous)
    assert.matches("^connection reset; the edits may have been applied: ", err.message)
    assert.matches("opts.resend = true", err.message, 1, true)
    local once = err.message
    reconcile.ambiguous_error(err)
    assert.equal(once, err.message)
  end)

  it("applied_error marks the edits applied and says the replica state is unchanged, once", function()
    local err = errors.new("protocol", "invalid JSON response")
    assert.equal(err, reconcile.applied_error(err))
    assert.is_true(err.edits_applied)
    assert.is_nil(err.ambiguous)
    assert.matches("^invalid JSON response; the server applied the edits but the result was not received", err.message)
    assert.matches("replica state is unchanged", err.message, 1, true)
    local once = err.message
    reconcile.applied_error(err)
    assert.equal(once, err.message)
  end)

  it("adds no second re-send note to an error that already has one", function()
    local err = reconcile.ambiguous_error(errors.new("http", "HTTP 502", { status = 502 }))
    local note = err.message
    reconcile.applied_error(err)
    assert.is_true(err.edits_applied)
    assert.equal(note, err.message)
  end)
end)
