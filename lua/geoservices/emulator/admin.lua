--- Emulator handlers of getServicesById (4.3) and notebooks/snapshots/list
-- (4.4). A handler receives (emulator, request) where request.form holds the
-- decoded form fields, and returns a JSON-able table (errors as error bodies).
local auth = require "geoservices.emulator.auth"
local json = require "geoservices.base.json"
local world_mod = require "geoservices.emulator.world"

local admin = {}

function admin.get_services_by_id(emu, request)
  local user, denied = auth.user(emu.world, request.form, request)
  if not user then return denied end
  if not auth.is_administrator(user) then return auth.forbidden() end
  local ids = request.form.serviceIDs
  if ids == nil or ids == "" then
    return auth.error_body(400, "Unable to get services.", { "'serviceIDs' parameter is required." })
  end
  local services = json.array()
  for id in (ids .. ","):gmatch("([^,]*),") do
    id = id:gsub("^%s+", ""):gsub("%s+$", "")
    local service = emu.world.services_by_id[id]
    if not service then
      return auth.error_body(404, ("Service with id '%s' does not exist."):format(id), { "serviceIDs: " .. id })
    end
    services[#services + 1] = service
  end
  return { services = services }
end

function admin.list_snapshots(emu, request)
  local user, denied = auth.user(emu.world, request.form, request)
  if not user then return denied end
  -- Section 5: listing needs the privilege to create and edit notebooks.
  if not auth.has_privilege(user, auth.NOTEBOOK_PRIVILEGE) then return auth.forbidden() end
  local item_id = request.form.itemId
  if item_id == nil or item_id == "" then
    return auth.error_body(400, "Unable to list snapshots.", { "'itemId' parameter is required." })
  end
  local item = emu.world.notebooks[item_id]
  if not item then
    return auth.error_body(404, "Item does not exist or is inaccessible.", { "itemId: " .. item_id })
  end
  -- Section 4.4: unless created with private = false, only the owner may list a snapshot.
  local is_owner = item.owner == user.name
  local snapshots = json.array()
  for _, snap in ipairs(item.snapshots or {}) do
    if is_owner or snap.private == false then
      local entry = world_mod.deep_copy(snap)
      entry.private = nil -- the flag decides visibility; it is not a field of 2.10
      entry.created = tostring(math.tointeger(entry.created) or entry.created)
      snapshots[#snapshots + 1] = entry
    end
  end
  return { snapshots = snapshots, total = #snapshots, status = "success" }
end

-- The administrator directory's services resources (Enterprise
-- administration reference, "Services" and "Folder":
-- https://developers.arcgis.com/rest/enterprise-administration/enterprise/folder.htm):
-- the root lists its folders and the services at the root; a folder lists
-- its services with their definitions (the `id` getServicesById takes).
local function folder_of(service)
  local f = service.folderName
  if f == nil or f == "" or f == "None" then return "/" end
  return f
end

local function signed_in(emu, request)
  local user, denied = auth.user(emu.world, request.form, request)
  if not user then return nil, denied end
  return user
end

function admin.list_services(emu, request)
  local user, denied = signed_in(emu, request)
  if not user then return denied end
  local folders, seen, root = json.array(), {}, json.array()
  for _, s in ipairs(emu.world.services) do
    local f = folder_of(s)
    if f == "/" then
      root[#root + 1] = { folderName = "/", serviceName = s.serviceName, type = s.type, description = s.description }
    elseif not seen[f] then
      seen[f] = true
      folders[#folders + 1] = f
    end
  end
  table.sort(folders)
  return { folderName = "/", description = "Root folder", folders = folders, services = root }
end

function admin.list_folder(emu, request, folder)
  local user, denied = signed_in(emu, request)
  if not user then return denied end
  local list = json.array()
  for _, s in ipairs(emu.world.services) do
    if folder_of(s) == folder then list[#list + 1] = s end
  end
  if #list == 0 then
    return auth.error_body(404, ("Folder '%s' does not exist."):format(folder))
  end
  return { folderName = folder, services = list }
end

return admin
