-- The replica store in five steps (issue 15): create a replica into a
-- GeoPackage, edit it offline, sync it, show what GDAL sees.
--   GEOSERVICES_URL=http://127.0.0.1:PORT/server lua5.4 examples/store_tour.lua
local geoservices = require "geoservices"

local client = geoservices.client{ url = assert(os.getenv("GEOSERVICES_URL"), "GEOSERVICES_URL"),
                                   token = "alice-token" }
local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))
local path = dir .. "/crew-1.gpkg"

-- 1. createReplica into a store (async by default; the job followed)
local st = assert(geoservices.store.create(client, path, {
  service = "Parcels", layers = { 0, 1 }, replicaName = "crew-1", syncModel = "perReplica",
}, { on_status = function(s) print("  job " .. tostring(s.status)) end, poll_interval = 0.1 }))
print(st)

-- 2. offline edits: applied at once, queued for upload
local gid = assert(st:add(0, { attributes = { APN = "999-000-01", OWNER = "Field Crew" },
                               geometry = { x = -117.19, y = 34.05 } }))
assert(st:update(0, { attributes = { GlobalID = gid, ACRES = 0.5 } }))
print(("queued: %d edit(s)"):format(#st:pending()))

-- 3. a second store of the same service sees them after both sync
local other = assert(geoservices.store.create(client, dir .. "/crew-2.gpkg", {
  service = "Parcels", layers = { 0, 1 }, replicaName = "crew-2", syncModel = "perLayer", async = false,
}))
local r = assert(st:sync(client))
print(r, ("(%d uploaded)"):format(r.uploaded))
r = assert(other:sync(client))
print(r, ("(%d applied)"):format(r.applied))
print("crew-2 has it:")
geoservices.pp(other:get(0, gid).attributes)
other:close()
st:close()

-- 4. what GDAL sees
print()
os.execute("ogrinfo -so -al " .. path .. " | grep -E 'Layer name|Geometry:|Feature Count|Layer SRS WKT' ")
os.execute("rm -rf " .. dir)
