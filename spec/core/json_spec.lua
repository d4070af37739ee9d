-- core.json_decode / core.json_encode / core.jsonstream, tested on the C core directly.
local core = require "geoservices.core"
local cjson = require "cjson"
local helper = require "spec.helper"

local FIXTURES = {
  '{"objectIdFieldName":"OBJECTID","features":[{"attributes":{"OBJECTID":-2147217395,'
    .. '"NAME":"Caf\\u00e9 \\"Z\\"","DATE":1700000000123,"V":null,"OK":true},'
    .. '"geometry":{"x":-117.19584274291992,"y":34.056}}],"exceededTransferLimit":false}',
  '[1,[2,[3,{}]],{"a":[]},"\\uD83D\\uDE00",0.1,1e-300,5e-324,-0,"h\195\169llo"]',
  '  {"k" : [ 1 , 2 ] , "e\\u00e9" : { "n" : null } }  ',
  '"just a string \\n with escapes \\t"',
  '-123.5e-2',
  '42',
}

local function decode_chunked(s, cuts, opts)
  local js = core.jsonstream(opts)
  local start = 1
  for _, cut in ipairs(cuts) do
    local ok, err, off = js:feed(s:sub(start, cut))
    if not ok then
      js:close()
      return nil, err, off
    end
    start = cut + 1
  end
  local ok, err, off = js:feed(s:sub(start))
  if not ok then
    js:close()
    return nil, err, off
  end
  local v
  v, err, off = js:finish()
  js:close()
  return v, err, off
end

