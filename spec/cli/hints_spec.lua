-- Every command the CLI advises is one that succeeds there, as printed
-- (issue 39 item 1): the sync that holds an edit back in conflict, the
-- conflicts list, the status of a store with refused edits, the sign-in a
-- command without a token needs on a terminal. Each command in the output
-- is taken as printed (no template word such as STORE, GLOBALID, NAME or
-- a|b choice) and run.
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote

local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local PARCEL2 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}"

-- The words of a command line as the shell reads them ('...' quotes).
local function shell_words(s)
  local words, i = {}, 1
  while i <= #s do
    if s:sub(i, i):match("%s") then
      i = i + 1
    else
      local w = ""
      while i <= #s and not s:sub(i, i):match("%s") do
        if s:sub(i, i) == "'" then
          local j = assert(s:find("'", i + 1, true), "an unclosed quote: " .. s)
          w, i = w .. s:sub(i + 1, j - 1), j + 1
        else
          w, i = w .. s:sub(i, i), i + 1
        end
      end
      words[#words + 1] = w
    end
  end
  return words
end

-- The commands in a text: each "geoservices ..." (not geoservices_conflicts)
-- up to the end of its sentence, as words.
local function commands_in(text)
  local list = {}
  for cmd in text:gmatch("%f[%w_]geoservices (%f[%w-][^;`)\n]+)") do
    list[#list + 1] = shell_words((cmd:gsub("%s+%(or .*$", ""):gsub("%s+$", "")))
  end
  return list
end

-- A module path whose relative entries are made absolute (the command runs elsewhere).
local function absolute(path)
  return (path:gsub("[^;]+", function(entry)
    if entry:sub(1, 1) == "/" then return entry end
    return helper.ROOT .. "/" .. entry
  end))
end

-- `geoservices ARGS` under a pseudo-terminal in `dir` (its own XDG_CONFIG_HOME),
-- answering `answer` to `prompt` when it asks (spec/support/pty_answer.py),
-- with `env` (a table of NAME = value): {exit, output, prompted}.
local function on_terminal(dir, args, prompt, answer, env)
  local quoted, assigns = {}, {}
  for i, a in ipairs(args) do quoted[i] = q(a) end
  for k, v in pairs(env or {}) do assigns[#assigns + 1] = k .. "=" .. q(v) end
  local p = io.popen(("cd %s && env -u GEOSERVICES_TTY -u GEOSERVICES_TOKEN -u GEOSERVICES_PASSWORD LUA_PATH=%s "
    .. "LUA_CPATH=%s XDG_CONFIG_HOME=%s %s " .. helper.PYTHON .. " %s 30 %s %s lua5.4 -e %s /dev/null %s"):format(
      q(dir), q(absolute(package.path)), q(absolute(package.cpath)), q(dir .. "/config"), table.concat(assigns, " "),
      q(helper.ROOT .. "/spec/support/pty_answer.py"), q(prompt), q(answer),
      q('os.exit(require("geoservices.cli").main(arg))'), table.concat(quoted, " ")))
  local result = json.decode(p:read("a"))
  p:close()
  return result
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
      -- (the server of this world for what needs one: the advice names the store, not the address)
      local r = helper.run_cli(words, { GEOSERVICES_URL = world.emu.url, GEOSERVICES_TOKEN = "alice-token" })
      assert.equal(0, r.code, cmd .. "\n" .. r.out .. r.err)
      results[#results + 1] = r
    end
    return results
  end

  -- a conflict held back in store `a` on `gid` (store `b` changed the feature first)
  local function conflict(a, b, gid, sync_a)
    assert(a:update(0, { attributes = { GlobalID = gid, OWNER = "here " .. a.path } }))
    assert(b:update(0, { attributes = { GlobalID = gid, OWNER = "there " .. b.path } }))
    assert(b:sync(world.client(), { poll_interval = 0.05 }))
    return sync_a()
  end

  -- (each case with a store path that holds a space too: the advice quotes it for the shell)
  local function conflict_case(name)
    local a, b = world.create(name), world.create(name .. "-b")
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
    local resolved = run_each(r.out, 1)
    assert.truthy(world.cli("status", path).out:find("0 conflicts", 1, true))
    -- resolved with the local version: the resolve names the sync that sends it
    assert.truthy(resolved[1].out:find("1 edit queued", 1, true), resolved[1].out)
    run_each(resolved[1].out, 1)
    assert.truthy(world.cli("status", path).out:find("0 local edits", 1, true))
    b:close()
  end
  for _, name in ipairs{ "hint-a", "hint a" } do
    it(("the conflict a sync holds back, and the conflicts list (store %q)"):format(name), function()
      conflict_case(name)
    end)
  end

  it("the sign-in a command without a token needs, on a terminal: login asks for the user", function()
    local dir = helper.tmp_dir()
    finally(function() os.execute("rm -rf " .. q(dir)) end)
    local env = { GEOSERVICES_URL = world.emu.url }
    local service = { "services", "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c" }
    local r = on_terminal(dir, service, "never asked", "", env)
    assert.equal(1, r.exit, r.output)
    local cmds = commands_in(r.output:gsub("\27%[[%d;]*m", ""))
    assert.equal(1, #cmds, r.output)
    assert.is_nil(template_word(cmds[1]), "a template, not a command: " .. table.concat(cmds[1], " "))
    -- the advice, run on the terminal: it asks for the user (the password from the environment)
    env.GEOSERVICES_PASSWORD = "admin-pass1"
    local login = on_terminal(dir, cmds[1], "Username: ", "admin", env)
    assert.is_true(login.prompted, login.output)
    assert.equal(0, login.exit, login.output)
    env.GEOSERVICES_PASSWORD = nil
    r = on_terminal(dir, service, "never asked", "", env)
    assert.equal(0, r.exit, r.output)
  end)

  it("replica info of a state a generation behind the server: the sync it advises", function()
    local dir = helper.tmp_dir()
    finally(function() os.execute("rm -rf " .. q(dir)) end)
    local path = dir .. "/behind 1.json" -- (a space: the advice quotes it)
    helper.write_file(path, json.encode{ service = "Parcels", replicaID = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}",
                                         model = "perReplica", replicaServerGen = 0 })
    local r = world.cli("replica", "info", path)
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find("the generations differ", 1, true), r.out)
    local cmds = commands_in(r.out)
    assert.equal(1, #cmds, r.out)
    assert.is_nil(template_word(cmds[1]))
    local args = { "--url", world.emu.url, "--token", "alice-token" }
    for _, w in ipairs(cmds[1]) do args[#args + 1] = w end
    local ran = helper.run_cli(args)
    assert.equal(0, ran.code, table.concat(cmds[1], " ") .. "\n" .. ran.out .. ran.err)
    r = world.cli("replica", "info", path)
    assert.falsy(r.out:find("the generations differ", 1, true), r.out)
  end)

  local function refused_case(name)
    local st = world.create(name)
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
  end
  for _, name in ipairs{ "hint-refused", "hint refused" } do
    it(("the local edits refused before sending, in status and in the Lua summaries (store %q)"):format(name),
      function() refused_case(name) end)
  end
end)
