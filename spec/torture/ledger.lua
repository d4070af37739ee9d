-- The torture's ledger: every edit the users made (replica A's adds,
-- updates and deletes, replica B's updates of features A also edits), in
-- the order they were made, what the syncs reported to their callers, and
-- what replica B downloaded. `analyse` then reads the server's own change
-- log (GET /_emulator/changelog: every applied edit and every refused
-- attempt, with the attributes sent) and counts what went wrong:
--
--   lost         an edit that never reached the server and was not reported
--                to the user (rejected, in conflict, overwritten), nor folded
--   folded       (fails nothing) an edit the store joined to another edit of
--                its user before the server saw either, as its capture joins
--                unsent edits of one feature: an edit made while its
--                feature's add was in an attempt of unknown outcome follows
--                it, and when that add goes again (the server did not show
--                it) the two go as one: an update then reaches the server in
--                its feature's add (an applied add of A carries its value),
--                an add and a delete of the feature go as nothing (no
--                attempt of either in the change log); an update held so
--                and the next run's edit of its feature go as that edit
--                (no attempt of the first, the later applied); in a mode
--                whose late window holds a lost answer's edits over several
--                runs, a later run's (`fold_runs`)
--   duplicated   an add whose GlobalID reached the server more than once
--                (refused attempts included: the server refusing a duplicate
--                does not make sending it right)
--   re-applied   an update (known by its unique value) applied more than once
--   false conflicts  an edit reported in conflict though no other replica
--                edited its feature after it: not delivered, for no reason
--   raced        (no failure) an update whose feature B deleted right before
--                A's request ran (scenario.refuse_ahead), refused by the
--                server and reported to A: the real refusal exercised
--   false rejections  an edit reported rejected (failed) that the server
--                did not refuse for itself: only an update of a feature B
--                deleted first is refused (scenario.refuse_ahead), A never
--                edits what it deleted
--   stale        an update applied after another replica's newer edit of the
--                same feature: the newer value overwritten by an older one
--                (not counted: the first application of a request that had
--                left A before B's edit, an async job importing late)
--   downloaded twice  a change replica B received more than once
--   wrong values the final value of a feature on the server (and in the
--                replicas that hold data) is not the last edit made to it
-- Every unique value the torture writes goes to the OWNER field.
local M = {}

local FIELD = "OWNER"

local Ledger = {}
Ledger.__index = Ledger

local function norm(gid)
  return (tostring(gid):upper():gsub("[{}]", ""))
end
M.norm = norm

--- A ledger; `fold_runs`: how many runs later an edit of A's may still
-- carry an earlier one the server never saw (1: the next run's, an add held
-- one sync; more in a mode whose late window holds a lost answer's edits
-- over several runs).
function M.new(a_origin, b_origin, fold_runs)
  return setmetatable({
    a_origin = norm(a_origin), b_origin = norm(b_origin), fold_runs = fold_runs or 1,
    action = 0,
    edits = {},      -- {who = "a"|"b", op =, gid =, value =, action =, run =}
    reports = {},    -- "op|gid" -> list of {action =, how =}
    received = {},   -- "kind|gid|value" -> count (replica B's downloads)
    b_view = {},     -- gid -> B's value (false: deleted)
  }, Ledger)
end

function Ledger:record(who, op, gid, value, run)
  self.action = self.action + 1
  local e = { who = who, op = op, gid = norm(gid), value = value, action = self.action, run = run }
  self.edits[#self.edits + 1] = e
  if who == "b" then self.b_view[e.gid] = op ~= "delete" and value or false end
  return e
end

--- What a sync of replica `who` ("a", the default, or "b") told its caller
-- (spec/torture/reported.lua's list).
function Ledger:report(list, who)
  for _, r in ipairs(list or {}) do
    local key = ("%s|%s"):format(tostring(r.op), norm(r.globalId))
    local l = self.reports[key] or {}
    l[#l + 1] = { action = self.action, how = r.how, value = r.value, who = who or "a" }
    self.reports[key] = l
  end
end

--- A change replica B downloaded (its on_change).
function Ledger:received_change(kind, record)
  local gid, value
  if kind == "delete" then
    gid = type(record) == "table" and (record.globalId or record.GlobalID) or record
  elseif type(record) == "table" and type(record.attributes) == "table" then
    gid, value = record.attributes.GlobalID, record.attributes[FIELD]
  end
  if type(gid) ~= "string" then return end
  local key = ("%s|%s|%s"):format(kind, norm(gid), tostring(value))
  self.received[key] = (self.received[key] or 0) + 1
  self.b_view[norm(gid)] = kind ~= "delete" and value or false
end

-- Whether A's user made another edit of `e`'s kind and feature after it, by `upto` (an action).
function Ledger:newer_of_its_kind(e, upto)
  for _, o in ipairs(self.edits) do
    if o.who == e.who and o.op == e.op and o.gid == e.gid and o.action > e.action and o.action <= upto then
      return true
    end
  end
  return false
end

-- How the user was told about an edit, if at all. A report that names no
-- value (client:sync's failed_edits carry none) tells of the latest edit
-- of its kind and feature made by then: the run's own edit, not an
-- earlier update of that feature the server applied (counted a false
-- rejection before, when a later update of it was refused).
function Ledger:reported_how(e)
  for _, r in ipairs(self.reports[("%s|%s"):format(e.op, e.gid)] or {}) do
    if r.action >= e.action and r.who == e.who then
      if r.value ~= nil and e.value ~= nil then
        if r.value == e.value then return r.how end
      elseif not self:newer_of_its_kind(e, r.action) then
        return r.how
      end
    end
  end
  return nil
end

-- Whether replica B edited the feature of `e` after it, or may have: an edit of B's whose answer
-- was lost may reach the server late, after `e` was made (the server ran B's request then).
function Ledger:edited_later_by_b(e)
  for _, b in ipairs(self.edits) do
    if b.who == "b" and b.gid == e.gid and (b.action > e.action or b.lost_answer) then return true end
  end
  return false
end


-- The change log's feature entries by GlobalID.
local function entries_by_gid(changelog)
  local by = {}
  for _, entry in ipairs(changelog.entries) do
    if (entry.target == nil or entry.target == "features") and type(entry.globalId) == "string" then
      local gid = norm(entry.globalId)
      local l = by[gid] or {}
      l[#l + 1] = entry
      by[gid] = l
    end
  end
  return by
end

local function value_of(entry)
  return type(entry.attributes) == "table" and entry.attributes[FIELD] or nil
end

-- What was made, told and applied of the feature `gid`, under a failure, to trace it.
function Ledger:trace_feature(t, gid, by_gid)
  for _, e in ipairs(self.edits) do
    if e.gid == gid then
      t.problem("  made: %s %s %s (run %d)%s%s%s", e.who, e.op, tostring(e.value or ""), e.run,
        e.left_before_b and ", its request left before B's edit" or "",
        e.lost_answer and ", its answer lost" or "",
        self:reported_how(e) and (", told: " .. self:reported_how(e)) or "")
    end
  end
  for _, entry in ipairs(by_gid[gid] or {}) do
    t.problem("  the server's change log of it: gen %s %s%s origin %s%s", tostring(entry.gen),
      tostring(entry.op), value_of(entry) and (" " .. value_of(entry)) or "", tostring(entry.origin),
      entry.refused and " (refused)" or "")
  end
end

-- The entries of one edit: its applications, and the attempts made after
-- its first application (refused or not: a duplicate add, an update or a
-- delete sent again). Attempts refused before it was ever applied (a
-- request rolled back because of another edit) are no duplicates.
local function attempts_of(e, by_gid, origin)
  local applied, again = {}, {}
  for _, entry in ipairs(by_gid[e.gid] or {}) do
    local same = entry.op == e.op and (entry.origin == nil or norm(entry.origin) == origin)
      and (e.op ~= "update" or value_of(entry) == e.value)
    if same then
      if applied[1] then again[#again + 1] = entry end
      if not entry.refused then applied[#applied + 1] = entry end
    end
  end
  return again, applied
end

local function refused_count(list)
  local n = 0
  for _, entry in ipairs(list) do
    if entry.refused then n = n + 1 end
  end
  return n
end

-- How the store folded an edit of A the server never saw into another edit
-- of A's user (see "folded" above), or nil.
function Ledger:folded(e, by_gid, applied_of)
  local entries = by_gid[e.gid] or {}
  -- whether an applied add of A carries `value`
  local function in_add(value)
    for _, entry in ipairs(entries) do
      if entry.op == "add" and not entry.refused and value_of(entry) == value
        and (entry.origin == nil or norm(entry.origin) == self.a_origin) then
        return true
      end
    end
    return false
  end
  if e.op == "update" then
    if in_add(e.value) then return "in its feature's add" end
    if #entries == 0 then
      -- the feature never reached the server: its add, this update and its delete went as nothing
      local added, deleted
      for _, other in ipairs(self.edits) do
        if other.who == "a" and other.gid == e.gid then
          if other.op == "add" and other.action < e.action then added = other end
          if other.op == "delete" and other.action > e.action then deleted = deleted or other end
        end
      end
      if added and deleted then
        return ("with its feature's add (run %d) and delete (run %d): none went"):format(added.run, deleted.run)
      end
    end
    local seen = false
    for _, entry in ipairs(entries) do seen = seen or value_of(entry) == e.value end
    for _, other in ipairs(seen and {} or self.edits) do
      if other.who == "a" and other.gid == e.gid and other.run > e.run
        and other.run <= e.run + self.fold_runs and other.op ~= "add"
        and ((applied_of[other] and #applied_of[other] > 0) or (other.op == "update" and in_add(other.value))) then
        return ("in the %s of its feature made in run %d (%s)"):format(other.op, other.run, tostring(other.value or ""))
      end
    end
    -- joined to a later update of its user's that the user was told did not go (in conflict,
    -- rejected): the one edit the two made, told
    for _, other in ipairs(seen and {} or self.edits) do
      if other.who == "a" and other.gid == e.gid and other.op == "update" and other.action > e.action
        and other.run <= e.run + self.fold_runs and #(applied_of[other] or {}) == 0 and self:reported_how(other) then
        return ("in the update of its feature made in run %d (%s), told: %s"):format(other.run,
          tostring(other.value), self:reported_how(other))
      end
    end
    return nil
  end
  if #entries > 0 or (e.op ~= "add" and e.op ~= "delete") then return nil end
  for _, other in ipairs(self.edits) do
    if other.who == "a" and other.gid == e.gid
      and ((e.op == "add" and other.op == "delete" and other.action > e.action)
        or (e.op == "delete" and other.op == "add" and other.action < e.action)) then
      return "with the " .. other.op .. " of its feature (run " .. other.run .. "): neither went"
    end
  end
  return nil
end

-- One edit of A against its entries: lost, folded, reported, duplicated, re-applied.
function Ledger:count_edit(t, e, again, applied, by_gid)
  t[e.op .. "s"] = t[e.op .. "s"] + 1
  local how = self:reported_how(e)
  if how then t.reported = t.reported + 1 end
  if (how == "failed_edits" or how == "rejected") and not e.expect_rejection then
    t.false_rejections = t.false_rejections + 1
    t.problem("false rejection: %s %s = %s (run %d) reported rejected, though the server refuses nothing here "
      .. "(applied %d times)", e.op, e.gid, tostring(e.value), e.run, #applied)
    for _, entry in ipairs(by_gid[e.gid] or {}) do
      t.problem("  the server's change log of it: gen %s %s%s origin %s%s", tostring(entry.gen),
        tostring(entry.op), value_of(entry) and (" " .. value_of(entry)) or "", tostring(entry.origin),
        entry.refused and " (refused)" or "")
    end
  end
  if e.expect_rejection and #applied == 0 and how then
    t.raced = t.raced + 1 -- B's delete raced it: refused by the server, and A's user told
  end
  if how == "conflicts" then
    t.conflicts = t.conflicts + 1
    if not self:edited_later_by_b(e) then
      t.false_conflicts = t.false_conflicts + 1
      t.problem("false conflict: %s %s = %s (run %d) reported in conflict though no other replica edited it "
        .. "after (applied %d times)", e.op, e.gid, tostring(e.value), e.run, #applied)
      self:trace_feature(t, e.gid, by_gid)
    end
  end
  local folded = #applied == 0 and not how and not t.degraded and self:folded(e, by_gid, self.applied_of)
  if folded then
    t.folded = t.folded + 1
    t.problem("note: folded: %s %s (run %d%s) %s", e.op, e.gid, e.run, e.value and (", " .. e.value) or "", folded)
  elseif #applied == 0 and not how and not (e.op == "update" and t.degraded) then
    t.lost = t.lost + 1
    t.problem("lost: %s %s (run %d%s)", e.op, e.gid, e.run, e.value and (", " .. e.value) or "")
    self:trace_feature(t, e.gid, by_gid)
  end
  if e.op == "add" and #again > 0 then
    t.duplicated = t.duplicated + #again
    t.problem("duplicated add: %s (run %d) sent again %d times after it was applied (%d of them refused)", e.gid,
      e.run, #again, refused_count(again))
    for _, entry in ipairs(by_gid[e.gid] or {}) do
      t.problem("  the server's change log of it: gen %s %s%s origin %s%s", tostring(entry.gen),
        tostring(entry.op), value_of(entry) and (" " .. value_of(entry)) or "", tostring(entry.origin),
        entry.refused and " (refused)" or "")
    end
  elseif e.op == "update" then
    if #applied > 1 then
      t.reapplied = t.reapplied + #applied - 1
      t.problem("re-applied update: %s = %s (run %d) applied %d times", e.gid, e.value, e.run, #applied)
    end
    t.resent_updates = t.resent_updates + refused_count(again)
  elseif e.op == "delete" and #again > 0 then
    t.resent_deletes = t.resent_deletes + #again
  end
end

-- Stale overwrites: an update of A applied after B's newer edit of the
-- feature, unless its request had reached the server before B's edit was
-- applied (the change log's `arrived` and `at`), or it is the first
-- application of a request that had already left A before B's edit (a
-- gateway or an async job runs it late: the server's order, not a stale
-- value sent again; that order then decides the final value).
function Ledger:count_stale(t, applied_of)
  for _, a in ipairs(self.edits) do
    for _, b in ipairs(a.who == "a" and a.op == "update" and self.edits or {}) do
      local b_entry = b.who == "b" and b.gid == a.gid and b.action > a.action and applied_of[b][1]
      local b_gen = b_entry and b_entry.gen
      for i, entry in ipairs(b_gen and applied_of[a] or {}) do
        -- the server's own order: A's request (the first application of an update, or one sent
        -- again) had reached the server before B's edit was applied (the emulator's `arrived` and
        -- `at`), or had left A before B's edit was made; a gateway or a job then ran it late
        local arrived_first = type(entry.arrived) == "number" and type(b_entry.at) == "number"
          and entry.arrived < b_entry.at
        if entry.gen and entry.gen > b_gen and (arrived_first or (i == 1 and a.left_before_b)) then
          t.late_imports = t.late_imports + 1
          a.order = math.max(a.order or a.action, b.action + 0.5)
          t.problem("note: %s = %s (A, run %d) left A before B's %s (gen %s), applied after it at gen %s%s", a.gid,
            a.value, a.run, b.value, tostring(b_gen), tostring(entry.gen),
            self:reported_how(a) and (", reported to A's user as " .. self:reported_how(a)) or "")
        elseif entry.gen and entry.gen > b_gen then
          t.stale = t.stale + 1
          t.problem("stale overwrite: %s = %s (A, run %d) applied at gen %s over B's newer %s (gen %s)%s", a.gid,
            a.value, a.run, tostring(entry.gen), b.value, tostring(b_gen),
            i == 1 and ", sent after B's edit" or (", its application number %d"):format(i))
        end
      end
    end
  end
end

-- B's edits whose answer was lost (`lost_answer`, crew_b) and that the server
-- applied after a newer edit of A's: the server ran B's request late, its
-- order then decides the final value (not a stale value sent again: B's
-- journal never sends an update where the server holds another value).
function Ledger:count_late_b(t, applied_of)
  for _, b in ipairs(self.edits) do
    local b_gen = b.who == "b" and b.lost_answer and applied_of[b] and applied_of[b][1] and applied_of[b][1].gen
    for _, a in ipairs(b_gen and self.edits or {}) do
      local a_gen = a.who == "a" and a.gid == b.gid and a.action > b.action and applied_of[a][1]
        and applied_of[a][1].gen
      if a_gen and b_gen > a_gen then
        t.late_imports = t.late_imports + 1
        b.order = math.max(b.order or b.action, a.action + 0.5)
        t.problem("note: %s = %s (B, run %d, its answer lost) applied late at gen %s, after A's newer %s (gen %s)",
          b.gid, tostring(b.value), b.run, tostring(b_gen), tostring(a.value), tostring(a_gen))
      end
    end
  end
end

-- The final value of each feature: that of the last edit made to it
-- (false: deleted), leaving out the edits the user was told did not go
-- through. Returns the values and the GlobalIDs in order.
function Ledger:expected_values(applied_of)
  local expected, order = {}, {}
  local by_order = table.move(self.edits, 1, #self.edits, 1, {})
  table.sort(by_order, function(x, y) return (x.order or x.action) < (y.order or y.action) end)
  -- an update never applied that its user's later update of the feature, told not to have gone
  -- (in conflict, rejected) and never applied either, carried (a journal joins waiting updates
  -- and reports them once, with the later values): told too
  local function told_with_later(e)
    for _, o in ipairs(self.edits) do
      if o.who == e.who and o.gid == e.gid and o.op == "update" and e.op == "update" and o.action > e.action
        and #(applied_of[o] or {}) == 0 and self:reported_how(o) then
        return true
      end
    end
    return false
  end
  for _, e in ipairs(by_order) do
    if not (#applied_of[e] == 0 and (self:reported_how(e) or told_with_later(e))) then
      if expected[e.gid] == nil then order[#order + 1] = e.gid end
      if e.op == "delete" then expected[e.gid] = false else expected[e.gid] = e.value end
    end
  end
  return expected, order
end

--- Counts from the change log `changelog` ({entries =, source =}) and the
-- final values: `server` (GlobalID -> feature, the live ones) and `views`
-- (name -> function(gid) -> value or false: a replica holding data; B's
-- view, from what it downloaded, is added).
function Ledger:analyse(changelog, server, views)
  local t = { adds = 0, updates = 0, deletes = 0, b_updates = 0, lost = 0, duplicated = 0, reapplied = 0,
              stale = 0, late_imports = 0, downloaded_twice = 0, reported = 0, conflicts = 0, false_conflicts = 0,
              folded = 0, false_rejections = 0, raced = 0,
              resent_updates = 0, resent_deletes = 0, wrong = 0, problems = {} }
  function t.problem(fmt, ...) t.problems[#t.problems + 1] = fmt:format(...) end
  if changelog.source ~= "changelog" then
    t.degraded = "the emulator has no /_emulator/changelog: updates (by value), re-applied updates, stale "
      .. "overwrites and refused duplicate adds cannot be counted"
  end
  local by_gid = entries_by_gid(changelog)
  local applied_of, again_of = {}, {}
  for _, e in ipairs(self.edits) do
    again_of[e], applied_of[e] = attempts_of(e, by_gid, e.who == "a" and self.a_origin or self.b_origin)
  end
  self.applied_of = applied_of
  for _, e in ipairs(self.edits) do
    if e.who == "b" then
      t.b_updates = t.b_updates + 1
    else
      self:count_edit(t, e, again_of[e], applied_of[e], by_gid)
    end
  end
  self:count_stale(t, applied_of)
  self:count_late_b(t, applied_of)
  for key, n in pairs(self.received) do
    if n > 1 then
      t.downloaded_twice = t.downloaded_twice + n - 1
      t.problem("downloaded %d times by B: %s", n, key)
    end
  end
  local server_by_gid = {}
  for gid, f in pairs(server) do server_by_gid[norm(gid)] = f end
  views = views or {}
  views.server = function(gid) return server_by_gid[gid] and server_by_gid[gid].attributes[FIELD] or false end
  views.B = function(gid) return self.b_view[gid] or false end -- nil: B never received it
  local names = {}
  for name in pairs(views) do names[#names + 1] = name end
  table.sort(names)
  local expected, order = self:expected_values(applied_of)
  for _, gid in ipairs(order) do
    local wrong_here = false
    for _, name in ipairs(names) do
      local got = views[name](gid)
      if got ~= expected[gid] then
        t.wrong, wrong_here = t.wrong + 1, true
        t.problem("%s holds %s = %s, the last edit made was %s", name, gid, tostring(got), tostring(expected[gid]))
      end
    end
    if wrong_here then self:trace_feature(t, gid, by_gid) end
  end
  t.problem = nil
  return t
end

return M
