-- The forms a secret takes on the wire and in output, for the specs that
-- prove none of them leaks (spec/secrets_*_spec.lua): raw, percent-encoded
-- (upper and lower hex, + or %20 for a space, twice), JSON-escaped (\/, \",
-- \u00XX), percent-encoded JSON and JSON of a percent-encoding, HTML
-- entities, base64 (alone, after other bytes, URL alphabet, percent-encoded),
-- and the first bytes of the raw and percent-encoded forms (a cut secret).
local secret_forms = {}

--- Standard base64 with padding.
function secret_forms.base64(s)
  local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = (a << 16) | ((b or 0) << 8) | (c or 0)
    for k = 3, 0, -1 do
      local v = (n >> (6 * k)) & 63
      out[#out + 1] = alphabet:sub(v + 1, v + 1)
    end
    if not b then out[#out], out[#out - 1] = "=", "=" elseif not c then out[#out] = "=" end
  end
  return table.concat(out)
end

--- Every form of `secret` the specs look for: name -> text.
function secret_forms.forms_of(secret)
  local function pct(s, upper, plus)
    return (s:gsub("[^%w%-%._~]", function(c)
      if plus and c == " " then return "+" end
      return (upper and "%%%02X" or "%%%02x"):format(c:byte())
    end))
  end
  local function json_escaped(s)
    return (s:gsub('[/"\\&<>]', function(c)
      if c == "/" then return "\\/" end
      if c == '"' or c == "\\" then return "\\" .. c end
      return ("\\u%04x"):format(c:byte())
    end))
  end
  return {
    raw = secret,
    pct_upper_plus = pct(secret, true, true),
    pct_lower_plus = pct(secret, false, true),
    pct_upper_20 = pct(secret, true, false),
    pct_lower_20 = pct(secret, false, false),
    pct_twice = pct(pct(secret, true, true), true, false),
    json = json_escaped(secret),
    json_upper_u = (json_escaped(secret):gsub("\\u(%x+)", function(h) return "\\u" .. h:upper() end)),
    json_all_u = (secret:gsub(".", function(c) return ("\\u%04x"):format(c:byte()) end)),
    json_of_pct = json_escaped(pct(secret, true, true)),
    pct_of_json = pct(json_escaped(secret), true, false),
    html = (secret:gsub("[&<>\"']", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;",
                                      ["'"] = "&#39;" })),
    html_numeric = (secret:gsub("[^%w]", function(c) return ("&#%d;"):format(c:byte()) end)),
    base64 = secret_forms.base64(secret),
    base64_inside = secret_forms.base64("user:" .. secret),
    base64_url = (secret_forms.base64("xy" .. secret):gsub("[+/=]", { ["+"] = "-", ["/"] = "_", ["="] = "" })),
    base64_pct = (secret_forms.base64("a" .. secret):gsub("[+/=]", function(c) return ("%%%02X"):format(c:byte()) end)),
    raw_head = secret:sub(1, 8),
    pct_head = pct(secret, true, true):sub(1, 10),
  }
end

--- The first leaked form of any of `secrets` in `text`: secret, form name,
-- form; nil when none shows.
function secret_forms.leak(text, secrets)
  for _, secret in ipairs(secrets) do
    for name, form in pairs(secret_forms.forms_of(secret)) do
      if text:find(form, 1, true) then return secret, name, form end
    end
  end
  return nil
end

return secret_forms
