-- The .qgz archive of a project a user saved in QGIS, read to add the
-- aliases of fields the server added (geoservices.store.qgis.qgz): deflated
-- entries of every block kind read back byte for byte, the other entries
-- written back as they were, a damaged archive refused in words, never raised.
local helper = require "spec.helper"
local qgz = require "geoservices.store.qgis.qgz"

local q = helper.shell_quote
local run = helper.run_shell

-- a zip made by Python's zlib: a long text (dynamic codes), random bytes
-- (stored blocks inside the deflate stream), a short text (fixed codes), one entry stored
local MAKE = [==[
import random, sys, zipfile
random.seed(7)
text = "".join('<maplayer id="%d"><alias field="F%d" name="é"/></maplayer>\n' % (i, i % 37) for i in range(3000))
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("p.qgs", text)
    z.writestr("p.qgd", bytes(random.getrandbits(8) for _ in range(70000)))
    z.writestr("short.txt", "hello hello hello")
    z.writestr("plain.txt", "as it is", compress_type=zipfile.ZIP_STORED)
for name in ("p.qgs", "p.qgd", "short.txt", "plain.txt"):
    open(sys.argv[1] + "." + name, "wb").write(zipfile.ZipFile(sys.argv[1]).read(name))
]==]

local CHECK = [==[
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
assert z.testzip() is None
print("ENTRIES " + " ".join("%s:%d:%d" % (i.filename, i.compress_type, i.file_size) for i in z.infolist()))
print("QGS " + z.read("p.qgs").decode("utf-8")[-30:].replace("\n", "|"))
]==]

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

describe("a project's .qgz", function()
  local dir
  setup(function() dir = helper.tmp_dir() end)
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  it("reads deflated entries of every block kind, and writes back the others' bytes as they were", function()
    local path = dir .. "/p.qgz"
    local out, ok = run(("%s -c %s %s"):format(helper.PYTHON, q(MAKE), q(path)))
    assert(ok, out)
    local entries = assert(qgz.entries(read(path)))
    assert.equal(4, #entries)
    for _, e in ipairs(entries) do assert.equal(read(path .. "." .. e.name), assert(qgz.content(e)), e.name) end
    assert.same({ 8, 8, 8, 0 }, { entries[1].method, entries[2].method, entries[3].method, entries[4].method })
    entries[1] = qgz.stored("p.qgs", assert(qgz.content(entries[1])) .. "<!-- added -->\n", entries[1])
    local f = assert(io.open(dir .. "/again.qgz", "wb"))
    f:write(qgz.zip(entries))
    f:close()
    out, ok = run(("%s -c %s %s"):format(helper.PYTHON, q(CHECK), q(dir .. "/again.qgz")))
    assert(ok, out)
    assert.truthy(out:find("ENTRIES p.qgs:0:" .. (#read(path .. ".p.qgs") + 15) .. " p.qgd:8:70000 short.txt:8:17 "
      .. "plain.txt:0:8", 1, true), out)
    assert.truthy(out:find("<!-- added -->|", 1, true), out)
  end)

  it("refuses a damaged archive or entry in words", function()
    local path = dir .. "/p.qgz"
    local zip = read(path)
    local entries = assert(qgz.entries(zip))
    assert.same({ nil, "not a zip archive (no end of its central directory)" }, { qgz.entries(zip:sub(1, -30)) })
    local e = entries[1]
    e.raw = e.raw:sub(1, #e.raw // 2)
    local data, why = qgz.content(e)
    assert.is_nil(data)
    assert.truthy(why:find("^p%.qgs: "), why)
    e.raw = ("\255"):rep(64)
    data, why = qgz.content(e)
    assert.is_nil(data)
    assert.truthy(why:find("^p%.qgs: "), why)
  end)
end)
