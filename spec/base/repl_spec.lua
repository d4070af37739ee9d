-- REPL ergonomics: what `tostring` of each object the library returns
-- prints (compact, informative, never a secret), geoservices.pp, and a real
-- `lua5.4 -i -e 'gs = require "geoservices"'` session.
local geoservices = require "geoservices"
local helper = require "spec.helper"

local q = helper.shell_quote
local SERVICE1 = "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c"
local SERVICE2 = "7a1e3c5b2d4f4e6a9c8b7a6f5e4d3c2b"
local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local TOKEN = "alice-token"

describe("REPL summaries", function()
  local emu, client
  setup(function()
    emu = helper.start_emulator{ args = { "--configure-seconds", "0.02" } }
  end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    client = geoservices.client{ url = emu.url, token = TOKEN }
  end)

  local function no_secret(text)
    assert.falsy(text:find(TOKEN, 1, true), text)
    assert.falsy(text:find("admin-token", 1, true), text)
    return text
  end

  it("a client: address, admin path, whether it has a token, timeout", function()
    assert.equal(("geoservices.Client <%s> (admin path 'admin', token, timeout 30 s)"):format(emu.url),
      no_secret(tostring(client)))
    local provider = geoservices.client{ url = emu.url, token = function() return TOKEN end, timeout = 5 }
    assert.truthy(tostring(provider):find("token provider, timeout 5 s", 1, true))
  end)

  it("services: a count with names, then one line per service", function()
    local admin = geoservices.client{ url = emu.url, token = "admin-token" }
    local list = assert(admin:get_services_by_id{ SERVICE1, SERVICE2 })
    assert.equal("2 services: Parcels.FeatureServer, Basemap.MapServer", tostring(list))
    assert.equal("service Hosted/Parcels.FeatureServer [" .. SERVICE1 .. "] STARTED, extensions FeatureServer",
      no_secret(tostring(list[1])))
  end)

  it("a snapshot list: count, item and names", function()
    local list = assert(client:list_snapshots("nb-street-trees"))
    assert.equal("3 snapshots of item nb-street-trees: Baseline, Draft model, Unreviewed", tostring(list))
  end)

  it("an error: kind, message, code and address on one line", function()
    local _, err = geoservices.client{ url = emu.url, token = "viewer-token" }:list_snapshots("nb-street-trees")
    local text = tostring(err)
    assert.truthy(text:match("^auth: .+ %(code 403%) <" .. emu.url:gsub("%p", "%%%0") .. "/admin/notebooks"), text)
    assert.falsy(text:find("viewer-token", 1, true))
    local _, invalid = client:get_services_by_id{}
    assert.equal("invalid: serviceIDs: at least one service id is required", tostring(invalid))
  end)

  it("a replica, a sync result and an async operation", function()
    local path = helper.tmp_name()
    os.remove(path)
    finally(function() os.remove(path) end)
    local r = assert(geoservices.replica(path, { service = "Parcels", replicaID = CREW1, replicaServerGen = 1 }))
    assert.equal(("geoservices.Replica %s of Parcels (perReplica, generation 1) <%s>"):format(CREW1, path),
      tostring(r))
    local result = assert(client:sync(r))
    local text = no_secret(tostring(result))
    assert.truthy(text:match("^sync " .. CREW1:gsub("%p", "%%%0") .. ": "), text)
    assert.truthy(text:find("generation %d+"), text)

    local op = assert(client:synchronize_replica("Parcels", { replicaID = CREW1, replicaServerGen = 1, async = true },
      { wait = false }))
    assert.equal("geoservices.SyncOperation Parcels/synchronizeReplica replica " .. CREW1 .. ": submitted",
      no_secret(tostring(op)))
  end)

  it("the organization root and a configure operation: state and stage counts", function()
    local admin = geoservices.client{ url = emu.url, token = "admin-token" }
    assert.equal("organization not configured", tostring(assert(admin:configure_status())))
    local root, op = admin:configure({
      username = "siteadmin", password = "Repl-Pa55word", email = "siteadmin@example.com",
      fullName = "Site Administrator", securityQuestionIdx = 1, securityQuestionAns = "REPL-ANSWER",
      userLicenseTypeId = "creatorUT", licenseFile = "examples/data/sample.prvc",
      volumesConfig = geoservices.volumes{ storage_class = "standard" }, systemArchitectureProfile = "development",
    }, { wait = false })
    assert(root, op)
    local text = tostring(op)
    assert.truthy(text:match("^configure operation: organization in_progress: %d+ of 13 stages completed"), text)
    assert.falsy(text:find("Repl-Pa55word", 1, true))
    assert.falsy(geoservices.pp.format(op):find("Repl-Pa55word", 1, true))
    local final = assert(op:wait{ poll_interval = 0.02, timeout = helper.TEST_TIMEOUT })
    assert.equal("organization ready: 13 of 13 stages completed", tostring(final))
  end)
end)

