-- The one list of secrets and the redacting copy every printing path uses.
local json = require "geoservices.base.json"
local redact = require "geoservices.base.redact"

describe("redact", function()
  it("knows the secret member names, exactly", function()
    for _, name in ipairs{ "token", "password", "securityQuestionAns", "secretKey", "accessKey" } do
      assert.is_true(redact.is_secret(name), name)
    end
    for _, name in ipairs{ "Token", "passwords", "username", "replicaID", "", "secret" } do
      assert.is_false(redact.is_secret(name), name)
    end
    assert.is_false(redact.is_secret(nil))
    assert.is_false(redact.is_secret(1))
  end)

  it("replaces secrets at any depth and leaves everything else as it was", function()
    local event = {
      type = "request", url = "https://x/sync", token = "T0KEN",
      fields = { f = "json", token = "T0KEN", username = "admin", password = "hunter2",
                 config = { database = { password = "db-pw", port = 5432 },
                            keys = { { accessKey = "AK", secretKey = "SK", region = "eu" } } } },
    }
    local copy = redact.copy(event)
    assert.same({
      type = "request", url = "https://x/sync", token = redact.MARK,
      fields = { f = "json", token = redact.MARK, username = "admin", password = redact.MARK,
                 config = { database = { password = redact.MARK, port = 5432 },
                            keys = { { accessKey = redact.MARK, secretKey = redact.MARK, region = "eu" } } } },
    }, copy)
    assert.equal("<redacted>", redact.MARK)
  end)

  it("never changes the original and shares no table with it", function()
    local inner = { password = "pw", list = { 1, 2 } }
    local original = { outer = inner }
    local copy = redact.copy(original)
    assert.equal("pw", inner.password)
    assert.are_not.equal(inner, copy.outer)
    assert.are_not.equal(inner.list, copy.outer.list)
    copy.outer.list[1] = 99
    assert.equal(1, inner.list[1])
  end)

  it("redacts a secret whatever its value, even a table or false", function()
    local copy = redact.copy{ token = { value = "t", expires = 1 }, password = false, securityQuestionAns = 0 }
    assert.same({ token = redact.MARK, password = redact.MARK, securityQuestionAns = redact.MARK }, copy)
  end)

  it("keeps metatables, so JSON arrays stay arrays", function()
    local mt = { __name = "custom" }
    local value = setmetatable({ items = json.array(), token = "t" }, mt)
    local copy = redact.copy(value)
    assert.equal(mt, getmetatable(copy))
    assert.is_true(json.is_array(copy.items))
    assert.equal(redact.MARK, copy.token)
    assert.equal("[]", json.encode(copy.items))
  end)

  it("returns non-tables as they are", function()
    assert.equal("token", redact.copy("token"))
    assert.equal(42, redact.copy(42))
    assert.is_nil(redact.copy(nil))
    assert.equal(json.null, redact.copy(json.null))
  end)
end)
