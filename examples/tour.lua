-- A short tour of lua-geoservices against the emulator (run by `make demo`).
-- GEOSERVICES_URL is the emulator's {base_url}, set by run_with_emulator.sh.
local geoservices = require "geoservices"

local url = os.getenv("GEOSERVICES_URL") or "http://127.0.0.1:8080/server"

local admin = geoservices.client{ url = url, token = "admin-token" }
print("client:   " .. tostring(admin))

print("\n== getServicesById")
local services = assert(admin:get_services_by_id{
  "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c", "7a1e3c5b2d4f4e6a9c8b7a6f5e4d3c2b",
})
print(services)
for _, s in ipairs(services) do
  print("  " .. tostring(s))
  for _, ext in ipairs(s.extensions) do
    if ext.typeName == "FeatureServer" then
      print(("    FeatureServer sync enabled: %s, max records: %s"):format(
        ext.properties.syncEnabled, ext.properties.maxRecordCount))
    end
  end
end

print("\n== an unknown id is reported by the server")
local _, err = admin:get_services_by_id("no-such-service")
print("  " .. tostring(err))

print("\n== bad input is refused before anything is sent")
_, err = admin:get_services_by_id{}
print("  " .. tostring(err))

print("\n== notebooks/snapshots/list as the owner (alice) and as another user (bob)")
for _, who in ipairs{ "alice", "bob" } do
  local c = geoservices.client{ url = url, token = who .. "-token" }
  local list = assert(c:list_snapshots("nb-street-trees"))
  print(("  %-5s sees %s"):format(who, tostring(list)))
end

print("\n== a user without the notebook privilege")
_, err = geoservices.client{ url = url, token = "viewer-token" }:list_snapshots("nb-street-trees")
print("  " .. tostring(err))

print("\n== an expired token refreshed once through a token provider")
local calls = 0
local refreshing = geoservices.client{ url = url, token = function()
  calls = calls + 1
  return calls == 1 and "expired-token" or "alice-token"
end }
local list = assert(refreshing:list_snapshots("nb-street-trees"))
print(("  %s (token provider called %d times)"):format(tostring(list), calls))
