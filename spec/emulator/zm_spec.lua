-- The emulator's layer resource says what its data holds (issue 41): hasZ
-- and hasM as the world file sets them for the layer, else as its features'
-- geometries show; the example world's Electric service has 3D measured
-- poles (the world silent) and Z/M lines (declared).
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote

-- The example world with changes made to it by `edit(world)`, written to dir.
local function world_file(dir, name, edit)
  local world = json.decode(helper.read_all("examples/data/world.json"))
  edit(world)
  local path = dir .. "/" .. name .. ".json"
  helper.write_file(path, json.encode(world))
  return path
end

local function layer_named(world, service, name)
  for _, l in ipairs(world.featureServices[service].layers) do
    if l.name == name then return l end
  end
  error("no layer " .. name)
end

describe("the emulator's layer resource declares Z and M (issue 41)", function()
  local emu, dir

  setup(function()
    dir = helper.tmp_dir()
    emu = helper.start_emulator()
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. q(dir))
  end)

  local function zm(e, service, id)
    local c = geoservices.client{ url = e.url, timeout = 10 }
    local info = assert(c:layer_info(service, id))
    return { hasZ = info.hasZ, hasM = info.hasM }
  end

  it("as the features show when the world is silent, as it says when it says", function()
    assert.same({ hasZ = true, hasM = true }, zm(emu, "Electric", 0)) -- poles: x, y, z, m
    assert.same({ hasZ = true, hasM = true }, zm(emu, "Electric", 1)) -- lines: declared
    assert.same({ hasZ = false, hasM = false }, zm(emu, "Utilities", 0)) -- 2D mains
    assert.same({ hasZ = false, hasM = false }, zm(emu, "Utilities", 3)) -- a table
  end)

  it("the world's setting wins over the features; a geometry's own flags and extra numbers count", function()
    local path = world_file(dir, "declared", function(world)
      local poles = layer_named(world, "Electric", "Poles")
      poles.hasZ, poles.hasM = false, false -- a service that under-declares
      local lines = layer_named(world, "Electric", "Lines")
      lines.hasZ, lines.hasM = nil, nil -- silent: [x, y, z, m] coordinates show both
      local mains = layer_named(world, "Utilities", "Mains")
      mains.features[1].geometry = { hasM = true, paths = { { { 1, 2, 3 }, { 4, 5, 6 } } } } -- its own flag
      local zones = layer_named(world, "Utilities", "Pressure zones")
      zones.features[1].geometry.rings[1][1][3] = 9.5 -- one third number, no flags: a Z
    end)
    local e = helper.start_emulator{ data = path }
    local ok, err = pcall(function()
      assert.same({ hasZ = false, hasM = false }, zm(e, "Electric", 0))
      assert.same({ hasZ = true, hasM = true }, zm(e, "Electric", 1))
      assert.same({ hasZ = false, hasM = true }, zm(e, "Utilities", 0))
      assert.same({ hasZ = true, hasM = false }, zm(e, "Utilities", 1))
    end)
    e:stop()
    assert(ok, err)
  end)
end)
