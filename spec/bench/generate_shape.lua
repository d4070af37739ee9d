-- Writes the data of one row of `make bench`'s data-shape table (issue 38):
-- a createReplica result (dataFormat json, the layer's id before its
-- features), the layer's resource as the server describes it, and the same
-- features as one Esri JSON FeatureSet for ogr2ogr, each feature's text the
-- same in both files. Seeded: the same files on every machine.
--   lua5.4 spec/bench/generate_shape.lua SHAPE N BASE
-- writes BASE.json, BASE.layer.json, BASE.featureset.json. SHAPE:
--   points_seq  points of 4 attributes whose GlobalIDs are sequential GUIDs (sharing their first 16
--               hex digits; the bench's own row uses generate_replica.lua's points with them instead)
--   polygons    polygons of about 200 vertices: an outer ring of 150 and a hole of 50
--   wide        points with 100 attributes (integers, doubles, texts)
--   texts       points with a text of 10 KB each
--   attachments points with 5 attachments of 1 MiB each, given by URL (@ROOT@/Bench/FeatureServer/0/
--               OID/attachments/K: spec/bench/serve_replica.lua puts its address there and serves
--               BASE.blob, the 1 MiB written here, for each)
local json = require "geoservices.base.json"

local shape, n, base = arg[1], tonumber(arg[2]), arg[3]
assert(shape and n and base, "usage: generate_shape.lua points_seq|polygons|wide|texts|attachments N BASE")

local seed = 20260338
local function rand(m) -- a small LCG: the same file on every machine
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % m
end

local WORDS = { "main", "valve", "Zoë", "Müller", "hydrant", "\\\"quoted\\\"", "Grüße", "line\\nbreak", "east",
                "Ōsaka", "pipe", "survey" }
