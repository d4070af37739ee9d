-- geoservices.httpd: request bodies above spool_threshold are spooled to a temporary
-- file (body_path, body_size) removed when the request ends; the body limit (max_body)
-- answers 413; exchange temp files (ex:tmpfile) go with the request.
-- The client is the curl command line, started in the background with its
-- output, exit code and pid in temp files, while the test drives srv:step().
local httpd = require "geoservices.httpd"

local harness = require "spec.support.curl_harness"

local slurp, spit, shq, curl, finished = harness.slurp, harness.spit, harness.shq, harness.curl, harness.finished
local run_until, collect, wait_job, url = harness.run_until, harness.collect, harness.wait_job, harness.url
local WAIT = harness.WAIT
local tmpdir


local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function file_mode(path)
  local p = io.popen("stat -c %a " .. shq(path))
  local mode = p:read("l")
  p:close()
  return mode
end

local function bytes(n)
  local chunk = {}
  for i = 0, 255 do chunk[#chunk + 1] = string.char(i) end
  local s = string.rep(table.concat(chunk), n // 256 + 1)
  return s:sub(1, n)
end

describe("geoservices.httpd request bodies", function()
  local srv

  before_each(function()
    tmpdir = harness.begin("spool")
    srv = assert(httpd.listen { host = "127.0.0.1", port = 0, spool_threshold = 4096, tmpdir = tmpdir .. "/spool" })
  end)

  after_each(function() harness.finish(srv) end)

  local function spool_files()
    local p = io.popen("ls -A " .. shq(tmpdir .. "/spool"))
    local names = {}
    for line in p:lines() do names[#names + 1] = line end
    p:close()
    return names
  end

  it("keeps a body up to spool_threshold in memory", function()
    local data = bytes(4096)
    spit(tmpdir .. "/b", data)
    local job = curl { "--data-binary", "@" .. tmpdir .. "/b", url(srv, "/small") }
    local ex = collect(srv, 1)[1]
    assert.is_true(ex.body == data)
    assert.equal(4096, ex.body_size)
    assert.is_nil(ex.body_path)
    assert.same({}, spool_files())
    ex:respond { body = "ok" }
    assert.equal(0, wait_job(srv, job))
  end)

  for _, chunked in ipairs { false, true } do
    it(("spools a larger body to a private file removed when the request ends (%s)")
      :format(chunked and "chunked" or "Content-Length"), function()
      local data = bytes(300000)
      spit(tmpdir .. "/b", data)
      local args = { "--data-binary", "@" .. tmpdir .. "/b", url(srv, "/big") }
      if chunked then table.insert(args, 1, "Transfer-Encoding: chunked"); table.insert(args, 1, "-H") end
      local job = curl(args)
      local ex = collect(srv, 1)[1]
      assert.is_nil(ex.body)
      assert.equal(300000, ex.body_size)
      assert.is_string(ex.body_path)
      assert.equal(tmpdir .. "/spool/", ex.body_path:sub(1, #tmpdir + 7))
      assert.is_true(slurp(ex.body_path) == data)
      assert.equal("600", file_mode(ex.body_path))
      assert.equal(ex.body_path, ex:request().body_path)
      ex:respond { body = "stored" }
      assert.equal(0, wait_job(srv, job))
      assert.equal("stored", slurp(job.out))
      run_until(srv, function() return not exists(ex.body_path) end)
      assert.same({}, spool_files())
    end)
  end

  it("removes the spooled body of a dropped exchange and of a closed server", function()
    spit(tmpdir .. "/b", bytes(10000))
    local a = curl { "--data-binary", "@" .. tmpdir .. "/b", url(srv, "/a") }
    local ex = collect(srv, 1)[1]
    local path = ex.body_path
    assert.is_true(exists(path))
    ex:close()
    assert.equal(52, wait_job(srv, a))
    run_until(srv, function() return not exists(path) end)
    local b = curl { "--data-binary", "@" .. tmpdir .. "/b", url(srv, "/b") }
    local ex2 = collect(srv, 1)[1]
    assert.is_true(exists(ex2.body_path))
    srv:close()
    assert.is_false(exists(ex2.body_path))
    local deadline = os.time() + WAIT
    while not finished(b) do
      assert.is_true(os.time() <= deadline)
      os.execute("sleep 0.05")
    end
    assert.same({}, spool_files())
  end)

  it("ex:tmpfile() gives private files that go with the request", function()
    local job = curl { url(srv, "/t") }
    local ex = collect(srv, 1)[1]
    local p1, p2 = assert(ex:tmpfile()), assert(ex:tmpfile())
    assert.not_equal(p1, p2)
    assert.equal(tmpdir .. "/spool/", p1:sub(1, #tmpdir + 7))
    assert.equal("600", file_mode(p1))
    spit(p1, "part")
    ex:respond { body = "ok" }
    assert.has_error(function() ex:tmpfile() end, "exchange already answered")
    assert.equal(0, wait_job(srv, job))
    run_until(srv, function() return not exists(p1) and not exists(p2) end)
  end)

  it("answers 413 past max_body, spooled or not, and leaves no file", function()
    local small = assert(httpd.listen { max_body = 50000, spool_threshold = 1000, tmpdir = tmpdir .. "/spool" })
    spit(tmpdir .. "/b", bytes(60000))
    for _, chunked in ipairs { false, true } do
      local args = { "-w", "%{http_code}", "--data-binary", "@" .. tmpdir .. "/b", url(small, "/u") }
      if chunked then table.insert(args, 1, "Transfer-Encoding: chunked"); table.insert(args, 1, "-H") end
      local job = curl(args)
      assert.equal(0, wait_job(small, job))
      assert.equal("413", slurp(job.info))
    end
    assert.same({}, spool_files())
    small:close()
  end)

  it("raises on bad spool arguments", function()
    assert.has_error(function() httpd.listen { spool_threshold = -1 } end)
    assert.has_error(function() httpd.listen { tmpdir = 5 } end)
  end)

  it("answers 500 when the spool directory is unusable, and keeps serving", function()
    local bad = assert(httpd.listen { spool_threshold = 100, tmpdir = tmpdir .. "/missing" })
    spit(tmpdir .. "/b", bytes(1000))
    local job = curl { "-w", "%{http_code}", "--data-binary", "@" .. tmpdir .. "/b", url(bad, "/u") }
    assert.equal(0, wait_job(bad, job))
    assert.equal("500", slurp(job.info))
    local ok = curl { "-w", "%{http_code}", "--data", "x=1", url(bad, "/v") }
    collect(bad, 1)[1]:respond { status = 204 }
    assert.equal(0, wait_job(bad, ok))
    assert.equal("204", slurp(ok.info))
    bad:close()
  end)
end)
