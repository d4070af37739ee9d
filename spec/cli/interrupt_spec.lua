-- Ctrl-C hints that can be pasted and run (issue 29), under a real
-- pseudo-terminal: the command a Ctrl-C prints never holds a secret nor a
-- path that only existed for the interrupted process (/dev/fd/63 of a
-- process substitution, - for standard input); it says which secret to give
-- again instead, quotes what the shell would split, and, pasted into a
-- shell with that secret given again, it runs and finishes the work.
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local q = helper.shell_quote
local CLI = 'os.exit(require("geoservices.cli").main(arg))'
local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
-- The display of a job being waited for, Pending or the status after it: a first poll later than
-- Pending (a loaded machine) never shows Pending, and the job still runs for two more statuses
local JOB_WAIT = "Pending,|InProgress,"

describe("Ctrl-C hints that can be pasted", function()
  local emu, dir
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    dir = helper.tmp_dir()
  end)
  after_each(function() os.execute("rm -rf " .. q(dir)) end)

  -- A module path whose relative entries are made absolute (the commands run elsewhere).
  local function absolute(path)
    return (path:gsub("[^;]+", function(entry)
      if entry:sub(1, 1) == "/" then return entry end
      return helper.ROOT .. "/" .. entry
    end))
  end

  -- A bash script line that defines `geoservices` as the installed launcher would.
  local function shell_prelude()
    return ("cd %s && export LUA_PATH=%s LUA_CPATH=%s XDG_CONFIG_HOME=%s; unset GEOSERVICES_URL GEOSERVICES_TOKEN "
      .. "GEOSERVICES_PASSWORD GEOSERVICES_TTY; geoservices() { lua5.4 -e %s /dev/null \"$@\"; }; "):format(
        q(dir), q(absolute(package.path)), q(absolute(package.cpath)), q(dir .. "/config"), q(CLI))
  end

  -- Runs `script` (bash) under a pty and types Ctrl-C once `pattern` shows
  -- (within 10 s times helper.WAIT_SCALE: the command starts, signs in and
  -- sends first, which a loaded machine slows).
  local function ctrl_c(pattern, script)
    local p = io.popen(("cd %s && "
      .. helper.PYTHON .. " spec/support/pty_ctrl_c.py %s %d bash -c %s"):format(q(helper.ROOT),
      q(pattern), math.ceil(10 * helper.WAIT_SCALE), q(shell_prelude() .. script)))
    local result = json.decode(p:read("a"))
    p:close()
    assert(result.matched, "never showed " .. pattern .. ": " .. result.output)
    return result
  end

  -- The command between the backquotes of the interrupted line.
  local function follow_of(output)
    local line = output:match("interrupted; [^\n]*")
    assert.is_string(line, output)
    return assert(line:match("`([^`]+)`"), line), line
  end

  -- Runs a pasted command line in bash, `before` first (the secret given again).
  local function paste(command, before)
    local log = helper.tmp_name()
    local _, _, code = os.execute(("bash -c %s >%s 2>&1 </dev/null"):format(
      q(shell_prelude() .. (before or "") .. command), q(log)))
    local text = helper.read_all(log)
    os.remove(log)
    return code, text
  end

  it("replica create with --password-file <(...): no /dev/fd path; pasted with the password again, it resumes",
    function()
      emu:control("settings", { job_step_ms = 1500 })
      local r = ctrl_c(JOB_WAIT, ("geoservices --url %s --username alice --password-file <(printf alice-pass1) "
        .. "replica create Parcels --layers 0 --name crew crew.gpkg --poll-interval 0.1"):format(q(emu.url)))
      assert.equal(130, r.exit, r.output)
      assert.falsy(r.output:find("/dev/fd", 1, true), r.output)
      local command, line = follow_of(r.output)
      assert.equal(("geoservices --url %s --username alice replica resume crew.gpkg"):format(emu.url), command)
      assert.truthy(line:find("give the password of alice again", 1, true), line)
      emu:control("settings", { job_step_ms = 50 })
      local code, text = paste(command, "export GEOSERVICES_PASSWORD=alice-pass1; ")
      assert.equal(0, code, text)
      assert.truthy(helper.read_all(dir .. "/crew.gpkg"), "no store after the pasted command: " .. text)
    end)

  it("sync --async with the token on standard input and a path with a space: quoted, the token asked again",
    function()
      helper.write_file(dir .. "/my crew.json", json.encode{ service = "Parcels", replicaID = CREW1,
                                                           model = "perReplica", replicaServerGen = 1 })
      emu:control("settings", { job_step_ms = 1500 })
      local r = ctrl_c(JOB_WAIT, ("printf alice-token | geoservices --url %s --token-file - sync 'my crew.json' "
        .. "--async --poll-interval 0.1"):format(q(emu.url)))
      assert.equal(130, r.exit, r.output)
      local command, line = follow_of(r.output)
      assert.equal(("geoservices --url %s sync 'my crew.json' --async"):format(emu.url), command)
      assert.truthy(line:find("give the token again", 1, true), line)
      emu:control("settings", { job_step_ms = 50 })
      local code, text = paste(command, "export GEOSERVICES_TOKEN=alice-token; ")
      assert.equal(0, code, text)
      assert.is_true(json.decode(helper.read_all(dir .. "/my crew.json")).replicaServerGen > 1, text)
    end)

  it("Ctrl-C during the createReplica request: how to see whether the replica was made, runnable", function()
    -- answered long after the Ctrl-C, however long the pty is stalled before it (nobody waits for it)
    emu:fault{ route = "createReplica", kind = "delay", delay_ms = 60000 }
    local r = ctrl_c("sending", ("GEOSERVICES_TOKEN=alice-token geoservices --url %s replica create Parcels "
      .. "--layers 0 --name crew-9 crew-9.gpkg"):format(q(emu.url)))
    assert.equal(130, r.exit, r.output)
    local command, line = follow_of(r.output)
    assert.equal(("geoservices --url %s replicas Parcels"):format(emu.url), command)
    assert.truthy(line:find("a replica named crew-9 may have been created", 1, true), line)
    local code, text = paste(command, "export GEOSERVICES_TOKEN=alice-token; ")
    assert.equal(0, code, text)
    assert.truthy(text:find("1 replica of Parcels", 1, true) and text:find("crew-9", 1, true), text)
  end)

  it("a --token value is never printed; the hint says to give the token again", function()
    helper.write_file(dir .. "/crew.json", json.encode{ service = "Parcels", replicaID = CREW1,
                                                      model = "perReplica", replicaServerGen = 1 })
    emu:control("settings", { job_step_ms = 1500 })
    local r = ctrl_c(JOB_WAIT, ("geoservices --url %s --token alice-token sync crew.json --async "
      .. "--poll-interval 0.1"):format(q(emu.url)))
    assert.equal(130, r.exit, r.output)
    local command, line = follow_of(r.output)
    assert.falsy(r.output:find("alice-token", 1, true), r.output)
    assert.equal(("geoservices --url %s sync crew.json --async"):format(emu.url), command)
    assert.truthy(line:find("give the token again", 1, true), line)
  end)
end)
