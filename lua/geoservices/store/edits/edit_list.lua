--- How the lists of local edits a store returns print (st:pending(),
-- st:failed(), st:conflicts()): a one-line summary in a REPL, as every
-- other result of the library; they stay plain arrays of rows, and
-- geoservices.pp shows them whole.
--
--     3 pending local edits in layer 0: 1 add, 1 update, 1 delete
--     1 failed edit: update of {0B7B...} in layer 0: Object is missing. (code 1019)
--     no conflicts
-- @module geoservices.store.edits.edit_list
-- @local
local edit_list = {}

local OPS = { "add", "update", "delete" }

local function plural(n, word)
  return ("%d %s%s"):format(n, word, n == 1 and "" or "s")
end

-- " in layer 0" or " in layers 0, 1"
local function layers_of(list)
  local seen, ids = {}, {}
  for _, e in ipairs(list) do
    if e.layer ~= nil and not seen[e.layer] then
      seen[e.layer] = true
      ids[#ids + 1] = e.layer
    end
  end
  table.sort(ids, function(a, b) return tostring(a) < tostring(b) end)
  for i, id in ipairs(ids) do ids[i] = tostring(id) end
  if #ids == 0 then return "" end
  return (#ids == 1 and " in layer " or " in layers ") .. table.concat(ids, ", ")
end

-- "1 add, 2 updates"
local function kinds_of(list)
  local counts = {}
  for _, e in ipairs(list) do counts[e.op] = (counts[e.op] or 0) + 1 end
  local parts = {}
  for _, op in ipairs(OPS) do
    if counts[op] then parts[#parts + 1] = plural(counts[op], op) end
  end
  return table.concat(parts, ", ")
end

-- "update of {GUID} in layer 0"
local function one(e)
  return ("%s of %s in layer %s"):format(tostring(e.op), tostring(e.globalId), tostring(e.layer))
end

local function metatable(name, summary)
  return { __name = name, __tostring = summary }
end

local KINDS = {
  ["queued edit"] = metatable("geoservices.PendingEdits", function(list)
    if #list == 0 then return "no pending local edits" end
    return ("%s%s: %s"):format(plural(#list, "pending local edit"), layers_of(list), kinds_of(list))
  end),
  ["failed edit"] = metatable("geoservices.FailedEdits", function(list)
    if #list == 0 then return "no failed edits" end
    if #list == 1 then
      local e = list[1]
      return ("1 failed edit: %s: %s%s"):format(one(e), tostring(e.description or "rejected"),
        e.code ~= nil and (" (code %s)"):format(tostring(e.code)) or "")
    end
    return ("%s%s: %s"):format(plural(#list, "failed edit"), layers_of(list), kinds_of(list))
  end),
  ["conflict"] = metatable("geoservices.Conflicts", function(list)
    if #list == 0 then return "no conflicts" end
    if #list == 1 then
      local e = list[1]
      return ("1 conflict: %s%s"):format(one(e), e.outcome == "server_kept" and " (the server's version kept)" or "")
    end
    return ("%s%s: %s"):format(plural(#list, "conflict"), layers_of(list), kinds_of(list))
  end),
}

--- Gives a list of edit rows its summary: `what` is "queued edit", "failed
-- edit" or "conflict" (as the store names its rows). Returns the list.
function edit_list.of(list, what)
  local mt = KINDS[what]
  if type(list) == "table" and mt and getmetatable(list) == nil then setmetatable(list, mt) end
  return list
end

return edit_list
