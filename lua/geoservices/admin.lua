--- The two administrative read operations: getServicesById (4.3) and
-- notebooks/snapshots/list (4.4). Both validate their input before sending.
local errors = require "geoservices.errors"
local results = require "geoservices.results"

local admin = {}

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

-- Both operations only read: they are retried as reads (geoservices.retry).
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
function admin.get_services_by_id(self, ids, opts)
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
function admin.list_snapshots(self, item_id, opts)
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

return admin
