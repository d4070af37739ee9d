-- The crash torture's checker (spec/torture/ledger.lua) on change logs
-- written here: what it counts lost, and what it knows the store folds.
-- The store joins the edits of one feature its user made before the
-- server saw the first (spec/store/fold_spec.lua): an update made while
-- its feature's add was in an attempt of unknown outcome reaches the server
-- in that add, and an add and a delete of such a feature go as nothing.
-- Under load the store torture met exactly that (an add held one sync,
-- geoservices.sync.attempt's requeue rule, then updated or deleted by the
-- next run) and counted a lost edit that the server's change log shows
-- delivered: the checker's false alarm, not a loss.
local ledger_mod = require "spec.torture.ledger"

local A, B = "{AAAAAAAA-0000-4000-8000-00000000000A}", "{BBBBBBBB-0000-4000-8000-00000000000B}"
local X = "{11111111-2222-4333-8444-555555555555}"

-- A ledger of A's edits of feature X: `edits` {{op, value[, run]}, ...} in order (runs 1, 2, ... unless given);
-- `fold_runs` as ledger.new's.
local function ledger_of(edits, fold_runs)
  local l = ledger_mod.new(A, B, fold_runs)
  for i, e in ipairs(edits) do l:record("a", e[1], X, e[2], e[3] or i) end
  return l
end

local function entry(op, value, gen, extra)
  local e = { gen = gen, layer = 0, op = op, globalId = X, origin = A,
              attributes = value and { GlobalID = X, OWNER = value } or nil }
  for k, v in pairs(extra or {}) do e[k] = v end
  return e
end

-- The tally of `l` against a change log of `entries`, the server (and replica B, which downloaded
-- it) holding X with `value` (nil: not at all).
local function analyse(l, entries, value)
  local server = {}
  if value then
    server[X] = { attributes = { GlobalID = X, OWNER = value } }
    l:received_change("add", server[X])
  end
  return l:analyse({ entries = entries, source = "changelog" }, server, {})
end

