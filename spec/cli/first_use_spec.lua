-- The command as a newcomer meets it (issue 16), run as a real process:
-- --version, usage errors that end with a JSON result line, colours and
-- NO_COLOR, shell completion, each command's own exit codes, tokens and
-- passwords from files or standard input, named profiles, `login` storing a
-- token with 0600, a dry run that shows generateToken without the password,
-- `status` and `services` exit codes, and Ctrl-C under a real
-- pseudo-terminal (exit 130, one line naming what still runs on the server).
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local q = helper.shell_quote
local SERVICE1 = "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c"
local SERVICE2 = "7a1e3c5b2d4f4e6a9c8b7a6f5e4d3c2b"
local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local ALICE_PASSWORD = "alice-pass1"
local ORG_PASSWORD = "Cli-Org-Pa55word"
local CLI = 'os.exit(require("geoservices.cli").main(arg))'

local tmp_dir = helper.tmp_dir

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local config_home -- XDG_CONFIG_HOME of every run: a fresh directory, never the user's

-- Runs the command; returns {code, out, err}. `env` adds environment
-- variables (tty off unless given), `stdin` is fed to standard input.
local function run(args, env, stdin)
  local out, err, input = helper.tmp_name(), helper.tmp_name(), helper.tmp_name()
  write(input, stdin or "")
  local vars = { GEOSERVICES_TTY = "0", LUA_PATH = package.path, LUA_CPATH = package.cpath,
                 XDG_CONFIG_HOME = config_home }
  for k, v in pairs(env or {}) do vars[k] = v end
  local assigns = {}
  for k, v in pairs(vars) do
    if v ~= false then assigns[#assigns + 1] = k .. "=" .. q(v) end
  end
  table.sort(assigns)
  local quoted = {}
  for i, a in ipairs(args) do quoted[i] = q(a) end
  local cmd = ("cd %s && env -u GEOSERVICES_URL -u GEOSERVICES_TOKEN -u GEOSERVICES_PROFILE -u NO_COLOR %s "
    .. "lua5.4 -e %s /dev/null %s >%s 2>%s <%s"):format(q(helper.ROOT), table.concat(assigns, " "), q(CLI),
      table.concat(quoted, " "), q(out), q(err), q(input))
  local _, _, code = os.execute(cmd)
  local r = { code = code, out = helper.read_all(out), err = helper.read_all(err) }
  os.remove(out)
  os.remove(err)
  os.remove(input)
  return r
end

local events = helper.events

local find = helper.find_events

local function mode_of(path)
  local p = io.popen("stat -c %a " .. q(path))
  local mode = p:read("l")
  p:close()
  return mode
end

local function org_params_file(dir)
  local path = dir .. "/org.lua"
  write(path, ([[
return {
  username = "siteadmin", email = "siteadmin@example.com", fullName = "Site Administrator",
  securityQuestionIdx = 1, userLicenseTypeId = "creatorUT", licenseFile = %q,
  volumesConfig = geoservices.volumes{ storage_class = "standard" },
}
]]):format(helper.ROOT .. "/examples/data/sample.prvc"))
  return path
end

describe("the geoservices command for a newcomer", function()
  local emu, dir
  setup(function()
    emu = helper.start_emulator{ args = { "--configure-seconds", "0.02" } }
  end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    dir = tmp_dir()
    config_home = dir .. "/config"
  end)
  after_each(function() os.execute("rm -rf " .. q(dir)) end)

  describe("usage", function()
    it("--version prints the version and exits 0", function()
      local r = run{ "--version" }
      assert.equal(0, r.code)
      assert.matches("^geoservices %d+%.%d+%.%d+ %(lua%-geoservices, Lua 5%.4, libcurl [%d.]+%)\n$", r.out)
    end)

    it("argument errors in --json mode end with a JSON result line, exit 2", function()
      for _, args in ipairs{ { "--json", "frobnicate" }, { "--json" }, { "--json", "services" },
                             { "--json", "--url", emu.url, "sync", "x.json", "--direction", "sideways" } } do
        local r = run(args)
        assert.equal(2, r.code, table.concat(args, " "))
        local list = events(r.out)
        assert.equal("invalid", list[1].kind)
        assert.same({ event = "result", exit = 2, ok = false }, list[#list])
      end
      local plain = run{ "frobnicate" }
      assert.equal("", plain.out)
      assert.truthy(plain.err:find("unknown command", 1, true))
    end)

    it("shows each command's own exit codes in its --help", function()
      local status = run{ "status", "--help" }
      assert.equal(0, status.code)
      assert.truthy(status.out:find("the organization's configuration failed", 1, true))
      assert.falsy(status.out:find("partial", 1, true))
      local services = run{ "services", "--help" }
      assert.truthy(services.out:find("3 some ids were not returned", 1, true))
      local configure = run{ "configure", "--help" }
      assert.truthy(configure.out:find("130 interrupted (the configuration keeps running: follow it with --attach)",
        1, true))
      local login = run{ "login", "--help" }
      assert.truthy(login.out:find("0600", 1, true))
      -- the replica subcommands too (issue 39 item 6)
      for _, sub in ipairs{ "create", "resume", "info", "unregister", "failed" } do
        local r = run{ "replica", sub, "--help" }
        assert.equal(0, r.code, r.err)
        assert.truthy(r.out:find("\nExit codes: 0 ", 1, true), "replica " .. sub .. " --help: " .. r.out)
      end
      assert.truthy(run{ "replica", "unregister", "--help" }.out:find("without --force", 1, true))
    end)

    it("every --help, the emulator's too, ends with examples and shows no placeholder (issue 39 item 6)", function()
      require("geoservices.cli").parser() -- commands defined by their own files add their examples
      local paths = { "", "emulator" }
      for path in pairs(require("geoservices.cli.parser").EXAMPLES) do paths[#paths + 1] = path end
      for _, path in ipairs(paths) do
        local args = {}
        for w in path:gmatch("%S+") do args[#args + 1] = w end
        args[#args + 1] = "--help"
        local r = run(args)
        assert.equal(0, r.code, path .. ": " .. r.err)
        assert.truthy(r.out:find("\nExamples:\n  geoservices", 1, true), "geoservices " .. path .. " --help: " .. r.out)
        -- a word in braces ({url}, {base_url}) is a template's, not the user's
        assert.is_nil(r.out:match("{[%a_]+}"), "geoservices " .. path .. " --help: " .. r.out)
      end
    end)

    it("prints a completion script for bash, zsh and fish", function()
      for shell, marker in pairs{ bash = "complete -F _geoservices", zsh = "#compdef geoservices",
                                  fish = "complete -c geoservices" } do
        local r = run{ "--completion", shell }
        assert.equal(0, r.code, shell)
        assert.truthy(r.out:find(marker, 1, true), shell)
        assert.truthy(r.out:find("login", 1, true), shell)
      end
    end)

    it("prints the same script with the completion command as with --completion", function()
      for _, shell in ipairs{ "bash", "zsh", "fish" } do
        local by_command, by_option = run{ "completion", shell }, run{ "--completion", shell }
        assert.equal(0, by_command.code, by_command.err)
        assert.equal("", by_command.err)
        assert.truthy(by_command.out:find("completion", 1, true), shell)
        assert.equal(by_option.out, by_command.out)
      end
    end)

    it("uses colours on a terminal unless --no-color or NO_COLOR", function()
      local args = { "--url", emu.url, "--token", "admin-token", "status" }
      local colored = run(args, { GEOSERVICES_TTY = "1" })
      assert.equal(0, colored.code)
      assert.truthy(colored.out:find("\27[", 1, true))
      local no_env = run(args, { GEOSERVICES_TTY = "1", NO_COLOR = "1" })
      assert.falsy(no_env.out:find("\27[", 1, true))
      assert.truthy(no_env.out:find("organization not configured", 1, true))
      table.insert(args, 1, "--no-color")
      assert.falsy(run(args, { GEOSERVICES_TTY = "1" }).out:find("\27[", 1, true))
      assert.falsy(run(args, { GEOSERVICES_TTY = "0" }).out:find("\27[", 1, true))
    end)
  end)

  describe("tokens and passwords from files and standard input", function()
    it("--token-file reads a file, or standard input with -", function()
      write(dir .. "/token", "alice-token\n")
      local r = run{ "--url", emu.url, "--token-file", dir .. "/token", "--json", "snapshots", "nb-street-trees" }
      assert.equal(0, r.code, r.err)
      assert.equal(3, #find(events(r.out), "snapshot"))
      r = run({ "--url", emu.url, "--token-file", "-", "--json", "snapshots", "nb-street-trees" }, nil, "bob-token\n")
      assert.equal(0, r.code, r.err)
      assert.equal(1, #find(events(r.out), "snapshot"))
      r = run{ "--url", emu.url, "--token-file", dir .. "/nope", "snapshots", "nb-street-trees" }
      assert.equal(2, r.code)
      assert.truthy(r.err:find("cannot read the token file", 1, true))
    end)

    it("--username generates a token; the password from --password-file, - or GEOSERVICES_PASSWORD", function()
      write(dir .. "/pw", ALICE_PASSWORD .. "\n")
      local base = { "--url", emu.url, "--username", "alice", "--json" }
      local function with(extra, env, stdin)
        local args = {}
        for _, a in ipairs(base) do args[#args + 1] = a end
        for _, a in ipairs(extra) do args[#args + 1] = a end
        args[#args + 1] = "snapshots"
        args[#args + 1] = "nb-street-trees"
        return run(args, env, stdin)
      end
      for _, r in ipairs{ with{ "--password-file", dir .. "/pw" },
                          with({ "--password-file", "-" }, nil, ALICE_PASSWORD),
                          with({}, { GEOSERVICES_PASSWORD = ALICE_PASSWORD }) } do
        assert.equal(0, r.code, r.out .. r.err)
        assert.equal(3, #find(events(r.out), "snapshot"))
        assert.falsy((r.out .. r.err):find(ALICE_PASSWORD, 1, true))
      end
      assert.equal(3, emu:count("generateToken"))
      local wrong = with({ "--password-file", "-" }, nil, "Wrong-Pa55-x")
      assert.equal(1, wrong.code)
      local err = find(events(wrong.out), "error")[1]
      assert.equal("auth", err.kind)
      assert.truthy(err.message:find("Invalid username or password", 1, true))
      assert.falsy(wrong.out:find("Wrong-Pa55-x", 1, true))
      local none = with({})
      assert.equal(2, none.code) -- no password anywhere, and no terminal to ask on: bad input
      assert.truthy(find(events(none.out), "error")[1].message:find("no password for alice", 1, true))
    end)

    it("--dry-run shows the generateToken request with the password redacted and sends nothing", function()
      write(dir .. "/pw", ALICE_PASSWORD)
      local r = run{ "--url", emu.url, "--username", "alice", "--password-file", dir .. "/pw", "--dry-run",
                     "snapshots", "nb-street-trees" }
      assert.equal(0, r.code, r.err)
      assert.truthy(r.out:find("POST " .. emu.url .. "/tokens/generateToken", 1, true))
      assert.truthy(r.out:find("password = <redacted>", 1, true))
      assert.truthy(r.out:find("notebooks/snapshots/list", 1, true))
      assert.falsy(r.out:find(ALICE_PASSWORD, 1, true))
      assert.equal(0, emu:requests().total)
    end)
  end)

  describe("profiles and login", function()
    it("takes the address and the token's source from the [default] profile or --profile NAME", function()
      os.execute("mkdir -p " .. q(config_home .. "/geoservices"))
      write(dir .. "/token", "alice-token")
      write(dir .. "/pw", "bob-pass1")
      write(config_home .. "/geoservices/config", ([[
# profiles of the geoservices command
[default]
url = %s
token_file = %s

[bob]
url = %s
username = bob
password_file = %s
]]):format(emu.url, dir .. "/token", emu.url, dir .. "/pw"))
      local r = run{ "--json", "snapshots", "nb-street-trees" }
      assert.equal(0, r.code, r.out .. r.err)
      assert.equal(3, #find(events(r.out), "snapshot"))
      r = run{ "--json", "--profile", "bob", "snapshots", "nb-street-trees" }
      assert.equal(0, r.code, r.out .. r.err)
      assert.equal(1, #find(events(r.out), "snapshot"))
      r = run({ "--json", "snapshots", "nb-street-trees" }, { GEOSERVICES_PROFILE = "bob" })
      assert.equal(1, #find(events(r.out), "snapshot"))
      r = run{ "--profile", "nobody", "snapshots", "nb-street-trees" }
      assert.equal(2, r.code)
      assert.truthy(r.err:find("profile 'nobody' not found", 1, true))
    end)

    it("refuses a profile file with an unknown key, naming the line", function()
      os.execute("mkdir -p " .. q(config_home .. "/geoservices"))
      write(config_home .. "/geoservices/config", "[default]\nurl = " .. emu.url .. "\ntokn = x\n")
      local r = run{ "status" }
      assert.equal(2, r.code)
      assert.truthy(r.err:find("config:3: unknown key 'tokn'", 1, true))
    end)

    it("login stores a token for the profile, readable only by its owner, used by later commands", function()
      os.execute("mkdir -p " .. q(config_home .. "/geoservices"))
      write(config_home .. "/geoservices/config", ("[work]\nurl = %s\n"):format(emu.url))
      local r = run({ "--profile", "work", "--username", "alice", "--password-file", "-", "login" }, nil,
        ALICE_PASSWORD .. "\n")
      assert.equal(0, r.code, r.out .. r.err)
      local path = config_home .. "/geoservices/tokens/work.json"
      assert.truthy(r.out:find("logged in to " .. emu.url .. " as alice (profile work)", 1, true))
      assert.equal("600", mode_of(path))
      assert.equal("700", mode_of(config_home .. "/geoservices/tokens"))
      local stored = json.decode(helper.read_all(path))
      assert.equal(emu.url, stored.url)
      assert.equal("alice", stored.username)
      assert.is_string(stored.token)
      assert.is_nil(stored.password)
      assert.falsy(helper.read_all(path):find(ALICE_PASSWORD, 1, true))
      r = run{ "--profile", "work", "--json", "snapshots", "nb-street-trees" }
      assert.equal(0, r.code, r.out .. r.err)
      assert.equal(3, #find(events(r.out), "snapshot"))
      assert.equal(1, emu:count("generateToken"))
      -- a wrong password: exit 1, nothing stored over the good token
      r = run({ "--profile", "work", "--username", "alice", "--password-file", "-", "login" }, nil, "nope\n")
      assert.equal(1, r.code)
      assert.equal(stored.token, json.decode(helper.read_all(path)).token)
    end)
  end)

  describe("exit codes of status and services", function()
    it("status exits 1 when the organization's configuration failed", function()
      emu:control("configure", { fail = "Relational store", fail_message = "the database pod did not start" })
      local params = org_params_file(dir)
      local c = run({ "--url", emu.url, "configure", params, "--poll-interval", "0.02" },
        { ORG_ADMIN_PASSWORD = ORG_PASSWORD, ORG_ADMIN_ANSWER = "x" })
      assert.equal(1, c.code)
      local r = run{ "--url", emu.url, "--username", "siteadmin", "--password-file", "-", "status" }
      assert.equal(2, r.code) -- no password on standard input: bad input, nothing sent
      r = run({ "--url", emu.url, "--username", "siteadmin", "--password-file", "-", "status" }, nil, ORG_PASSWORD)
      assert.equal(1, r.code, r.out .. r.err)
      assert.truthy(r.out:find("organization failed", 1, true))
      assert.truthy(r.err:find("the database pod did not start", 1, true))
      local j = run({ "--url", emu.url, "--username", "siteadmin", "--password-file", "-", "--json", "status" }, nil,
        ORG_PASSWORD)
      local list = events(j.out)
      assert.same({ "result", 1, "failed" }, { list[#list].event, list[#list].exit, list[#list].state })
    end)

    it("configure shows the server's own messages as they change", function()
      local r = run({ "--url", emu.url, "configure", org_params_file(dir), "--poll-interval", "0.02" },
        { ORG_ADMIN_PASSWORD = ORG_PASSWORD, ORG_ADMIN_ANSWER = "x" })
      assert.equal(0, r.code, r.out .. r.err)
      assert.truthy(r.err:find("server: The organization has been configured.", 1, true))
      assert.truthy(r.out:find("organization ready: 13 of 13 stages completed", 1, true))
    end)

    it("services exits 3 and names the ids the server did not return", function()
      local s = helper.start_scripted{ routes = { { method = "POST", path = "/server/admin/services/getServicesById",
        responses = { { json = { services = json.array{ { id = SERVICE1, serviceName = "Parcels",
                                                           type = "FeatureServer" } } } } } } } }
      finally(function() s:stop() end)
      local r = run{ "--url", s.url, "--token", "t", "services", SERVICE1, SERVICE2 }
      assert.equal(3, r.code)
      assert.truthy(r.out:find("1 of 2 services: Parcels.FeatureServer; not returned: " .. SERVICE2, 1, true))
      assert.truthy(r.err:find("did not return 1 of the ids asked for: " .. SERVICE2, 1, true))
      local j = run{ "--url", s.url, "--token", "t", "--json", "services", SERVICE1, SERVICE2 }
      local list = events(j.out)
      assert.equal(SERVICE2, find(list, "missing")[1].id)
      assert.same({ 3, { SERVICE2 } }, { list[#list].exit, list[#list].missing })
    end)
  end)

  describe("Ctrl-C under a real pseudo-terminal", function()
    -- Runs the command in a pty, types Ctrl-C once `pattern` shows (within 10 s
    -- times helper.WAIT_SCALE: a loaded machine slows the command's start).
    local function ctrl_c(pattern, args, env)
      local vars = { LUA_PATH = package.path, LUA_CPATH = package.cpath, XDG_CONFIG_HOME = config_home }
      for k, v in pairs(env or {}) do vars[k] = v end
      local assigns = {}
      for k, v in pairs(vars) do assigns[#assigns + 1] = k .. "=" .. q(v) end
      local quoted = {}
      for i, a in ipairs(args) do quoted[i] = q(a) end
      local p = io.popen(("cd %s && env -u GEOSERVICES_TTY %s "
        .. helper.PYTHON .. " spec/support/pty_ctrl_c.py %s %d lua5.4 -e %s "
        .. "/dev/null %s"):format(q(helper.ROOT), table.concat(assigns, " "), q(pattern),
          math.ceil(10 * helper.WAIT_SCALE), q(CLI),
          table.concat(quoted, " ")))
      local result = json.decode(p:read("a"))
      p:close()
      assert(result.matched, "never showed " .. pattern .. ": " .. result.output)
      return result
    end

    it("configure: exit 130 and how to follow the configuration still running", function()
      emu:control("configure", { stage_seconds = 0.5 })
      local r = ctrl_c("0 of 13 stages completed", { "--url", emu.url, "configure", org_params_file(dir),
                                                     "--poll-interval", "0.05" },
        { ORG_ADMIN_PASSWORD = ORG_PASSWORD, ORG_ADMIN_ANSWER = "x" })
      assert.equal(130, r.exit, r.output)
      -- without a token of its own, following means signing in as the administrator configure creates
      assert.truthy(r.output:find("interrupted; the configuration of the organization keeps running on the server: "
        .. "follow it with `geoservices --url " .. emu.url .. " --username siteadmin configure --attach`", 1, true),
        r.output)
      assert.falsy(r.output:find("traceback", 1, true))
      assert.falsy(r.output:find("loop.lua", 1, true))
    end)

    it("configure --json: the last line is still the result event", function()
      emu:control("configure", { stage_seconds = 0.5 })
      local r = ctrl_c('"event":"stage"', { "--url", emu.url, "--token-env", "ADMIN_TOKEN", "--json", "configure",
                                            org_params_file(dir), "--poll-interval", "0.05" },
        { ORG_ADMIN_PASSWORD = ORG_PASSWORD, ORG_ADMIN_ANSWER = "x", ADMIN_TOKEN = "admin-token" })
      assert.equal(130, r.exit, r.output)
      local last
      for line in r.output:gmatch("[^\r\n]+") do
        if line:sub(1, 1) == "{" then last = json.decode(line) end
      end
      assert.same({ "result", 130, true, "the configuration of the organization" },
        { last.event, last.exit, last.interrupted, last.running })
      assert.equal("geoservices --url " .. emu.url .. " --token-env ADMIN_TOKEN configure --attach", last.follow)
    end)

    it("sync --async: exit 130 and how to follow the job still running", function()
      emu:control("settings", { job_step_ms = 3000 })
      local state = dir .. "/crew-1.json"
      write(state, json.encode{ service = "Parcels", replicaID = CREW1, model = "perReplica", replicaServerGen = 1 })
      -- Pending or the status after it: a first poll later than Pending (a loaded machine) never
      -- shows Pending, and the job still runs for two more statuses
      local r = ctrl_c("Pending,|InProgress,", { "--url", emu.url, "--token", "alice-token", "sync", state, "--async",
                                    "--poll-interval", "0.1" })
      assert.equal(130, r.exit, r.output)
      assert.truthy(r.output:find("interrupted; the synchronization job of crew-1.json keeps running on the "
        .. "server: follow it with `geoservices --url " .. emu.url .. " sync " .. state .. " --async`", 1, true),
        r.output)
    end)

    it("emulator: exit 130, stopped, nothing left running", function()
      local r = ctrl_c("listening on", { "emulator", "--port", "0" })
      assert.equal(130, r.exit, r.output)
      assert.truthy(r.output:find("interrupted; the emulator stopped", 1, true), r.output)
      assert.falsy(r.output:find("traceback", 1, true))
    end)
  end)
end)
