--- What the store specs that need no server of their own share (store/curves,
-- store/lossless): a Utilities service's layers and features written as a
-- synchronization result (a store is then made from it with
-- store.create_from), and the edits a store's sync sends, caught by a
-- scripted server (spec/support/scripted_server.py) that answers the rebase's
-- queries with the server's features and the synchronizeReplica with nothing.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local M = {}

M.FIELDS = {
  { name = "OBJECTID", type = "esriFieldTypeOID" },
  { name = "GlobalID", type = "esriFieldTypeGlobalID", length = 38 },
  { name = "NAME", type = "esriFieldTypeString", length = 50 },
}

--- A layer resource of the Utilities service (EPSG:2227) with M.FIELDS.
function M.layer(id, name, geometry_type, has_z, has_m)
  return { id = id, name = name, type = "Feature Layer", geometryType = geometry_type, hasZ = has_z, hasM = has_m,
           objectIdField = "OBJECTID", globalIdField = "GlobalID", fields = M.FIELDS,
           extent = { spatialReference = { wkid = 2227 } } }
end

--- The GlobalID of feature i of a layer.
function M.gid(layer_id, i) return ("{%08X-0000-4000-8000-%012X}"):format(layer_id, i) end

--- Feature i of a layer as the server holds it: OBJECTID i, its GlobalID, NAME "f<i>", geometry g.
function M.feature(layer_id, i, g)
  return { attributes = { OBJECTID = i, GlobalID = M.gid(layer_id, i), NAME = "f" .. i }, geometry = g }
end

--- A replica of the Utilities service at generation 5.
function M.replica(replica_id)
  return { service = "Utilities", replicaID = replica_id, syncModel = "perReplica", syncDirection = "bidirectional",
           replicaServerGen = 5 }
end

--- Writes a synchronization result of generation 5 to path: layer id (0 to 3) -> its geometries
-- (M.feature i of each); a layer without any is left out.
function M.write_result(path, geometries_by_layer)
  local edits = json.array()
  for id = 0, 3 do
    local adds = json.array()
    for i, g in ipairs(geometries_by_layer[id] or {}) do adds[i] = M.feature(id, i, g) end
    if #adds > 0 then edits[#edits + 1] = { id = id, features = { adds = adds } } end
  end
  helper.write_file(path, json.encode{ replicaServerGen = 5, edits = edits })
end

local function url_decode(s)
  return (s:gsub("+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

--- The edits a sync of st sends (the decoded `edits` of its synchronizeReplica), to a scripted server
-- whose layer queries (the rebase before the upload, issue 36) answer `served`: layer id -> the
-- server's features, and whose synchronizeReplica answers generation 6 and no changes.
function M.uploaded(st, served)
  local routes = {}
  for id, features in pairs(served) do
    routes[#routes + 1] = { method = "POST", path = ("/server/Utilities/FeatureServer/%d/query"):format(id),
                            responses = { { json = { features = features } } } }
  end
  table.sort(routes, function(a, b) return a.path < b.path end)
  routes[#routes + 1] = { method = "POST", path = "/server/rest/services/Utilities/FeatureServer/synchronizeReplica",
    responses = { { json = { transportType = "esriTransportTypeEmbedded", replicaID = st:replica().replicaID,
                             replicaServerGen = 6, edits = json.array() } } } }
  local server = helper.start_scripted{ routes = routes }
  local client = geoservices.client{ url = server.url, timeout = 10 }
  local ok, err = pcall(st.sync, st, client)
  local sent
  for _, r in ipairs(server:requests()) do
    if r.path:find("synchronizeReplica", 1, true) then sent = r.body end
  end
  server:stop()
  assert(sent, "no synchronizeReplica request: " .. tostring(ok) .. " " .. tostring(err))
  return json.decode(url_decode(sent:match("edits=([^&]*)")))
end

return M
