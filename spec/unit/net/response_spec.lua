-- Classification of finished HTTP responses: response tables as the C core
-- returns them, built by hand (and one real record extractor); nothing is sent.
local core = require "geoservices.core"
local errors = require "geoservices.base.errors"
local response = require "geoservices.net.response"

local URL = "https://example.test/server/rest/services/Parcels/FeatureServer/synchronizeReplica"

local function resp(status, body, headers)
  return { status = status, body = body, headers = headers or {} }
end

describe("response.decode", function()
  it("returns the decoded object of a successful JSON body, integers kept", function()
    local doc = assert(response.decode(resp(200, '{"replicaID":"{R}","replicaServerGen":9007199254740993}'), URL))
    assert.equal("{R}", doc.replicaID)
    assert.equal(9007199254740993, doc.replicaServerGen)
    assert.equal("integer", math.type(doc.replicaServerGen))
  end)

  it("makes a JSON error body a server error even with HTTP 200, with its details joined", function()
    local body = '{"error":{"code":400,"message":"Unable to synchronize","details":["bad gen","try again"]}}'
    local doc, err = response.decode(resp(200, body), URL)
    assert.is_nil(doc)
    assert.is_true(errors.is(err))
    assert.equal("server", err.kind)
    assert.equal(400, err.code)
    assert.equal(200, err.status)
    assert.equal(URL, err.url)
    assert.equal("Unable to synchronize: bad gen; try again", err.message)
    assert.same({ "bad gen", "try again" }, err.details)
  end)

  it("keeps the message alone when the details are empty, and has a default message", function()
    local _, err = response.decode(resp(200, '{"error":{"code":500,"message":"Boom","details":[]}}'), URL)
    assert.equal("Boom", err.message)
    _, err = response.decode(resp(200, '{"error":{"code":500}}'), URL)
    assert.equal("server reported an error", err.message)
    assert.equal(500, err.code)
    _, err = response.decode(resp(200, '{"error":"plain text"}'), URL)
    assert.equal("server", err.kind)
    assert.equal("plain text", err.message)
  end)

  it("makes token codes (498, 499) and statuses 401/403 of an error body kind auth", function()
    local _, err = response.decode(resp(200, '{"error":{"code":498,"message":"Invalid token."}}'), URL)
    assert.equal("auth", err.kind)
    assert.equal(498, err.code)
    assert.equal("Invalid token.", err.message)
    _, err = response.decode(resp(200, '{"error":{"code":499,"message":"Token Required"}}'), URL)
    assert.equal("auth", err.kind)
    _, err = response.decode(resp(403, '{"error":{"code":12,"message":"Forbidden"}}'), URL)
    assert.equal("auth", err.kind)
    assert.equal(12, err.code)
    assert.equal(403, err.status)
  end)

  it("makes an HTML error page kind http with its text stripped of markup", function()
    local body = "<html><head><title>502</title></head>\n<body>\n  <h1>Bad   Gateway</h1>\n</body></html>\n"
    local _, err = response.decode(resp(502, body, { ["content-type"] = "text/html" }), URL)
    assert.equal("http", err.kind)
    assert.equal(502, err.status)
    assert.equal(URL, err.url)
    assert.equal("HTTP 502: 502 Bad Gateway", err.message)
  end)

  it("shortens a long error page to 120 characters", function()
    local _, err = response.decode(resp(500, "<p>" .. ("word "):rep(100) .. "</p>"), URL)
    local text = err.message:match("^HTTP 500: (.*)$")
    assert.equal(120, #text)
    assert.equal("...", text:sub(-3))
    assert.equal("word word", text:sub(1, 9))
  end)

  it("makes 401/403 without an error body kind auth, other statuses >= 300 kind http", function()
    local _, err = response.decode(resp(401, ""), URL)
    assert.equal("auth", err.kind)
    assert.equal("HTTP 401", err.message)
    _, err = response.decode(resp(403, "Forbidden"), URL)
    assert.equal("auth", err.kind)
    assert.equal("HTTP 403: Forbidden", err.message)
    _, err = response.decode(resp(302, "", { location = "http://elsewhere/" }), URL)
    assert.equal("http", err.kind)
    assert.equal("HTTP 302", err.message)
    assert.equal(302, err.status)
  end)

  it("does not quote a JSON body without an error member in an HTTP error", function()
    local _, err = response.decode(resp(500, '{"status":"down"}'), URL)
    assert.equal("http", err.kind)
    assert.equal("HTTP 500", err.message)
  end)

  it("refuses an empty 200 body", function()
    local doc, err = response.decode(resp(200, ""), URL)
    assert.is_nil(doc)
    assert.equal("protocol", err.kind)
    assert.equal("empty response body", err.message)
    assert.equal(200, err.status)
    assert.equal(URL, err.url)
  end)

  it("refuses invalid JSON with its content type, size and byte offset", function()
    local body = '{"replicaID": oops}'
    local _, err = response.decode(resp(200, body, { ["content-type"] = "text/plain" }), URL)
    assert.equal("protocol", err.kind)
    assert.equal(15, err.offset)
    assert.matches("^invalid JSON response %(text/plain, 19 bytes%) at byte 15: ", err.message)
    _, err = response.decode(resp(200, "{"), URL)
    assert.matches("(unknown content type, 1 bytes)", err.message, 1, true)
    assert.is_number(err.offset)
  end)

  it("refuses a JSON body that is not an object", function()
    for body, t in pairs{ ["42"] = "number", ['"text"'] = "string", ["true"] = "boolean" } do
      local doc, err = response.decode(resp(200, body), URL)
      assert.is_nil(doc, body)
      assert.equal("protocol", err.kind)
      assert.equal("expected a JSON object, got " .. t, err.message)
    end
  end)

  it("refuses a JSON array body: a response must be an object", function()
    -- json.decode gives a table for an array too, so decode's type check lets it through,
    -- while core.records() refuses the same body ("must be a JSON object")
    local doc, err = response.decode(resp(200, "[1,2,3]"), URL)
    assert.is_nil(doc)
    assert.equal("protocol", err.kind)
    assert.matches("expected a JSON object", err.message)
  end)

  it("applies the nesting limit", function()
    local body = '{"a":{"b":{"c":{"d":1}}}}'
    assert.is_table(response.decode(resp(200, body), URL))
    local _, err = response.decode(resp(200, body), URL, 2)
    assert.equal("protocol", err.kind)
    assert.matches("depth", err.message)
  end)
end)

describe("response.body_error", function()
  it("turns each detail into text and keeps non-integer codes as they are", function()
    local body = { error = { code = "E42", message = "Nope", details = { 1, true, "x" } } }
    local err = response.body_error(body, 200, URL)
    assert.equal("server", err.kind)
    assert.equal("E42", err.code)
    assert.equal("Nope: 1; true; x", err.message)
    err = response.body_error({ error = { code = 400.0, message = "Float code" } }, 200, URL)
    assert.equal(400, err.code)
    assert.equal("integer", math.type(err.code))
  end)
end)

describe("response.streamed", function()
  -- Feeds `body` to a real extractor as the C core would while it arrives.
  local function stream(body, status, extra)
    local records = core.records()
    local fields, seen = {}, {}
    local function deliver(kind, layer, value, key)
      seen[#seen + 1] = kind
      if kind == "field" then fields[key] = value end
      return layer
    end
    local r = resp(status or 200, body)
    for k, v in pairs(extra or {}) do r[k] = v end
    if (status or 200) < 300 and not r.json_error then assert(records:feed(body)) end
    local out, err = response.streamed(r, URL, records, deliver, fields)
    return out, err, fields, seen
  end

  it("returns the top-level fields once the extractor delivered the remaining records", function()
    local body = '{"replicaID":"{R}","replicaServerGen":7,"edits":[{"id":0,"features":{"adds":[{"a":1}]}}]}'
    local out, err, fields, seen = stream(body)
    assert.is_nil(err)
    assert.equal(fields, out)
    assert.equal("{R}", out.replicaID)
    assert.equal(7, out.replicaServerGen)
    assert.same({ "field", "field", "layer", "add" }, seen)
  end)

  it("classifies an error body that streamed as a server or auth error", function()
    local _, err = stream('{"error":{"code":400,"message":"Invalid generation","details":["gen 3"]}}')
    assert.equal("server", err.kind)
    assert.equal(400, err.code)
    assert.equal("Invalid generation: gen 3", err.message)
    _, err = stream('{"error":{"code":498,"message":"Invalid token."}}')
    assert.equal("auth", err.kind)
  end)

  it("reports a body the extractor could not finish, with its offset", function()
    local out, err = stream('{"replicaID":"{R}","edits":[')
    assert.is_nil(out)
    assert.equal("protocol", err.kind)
    assert.matches("^invalid JSON response: invalid JSON at byte %d+: ", err.message)
    assert.is_number(err.offset)
    assert.equal(URL, err.url)
  end)

  it("reports the core's own JSON failure as it is", function()
    local _, err = stream("", 200, { json_error = "invalid JSON at byte 3: bad", json_offset = 3 })
    assert.equal("protocol", err.kind)
    assert.equal("invalid JSON response: invalid JSON at byte 3: bad", err.message)
    assert.equal(3, err.offset)
  end)

  it("classifies an error status from the body's bytes (it never reached the extractor)", function()
    local _, err, fields = stream("<html><body>Service Unavailable</body></html>", 503)
    assert.equal("http", err.kind)
    assert.equal("HTTP 503: Service Unavailable", err.message)
    assert.same({}, fields)
    _, err = stream('{"error":{"code":503,"message":"Busy"}}', 503)
    assert.equal("server", err.kind)
    assert.equal(503, err.code)
  end)
end)
