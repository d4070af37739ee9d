-- A client process for the crash and lock specs and the torture:
-- synchronizes one replica state file and prints one JSON line with the
-- outcome. Killed with SIGKILL at any moment by the spec that started it.
--   lua5.4 spec/support/sync_child.lua URL STATE EDITS.json|- [sync|async][-resend] [lock_timeout]
-- Environment (the torture, spec/torture/run.lua): TORTURE_MARKERS=1 prints
-- phase markers, TORTURE_PAUSE=<marker> pauses at one (spec/torture/markers.lua);
-- TORTURE_TRANSPORT=url|embedded asks for that transportType (otherwise the
-- client chooses); TORTURE_LATE_WINDOW=<s> the sync's late_window; TORTURE_FORGET_JOURNAL=1
-- gives the sync a journal that
-- forgets (spec/torture/forgetful.lua: the mutation check).
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local forgetful = require "spec.torture.forgetful"
local markers = require "spec.torture.markers"
local reported = require "spec.torture.reported"

local url, state, edits_path, mode, lock_timeout = arg[1], arg[2], arg[3], arg[4], tonumber(arg[5])
local edits
if edits_path and edits_path ~= "-" then
  local f = assert(io.open(edits_path, "rb"))
  edits = f:read("a")
  f:close()
end
local TRANSPORTS = { url = "esriTransportTypeUrl", embedded = "esriTransportTypeEmbedded" }
local transport = os.getenv("TORTURE_TRANSPORT")
local client = geoservices.client{ url = url, token = "alice-token", timeout = 60 }
mode = mode or "sync"
local async = mode:match("^async") and true or nil
markers.watch(client, { embedded = transport == "embedded" and not async, commit_after_body = true })
io.stdout:write("started\n")
io.stdout:flush()
local result, err = client:sync(state, edits, {
  params = { async = async, transportType = TRANSPORTS[transport] }, poll_interval = 0.05,
  lock_timeout = lock_timeout, timeout = 120, resend = mode:match("%-resend$") and true or nil,
  journal = forgetful.option(), late_window = tonumber(os.getenv("TORTURE_LATE_WINDOW") or ""),
})
markers.mark("done")
io.stdout:write(json.encode{
  ok = result ~= nil, kind = err and err.kind, message = err and err.message,
  generation = result and result.replicaServerGen, succeeded = result and result.succeeded,
  already_applied = result and #(result.already_applied or {}), resolved = result and result.resolved ~= nil,
  reported = reported.of(result or err), -- a failed sync reports what it read back in its error
}, "\n")
io.stdout:flush()
os.exit(result and 0 or 1)
