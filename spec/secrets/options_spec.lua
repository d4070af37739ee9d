-- Small faults refused instead of accepted (issue 30): a client's address is
-- an http(s) address with a host, and nothing else (file:// only with the
-- explicit file_urls option of fixture tests); numbers are numbers that make
-- sense (finite; positive where they are a time or a size), each refusal
-- naming the option.
local geoservices = require "geoservices"
local helper = require "spec.helper"

local NAN, INF = 0 / 0, math.huge

local function refused(pattern, fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "accepted; expected a refusal matching " .. pattern)
  assert.matches(pattern, tostring(err))
end

describe("options that make sense", function()
  it("a client's url is an http(s) address with a host: file://, other schemes and oddities are refused", function()
    for _, url in ipairs{ "file:///etc", "FILE:///etc/passwd", "ftp://x/server", "gopher://h", "javascript:alert(1)",
                          "server", "/server", "http:/x", "http://", "http://:80/server", "https:///server",
                          " http://h/server", "http://h/ser ver", "http://h/server\n", "data:text/plain,x" } do
      refused("option 'url' must be an http%(s%):// address", function() geoservices.client{ url = url } end)
    end
    refused("option 'url' must not carry a user name or password", function()
      geoservices.client{ url = "https://editor:s3cret@gis.example.com/server" }
    end)
    refused("option 'url' must not have a query or a fragment", function()
      geoservices.client{ url = "https://gis.example.com/server?token=x" }
    end)
    for _, url in ipairs{ "http://h/server", "HTTPS://gis.example.com:8443/server/", "http://[::1]:8080/s",
                          "http://127.0.0.1:8080" } do
      assert.truthy(geoservices.client{ url = url })
    end
    -- fixture tests say so
    assert.truthy(geoservices.client{ url = helper.FIXTURES .. "/ok", file_urls = true })
    refused("option 'file_urls' must be a boolean", function()
      geoservices.client{ url = "http://h/s", file_urls = "yes" }
    end)
  end)

  it("a generateToken address is an http(s) address too", function()
    refused("must be an http%(s%):// address", function()
      geoservices.token{ token_url = "file:///etc/passwd", username = "u", password = "p" }
    end)
    refused("option 'token_url' must be an http%(s%):// address", function()
      geoservices.client{ url = "http://h/s", username = "u", password = "p", token_url = "ftp://h/generateToken" }
    end)
  end)

  it("times are finite and positive, sizes and counts finite whole numbers, naming the option", function()
    for _, bad in ipairs{ NAN, INF, -INF, 0, -1 } do
      refused("option 'timeout' must be a positive number of seconds", function()
        geoservices.client{ url = "http://h/s", timeout = bad }
      end)
    end
    for _, name in ipairs{ "max_response_bytes", "max_host_connections", "max_json_depth", "download_chunk" } do
      for _, bad in ipairs{ NAN, INF, 0, 1.5 } do
        refused("option '" .. name .. "' must be a whole number of at least 1", function()
          geoservices.client{ url = "http://h/s", [name] = bad }
        end)
      end
    end
    for _, name in ipairs{ "attempts", "base_delay", "max_delay", "max_retry_after" } do
      for _, bad in ipairs{ NAN, INF, -1 } do
        refused("retry option '" .. name .. "' must be a non%-negative number", function()
          geoservices.client{ url = "http://h/s", retry = { [name] = bad } }
        end)
      end
    end
    for _, bad in ipairs{ NAN, INF, 0, -5 } do
      refused("option 'token_expiration' must be a positive number of minutes", function()
        geoservices.client{ url = "http://h/s", username = "u", password = "p", token_expiration = bad }
      end)
      refused("option 'expiration' must be a positive number of minutes", function()
        geoservices.token{ url = "http://h/s", username = "u", password = "p", expiration = bad }
      end)
      refused("option 'timeout' must be a positive number of seconds", function()
        geoservices.token{ url = "http://h/s", username = "u", password = "p", timeout = bad }
      end)
    end
    for _, bad in ipairs{ NAN, INF, -1 } do
      refused("option 'refresh_margin' must be a finite number of seconds, at least 0", function()
        geoservices.token{ url = "http://h/s", username = "u", password = "p", refresh_margin = bad }
      end)
    end
  end)

  it("an operation's times too: configure's and sync's", function()
    local c = geoservices.client{ url = "http://127.0.0.1:1/server", token = "t", retry = false }
    for _, name in ipairs{ "poll_interval", "timeout", "stall_after", "request_timeout" } do
      refused("option '" .. name .. "' must be positive", function() c:configure({}, { [name] = NAN }) end)
      refused("option '" .. name .. "' must be positive", function() c:configure({}, { [name] = INF }) end)
    end
    local path = helper.tmp_name()
    helper.write_file(path, '{"service":"Parcels","replicaID":"{5E1A0C2B-1111-4A5B-9C8D-000000000001}",'
      .. '"replicaServerGen":1}')
    for _, bad in ipairs{ NAN, INF } do
      local _, err = c:sync(path, nil, { lock_timeout = bad })
      assert.equal("invalid", err.kind)
      assert.equal("lock_timeout", err.parameter)
      local _, err2 = c:sync(path, nil, { timeout = bad })
      assert.equal("invalid", err2.kind)
      assert.equal("timeout", err2.parameter)
    end
    os.remove(path)
  end)
end)
