-- Responses decoded by the C core straight from the request's buffer (the
-- request option `json`, which Client:post uses): the same value, the same
-- limits and the same errors as decoding the body string in Lua, for every
-- kind of body a server may send; and through a real client over HTTP, the
-- error bodies with HTTP 200 in both dialects, bodies that are not JSON, too
-- deep, too large or not UTF-8.
local core = require "geoservices.core"
local errors = require "geoservices.base.errors"
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local response = require "geoservices.net.response"
local transport = require "geoservices.net.transport"

local function nested(depth)
  return ("["):rep(depth) .. ("]"):rep(depth)
end

-- Every kind of body, as bytes.
local BODIES = {
  object = '{"services":[{"id":"a","n":9007199254740993,"x":0.1,"ok":true,"none":null,"e":[],"o":{}}]}',
  dup_keys = '{"a":1,"a":2}',
  dialect_error = '{"error":{"code":498,"message":"Invalid token.","details":["expired"]}}',
  dialect_status = '{"status":"error","messages":["Locked","try later"],"code":409}',
  array = '[1,2,3]',
  scalar = "42",
  null = "null",
  html = "<html><body><h1>502 Bad Gateway</h1></body></html>",
  truncated = '{"services":[{"id":"a"',
  trailing = '{"a":1} x',
  bad_utf8 = '{"name":"caf\xC3"}',
  overlong_utf8 = '{"name":"\xC0\xAF"}',
  lone_surrogate = '{"name":"\\ud800"}',
  deep_ok = nested(1000),
  too_deep = nested(1001),
  unicode = '{"name":"Stra\\u00dfe \xE2\x82\xAC \\ud83d\\ude00"}',
  empty = "",
  spaces = "   ",
}
do -- a larger document: thousands of allocations per decode
  local items = {}
  for i = 1, 2000 do items[i] = ('{"id":%d,"name":"item %d","tags":["a","b"]}'):format(i, i) end
  BODIES.large = '{"items":[' .. table.concat(items, ",") .. ']}'
end

