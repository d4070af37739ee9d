-- `geoservices replica unregister` strands nothing (issue 39 item 2): a
-- store holding local edits not sent, rejected edits or conflicts is
-- refused (exit 2, nothing sent, the replica still on the server) with
-- advice that works; after following it, or with --force, it unregisters.
local helper = require "spec.helper"

local q = helper.shell_quote

describe("replica unregister of a store", function()
  local world = helper.store_world()
  setup(world.start)
  teardown(world.stop)

  local gs = world.cli

  local function on_server(name) return world.replica_named(name) end

  -- The advice's command, run as printed: "`geoservices sync PATH`" -> its args.
  local function advised(text)
    local cmd = text:match("run `geoservices ([^`]+)`")
    assert.is_string(cmd, text)
    local args = {}
    for w in cmd:gmatch("%S+") do args[#args + 1] = w end
    return args
  end

  it("refuses while local edits are not sent, and the advice it gives works", function()
    local st = world.create("strand-1")
    local path = st.path
    assert(st:add(0, { attributes = { APN = "999-000-01" }, geometry = { x = -117.2, y = 34.1 } }))
    st:close()
    local r = gs("replica", "unregister", path)
    assert.equal(2, r.code, r.out .. r.err)
    assert.truthy(r.err:find("1 local edit not sent", 1, true), r.err)
    assert.truthy(r.err:find("--force", 1, true), r.err)
    assert.is_table(on_server("strand-1"))
    -- the advice: sync first; then the unregister goes through
    local r2 = gs(table.unpack(advised(r.err)))
    assert.equal(0, r2.code, r2.out .. r2.err)
    r = gs("replica", "unregister", path)
    assert.equal(0, r.code, r.out .. r.err)
    assert.is_nil(on_server("strand-1"))
  end)

  it("unregisters anyway with --force, the edits kept in the file", function()
    local st = world.create("strand-2")
    local path = st.path
    assert(st:add(0, { attributes = { APN = "999-000-02" }, geometry = { x = -117.2, y = 34.1 } }))
    st:close()
    local r = gs("replica", "unregister", "--force", path)
    assert.equal(0, r.code, r.out .. r.err)
    assert.is_nil(on_server("strand-2"))
    local out = helper.run_shell("sqlite3 " .. q(path) .. " 'SELECT count(*) FROM gpkgext_geoservices_edits'")
    assert.equal("1", (out:gsub("%s+", "")))
  end)

  it("unregisters a store with nothing pending at once", function()
    local st = world.create("strand-3")
    local path = st.path
    st:close()
    local r = gs("replica", "unregister", path)
    assert.equal(0, r.code, r.out .. r.err)
    assert.is_nil(on_server("strand-3"))
  end)

  -- a script that runs its clean-up twice: the goal is reached, nothing is sent in vain
  it("a second unregister of the same store says it was already done and exits 0", function()
    local st = world.create("strand-4")
    local path = st.path
    st:close()
    assert.equal(0, gs("replica", "unregister", path).code)
    local r = gs("replica", "unregister", path)
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find("was already unregistered", 1, true), r.out)
    -- the store still refuses to sync, and says what it is
    r = gs("sync", path)
    assert.equal(2, r.code, r.out .. r.err)
    assert.truthy(r.err:find("was unregistered", 1, true), r.err)
    r = helper.run_cli{ "status", path }
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find("\n  unregistered: this store can no longer synchronize", 1, true), r.out)
    assert.is_true(helper.events(helper.run_cli{ "--json", "status", path }.out)[1].unregistered)
  end)
end)