describe("torture ledger", function()
  it("a refusal naming no value tells of the run's own update, not of an earlier one applied", function()
    -- runs 1-3: the add, two updates applied; run 4's update refused (B deleted X first) and reported
    -- rejected by client:sync, whose failed_edits carry no value
    local l = ledger_of{ { "add", "v-add" }, { "update", "u1" }, { "update", "u2" } }
    local refused = l:record("a", "update", X, "u3", 4)
    refused.expect_rejection = true
    l:report{ { op = "update", globalId = X, how = "failed_edits" } }
    local t = analyse(l, { entry("add", "v-add", 2), entry("update", "u1", 4), entry("update", "u2", 6),
                           entry("delete", nil, 8, { origin = B }), entry("update", "u3", 8, { refused = true }) }, nil)
    assert.same({ false_rejections = 0, raced = 1, lost = 0 },
      { false_rejections = t.false_rejections, raced = t.raced, lost = t.lost })
  end)

  it("an update that reached the server in its feature's add is folded, not lost", function()
    local t = analyse(ledger_of{ { "add", "v-add" }, { "update", "v-upd" } }, { entry("add", "v-upd", 3) }, "v-upd")
    assert.same({ lost = 0, folded = 1, wrong = 0, duplicated = 0 },
      { lost = t.lost, folded = t.folded, wrong = t.wrong, duplicated = t.duplicated })
  end)

  it("an add and a delete of a feature the server never saw are folded, not lost", function()
    local t = analyse(ledger_of{ { "add", "v-add" }, { "delete" } }, {}, nil)
    assert.same({ lost = 0, folded = 2, wrong = 0 }, { lost = t.lost, folded = t.folded, wrong = t.wrong })
  end)

  it("an update the server never saw, then the next run's update of its feature, applied: folded, not lost",
    function()
      local t = analyse(ledger_of{ { "add", "v-add" }, { "update", "u1" }, { "update", "u2" } },
        { entry("add", "v-add", 3), entry("update", "u2", 5) }, "u2")
      assert.same({ lost = 0, folded = 1, wrong = 0 }, { lost = t.lost, folded = t.folded, wrong = t.wrong })
    end)

  it("updates of three runs made while their feature's add was held in a late window go as the last: folded",
    function()
      -- the late window (geoservices.sync.attempt) holds the add over several runs
      local t = analyse(ledger_of({ { "add", "v-add" }, { "update", "u1" }, { "update", "u2" }, { "update", "u3" } },
        6), { entry("add", "u3", 9) }, "u3")
      assert.same({ lost = 0, folded = 3, wrong = 0 }, { lost = t.lost, folded = t.folded, wrong = t.wrong })
      -- with a hold of one sync (fold_runs 1) the run-2 update would have gone by run 3: lost
      local one = analyse(ledger_of{ { "add", "v-add" }, { "update", "u1" }, { "update", "u2" }, { "update", "u3" } },
        { entry("add", "u3", 9) }, "u3")
      assert.equal(1, one.lost)
    end)

  it("an update between its feature's add and delete, none of which reached the server: folded, not lost",
    function()
      local t = analyse(ledger_of{ { "add", "v-add" }, { "update", "u1" }, { "delete" } }, {}, nil)
      assert.same({ lost = 0, folded = 3, wrong = 0 }, { lost = t.lost, folded = t.folded, wrong = t.wrong })
      -- without the delete the update is lost (and so is the add)
      local kept = analyse(ledger_of{ { "add", "v-add" }, { "update", "u1" } }, {}, nil)
      assert.equal(2, kept.lost)
    end)

  it("B's update whose answer was lost, applied by the server after A's newer update: the server's order decides",
    function()
      local function run(lost_answer)
        local l = ledger_of{ { "add", "v-add" } }
        l:record("b", "update", X, "b1", 2).lost_answer = lost_answer
        l:record("a", "update", X, "u3", 3)
        return analyse(l, { entry("add", "v-add", 2), entry("update", "u3", 5),
                            entry("update", "b1", 6, { origin = B }) }, "b1")
      end
      local late = run(true)
      assert.same({ wrong = 0, late = 1 }, { wrong = late.wrong, late = late.late_imports })
      -- an answer B received: the server ran B's edit after A's newer one was applied, wrong final
      -- values (the server's and B's)
      local answered = run(false)
      assert.same({ wrong = 2, late = 0 }, { wrong = answered.wrong, late = answered.late_imports })
    end)

  it("a conflict with B's edit made before A's, whose answer was lost (it may land after A's): no false conflict",
    function()
      local function run(lost_answer)
        local l = ledger_of{ { "add", "v-add" } }
        l:record("b", "update", X, "b1", 2).lost_answer = lost_answer
        l:record("a", "update", X, "u3", 3)
        l:report{ { op = "update", globalId = X, how = "conflicts", value = "u3" } }
        return analyse(l, { entry("add", "v-add", 2), entry("update", "b1", 6, { origin = B }) }, "b1")
      end
      assert.equal(0, run(true).false_conflicts)
      assert.equal(1, run(false).false_conflicts) -- B's answer came: B's edit was there before A's
    end)

  it("an update joined to its user's later update, reported in conflict: folded, not lost", function()
    local l = ledger_of{ { "add", "v-add" }, { "update", "u1" }, { "update", "u2" } }
    l:record("b", "update", X, "b1", 3)
    l:report{ { op = "update", globalId = X, how = "conflicts", value = "u2" } }
    local t = analyse(l, { entry("add", "v-add", 2), entry("update", "b1", 5, { origin = B }) }, "b1")
    assert.same({ lost = 0, folded = 1 }, { lost = t.lost, folded = t.folded })
    -- not told: the earlier one is lost
    local untold = ledger_of{ { "add", "v-add" }, { "update", "u1" }, { "update", "u2" } }
    untold:record("b", "update", X, "b1", 3)
    t = analyse(untold, { entry("add", "v-add", 2), entry("update", "b1", 5, { origin = B }) }, "b1")
    assert.equal(2, t.lost)
  end)

  it("B's update B was told is in conflict is not the final value; A's report never covers B's edit", function()
    local function run(who)
      local l = ledger_of{ { "add", "v-add" }, { "update", "u2" } }
      l:record("b", "update", X, "b1", 3)
      l:report({ { op = "update", globalId = X, how = "conflicts", value = "b1" } }, who)
      return analyse(l, { entry("add", "v-add", 2), entry("update", "u2", 4) }, "u2")
    end
    assert.equal(0, run("b").wrong)
    assert.equal(2, run("a").wrong) -- told to A: B's edit still counts (the server and B hold u2, not b1)
  end)

  it("A's update whose request reached the server before B's edit was applied, run late: no stale overwrite",
    function()
      local function run(arrived)
        local l = ledger_of{ { "add", "v-add" }, { "update", "u2" } }
        l:record("b", "update", X, "b1", 3)
        return analyse(l, { entry("add", "v-add", 2), entry("update", "b1", 5, { origin = B, arrived = 10, at = 10 }),
                            entry("update", "u2", 6, { arrived = arrived, at = 12 }) }, "u2")
      end
      local late = run(9)
      assert.same({ stale = 0, late = 1, wrong = 0 },
        { stale = late.stale, late = late.late_imports, wrong = late.wrong })
      local stale = run(11) -- sent after B's edit was applied: a stale value over B's
      assert.same({ stale = 1, late = 0 }, { stale = stale.stale, late = stale.late_imports })
    end)

  it("B's updates joined and reported once with the later values: none of them is the final value", function()
    local l = ledger_of{ { "add", "v-add" }, { "update", "u2" } }
    l:record("b", "update", X, "b1", 3)
    l:record("b", "update", X, "b2", 4)
    l:report({ { op = "update", globalId = X, how = "conflicts", value = "b2" } }, "b")
    local t = analyse(l, { entry("add", "v-add", 2), entry("update", "u2", 5) }, "u2")
    assert.equal(0, t.wrong) -- b1 went with b2 (one edit, told), the server and B hold u2
  end)

  it("two updates made while their feature's add was held both go in that add: folded, not lost", function()
    local t = analyse(ledger_of{ { "add", "v-add" }, { "update", "u1" }, { "update", "u2" } },
      { entry("add", "u2", 5) }, "u2")
    assert.same({ lost = 0, folded = 2, wrong = 0 }, { lost = t.lost, folded = t.folded, wrong = t.wrong })
  end)

  it("an update the server never saw is lost when its user's later edit of the feature came runs later, or "
    .. "when the server saw it", function()
      local later = analyse(ledger_of{ { "add", "v-add" }, { "update", "u1" }, { "update", "u2", 4 } },
        { entry("add", "v-add", 3), entry("update", "u2", 5) }, "u2")
      assert.same({ lost = 1, folded = 0 }, { lost = later.lost, folded = later.folded })
      local refused = analyse(ledger_of{ { "add", "v-add" }, { "update", "u1" }, { "update", "u2" } },
        { entry("add", "v-add", 3), entry("update", "u1", 4, { refused = true }), entry("update", "u2", 5) }, "u2")
      assert.same({ lost = 1, folded = 0 }, { lost = refused.lost, folded = refused.folded })
    end)

  it("an update no add or update of A carries is lost, with the feature's change log", function()
    local t = analyse(ledger_of{ { "add", "v-add" }, { "update", "v-upd" } }, { entry("add", "v-add", 3) }, "v-add")
    assert.equal(1, t.lost)
    assert.equal(0, t.folded)
    assert.equal(2, t.wrong) -- the server and B hold v-add
    assert.truthy(table.concat(t.problems, "\n"):find("lost: update", 1, true))
    assert.truthy(table.concat(t.problems, "\n"):find("gen 3 add v-add", 1, true))
  end)

  it("an update carried by an add of another replica, or by a refused add, is lost", function()
    local other = analyse(ledger_of{ { "add", "v-add" }, { "update", "v-upd" } },
      { entry("add", "v-add", 3), entry("add", "v-upd", 4, { origin = B, refused = true }) }, "v-add")
    assert.equal(1, other.lost)
    local refused = analyse(ledger_of{ { "add", "v-add" }, { "update", "v-upd" } },
      { entry("add", "v-add", 3), entry("add", "v-upd", 4, { refused = true }) }, "v-add")
    assert.equal(1, refused.lost)
  end)

  it("an add the server never saw is lost when no delete of its user followed it, and so is such a delete",
    function()
      assert.equal(1, analyse(ledger_of{ { "add", "v-add" } }, {}, nil).lost)
      local t = analyse(ledger_of{ { "add", "v-add" }, { "delete" } }, { entry("add", "v-add", 3) }, "v-add")
      assert.equal(1, t.lost) -- the delete: the add reached the server, the delete did not
      assert.equal(0, t.folded)
    end)
end)
