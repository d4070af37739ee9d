-- `geoservices replica create OUT.gpkg` takes the path of the Lua API's
-- geoservices.store.create (issue 38): the result's records stream through
-- the C core into the store, never a Lua table each. It asked for each
-- record (on_change) only to count them, and a layer whose id comes after
-- its features (the emulator writes it so, and no key order is documented)
-- kept them all waiting as tables: 200k points took 285 MiB (the Lua API 31
-- MiB), 1M points 1,017 MiB. The command runs in a process of its own
-- (spec/bench/cli_create_one.lua, as `make bench` measures it), whose peak
-- RSS is its own. And the steps after the fill are named as they start.
local helper = require "spec.helper"

local q = helper.shell_quote
local run = helper.run_shell
local RECORDS = 200000
local LIMIT_KIB = 64 * 1024

local function lua(script, ...)
  local args = {}
  for i, a in ipairs{ ... } do args[i] = q(tostring(a)) end
  return run(("GEOSERVICES_TTY=0 LUA_PATH=%s LUA_CPATH=%s lua5.4 %s %s"):format(q(package.path), q(package.cpath),
    q(script), table.concat(args, " ")))
end

describe("geoservices replica create OUT.gpkg (issue 38)", function()
  local dir, pid, url

  setup(function()
    dir = helper.tmp_dir()
    local out, ok = lua("spec/bench/generate_replica.lua", RECORDS, "last", dir .. "/last.json")
    assert(ok, out)
    local log = dir .. "/serve.log"
    pid = run(("LUA_PATH=%s LUA_CPATH=%s lua5.4 spec/bench/serve_replica.lua %s > %s 2>&1 & echo $!"):format(
      q(package.path), q(package.cpath), q(dir .. "/last.json"), q(log))):match("%d+")
    url = helper.wait_for("the replica server", function()
      local text = helper.read_all(log)
      return text and text:match("serving on (%S+)")
    end, 10)
  end)
  teardown(function()
    if pid then os.execute("kill " .. pid) end
    os.execute("rm -rf " .. q(dir))
  end)

  it("stays under 64 MiB with 200k points whose layer id comes last, and stores them all #rss", function()
    local out, ok = lua("spec/bench/cli_create_one.lua", url, dir .. "/cli.gpkg")
    assert(ok, out)
    local secs, n, kib, code = out:match("cli_create (%S+) (%d+) (%d+) (%d+)%s*$")
    assert(secs, out)
    assert.equal(0, tonumber(code), out)
    assert.equal(RECORDS, tonumber(n), out)
    assert.is_true(tonumber(kib) < LIMIT_KIB, ("peak RSS %s KiB"):format(kib))
    -- the progress still counts the records, as the store fills
    assert.truthy(out:find("filling the store [^\n]*, 200000 records"), out)
    assert.truthy(out:find("layer 0: 200000 features", 1, true), out)
    -- then each step of the store's building that takes seconds at 1M features is named as it starts,
    -- not left at "filling the store 100%" (issue 38)
    local at = out:find("filling the store [^\n]*100%%")
    assert.truthy(at, out)
    for _, step in ipairs{ "building the GlobalID index of parcels_0", "settling the repeated GlobalIDs of parcels_0",
                           "linking attachments and related records", "packing the spatial index and committing",
                           "writing the store to disk" } do
      local next_at = out:find("cli.gpkg: " .. step, at, true)
      assert.truthy(next_at, step .. " after the fill:\n" .. out)
      at = next_at
    end
  end)

  it("shows the step and its time on a terminal", function()
    local watch = require "geoservices.cli.watch"
    local line = watch.render({ name = "a.gpkg", phase = "building", step = "building the GlobalID index of t",
                                step_started = 10, frame = 0, started = 0 }, 12.5)
    assert.matches("^%S+ a%.gpkg building the GlobalID index of t, 2%.5 s$", line)
  end)
end)
