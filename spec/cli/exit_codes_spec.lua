-- Exit code 2 for every input error, command by command (issue 29): a file
-- that cannot be read, parameters a dry run finds invalid, a missing
-- password, a bad argument. Each case runs as a real process, plain and
-- with --json (whose last line is the result event with exit 2), and the
-- emulator must have received nothing: input errors are refused before
-- anything is sent.
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local q = helper.shell_quote
local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"

describe("exit code 2 for every input error", function()
  local emu, dir
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    dir = helper.tmp_dir()
    helper.write_file(dir .. "/crew-1.json", json.encode{ service = "Parcels", replicaID = CREW1,
                                                         model = "perReplica", replicaServerGen = 1 })
    helper.write_file(dir .. "/broken.json", "{")
    helper.write_file(dir .. "/password", "alice-pass1\n")
    helper.write_file(dir .. "/bad-email.lua", ([[
return { username = "siteadmin", email = "not-an-address", fullName = "Site Administrator",
         securityQuestionIdx = 1, userLicenseTypeId = "creatorUT", licenseFile = %q,
         volumesConfig = geoservices.volumes{ storage_class = "standard" } }
]]):format(helper.ROOT .. "/examples/data/sample.prvc"))
    helper.write_file(dir .. "/taken.gpkg", "not a store, but there")
  end)
  after_each(function() os.execute("rm -rf " .. q(dir)) end)

  -- Runs args (a list; "$DIR" and "$URL" replaced), plain then --json:
  -- both exit 2, the --json run ends with the result event, the message
  -- (stderr, or the error event) matches `says`, and nothing was sent.
  local function refused(args, says, env)
    local list = {}
    for i, a in ipairs(args) do list[i] = a:gsub("%$DIR", dir):gsub("%$URL", emu.url) end
    local vars = { XDG_CONFIG_HOME = dir .. "/config", ORG_ADMIN_PASSWORD = false }
    for k, v in pairs(env or {}) do vars[k] = v end
    local what = table.concat(list, " ")
    local before = emu:requests().total
    local plain = helper.run_cli(list, vars)
    assert.equal(2, plain.code, what .. "\n" .. plain.out .. plain.err)
    assert.truthy(plain.err:find(says, 1, true), what .. ": stderr was " .. plain.err)
    table.insert(list, 1, "--json")
    local j = helper.run_cli(list, vars)
    assert.equal(2, j.code, what .. " --json\n" .. j.out .. j.err)
    local events = helper.events(j.out)
    local last = events[#events]
    assert.same({ "result", 2, false }, { last.event, last.exit, last.ok }, what)
    local err = helper.find_events(events, "error")[1]
    assert.is_table(err, what .. ": no error event in " .. j.out)
    -- refused input ("invalid"), or a local file that is not there or not a store ("io")
    assert.truthy(err.kind == "invalid" or err.kind == "io", what .. ": kind " .. tostring(err.kind))
    assert.equal(before, emu:requests().total, what .. ": something was sent")
  end

  it("sync", function()
    refused({ "--url", "$URL", "--token", "t", "sync", "$DIR/none.json" }, "does not exist")
    refused({ "--url", "$URL", "--token", "t", "sync", "$DIR/broken.json" }, "invalid JSON")
    refused({ "--url", "$URL", "--token", "t", "sync", "$DIR/none.gpkg" }, "none.gpkg")
    refused({ "--url", "$URL", "--token", "t", "sync", "$DIR/crew-1.json", "--edits", "$DIR/none.json" },
      "cannot read")
    refused({ "--url", "$URL", "--token", "t", "sync", "$DIR/crew-1.json", "--edits", "$DIR/broken.json" },
      "not valid JSON")
    refused({ "--url", "$URL", "--token", "t", "sync", "$DIR/crew-1.json", "--output", "$DIR/no/dir/out.json" },
      "output")
    refused({ "--url", "$URL", "--token", "t", "sync", "$DIR/crew-1.json", "--direction", "sideways" },
      "must be one of")
    -- a dry run that would generate a token still fails on the bad state file
    refused({ "--url", "$URL", "--username", "alice", "--password-file", "$DIR/password", "--dry-run", "sync",
              "$DIR/none.json" }, "does not exist")
  end)

  it("configure", function()
    local env = { ORG_ADMIN_PASSWORD = "Cli-Org-Pa55word", ORG_ADMIN_ANSWER = "x" }
    refused({ "--url", "$URL", "configure", "$DIR/none.json" }, "cannot read", env)
    refused({ "--url", "$URL", "configure", "$DIR/broken.json" }, "invalid JSON", env)
    refused({ "--url", "$URL", "configure", "$DIR/bad-email.lua" }, "email", env)
    refused({ "--url", "$URL", "--dry-run", "configure", "$DIR/bad-email.lua" }, "email", env)
    refused({ "--url", "$URL", "--username", "alice", "--password-file", "$DIR/password", "--dry-run", "configure",
              "$DIR/bad-email.lua" }, "email", env)
    -- no administrator password anywhere, and no terminal to ask on
    refused({ "--url", "$URL", "configure", "$DIR/bad-email.lua" }, "ORG_ADMIN_PASSWORD")
  end)

  it("services", function()
    refused({ "services", "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c" }, "GEOSERVICES_URL")
    refused({ "--url", "$URL", "--token", "t", "--ca-file", "$DIR/none.pem", "services",
              "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c" }, "none.pem")
    refused({ "--url", "$URL", "--token", "t", "services", "a,b" }, "invalid")
  end)

  it("snapshots", function()
    refused({ "--url", "$URL", "--token", "t", "snapshots", "" }, "itemId")
    refused({ "--url", "$URL", "--username", "alice", "--password-file", "$DIR/none", "snapshots", "nb-street-trees" },
      "cannot read the password file")
    refused({ "--url", "$URL", "--username", "alice", "--password-file", "-", "snapshots", "nb-street-trees" },
      "no password on standard input")
    -- --username without a password anywhere and no terminal to ask on
    refused({ "--url", "$URL", "--username", "alice", "snapshots", "nb-street-trees" }, "no password for alice")
  end)

  it("status", function()
    refused({ "--profile", "nobody", "status" }, "profile 'nobody' not found")
    refused({ "--url", "$URL", "--token", "t", "--ca-file", "$DIR/none.pem", "status" }, "none.pem")
    refused({ "--url", "$URL", "--token", "t", "--timeout=-1", "status" }, "timeout")
    refused({ "--url", "$URL", "--token-file", "$DIR/none", "status" }, "cannot read the token file")
  end)

  it("replica create, resume, info, unregister, failed", function()
    local gs = { "--url", "$URL", "--token", "alice-token", "replica" }
    local function r(...)
      local list = { table.unpack(gs) }
      for _, a in ipairs{ ... } do list[#list + 1] = a end
      return list
    end
    refused(r("create", "Parcels", "--layers", "0", "$DIR/taken.gpkg"), "exists")
    refused(r("create", "Parcels", "$DIR/new.gpkg"), "--layers")
    refused(r("create", "Parcels", "--layers", "a,b", "$DIR/new.gpkg"), "layers")
    refused(r("create", "Parcels", "--layers", "0", "--param", "x", "$DIR/new.gpkg"), "NAME=VALUE")
    refused(r("create", "Parcels", "--layers", "0", "--geometry=abc", "$DIR/new.gpkg"), "geometry")
    refused(r("create", "Parcels", "--layers", "0", "$DIR/no/dir/new.gpkg"), "writable")
    -- (a complete replica is no input error: resume says there is nothing to resume, exit 0)
    refused(r("resume", "$DIR/none.json"), "no createReplica job is journaled")
    refused(r("info", "$DIR/none.json"), "does not exist")
    refused(r("info", "$DIR/none.gpkg"), "none.gpkg")
    refused(r("unregister", "$DIR/none.json"), "does not exist")
    refused(r("failed", "$DIR/none.gpkg"), "none.gpkg")
    refused(r("failed", "$DIR/taken.gpkg"), "taken.gpkg")
  end)

  -- as sync, replica info and replica failed do (issue 39 item 5: the same code for the same mistake)
  it("status, pending, conflicts, discard, resolve of a path that is no store", function()
    for _, path in ipairs{ "$DIR/none.gpkg", "$DIR/taken.gpkg" } do
      refused({ "status", path }, path:match("[^/]+$"))
      refused({ "pending", path }, path:match("[^/]+$"))
      refused({ "conflicts", path }, path:match("[^/]+$"))
      refused({ "discard", path, "--all" }, path:match("[^/]+$"))
      refused({ "resolve", path, "--all", "--with", "server" }, path:match("[^/]+$"))
    end
  end)

  it("login", function()
    refused({ "--url", "$URL", "login" }, "--username")
    refused({ "--url", "$URL", "--username", "alice", "--password-file", "$DIR/none", "login" },
      "cannot read the password file")
    refused({ "--url", "$URL", "--username", "alice", "--password-file", "-", "login" },
      "no password on standard input")
    refused({ "--url", "$URL", "--username", "alice", "login" }, "no password for alice")
    refused({ "--url", "$URL", "--username", "alice", "--password-file", "$DIR/password", "login",
              "--expiration", "x" }, "malformed argument")
  end)

  it("completion", function()
    refused({ "completion", "tcsh" }, "must be one of")
    refused({ "completion" }, "missing argument")
  end)

  it("emulator", function()
    refused({ "emulator", "--port", "abc" }, "malformed argument")
    refused({ "emulator", "--bogus" }, "unknown option '--bogus'")
  end)
end)
