--- The two administrative read operations: getServicesById (4.3) and
-- notebooks/snapshots/list (4.4). Both validate their input before sending.
local errors = require "geoservices.errors"

local services = {}

-- Results print as compact summaries in a REPL; they stay plain tables with
-- the interface's field names.
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


local function trim(s)
  return (s:gsub("^%s+", ""):gsub("%s+$", ""))
end

-- Accepts {"id1", "id2"} or "id1,id2"; returns the ids or nil, err.
local function service_ids(ids)
  local list = {}
  if type(ids) == "string" then
    if trim(ids) == "" then return nil, errors.invalid("serviceIDs", "at least one service id is required") end
    for piece in (ids .. ","):gmatch("([^,]*),") do
      local id = trim(piece)
      if id == "" then return nil, errors.invalid("serviceIDs", "empty id in the comma-separated list") end
      list[#list + 1] = id
    end
  elseif type(ids) == "table" then
    for i, id in ipairs(ids) do
      if type(id) ~= "string" then
        return nil, errors.invalid("serviceIDs", ("id #%d must be a string, got %s"):format(i, type(id)))
      end
      id = trim(id)
      if id == "" then return nil, errors.invalid("serviceIDs", ("id #%d is empty"):format(i)) end
      if id:find(",", 1, true) then
        return nil, errors.invalid("serviceIDs", ("id #%d contains a comma, the list separator"):format(i))
      end
      list[#list + 1] = id
    end
    if #list == 0 then return nil, errors.invalid("serviceIDs", "at least one service id is required") end
  else
    error("get_services_by_id: expected a list of ids or a comma-separated string, got " .. type(ids), 3)
  end
  return list
end

-- Both operations only read: they are retried as reads (geoservices.net.retry).
local function read_opts(opts)
  local out = { retry = "read" }
  for k, v in pairs(opts or {}) do out[k] = v end
  return out
end

--- Service definitions (2.9) of the given ids, in the order asked
-- (`client:get_services_by_id(ids, opts)`).
-- @param self the client
-- @param ids array of ids, or one comma-separated string
-- @tparam[opt] table opts request options of client:post (timeout)
-- @return array of service definitions (prints as a summary), or nil, err
-- @raise never; bad ids give `nil, err` with kind "invalid" before anything is sent
function services.get_services_by_id(self, ids, opts)
  local list, err = service_ids(ids)
  if not list then return nil, err end
  local url = self:admin_url("services/getServicesById")
  local body, post_err = self:post(url, { serviceIDs = table.concat(list, ",") }, read_opts(opts))
  if not body then return nil, post_err end
  if type(body.services) ~= "table" then
    return nil, errors.new("protocol", "response has no 'services' array", { url = url })
  end
  return results.services(body.services)
end

--- Snapshot metadata (2.10) of a notebook item (`client:list_snapshots(item_id, opts)`).
-- @param self the client
-- @string item_id the notebook item id
-- @tparam[opt] table opts request options of client:post (timeout)
-- @return {snapshots = {...}, total = n, status = "success"} (prints as a summary), or nil, err
-- @raise when item_id is not a string (a missing or empty id gives `nil, err` with kind "invalid")
function services.list_snapshots(self, item_id, opts)
  if item_id == nil then return nil, errors.invalid("itemId", "the notebook item id is required") end
  if type(item_id) ~= "string" then
    error("list_snapshots: expected the item id as a string, got " .. type(item_id), 2)
  end
  if trim(item_id) == "" then return nil, errors.invalid("itemId", "the notebook item id must not be empty") end
  local url = self:admin_url("notebooks/snapshots/list")
  local body, err = self:post(url, { itemId = trim(item_id) }, read_opts(opts))
  if not body then return nil, err end
  if type(body.snapshots) ~= "table" then
    return nil, errors.new("protocol", "response has no 'snapshots' array", { url = url })
  end
  if body.status ~= nil and body.status ~= "success" then
    return nil, errors.new("server", "snapshot listing reported status " .. tostring(body.status), { url = url })
  end
  return results.snapshots(body, trim(item_id))
end

return services
