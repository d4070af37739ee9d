-- The pure part of the transport: the request options of a connection and
-- the error of a failed send. Nothing is sent.
local core = require "geoservices.core"
local errors = require "geoservices.base.errors"
local transport = require "geoservices.net.transport"

local URL = "https://example.test/server/rest/services/Parcels/FeatureServer"

describe("transport.spec", function()
  it("carries the address, the method and the connection's TLS and size settings", function()
    local conn = { ca_file = "/etc/ca.pem", insecure = false, user_agent = "geoservices-test/1",
                   max_response_bytes = 1024, token = "secret", driver = {} }
    local spec = transport.spec(conn, URL, "POST", core.monotonic() + 30)
    assert.equal(URL, spec.url)
    assert.equal("POST", spec.method)
    assert.equal("/etc/ca.pem", spec.ca_file)
    assert.is_false(spec.insecure)
    assert.equal("geoservices-test/1", spec.user_agent)
    assert.equal(1024, spec.max_response_bytes)
    for k in pairs(spec) do -- nothing else of the connection (no token, no driver)
      assert.truthy(({ url = 1, method = 1, timeout_ms = 1, ca_file = 1, insecure = 1, user_agent = 1,
                       max_response_bytes = 1 })[k], k)
    end
  end)

  it("turns the deadline into a timeout in whole milliseconds", function()
    local spec = transport.spec({}, URL, "GET", core.monotonic() + 5)
    assert.equal("integer", math.type(spec.timeout_ms))
    assert.is_true(spec.timeout_ms > 4500 and spec.timeout_ms <= 5000, tostring(spec.timeout_ms))
    assert.is_nil(spec.ca_file)
    assert.is_nil(spec.insecure)
  end)

  it("gives at least 1 ms when the deadline has passed", function()
    assert.equal(1, transport.spec({}, URL, "GET", core.monotonic() - 10).timeout_ms)
    assert.equal(1, transport.spec({}, URL, "GET", core.monotonic()).timeout_ms)
  end)

end)

describe("transport.failure", function()
  it("returns an observer's refusal as it is", function()
    local refusal = errors.new("invalid", "dry run: nothing sent")
    assert.equal(refusal, transport.failure(refusal, "refused", URL))
  end)

  it("makes a network error of a transfer failure, with its code and address", function()
    local err = transport.failure("Connection refused", "couldnt_connect", URL)
    assert.is_true(errors.is(err))
    assert.equal("network", err.kind)
    assert.equal("couldnt_connect", err.code)
    assert.equal("Connection refused", err.message)
    assert.equal(URL, err.url)
    assert.equal("network", transport.failure("reset", "recv", URL).kind)
    assert.equal("network", transport.failure("unknown", nil, URL).kind)
  end)

  it("gives the deadline, cancellation and size failures their own kinds", function()
    assert.equal("timeout", transport.failure("the deadline passed", "timeout", URL).kind)
    assert.equal("cancelled", transport.failure("cancelled", "cancelled", URL).kind)
    assert.equal("protocol", transport.failure("response too large", "too_large", URL).kind)
    assert.equal("protocol", transport.failure("bad gzip", "bad_encoding", URL).kind)
    local err = transport.failure("the deadline passed", "timeout", URL)
    assert.equal("timeout", err.code)
    assert.equal(("timeout: the deadline passed (code timeout) <%s>"):format(URL), tostring(err))
  end)
end)
