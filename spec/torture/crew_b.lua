-- Replica B, the other crew: a client:sync state file in the torture's own
-- process (never killed). It edits features replica A also edits, between
-- A's interrupted sync and A's next one, and downloads after every run;
-- every change it receives goes to the ledger.
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local helper = require "spec.helper"
local reported = require "spec.torture.reported"

local M = {}

M.REPLICA_ID = "{5E1A0C2B-2222-4A5B-9C8D-000000000002}"

local Crew = {}
Crew.__index = Crew

--- B's state file in `dir`: the example world's perReplica replica, or the
-- one `state` describes (a replica created for the mode: its state fields).
-- `late_window`: B's syncs' (the mode's, as A's: B's requests pass the same
-- gateway, and an edit of B's whose answer is lost is held as long).
function M.new(dir, ledger, state, late_window)
  local path = dir .. "/crew-b.json"
  helper.write_file(path, json.encode(state or { service = "Parcels", replicaID = M.REPLICA_ID,
                                                  model = "perReplica", replicaServerGen = 1 }))
  return setmetatable({ path = path, ledger = ledger, late_window = late_window }, Crew)
end

--- One sync of B, with `edits` (an edits builder) or none; retried while
-- the emulator restarts (or a gateway lost the answer), the edits handed
-- over again until `taken(journal text)` says B's journal holds them.
-- Returns the result and whether a try failed first. Raises when it never
-- succeeds.
function Crew:sync(url, edits, taken)
  local last
  for _ = 1, 40 do
    local c = geoservices.client{ url = url, token = "alice-token", timeout = 30 }
    local received = {}
    local r, err = c:sync(self.path, edits, { lock_timeout = 30, timeout = 60, late_window = self.late_window,
      on_change = function(_, kind, record)
        self.ledger:received_change(kind, record)
        local a = type(record) == "table" and type(record.attributes) == "table" and record.attributes or {}
        received[#received + 1] = ("%s:%s=%s"):format(kind, tostring(a.GlobalID or record), tostring(a.OWNER))
      end })
    c:close()
    self:trace(r, err, received)
    -- what B's user is told: an edit of B's held back (in conflict, rejected) is not B's final value
    self.ledger:report(reported.of(r or err), "b")
    if r then return r, last ~= nil end
    last = err
    -- an interrupted attempt keeps its edits in B's journal; a sync that failed before it took
    -- them (the emulator restarting, say) did not: they are handed over again
    if edits and taken and taken(helper.read_all(self.path .. ".journal") or "") then edits = nil end
    helper.sleep(0.2)
  end
  error("replica B could not synchronize: " .. tostring(last and last.message))
end

-- TORTURE_TRACE=<file> in the environment: after each of B's syncs, what it
-- received, how it ended and B's journal are appended to <file>.b.
function Crew:trace(r, err, received)
  local path = os.getenv("TORTURE_TRACE")
  if not path then return end
  local f = io.open(path .. ".b", "a")
  f:write(("== B sync %s, received %s\n%s\n"):format(r and "ok" or ("failed: " .. tostring(err and err.message)),
    table.concat(received, " "), helper.read_all(self.path .. ".journal") or "(no journal)"))
  f:close()
end

--- Whether B's journal still holds an attempt (a lost answer's edits, held).
function Crew:held()
  return helper.read_all(self.path .. ".journal") ~= nil
end

--- B's last sync: again a second apart while its journal holds edits, at
-- most 30 times (as A's, scenario.settle). Returns whether nothing is held.
function Crew:settle(url)
  self:sync(url)
  for _ = 1, 30 do
    if not self:held() then return true end
    helper.sleep(1)
    self:sync(url)
  end
  return not self:held()
end

--- B sets OWNER of feature `gid` to `value`.
function Crew:update(url, gid, value, run)
  local e = geoservices.edits()
  e:update(0, { attributes = { GlobalID = gid, OWNER = value } })
  local entry = self.ledger:record("b", "update", gid, value, run)
  local r, retried = self:sync(url, e, function(journal) return journal:find(value, 1, true) ~= nil end)
  entry.lost_answer = retried -- its request may still run late on the server
  return r
end

return M
