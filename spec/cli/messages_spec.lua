-- Messages that tell what to do next (issue 29), from the command run as a
-- real process: a token required or refused points to `geoservices login`
-- (the profile's when there is one), a 404 on the first request to the base
-- URL (the URL tried, and what a base URL looks like), TLS failures and a
-- header too large in words; a mistake inside a subcommand prints that
-- subcommand's usage; every --help ends with examples that parse; help
-- texts describe replica stores (.gpkg) before state files.
local helper = require "spec.helper"

local q = helper.shell_quote
local SERVICE1 = "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c"

local function run(args, env)
  local vars = { XDG_CONFIG_HOME = "/nonexistent/geoservices-spec" }
  for k, v in pairs(env or {}) do vars[k] = v end
  return helper.run_cli(args, vars)
end

local function hint_of(r)
  local ev = helper.find_events(helper.events(r.out), "error")[1]
  return ev and ev.hint
end

describe("messages that tell what to do next", function()
  local emu
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function() emu:reset() end)

  it("a token required (499) points to geoservices login", function()
    local r = run{ "--url", emu.url, "services", SERVICE1 }
    assert.equal(1, r.code)
    assert.truthy(r.err:find("Token Required", 1, true), r.err)
    assert.truthy(r.err:find("geoservices --url " .. emu.url .. " --username NAME login", 1, true), r.err)
    local j = run{ "--url", emu.url, "--json", "services", SERVICE1 }
    assert.truthy(tostring(hint_of(j)):find("geoservices --url " .. emu.url .. " --username NAME login", 1, true),
      j.out)
  end)

  it("a token refused (498) points to the profile's login, and to leaving out --token", function()
    local dir = helper.tmp_dir()
    finally(function() os.execute("rm -rf " .. q(dir)) end)
    os.execute("mkdir -p " .. q(dir .. "/geoservices"))
    helper.write_file(dir .. "/geoservices/config", ("[work]\nurl = %s\nusername = alice\n"):format(emu.url))
    local r = run({ "--profile", "work", "--token", "expired-token", "services", SERVICE1 },
      { XDG_CONFIG_HOME = dir })
    assert.equal(1, r.code)
    assert.truthy(r.err:find("Invalid token", 1, true), r.err)
    assert.truthy(r.err:find("geoservices --profile work login", 1, true), r.err)
    assert.truthy(r.err:find("without --token", 1, true), r.err)
  end)

  it("a 404 on the first request says to check the base URL, showing the URL tried", function()
    local wrong = emu.url .. "/rest/services"
    local r = run{ "--url", wrong, "--token", "admin-token", "services", SERVICE1 }
    assert.equal(1, r.code)
    assert.falsy(r.err:find("Not Found Not Found", 1, true), r.err)
    assert.truthy(r.err:find(wrong .. "/admin/services/getServicesById", 1, true), r.err)
    assert.truthy(r.err:find("check the base URL", 1, true), r.err)
    assert.truthy(r.err:find("https://gis.example.com/server", 1, true), r.err)
    -- a service the server does not have is not a base URL problem
    local other = run{ "--url", emu.url, "--token", "admin-token", "replica", "create", "Nope", "--layers", "0",
                       helper.tmp_name() .. ".gpkg" }
    assert.equal(1, other.code)
    assert.falsy(other.err:find("base URL", 1, true), other.err)
  end)

  it("https to a plain http port: the TLS failure in words", function()
    local url = emu.url:gsub("^http:", "https:")
    local r = run{ "--url", url, "--token", "admin-token", "status" }
    assert.equal(1, r.code)
    assert.falsy(r.err:find("0A00010B", 1, true), r.err)
    assert.truthy(r.err:find("does not speak TLS", 1, true), r.err)
    assert.truthy(r.err:find("--url " .. emu.url, 1, true), r.err)
  end)

  it("a header too large is named as such", function()
    local s = helper.start_scripted{ routes = { { method = "POST", path = "/server/admin",
      responses = { { headers = { ["X-Padding"] = ("x"):rep(200 * 1024) }, json = { status = "ok" } } } } } }
    finally(function() s:stop() end)
    local r = run{ "--url", s.url, "--token", "t", "status" }
    assert.equal(1, r.code)
    assert.truthy(r.err:find("header", 1, true), r.err)
    assert.truthy(r.err:find("larger than", 1, true), r.err)
    assert.falsy(r.err:match("^geoservices: network: Out of memory"), r.err)
  end)
end)

