-- What a QGIS user sees of a store made from the emulator (issue 28,
-- `make test-qgis`, not in `make test`): through QGIS's own OGR provider
-- (spec/qgis/qgis_look.py, headless), a coded-value domain is a value map of
-- the server's names and codes, a range domain a range widget; a feature's
-- attachments, reached through a relation made from the store's
-- gpkgext_relations row (QGIS 3.22 discovers none itself), hold the server's
-- bytes; every curve feature is a curve, non-empty, and drawn.
-- luacheck: std +busted
-- (run by `make test-qgis` alone: its name keeps it out of busted's default pattern)
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local run = helper.run_shell

local VALVE_1 = "{3C5E7A90-1B2D-4F60-8A1C-000000000301}"
local ARC_MAIN = "{3C5E7A90-1B2D-4F60-8A1C-000000000103}"
local ROUND_ZONE = "{3C5E7A90-1B2D-4F60-8A1C-000000000203}"
-- where the lead looks at one of QGIS's drawings
local SHOWN_PNG = "/tmp/qgis_curves.png"

local function named(list, name)
  for _, item in ipairs(list) do
    if item.name == name then return item end
  end
  error("no " .. name)
end

-- The example world's Utilities service, with domains on two fields, a main
-- bent by a circular arc and a round pressure zone with a round hole (Valves
-- keep their two attachments, whose bytes the emulator makes up from their size).
local function data_file(dir)
  local world = json.decode(helper.read_all("examples/data/world.json"))
  local layers = world.featureServices.Utilities.layers
  local mains, zones = named(layers, "Mains"), named(layers, "Pressure zones")
  named(mains.fields, "DIAMETER").domain = { type = "codedValue", name = "MainDiameter", codedValues = {
    { name = "6 in", code = 6 }, { name = "8 in", code = 8 }, { name = "12 in", code = 12 } } }
  named(zones.fields, "PRESSURE").domain = { type = "range", name = "ZonePressure", range = { 0, 150.5 } }
  for _, f in ipairs(mains.features) do
    if f.attributes.GlobalID == ARC_MAIN then
      f.geometry = { curvePaths = { { { -117.188, 34.051 }, { c = { { -117.184, 34.051 }, { -117.186, 34.053 } } },
        { -117.182, 34.052 } } } }
    end
  end
  zones.features[#zones.features + 1] = { attributes = { GlobalID = ROUND_ZONE, ZONE = "Z-Round", PRESSURE = 70 },
    geometry = { curveRings = {
      { { -117.18, 34.05 }, { c = { { -117.17, 34.05 }, { -117.175, 34.055 } } },
        { c = { { -117.18, 34.05 }, { -117.175, 34.045 } } } },
      { { -117.177, 34.05 }, { c = { { -117.173, 34.05 }, { -117.175, 34.048 } } },
        { c = { { -117.177, 34.05 }, { -117.175, 34.052 } } } } } } }
  local path = dir .. "/world.json"
  helper.write_file(path, json.encode(world))
  return path
end

-- QGIS's answer: the last line of its output, JSON
local function qgis_look(path, png_dir)
  local out, ok = run(("QT_QPA_PLATFORM=offscreen /usr/bin/python3 spec/qgis/qgis_look.py %s %s")
    :format(q(path), q(png_dir)))
  local last = out:match("([^\n]+)\n?$")
  local answer = ok and last and json.decode(last)
  assert(type(answer) == "table", out)
  return answer
end

local function sha256(bytes)
  local path = helper.tmp_name()
  helper.write_file(path, bytes)
  local h = run("sha256sum " .. q(path)):match("^(%x+)")
  os.remove(path)
  return h
end

describe("a store seen in QGIS", function()
  local emu, dir, path, look

  local function client() return geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 } end

  setup(function()
    dir = helper.tmp_dir()
    emu = helper.start_emulator{ data = data_file(dir) }
    path = dir .. "/utilities.gpkg"
    local st = assert(geoservices.store.create(client(), path, { service = "Utilities", layers = { 0, 1, 2 },
      replicaName = "qgis-look", syncModel = "perLayer", returnAttachments = true }, { timeout = 30 }))
    assert.same({}, st.created.attachments.failed)
    st:close()
    look = qgis_look(path, dir)
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. q(dir))
  end)

  it("shows a coded-value domain as a value map of the server's names, a range domain as a range", function()
    local diameter = look.widgets["Mains.DIAMETER"]
    assert.equal("ValueMap", diameter and diameter.type, json.encode(look.widgets))
    assert.same({ { "12 in", "12" }, { "6 in", "6" }, { "8 in", "8" } }, diameter.map)
    local pressure = look.widgets["Pressure_zones.PRESSURE"]
    assert.same({ "Range", 0, 150.5 }, { pressure.type, pressure.Min, pressure.Max })
  end)

  it("shows no value map once the store's constraint rows are gone (the check above can fail)", function()
    local copy = dir .. "/no-constraints.gpkg"
    assert(os.execute(("cp %s %s"):format(q(path), q(copy))))
    assert.equal("", run(("sqlite3 %s %s"):format(q(copy), q("DELETE FROM gpkg_data_column_constraints"))))
    assert.is_nil(qgis_look(copy, helper.tmp_dir()).widgets["Mains.DIAMETER"])
  end)

  it("reaches a feature's attachments through the store's relation, with the server's bytes", function()
    assert.equal(1, #look.relations.media, json.encode(look.relations))
    local media = look.relations.media[1]
    assert.same({ "Valves", true }, { media.base, media.valid }, media.error)
    assert.equal(2, #media.attachments)
    local c = client()
    for _, a in ipairs(media.attachments) do
      assert.equal(VALVE_1, a.GlobalID)
      assert.is_true(a.mapped, a.name) -- the link QGIS follows is a row of the extension's mapping table
      local url = run(("sqlite3 %s %s"):format(q(path),
        q(("SELECT url FROM geoservices_attachments WHERE name = '%s'"):format(a.name)))):gsub("\n$", "")
      local served = assert(c:download(url))
      assert.equal(#served, a.size, a.name)
      assert.equal(sha256(served), a.sha256, a.name)
    end
    c:close()
  end)

  it("draws every curve feature, each a curve type where the server sent a curve", function()
    local CURVE_TYPE = { CircularString = true, CompoundCurve = true, CurvePolygon = true, MultiCurve = true,
                         MultiSurface = true }
    local function curve_type(t) return CURVE_TYPE[(t:gsub("Z?M?$", ""))] or false end
    local curved, names = {}, {}
    for name, layer in pairs(look.curves) do
      names[#names + 1] = name
      assert.is_true(curve_type(layer.type), name .. " " .. layer.type)
      for _, f in ipairs(layer.features) do
        assert.is_false(f.empty, f.GlobalID)
        assert.is_true(f.pixels > 0, f.GlobalID .. " is not drawn")
        if f.curved then curved[f.GlobalID] = f.type end
      end
    end
    table.sort(names)
    assert.same({ "Mains", "Pressure_zones" }, names)
    assert.is_true(curve_type(curved[ARC_MAIN] or "none"), "the arc main: " .. tostring(curved[ARC_MAIN]))
    assert.is_true(curve_type(curved[ROUND_ZONE] or "none"), "the round zone: " .. tostring(curved[ROUND_ZONE]))
    assert(os.execute(("cp %s %s"):format(q(look.curves.Mains.png), q(SHOWN_PNG))))
  end)
end)
