-- What a synchronization told its caller about its edits: the edits it
-- reports as rejected, in conflict with a newer value on the server, or
-- overwritten by the server's state. An edit so reported is not lost (the
-- user was told); one that never reached the server and was not reported is.
-- Read from a client:sync or store:sync result (and the interrupted attempt
-- it resolved first, `result.resolved`), whatever the list is called.
local M = {}

local LISTS = { "failed_edits", "conflicts", "rejected", "overwritten" }

local function gid_of(entry)
  if type(entry) ~= "table" then return nil end
  local gid = entry.globalId or entry.global_id or entry.GlobalID
  if gid == nil and type(entry.feature) == "table" and type(entry.feature.attributes) == "table" then
    gid = entry.feature.attributes.GlobalID
  end
  return type(gid) == "string" and gid or nil
end

--- The OWNER value an entry says was sent (the torture's unique values), if any.
function M.value_of(entry)
  local f = type(entry) == "table" and (entry.feature or entry.sent) or nil
  if type(f) == "table" and type(f.attributes) == "table" then return f.attributes.OWNER end
  return nil
end

--- `{ {op =, globalId =, how =, value =}, ... }` from a result (nil gives an empty list).
function M.of(result, out, depth)
  out = out or {}
  depth = depth or 0
  if type(result) ~= "table" or depth > 3 then return out end
  for _, name in ipairs(LISTS) do
    local list = result[name]
    if type(list) == "table" then
      for _, entry in ipairs(list) do
        local gid = gid_of(entry)
        if gid then
          out[#out + 1] = { op = entry.op, globalId = gid, how = name, value = M.value_of(entry) }
        end
      end
    end
  end
  if type(result.resolved) == "table" then M.of(result.resolved, out, depth + 1) end
  return out
end

return M
