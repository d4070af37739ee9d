-- The one scrubber (geoservices.redact): every secret the library holds is
-- registered with it, and it finds each one in every form a secret takes on
-- the wire and in output: raw, percent-encoded (%20 or + for a space, upper
-- or lower hex, twice), JSON-escaped (\/ \" \uXXXX), HTML entities, and
-- base64 (alone, or inside a Basic or Bearer credential).
local redact = require "geoservices.base.redact"
local secret_forms = require "spec.support.secret_forms"

local PASSWORD = "Tr0ub4dor&3 !x"
local TOKEN = "AbC+dEf/GhI=="

local b64, forms_of = secret_forms.base64, secret_forms.forms_of

describe("the one scrubber", function()
  before_each(function()
    redact.register(PASSWORD)
    redact.register(TOKEN)
  end)
  after_each(function()
    redact.forget(PASSWORD)
    redact.forget(TOKEN)
  end)

  for _, secret in ipairs{ PASSWORD, TOKEN } do
    for name, form in pairs(forms_of(secret)) do
      -- (the first bytes alone, "_head", are a leak only where the text was cut: below)
      if not name:match("_head$") then it(("finds %q %s inside a message"):format(secret, name), function()
        local text = "bad request: f=json&x=" .. form .. "&y=1 (echoed)"
        local clean = redact.text(text)
        assert.is_nil(clean:find(form, 1, true), clean)
        assert.truthy(clean:find(redact.MARK, 1, true), clean)
        assert.truthy(clean:find("bad request: f=json&x=", 1, true), clean)
        assert.truthy(clean:find("(echoed)", 1, true), clean)
      end) end
    end
  end

  it("finds a secret cut short at the end of a message (a message shortened to fit)", function()
    for _, text in ipairs{ "password=Tr0ub4dor%263+%2", "password=Tr0ub4dor&3 ...", "token=AbC+dEf/G" } do
      local clean = redact.text(text)
      assert.truthy(clean:find(redact.MARK, 1, true), clean)
      assert.is_nil(clean:find("Tr0ub4", 1, true), clean)
      assert.is_nil(clean:find("AbC+dE", 1, true), clean)
    end
  end)

  it("redacts a Basic credential whatever its user, and a Bearer one holding a secret", function()
    local basic = "Authorization: Basic " .. b64("alice:short") .. "\r\nX: 1"
    assert.equal("Authorization: Basic " .. redact.MARK .. "\r\nX: 1", redact.text(basic))
    local bearer = "headers: {\"Authorization\": \"Bearer " .. b64(TOKEN) .. "\"}"
    assert.equal("headers: {\"Authorization\": \"Bearer " .. redact.MARK .. "\"}", redact.text(bearer))
    local percent = "authorization=Basic%20" .. (b64("bob:" .. PASSWORD):gsub("[+/=]", function(c)
      return ("%%%02X"):format(c:byte())
    end))
    assert.is_nil(redact.text(percent):find(b64("bob:" .. PASSWORD):sub(5, 16), 1, true))
  end)

  it("leaves text without a secret as it was, byte for byte", function()
    redact.register("expired-token") -- a word that begins a secret often ends a message
    for _, text in ipairs{
      "", "plain words", "50% done + 3 & 4 \\ 5", "token=%ZZ&x=%2", "&amp; &#xZZ; \\u12 \\x",
      "Bearer header", "Tr0ub4dor is a word", "AbC+dE", "the Basic plan", ("x"):rep(100000),
      "ends with Tr0ub4do", "ends with AbC+dEf", "Token expired",
    } do
      assert.equal(text, redact.text(text))
    end
    redact.forget("expired-token")
  end)

  it("ignores secrets shorter than four bytes, which would blank ordinary words", function()
    redact.register("abc")
    assert.equal("abc abc", redact.text("abc abc"))
    redact.forget("abc")
  end)

  it("scrubs an error in place: message, url, details, cause", function()
    local err = { kind = "server", message = "bad: " .. forms_of(PASSWORD).pct_upper_plus,
                  url = "http://h/x?token=" .. TOKEN, details = { "token=" .. forms_of(TOKEN).json },
                  cause = { message = PASSWORD } }
    redact.scrub(err)
    for _, text in ipairs{ err.message, err.url, err.details[1], err.cause.message } do
      assert.truthy(text:find(redact.MARK, 1, true), text)
      assert.is_nil(text:find("Tr0ub4", 1, true), text)
      assert.is_nil(text:find("GhI", 1, true), text)
    end
  end)

  it("is the façade's geoservices.redact: a caller's secret registered there leaves every error", function()
    local geoservices = require "geoservices"
    local own = "caller-Own-Secret-9"
    geoservices.redact.register(own)
    finally(function() geoservices.redact.forget(own) end)
    local err = geoservices.errors.new("server", "echoed: " .. own)
    assert.is_nil(tostring(err):find(own, 1, true), tostring(err))
    assert.truthy(tostring(err):find(redact.MARK, 1, true), tostring(err))
    assert.equal(redact, geoservices.redact)
    assert.equal(require "geoservices.base.loop", geoservices.loop)
  end)

  it("registers the secret members of parameters, at any depth, and a caller's own secret names", function()
    local fields = { username = "siteadmin", password = "p4ss-Word-1", securityQuestionAns = "my answer",
                     cloudConfig = { { credential = { secret = { secretKey = "SK-12345", accessKey = "AK-12345" } } } },
                     apiKey = "caller-key-1" }
    redact.register_fields(fields)
    local text = "p4ss-Word-1 my+answer SK-12345 AK-12345 caller-key-1 siteadmin"
    assert.equal(("%s %s %s %s caller-key-1 siteadmin"):format(redact.MARK, redact.MARK, redact.MARK, redact.MARK),
      redact.text(text))
    redact.mark_secret_name("apiKey")
    assert.is_true(redact.is_secret("apiKey"))
    redact.register_fields(fields)
    assert.equal(redact.MARK, redact.text("caller-key-1"))
    assert.equal(redact.MARK, redact.copy(fields).apiKey)
    redact.unmark_secret_name("apiKey")
    for _, s in ipairs{ "p4ss-Word-1", "my answer", "SK-12345", "AK-12345", "caller-key-1" } do redact.forget(s) end
  end)

  it("copies tables with secret members redacted; printing the copy scrubs the rest", function()
    local copy = redact.copy{ note = "see " .. TOKEN, password = "anything", list = { "x" .. PASSWORD } }
    assert.same({ note = "see " .. TOKEN, password = redact.MARK, list = { "x" .. PASSWORD } }, copy)
    local printed = require("geoservices.base.pp").format(copy)
    assert.is_nil(printed:find(TOKEN, 1, true), printed)
    assert.is_nil(printed:find(PASSWORD, 1, true), printed)
  end)

  it("keeps one list, bounded: the oldest secret goes first", function()
    local before = redact.count()
    for i = 1, redact.MAX_SECRETS + 5 do redact.register(("bulk-secret-%04d"):format(i)) end
    assert.equal(redact.MAX_SECRETS, redact.count())
    assert.equal("bulk-secret-0001", redact.text("bulk-secret-0001"))
    assert.equal(redact.MARK, redact.text(("bulk-secret-%04d"):format(redact.MAX_SECRETS + 5)))
    for i = 1, redact.MAX_SECRETS + 5 do redact.forget(("bulk-secret-%04d"):format(i)) end
    assert.is_true(redact.count() <= before)
  end)

  it("scrubs a large text in reasonable time", function()
    local big = ("f=json&edits=%5B%7B%22id%22%3A0%2C%22attributes%22%3A%7B%22a%22%3A%22b%22%7D%7D%5D&"):rep(2500)
    local t0 = os.clock()
    local clean = redact.text(big .. "token=" .. forms_of(TOKEN).pct_lower_plus)
    assert.truthy(clean:sub(-40):find(redact.MARK, 1, true))
    assert.is_true(os.clock() - t0 < 0.5, ("%.2f s for %d bytes"):format(os.clock() - t0, #big))
  end)
end)
