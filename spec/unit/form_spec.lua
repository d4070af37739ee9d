-- Turning an operation's parameters into form fields (geoservices.form),
-- beyond the encodings spec/form_spec.lua checks on the wire.
local form = require "geoservices.base.form"
local json = require "geoservices.base.json"

local function names(fields)
  local out = {}
  for i, pair in ipairs(fields) do out[i] = pair[1] end
  return out
end

describe("form.to_form", function()
  it("puts f first, the other names sorted, and the token last", function()
    local fields = form.to_form({ zeta = 1, alpha = "a", Beta = "b", mid = "m" }, "tok")
    assert.same({ "f", "Beta", "alpha", "mid", "zeta", "token" }, names(fields))
    assert.same({ "f", "json" }, fields[1])
    assert.same({ "token", "tok" }, fields[#fields])
  end)

  it("keeps a caller's f, and sends no token field when no token is given", function()
    local fields = form.to_form{ f = "pjson", q = "x" }
    assert.same({ { "f", "pjson" }, { "q", "x" } }, fields)
    assert.same({ { "f", "json" } }, form.to_form{})
  end)

  it("never takes a token from the fields: only the token argument is sent", function()
    assert.same({ { "f", "json" }, { "a", 1 } }, form.to_form{ a = 1, token = "from-fields" })
    assert.same({ { "f", "json" }, { "a", 1 }, { "token", "arg" } }, form.to_form({ a = 1, token = "x" }, "arg"))
  end)

  it("hands strings, numbers, booleans and tables to the C encoder as they are", function()
    local t = { x = 1 }
    local fields = form.to_form{ s = "text", i = 9007199254740993, d = 0.1, yes = true, no = false, t = t }
    local by_name = {}
    for _, pair in ipairs(fields) do by_name[pair[1]] = pair[2] end
    assert.equal("text", by_name.s)
    assert.equal(9007199254740993, by_name.i)
    assert.equal("integer", math.type(by_name.i))
    assert.equal(0.1, by_name.d)
    assert.is_true(by_name.yes)
    assert.is_false(by_name.no) -- false is sent, not dropped
    assert.equal(t, by_name.t)
  end)

  it("sends json.null as the text null", function()
    assert.same({ { "f", "json" }, { "gen", "null" } }, form.to_form{ gen = json.null })
  end)

  it("asks a table's __form metamethod for its value", function()
    local special = setmetatable({ 1, 2 }, { __form = function(v) return ("%d,%d"):format(v[1], v[2]) end })
    assert.same({ { "f", "json" }, { "ids", "1,2" } }, form.to_form{ ids = special })
  end)

  it("raises on values a form cannot carry, naming the parameter", function()
    assert.has_error(function() form.to_form{ callback = print } end, "parameter 'callback': cannot send a function")
    assert.has_error(function() form.to_form{ co = coroutine.create(print) } end,
      "parameter 'co': cannot send a thread")
  end)

  it("raises on names that are not strings", function()
    assert.has_error(function() form.to_form{ "positional" } end, "parameter names must be strings, got number")
  end)
end)

describe("form.to_flat", function()
  local function flattened(pairs_)
    local out = {}
    for _, pair in ipairs(pairs_) do
      out[#out + 1] = pair[1]
      out[#out + 1] = pair[2]
    end
    return out
  end

  it("is to_form as one flat list, for every shape of fields", function()
    local t = { x = 1 }
    local special = setmetatable({ 1, 2 }, { __form = function(v) return ("%d,%d"):format(v[1], v[2]) end })
    for _, case in ipairs{
      { {}, nil }, { {}, "tok" }, { { a = 1 }, nil }, { { a = 1 }, "tok" }, { { f = "pjson", q = "x" }, "tok" },
      { { a = 1, token = "from-fields" }, nil }, { { zeta = 1, alpha = "a", Beta = "b", mid = "m" }, "tok" },
      { { s = "text", i = 9007199254740993, d = 0.1, yes = true, no = false, t = t }, nil },
      { { gen = json.null, ids = special }, "t" }, { { only = false }, "t" },
    } do
      local fields, token = case[1], case[2]
      assert.same(flattened(form.to_form(fields, token)), form.to_flat(fields, token))
    end
  end)

  it("raises as to_form does", function()
    assert.has_error(function() form.to_flat{ callback = print } end, "parameter 'callback': cannot send a function")
    assert.has_error(function() form.to_flat({ a = 1, b = print }, "t") end, "parameter 'b': cannot send a function")
    assert.has_error(function() form.to_flat{ "positional" } end, "parameter names must be strings, got number")
  end)
end)

describe("form.text", function()
  it("gives the text each value is sent as", function()
    assert.equal("abc", form.text("abc"))
    assert.equal("9007199254740993", form.text(9007199254740993))
    assert.equal("0.10000000000000001", form.text(0.1))
    assert.equal("-117.19584274291992", form.text(-117.19584274291992))
    assert.equal("true", form.text(true))
    assert.equal("false", form.text(false))
  end)

  it("writes tables as JSON, arrays as arrays", function()
    assert.equal('{"a":[1,2]}', form.text{ a = { 1, 2 } })
    assert.equal("[]", form.text(json.array()))
    assert.equal('{"n":9007199254740993}', form.text{ n = 9007199254740993 })
  end)

  it("agrees with to_form: the text of each form value", function()
    local texts = {}
    for _, pair in ipairs(form.to_form({ gen = json.null, flag = true, n = 3, ids = { 4, 5 } }, "t")) do
      texts[#texts + 1] = pair[1] .. "=" .. form.text(pair[2])
    end
    assert.same({ "f=json", "flag=true", "gen=null", "ids=[4,5]", "n=3", "token=t" }, texts)
  end)
end)
