-- Writes a deterministic synthetic createReplica result (dataFormat json:
-- the top-level "layers", each entry holding its features in an array) of
-- N point records in LAYERS layers (default 1), with each layer entry's "id" before its
-- features or after them: a server's key order is not documented, and the
-- store must stay flat in both (issue 28).
--   lua5.4 spec/bench/generate_replica.lua N first|last path [LAYERS] [GLOBALIDS]
-- GLOBALIDS (issue 38: the shapes a server's GlobalIDs take), words joined by commas:
--   random  (the default) GUIDs that differ in their first 8 hex digits;
--   seq8    sequential GUIDs sharing their first 8 hex digits;
--   seq16   sequential GUIDs sharing their first 16 hex digits;
--   lower   spelled in lower case without braces;
--   repeat  every 97th record repeats the GlobalID of the record 50 before
--           it (another version of that feature: the later is the one kept).
-- The attributes and geometries are the same whatever the GlobalIDs.
-- The records are those of spec/bench/generate.lua's sync results (10-20
-- attributes of mixed types, UTF-8 and escapes, nulls, 17-digit coordinates).
local n, order, path, nlayers = tonumber(arg[1]), arg[2], arg[3], tonumber(arg[4] or 1)
local shape = {}
for word in (arg[5] or "random"):gmatch("[^,]+") do shape[word] = true end
assert(n and (order == "first" or order == "last") and path and nlayers,
  "usage: generate_replica.lua N first|last path [LAYERS] [random|seq8|seq16[,lower][,repeat]]")

local seed = 12345
local function rand(m) -- a small LCG: the same file on every machine
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % m
end

local NAMES = { "Zoë Müller", "Luis Ortega", "Jane \\\"JJ\\\" Smith", "Ōsaka Ltd", "Ada\\nByron", "Grüße" }
local STREETS = { "Main St", "Avenida Paulista", "Rue de l\\u0027Église", "Königsallee", "Elm \\/ Oak" }

-- The GlobalID of record oid in the file's shape (a, b, c: its random digits).
local function global_id(oid, a, b, c)
  local g
  if shape.seq8 then
    g = ("{8D0B2E4A-%04X-4%03X-8%03X-%012X}"):format(a, b, c, oid)
  elseif shape.seq16 then
    g = ("{8D0B2E4A-9A3C-4F61-8%03X-%012X}"):format(c, oid)
  else
    g = ("{%08X-%04X-4%03X-8%03X-%012X}"):format(oid, a, b, c, oid * 7919)
  end
  if shape.lower then g = g:sub(2, -2):lower() end
  return g
end

local function record(oid)
  local extra = 10 + rand(11) -- 10..20 attributes
  local a, b, c = rand(65536), rand(4096), rand(4096)
  local gid_of = oid
  if shape["repeat"] then -- the digits a function of the feature, so that a repeat spells its GlobalID again
    if oid % 97 == 0 and oid > 50 then gid_of = oid - 50 end
    a, b, c = gid_of * 40503 % 65536, gid_of * 2654435 % 4096, gid_of * 97 % 4096
  end
  local attrs = {
    ('"OBJECTID":%d'):format(oid),
    ('"GlobalID":"%s"'):format(global_id(gid_of, a, b, c)),
    ('"OWNER":"%s"'):format(NAMES[rand(#NAMES) + 1]),
    ('"STREET":"%s"'):format(STREETS[rand(#STREETS) + 1]),
    ('"ACRES":%.17g'):format(rand(100000) / 997),
    ('"ASSESSED":%d'):format(rand(2000000)),
    ('"UPDATED":%d'):format(1700000000000 + rand(100000000)),
    ('"VERIFIED":%s'):format(rand(2) == 0 and "true" or "false"),
    '"NOTES":null',
    ('"ZONE":"R%d"'):format(rand(9)),
    ('"DESCRIPTION":"Parcel %d \\u2014 zoned R%d, owner since %d; see \\"deed\\" book %d/%d, Grüße an Zoë"'):format(
      oid, rand(9), 1990 + rand(30), rand(100), rand(50)),
    ('"SURVEYOR":"%s"'):format(NAMES[rand(#NAMES) + 1]),
  }
  for f = 11, extra do attrs[#attrs + 1] = ('"F%d":%d'):format(f, rand(1000)) end
  return ('{"attributes":{%s},"geometry":{"x":%.17g,"y":%.17g}}'):format(
    table.concat(attrs, ","), -117 - rand(1000000) / 1234567, 34 + rand(1000000) / 7654321)
end

local out = assert(io.open(path, "wb"))
out:write('{"replicaName":"bench","replicaID":"{5E1A0C2B-1111-4A5B-9C8D-000000000001}",',
  '"transportType":"esriTransportTypeUrl","responseType":"esriReplicaResponseTypeData","replicaServerGen":1,',
  '"layers":[')
local per_layer, written = n // nlayers, 0
for layer = 0, nlayers - 1 do
  out:write(layer > 0 and "," or "", "{")
  if order == "first" then out:write('"id":', layer, ",") end
  out:write('"features":[')
  local count = layer == nlayers - 1 and (n - written) or per_layer
  local buf = {}
  for i = 1, count do
    written = written + 1
    buf[#buf + 1] = record(written)
    if #buf == 1000 or i == count then
      out:write(i > #buf and "," or "", table.concat(buf, ","))
      buf = {}
    end
  end
  out:write('],"attachments":[]')
  if order == "last" then out:write(',"id":', layer) end
  out:write("}")
end
out:write("]}")
out:close()
