-- Batch synchronization: syncs every replica state file of a directory and
-- prints a per-replica summary (uploaded, downloaded, failed edits, new
-- generation). Edits for a replica are read from "<state>.edits.json" when
-- that file exists (a 2.1 edits array).
--
--   lua5.4 examples/batch_sync.lua [DIRECTORY]
--
-- Without a directory it prepares one in a temporary place with the
-- emulator's example replicas (that is what `make demo` runs).
-- GEOSERVICES_URL and GEOSERVICES_TOKEN give the server.
local geoservices = require "geoservices"

local url = os.getenv("GEOSERVICES_URL") or "http://127.0.0.1:8080/server"
local client = geoservices.client{ url = url, token = os.getenv("GEOSERVICES_TOKEN") }

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return text
end

-- The emulator's example replicas, with a few edits for the first crew.
local function prepare_example(dir)
  local states = {
    ["crew-1.json"] = { service = "Parcels", replicaID = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}",
                        model = "perReplica", replicaServerGen = 1, syncDirection = "bidirectional" },
    ["crew-2.json"] = { service = "Parcels", replicaID = "{5E1A0C2B-2222-4A5B-9C8D-000000000002}",
                        model = "perReplica", replicaServerGen = 1, syncDirection = "bidirectional" },
    ["office.json"] = { service = "Parcels", replicaID = "{5E1A0C2B-3333-4A5B-9C8D-000000000003}",
                        model = "perLayer", layers = { { id = 0, serverGen = 1, syncDirection = "download" },
                                                       { id = 1, serverGen = 1, syncDirection = "bidirectional" } } },
  }
  for name, state in pairs(states) do write(dir .. "/" .. name, geoservices.json.encode(state)) end
  local e = geoservices.edits()
  e:add(0, { attributes = { APN = "101-200-04", OWNER = "Ada Byron", ACRES = 0.42,
                            UPDATED = geoservices.date{ year = 2026, month = 11, day = 21 } },
             geometry = { x = -117.19701234567891, y = 34.05745678901234 } })
  e:update(0, { attributes = { GlobalID = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}", OWNER = "Luis Ortega Ruiz" } })
  e:update(0, { attributes = { GlobalID = "{DEADBEEF-0000-4000-8000-000000000000}", OWNER = "nobody" } }) -- fails
  write(dir .. "/crew-1.json.edits.json", e:encode())
end

local dir = arg[1]
if not dir then
  dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'"))
  prepare_example(dir)
end

local files = {}
local ls = assert(io.popen("ls -1 '" .. dir .. "'"))
for name in ls:lines() do
  if name:match("%.json$") and not name:match("%.edits%.json$") then files[#files + 1] = dir .. "/" .. name end
end
ls:close()
table.sort(files)

print(("%-10s %-10s %9s %10s %7s  %s"):format("replica", "model", "uploaded", "downloaded", "failed", "generation"))
local failures = 0
for _, path in ipairs(files) do
  local name = path:match("([^/]+)%.json$")
  local replica, err = geoservices.replica(path)
  local result
  if replica then
    local edits = read(path .. ".edits.json")
    result, err = client:sync(replica, edits)
  end
  if result then
    local gen = tostring(result.replicaServerGen)
    if result.layerServerGens then
      local parts = {}
      for _, l in ipairs(result.layerServerGens) do parts[#parts + 1] = l.id .. ":" .. l.serverGen end
      gen = table.concat(parts, " ")
    end
    print(("%-10s %-10s %9d %10d %7d  %s"):format(name, replica.model, result.succeeded, result.downloaded,
      #result.failed_edits, gen))
    for _, f in ipairs(result.failed_edits) do
      print(("    failed %s of %s %s in layer %d: %s (code %s)"):format(f.op, f.target, f.globalId, f.layer,
        f.description, tostring(f.code)))
    end
    if result.failed_edits[1] == nil then os.remove(path .. ".edits.json") end
  else
    failures = failures + 1
    print(("%-10s error: %s"):format(name, tostring(err)))
  end
end
print(("%d replicas synchronized, %d failed; state files in %s"):format(#files - failures, failures, dir))
os.exit(failures == 0 and 0 or 1)
