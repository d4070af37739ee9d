--- The administrative read operations: getServicesById,
-- notebooks/snapshots/list and the services listing. They validate their
-- input before sending.
local errors = require "geoservices.base.errors"

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
  local missing = rawget(list, "missing") or {}
  local head = #missing > 0 and ("%d of %d services"):format(#list, #list + #missing)
    or count_label(#list, "service", "services")
  local text = head .. (#names > 0 and (": " .. table.concat(names, ", ")) or "")
  if #missing > 0 then text = text .. "; not returned: " .. table.concat(missing, ", ") end
  return text
end

local function ms_date(ms)
  ms = math.tointeger(tonumber(ms))
  if not ms then return "?" end
  return os.date("!%Y-%m-%d %H:%M UTC", ms // 1000)
end

-- One snapshot entry: `snapshot "Baseline" (snapshot_1700000000000.json,
-- created 2023-11-14 22:13 UTC, runtime ArcGIS Notebook Python 3 Standard 10.0)`.
local Snapshot = { __name = "geoservices.Snapshot" }
function Snapshot.__tostring(snap)
  local props = type(snap.properties) == "table" and snap.properties or {}
  local runtime = type(props.runtime) == "table" and props.runtime or {}
  local rt = runtime.notebookRuntimeName
    and (", runtime " .. tostring(runtime.notebookRuntimeName)
      .. (runtime.notebookRuntimeVersion and (" " .. tostring(runtime.notebookRuntimeVersion)) or ""))
    or ""
  return ("snapshot %q (%s, created %s%s)"):format(tostring(props.name or "?"), tostring(snap.resourceKey or "?"),
    ms_date(snap.created), rt)
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

-- `asked`: the ids requested; those the server did not return go to
-- list.missing, in the order asked.
function results.services(list, asked)
  asked = asked or {}
  -- the usual answer: every id asked, in the order asked, spelled the same
  -- way; then nothing is missing and no set of returned ids is needed
  local same, n = true, 0
  for i, s in ipairs(list) do
    n = i
    if type(s) == "table" then
      setmetatable(s, Service)
      if same and s.id ~= asked[i] then same = false end
    else
      same = false
    end
  end
  same = same and n == #asked
  local missing = {}
  if not same then
    local returned = {}
    for _, s in ipairs(list) do
      if type(s) == "table" and s.id ~= nil then returned[tostring(s.id):lower()] = true end
    end
    for _, id in ipairs(asked) do
      if not returned[id:lower()] then missing[#missing + 1] = id end
    end
  end
  rawset(list, "missing", missing)
  return setmetatable(list, ServiceList)
end

function results.snapshots(list, item_id)
  for _, snap in ipairs(type(list.snapshots) == "table" and list.snapshots or {}) do
    if type(snap) == "table" and getmetatable(snap) == nil then setmetatable(snap, Snapshot) end
  end
  -- The item id is not a field of the response; the metatable remembers it.
  return setmetatable(list, {
    __name = "geoservices.SnapshotList",
    __tostring = function(l) return describe_snapshots(l, item_id) end,
  })
end


local byte, find = string.byte, string.find

local function trim(s)
  -- the usual id has nothing to trim: two byte looks instead of two
  -- patterns (%s: space, \t, \n, \v, \f, \r)
  local first, last = byte(s, 1), byte(s, -1)
  if first and first ~= 32 and (first < 9 or first > 13) and last ~= 32 and (last < 9 or last > 13) then
    return s
  end
  return (s:gsub("^%s+", ""):gsub("%s+$", ""))
end

-- Accepts {"id1", "id2"} or "id1,id2"; returns the ids or nil, err. The
-- list returned is only read, and only during the call: a plain list whose
-- ids need no trimming (the usual) is returned itself rather than copied.
local function service_ids(ids)
  local list
  if type(ids) == "string" then
    if trim(ids) == "" then return nil, errors.invalid("serviceIDs", "at least one service id is required") end
    list = {}
    for piece in (ids .. ","):gmatch("([^,]*),") do
      local id = trim(piece)
      if id == "" then return nil, errors.invalid("serviceIDs", "empty id in the comma-separated list") end
      list[#list + 1] = id
    end
  elseif type(ids) == "table" then
    local n = 0
    for i, id in ipairs(ids) do
      if type(id) ~= "string" then
        return nil, errors.invalid("serviceIDs", ("id #%d must be a string, got %s"):format(i, type(id)))
      end
      local trimmed = trim(id)
      if trimmed == "" then return nil, errors.invalid("serviceIDs", ("id #%d is empty"):format(i)) end
      if find(trimmed, ",", 1, true) then
        return nil, errors.invalid("serviceIDs", ("id #%d contains a comma, the list separator"):format(i))
      end
      if trimmed ~= id and not list then list = table.move(ids, 1, i - 1, 1, {}) end -- a copy from here on
      if list then list[i] = trimmed end
      n = i
    end
    if n == 0 then return nil, errors.invalid("serviceIDs", "at least one service id is required") end
    if not list and (#ids ~= n or getmetatable(ids) ~= nil) then list = table.move(ids, 1, n, 1, {}) end
    return list or ids
  else
    error("get_services_by_id: expected a list of ids or a comma-separated string, got " .. type(ids), 3)
  end
  return list
end

-- Both operations only read: they are retried as reads (geoservices.net.retry).
-- (Client:post never writes to its opts, so one table serves every call
-- without options.)
local READ = { retry = "read" }
local function read_opts(opts)
  if opts == nil then return READ end
  local out = { retry = "read" }
  for k, v in pairs(opts) do out[k] = v end
  return out
end

--- Service definitions of the given ids, in the order asked
-- (`client:get_services_by_id(ids, opts)`). A server answers without the
-- ids it does not know: the list then has fewer entries and names them in
-- `list.missing` (the command exits 3).
-- @param self the client
-- @param ids array of ids, or one comma-separated string
-- @tparam[opt] table opts request options of client:post (timeout)
-- @return array of service definitions, each printing as one line, with `missing` (the ids asked
--   for and not returned, possibly empty; the list prints as `1 of 2 services: ...; not returned:
--   ...`), or nil, err
-- @raise never; bad ids give `nil, err` with kind "invalid" before anything is sent
function services.get_services_by_id(self, ids, opts)
  local list, err = service_ids(ids)
  if not list then return nil, err end
  local url = self:admin_url("services/getServicesById")
  local body, post_err = self:post(url, { serviceIDs = list[2] and table.concat(list, ",") or list[1] },
                                   read_opts(opts))
  if not body then return nil, post_err end
  if type(body.services) ~= "table" then
    return nil, errors.new("protocol", "response has no 'services' array", { url = url })
  end
  return results.services(body.services, list)
end

--- Snapshot metadata of a notebook item (`client:list_snapshots(item_id, opts)`).
-- @param self the client
-- @string item_id the notebook item id
-- @tparam[opt] table opts request options of client:post (timeout)
-- @return {snapshots = {...}, total = n, status = "success"} (prints as a summary; each snapshot
--   entry prints as one line), or nil, err
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

local Listing = { __name = "geoservices.ServiceListing" }
function Listing.__tostring(list)
  local names = {}
  for i, s in ipairs(list) do
    if i > 5 then names[#names + 1] = "..."; break end
    local where = (s.folderName and s.folderName ~= "/") and (s.folderName .. "/") or ""
    names[#names + 1] = ("%s%s.%s"):format(where, tostring(s.serviceName), tostring(s.type))
  end
  return count_label(#list, "service", "services") .. (#names > 0 and (": " .. table.concat(names, ", ")) or "")
end

--- The services of the site, from the administrator directory's services
-- resource and each of its folders (`client:list_services(opts)`): every
-- service with its `folderName`, `serviceName`, `type`, `description` and,
-- where the folder's resource gives it, its `id` (what get_services_by_id
-- takes; the vendor's Enterprise reference lists a folder's services with
-- their definitions).
-- @param self the client
-- @tparam[opt] table opts `search` (keep the services whose name holds this text, case ignored),
--   `timeout`
-- @return the list (prints as a summary; each entry as one line), or nil, err
-- @raise when opts.search is given and is not a string
function services.list_services(self, opts)
  opts = opts or {}
  local search = opts.search
  if search ~= nil and type(search) ~= "string" then error("list_services: search must be a string", 2) end
  local request = read_opts{ timeout = opts.timeout }
  local url = self:admin_url("services")
  local root, err = self:post(url, {}, request)
  if not root then return nil, err end
  if type(root.services) ~= "table" or (root.folders ~= nil and type(root.folders) ~= "table") then
    return nil, errors.new("protocol", "the services resource has no 'services' array", { url = url })
  end
  local all = {}
  for _, s in ipairs(root.services) do all[#all + 1] = s end
  for _, folder in ipairs(root.folders or {}) do
    if type(folder) == "string" and folder ~= "" then
      local furl = self:admin_url("services/" .. folder:gsub("[^%w_%-]", function(c)
        return ("%%%02X"):format(c:byte())
      end))
      local listing, ferr = self:post(furl, {}, request)
      if not listing then return nil, ferr end
      for _, s in ipairs(type(listing.services) == "table" and listing.services or {}) do
        if type(s) == "table" then
          s.folderName = s.folderName or folder
          all[#all + 1] = s
        end
      end
    end
  end
  local needle = search and search:lower()
  local list = {}
  for _, s in ipairs(all) do
    if type(s) == "table" and (not needle or tostring(s.serviceName):lower():find(needle, 1, true)) then
      list[#list + 1] = setmetatable(s, Service)
    end
  end
  table.sort(list, function(a, b)
    return tostring(a.folderName) .. "/" .. tostring(a.serviceName) < tostring(b.folderName) .. "/"
      .. tostring(b.serviceName)
  end)
  return setmetatable(list, Listing)
end

return services
