-- The examples every --help ends with are real (issue 29): each one is run
-- as written, from a scratch directory holding the files it names, against
-- the emulator (the documentation's addresses replaced by the emulator's),
-- and ends with the exit code it is meant to; none is left unrun.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = geoservices.json
local parser = require "geoservices.cli.parser"

local q = helper.shell_quote
local CLI = 'os.exit(require("geoservices.cli").main(arg))'
local ORG_PASSWORD = "Help-Org-Pa55word"
local DOC_URLS = { "http://127.0.0.1:8080/server", "https://gis.example.com/server" }

-- A module path whose relative entries are made absolute (the examples run elsewhere).
local function absolute(path)
  return (path:gsub("[^;]+", function(entry)
    if entry:sub(1, 1) == "/" then return entry end
    return helper.ROOT .. "/" .. entry
  end))
end

-- The words of an example line, without its comment or a redirection of its output.
local function words_of(line)
  local words = {}
  -- a word in single quotes is the word ('*'), as the shell reads it
  for w in line:gsub("%s+[#>|].*$", ""):gmatch("%S+") do words[#words + 1] = w:match("^'(.*)'$") or w end
  assert(table.remove(words, 1) == "geoservices", line)
  return words
end

describe("the examples of every --help", function()
  local emu, dir

  -- Runs the command in `dir` with `env`; returns {code, out, err}.
  local function run(args, env)
    local vars = { GEOSERVICES_TTY = "0", LUA_PATH = absolute(package.path), LUA_CPATH = absolute(package.cpath),
                   XDG_CONFIG_HOME = dir .. "/config", GEOSERVICES_URL = emu.url, GEOSERVICES_TOKEN = "admin-token" }
    for k, v in pairs(env or {}) do vars[k] = v end
    local assigns = {}
    for k, v in pairs(vars) do
      if v ~= false then assigns[#assigns + 1] = k .. "=" .. q(v) end
    end
    local quoted = {}
    for i, a in ipairs(args) do
      for _, doc in ipairs(DOC_URLS) do
        if a == doc then a = emu.url end
      end
      quoted[i] = q(a)
    end
    local out, err = helper.tmp_name(), helper.tmp_name()
    local _, _, code = os.execute(("cd %s && env -u GEOSERVICES_PROFILE -u GEOSERVICES_TOKEN -u GEOSERVICES_PASSWORD "
      .. "%s lua5.4 -e %s /dev/null %s >%s 2>%s </dev/null"):format(q(dir), table.concat(assigns, " "), q(CLI),
        table.concat(quoted, " "), q(out), q(err)))
    local r = { code = code, out = helper.read_all(out), err = helper.read_all(err) }
    os.remove(out)
    os.remove(err)
    return r
  end

  local function store(name)
    local r = run{ "replica", "create", "Parcels", "--layers", "0", "--name", name:gsub("%.gpkg$", ""), name,
                   "--poll-interval", "0.02" }
    assert.equal(0, r.code, r.out .. r.err)
  end

  -- What each command's examples need, and what they are meant to end with.
  local CASES = {
    [""] = { env = { GEOSERVICES_PASSWORD = "admin-pass1", GEOSERVICES_TOKEN = false } },
    sync = { setup = function() store("crew-1.gpkg"); store("crew-2.gpkg") end },
    configure = {
      env = { ORG_ADMIN_PASSWORD = ORG_PASSWORD, ORG_ADMIN_ANSWER = "x", GEOSERVICES_PASSWORD = ORG_PASSWORD },
      setup = function()
        local params = { username = "siteadmin", email = "siteadmin@example.com", fullName = "Site Administrator",
                         securityQuestionIdx = 1, userLicenseTypeId = "creatorUT",
                         licenseFile = helper.ROOT .. "/examples/data/sample.prvc",
                         volumesConfig = geoservices.volumes{ storage_class = "standard" } }
        helper.write_file(dir .. "/org.json", json.encode(params))
      end,
    },
    services = {}, snapshots = {}, status = {}, replicas = {}, completion = {},
    login = {
      env = { GEOSERVICES_PASSWORD = "alice-pass1", GEOSERVICES_TOKEN = false },
      setup = function()
        helper.write_file(dir .. "/alice.password", "alice-pass1\n")
        os.execute("mkdir -p " .. q(dir .. "/config/geoservices"))
        helper.write_file(dir .. "/config/geoservices/config", ("[prod]\nurl = %s\nusername = alice\n"
          .. "password_file = %s\n"):format(emu.url, dir .. "/alice.password"))
      end,
    },
    replica = {},
    ["replica create"] = {},
    -- nothing was interrupted here: the store is complete, and resume says so (exit 0)
    ["replica resume"] = { setup = function() store("crew-1.gpkg") end },
    ["replica info"] = { setup = function() store("crew-1.gpkg") end },
    ["replica unregister"] = { setup = function() store("crew-1.gpkg") end },
    ["replica failed"] = { setup = function() store("crew-1.gpkg") end },
    -- the store commands defined by their own files (geoservices.cli.commands.store)
    pending = { setup = function() store("crew-1.gpkg") end },
    conflicts = { setup = function() store("crew-1.gpkg") end },
    resolve = { setup = function() -- a conflict of the feature the example names: crew-2 changed it first
      store("crew-1.gpkg")
      store("crew-2.gpkg")
      for _, crew in ipairs{ "crew-2", "crew-1" } do
        local out, ok = helper.run_shell(("ogrinfo -q -sql %s %s"):format(q("UPDATE Parcels SET OWNER = '" .. crew
          .. "' WHERE GlobalID = '{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}'"), q(dir .. "/" .. crew .. ".gpkg")))
        assert(ok, out)
        local r = run{ "sync", crew .. ".gpkg" }
        assert.equal(crew == "crew-1" and 3 or 0, r.code, r.out .. r.err) -- crew-1's edit is held back
      end
    end },
    discard = { setup = function() -- a local edit of the feature the example names
      store("crew-1.gpkg")
      local out, ok = helper.run_shell(("ogrinfo -q -sql %s %s"):format(q("UPDATE Parcels SET OWNER = 'Help' WHERE "
        .. "GlobalID = '{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}'"), q(dir .. "/crew-1.gpkg")))
      assert(ok, out)
    end },
  }

  setup(function() emu = helper.start_emulator{ args = { "--configure-seconds", "0.02" } } end)
  teardown(function() emu:stop() end)

  it("every command's examples have a case here", function()
    require("geoservices.cli").parser() -- commands defined by their own files add their examples
    for path in pairs(parser.EXAMPLES) do
      assert.is_table(CASES[path], "no case for the examples of '" .. path .. "'")
    end
  end)

  for path, case in pairs(CASES) do
    it(("geoservices %s --help: its examples run"):format(path), function()
      emu:reset()
      dir = helper.tmp_dir()
      finally(function() os.execute("rm -rf " .. q(dir)) end)
      if case.setup then case.setup() end
      require("geoservices.cli").parser() -- commands defined by their own files add their examples
      local examples = parser.EXAMPLES[path]
      assert.is_table(examples, path)
      for _, line in ipairs(examples) do
        local r = run(words_of(line), case.env)
        assert.equal(case.exit or 0, r.code, line .. "\n" .. r.out .. r.err)
      end
    end)
  end
end)
