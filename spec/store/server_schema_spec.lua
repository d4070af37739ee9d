-- A field the service has and the store was not made with (issue 37: a
-- field added on the server since the replica was created): the download
-- cannot keep its values, and the sync says so, naming the layer and the
-- field, and what gives it (a new replica), instead of dropping them
-- silently. Here the world's Valves layer declares no TURNS while its
-- features carry it, as a layer resource read before the field was added.
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local run = helper.run_shell

describe("a field added on the server since the store was made", function()
  local emu, dir
  setup(function()
    dir = helper.tmp_dir()
    local world = json.decode(helper.read_all(helper.ROOT .. "/examples/data/world.json"))
    for _, layer in ipairs(world.featureServices.Utilities.layers) do
      if layer.name == "Valves" then
        local kept = {}
        for _, f in ipairs(layer.fields) do
          if f.name ~= "TURNS" then kept[#kept + 1] = f end
        end
        layer.fields = kept
      end
    end
    helper.write_file(dir .. "/world.json", json.encode(world))
    emu = helper.start_emulator{ data = dir .. "/world.json" }
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. q(dir))
  end)

  it("is named by the sync that downloads its values, with what gives it", function()
    local c = require("geoservices").client{ url = emu.url, token = "alice-token", timeout = 30 }
    local function create(name)
      local st = assert(require("geoservices").store.create(c, dir .. "/" .. name .. ".gpkg", { service = "Utilities",
        layers = { 2 }, replicaName = name, syncModel = "perLayer" }, { timeout = 30, poll_interval = 0.05 }))
      local path = st.path
      st:close()
      return path
    end
    local a, b = create("a"), create("b")
    assert.equal("0", (run("sqlite3 " .. q(a) .. " " .. q("SELECT count(*) FROM pragma_table_info('Valves') "
      .. "WHERE name = 'TURNS'")):gsub("%s+$", "")))
    local env = { GEOSERVICES_URL = emu.url, GEOSERVICES_TOKEN = "alice-token" }
    local out, ok = run(("ogrinfo -q -sql %s %s"):format(q("UPDATE Valves SET VALVEID = 'V-1b' WHERE fid = 1"), q(b)))
    assert(ok, out)
    local r = helper.run_cli({ "sync", b }, env)
    assert.equal(0, r.code, r.err .. r.out)
    r = helper.run_cli({ "sync", a }, env)
    assert.equal(0, r.code, r.err .. r.out)
    assert.truthy((r.out .. r.err):find("layer Valves: the service sends field TURNS, which this store was not made "
      .. "with (added on the server since): its values are not kept here (the server keeps them); a new replica has "
      .. "it (geoservices replica create)", 1, true), r.out .. r.err)
    c:close()
  end)
end)
