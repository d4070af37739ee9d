-- Finding services by name (issue 29): client:list_services reads the
-- administrator directory's services resource (`admin/services`: the root
-- folder's services and its folders) and each folder's resource
-- (`admin/services/<folder>`, whose entries carry the service's id, as the
-- vendor's Enterprise administration reference shows), and
-- `geoservices services --search TEXT` prints the matches with the ids that
-- `geoservices services ID...` takes. Against the emulator.
local geoservices = require "geoservices"
local helper = require "spec.helper"

local PARCELS_ID = "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c"

describe("finding services by name", function()
  local emu, dir
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function() dir = helper.tmp_dir() end)
  after_each(function() os.execute("rm -rf " .. helper.shell_quote(dir)) end)

  it("client:list_services: every service of every folder, with its folder, type and id", function()
    local c <close> = geoservices.client{ url = emu.url, token = "admin-token" }
    local list, err = c:list_services()
    assert.is_table(list, tostring(err))
    local by_name = {}
    for _, s in ipairs(list) do by_name[s.serviceName] = s end
    assert.same({ "Hosted", "FeatureServer", PARCELS_ID },
      { by_name.Parcels.folderName, by_name.Parcels.type, by_name.Parcels.id })
    assert.equal("Network", by_name.Routing.folderName)
    assert.is_table(by_name.Basemap)
    local found = assert(c:list_services{ search = "parc" })
    assert.equal(1, #found)
    assert.equal("Parcels", found[1].serviceName)
    assert.matches("Parcels", tostring(found))
  end)

  it("needs a signed-in user, like every resource of the administrator directory", function()
    local c <close> = geoservices.client{ url = emu.url }
    local list, err = c:list_services()
    assert.is_nil(list)
    assert.equal("auth", err.kind)
  end)

  it("geoservices services --search TEXT prints the matches and their ids; --json one event each", function()
    local run = function(...)
      return helper.run_cli({ "--url", emu.url, "--token", "admin-token", ... }, { XDG_CONFIG_HOME = dir })
    end
    local r = run("services", "--search", "PARCELS")
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find("Parcels", 1, true), r.out)
    assert.truthy(r.out:find(PARCELS_ID, 1, true), r.out)
    assert.falsy(r.out:find("Routing", 1, true), r.out)
    local j = run("--json", "services", "--search", "s")
    assert.equal(0, j.code, j.out .. j.err)
    local events = helper.events(j.out)
    assert.equal(2, #helper.find_events(events, "service")) -- Parcels, Basemap: a name holding "s"
    local none = run("services", "--search", "nothing-like-it")
    assert.equal(0, none.code, "no match: an empty list is an answer (issue 39)")
    local neither = run("services")
    assert.equal(2, neither.code, "ids or --search")
  end)
end)
