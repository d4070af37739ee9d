-- A layer's schema changed at run time through the administrative
-- addToDefinition, deleteFromDefinition and updateDefinition operations
-- (emulator.definition, issue 37), in ArcGIS Server's and a hosted
-- service's spellings: an administrator only; the layer resource, the
-- service's layers resource and query show the new definition; existing
-- features get an added field's default and lose a deleted field; a
-- replica made before keeps synchronizing.
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local geoservices = require "geoservices"

local VALVE1 = "{3C5E7A90-1B2D-4F60-8A1C-000000000301}"

describe("the emulator's layer definition operations", function()
  local emu
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function() emu:reset() end)

  local function client(token)
    return geoservices.client{ url = emu.url, token = token, timeout = 10 }
  end
  local function admin(op, body, hosted)
    local c = client("admin-token")
    local path = hosted and "admin/services/Utilities/FeatureServer/2/" or "admin/services/Utilities.FeatureServer/2/"
    local doc, err = c:post(c:url_for(path .. op), { [op] = json.encode(body), f = "json" })
    c:close()
    return doc, err
  end
  local function field(name)
    local c = client("alice-token")
    local info = assert(c:layer_info("Utilities", 2))
    c:close()
    return info:field(name)
  end
  local function served()
    local c = client("alice-token")
    local out = helper.served_features(c, "Utilities", 2)
    c:close()
    return out
  end

  local STATUS = { name = "STATUS", type = "esriFieldTypeString", length = 10, alias = "Valve status",
                   defaultValue = "open", domain = { type = "codedValue", name = "ValveStatus",
                   codedValues = { { name = "Open", code = "open" }, { name = "Shut", code = "shut" } } } }

  it("adds a field: the resources list it, every feature holds its default", function()
    assert.is_nil(field("STATUS"))
    local doc = assert(admin("addToDefinition", { fields = { STATUS } }))
    assert.same({ success = true }, doc)
    local f = assert(field("STATUS"))
    assert.equal("Valve status", f.alias)
    assert.equal("ValveStatus", f.domain.name)
    local c = client("alice-token")
    local all = assert(c:post(c:url_for("Utilities/FeatureServer/layers"), { f = "json" }))
    c:close()
    local names = {}
    for _, l in ipairs(all.layers) do
      if l.id == 2 then for _, lf in ipairs(l.fields) do names[#names + 1] = lf.name end end
    end
    assert.same({ "OBJECTID", "GlobalID", "VALVEID", "TURNS", "STATUS" }, names)
    assert.equal(1, #all.tables) -- Inspections
    local n = 0
    for _, feature in pairs(served()) do
      n = n + 1
      assert.equal("open", feature.attributes.STATUS)
    end
    assert.is_true(n > 0)
  end)

  it("deletes a field (a hosted service's spelling): gone from the resource and every feature", function()
    assert.truthy(field("TURNS"))
    assert.same({ success = true }, assert(admin("deleteFromDefinition", { fields = { { name = "TURNS" } } }, true)))
    assert.is_nil(field("TURNS"))
    for _, feature in pairs(served()) do assert.is_nil(feature.attributes.TURNS) end
    assert.truthy(served()[VALVE1])
  end)

  it("updates a field's alias and domain", function()
    assert.same({ success = true }, assert(admin("updateDefinition", { fields = { { name = "TURNS", alias = "Turns",
      domain = { type = "range", name = "TurnsRange", range = { 0, 40 } } } } })))
    local f = assert(field("TURNS"))
    assert.equal("Turns", f.alias)
    assert.same({ 0, 40 }, f.domain.range)
    assert.equal("esriFieldTypeSmallInteger", f.type)
  end)

  it("changes a text field's length, never a field's type (the vendor's way: delete it, add it again)", function()
    assert.same({ success = true },
      assert(admin("updateDefinition", { fields = { { name = "VALVEID", length = 4 } } })))
    assert.equal(4, field("VALVEID").length)
    assert.equal("V-1", served()[VALVE1].attributes.VALVEID)
    local _, err = admin("updateDefinition", { fields = { { name = "TURNS", type = "esriFieldTypeDouble" } } })
    assert.truthy(tostring(err):find("Property type of field TURNS cannot be updated", 1, true), tostring(err))
    assert.equal("esriFieldTypeSmallInteger", field("TURNS").type)
    assert(admin("deleteFromDefinition", { fields = { { name = "TURNS" } } }))
    assert(admin("addToDefinition", { fields = { { name = "TURNS", type = "esriFieldTypeDouble" } } }))
    assert.equal("esriFieldTypeDouble", field("TURNS").type)
    assert.equal(json.null, served()[VALVE1].attributes.TURNS)
  end)

  it("is an administrator's: another user is refused and nothing changes", function()
    local c = client("alice-token")
    local doc = c:post(c:url_for("admin/services/Utilities.FeatureServer/2/addToDefinition"),
      { addToDefinition = json.encode{ fields = { STATUS } }, f = "json" })
    c:close()
    assert.is_nil(doc)
    assert.is_nil(field("STATUS"))
  end)

  it("refuses a field that exists, a system field, an unknown one: nothing changes", function()
    local _, err = admin("addToDefinition", { fields = { STATUS, { name = "TURNS", type = "esriFieldTypeInteger" } } })
    assert.truthy(tostring(err):find("Field TURNS already exists", 1, true), tostring(err))
    assert.is_nil(field("STATUS"))
    _, err = admin("deleteFromDefinition", { fields = { { name = "GlobalID" } } })
    assert.truthy(tostring(err):find("GlobalID cannot be deleted", 1, true), tostring(err))
    _, err = admin("updateDefinition", { fields = { { name = "NOPE", alias = "x" } } })
    assert.truthy(tostring(err):find("Field NOPE does not exist", 1, true), tostring(err))
    assert.truthy(field("GlobalID"))
  end)

  it("takes later edits by the new definition: a deleted field is not brought back, an add gets the default",
    function()
    local dir = helper.tmp_dir()
    local c = client("alice-token")
    local st = assert(geoservices.store.create(c, dir .. "/r.gpkg", { service = "Utilities", layers = { 2 },
      replicaName = "racer", syncModel = "perLayer" }, { timeout = 30, poll_interval = 0.05 }))
    local rid = st:replica().replicaID
    assert(admin("deleteFromDefinition", { fields = { { name = "TURNS" } } }))
    assert(admin("addToDefinition", { fields = { STATUS } }))
    local NEW = "{3C5E7A90-1B2D-4F60-8A1C-0000000009A1}"
    -- an edit made before the change (it names TURNS, not STATUS) synchronized by another replica
    emu:control("race", { service = "Utilities", replicaID = rid, edits = { { id = 2, features = {
      adds = { { attributes = { GlobalID = NEW, VALVEID = "V-9", TURNS = 4 }, geometry = { x = -122.4, y = 37.7 } } },
      updates = { { attributes = { GlobalID = VALVE1, VALVEID = "V-1r", TURNS = 7 } } } } } } })
    assert(st:sync(c, { timeout = 30, poll_interval = 0.05 }))
    local features = served()
    assert.equal("V-1r", features[VALVE1].attributes.VALVEID)
    assert.is_nil(features[VALVE1].attributes.TURNS)
    assert.is_nil(features[NEW].attributes.TURNS)
    assert.equal("open", features[NEW].attributes.STATUS)
    st:close()
    c:close()
    os.execute("rm -rf " .. helper.shell_quote(dir))
  end)

  it("keeps a replica made before synchronizing; the schema change is no data change to download", function()
    local dir = helper.tmp_dir()
    local c = client("alice-token")
    local st = assert(geoservices.store.create(c, dir .. "/a.gpkg", { service = "Utilities", layers = { 2 },
      replicaName = "before", syncModel = "perLayer" }, { timeout = 30, poll_interval = 0.05 }))
    assert(admin("addToDefinition", { fields = { STATUS } }))
    local result = assert(st:sync(c, { timeout = 30, poll_interval = 0.05 }))
    assert.equal(0, result.applied)
    st:close()
    c:close()
    os.execute("rm -rf " .. helper.shell_quote(dir))
  end)
end)
