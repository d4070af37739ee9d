-- configure signs in only when the server asks for a token (issue 26): a
-- site being configured answers configure and its root resource without a
-- token (no user exists yet), and its token endpoint may answer only late
-- in the configuration. Against a scripted server whose token endpoint
-- fails, configure must still succeed, and never call it; once the server
-- asks, the client signs in and goes on.
local geoservices = require "geoservices"
local helper = require "spec.helper"

local CONFIGURE = "/server/admin/configure"
local ROOT = "/server/admin"
local TOKENS = "/server/tokens/generateToken"
local FAST = { poll_interval = 0.02, timeout = helper.TEST_TIMEOUT, max_poll_errors = 3 }

local function params()
  return {
    username = "siteadmin", password = "Org-Pa55word-SECRET", email = "siteadmin@example.com",
    fullName = "Site Admin", securityQuestionIdx = 1, securityQuestionAns = "Springfield",
    userLicenseTypeId = "creatorUT", licenseFile = "examples/data/sample.prvc",
    volumesConfig = geoservices.volumes{ storage_class = "standard" },
  }
end

local function root(state, stage_state)
  return { json = { fullVersion = "11.4.0", resources = state == "ready" and { "orgs", "services" } or {},
                    status = { state = state, message = "Configuring the organization",
                               stages = { { name = "License validation", state = stage_state } } } } }
end

local IN_PROGRESS = root("in_progress", "in_progress")
local READY = root("ready", "completed")
local TOKEN_REQUIRED = { json = { status = "error", messages = { "Token Required." }, code = 499 } }

local function count(server, path)
  local n = 0
  for _, r in ipairs(server:requests()) do
    if r.path:match("^[^?]*") == path then n = n + 1 end
  end
  return n
end

local function bodies(server, path)
  local list = {}
  for _, r in ipairs(server:requests()) do
    if r.path:match("^[^?]*") == path then list[#list + 1] = r.body end
  end
  return list
end

describe("configure signs in only when the server asks", function()
  local serve, stop_all = helper.scripted_servers()
  after_each(function() stop_all() end)

  -- a token endpoint that is not up yet: 503, or a connection closed unanswered
  for _, down in ipairs{ { status = 503, body = "Service Unavailable" }, { hang_up = true } } do
    local how = down.hang_up and "closes the connection unanswered" or "answers 503"
    local function server()
      return serve{
        { method = "POST", path = CONFIGURE, responses = { IN_PROGRESS } },
        { method = "POST", path = ROOT, responses = { IN_PROGRESS, IN_PROGRESS, READY } },
        { method = "POST", path = TOKENS, responses = { down } },
      }
    end

    it(("configures without a token of its own while the token endpoint %s"):format(how), function()
      local s = server()
      local c = geoservices.client{ url = s.url, retry = false }
      local ready, err = c:configure(params(), FAST)
      assert.is_nil(err)
      assert.equal("ready", ready.status.state)
      assert.equal(0, count(s, TOKENS))
      assert.equal(1, count(s, CONFIGURE))
    end)

    it(("configures as a user with a password while the token endpoint %s"):format(how), function()
      local s = server()
      local c = geoservices.client{ url = s.url, username = "siteadmin", password = "Org-Pa55word-SECRET",
                                    retry = false }
      local ready, err = c:configure(params(), FAST)
      assert.is_nil(err)
      assert.equal("ready", ready.status.state)
      assert.equal(0, count(s, TOKENS))
      assert.equal(1, count(s, CONFIGURE))
      -- and reads the root resource without signing in either
      assert.equal("ready", assert(c:configure_status()).status.state)
      assert.equal(0, count(s, TOKENS))
    end)
  end

  it("signs in as the new administrator once the server asks for a token, and keeps doing so", function()
    local s = serve{
      { method = "POST", path = CONFIGURE, responses = { IN_PROGRESS } },
      { method = "POST", path = ROOT, responses = { IN_PROGRESS, TOKEN_REQUIRED, IN_PROGRESS, READY } },
      { method = "POST", path = TOKENS,
        responses = { { json = { token = "tok-1", expires = (os.time() + 3600) * 1000 } } } },
    }
    local c = geoservices.client{ url = s.url, retry = false }
    local ready = assert(c:configure(params(), FAST))
    assert.equal("ready", ready.status.state)
    assert.equal(1, count(s, TOKENS))
    local polls = bodies(s, ROOT)
    assert.equal(4, #polls)
    assert.falsy(polls[1]:find("token=", 1, true), polls[1])
    assert.falsy(polls[2]:find("token=", 1, true), polls[2]) -- answered "Token Required."
    assert.truthy(polls[3]:find("token=tok-1", 1, true), polls[3]) -- the same poll, signed in
    assert.truthy(polls[4]:find("token=tok-1", 1, true), polls[4])
  end)

  it("rides over a token endpoint that fails when the server first asks, then signs in", function()
    local s = serve{
      { method = "POST", path = CONFIGURE, responses = { IN_PROGRESS } },
      { method = "POST", path = ROOT, responses = { TOKEN_REQUIRED, READY } },
      { method = "POST", path = TOKENS, responses = { { status = 503, body = "not yet" },
        { json = { token = "tok-2", expires = (os.time() + 3600) * 1000 } } } },
    }
    local c = geoservices.client{ url = s.url, retry = false }
    local ready, err = c:configure(params(), FAST)
    assert.is_nil(err)
    assert.equal("ready", ready.status.state)
    assert.equal(2, count(s, TOKENS)) -- the failed sign-in counted as one failed poll
    local polls = bodies(s, ROOT)
    assert.equal(2, #polls)
    assert.truthy(polls[2]:find("token=tok-2", 1, true), polls[2])
  end)
end)
