-- The oracle of the conflict matrix (issue 36): what the server and each
-- replica must hold, and which conflicts each replica must list, when
-- replicas edit one feature and sync in a given order under a policy
-- (`manual`, the default; `server`; `local`). Written apart from the library (it shares no code with
-- geoservices.sync.merge or geoservices.store.sync.rebase): a feature is a
-- table of three plain values (OWNER, APN, and the point as "x y"), a
-- replica's edit keeps the values it started from, and a sync of it does
-- what the README promises:
--
-- * a delete: gone on the server already -> nothing; the server changed
--   something since -> conflict "delete_update", held; else deleted;
-- * an update or a move: the server deleted the feature -> conflict
--   "update_delete", held; a field both changed to different values ->
--   conflict ("move" when the point, else "field"), held whole under
--   manual; under server the fields only this replica changed go, under
--   local every field it changed; without a conflict the fields this
--   replica changed go onto the server's (under local a delete of a
--   feature the server changed goes too, still listed as a conflict);
-- * then the replica holds the server's version (the download).
--
-- An add is its replica's own feature: it reaches the server at that
-- replica's sync and every replica after the last round.
local model = {}

local FIELDS = { "OWNER", "APN", "POINT" }
model.FIELDS = FIELDS

local function copy(f)
  if not f then return nil end
  local c = {}
  for k, v in pairs(f) do c[k] = v end
  return c
end

--- Runs one case through a schedule.
-- @tparam table case `initial` (the feature's values), `ops[r]` (`{kind = "update"|"move"|"delete"|"add"
--   |"none", field =, value =}`), `replicas`
-- @tparam table schedule events `{ "P"|"E"|"S", r }`
-- @treturn table `server` (values, or false when deleted), `replica[r]` (what r ends with), `conflicts[r]`
--   (kinds, in order), `performed[r]` (whether r could make its edit; "unchanged" when it set the value
--   its copy held already: no edit), `adds[r]` (values of its add),
--   `superseded[r]` (r's applied value was replaced by an edit made knowing it)
function model.run(case, schedule, policy)
  policy = policy or "manual"
  local server = copy(case.initial)
  local rep, base, pending, conflicts, performed, adds, add_sent = {}, {}, {}, {}, {}, {}, {}
  -- who set each field of the server's version, and whose value a later edit replaced knowing it
  -- (its replica held that value when it made the edit): not lost, superseded
  local author, superseded = {}, {}
  for r = 1, case.replicas do
    rep[r], conflicts[r] = copy(server), {}
  end
  local function sync(r)
    local op = pending[r]
    if op == "add" then add_sent[r] = true end
    if op == "delete" then
      if server then
        local changed = false
        for _, f in ipairs(FIELDS) do
          if server[f] ~= base[r][f] then changed = true end
        end
        if changed then
          conflicts[r][#conflicts[r] + 1] = "delete_update"
        end
        if not changed or policy == "local" then -- local: ours goes over their change
          for _, f in ipairs(FIELDS) do
            if author[f] then superseded[author[f]] = true end
          end
          server = nil
        end
      end
    elseif op == "update" then
      if not server then
        conflicts[r][#conflicts[r] + 1] = "update_delete"
      else
        local clash
        for _, f in ipairs(FIELDS) do
          local mine, theirs = rep[r][f] ~= base[r][f], server[f] ~= base[r][f]
          if mine and theirs and rep[r][f] ~= server[f] then
            clash = (clash == "move" or f == "POINT") and "move" or "field"
          end
        end
        if clash then conflicts[r][#conflicts[r] + 1] = clash end
        if not clash then
          for _, f in ipairs(FIELDS) do
            if rep[r][f] ~= base[r][f] then
              if author[f] and author[f] ~= r then superseded[author[f]] = true end -- its value was in r's base
              server[f], author[f] = rep[r][f], r
            end
          end
        elseif policy ~= "manual" then
          for _, f in ipairs(FIELDS) do
            local mine, theirs = rep[r][f] ~= base[r][f], server[f] ~= base[r][f]
            -- server: a field both changed keeps the server's value; local: ours goes over it
            if mine and (policy == "local" or not theirs or rep[r][f] == server[f]) then
              if author[f] and author[f] ~= r and not theirs then superseded[author[f]] = true end -- in r's base
              server[f], author[f] = rep[r][f], r
            end
          end
        end
      end
    end
    pending[r] = nil
    rep[r] = copy(server)
  end
  for _, ev in ipairs(schedule) do
    local what, r = ev[1], ev[2]
    if r <= case.replicas then
      if what == "E" then
        local op = case.ops[r]
        if op.kind == "add" then
          adds[r], pending[r], performed[r] = op.value, "add", true
        elseif op.kind ~= "none" and rep[r] then
          base[r] = copy(rep[r])
          performed[r] = true
          if op.kind == "delete" then
            rep[r], pending[r] = nil, "delete"
          elseif rep[r][op.field] == op.value then
            performed[r] = "unchanged" -- the value it holds already: no edit at all
          else
            rep[r][op.field] = op.value
            pending[r] = "update"
          end
        end
      else -- P or S: a sync
        sync(r)
      end
    end
  end
  for _ = 1, 2 do
    for r = 1, case.replicas do sync(r) end
  end
  return { server = server or false, replica = rep, conflicts = conflicts, performed = performed, adds = adds,
           add_sent = add_sent, superseded = superseded }
end

return model
