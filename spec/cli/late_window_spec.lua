-- `geoservices sync STORE` after a lost answer (issue 34, F2): the store
-- holds the edits of a synchronization whose answer was lost for the
-- server's own limits (660 s by default: geoservices.sync.attempt), says so
-- and until when, and `--late-window SECONDS` shortens the wait. A real
-- process against the emulator, whose gateway drops the answer and keeps
-- the request 10 minutes (it never applies it within the test).
local geoservices = require "geoservices"
local helper = require "spec.helper"

local q = helper.shell_quote

describe("geoservices sync, a lost answer's edits", function()
  local emu, dir, path
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    dir = helper.tmp_dir()
    path = dir .. "/crew.gpkg"
    local c = geoservices.client{ url = emu.url, token = "alice-token" }
    local st = assert(geoservices.store.create(c, path, { service = "Parcels", layers = { 0 },
      replicaName = "crew" }, { poll_interval = 0.05 }))
    assert(st:add(0, { attributes = { APN = "LATE-CLI", OWNER = "crew" }, geometry = { x = -117.2, y = 34.1 } }))
    st:close()
    c:close()
  end)
  after_each(function() os.execute("rm -rf " .. q(dir)) end)

  local function gs(...)
    return helper.run_cli{ "--url", emu.url, "--token", "alice-token", ... }
  end

  local function adds_sent()
    local n = 0
    for _, e in ipairs(emu:control("changelog?service=Parcels").entries) do
      if e.op == "add" and e.attributes and e.attributes.APN == "LATE-CLI" then n = n + 1 end
    end
    return n
  end

  it("are held and said so by default; --late-window 0 sends them again after one sync", function()
    emu:control("settings", { gateway = "drop", gateway_delay_ms = 600000 })
    local r1 = gs("sync", path)
    assert.are_not.equal(0, r1.code, r1.out .. r1.err)
    emu:control("settings", { gateway = "off" })
    local r2 = gs("sync", path)
    assert.equal(0, r2.code, r2.out .. r2.err)
    local said = r2.out .. r2.err
    assert.truthy(said:find("held: 1 edit(s) of a synchronization whose answer was lost", 1, true), said)
    assert.truthy(said:find("--late-window", 1, true), said)
    local r3 = gs("sync", path)
    assert.equal(0, r3.code, r3.out .. r3.err)
    assert.equal(0, adds_sent(), "the add was sent again within the window")
    local r4 = gs("sync", path, "--late-window", "0")
    assert.equal(0, r4.code, r4.out .. r4.err)
    local r5 = gs("sync", path, "--late-window", "0")
    assert.equal(0, r5.code, r5.out .. r5.err)
    assert.equal(1, adds_sent(), "the add was not sent again once the window was set to 0")
  end)
end)
