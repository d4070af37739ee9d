-- The emulator's form decoders read a body from a string or from a spooled
-- file ({path =, size =}) in chunks, so a large body never becomes one Lua
-- string: the same fields come out whatever the chunk size, and a file part
-- larger than part_threshold is written to its own file (path, size)
-- instead of being kept as data.
local forms = require "geoservices.emulator.forms"
local helper = require "spec.helper"

local function tmp_path()
  local p = helper.tmp_name()
  os.remove(p)
  return p
end

local function spit(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local BOUNDARY = "----geoXYZ"
local CTYPE = "multipart/form-data; boundary=" .. BOUNDARY

local function multipart(parts)
  local out = {}
  for _, p in ipairs(parts) do
    out[#out + 1] = "--" .. BOUNDARY .. "\r\n"
    if p.filename then
      out[#out + 1] = ('Content-Disposition: form-data; name="%s"; filename="%s"\r\n'):format(p.name, p.filename)
      out[#out + 1] = "Content-Type: " .. (p.type or "application/octet-stream") .. "\r\n\r\n"
    else
      out[#out + 1] = ('Content-Disposition: form-data; name="%s"\r\n\r\n'):format(p.name)
    end
    out[#out + 1] = p.data .. "\r\n"
  end
  out[#out + 1] = "--" .. BOUNDARY .. "--\r\n"
  return table.concat(out)
end

describe("emulator forms", function()
  local created = {}
  local function tmpfile()
    local p = tmp_path()
    spit(p, "")
    created[#created + 1] = p
    return p
  end
  after_each(function()
    for _, p in ipairs(created) do os.remove(p) end
    created = {}
  end)

  describe("urlencoded", function()
    local TEXT = "f=json&edits=%5B%7B%22id%22%3A0%7D%5D&name=a+b%20c&empty=&flag&&x=1%3D2=3&f=pjson&=anon&n%3Dm=v"
    local EXPECTED = { f = "pjson", edits = '[{"id":0}]', name = "a b c", empty = "", flag = "", x = "1=2=3",
                       [""] = "anon", ["n=m"] = "v" }

    it("decodes a string as before", function()
      assert.same(EXPECTED, forms.decode_urlencoded(TEXT))
    end)

    it("decodes a spooled file identically at every chunk size", function()
      local path = tmp_path()
      spit(path, TEXT)
      finally(function() os.remove(path) end)
      for chunk = 1, #TEXT + 1 do
        assert.same(EXPECTED, forms.decode_urlencoded({ path = path, size = #TEXT }, { chunk = chunk }),
          "chunk " .. chunk)
        assert.same(EXPECTED, forms.decode_urlencoded(TEXT, { chunk = chunk }), "string chunk " .. chunk)
      end
    end)

    it("refuses a malformed percent-escape wherever a block ends, as for a string", function()
      local path = tmp_path()
      finally(function() os.remove(path) end)
      for _, bad in ipairs{ "a=%2", "a=%zz&b=1", "a=1&b%=2", "a=x%", "a=%&b=1", "%4" } do
        spit(path, bad)
        for chunk = 1, #bad + 1 do
          local fields, err = forms.decode_urlencoded({ path = path, size = #bad }, { chunk = chunk })
          assert.is_nil(fields, bad .. " chunk " .. chunk)
          assert.equal("malformed percent-escape in form field", err)
        end
        local fields, err = forms.decode_urlencoded(bad)
        assert.is_nil(fields, bad)
        assert.equal("malformed percent-escape in form field", err)
      end
      local fields, err = forms.decode_urlencoded({ path = path .. ".missing", size = 0 })
      assert.is_nil(fields)
      assert.matches("^cannot read the request body: .*No such file", err)
    end)

    it("decodes a 3 MiB value from a file", function()
      local value = string.rep("0123456789abcdef", 3 * 65536)
      local path = tmp_path()
      spit(path, "f=json&big=" .. value .. "&z=%21")
      finally(function() os.remove(path) end)
      local fields = assert(forms.decode_urlencoded({ path = path, size = #value + 17 }))
      assert.equal(#value, #fields.big)
      assert.is_true(fields.big == value)
      assert.equal("!", fields.z)
    end)
  end)

  describe("multipart", function()
    local PARTS = {
      { name = "username", data = "siteadmin" },
      { name = "licenseFile", filename = "license.prvc", type = "application/json",
        data = "line1\r\nline2 --" .. BOUNDARY .. " inline\r\n-" .. BOUNDARY .. "\r" },
      { name = "small", filename = "s.txt", type = "text/plain", data = "tiny" },
      { name = "empty", data = "" },
      { name = "volumesConfig", data = '{"volumesConfig":[]}' },
    }
    local BODY = multipart(PARTS)

    it("decodes a string as before: fields, and files with data and size", function()
      local fields, files = forms.decode_multipart(BODY, CTYPE)
      assert.same({ username = "siteadmin", empty = "", volumesConfig = '{"volumesConfig":[]}' }, fields)
      assert.same({ filename = "license.prvc", type = "application/json", data = PARTS[2].data,
                    size = #PARTS[2].data }, files.licenseFile)
      assert.same({ filename = "s.txt", type = "text/plain", data = "tiny", size = 4 }, files.small)
    end)

    it("decodes a spooled file identically at every chunk size; large parts go to their own file", function()
      local path = tmp_path()
      spit(path, BODY)
      finally(function() os.remove(path) end)
      for chunk = 1, 80 do
        local fields, files = forms.decode_multipart({ path = path, size = #BODY }, CTYPE,
          { chunk = chunk, part_threshold = 10, tmpfile = tmpfile })
        assert.is_table(fields, files)
        assert.same({ username = "siteadmin", empty = "", volumesConfig = '{"volumesConfig":[]}' }, fields)
        local lic = files.licenseFile
        assert.is_nil(lic.data, "chunk " .. chunk)
        assert.equal(#PARTS[2].data, lic.size)
        assert.equal("license.prvc", lic.filename)
        assert.equal("application/json", lic.type)
        assert.equal(PARTS[2].data, slurp(lic.path))
        assert.same({ filename = "s.txt", type = "text/plain", data = "tiny", size = 4 }, files.small)
      end
    end)

    it("reports the same errors from a file as from a string", function()
      local cases = {
        { BODY:sub(1, #BODY - 30), "truncated multipart body" },
        { "no boundary here", "multipart body without its first boundary" },
        { "--" .. BOUNDARY .. "xx", "malformed multipart boundary line" },
        { "--" .. BOUNDARY .. "\r\nContent-Disposition: form-data; name=\"a\"\r\nno blank line",
          "multipart part without a blank line after its headers" },
        { "--" .. BOUNDARY .. "\r\nContent-Type: text/plain\r\n\r\nx\r\n--" .. BOUNDARY .. "--",
          "multipart part without a name" },
      }
      for _, case in ipairs(cases) do
        local path = tmp_path()
        spit(path, case[1])
        for _, chunk in ipairs{ 1, 3, 7, 64, 1024 } do
          local ok, err = forms.decode_multipart({ path = path, size = #case[1] }, CTYPE,
            { chunk = chunk, part_threshold = 4, tmpfile = tmpfile })
          assert.is_nil(ok)
          assert.equal(case[2], err)
          ok, err = forms.decode_multipart(case[1], CTYPE)
          assert.is_nil(ok)
          assert.equal(case[2], err)
        end
        os.remove(path)
      end
      local ok, err = forms.decode_multipart(BODY, "multipart/form-data")
      assert.is_nil(ok)
      assert.equal("multipart body without a boundary", err)
    end)

    it("streams a 5 MiB file part to its own file (default threshold 1 MiB)", function()
      local data = string.rep("\0\1\2\3\r\n--", 5 * 1024 * 1024 // 8)
      local body = multipart{ { name = "f", data = "v" }, { name = "licenseFile", filename = "big.bin", data = data } }
      local path = tmp_path()
      spit(path, body)
      finally(function() os.remove(path) end)
      local fields, files = forms.decode_multipart({ path = path, size = #body }, CTYPE, { tmpfile = tmpfile })
      assert.same({ f = "v" }, fields)
      assert.equal(#data, files.licenseFile.size)
      assert.is_nil(files.licenseFile.data)
      assert.is_true(slurp(files.licenseFile.path) == data)
    end)
  end)
end)