describe("core.json_decode", function()
  it("keeps integers as integers", function()
    local v = core.json_decode('{"OBJECTID":-2147217395,"id":17,"date":1700000000123}')
    assert.equal(-2147217395, v.OBJECTID)
    assert.equal("integer", math.type(v.OBJECTID))
    assert.equal("integer", math.type(v.id))
    assert.equal(1700000000123, v.date)
    assert.equal("integer", math.type(v.date))
    assert.equal(math.maxinteger, core.json_decode("9223372036854775807"))
    assert.equal(math.mininteger, core.json_decode("-9223372036854775808"))
    assert.equal("integer", math.type(core.json_decode("-9223372036854775808")))
  end)

  it("turns integers overflowing int64 and anything with . or e into floats", function()
    assert.equal("float", math.type(core.json_decode("9223372036854775808")))
    assert.equal(2^63, core.json_decode("9223372036854775808"))
    assert.equal("float", math.type(core.json_decode("1.0")))
    assert.equal("float", math.type(core.json_decode("1e2")))
    assert.equal(100.0, core.json_decode("1E+2"))
    assert.equal(0, core.json_decode("-0"))
  end)

  it("parses doubles exactly", function()
    for _, text in ipairs({ "-117.19584274291992", "0.1", "1e-300", "5e-324",
                            "1.7976931348623157e308", "2.2250738585072014e-308",
                            "0.30000000000000004", "34.056" }) do
      assert.equal(tonumber(text), core.json_decode(text))
    end
  end)

  it("decodes every type and nesting", function()
    local v = core.json_decode('{"a":[1,2.5,"x",null,true,false,{"b":[]}],"c":{}}')
    assert.same({ 1, 2.5, "x", cjson.null, true, false, { b = {} } }, v.a)
    assert.same({}, v.c)
    assert.equal(core.json_array_mt, getmetatable(core.json_decode("[[]]")))
    assert.equal(core.json_array_mt, getmetatable(core.json_decode("[[]]")[1]))
    assert.is_nil(getmetatable(core.json_decode("{}")))
    assert.equal("s", core.json_decode('"s"'))
    assert.is_true(core.json_decode(" true "))
    assert.is_false(core.json_decode("false"))
  end)

  it("decodes null as cjson.null", function()
    assert.equal(cjson.null, core.json_decode("null"))
    assert.equal(cjson.null, core.json_decode("[null]")[1])
    assert.equal(cjson.null, core.json_decode('{"a":null}').a)
  end)

  it("combines surrogate pairs and decodes escapes", function()
    assert.equal("\u{1F600}", core.json_decode('"\\uD83D\\uDE00"'))
    assert.equal("\xF0\x9F\x98\x80", core.json_decode('"\\ud83d\\ude00"'))
    assert.equal('a"b\\c/d\b\f\n\r\t', core.json_decode('"a\\"b\\\\c\\/d\\b\\f\\n\\r\\t"'))
    assert.equal("a\0b\u{e9}\u{20ac}", core.json_decode('"a\\u0000b\\u00e9\\u20AC"'))
    assert.equal("h\u{e9}llo \u{1D11E}", core.json_decode('"h\u{e9}llo \u{1D11E}"'))
  end)

  it("agrees with cjson on a fixture", function()
    assert.same(cjson.decode(FIXTURES[1]), core.json_decode(FIXTURES[1]))
  end)

  -- Tables are built when their container closes, from elements waiting on
  -- the Lua stack (moved in early past 64 elements or a deep stack), and
  -- short strings come from a cache kept across calls.
  describe("table building", function()
    local function array_text(n)
      local items = {}
      for i = 1, n do items[i] = tostring(i) end
      return "[" .. table.concat(items, ",") .. "]"
    end
    local function object_text(n)
      local items = {}
      for i = 1, n do items[i] = ('"k%d":%d'):format(i, i) end
      return "{" .. table.concat(items, ",") .. "}"
    end

    it("builds arrays and objects of every size around the early moves", function()
      for _, n in ipairs{ 0, 1, 2, 63, 64, 65, 127, 128, 129, 200, 1000 } do
        local arr = core.json_decode(array_text(n))
        assert.equal(n, #arr)
        for i = 1, n do assert.equal(i, arr[i]) end
        assert.equal(core.json_array_mt, getmetatable(arr))
        local obj = core.json_decode(object_text(n))
        local count = 0
        for k, v in pairs(obj) do
          count = count + 1
          assert.equal(k, "k" .. v)
        end
        assert.equal(n, count)
        local nested = core.json_decode('{"a":' .. array_text(n) .. ',"b":' .. object_text(n) .. ',"c":[' ..
          object_text(n) .. "," .. array_text(n) .. "]}")
        assert.same(arr, nested.a)
        assert.same(obj, nested.b)
        assert.same({ obj, arr }, nested.c)
      end
    end)

    it("a stream resumes a container with elements waiting, split anywhere", function()
      -- between feeds the waiting elements are parked; the stack must have
      -- room again for all a container may still take when they come back
      for _, n in ipairs{ 30, 63, 64, 65, 100 } do
        for _, text in ipairs{ object_text(n), array_text(n), '{"a":[' .. object_text(n) .. "]}" } do
          local want = core.json_decode(text)
          for cut = 1, #text - 1, 3 do
            assert.same(want, (decode_chunked(text, { cut })))
          end
          local pieces = {}
          for i = 1, #text - 1 do pieces[i] = i end
          assert.same(want, (decode_chunked(text, pieces)))
        end
      end
    end)

    it("keeps the last value of a repeated key, before and across an early move", function()
      assert.same({ a = 3, b = 2 }, core.json_decode('{"a":1,"b":2,"a":3}'))
      local members = { '"dup":"first"' }
      for i = 1, 150 do members[#members + 1] = ('"m%d":%d'):format(i, i) end
      members[#members + 1] = '"dup":"last"'
      local v = core.json_decode("{" .. table.concat(members, ",") .. "}")
      assert.equal("last", v.dup)
      assert.equal(150, v.m150)
    end)

    it("stays within the Lua stack for deep documents whose every level is wide", function()
      -- 20000 levels of 63 waiting elements would need 2.5 million stack slots
      local levels, width = 20000, 63
      local parts, closes = {}, {}
      for d = 1, levels do
        if d % 2 == 0 then
          parts[#parts + 1] = "[" .. array_text(width):sub(2, -2) .. ","
          closes[#closes + 1] = "]"
        else
          parts[#parts + 1] = "{" .. object_text(width):sub(2, -2) .. ',"child":'
          closes[#closes + 1] = "}"
        end
      end
      local text = table.concat(parts) .. "null" .. table.concat(closes):reverse()
      local v = assert(core.json_decode(text, { max_depth = levels + 1 }))
      for d = 1, levels do
        if d % 2 == 0 then
          assert.equal(width + 1, #v)
          assert.equal(width, v[width])
          v = v[width + 1]
        else
          assert.equal(width, v["k" .. width])
          v = v.child
        end
      end
      assert.equal(cjson.null, v)
      -- the same, fed to a stream in pieces: the partial tree is parked between feeds
      local cuts = {}
      for cut = 1000, #text - 1, #text // 7 do cuts[#cuts + 1] = cut end
      local w = assert(decode_chunked(text, cuts, { max_depth = levels + 1 }))
      for d = 1, levels - 1 do w = d % 2 == 0 and w[width + 1] or w.child end
      assert.equal(width + 1, #w)
    end)

    it("never mixes cached strings: keys and values of every length differing in one byte", function()
      local words = {}
      for len = 1, 45 do
        local base = ("k"):rep(len)
        for pos = 1, len do words[#words + 1] = base:sub(1, pos - 1) .. "x" .. base:sub(pos + 1) end
        words[#words + 1] = base
      end
      local members, values = {}, {}
      for i, w in ipairs(words) do
        members[i] = ('"%s":"%s"'):format(w, w:upper())
        values[i] = ('"%s"'):format(w)
      end
      local text = "[{" .. table.concat(members, ",") .. "},[" .. table.concat(values, ",") .. "]]"
      for _ = 1, 3 do -- again, now from the cache
        local v = core.json_decode(text)
        local n = 0
        for k, val in pairs(v[1]) do
          n = n + 1
          assert.equal(k:upper(), val)
        end
        assert.equal(#words, n)
        for i, w in ipairs(words) do
          assert.equal(w:upper(), v[1][w])
          assert.equal(w, v[2][i])
        end
      end
      collectgarbage() -- the cache's strings stay valid across a collection
      assert.equal("KXK", core.json_decode('{"kxk":"KXK"}').kxk)
    end)
  end)

  describe("errors", function()
    local function fails(text, msg, offset, opts)
      local v, err, off = core.json_decode(text, opts)
      assert.is_nil(v)
      assert.equal("invalid JSON at byte " .. offset .. ": " .. msg, err)
      assert.equal(offset, off)
    end

    it("reports truncated input at the end", function()
      fails("[1,2", "unexpected end of input", 5)
      fails('{"a":', "unexpected end of input", 6)
      fails('"abc', "unexpected end of input", 5)
      fails("", "empty input", 1)
      fails("   ", "empty input", 4)
    end)

    it("reports bad escapes", function()
      fails('"a\\qb"', "invalid escape \\q", 4)
      fails('"\\u12G4"', "invalid \\u escape", 6)
      fails('"\\uD83D"', "lone surrogate", 8)
      fails('"\\uDE00"', "lone surrogate", 7)
    end)

    it("reports invalid UTF-8", function()
      fails('"\xC0\xAF"', "invalid UTF-8", 2)       -- overlong
      fails('"\xED\xA0\x80"', "invalid UTF-8", 3)   -- surrogate
      fails('"\xF4\x90\x80\x80"', "invalid UTF-8", 3) -- above U+10FFFF
      fails('"ab\xFF"', "invalid UTF-8", 4)
      fails('"a\nb"', "unescaped control character 0x0A in string", 3)
    end)

    it("reports unbalanced brackets", function()
      fails("[1,2}", "expected ',' or ']', found '}'", 5)
      fails('{"a":1]', "expected ',' or '}', found ']'", 7)
      fails("[[1]", "unexpected end of input", 5)
      fails("[1]]", "trailing garbage after JSON value", 4)
      fails("]", "expected value, found ']'", 1)
    end)

    it("is strict about numbers and literals", function()
      fails("01", "invalid number", 2)
      fails("+1", "expected value, found '+'", 1)
      fails(".5", "expected value, found '.'", 1)
      fails("NaN", "expected value, found 'N'", 1)
      fails("1.", "unexpected end of input", 3)
      fails("[1,]", "expected value, found ']'", 4)
      fails("nul", "unexpected end of input", 4)
      fails("nulx", "invalid literal", 4)
    end)

    it("applies max_depth and max_value_bytes", function()
      fails("[[[1]]]", "maximum depth exceeded", 3, { max_depth = 2 })
      assert.same({ { 1 } }, core.json_decode("[[1]]", { max_depth = 2 }))
      fails('"abcde"', "value too large", 6, { max_value_bytes = 4 })
      assert.equal("abcd", core.json_decode('"abcd"', { max_value_bytes = 4 }))
      fails(string.rep("[", 1001) .. string.rep("]", 1001), "maximum depth exceeded", 1001)
      local deep = core.json_decode(string.rep("[", 1000) .. string.rep("]", 1000))
      assert.equal("table", type(deep))
    end)

    it("raises on bad arguments", function()
      assert.has_error(function() core.json_decode({}) end)
      assert.has_error(function() core.json_decode("1", { max_depth = -1 }) end,
        "option max_depth must be a positive integer")
    end)
  end)
end)

describe("core.json_encode", function()
  it("writes integers as integers and floats so they stay floats", function()
    assert.equal("-2147217395", core.json_encode(-2147217395))
    assert.equal("1700000000123", core.json_encode(1700000000123))
    assert.equal("9223372036854775807", core.json_encode(math.maxinteger))
    assert.equal("12.0", core.json_encode(12.0))
    assert.equal("-0.0", core.json_encode(-0.0))
    assert.equal("0.10000000000000001", core.json_encode(0.1))
    assert.equal("float", math.type(core.json_decode(core.json_encode(12.0))))
  end)

  it("round-trips 17-digit doubles exactly", function()
    for _, x in ipairs({ -117.19584274291992, 0.1, 1e-300, 5e-324, 1/3, math.pi, 2^53 + 0.0,
                         1.7976931348623157e308, -2.2250738585072014e-308, 1e21, 123456.789 }) do
      local back = core.json_decode(core.json_encode(x))
      assert.equal(x, back)
      assert.equal("float", math.type(back))
    end
  end)

  it("escapes strings", function()
    assert.equal('"a\\"b\\\\c/d\\n\\r\\t\\b\\f\\u0001\\u001f"',
      core.json_encode('a"b\\c/d\n\r\t\b\f\1\31'))
    assert.equal('"\\u0000"', core.json_encode("\0"))
    assert.equal('"\u{1F600}"', core.json_encode("\u{1F600}"))
  end)

  it("encodes null, booleans and nil", function()
    assert.equal("null", core.json_encode(cjson.null))
    assert.equal("[true,false,null]", core.json_encode({ true, false, cjson.null }))
    assert.equal("null", core.json_encode(nil))
  end)

  it("tells arrays from objects", function()
    assert.equal("[1,2,3]", core.json_encode({ 1, 2, 3 }))
    assert.equal("{}", core.json_encode({}))
    assert.equal('{"1":1,"3":3}', core.json_encode({ [1] = 1, [3] = 3 }))
    assert.equal('{"0":"z","1":"a"}', core.json_encode({ [0] = "z", "a" }))
    assert.equal('{"a":1,"b":[],"c":{}}',
      core.json_encode({ c = {}, a = 1, b = setmetatable({}, { __jsontype = "array" }) }))
    assert.equal('{"1":"x"}', core.json_encode(setmetatable({ "x" }, { __jsontype = "object" })))
    assert.equal("[1]", core.json_encode(setmetatable({ 1, n = 2 }, { __jsontype = "array" })))
  end)

  it("sorts object keys", function()
    assert.equal('{"A":1,"B":2,"a":3,"aa":4,"b":5}',
      core.json_encode({ b = 5, aa = 4, a = 3, B = 2, A = 1 }))
  end)

  it("raises on unencodable values", function()
    assert.has_error(function() core.json_encode({ [true] = 1 }) end,
      "cannot encode key of type boolean")
    assert.has_error(function() core.json_encode({ [1.5] = 1 }) end,
      "cannot encode key of type number")
    assert.has_error(function() core.json_encode({ f = print }) end,
      "cannot encode value of type function")
    assert.has_error(function() core.json_encode(0/0) end)
    assert.has_error(function() core.json_encode(math.huge) end)
    assert.has_error(function() core.json_encode(-math.huge) end)
    assert.has_error(function() core.json_encode({ [1] = 1, ["1"] = 2 }) end)
    assert.has_error(function() core.json_encode(io.stdout) end)
    local t = {}
    t.self = t
    assert.has_error(function() core.json_encode(t) end,
      "cannot encode: maximum depth 1000 exceeded (cycle?)")
  end)

  it("limits depth", function()
    local deep = {}
    for _ = 2, 1000 do deep = { deep } end
    assert.equal(string.rep("[", 999) .. "{}" .. string.rep("]", 999), core.json_encode(deep))
    assert.has_error(function() core.json_encode({ deep }) end)
    assert.has_error(function() core.json_encode({ { {} } }, { max_depth = 2 }) end)
  end)

  it("round-trips [] through the array metatable the core owns", function()
    local mt = core.json_array_mt
    assert.equal("array", mt.__jsontype)
    assert.equal("geoservices.json.array", mt.__name)
    local v = core.json_decode('{"a":[],"b":{},"c":[[]]}')
    assert.equal(mt, getmetatable(v.a))
    assert.equal(mt, getmetatable(v.c))
    assert.is_nil(getmetatable(v.b))
    assert.equal('{"a":[],"b":{},"c":[[]]}', core.json_encode(v))
    assert.equal("[]", core.json_encode(core.json_decode("[]")))
    assert.equal("[]", core.json_encode(setmetatable({}, mt)))
    assert.equal("{}", core.json_encode({}))
    assert.is_nil(debug.getregistry()["geoservices.json.array"]) -- not reachable by name
  end)

  it("keeps the same array metatable when the core is opened again", function()
    package.loaded["geoservices.core"] = nil
    local ok, again = pcall(require, "geoservices.core")
    package.loaded["geoservices.core"] = core
    assert.is_true(ok, again)
    assert.equal(core.json_array_mt, again.json_array_mt)
    assert.equal(core.json_array_mt, getmetatable(again.json_decode("[]")))
  end)

  it("round-trips the fixtures", function()
    for _, s in ipairs(FIXTURES) do
      local v = core.json_decode(s)
      assert.same(v, core.json_decode(core.json_encode(v)))
    end
  end)
end)

describe("core.jsonstream", function()
  it("gives the same value as json_decode for every split point", function()
    for _, s in ipairs(FIXTURES) do
      local want = core.json_decode(s)
      for cut = 0, #s do
        assert.same(want, (decode_chunked(s, { cut })))
      end
      local ones = {}
      for i = 1, #s do ones[i] = i end
      assert.same(want, (decode_chunked(s, ones)))
    end
  end)

  it("gives the same error for every split point", function()
    for _, s in ipairs({ '[1,{"a":"b\\q"}]', '{"a":[1,2}', '"\xE2\x82x"', "[1,2" }) do
      local _, want_err, want_off = core.json_decode(s)
      assert.is_string(want_err)
      for cut = 0, #s do
        local v, err, off = decode_chunked(s, { cut })
        assert.is_nil(v)
        assert.equal(want_err, err)
        assert.equal(want_off, off)
      end
    end
  end)

  it("sets the array metatable across chunks", function()
    local v = decode_chunked('{"a":[[],[1]]}', { 6, 8 })
    assert.equal(core.json_array_mt, getmetatable(v.a))
    assert.equal(core.json_array_mt, getmetatable(v.a[1]))
  end)

  it("repeats a feed error and resets after finish", function()
    local js = core.jsonstream()
    assert.is_true(js:feed("[1,"))
    local ok, err, off = js:feed("x]")
    assert.is_nil(ok)
    assert.equal("invalid JSON at byte 4: expected value, found 'x'", err)
    assert.equal(4, off)
    local ok2, err2, off2 = js:feed("2]")
    assert.is_nil(ok2)
    assert.equal(err, err2)
    assert.equal(off, off2)
    local v, err3 = js:finish()
    assert.is_nil(v)
    assert.equal(err, err3)
    -- finish reset the stream: it decodes a new document
    assert.is_true(js:feed('{"a":'))
    assert.is_true(js:feed("1}"))
    assert.same({ a = 1 }, js:finish())
    js:close()
  end)

  it("reports an incomplete document from finish", function()
    local js = core.jsonstream()
    assert.is_true(js:feed('{"a":[1,'))
    local v, err, off = js:finish()
    assert.is_nil(v)
    assert.equal("invalid JSON at byte 9: unexpected end of input", err)
    assert.equal(9, off)
    js:close()
  end)

  it("reset() drops a partial document", function()
    local js = core.jsonstream()
    assert.is_true(js:feed('{"a":[1,'))
    js:reset()
    assert.is_true(js:feed("[true]"))
    assert.same({ true }, js:finish())
    js:close()
  end)

  it("honours its options", function()
    local js = core.jsonstream({ max_depth = 1 })
    local ok, err = js:feed("[[")
    assert.is_nil(ok)
    assert.matches("maximum depth exceeded", err, 1, true)
    js:close()
  end)

  it("closes idempotently and refuses use after close", function()
    local js = core.jsonstream()
    assert.matches("^geoservices%.JsonStream %(0x%x+%)$", tostring(js))
    js:feed("[1")
    js:close()
    js:close()
    assert.has_error(function() js:feed("]") end, "attempt to use a closed JsonStream")
    assert.has_error(function() js:finish() end, "attempt to use a closed JsonStream")
    assert.has_error(function() js:reset() end, "attempt to use a closed JsonStream")
    assert.matches("^geoservices%.JsonStream", tostring(js))
  end)

  it("closes when a <close> variable leaves scope, even on error", function()
    local seen
    local ok = pcall(function()
      local js <close> = core.jsonstream()
      seen = js
      js:feed("[1,2")
      error("boom")
    end)
    assert.is_false(ok)
    assert.has_error(function() seen:feed("]") end, "attempt to use a closed JsonStream")
  end)

  it("survives a Lua error raised inside a handler", function()
    -- a million nested arrays overflow the Lua stack: the handler raises mid-feed
    local deep = string.rep("[", 1000001)
    assert.has_error(function() core.json_decode(deep, { max_depth = 2000000 }) end)
    local js = core.jsonstream({ max_depth = 2000000 })
    assert.has_error(function() js:feed(deep) end)
    assert.has_error(function() js:feed("]") end,
      "attempt to use a JsonStream after an error inside feed")
    js:reset()
    assert.is_true(js:feed("[1]"))
    assert.same({ 1 }, js:finish())
    js:close()
    collectgarbage()
  end)

  it("is collected with a partial document parked: its memory comes back", function()
    -- 200 streams dropped unclosed, each holding 1 MiB of an unfinished string (C memory,
    -- outside Lua's count): 200 MiB of resident memory if the collector did not free them
    local parked = '{"a":[{"b":"' .. string.rep("x", 1 << 20)
    collectgarbage()
    local before = helper.rss_kib()
    for i = 1, 200 do
      local js = core.jsonstream()
      assert.is_true(js:feed(parked))
      if i % 10 == 0 then collectgarbage() end
    end
    collectgarbage()
    collectgarbage()
    local grown_mib = (helper.rss_kib() - before) / 1024
    assert.is_true(grown_mib < 64, ("resident memory grew by %.0f MiB"):format(grown_mib))
  end)
end)
