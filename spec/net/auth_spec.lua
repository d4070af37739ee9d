-- Tokens end to end against the emulator process (issue 16): generateToken
-- through geoservices.client{username =, password =} and geoservices.token,
-- server and portal endpoints, Bearer headers, refresh before expiry and on
-- 498 (also in the middle of a configure and of an async sync), failures of
-- kind "auth" with the server's message, and the password nowhere; tokens
-- the right way round for configure.
local core = require "geoservices.core"
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local helper = require "spec.helper"
local pp = require "geoservices.base.pp"

local PASSWORD = { admin = "admin-pass1", alice = "alice-pass1" }
local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local LICENSE = "examples/data/sample.prvc"
local FAST = { poll_interval = 0.02, timeout = helper.TEST_TIMEOUT }
local ORG_PASSWORD = "Org-Pa55word-SECRET"

local function org_params()
  return {
    username = "siteadmin", password = ORG_PASSWORD, email = "siteadmin@example.com", fullName = "Site Admin",
    securityQuestionIdx = 1, securityQuestionAns = "Springfield", userLicenseTypeId = "creatorUT",
    licenseFile = LICENSE, volumesConfig = geoservices.volumes{ storage_class = "standard" },
  }
end

-- Every string reachable from a value, tostring of tables included.
local function all_text(value, out, seen)
  out, seen = out or {}, seen or {}
  if type(value) == "string" then out[#out + 1] = value
  elseif type(value) == "table" and not seen[value] then
    seen[value] = true
    out[#out + 1] = tostring(value)
    for k, v in pairs(value) do all_text(k, out, seen); all_text(v, out, seen) end
  end
  return out
end

local function assert_hidden(secret, value, what)
  for _, text in ipairs(all_text(value)) do
    assert(not text:find(secret, 1, true), what .. " reveals the secret: " .. text)
  end
end

describe("tokens from generateToken", function()
  local emu
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function() emu:reset() end)

  it("a client with a username and password generates its token once and reuses it", function()
    local c = geoservices.client{ url = emu.url, username = "alice", password = PASSWORD.alice }
    assert.equal(3, assert(c:list_snapshots("nb-street-trees")).total)
    assert.equal(3, assert(c:list_snapshots("nb-street-trees")).total)
    assert.equal(1, emu:count("generateToken"))
    assert.equal("geoservices.Client <" .. emu.url .. "> (admin path 'admin', tokens for 'alice', timeout 30 s)",
      tostring(c))
    assert_hidden(PASSWORD.alice, c, "the client")
    assert_hidden(PASSWORD.alice, pp.format(c), "pp of the client")
  end)

  it("asks for username, password, client, referer, expiration and f=json, the password redacted to observers",
    function()
      local events = {}
      local c = geoservices.client{ url = emu.url, username = "admin", password = PASSWORD.admin,
                                    token_expiration = 15 }
      c:observe(function(ev) if ev.type == "request" then events[#events + 1] = ev end end)
      assert(c:get_services_by_id{ "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c" })
      local ask = events[1]
      assert.equal(emu.url .. "/tokens/generateToken", ask.url)
      local fields = {}
      for _, pair in ipairs(ask.fields) do fields[pair[1]] = pair[2] end
      assert.same({ f = "json", username = "admin", password = "<redacted>", client = "referer",
                    referer = emu.root, expiration = "15" }, fields)
      local op_fields = {}
      for _, pair in ipairs(events[2].fields) do op_fields[pair[1]] = pair[2] end
      assert.equal("<redacted>", op_fields.token)
      assert_hidden(PASSWORD.admin, events, "the observer events")
    end)

  it("uses a portal's sharing/rest/generateToken, or any address given", function()
    local c = geoservices.client{ url = emu.url, username = "alice", password = PASSWORD.alice,
                                  token_endpoint = "portal" }
    assert(c:list_snapshots("nb-street-trees"))
    local provider = geoservices.token{ token_url = emu.url .. "/sharing/rest/generateToken", username = "alice",
                                        password = function() return PASSWORD.alice end, client = "requestip" }
    local shared = geoservices.client{ url = emu.url, token = provider }
    assert(shared:list_snapshots("nb-street-trees"))
    assert.equal(1, provider.count)
    assert.is_number(provider.expires)
    assert.matches("^geoservices.TokenProvider <" .. emu.url:gsub("%p", "%%%0") .. "/sharing/rest/generateToken> "
      .. "for user 'alice' %(client requestip, 60 min, current token expires ", tostring(provider))
    assert.equal(2, emu:count("generateToken"))
  end)

  it("a standalone provider gets a token over its own connection", function()
    local provider = geoservices.token{ url = emu.url, username = "alice", password = PASSWORD.alice }
    local t = assert(provider:get())
    assert.is_string(t)
    assert.equal(t, provider:get()) -- kept until it is due
    assert.equal(1, emu:count("generateToken"))
    -- geoservices.token hands the provider its connection; the module alone
    -- (below the client) makes none, and says so before anything is sent
    local bare = require("geoservices.net.token").new{ url = emu.url, username = "alice", password = PASSWORD.alice }
    local ok, err = pcall(bare.get, bare)
    assert.is_false(ok)
    assert.matches("no connection of its own.*give get%(%) a client", err)
    assert.equal(1, emu:count("generateToken"))
    assert.is_string(assert(bare:get(geoservices.client{ url = emu.url })))
    assert.equal(2, emu:count("generateToken"))
  end)

  it("fails with kind auth, reason generate_token and the server's message, never the password", function()
    local wrong = "Wrong-Pa55-SECRET"
    local c = geoservices.client{ url = emu.url, username = "alice", password = wrong }
    local res, err = c:list_snapshots("nb-street-trees")
    assert.is_nil(res)
    assert.equal("auth", err.kind)
    assert.equal("generate_token", err.reason)
    assert.equal(400, err.code)
    assert.matches("Unable to generate token.: Invalid username or password.", err.message, 1, true)
    assert.matches("for user 'alice'", err.message, 1, true)
    assert_hidden(wrong, err, "the error")
    assert_hidden(wrong, c, "the client")
    assert.equal(0, emu:count("snapshots/list")) -- nothing sent without a token
  end)

  it("sends the token in an Authorization: Bearer header instead of the form with bearer = true", function()
    local events = {}
    local c = geoservices.client{ url = emu.url, token = "alice-token", bearer = true }
    c:observe(function(ev) if ev.type == "request" then events[#events + 1] = ev end end)
    assert.equal(3, assert(c:list_snapshots("nb-street-trees")).total)
    local echo = assert(c:post(emu.root .. "/_emulator/echo", { a = "1" }))
    assert.equal("Bearer alice-token", echo.headers.authorization)
    assert.is_nil(echo.fields.token)
    assert.same({ "Authorization: Bearer <redacted>" }, events[1].headers)
    for _, pair in ipairs(events[1].fields) do assert.not_equal("token", pair[1]) end
    assert.matches("as a Bearer header", tostring(c), 1, true)
  end)

  it("sends a generated token's Referer with it: a token bound to a referer is refused without", function()
    local c = geoservices.client{ url = emu.url, username = "alice", password = PASSWORD.alice }
    assert(c:list_snapshots("nb-street-trees"))
    local echo = assert(c:post(emu.root .. "/_emulator/echo", {}))
    assert.equal(emu.root, echo.headers.referer)
  end)

  it("refreshes once on 498 when the server forgot the token, and never loops", function()
    local c = geoservices.client{ url = emu.url, username = "alice", password = PASSWORD.alice }
    assert(c:list_snapshots("nb-street-trees"))
    emu:reset() -- the emulator forgets every token it generated
    assert(c:list_snapshots("nb-street-trees"))
    assert.equal(1, emu:count("generateToken"))
    assert.equal(2, emu:count("snapshots/list")) -- the 498, then the retry with a fresh token
  end)

  it("asks a function provider that gave an expiry again shortly before it, with reason expiring", function()
    -- A token `ahead` s from now (whole seconds) lives ahead-2 or ahead-1 s
    -- by the client's count and is replaced after four fifths of that: a
    -- spec stalled that long between its first two calls sees it replaced
    -- already, and runs again with a token that lives longer.
    helper.within_window("the second call while the token is fresh", { 3, 8, 20 }, function(ahead)
      local reasons = {}
      local c = geoservices.client{ url = emu.url, token = function(reason)
        reasons[#reasons + 1] = reason
        return "alice-token", (os.time() + ahead) * 1000 -- epoch milliseconds, as generateToken answers
      end }
      local started = core.monotonic()
      assert(c:list_snapshots("nb-street-trees"))
      assert(c:list_snapshots("nb-street-trees"))
      if reasons[2] and core.monotonic() - started >= 0.8 * (ahead - 2) then return false end
      assert.same({ "initial" }, reasons)
      helper.sleep(0.8 * (ahead - 1) + 0.1) -- past its life less the margin (a fifth of it)
      assert(c:list_snapshots("nb-street-trees"))
      assert.same({ "initial", "expiring" }, reasons)
      c:close()
      return true
    end)
  end)

  it("raises on misuse of the options", function()
    assert.has_error(function() geoservices.client{ url = emu.url, username = "alice" } end,
      "geoservices.client: option 'password' is required (a string or a function returning one)")
    assert.has_error(function()
      geoservices.client{ url = emu.url, token = "t", username = "alice", password = "x" }
    end, "geoservices.client: give either 'token' or 'username' and 'password'")
    assert.has_error(function()
      geoservices.client{ url = emu.url, username = "alice", password = "x", token_endpoint = "nowhere" }
    end, "geoservices.client: option 'endpoint' must be \"server\" or \"portal\"")
    assert.has_error(function() geoservices.token{ url = emu.url, username = "a", password = "b", client = "x" } end)
  end)
end)

describe("tokens that expire in the middle of long waits", function()
  local emu
  setup(function() emu = helper.start_emulator{ args = { "--token-seconds", "2" } } end)
  teardown(function() emu:stop() end)
  before_each(function() emu:reset() end)

  it("a configure whose token expires half-way completes: replaced before expiry", function()
    emu:control("configure", { stage_seconds = 0.25 })
    local c = geoservices.client{ url = emu.url, username = "admin", password = PASSWORD.admin }
    local root = assert(c:configure(org_params(), FAST))
    assert.equal("ready", root.status.state)
    assert.is_true(emu:count("generateToken") >= 2, "tokens generated: " .. emu:count("generateToken"))
  end)

  it("a configure whose token expires half-way completes: refreshed on 498 (admin error dialect)", function()
    emu:control("configure", { stage_seconds = 0.25 })
    local reasons = {}
    local probe = geoservices.token{ url = emu.url, username = "admin", password = PASSWORD.admin,
                                     client = "requestip" }
    -- a provider that gives no expiry: only the server's 498 tells it is stale
    local c = geoservices.client{ url = emu.url, token = function(reason)
      reasons[#reasons + 1] = reason
      return probe:get(nil, true)
    end }
    local root = assert(c:configure(org_params(), FAST))
    assert.equal("ready", root.status.state)
    assert.equal("initial", reasons[1])
    assert.equal("refresh", reasons[2])
  end)

  it("an async sync whose token expires while the job runs completes", function()
    emu:control("settings", { job_step_ms = 700 })
    local dir = helper.tmp_name()
    os.remove(dir)
    local path = dir .. ".replica.json"
    local f = assert(io.open(path, "wb"))
    f:write(json.encode{ service = "Parcels", replicaID = CREW1, model = "perReplica", replicaServerGen = 1 })
    f:close()
    finally(function() os.remove(path) end)
    local c = geoservices.client{ url = emu.url, username = "alice", password = PASSWORD.alice }
    local statuses = {}
    local result = assert(c:sync(path, nil, { params = { async = true }, poll_interval = 0.1,
                                               on_status = function(s) statuses[#statuses + 1] = s.status end }))
    assert.equal(CREW1, result.replicaID)
    assert.equal("Completed", statuses[#statuses])
    assert.is_true(emu:count("generateToken") >= 2, "tokens generated: " .. emu:count("generateToken"))
  end)
end)

describe("tokens the right way round for configure", function()
  local emu
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    emu:control("configure", { stage_seconds = 0.02 })
  end)

  it("configures a site without an organization with no token, then follows it as the new administrator",
    function()
      local c = geoservices.client{ url = emu.url }
      local root = assert(c:configure(org_params(), FAST))
      assert.equal("ready", root.status.state)
      assert.equal(1, emu:count("configure"))
      assert.is_true(emu:count("generateToken") >= 1)
      assert_hidden(ORG_PASSWORD, root, "the ready root")
      -- the root resource now needs a token; the answer is in the admin dialect
      local res, err = c:configure_status()
      assert.is_nil(res)
      assert.equal("auth", err.kind)
      assert.equal(499, err.code)
      assert.equal("Token Required.", err.message)
      -- the administrator configure created signs in
      local admin = geoservices.client{ url = emu.url, username = "siteadmin", password = ORG_PASSWORD }
      assert.equal("ready", assert(admin:configure_status()).status.state)
    end)

  it("reads the root of a site without an organization with a client that cannot get a token yet", function()
    local c = geoservices.client{ url = emu.url, username = "siteadmin", password = ORG_PASSWORD }
    local root = assert(c:configure_status())
    assert.equal("not_configured", root.status.state)
    -- and configures it: the token is generated once the administrator exists
    assert.equal("ready", assert(c:configure(org_params(), FAST)).status.state)
    assert.equal("ready", assert(c:configure_status()).status.state)
  end)
end)