describe("the TLS certificate", function()
  it("not trusted: says so and names --ca-file", function()
    local dir = helper.tmp_dir()
    local cert, key = dir .. "/cert.pem", dir .. "/key.pem"
    assert(os.execute(("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
      .. "-addext subjectAltName=IP:127.0.0.1 -keyout %s -out %s >/dev/null 2>&1"):format(q(key), q(cert))))
    local emu = helper.start_emulator{ args = { "--tls-cert", cert, "--tls-key", key }, ca_file = cert }
    finally(function()
      emu:stop()
      os.execute("rm -rf " .. q(dir))
    end)
    local r = run{ "--url", emu.url, "--token", "admin-token", "status" }
    assert.equal(1, r.code)
    assert.truthy(r.err:find("certificate is not trusted", 1, true), r.err)
    assert.truthy(r.err:find("--ca-file", 1, true), r.err)
    assert.equal(0, run{ "--url", emu.url, "--token", "admin-token", "--ca-file", cert, "status" }.code)
  end)
end)

-- Every command path of the parser, as words: {}, {"sync"}, {"replica", "create"}...
local function command_paths()
  local paths = { {} }
  local function walk(p, prefix)
    for _, c in ipairs(p._commands or {}) do
      local path = { table.unpack(prefix) }
      path[#path + 1] = c._name
      if c._name ~= "emulator" then -- its help is the emulator program's own
        paths[#paths + 1] = path
        walk(c, path)
      end
    end
  end
  walk(require("geoservices.cli").parser(), {})
  return paths
end

describe("usage and help", function()
  it("a mistake inside a subcommand prints that subcommand's usage", function()
    for _, case in ipairs{
      { { "sync", "x.gpkg", "--direction", "sideways" }, "Usage: geoservices sync " },
      { { "replica", "create", "Parcels" }, "Usage: geoservices replica create " },
      { { "replica", "info" }, "Usage: geoservices replica info " },
      { { "services" }, "Usage: geoservices services " },
      { { "replica", "frobnicate" }, "Usage: geoservices replica " },
    } do
      local r = run(case[1])
      assert.equal(2, r.code)
      assert.equal(1, select(2, r.err:gsub("Usage: ", "")), r.err)
      assert.truthy(r.err:find(case[2], 1, true), table.concat(case[1], " ") .. ":\n" .. r.err)
    end
    local top = run{ "frobnicate" }
    assert.truthy(top.err:find("Usage: geoservices [-h]", 1, true), top.err)
  end)

  it("every --help ends with two or three examples, each a command line the parser takes", function()
    local parser = require("geoservices.cli").parser()
    for _, path in ipairs(command_paths()) do
      local args = { table.unpack(path) }
      args[#args + 1] = "--help"
      local what = "geoservices " .. table.concat(path, " ")
      local r = run(args)
      assert.equal(0, r.code, what)
      local block = r.out:match("\nExamples:\n(.-)\n?$")
      assert.is_string(block, what .. " --help has no Examples section at its end:\n" .. r.out)
      local count = 0
      for line in block:gmatch("[^\n]+") do
        count = count + 1
        -- the command line, before its comment or a shell redirection
        local command = line:match("^  (geoservices [^#>|]-)%s*$") or line:match("^  (geoservices [^#>|]-)%s+[#>|]")
        assert.is_string(command, what .. ": not an example line: " .. line)
        local words = {}
        for w in command:gmatch("%S+") do words[#words + 1] = w:match("^'(.*)'$") or w end
        table.remove(words, 1)
        local ok, err = require("geoservices.cli.parser").parse(parser, words) -- as main parses
        assert.is_true(ok, what .. ": the example does not parse: " .. line .. ": " .. tostring(err))
        for i = 1, #path do
          assert.truthy(command:find(" " .. path[i] .. " ", 1, true) or command:find(" " .. path[i] .. "$"),
            what .. ": an example of another command: " .. line)
        end
      end
      assert.is_true(count >= 2 and count <= 3, what .. ": " .. count .. " examples")
    end
  end)

  it("sync and replica create describe replica stores (.gpkg) before state files", function()
    for _, args in ipairs{ { "sync", "--help" }, { "replica", "create", "--help" }, { "replica", "--help" },
                           { "--help" } } do
      local text = run(args).out
      local gpkg = text:find(".gpkg", 1, true)
      local state = text:find("state file", 1, true)
      assert.is_number(gpkg, table.concat(args, " "))
      assert.is_true(state == nil or gpkg < state, table.concat(args, " ") .. ":\n" .. text)
    end
  end)
end)
