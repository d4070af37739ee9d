-- Error kinds that match the failure (issue 39 item 4): a token that could
-- not be generated because the server was not reached (connection refused,
-- the connection dropped) is a "network" error, not "auth" (a refused
-- password stays "auth": spec/net/auth_spec.lua); an error concatenates and
-- formats as its one line (`"sync failed: " .. err`).
local geoservices = require "geoservices"
local errors = require "geoservices.base.errors"
local helper = require "spec.helper"

-- A port on 127.0.0.1 where nothing listens (bound by the kernel, then let go).
local function closed_port()
  local out = helper.run_shell("/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); "
    .. "print(s.getsockname()[1]); s.close()'")
  return assert(math.tointeger(tonumber(out:match("%d+"))), out)
end

describe("error kinds (issue 39 item 4)", function()
  it("a refused connection during token generation is network, reason generate_token", function()
    local c = geoservices.client{ url = ("http://127.0.0.1:%d/server"):format(closed_port()), username = "alice",
                                  password = "alice-pass1", timeout = 5, retry = false }
    local res, err = c:list_services()
    assert.is_nil(res)
    assert.equal("network", err.kind, tostring(err))
    assert.equal("generate_token", err.reason)
    assert.truthy(err.message:find("could not generate a token for user 'alice'", 1, true), err.message)
    assert.falsy(tostring(err):find("alice-pass1", 1, true))
  end)

  it("a connection dropped during token generation is network", function()
    local server = helper.start_scripted{ routes = {
      { method = "POST", path = "/portal/sharing/rest/generateToken", responses = { { hang_up = true } } },
      { method = "POST", path = "/server/tokens/generateToken", responses = { { hang_up = true } } },
    } }
    local c = geoservices.client{ url = server.url, username = "alice", password = "alice-pass1", timeout = 5,
                                  retry = false }
    local res, err = c:list_services()
    server:stop()
    assert.is_nil(res)
    assert.equal("network", err.kind, tostring(err))
    assert.equal("generate_token", err.reason)
  end)

  it("an error concatenates and formats as its one line", function()
    local err = errors.new("network", "connection refused", { code = "couldnt_connect" })
    assert.equal("sync failed: network: connection refused (code couldnt_connect)", "sync failed: " .. err)
    assert.equal("network: connection refused (code couldnt_connect)!", err .. "!")
    assert.equal("[network: connection refused (code couldnt_connect)]", ("[%s]"):format(err))
    assert.equal("n=1 network: connection refused (code couldnt_connect)", "n=" .. 1 .. " " .. err)
  end)
end)
