-- A client process for the store crash and lock specs and the torture:
-- synchronizes one replica store and prints one JSON line with the
-- outcome. Killed with SIGKILL at any moment by the spec that started it.
--   lua5.4 spec/support/store_child.lua URL STORE.gpkg [sync|async|hold] [lock_timeout]
-- "hold": holds a write transaction on the store instead, until the file
-- STORE.gpkg.release exists (the spec's word: a hold for a time would end
-- under a spec stalled that long) or 60 seconds have passed.
-- Environment (the torture, spec/torture/run.lua): TORTURE_MARKERS=1 prints
-- phase markers, TORTURE_PAUSE=<marker> pauses at one (spec/torture/markers.lua);
-- TORTURE_TRANSPORT=url|embedded asks for that transportType (otherwise the
-- store chooses); TORTURE_FORGET_JOURNAL=1 gives the sync a journal that
-- forgets (spec/torture/forgetful.lua: the mutation check); TORTURE_LATE_WINDOW=<s> the
-- sync's late_window; TORTURE_ADOPT_COPY=1
-- syncs with adopt_copy (that check's store runs its full count).
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local forgetful = require "spec.torture.forgetful"
local markers = require "spec.torture.markers"
local reported = require "spec.torture.reported"

local url, path, mode, lock_timeout = arg[1], arg[2], arg[3] or "sync", tonumber(arg[4])
local TRANSPORTS = { url = "esriTransportTypeUrl", embedded = "esriTransportTypeEmbedded" }
local transport = os.getenv("TORTURE_TRANSPORT")
local st = assert(geoservices.store.open(path))
local client = geoservices.client{ url = url, token = "alice-token", timeout = 60 }
markers.watch(client, { embedded = transport == "embedded" and mode ~= "async" })
io.stdout:write("started\n")
io.stdout:flush()
if mode == "hold" then
  assert(st:transaction(function()
    assert(st.db:run("UPDATE gpkgext_geoservices_replica SET replica_name = replica_name WHERE id = 1"))
    io.stdout:write("holding\n")
    io.stdout:flush()
    for _ = 1, 3000 do
      local released = io.open(path .. ".release", "rb")
      if released then
        released:close()
        break
      end
      geoservices.sleep(0.02)
    end
    return true
  end))
  os.exit(0)
end
local result, err = st:sync(client, {
  params = { async = mode == "async" or nil, transportType = TRANSPORTS[transport] }, poll_interval = 0.05,
  lock_timeout = lock_timeout, timeout = 120, on_fill = markers.on_fill(), journal = forgetful.option(),
  adopt_copy = os.getenv("TORTURE_ADOPT_COPY") == "1" or nil, -- the torture's journal-off check
  late_window = tonumber(os.getenv("TORTURE_LATE_WINDOW") or ""), -- the gateway modes' (spec/torture/modes.lua)
})
markers.mark("done")
io.stdout:write(json.encode{
  ok = result ~= nil, kind = err and err.kind, message = err and err.message,
  uploaded = result and result.uploaded, resolved = result and result.resolved ~= nil,
  reported = reported.of(result),
}, "\n")
io.stdout:flush()
os.exit(result and 0 or 1)
