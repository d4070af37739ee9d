-- Domains and ranges are checked before upload (issue 36): a value outside
-- its field's coded-value domain or range, as the service describes it, is
-- refused locally, naming the layer, the GlobalID, the field and the rule;
-- the edit stays queued and is listed by `pending` and `status`; nothing
-- else is held back, and once fixed it goes with the next sync.
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local MAIN_1 = "{3C5E7A90-1B2D-4F60-8A1C-000000000101}"
local MAIN_2 = "{3C5E7A90-1B2D-4F60-8A1C-000000000102}"
local ZONE_1 = "{3C5E7A90-1B2D-4F60-8A1C-000000000201}"

local function named(list, name)
  for _, item in ipairs(list) do
    if item.name == name then return item end
  end
  error("no " .. name)
end

describe("a store checks the service's domains before upload", function()
  local emu, dir, world_file

  setup(function()
    dir = helper.tmp_dir()
    -- the example world's Utilities, a coded-value domain on Mains.DIAMETER and a range on Pressure zones.PRESSURE
    local world = json.decode(helper.read_all("examples/data/world.json"))
    local layers = world.featureServices.Utilities.layers
    named(named(layers, "Mains").fields, "DIAMETER").domain = { type = "codedValue", name = "MainDiameter",
      codedValues = { { name = "6 in", code = 6 }, { name = "8 in", code = 8 }, { name = "12 in", code = 12 } } }
    named(named(layers, "Pressure zones").fields, "PRESSURE").domain = { type = "range", name = "ZonePressure",
      range = { 0, 100 } }
    world_file = dir .. "/world.json"
    helper.write_file(world_file, json.encode(world))
    emu = helper.start_emulator{ data = world_file }
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. helper.shell_quote(dir))
  end)

  local function server(layer, gid)
    return emu:control("state").featureServices.Utilities.layers[tostring(layer)].features[gid].attributes
  end

  it("refuses a code the domain does not list and a number out of its range, sends the rest", function()
    local client = require("geoservices").client{ url = emu.url, token = "alice-token", timeout = 30 }
    local st = assert(require("geoservices").store.create(client, dir .. "/crew.gpkg", { service = "Utilities",
      layers = { 0, 1 }, replicaName = "crew", syncModel = "perLayer" }, { poll_interval = 0.05, timeout = 30 }))
    assert(st:update(0, { attributes = { GlobalID = MAIN_1, DIAMETER = 9 } }))
    assert(st:update(1, { attributes = { GlobalID = ZONE_1, PRESSURE = 150 } }))
    assert(st:update(0, { attributes = { GlobalID = MAIN_2, DIAMETER = 6, MATERIAL = "PVC" } }))
    local result = assert(st:sync(client))
    -- the valid edit went; the two others did not
    assert.same({ 6, "PVC" }, { server(0, MAIN_2).DIAMETER, server(0, MAIN_2).MATERIAL })
    assert.equal(8, server(0, MAIN_1).DIAMETER)
    assert.equal(62.5, server(1, ZONE_1).PRESSURE)
    assert.same({ 1, 2 }, { result.summary.sent, result.summary.refused })
    local by = {}
    for _, r in ipairs(result.refused) do by[r.globalId] = r end
    assert.same({ "Mains", "update" }, { by[MAIN_1].layer_name, by[MAIN_1].op })
    assert.equal("field DIAMETER holds 9, not a code of its domain MainDiameter (6 6 in, 8 8 in, 12 12 in)",
      by[MAIN_1].rule)
    assert.equal("field PRESSURE holds 150, outside the range 0 to 100 of its domain ZonePressure", by[ZONE_1].rule)
    assert.truthy(tostring(result.refused):find("2 local edits refused, not sent", 1, true))
    -- kept queued, listed by pending and counted by status
    local pending = assert(st:pending())
    assert.equal(2, #pending)
    assert.equal(2, st:status().refused)
    local path = st.path
    st:close()
    local r = helper.run_cli{ "pending", path }
    assert.truthy(r.out:find("(refused here, not sent: field DIAMETER holds 9, not a code of its domain MainDiameter",
      1, true), r.out)
    r = helper.run_cli{ "status", path }
    assert.truthy(r.out:find("2 refused here (geoservices pending", 1, true), r.out)
    -- fixed, it goes
    st = assert(require("geoservices").store.open(path))
    assert(st:update(0, { attributes = { GlobalID = MAIN_1, DIAMETER = 12 } }))
    result = assert(st:sync(client))
    assert.same({ 1, 1 }, { result.summary.sent, result.summary.refused })
    assert.equal(12, server(0, MAIN_1).DIAMETER)
    st:close()
  end)
end)
