-- The conflict matrix (issue 36): cases generated from a seed, in batches
-- that share a random interleaving of edits and syncs (each case of a batch
-- edits its own feature, so one run of the batch plays them all).
--
-- A case: 2 or 3 replicas, each with one edit of the case's feature (or an
-- add of its own): {update, move, delete, add} for each replica, an update
-- of the same field as replica 1's or another one, to the same value or
-- another one (a move: to the same point or another). A schedule: for
-- each replica an optional sync before its edit (it then starts from what
-- the others sent), the edit, a sync; interleaved at random.
local matrix = {}

local KINDS = { "update", "move", "delete", "add" }
local EDIT_FIELDS = { "OWNER", "APN" }

-- The point of a case as the model spells it, and as a geometry.
function matrix.point_text(x, y) return ("%.4f %.4f"):format(x, y) end
function matrix.geometry_of(text)
  local x, y = text:match("^(%S+) (%S+)$")
  return { x = tonumber(x), y = tonumber(y) }
end

-- One case's edits.
local function case_of(rng, id, k)
  local ops = {}
  local same_field, same_value = rng(2) == 1, rng(2) == 1
  local first
  for r = 1, k do
    local kind = KINDS[rng(#KINDS)]
    local op = { kind = kind }
    if kind == "update" then
      local field = EDIT_FIELDS[rng(#EDIT_FIELDS)]
      if first and first.kind == "update" then
        field = same_field and first.field or (first.field == "OWNER" and "APN" or "OWNER")
      end
      op.field = field
      if first and first.kind == "update" and first.field == field and same_value then
        op.value = first.value
      else
        op.value = ("%s r%d c%d"):format(field:lower(), r, id) -- APN holds 20 characters
      end
    elseif kind == "move" then
      op.field = "POINT"
      if first and first.kind == "move" and same_value then
        op.value = first.value
      else
        op.value = matrix.point_text(id + 0.25 * r, 10 + 0.5 * r)
      end
    elseif kind == "add" then
      op.value = { OWNER = ("added by r%d of case %d"):format(r, id), APN = "new", POINT = matrix.point_text(id, -r) }
    end
    ops[r] = op
    first = first or op
  end
  local kinds = {}
  for r = 1, k do kinds[r] = ops[r].kind end
  local label = table.concat(kinds, "/")
  if ops[1].kind == "update" then
    label = label .. (same_field and " same field" or " other field")
      .. (same_value and " same value" or " other value")
  elseif ops[1].kind == "move" then
    label = label .. (same_value and " same point" or " other point")
  end
  return { id = id, replicas = k, ops = ops, label = label,
           initial = { OWNER = ("owner %d"):format(id), APN = ("apn %d"):format(id),
                       POINT = matrix.point_text(id + 0.5, 10) } }
end

-- A random interleaving of each replica's (sync,) edit, sync.
local function schedule_of(rng, k)
  local queues = {}
  for r = 1, k do
    local q = {}
    if rng(10) <= 3 then q[#q + 1] = { "P", r } end
    q[#q + 1] = { "E", r }
    q[#q + 1] = { "S", r }
    queues[r] = q
  end
  local out = {}
  while true do
    local left = {}
    for r = 1, k do
      if #queues[r] > 0 then left[#left + 1] = r end
    end
    if #left == 0 then break end
    local r = left[rng(#left)]
    out[#out + 1] = table.remove(queues[r], 1)
  end
  return out
end

--- The batches of `cases` cases (`per_batch` each), from `seed`.
-- @treturn table `{ {replicas =, schedule =, cases = {...}}, ... }`
function matrix.batches(cases, per_batch, seed)
  local state = seed
  -- a small LCG of our own: the same batches from the same seed on any Lua
  local function rng(n)
    state = (state * 1103515245 + 12345) % 2147483648
    return (state // 65536) % n + 1
  end
  local list, id = {}, 0
  while id < cases do
    local k = rng(2) + 1
    local batch = { replicas = k, schedule = schedule_of(rng, k), cases = {} }
    for _ = 1, math.min(per_batch, cases - id) do
      id = id + 1
      batch.cases[#batch.cases + 1] = case_of(rng, id, k)
    end
    list[#list + 1] = batch
  end
  return list
end

return matrix
