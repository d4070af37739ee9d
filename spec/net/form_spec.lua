-- Form encoding: the C percent-encoder, field conversion, and the bodies the
-- emulator actually receives (urlencoded and multipart, one large value).
local core = require "geoservices.core"
local params = require "geoservices.base.form"
local json = require "geoservices.base.json"
local helper = require "spec.helper"

describe("form encoding", function()
  it("leaves unreserved characters alone and percent-encodes the rest", function()
    assert.equal("abcXYZ019-._~", core.urlencode("abcXYZ019-._~"))
    assert.equal("a%20b%26c%3Dd%2Be%25", core.urlencode("a b&c=d+e%"))
    assert.equal("%3A%2F%3F%23%5B%5D%40%21%24%27%28%29%2A%2C%3B", core.urlencode(":/?#[]@!$'()*,;"))
  end)

  it("encodes UTF-8 byte by byte and decodes back", function()
    assert.equal("%C3%A9t%C3%A9%20%E2%82%AC", core.urlencode("été €"))
    assert.equal("été €", core.urldecode(core.urlencode("été €")))
    local all = {}
    for i = 0, 255 do all[#all + 1] = string.char(i) end
    all = table.concat(all)
    assert.equal(all, core.urldecode(core.urlencode(all)))
  end)

  it("reports malformed escapes when decoding", function()
    local v, err = core.urldecode("%zz")
    assert.is_nil(v)
    assert.matches("malformed", err)
  end)

  it("joins fields with & and =, keeping empty values", function()
    assert.equal("a=&b=x", core.form_encode{ { "a", "" }, { "b", "x" } })
    assert.equal("a=1&z=2", core.form_encode{ z = 2, a = 1 })
  end)

  it("takes the fields as a flat list name, value, name, value... too", function()
    assert.equal("a=&b=x", core.form_encode{ "a", "", "b", "x" })
    assert.equal("f=json&ids=a%2Cb&token=t%20t", core.form_encode{ "f", "json", "ids", "a,b", "token", "t t" })
    assert.equal("t=true&n=9007199254740993&j=%5B%5D",
      core.form_encode{ "t", true, "n", 9007199254740993, "j", json.array() })
    assert.has_error(function() core.form_encode{ "a", "1", "b" } end,
      "form: a flat list of fields needs a value after every name")
    local form = params.to_flat({ b = { 1, 2 }, a = { x = 1 }, c = json.array(), d = "s" }, "secret")
    assert.equal("f=json&a=%7B%22x%22%3A1%7D&b=%5B1%2C2%5D&c=%5B%5D&d=s&token=secret", core.form_encode(form))
  end)

  it("sends booleans as true/false, integers exactly, floats with 17 digits", function()
    assert.equal("t=true&f=false", core.form_encode{ { "t", true }, { "f", false } })
    assert.equal("n=9007199254740993", core.form_encode{ { "n", 9007199254740993 } })
    assert.equal("x=-117.19584274291992", core.form_encode{ { "x", -117.19584274291992 } })
  end)

  it("writes table values as JSON (exact numbers, [] arrays) and raises for values it cannot send", function()
    assert.equal("a=%7B%22n%22%3A9007199254740993%2C%22x%22%3A0.10000000000000001%2C%22z%22%3A%5B%5D%7D",
      core.form_encode{ { "a", { n = 9007199254740993, x = 0.1, z = json.array() } } })
    assert.has_error(function() core.form_encode{ { "a", print } } end,
      "form value: expected string, number, boolean or table, got function")
  end)

  it("puts f=json first, sorts the rest and sends nested tables as JSON", function()
    local form = params.to_form({ b = { 1, 2 }, a = { x = 1 }, c = json.array(), d = "s" }, "secret")
    assert.equal("f=json&a=%7B%22x%22%3A1%7D&b=%5B1%2C2%5D&c=%5B%5D&d=s&token=secret", core.form_encode(form))
  end)

  it("encodes a 50 MB value in C without failing", function()
    local value = ("a&b c="):rep(50 * 1024 * 1024 // 6)
    local encoded = core.form_encode{ { "v", value } }
    assert.equal(2 + #value // 6 * (1 + 3 + 1 + 3 + 1 + 3), #encoded)
    assert.equal("v=a%26b%20c%3Da%26", encoded:sub(1, 18))
  end)
end)

describe("bodies received by the emulator", function()
  local emu, driver
  local transport = require "geoservices.net.transport"
  setup(function()
    emu = helper.start_emulator()
    driver = core.driver()
  end)
  teardown(function()
    driver:close()
    emu:stop()
  end)

  local function echo(spec)
    spec.url = emu.root .. "/_emulator/echo"
    spec.timeout_ms = 60000
    local response = assert(transport.perform(driver, spec))
    assert.equal(200, response.status)
    return assert(json.decode(response.body))
  end

  it("arrive urlencoded with reserved characters, UTF-8 and empty values intact", function()
    local got = echo{ form = { { "q", "a&b=c d+e%" }, { "u", "Zürich €" }, { "empty", "" } } }
    assert.matches("^application/x%-www%-form%-urlencoded", got.content_type)
    assert.equal("a&b=c d+e%", got.fields.q.head)
    assert.equal("Zürich €", got.fields.u.head)
    assert.equal(0, got.fields.empty.length)
  end)

  it("carry a 50 MB value intact", function()
    local value = ("x&y "):rep(50 * 1024 * 1024 // 4) .. "END"
    local got = echo{ form = { { "big", value } } }
    assert.equal(#value, got.fields.big.length)
    assert.equal(value:sub(1, 32), got.fields.big.head)
    assert.equal(value:sub(-32), got.fields.big.tail)
  end)

  it("arrive as multipart/form-data with a file part streamed from disk", function()
    local path = helper.tmp_name()
    local f = assert(io.open(path, "wb"))
    local content = ("LICENSE-LINE\n"):rep(10000)
    f:write(content)
    f:close()
    local got = echo{ multipart = {
      { name = "username", value = "admin_user" },
      { name = "licenseFile", file = path, filename = "server.prvc", type = "application/octet-stream" },
      { name = "inline", data = "{}", filename = "x.json", type = "application/json" },
    } }
    os.remove(path)
    assert.matches("^multipart/form%-data; boundary=", got.content_type)
    assert.equal("admin_user", got.fields.username.head)
    assert.equal(#content, got.files.licenseFile.length)
    assert.equal("server.prvc", got.files.licenseFile.filename)
    assert.equal("application/octet-stream", got.files.licenseFile.type)
    assert.equal("x.json", got.files.inline.filename)
  end)
end)
