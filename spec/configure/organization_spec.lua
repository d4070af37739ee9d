-- The emulator's organization as a real server reports it (issue 16), end
-- to end: stages that appear only once they start, some side by side, the
-- final state as ready, configured or absent, and configure parameters as
-- the vendor's own tooling sends them (logLevel "", folderPathsToRegister
-- {paths}, serverLicenseFile as a file).
local geoservices = require "geoservices"
local helper = require "spec.helper"

local LICENSE = "examples/data/sample.prvc"
local FAST = { poll_interval = 0.005, timeout = helper.TEST_TIMEOUT }

local function params()
  return {
    username = "siteadmin", password = "Org-Pa55word", email = "siteadmin@example.com", fullName = "Site Admin",
    securityQuestionIdx = 2, securityQuestionAns = "Eagles", userLicenseTypeId = "creatorUT",
    licenseFile = LICENSE, volumesConfig = geoservices.volumes{ storage_class = "standard" },
  }
end

describe("the emulator's organization", function()
  local emu
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function() emu:reset() end)

  local function client() return geoservices.client{ url = emu.url, token = "admin-token" } end

  -- The root resource as the server sends it, without the operation's merge.
  local function raw_root(c)
    return assert(c:post(c:admin_url(""), {}, { retry = "read" }))
  end

  it("lists a stage in the root resource only once it has started", function()
    emu:control("configure", { stage_seconds = 0.15 })
    local c = client()
    local root, op = assert(c:configure(params(), { wait = false }))
    assert.equal(14, #root.status.stages) -- the configure response lists them all
    local counts = {}
    helper.wait_for("the organization to be ready", function()
      local r = raw_root(c)
      counts[#counts + 1] = #r.status.stages
      for _, stage in ipairs(r.status.stages) do assert.not_equal("not_started", stage.state) end
      return r.status.state == "ready"
    end)
    assert.is_true(counts[1] < 3, "first list: " .. counts[1])
    assert.equal(14, counts[#counts])
    for i = 2, #counts do assert.is_true(counts[i] >= counts[i - 1]) end
    -- the operation keeps every stage it has seen, at its last known state
    assert(op:poll())
    assert.equal(14, #op.root.status.stages)
  end)

  it("runs some stages side by side with parallel = true, and the client sees each transition", function()
    emu:control("configure", { stage_seconds = 0.05, parallel = true })
    local running_together = 0
    local transitions = {}
    local root = assert(client():configure(params(), { poll_interval = 0.005, timeout = helper.TEST_TIMEOUT,
      on_stage = function(stage, old)
        transitions[stage.name] = (transitions[stage.name] or "") .. tostring(old) .. ">" .. stage.state .. " "
      end,
    }))
    assert.equal("ready", root.status.state)
    local by_start = {}
    for _, stage in ipairs(root.status.stages) do
      if stage.startTime and stage.startTime > 0 then
        by_start[stage.startTime] = (by_start[stage.startTime] or 0) + 1
      end
    end
    for _, n in pairs(by_start) do running_together = math.max(running_together, n) end
    assert.equal(3, running_together) -- the three stores start together
    assert.equal("not_started>in_progress in_progress>completed ", transitions["Queue store"])
    assert.equal("not_started>in_progress in_progress>completed ", transitions["Object store"])
  end)

  it("reports its end as configured, or with no state at all, and the client finishes on both", function()
    for _, final in ipairs{ "configured", "none" } do
      emu:reset()
      emu:control("configure", { stage_seconds = 0.01, final_state = final })
      local root = assert(client():configure(params(), FAST))
      if final == "none" then assert.is_nil(root.status.state) else assert.equal(final, root.status.state) end
      assert.equal("organization " .. (final == "none" and "ready" or final) .. ": 13 of 13 stages completed",
        tostring(root))
    end
  end)

  it("takes the parameters as the vendor's tooling sends them, on both sides", function()
    emu:control("configure", { stage_seconds = 0.01 })
    local p = params()
    p.logSettings = { logLevel = "" }
    p.folderPathsToRegister = { paths = { "/mnt/data1", "/mnt/data2" } }
    p.serverLicenseFile = LICENSE
    local preview = assert(client():configure(p, { dry_run = true }))
    local files = {}
    for _, f in ipairs(preview.files) do files[#files + 1] = f.name end
    table.sort(files)
    assert.same({ "licenseFile", "serverLicenseFile" }, files)
    assert.truthy(tostring(preview):find('folderPathsToRegister = {"paths":["/mnt/data1","/mnt/data2"]}', 1, true))
    assert.truthy(tostring(preview):find('logSettings = {"logLevel":""}', 1, true))
    assert.equal("ready", assert(client():configure(p, FAST)).status.state)
  end)

  it("accepts a license larger than the emulator keeps in memory (a part spooled to disk)", function()
    emu:control("configure", { stage_seconds = 0.01 })
    local big = helper.tmp_name()
    local f = assert(io.open(big, "wb"))
    f:write(("LICENSE-DATA-"):rep(300000)) -- 3.9 MB, above the 1 MiB spool threshold
    f:close()
    finally(function() os.remove(big) end)
    local p = params()
    p.licenseFile, p.serverLicenseFile = big, big
    assert.equal("ready", assert(client():configure(p, FAST)).status.state)
    local c = client()
    local echo = assert(c:post(emu.root .. "/_emulator/echo", {}, { multipart = true,
      files = { { name = "licenseFile", file = big, filename = "big.prvc" } } }))
    assert.is_true(echo.files.licenseFile.spooled)
    assert.equal(3900000, echo.files.licenseFile.length)
  end)

  it("still refuses what is wrong in those parameters", function()
    local cases = {
      { "folderPathsToRegister", function(p) p.folderPathsToRegister = { paths = { "" } } end },
      { "folderPathsToRegister", function(p) p.folderPathsToRegister = { "/a" } end },
      { "logSettings", function(p) p.logSettings = { logLevel = 5 } end },
      { "serverLicenseFile", function(p) p.serverLicenseFile = "/nonexistent/server.prvc" end },
    }
    for _, case in ipairs(cases) do
      local p = params()
      case[2](p)
      local res, err = client():configure(p, FAST)
      assert.is_nil(res)
      assert.equal("invalid", err.kind)
      assert.equal(case[1], err.parameter)
    end
    assert.equal(0, emu:count("configure"))
  end)
end)
