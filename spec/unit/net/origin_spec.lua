-- net/origin: which addresses may carry the client's credentials, and which
-- addresses a server may send the client to.
local origin = require "geoservices.net.origin"

describe("net.origin", function()
  it("an origin is scheme, host and port, with the default port filled in", function()
    assert.equal("https://gis.example.com:443", origin.of("https://GIS.example.com/server/rest"))
    assert.equal("http://127.0.0.1:8080", origin.of("http://127.0.0.1:8080/x?y=1"))
    assert.equal("http://h:80", origin.of("http://user:pw@h/x"))
    assert.equal("https://[::1]:8443", origin.of("https://[::1]:8443/a"))
    assert.is_nil(origin.of("not a url"))
  end)

  it("credentials go to the same origin only: never another host or port, never https downgraded to http", function()
    local base = "https://gis.example.com/server"
    assert.is_true(origin.same("https://gis.example.com:443/server/jobs/1", base))
    assert.is_false(origin.same("http://gis.example.com/server/jobs/1", base))
    assert.is_false(origin.same("https://gis.example.com:8443/server/jobs/1", base))
    assert.is_false(origin.same("https://evil.example.com/server/jobs/1", base))
    assert.is_false(origin.same("https://gis.example.com.evil.net/server", base))
  end)

  it("a server may send the client to http(s) addresses only; file:// only a file:// fixture client", function()
    assert.is_nil(origin.check_followable("https://other.example.com/r.json", "https://gis.example.com/s",
      "result URL"))
    local err = origin.check_followable("file:///etc/passwd", "https://gis.example.com/s", "status URL")
    assert.equal("protocol", err.kind)
    assert.truthy(err.message:find("status URL", 1, true))
    assert.truthy(origin.check_followable("ftp://h/x", "http://h/s", "result URL"))
    assert.truthy(origin.check_followable(42, "http://h/s", "result URL"))
    assert.is_nil(origin.check_followable("file:///tmp/r.json", "file:///tmp/fixtures", "result URL"))
  end)
end)
