--- Metatables that make operation results print as compact summaries in a
-- REPL. Results stay plain tables with the interface's field names.
local results = {}

local function count_label(n, singular, plural)
  return ("%d %s"):format(n, n == 1 and singular or plural)
end

local Service = { __name = "geoservices.Service" }
function Service.__tostring(s)
  local exts = {}
  for _, ext in ipairs(type(s.extensions) == "table" and s.extensions or {}) do
    if ext.enabled == "true" or ext.enabled == true then exts[#exts + 1] = ext.typeName end
  end
  local where = (s.folderName and s.folderName ~= "" and s.folderName ~= "/")
    and (s.folderName .. "/") or ""
  return ("service %s%s.%s [%s] %s%s"):format(where, tostring(s.serviceName), tostring(s.type),
    tostring(s.id), tostring(s.configuredState or "?"),
    #exts > 0 and (", extensions " .. table.concat(exts, ",")) or "")
end

local ServiceList = { __name = "geoservices.ServiceList" }
function ServiceList.__tostring(list)
  local names = {}
  for i, s in ipairs(list) do
    if i > 5 then names[#names + 1] = "..."; break end
    names[#names + 1] = ("%s.%s"):format(tostring(s.serviceName), tostring(s.type))
  end
  return count_label(#list, "service", "services") .. (#names > 0 and (": " .. table.concat(names, ", ")) or "")
end

local function describe_snapshots(list, item_id)
  local names = {}
  for i, snap in ipairs(list.snapshots or {}) do
    if i > 5 then names[#names + 1] = "..."; break end
    local props = type(snap.properties) == "table" and snap.properties or {}
    names[#names + 1] = tostring(props.name or snap.resourceKey)
  end
  local total = math.tointeger(list.total) or #(list.snapshots or {})
  return ("%s of item %s%s"):format(count_label(total, "snapshot", "snapshots"), item_id,
    #names > 0 and (": " .. table.concat(names, ", ")) or "")
end

function results.services(list)
  for _, s in ipairs(list) do
    if type(s) == "table" then setmetatable(s, Service) end
  end
  return setmetatable(list, ServiceList)
end

function results.snapshots(list, item_id)
  -- The item id is not a field of the response; the metatable remembers it.
  return setmetatable(list, {
    __name = "geoservices.SnapshotList",
    __tostring = function(l) return describe_snapshots(l, item_id) end,
  })
end

return results
