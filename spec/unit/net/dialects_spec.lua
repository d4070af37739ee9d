-- Both error dialects of the server (issue 16), pure: `{"error": {...}}`
-- with or without a code, and the administrative endpoints'
-- `{"status": "error", "messages": [...], "code": N}`, with HTTP 200 or not.
-- Never an empty message; token codes are kind "auth".
local response = require "geoservices.net.response"

local URL = "https://example.test/server/admin/services/getServicesById"

local function resp(status, body)
  return { status = status, body = body, headers = {} }
end

describe("response.error_of", function()
  it("reads the status/messages dialect: messages, code, kind", function()
    local err = response.error_of({ status = "error", messages = { "Token Expired." }, code = 498 }, 200, URL)
    assert.equal("auth", err.kind)
    assert.equal(498, err.code)
    assert.equal("Token Expired.", err.message)
    assert.equal(200, err.status)
    assert.equal(URL, err.url)
    err = response.error_of({ status = "error", messages = { "Unable to configure.", "Disk full.", "Retry." },
                              code = 500 }, 200, URL)
    assert.equal("server", err.kind)
    assert.equal("Unable to configure.: Disk full.; Retry.", err.message)
  end)

  it("reads error objects without a code, kind by the HTTP status", function()
    local err = response.error_of({ error = { message = "Unable to get services.", details = { "Invalid id." } } },
      200, URL)
    assert.equal("server", err.kind)
    assert.is_nil(err.code)
    assert.equal("Unable to get services.: Invalid id.", err.message)
    err = response.error_of({ status = "error", messages = { "Not authorized." } }, 403, URL)
    assert.equal("auth", err.kind)
    assert.is_nil(err.code)
    assert.equal(403, err.status)
  end)

  it("never gives an empty message", function()
    assert.equal("server reported an error",
      response.error_of({ error = { code = 400, message = "", details = {} } }, 200, URL).message)
    assert.equal("Invalid username or password.",
      response.error_of({ error = { code = 400, message = " ", details = { "Invalid username or password." } } },
        200, URL).message)
    assert.equal("server reported an error", response.error_of({ status = "error", messages = {} }, 200, URL).message)
    assert.equal("server reported an error", response.error_of({ status = "ERROR" }, 500, URL).message)
    assert.equal("One message.", response.error_of({ status = "error", messages = "One message." }, 200, URL).message)
  end)

  it("carries no error for results, whatever their status member says", function()
    assert.is_nil(response.error_of({ snapshots = {}, total = 0, status = "success" }, 200, URL))
    assert.is_nil(response.error_of({ status = "Failed", resultUrl = "" }, 200, URL)) -- a job's status
    assert.is_nil(response.error_of({ status = { state = "failed" } }, 200, URL)) -- the root resource
    assert.is_nil(response.error_of({ services = {} }, 200, URL))
  end)
end)

describe("response.decode with both dialects", function()
  it("makes either dialect an error with HTTP 200 or an error status", function()
    for _, status in ipairs{ 200, 400, 500 } do
      local _, err = response.decode(resp(status, '{"status":"error","messages":["Token Expired."],"code":498}'), URL)
      assert.equal("auth", err.kind)
      assert.equal(498, err.code)
      assert.equal("Token Expired.", err.message)
      _, err = response.decode(resp(status, '{"error":{"message":"Unable to get services."}}'), URL)
      assert.equal("server", err.kind)
      assert.equal("Unable to get services.", err.message)
      assert.equal(status, err.status)
    end
  end)
end)
