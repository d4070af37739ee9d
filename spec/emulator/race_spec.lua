-- POST /_emulator/race: another replica's edits synchronized right before
-- the next request of a route, so that a spec can put another crew's change
-- between what a client read and what it sends. Runs once; a race naming
-- an unknown service or without edits is refused.
local core = require "geoservices.core"
local json = require "geoservices.base.json"
local transport = require "geoservices.net.transport"
local helper = require "spec.helper"

local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local CREW2 = "{5E1A0C2B-2222-4A5B-9C8D-000000000002}"
local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"

local function sync(emu, features)
  local fields = { f = "json", replicaID = CREW1, replicaServerGen = "1", transportType = "esriTransportTypeEmbedded",
                   edits = json.encode{ { id = 0, features = features } } }
  local parts = {}
  for k, v in pairs(fields) do parts[#parts + 1] = core.urlencode(k) .. "=" .. core.urlencode(v) end
  local resp = assert(transport.perform(emu.driver, { url = emu.url .. "/Parcels/FeatureServer/synchronizeReplica",
    method = "POST", body = table.concat(parts, "&"), content_type = "application/x-www-form-urlencoded",
    timeout_ms = 10000 }))
  return json.decode(resp.body)
end

describe("emulator: a race (another replica's edits before the next request)", function()
  local emu
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function() emu:reset() end)

  it("applies them right before the next synchronizeReplica, once", function()
    emu:control("race", { service = "Parcels", replicaID = CREW2,
                          edits = { { id = 0, features = { deleteIds = { PARCEL1 } } } } })
    assert.is_not_nil(emu:control("state").featureServices.Parcels.layers["0"].features[PARCEL1]) -- not yet
    local body = sync(emu, { updates = { { attributes = { GlobalID = PARCEL1, OWNER = "crew 1" } } } })
    assert.is_table(body.error) -- the feature is gone: the update is refused (rollbackOnFailure)
    assert.truthy(table.concat(body.error.details, " "):find(PARCEL1, 1, true))
    local function log_ops()
      local ops = {}
      for _, e in ipairs(emu:control("changelog?service=Parcels").entries) do
        ops[#ops + 1] = e.origin .. " " .. e.op .. (e.refused and " refused" or "")
      end
      return ops
    end
    assert.same({ CREW2 .. " delete", CREW1 .. " update refused" }, log_ops())
    emu:control("race", { service = "Parcels", replicaID = CREW2,
                          edits = { { id = 0, features = { updates = { { attributes = {
                            GlobalID = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E03}", OWNER = "crew 2" } } } } } } })
    sync(emu, {}) -- the first race ran once: only the second one runs now
    assert.same({ CREW2 .. " delete", CREW1 .. " update refused", CREW2 .. " update" }, log_ops())
  end)

  it("refuses a race naming no service, or without edits", function()
    local drv = emu.driver
    for _, spec in ipairs{ { service = "Nope", replicaID = CREW2, edits = {} },
                           { service = "Parcels", replicaID = CREW2 } } do
      local resp = assert(transport.perform(drv, { url = emu.root .. "/_emulator/race", method = "POST",
        body = json.encode(spec), content_type = "application/json", timeout_ms = 5000 }))
      assert.equal(400, resp.status)
    end
  end)
end)
