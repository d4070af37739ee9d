-- The torture's mutation check (spec/sync/torture_spec.lua, `run.lua` with
-- TORTURE_FORGET_JOURNAL=1): a journal that forgets. It wraps the journal
-- of the attempt engine (geoservices.sync.attempt; given to client:sync and
-- store:sync as `opts.journal`) and drops each attempt as its request
-- leaves, as if nothing had been journaled: an edit whose answer is lost
-- then goes again blindly, and the torture must count it.
local M = {}

--- Whether the torture child runs with a forgetting journal.
function M.enabled()
  return os.getenv("TORTURE_FORGET_JOURNAL") == "1"
end

--- Wraps a journal: its `begin` makes the attempt durable and at once
-- forgets it (the journal's own `abandon`: its edits back where they came
-- from, as if the request had never left).
function M.wrap(journal)
  local forgetting = {}
  function forgetting.begin(self, fields)
    local ok, err = journal.begin(self, fields)
    if not ok then return nil, err end
    self:abandon()
    return true
  end
  return setmetatable(forgetting, { __index = journal })
end

--- The `journal` option of a child's sync: the wrapper, or nil.
function M.option()
  return M.enabled() and M.wrap or nil
end

return M