describe("geoservices.pp", function()
  local pp = geoservices.pp

  it("sorts keys, keeps the array part first and shows the type of wrapped results", function()
    local value = setmetatable({ "first", zeta = 1, alpha = { x = true }, [10] = "ten", ["with space"] = 2 },
      { __name = "geoservices.Thing" })
    assert.equal(table.concat({
      "geoservices.Thing {",
      '  "first",',
      "  [10] = \"ten\",",
      "  alpha = {",
      "    x = true,",
      "  },",
      '  ["with space"] = 2,',
      "  zeta = 1,",
      "}",
    }, "\n"), pp.format(value))
  end)

  it("truncates long arrays and long strings, and stops at cycles and depth", function()
    local long = {}
    for i = 1, 25 do long[i] = i end
    assert.equal("{ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ... 15 more }", pp.format(long))
    local rows = {}
    for i = 1, 12 do rows[i] = { id = i } end
    local text = pp.format{ rows = rows }
    assert.truthy(text:find("rows = { -- 12 items", 1, true))
    assert.truthy(text:find("-- ... 2 more", 1, true))
    assert.equal('"' .. ("x"):rep(5) .. '"... (300 bytes)', pp.format(("x"):rep(300), { max_string = 5 }))
    local cyclic = {}
    cyclic.self = cyclic
    assert.equal("{\n  self = <cycle>,\n}", pp.format(cyclic))
    assert.equal("{\n  a = {...},\n}", pp.format({ a = { b = 1 } }, { max_depth = 1 }))
  end)

  it("prints null, floats, functions stably, and redacts secrets", function()
    local text = pp.format{ n = geoservices.null, f = 2.0, i = 2, fn = print, token = "t0k3n",
                            params = { password = "pw", securityQuestionAns = "ans", username = "u" } }
    assert.truthy(text:find("n = null,", 1, true))
    assert.truthy(text:find("f = 2.0,", 1, true))
    assert.truthy(text:find("i = 2,", 1, true))
    assert.truthy(text:find("fn = <function>,", 1, true))
    assert.truthy(text:find("token = <redacted>,", 1, true))
    assert.truthy(text:find("password = <redacted>,", 1, true))
    assert.falsy(text:find("t0k3n", 1, true) or text:find('"pw"', 1, true) or text:find('"ans"', 1, true))
  end)

  it("geoservices.pp(value) writes to standard output", function()
    local written = {}
    local real = io.stdout
    local fake = { write = function(_, ...) for _, s in ipairs{ ... } do written[#written + 1] = s end end }
    io.stdout = fake -- luacheck: ignore
    local ok, err = pcall(pp, { b = 2, a = 1 })
    io.stdout = real -- luacheck: ignore
    assert(ok, err)
    assert.equal("{\n  a = 1,\n  b = 2,\n}\n", table.concat(written))
  end)
end)

describe("an interactive session", function()
  it("lua5.4 -i -e 'gs = require \"geoservices\"' prints summaries", function()
    local emu = helper.start_emulator()
    finally(function() emu:stop() end)
    local input = helper.tmp_name()
    local f = assert(io.open(input, "w"))
    f:write(("c = gs.client{ url = %q, token = %q }\n"):format(emu.url, TOKEN))
    f:write("c\n") -- a bare expression: the REPL prints it with tostring
    f:write("c:list_snapshots('nb-street-trees')\n")
    f:write("gs.pp({ b = 1, a = { 1, 2 } })\n")
    f:close()
    local cmd = ("cd %s && LUA_PATH=%s LUA_CPATH=%s lua5.4 -i -e %s < %s 2>&1"):format(q(helper.ROOT),
      q(package.path), q(package.cpath), q('gs = require "geoservices"'), q(input))
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    p:close()
    os.remove(input)
    assert.truthy(out:find("geoservices.Client <" .. emu.url .. ">", 1, true), out)
    assert.truthy(out:find("3 snapshots of item nb-street-trees", 1, true), out)
    assert.truthy(out:find("a = { 1, 2 },", 1, true), out)
    for line in out:gmatch("[^\n]+") do -- the echoed input ("> ...") holds the token; no printed value does
      if line:sub(1, 2) ~= "> " then assert.falsy(line:find(TOKEN, 1, true), line) end
    end
  end)
end)
