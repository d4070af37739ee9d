-- The command in scripts (issue 39 item 5): data on standard output,
-- progress and hints on standard error (none with --quiet), -v shows each
-- request with its status and time (no secret), zero search matches is a
-- success with an empty list, and one local edit is one line of `pending`
-- whatever its values hold.
local helper = require "spec.helper"

local q = helper.shell_quote

describe("the command in a script", function()
  local world = helper.store_world()
  setup(world.start)
  teardown(world.stop)

  local function gs(...)
    return helper.run_cli({ "--url", world.emu.url, "--token", "alice-token", ... })
  end

  it("keeps progress off standard output, on standard error unless --quiet", function()
    local path = world.dir .. "/piped.gpkg"
    local r = gs("replica", "create", "Parcels", "--layers", "0", "--name", "piped", "--poll-interval", "0.05", path)
    assert.equal(0, r.code, r.out .. r.err)
    assert.falsy(r.out:find(": job ", 1, true), r.out)
    assert.truthy(r.err:find("piped.gpkg: job Completed", 1, true) or r.err:find(": job ", 1, true), r.err)
    assert.truthy(r.out:find("saved to", 1, true), r.out) -- the result itself stays on standard output
    local quiet = world.dir .. "/quiet.gpkg"
    r = gs("--quiet", "replica", "create", "Parcels", "--layers", "0", "--name", "quiet", "--poll-interval", "0.05",
      quiet)
    assert.equal(0, r.code, r.out .. r.err)
    assert.equal("", r.err)
    assert.truthy(r.out:find("saved to", 1, true), r.out)
  end)

  it("-v shows each request: method, URL, status and seconds, never the token", function()
    local st = world.create("verbose")
    local path = st.path
    st:close()
    local r = gs("-v", "sync", path)
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.err:find("POST " .. world.emu.url .. "/Parcels/FeatureServer/synchronizeReplica "
      .. "-> 200 (", 1, true), r.err)
    assert.truthy(r.err:match("%-> 200 %(%d+%.%d%d s%)"), r.err)
    assert.falsy(r.err:find("alice-token", 1, true), r.err)
    assert.falsy(r.out:find("synchronizeReplica", 1, true), r.out)
  end)

  it("a search without a match exits 0 with an empty list", function()
    local r = gs("services", "--search", "no-such-service-here")
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find("0 services named like 'no-such-service-here'", 1, true), r.out)
    r = gs("--json", "services", "--search", "no-such-service-here")
    assert.equal(0, r.code, r.out .. r.err)
    local events = helper.events(r.out)
    assert.equal(0, #helper.find_events(events, "service"))
    assert.equal(0, events[#events].exit)
  end)

  it("pending prints one line per edit, a newline in a value escaped", function()
    local st = world.create("lines")
    local path = st.path
    assert(st:add(0, { attributes = { APN = "999-1", OWNER = "first line\nsecond line\tand a tab" },
                       geometry = { x = -117.2, y = 34.1 } }))
    st:close()
    local r = helper.run_cli{ "pending", path }
    assert.equal(0, r.code, r.out .. r.err)
    local lines = {}
    for l in r.out:gmatch("[^\n]+") do
      if l:find("OWNER=", 1, true) then lines[#lines + 1] = l end
    end
    assert.equal(1, #lines, r.out)
    assert.truthy(lines[1]:find('OWNER="first line\\nsecond line\\tand a tab"', 1, true), lines[1])
    os.remove(q(path))
  end)

  -- a server's or a colleague's text with a newline: a replica's name, a conflict's values
  it("the replicas and conflicts lists keep one record per line whatever the texts hold", function()
    local named = world.create("two\nlines")
    local r = gs("replicas", "Parcels")
    assert.equal(0, r.code, r.out .. r.err)
    local rows = {}
    for l in r.out:gmatch("[^\n]+") do rows[#rows + 1] = l end
    assert.truthy(r.out:find("two\\nlines", 1, true), r.out)
    local count = tonumber(r.out:match("^(%d+) replicas"))
    assert.equal(count + 2, #rows, r.out) -- the count line, the header, one line each
    -- a conflict whose local and server values hold newlines
    local other = world.create("other")
    local gid = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
    assert(named:update(0, { attributes = { GlobalID = gid, OWNER = "here\nand here" } }))
    assert(other:update(0, { attributes = { GlobalID = gid, OWNER = "there\nand there" } }))
    assert(other:sync(world.client(), { poll_interval = 0.05 }))
    assert(named:sync(world.client(), { poll_interval = 0.05 }))
    local path = named.path
    named:close()
    other:close()
    r = helper.run_cli{ "conflicts", path }
    assert.equal(0, r.code, r.out .. r.err)
    local owner
    for l in r.out:gmatch("[^\n]+") do
      if l:find("OWNER", 1, true) then
        assert.is_nil(owner, "one line for the field: " .. r.out)
        owner = l
      end
    end
    assert.truthy(owner and owner:find('here "here\\nand here", server "there\\nand there"', 1, true), r.out)
  end)
end)
