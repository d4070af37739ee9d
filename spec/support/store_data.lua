-- Test data for the replica store specs and the store benchmark: layer
-- resources as a feature service describes them, deterministic features of
-- every geometry type, synchronization results written to a file.
local data = {}

local function fields()
  return {
    { name = "OBJECTID", type = "esriFieldTypeOID", alias = "OBJECTID" },
    { name = "GlobalID", type = "esriFieldTypeGlobalID", length = 38 },
    { name = "NAME", type = "esriFieldTypeString", length = 50 },
    { name = "COUNT", type = "esriFieldTypeInteger" },
    { name = "CODE", type = "esriFieldTypeSmallInteger" },
    { name = "AREA", type = "esriFieldTypeDouble" },
    { name = "UPDATED", type = "esriFieldTypeDate", length = 8 },
    { name = "REF", type = "esriFieldTypeGUID", length = 38 },
  }
end

local function layer(id, name, geometry_type, sr)
  return {
    id = id, name = name, type = "Feature Layer", geometryType = geometry_type,
    objectIdField = "OBJECTID", globalIdField = "GlobalID", fields = fields(),
    extent = { xmin = 0, ymin = 0, xmax = 1, ymax = 1, spatialReference = sr },
  }
end

--- The layer resources of the test service: points in Web Mercator (Esri
-- 102100), multipoints in WGS 84, polylines in EPSG:2227 (its definition
-- from PROJ's database), polygons in Web Mercator.
function data.layers()
  return {
    layer(0, "Hydrants", "esriGeometryPoint", { wkid = 102100, latestWkid = 3857 }),
    layer(1, "Survey marks", "esriGeometryMultipoint", { wkid = 4326 }),
    layer(2, "Pipes", "esriGeometryPolyline", { wkid = 2227 }),
    layer(3, "Parcels", "esriGeometryPolygon", { wkid = 102100, latestWkid = 3857 }),
  }
end

function data.gid(layer_id, i)
  return ("{%08X-0000-4000-8000-%012X}"):format(layer_id, i)
end

-- Rings: exterior clockwise (x up the left side first), holes counter-clockwise.
local function square(x, y, s)
  return { { x, y }, { x, y + s }, { x + s, y + s }, { x + s, y }, { x, y } }
end
local function hole(x, y, s)
  return { { x, y }, { x + s, y }, { x + s, y + s }, { x, y + s }, { x, y } }
end

--- The geometry of feature i of a layer: polygons cycle through a square,
-- a square with a hole ("hole") and two squares ("multi").
function data.geometry(layer_id, i)
  if layer_id == 0 then
    return { x = -13000000 + i * 10.5, y = 4000000 + i * 0.25 }
  elseif layer_id == 1 then
    local x, y = -120 + (i % 100) * 0.01, 35 + (i // 100) * 0.01
    return { points = { { x, y }, { x + 0.001, y + 0.002 }, { x + 0.003, y } } }
  elseif layer_id == 2 then
    local x, y = 6000000 + i * 100, 2000000 + (i % 50) * 100
    if i % 2 == 1 then return { paths = { { { x, y }, { x + 50, y + 20 }, { x + 90, y } } } } end
    return { paths = { { { x, y }, { x + 40, y + 40 } }, { { x + 60, y }, { x + 90, y + 30 } } } }
  end
  local x, y = -13000000 + (i % 100) * 1000, 4000000 + (i // 100) * 1000
  local kind = i % 3
  if kind == 0 then return { rings = { square(x, y, 500) } } end
  if kind == 1 then return { rings = { square(x, y, 500), hole(x + 100, y + 100, 200) } } end
  return { rings = { square(x, y, 300), square(x + 600, y + 600, 300) } }
end

function data.name(layer_id, i)
  if layer_id == 3 then return ({ [0] = "square", [1] = "hole", [2] = "multi" })[i % 3] .. " " .. i end
  return "feature " .. i
end

--- One feature as a Lua table.
function data.feature(layer_id, i)
  return {
    attributes = {
      OBJECTID = i, GlobalID = data.gid(layer_id, i), NAME = data.name(layer_id, i), COUNT = i * 3,
      CODE = i % 7, AREA = i / 7, UPDATED = 1700000000000 + i * 1000,
      REF = ("{AAAAAAAA-0000-4000-8000-%012X}"):format(i),
    },
    geometry = data.geometry(layer_id, i),
  }
end

--- Writes a synchronization result (2.3) with `counts[layer_id]` adds per
-- layer (features 1..n), optional deletes (GlobalIDs) per layer, and
-- `replicaServerGen`. Streams to the file; returns the number of records.
function data.write_result(path, counts, opts)
  local json = require "geoservices.base.json"
  opts = opts or {}
  local out = assert(io.open(path, "wb"))
  out:write(('{"transportType":"svcTransportTypeUrl","responseType":"svcReplicaResponseTypeEdits",'
    .. '"replicaID":"{5E1A0C2B-1111-4A5B-9C8D-000000000001}","replicaServerGen":%d,"edits":['):format(
    opts.replicaServerGen or 42))
  local first_layer, total = true, 0
  for layer_id = 0, 3 do
    local n = counts[layer_id]
    if n then
      out:write(first_layer and "" or ",", '{"id":', layer_id, ',"features":{"adds":[')
      first_layer = false
      local buf = {}
      for i = 1, n do
        buf[#buf + 1] = json.encode(data.feature(layer_id, i))
        if #buf == 500 or i == n then
          out:write(i > #buf and "," or "", table.concat(buf, ","))
          buf = {}
        end
      end
      total = total + n
      out:write('],"updates":[],"deleteIds":[')
      local deletes = opts.deletes and opts.deletes[layer_id] or {}
      for k, gid in ipairs(deletes) do out:write(k > 1 and "," or "", json.encode(gid)) end
      total = total + #deletes
      out:write("]}}")
    end
  end
  out:write("]}")
  out:close()
  return total
end

return data
