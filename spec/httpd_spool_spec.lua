-- geoservices.httpd: request bodies above spool_threshold are spooled to a temporary
-- file (body_path, body_size) removed when the request ends; the body limit (max_body)
-- answers 413; exchange temp files (ex:tmpfile) go with the request.
-- The client is the curl command line, started in the background with its
-- output, exit code and pid in temp files, while the test drives srv:step().
local httpd = require "geoservices.httpd"

local WAIT = 15 -- seconds any single wait may take before the test fails

local tmpdir
local jobs = {} -- curl jobs started by the current test

local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function spit(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

local function shq(s)
  return "'" .. tostring(s):gsub("'", [['\'']]) .. "'"
end

-- Starts `curl args...` in the background; returns a job table whose files
-- receive the body (out), -w text (info), response headers (hdr), exit code.
local function curl(args)
  local id = #jobs + 1
  local base = ("%s/job%d"):format(tmpdir, id)
  local job = { out = base .. ".out", info = base .. ".info", hdr = base .. ".hdr",
                done = base .. ".done", pidfile = base .. ".pid" }
  -- env -u: under `make asan` LD_PRELOAD carries libasan, and curl hangs with it
  local parts = { "env", "-u", "LD_PRELOAD", "curl", "-s", "--max-time", "20",
                  "-D", shq(job.hdr), "-o", shq(job.out) }
  for _, a in ipairs(args) do parts[#parts + 1] = shq(a) end
  local cmd = ("(%s > %s 2>/dev/null & echo $! > %s; wait $!; echo $? > %s.tmp; mv %s.tmp %s) &")
    :format(table.concat(parts, " "), shq(job.info), shq(job.pidfile), shq(job.done),
            shq(job.done), shq(job.done))
  assert(os.execute(cmd))
  jobs[id] = job
  return job
end

local function finished(job)
  local s = slurp(job.done)
  if s and s:match("%d") then
    job.code = tonumber(s:match("%d+"))
    return true
  end
  return false
end

-- Steps srv until pred() is true; every exchange is passed to on_ex.
local function run_until(srv, pred, on_ex)
  local deadline = os.time() + WAIT
  while not pred() do
    if os.time() > deadline then error("timed out waiting", 2) end
    for _, ex in ipairs(srv:step(20)) do
      if on_ex then on_ex(ex) else error("unexpected exchange " .. ex.path) end
    end
  end
end

-- Collects n exchanges (without answering them).
local function collect(srv, n)
  local got = {}
  run_until(srv, function() return #got >= n end, function(ex) got[#got + 1] = ex end)
  return got
end

local function wait_job(srv, job, on_ex)
  run_until(srv, function() return finished(job) end, on_ex)
  return job.code
end

local function url(srv, path)
  return ("http://127.0.0.1:%d%s"):format(srv:port(), path)
end


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
    tmpdir = os.tmpname()
    os.remove(tmpdir)
    assert(os.execute("mkdir -p " .. shq(tmpdir .. "/spool")))
    jobs = {}
    srv = assert(httpd.listen { host = "127.0.0.1", port = 0, spool_threshold = 4096, tmpdir = tmpdir .. "/spool" })
  end)

  after_each(function()
    for _, job in ipairs(jobs) do
      local pid = slurp(job.pidfile)
      if pid and pid:match("^%d+") and not finished(job) then
        os.execute("kill " .. pid:match("^%d+") .. " 2>/dev/null")
      end
    end
    if srv then srv:close() end
    os.execute("rm -rf " .. shq(tmpdir))
  end)

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
