-- A token's lifetime comes from the server's answer, not the local clock
-- (issue 30): `expires` minus the answer's Date header, else `expires_in`;
-- kept relative to when the token was received (the monotonic clock), so a
-- client clock hours off the server's changes nothing. At most one token per
-- expiry period; once more on 498, never in a loop.
local core = require "geoservices.core"
local geoservices = require "geoservices"
local token = require "geoservices.net.token"
local helper = require "spec.helper"

local SERVICE = "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c"
local TOKEN_PATH = "/server/tokens/generateToken"
local SERVICES_PATH = "/server/admin/services/getServicesById"

local function count(server, path)
  local n = 0
  for _, r in ipairs(server:requests()) do
    if r.path == path then n = n + 1 end
  end
  return n
end

describe("token lifetime from the server's answer", function()
  local serve, stop_all = helper.scripted_servers()
  local real_time = os.time
  after_each(function()
    os.time = real_time -- luacheck: ignore
    stop_all()
  end)

  -- The local clock `offset` seconds off the server's (which tells the
  -- truth in its Date header).
  local function skew(offset)
    os.time = function(t) -- luacheck: ignore
      if t then return real_time(t) end
      return real_time() + offset
    end
  end

  local function server(token_answer, services_responses)
    return serve{
      { method = "POST", path = TOKEN_PATH, responses = { { json = token_answer } } },
      { method = "POST", path = SERVICES_PATH, responses = services_responses or { { json = { services = {} } } } },
    }
  end

  local function calls(client, n)
    for _ = 1, n do assert(client:get_services_by_id{ SERVICE }) end
  end

  for _, offset in ipairs{ 7200, -7200, 0 } do
    it(("a client clock %+d s off the server's: 10 calls, 1 token (expires and Date)"):format(offset), function()
      local s = server{ token = "clock-token", expires = (real_time() + 3600) * 1000, ssl = false }
      skew(offset)
      local c = geoservices.client{ url = s.url, username = "editor", password = "editor-pass1" }
      calls(c, 10)
      assert.equal(1, count(s, TOKEN_PATH))
      assert.equal(10, count(s, SERVICES_PATH))
    end)
  end

  it("an endpoint answering expires_in (no expires): 10 calls, 1 token, whatever the clock", function()
    local s = server{ token = "clock-token", expires_in = 3600 }
    skew(7200)
    local c = geoservices.client{ url = s.url, username = "editor", password = "editor-pass1" }
    calls(c, 10)
    assert.equal(1, count(s, TOKEN_PATH))
  end)

  it("a short-lived token is replaced once its time (as the server counts it) is up, not before", function()
    -- `life` seconds from the answer (the server's start-up on a loaded machine took longer than
    -- four): the client counts life-1 to life s (the Date header has whole seconds) and replaces it
    -- after four fifths of that. Five calls slowed past the earliest replacement (a loaded
    -- machine) meet a second token: they run again with a token that lives longer.
    helper.within_window("five calls within a token's life", { 4, 16, 64 }, function(life)
      stop_all()
      local s = server{ token = "short-token", expires = ("{NOW_MS+%d}"):format(life * 1000) }
      skew(7200)
      local c = geoservices.client{ url = s.url, username = "editor", password = "editor-pass1" }
      local started = core.monotonic()
      calls(c, 5)
      local early = 0.8 * (life - 1) -- the earliest replacement, from the first call on
      if count(s, TOKEN_PATH) > 1 and core.monotonic() - started >= early then return false end
      assert.equal(1, count(s, TOKEN_PATH))
      helper.sleep(life + 0.2)
      started = core.monotonic()
      calls(c, 5)
      if count(s, TOKEN_PATH) > 2 and core.monotonic() - started >= early then return false end
      assert.equal(2, count(s, TOKEN_PATH))
      c:close()
      return true
    end)
  end)

  it("a token function whose expiry the local clock thinks past is asked once, not before every call", function()
    local s = server{ token = "unused" }
    local asked = {}
    local c = geoservices.client{ url = s.url, token = function(reason)
      asked[#asked + 1] = reason
      return "provided-token", (real_time() + 3600) * 1000
    end }
    skew(7200)
    calls(c, 10)
    assert.same({ "initial" }, asked)
  end)

  it("refreshes once on 498 whatever the clock, and never loops", function()
    local expired = { json = { error = { code = 498, message = "Invalid token." } } }
    local s = server({ token = "clock-token", expires = (real_time() + 3600) * 1000 },
      { expired, { json = { services = {} } } })
    skew(7200)
    local c = geoservices.client{ url = s.url, username = "editor", password = "editor-pass1" }
    calls(c, 5)
    assert.equal(2, count(s, TOKEN_PATH)) -- the first, and one after the 498
    local always = server({ token = "clock-token", expires = (real_time() + 3600) * 1000 }, { expired })
    local c2 = geoservices.client{ url = always.url, username = "editor", password = "editor-pass1" }
    local _, err = c2:get_services_by_id{ SERVICE }
    assert.equal("auth", err.kind)
    assert.equal(498, err.code)
    assert.equal(2, count(always, TOKEN_PATH))
  end)

  describe("token.lifetime", function()
    local DATE = "Tue, 15 Nov 1994 08:12:31 GMT"
    local AT = 784887151 -- that Date, in seconds since the epoch

    it("is expires minus the server's Date, less a second for the Date's precision", function()
      assert.equal(3599, token.lifetime{ expires = (AT + 3600) * 1000, date = DATE, asked = 3600 })
      assert.equal(7199, token.lifetime{ expires = (AT + 7200) * 1000, date = DATE, asked = 3600 })
      for _, date in ipairs{ "Tuesday, 15-Nov-94 08:12:31 GMT", "Tue Nov 15 08:12:31 1994" } do
        assert.equal(3599, token.lifetime{ expires = (AT + 3600) * 1000, date = date, asked = 3600 })
      end
    end)

    it("else expires_in, else expires by the local clock within what was asked, else what was asked", function()
      assert.equal(1800, token.lifetime{ expires_in = 1800, expires = 1, asked = 3600 })
      skew(0)
      assert.equal(599, token.lifetime{ expires = (real_time() + 600) * 1000, asked = 3600 })
      -- a local clock hours off: what was asked, never 0 (a token per request) nor hours
      assert.equal(3600, token.lifetime{ expires = (real_time() - 3600) * 1000, asked = 3600 })
      assert.equal(3600, token.lifetime{ expires = (real_time() + 9 * 3600) * 1000, asked = 3600 })
      assert.equal(3600, token.lifetime{ asked = 3600 })
      -- nonsense from the server (an expiry before its own Date, not a number)
      assert.equal(3600, token.lifetime{ expires = (AT - 10) * 1000, date = DATE, asked = 3600 })
      assert.equal(3600, token.lifetime{ expires_in = 0 / 0, date = "yesterday", asked = 3600 })
    end)
  end)
end)