describe("the json request option", function()
  local dir, driver
  setup(function()
    dir = helper.tmp_dir()
    for name, bytes in pairs(BODIES) do helper.write_file(dir .. "/" .. name, bytes) end
  end)
  teardown(function() os.execute("rm -rf " .. helper.shell_quote(dir)) end)
  before_each(function() driver = core.driver() end)
  after_each(function() driver:close() end)

  local function fetch(name, extra)
    local spec = { url = "file://" .. dir .. "/" .. name }
    for k, v in pairs(extra or {}) do spec[k] = v end
    return transport.perform(driver, spec)
  end

  -- The C-decoded response and the body-string one classify alike.
  local function same_outcome(name, max_depth)
    local lean = assert(fetch(name, { json = true, max_json_depth = max_depth }))
    local whole = assert(fetch(name))
    assert.equal(BODIES[name], whole.body)
    local a, a_err = response.decode(lean, "u", max_depth)
    local b, b_err = response.decode(whole, "u", max_depth)
    assert.same(b, a)
    if b_err then
      assert.is_true(errors.is(a_err))
      assert.equal(b_err.kind, a_err.kind)
      assert.equal(b_err.message, a_err.message)
      assert.equal(b_err.code, a_err.code)
      assert.equal(b_err.offset, a_err.offset)
    else
      assert.is_nil(a_err)
    end
    return lean, whole
  end

  it("gives a JSON body decoded, as core.json_decode does it, and no body string", function()
    for _, name in ipairs{ "object", "dup_keys", "dialect_error", "dialect_status", "array", "scalar", "null",
                           "deep_ok", "unicode" } do
      local lean = assert(fetch(name, { json = true }))
      assert.is_nil(lean.body, name)
      assert.same(json.decode(BODIES[name]), lean.json, name)
      assert.equal(#BODIES[name], lean.bytes, name)
      assert.is_table(lean.headers, name)
    end
    local doc = assert(fetch("object", { json = true })).json
    assert.equal("integer", math.type(doc.services[1].n))
    assert.equal(9007199254740993, doc.services[1].n)
    assert.equal(0.1, doc.services[1].x)
    assert.equal(json.null, doc.services[1].none)
    assert.is_true(json.is_array(doc.services) and json.is_array(doc.services[1].e))
    assert.is_false(json.is_array(doc.services[1].o))
    assert.equal(2, assert(fetch("dup_keys", { json = true })).json.a) -- the last one, as in Lua
  end)

  it("gives the headers of a lean result as the whole result gives them, made once when first read", function()
    for _, name in ipairs{ "object", "html", "empty" } do
      local lean, whole = assert(fetch(name, { json = true })), assert(fetch(name))
      assert.is_table(whole.headers, name)
      assert.is_not_nil(next(whole.headers), name)
      local headers = lean.headers
      assert.same(whole.headers, headers, name)
      assert.equal(headers, lean.headers, name)
      assert.is_nil(lean.other, name)
    end
  end)

  it("gives a body that is not JSON (or none) as its bytes, whatever fails in it", function()
    for _, name in ipairs{ "html", "truncated", "trailing", "bad_utf8", "overlong_utf8", "lone_surrogate",
                           "too_deep", "empty", "spaces" } do
      local lean = assert(fetch(name, { json = true }))
      assert.is_nil(lean.json, name)
      assert.equal(BODIES[name], lean.body, name)
    end
  end)

  it("keeps the depth limit: the default, and a client's max_json_depth", function()
    assert.is_nil(assert(fetch("too_deep", { json = true })).json)
    assert.is_nil(assert(fetch("deep_ok", { json = true, max_json_depth = 999 })).json)
    assert.is_table(assert(fetch("deep_ok", { json = true, max_json_depth = 1000 })).json)
    assert.is_table(assert(fetch("array", { json = true, max_json_depth = 1 })).json)
    assert.is_nil(assert(fetch("object", { json = true, max_json_depth = 2 })).json)
  end)

  it("classifies every body exactly as the body string is classified", function()
    for name in pairs(BODIES) do same_outcome(name) end
    same_outcome("deep_ok", 999)
    same_outcome("object", 3)
    local _, err = response.decode(assert(fetch("bad_utf8", { json = true })), "u")
    assert.equal("protocol", err.kind)
    assert.matches("invalid JSON response", err.message)
    _, err = response.decode(assert(fetch("too_deep", { json = true })), "u")
    assert.matches("maximum depth exceeded", err.message)
    _, err = response.decode(assert(fetch("dialect_status", { json = true })), "u")
    assert.equal("server", err.kind)
    assert.equal(409, err.code)
  end)

  it("keeps each request's own depth limit, whatever was decoded before", function()
    for _ = 1, 3 do
      assert.is_nil(assert(fetch("object", { json = true, max_json_depth = 2 })).json)
      assert.is_table(assert(fetch("object", { json = true })).json)
      assert.is_nil(assert(fetch("too_deep", { json = true })).json)
      assert.is_table(assert(fetch("too_deep", { json = true, max_json_depth = 1001 })).json)
    end
  end)

  it("decodes again, alike, after a body that is not JSON stopped a decode half-way", function()
    for _, name in ipairs{ "truncated", "bad_utf8", "too_deep", "trailing" } do
      assert.is_nil(assert(fetch(name, { json = true })).json)
      assert.same(json.decode(BODIES.object), assert(fetch("object", { json = true })).json)
    end
  end)

  it("decodes again after a decode raised half-way (nested deeper than the Lua stack)", function()
    -- in a process of its own: a Lua stack grown to its limit slows the
    -- collector of the process for a while
    local path = dir .. "/deeper_than_the_stack"
    helper.write_file(path, nested(1100000))
    local script = [[
      local core = require "geoservices.core"
      local json = require "geoservices.base.json"
      local transport = require "geoservices.net.transport"
      local deep, object, text = ...
      local driver = core.driver()
      for _ = 1, 2 do
        local ok, err = pcall(transport.perform, driver, { url = deep, json = true, max_json_depth = 2000000 })
        assert(not ok and err:find("JSON nested too deeply", 1, true), tostring(err))
        for _, depth in ipairs{ 2000000, false } do
          local resp = assert(transport.perform(driver, { url = object, json = true, max_json_depth = depth or nil }))
          assert(json.encode(resp.json) == json.encode(json.decode(text)))
        end
      end
      io.write("decoded again")
    ]]
    helper.write_file(dir .. "/deep.lua", script)
    local cmd = ("LUA_PATH=%s LUA_CPATH=%s lua5.4 %s %s %s %s 2>&1"):format(
      helper.shell_quote(package.path), helper.shell_quote(package.cpath), helper.shell_quote(dir .. "/deep.lua"),
      helper.shell_quote("file://" .. path), helper.shell_quote("file://" .. dir .. "/object"),
      helper.shell_quote(BODIES.object))
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    p:close()
    os.remove(path)
    os.remove(dir .. "/deep.lua")
    assert.equal("decoded again", out)
  end)

  it("decodes a response inside a finalizer that runs while another one is decoded", function()
    local inner, armed = {}, true
    local function arm()
      setmetatable({}, { __gc = function()
        if not armed then return end
        local d = core.driver()
        local r = transport.perform(d, { url = "file://" .. dir .. "/dup_keys", json = true })
        d:close()
        inner[#inner + 1] = r and r.json and r.json.a or false
      end })
    end
    collectgarbage()
    -- a young collection every few KB: a finalizer armed just before a
    -- fetch mostly runs at one inside the decode (most of a fetch's
    -- allocations); one armed before each fetch, until ten have run, so
    -- none depends on when the collector reached the others
    collectgarbage("generational", 1, 100)
    for _ = 1, 300 do
      arm()
      assert.equal(2000, #assert(fetch("large", { json = true })).json.items)
      if #inner >= 10 then break end
    end
    armed = false
    collectgarbage("incremental", 200, 100, 13)
    collectgarbage()
    assert.is_true(#inner >= 10, tostring(#inner))
    for _, a in ipairs(inner) do assert.equal(2, a) end
  end)

  it("keeps max_response_bytes: a larger body fails before it is decoded", function()
    local resp, msg, code = fetch("object", { json = true, max_response_bytes = 10 })
    assert.is_nil(resp)
    assert.equal("too_large", code)
    assert.matches("larger than the limit of 10 bytes", msg)
    assert.is_table(assert(fetch("object", { json = true, max_response_bytes = #BODIES.object })).json)
  end)

  it("is refused with a records sink, save_to or discard", function()
    local path = dir .. "/saved"
    helper.write_file(path, "")
    for _, extra in ipairs{ { records = core.records() }, { save_to = path }, { discard = true } } do
      local spec = { url = "file://" .. dir .. "/object", json = true }
      for k, v in pairs(extra) do spec[k] = v end
      assert.has_error(function() core.request(spec) end,
        "request option 'json' excludes 'records', 'save_to' and 'discard'")
    end
  end)

  it("survives the garbage collector running finalizers while it decodes", function()
    -- finalizers that allocate and collect run during the decode's own allocations
    local live = true
    local function churn()
      if not live then return end
      setmetatable({}, { __gc = function() collectgarbage("step", 0); churn() end })
    end
    churn()
    collectgarbage("setpause", 100)
    for _ = 1, 20 do
      local lean = assert(fetch("object", { json = true }))
      assert.equal("a", lean.json.services[1].id)
    end
    live = false
    collectgarbage("setpause", 200)
    collectgarbage()
  end)
end)

describe("Client:post over HTTP", function()
  local serve, stop_all = helper.scripted_servers()
  local dir
  setup(function()
    dir = helper.tmp_dir()
    helper.write_file(dir .. "/bad_utf8.json", BODIES.bad_utf8)
    helper.write_file(dir .. "/too_deep.json", BODIES.too_deep)
  end)
  teardown(function() os.execute("rm -rf " .. helper.shell_quote(dir)) end)
  after_each(stop_all)

  local function post_to(responses, opts)
    local s = serve{ { method = "POST", path = "/server/x", responses = responses } }
    local c = geoservices.client{ url = s.url, token = "tok", retry = false, max_response_bytes = opts and opts.max,
                                  max_json_depth = opts and opts.depth }
    local value, err = c:post(s.url .. "/x", { a = 1 })
    c:close()
    return value, err
  end

  it("decodes a result", function()
    local value = assert(post_to{ { status = 200, json = { services = { { id = "a", n = 1 } } } } })
    assert.equal("a", value.services[1].id)
    assert.equal("integer", math.type(value.services[1].n))
  end)

  it("makes an error body with HTTP 200 an error, in both dialects", function()
    local _, err = post_to{ { status = 200, json = { error = { code = 400, message = "Unable", details = { "x" } } } } }
    assert.equal("server", err.kind)
    assert.equal(400, err.code)
    assert.equal(200, err.status)
    assert.equal("Unable: x", err.message)
    _, err = post_to{ { status = 200, json = { status = "error", messages = { "Token expired" }, code = 498 } } }
    assert.equal("auth", err.kind)
    assert.equal(498, err.code)
    assert.equal("Token expired", err.message)
  end)

  it("tells a body that is not JSON, not UTF-8 or too deep, with HTTP 200", function()
    local _, err = post_to{ { status = 200, headers = { ["Content-Type"] = "text/html" },
                              body = "<p>maintenance</p>" } }
    assert.equal("protocol", err.kind)
    assert.matches("invalid JSON response %(text/html, 18 bytes%) at byte 1", err.message)
    _, err = post_to{ { status = 200, file = dir .. "/bad_utf8.json" } }
    assert.equal("protocol", err.kind)
    assert.matches("invalid JSON response %(application/json, 15 bytes%) at byte 14: .*invalid UTF%-8", err.message)
    _, err = post_to{ { status = 200, file = dir .. "/too_deep.json" } }
    assert.equal("protocol", err.kind)
    assert.matches("maximum depth exceeded", err.message)
    _, err = post_to({ { status = 200, json = { a = { b = { c = 1 } } } } }, { depth = 2 })
    assert.matches("maximum depth exceeded", err.message)
    _, err = post_to{ { status = 200, body = "" } }
    assert.equal("protocol", err.kind)
    assert.equal("empty response body", err.message)
  end)

  it("keeps the HTTP error and its text for an error page", function()
    local _, err = post_to{ { status = 502, headers = { ["Content-Type"] = "text/html" },
                              body = "<html><h1>Bad Gateway</h1></html>" } }
    assert.equal("http", err.kind)
    assert.equal("HTTP 502: Bad Gateway", err.message)
  end)

  it("refuses a body larger than max_response_bytes", function()
    local _, err = post_to({ { status = 200, json = { pad = ("x"):rep(500) } } }, { max = 100 })
    assert.equal("protocol", err.kind)
    assert.equal("too_large", err.code)
  end)
end)
