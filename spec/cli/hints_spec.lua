-- Every command the CLI advises is one that succeeds there, as printed
-- (issue 39 item 1): the sync that holds an edit back in conflict, the
-- conflicts list, the status of a store with refused edits. Each command in
-- the output is taken as printed (no template word such as STORE, GLOBALID
-- or a|b choice) and run.
local helper = require "spec.helper"

local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local PARCEL2 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}"

-- The commands in a text: each "geoservices ..." (not geoservices_conflicts)
-- up to the end of its sentence, as words.
local function commands_in(text)
  local list = {}
  for cmd in text:gmatch("%f[%w_]geoservices (%f[%w-][^;`)\n]+)") do
    cmd = cmd:gsub("%s+%(or .*$", ""):gsub("%s+$", "")
    local words = {}
    for w in cmd:gmatch("%S+") do words[#words + 1] = w end
    list[#list + 1] = words
  end
  return list
end

local function template_word(words)
  for _, w in ipairs(words) do
    if w:find("|", 1, true) or w:match("^%u%u+$") then return w end
  end
  return nil
end

describe("every command the CLI advises runs as printed (issue 39)", function()
  local world = helper.store_world()
  setup(world.start)
  teardown(world.stop)

  -- runs each command of `text` (there must be `at_least` of them); returns their results
  local function run_each(text, at_least)
    local cmds = commands_in(text)
    assert.truthy(#cmds >= at_least, "no command advised in:\n" .. text)
    local results = {}
    for _, words in ipairs(cmds) do
      local cmd = "geoservices " .. table.concat(words, " ")
      assert.is_nil(template_word(words), "a template, not a command: " .. cmd)
      local r = helper.run_cli(words)
      assert.equal(0, r.code, cmd .. "\n" .. r.out .. r.err)
      results[#results + 1] = r
    end
    return results
  end

  -- a conflict held back in store `a` on `gid` (store `b` changed the feature first)
  local function conflict(a, b, gid, sync_a)
    assert(a:update(0, { attributes = { GlobalID = gid, OWNER = "here" } }))
    assert(b:update(0, { attributes = { GlobalID = gid, OWNER = "there" } }))
    assert(b:sync(world.client(), { poll_interval = 0.05 }))
    return sync_a()
  end

  it("the conflict a sync holds back, and the conflicts list", function()
    local a, b = world.create("hint-a"), world.create("hint-b")
    local path = a.path
    a:close()
    local r
    local reopened = require("geoservices").store.open(path)
    r = conflict(reopened, b, PARCEL1, function()
      reopened:close()
      return world.cli("sync", path)
    end)
    assert.equal(3, r.code, r.out .. r.err)
    assert.truthy(r.out:find("held back", 1, true), r.out)
    run_each(r.out, 1)
    assert.truthy(world.cli("status", path).out:find("0 conflicts", 1, true))
    -- the list of conflicts names, for each, the command that resolves it
    reopened = require("geoservices").store.open(path)
    conflict(reopened, b, PARCEL2, function()
      reopened:close()
      return world.cli("sync", path)
    end)
    r = helper.run_cli{ "conflicts", path }
    assert.equal(0, r.code, r.err)
    run_each(r.out, 1)
    assert.truthy(world.cli("status", path).out:find("0 conflicts", 1, true))
    b:close()
  end)

  it("the local edits refused before sending, in status and in the Lua summaries", function()
    local st = world.create("hint-refused")
    for _, gid in ipairs{ PARCEL1, PARCEL2 } do
      assert(st:update(0, { attributes = { GlobalID = gid, APN = ("X"):rep(25) } }))
    end
    local result = assert(st:sync(world.client(), { poll_interval = 0.05 }))
    local path = st.path
    -- a Lua user reads the same advice in the summaries
    run_each(tostring(result.refused), 1)
    run_each(tostring(assert(st:status())), 1)
    st:close()
    local r = helper.run_cli{ "status", path }
    assert.equal(0, r.code, r.err)
    run_each(r.out, 1)
  end)
end)
