-- A redirect (301, 302, 307, 308) is never followed: nothing reaches the
-- address it points to, the token least of all (a form field, or a Bearer
-- header), and the error names the Location and what to set instead
-- (issue 34). Two documented-server doubles on 127.0.0.1
-- (spec/support/scripted_server.py): `moved` answers the redirects, `other`,
-- on another port, logs whatever reaches it.
local geoservices = require "geoservices"
local helper = require "spec.helper"

local TOKEN = "s3cret-token-of-alice"
local STATUSES = { 301, 302, 307, 308 }

describe("a redirect", function()
  local moved, other

  -- the path of a replicas list under base path `base`
  local function replicas_at(root, base) return root .. base .. "/Parcels/FeatureServer/replicas" end

  setup(function()
    other = helper.start_scripted{ routes = { { path = "/*", responses = { { json = { success = true } } } } } }
    local routes = {}
    for _, status in ipairs(STATUSES) do
      -- the same resource on the other origin: the server moved
      routes[#routes + 1] = { path = ("/s%d/*"):format(status), responses = { { status = status, body = "moved",
        headers = { Location = replicas_at(other.root, "/s" .. status) } } } }
    end
    routes[#routes + 1] = { path = "/https/*", responses = { { status = 301, body = "",
      headers = { Location = "https://127.0.0.1:9/https/Parcels/FeatureServer/replicas" } } } }
    routes[#routes + 1] = { path = "/login/*", responses = { { status = 302, body = "",
      headers = { Location = "/portal/login?returnUrl=x" } } } }
    routes[#routes + 1] = { path = "/files/*", responses = { { status = 302, body = "",
      headers = { Location = other.root .. "/files/r.json" } } } }
    moved = helper.start_scripted{ routes = routes }
  end)
  teardown(function()
    moved:stop()
    other:stop()
  end)

  local function sent_to(s, prefix)
    local n = 0
    for _, r in ipairs(s:requests()) do
      if r.path:sub(1, #prefix) == prefix then n = n + 1 end
    end
    return n
  end

  for _, status in ipairs(STATUSES) do
    it(("%d: not followed, the token stays here, the error names its Location and the address to set"):format(status),
      function()
        local base = "/s" .. status
        for _, bearer in ipairs{ false, true } do
          local client = geoservices.client{ url = moved.root .. base, token = TOKEN, bearer = bearer or nil }
          local list, err = client:list_replicas("Parcels")
          client:close()
          assert.is_nil(list)
          assert.equal("http", err.kind)
          assert.equal("redirect", err.code)
          assert.equal(status, err.status)
          assert.truthy(err.message:find(("the server redirected to %s (HTTP %d)"):format(
            replicas_at(other.root, base), status), 1, true), err.message)
          assert.truthy(err.message:find("set the client's url (--url, GEOSERVICES_URL) to " .. other.root .. base, 1,
            true), err.message)
          assert.falsy(err.message:find(TOKEN, 1, true))
        end
        assert.equal(0, sent_to(other, base)) -- nothing reached the other origin
        assert.equal(2, sent_to(moved, base)) -- one request each: a redirect is not retried
      end)
  end

  it("from http to https on the same host names the https address to set", function()
    local _, err = geoservices.client{ url = moved.root .. "/https", token = TOKEN }:list_replicas("Parcels")
    assert.truthy(err.message:find("the server redirected to https://127.0.0.1:9/https/Parcels/FeatureServer/"
      .. "replicas", 1, true), err.message)
    assert.truthy(err.message:find("to https://127.0.0.1:9/https", 1, true), err.message)
  end)

  it("to a page that is not the same resource (a login page, relative) names it, and no address to set", function()
    local _, err = geoservices.client{ url = moved.root .. "/login", token = TOKEN }:list_replicas("Parcels")
    assert.truthy(err.message:find("redirected to " .. moved.root .. "/portal/login?returnUrl=x (HTTP 302)", 1, true),
      err.message)
    assert.truthy(err.message:find("to its new address", 1, true), err.message)
    assert.is_nil(err.suggested_url)
  end)

  it("of a result file is not followed either, and names its Location", function()
    local client = geoservices.client{ url = moved.root .. "/files", token = TOKEN }
    local body, err = client:download(moved.root .. "/files/r.json")
    client:close()
    assert.is_nil(body)
    assert.equal("redirect", err.code)
    assert.truthy(err.message:find("the result file: the server redirected to " .. other.root .. "/files/r.json", 1,
      true), err.message)
    assert.equal(0, sent_to(other, "/files"))
  end)

  it("seen from the CLI: the Location, what to set, no token (exit 1)", function()
    local r = helper.run_cli{ "--url", moved.root .. "/s308", "--token", TOKEN, "replicas", "Parcels" }
    assert.equal(1, r.code, r.out .. r.err)
    assert.truthy(r.err:find("the server redirected to " .. replicas_at(other.root, "/s308"), 1, true), r.err)
    assert.truthy(r.err:find("(--url, GEOSERVICES_URL) to " .. other.root .. "/s308", 1, true), r.err)
    assert.falsy((r.out .. r.err):find(TOKEN, 1, true))
    assert.equal(0, #other:requests())
  end)
end)