local function words(bytes)
  local out, len = {}, 0
  while len < bytes do
    local w = WORDS[rand(#WORDS) + 1]
    out[#out + 1] = w
    len = len + #w + 1
  end
  return table.concat(out, " ")
end

local fields = {
  { name = "OBJECTID", type = "esriFieldTypeOID", alias = "OBJECTID" },
  { name = "GlobalID", type = "esriFieldTypeGlobalID", alias = "GlobalID", length = 38 },
  { name = "NAME", type = "esriFieldTypeString", alias = "NAME", length = 64 },
  { name = "CODE", type = "esriFieldTypeInteger", alias = "CODE" },
}
local geometry_type = "esriGeometryPoint"
if shape == "polygons" then geometry_type = "esriGeometryPolygon" end
if shape == "wide" then
  for i = 1, 96 do
    local t = i % 3 == 0 and "esriFieldTypeString" or i % 3 == 1 and "esriFieldTypeInteger" or "esriFieldTypeDouble"
    fields[#fields + 1] = { name = ("F%03d"):format(i), type = t, alias = ("F%03d"):format(i),
                            length = t == "esriFieldTypeString" and 32 or nil }
  end
elseif shape == "texts" then
  fields[#fields + 1] = { name = "NOTES", type = "esriFieldTypeString", alias = "NOTES", length = 12000 }
end
assert(shape == "points_seq" or shape == "polygons" or shape == "wide" or shape == "texts" or shape == "attachments",
  "unknown shape " .. shape)
local ATTACHMENTS, BLOB = 5, 1 << 20

local function global_id(oid)
  if shape == "points_seq" then return ("{8D0B2E4A-9A3C-4F61-8%03X-%012X}"):format(oid % 4096, oid) end
  if shape == "attachments" then return ("{%08X-0000-4000-8000-%012X}"):format(oid * 2654435761 % 4294967296, oid) end
  return ("{%08X-%04X-4%03X-8%03X-%012X}"):format(rand(0x7fffffff), rand(65536), rand(4096), rand(4096), oid)
end

-- A ring of k vertices around (cx, cy), closed; clockwise (an outer ring, Esri) or not (a hole).
local function ring(cx, cy, r, k, clockwise)
  local pts = {}
  for i = 0, k - 1 do
    local a = 2 * math.pi * i / k
    if clockwise then a = -a end
    local rr = r * (0.9 + rand(1000) / 10000)
    pts[#pts + 1] = ("[%.6f,%.6f]"):format(cx + rr * math.cos(a), cy + rr * math.sin(a))
  end
  pts[#pts + 1] = pts[1]
  return "[" .. table.concat(pts, ",") .. "]"
end

local function feature(oid)
  local attrs = {
    ('"OBJECTID":%d'):format(oid),
    ('"GlobalID":"%s"'):format(global_id(oid)),
    ('"NAME":"%s"'):format(words(24)),
    ('"CODE":%d'):format(rand(100000)),
  }
  if shape == "wide" then
    for i = 1, 96 do
      local v
      if i % 3 == 0 then v = ('"%s"'):format(WORDS[rand(#WORDS) + 1])
      elseif i % 3 == 1 then v = tostring(rand(1000000))
      else v = ("%.6f"):format(rand(100000000) / 997) end
      attrs[#attrs + 1] = ('"F%03d":%s'):format(i, v)
    end
  elseif shape == "texts" then
    attrs[#attrs + 1] = ('"NOTES":"%s"'):format(words(10240))
  end
  local x, y = -117 - rand(1000000) / 1234567, 34 + rand(1000000) / 7654321
  local geometry
  if shape == "polygons" then
    geometry = ('{"rings":[%s,%s]}'):format(ring(x, y, 0.001, 150, true), ring(x, y, 0.0004, 50, false))
  else
    geometry = ('{"x":%.9f,"y":%.9f}'):format(x, y)
  end
  return ('{"attributes":{%s},"geometry":%s}'):format(table.concat(attrs, ","), geometry)
end

local SR = '{"wkid":4326,"latestWkid":4326}'
local layer = { id = 0, name = "shape_" .. shape, type = "Feature Layer", geometryType = geometry_type,
                spatialReference = { wkid = 4326, latestWkid = 4326 }, objectIdField = "OBJECTID",
                globalIdField = "GlobalID", hasAttachments = shape == "attachments", fields = json.array(fields),
                relationships = json.array() }
local f = assert(io.open(base .. ".layer.json", "wb"))
f:write(json.encode(layer))
f:close()

local result = assert(io.open(base .. ".json", "wb"))
result:write('{"replicaName":"bench","replicaID":"{5E1A0C2B-1111-4A5B-9C8D-000000000001}",',
  '"transportType":"esriTransportTypeUrl","responseType":"esriReplicaResponseTypeData","replicaServerGen":1,',
  '"layers":[{"id":0,"features":[')
local fs = assert(io.open(base .. ".featureset.json", "wb"))
fs:write('{"objectIdFieldName":"OBJECTID","globalIdFieldName":"GlobalID","geometryType":"', geometry_type,
  '","spatialReference":', SR, ',"fields":', json.encode(json.array(fields)), ',"features":[')
local buf = {}
for oid = 1, n do
  buf[#buf + 1] = feature(oid)
  if #buf == 500 or oid == n then
    local text = table.concat(buf, ",")
    local sep = oid > #buf and "," or ""
    result:write(sep, text)
    fs:write(sep, text)
    buf = {}
  end
end
result:write('],"attachments":[')
if shape == "attachments" then
  local wrote = false
  for oid = 1, n do
    for k = 1, ATTACHMENTS do
      buf[#buf + 1] = ('{"id":%d,"globalId":"{A%07X-0000-4000-8000-%012X}","parentGlobalId":"%s","name":"photo-%d.jpg",'
        .. '"contentType":"image/jpeg","size":%d,"url":"@ROOT@/Bench/FeatureServer/0/%d/attachments/%d"}'):format(
        (oid - 1) * ATTACHMENTS + k, k, oid, global_id(oid), k, BLOB, oid, k)
    end
    if #buf >= 500 or oid == n then
      result:write(wrote and "," or "", table.concat(buf, ","))
      wrote, buf = true, {}
    end
  end
  local blob = assert(io.open(base .. ".blob", "wb"))
  local chunk = {}
  for i = 1, 4096 do chunk[i] = string.char(rand(256)) end
  chunk = table.concat(chunk)
  for _ = 1, BLOB // #chunk do blob:write(chunk) end
  blob:close()
end
result:write(']}]}')
fs:write("]}")
result:close()
fs:close()
