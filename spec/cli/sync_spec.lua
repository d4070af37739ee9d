-- `geoservices sync` never throws downloaded changes away and refuses what
-- cannot work before anything is sent: a real process against the emulator.
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local q = helper.shell_quote
local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"

local tmp_dir, write, run = helper.tmp_dir, helper.write_file, helper.run_cli

describe("geoservices sync keeps every downloaded change", function()
  local emu, dir, state
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    dir = tmp_dir()
    state = dir .. "/crew-1.json"
    write(state, json.encode{ service = "Parcels", replicaID = CREW1, model = "perReplica", replicaServerGen = 1 })
  end)
  after_each(function() os.execute("rm -rf " .. q(dir)) end)

  local function gs(...)
    return { "--url", emu.url, "--token", "alice-token", ... }
  end

  it("without --output saves them beside the state, named by the generation they start from, and says where", function()
    local r = run(gs("sync", state))
    assert.equal(0, r.code, r.out .. r.err)
    local saved_at = dir .. "/crew-1.changes-from-1.json"
    assert.truthy(r.out:find(saved_at, 1, true), r.out)
    local saved = json.decode(assert(helper.read_all(saved_at)))
    assert.is_true(#saved.edits > 0)
    assert.is_true(json.decode(helper.read_all(state)).replicaServerGen > 1)
  end)

  it("--discard keeps none of them, and says so", function()
    local r = run(gs("sync", state, "--discard"))
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find("discarded", 1, true), r.out)
    assert.is_nil(helper.read_all(dir .. "/crew-1.changes-from-1.json"))
  end)

  it("--output in a directory that does not exist exits 2 before anything is sent", function()
    local before = helper.read_all(state)
    local sent = emu:count("synchronizeReplica")
    local r = run(gs("sync", state, "--output", dir .. "/no/such/dir/out.json"))
    assert.equal(2, r.code, r.out .. r.err)
    assert.truthy(r.err:find("output", 1, true), r.err)
    assert.equal(sent, emu:count("synchronizeReplica"))
    assert.equal(before, helper.read_all(state))
  end)

  it("--enum-prefix sets the prefix of the enumerations it sends", function()
    local r = run(gs("--enum-prefix", "esri", "--dry-run", "sync", state, "--transport", "url"))
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find("transportType = esriTransportTypeUrl", 1, true), r.out)
  end)
end)
