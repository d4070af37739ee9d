-- Streaming a synchronization result record by record (the C core's record
-- extractor), on_change, and exactness on the wire.
local core = require "geoservices.core"
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local DOC = [[{"transportType":"svcTransportTypeEmbedded","replicaServerGen":12,
"layerServerGens":[{"id":0,"serverGen":9007199254740993}],
"edits":[{"id":0,"features":{"adds":[{"attributes":{"OBJECTID":1,"GlobalID":"{A}","N":"Z\u00fcrich \uD83D\uDE00",
"WHEN":1700000000123,"X":null},"geometry":{"x":-117.19584274291992,"y":34.056789012345678}}],
"updates":[],"deleteIds":["{B}"],"addResults":[{"globalId":"{A}","success":false,
"error":{"code":-2147217395,"description":"exists"}}]},"attachments":{"adds":[{"globalId":"{AT}"}]}},
{"features":{"updates":[{"attributes":{"OBJECTID":2}}]},"id":5}],"tail":true}]]

-- Threads of this process now (Linux): the worker shows as a second one.
local function threads()
  local f = assert(io.open("/proc/self/status"))
  local n = tonumber(f:read("a"):match("Threads:%s*(%d+)"))
  f:close()
  return n
end

local function collect(doc, step, opts, seen)
  local rec = core.records(opts)
  local out = {}
  local function take(kind, layer, value, key)
    out[#out + 1] = { kind = kind, layer = layer, value = value, key = key }
    if seen and #out % 5000 == 0 then seen.threads = math.max(seen.threads or 0, threads()) end
  end
  for i = 1, #doc, step do
    assert(rec:feed(doc:sub(i, i + step - 1)))
    rec:drain(take)
  end
  assert(rec:finish())
  rec:drain(take)
  return out
end

describe("record extractor", function()
  it("delivers fields, layer entries and records of every kind in document order", function()
    local out = collect(DOC, #DOC)
    local kinds = {}
    for i, r in ipairs(out) do
      kinds[i] = r.kind .. (r.layer and (":" .. r.layer) or "") .. (r.key and ("=" .. r.key) or "")
    end
    assert.same({ "field=transportType", "field=replicaServerGen", "field=layerServerGens", "layer:0", "add:0",
                  "delete:0", "add_result:0", "add_attachment:0", "layer:5", "update:5", "field=tail" }, kinds)
  end)

  it("counts without values (values = false): the same records, nil values, an id-last layer waiting as runs",
    function()
    local function kinds_of(out)
      local kinds = {}
      for i, r in ipairs(out) do
        kinds[i] = r.kind .. (r.layer and (":" .. r.layer) or "") .. (r.key and ("=" .. r.key) or "")
      end
      return kinds
    end
    -- a createReplica result whose second layer writes its id after 3000 features
    local features = {}
    for i = 1, 3000 do features[i] = ('{"attributes":{"OBJECTID":%d},"geometry":{"x":%d,"y":1}}'):format(i, i) end
    local doc = '{"replicaServerGen":4,"layers":[{"id":0,"features":[' .. features[1] .. '],"attachments":[]},'
      .. '{"features":[' .. table.concat(features, ",") .. '],"attachments":[{"globalId":"{AT}"}],"id":7}],'
      .. '"replicaID":"{R}"}'
    local with, without = collect(doc, 997), collect(doc, 997, { values = false })
    assert.same(kinds_of(with), kinds_of(without))
    assert.equal(2 + 2 + 1 + 3000 + 1, #with) -- 2 fields, 2 layers, 1 + 3000 adds, 1 attachment
    for _, r in ipairs(without) do
      if r.kind == "field" then assert.is_not_nil(r.value) else assert.is_nil(r.value, r.kind) end
    end
    assert.equal(4, without[1].value)
    assert.equal("{R}", without[#without].value)
    -- what waits for id 7 is no table per feature: one run of adds (and one of attachments)
    for _, opts in ipairs{ { values = false }, {} } do
      local rec = core.records(opts)
      assert(rec:feed(doc:sub(1, #doc - 30)))
      rec:drain(function() end)
      local want = opts.values == false and 1 or 3000
      assert.equal(want, rec:waiting())
    end
  end)

  it("keeps integers as integers and doubles exact, and decodes surrogate pairs", function()
    local out = collect(DOC, #DOC)
    local add = out[5].value
    assert.equal("integer", math.type(add.attributes.OBJECTID))
    assert.equal(1700000000123, add.attributes.WHEN)
    assert.equal("integer", math.type(add.attributes.WHEN))
    assert.equal(-117.19584274291992, add.geometry.x)
    assert.equal(34.056789012345678, add.geometry.y)
    assert.equal("Zürich \xF0\x9F\x98\x80", add.attributes.N)
    assert.equal(json.null, add.attributes.X)
    assert.equal(9007199254740993, out[3].value[1].serverGen)
    assert.equal(-2147217395, out[7].value.error.code)
    assert.equal("integer", math.type(out[7].value.error.code))
  end)

  it("gives the same records for every split of the document", function()
    local expected = json.encode(collect(DOC, #DOC))
    for step = 1, 64 do
      assert.equal(expected, json.encode(collect(DOC, step)), "step " .. step)
      -- parsed on a worker thread from the second piece on
      assert.equal(expected, json.encode(collect(DOC, step, { worker_after = 1 })), "worker, step " .. step)
    end
  end)

  -- A large document is parsed on a worker thread while the caller builds
  -- tables (core.records{worker_after =}): the same records, the same errors.
  local function big_doc(n, tail)
    local items = {}
    for i = 1, n do
      items[i] = ('{"attributes":{"OBJECTID":%d,"GlobalID":"{%08d-0000-4000-8000-000000000000}","N":"Z\\u00fcrich",'
        .. '"V":%d.25},"geometry":{"x":-117.%d,"y":34.5}}'):format(i, i, i, i)
    end
    return '{"replicaServerGen":7,"edits":[{"id":3,"features":{"adds":[' .. table.concat(items, ",") .. "]"
      .. (tail or "") .. "}}]}"
  end

  it("parses a large document on a worker thread into the same records, in order", function()
    local doc = big_doc(20000) -- 2.3 MB: past the default threshold
    local expected = collect(doc, #doc, { worker_after = false }) -- one feed, this thread
    for _, opts in ipairs{ {}, { worker_after = 1 }, { worker_after = 1000000 } } do
      local seen = {}
      local out = collect(doc, 65536, opts, seen)
      assert.equal(2, seen.threads) -- this one and the worker
      assert.equal(#expected, #out)
      assert.equal(20000 + 2, #out) -- the adds, the layer, the gen field
      for i = 1, #out, 997 do assert.same(expected[i], out[i]) end
      assert.same(expected[#out], out[#out])
    end
  end)

  it("reports a parse error found on the worker with the message and offset of this thread's", function()
    local doc = big_doc(20000, ',"x":[1,2,}')
    local function fail_with(opts)
      local rec = core.records(opts)
      local delivered, ok, msg, offset = 0, true, nil, nil
      local function count(kind) if kind == "add" then delivered = delivered + 1 end end
      for i = 1, #doc, 65536 do
        ok, msg, offset = rec:feed(doc:sub(i, i + 65535))
        if not ok then break end
        rec:drain(count)
      end
      if ok then ok, msg, offset = rec:finish() end
      rec:drain(count)
      rec:close()
      return ok, msg, offset, delivered
    end
    local ok1, msg1, off1, n1 = fail_with{ worker_after = false }
    local ok2, msg2, off2, n2 = fail_with{ worker_after = 1 }
    assert.is_nil(ok1)
    assert.is_nil(ok2)
    assert.equal(msg1, msg2)
    assert.equal(off1, off2)
    assert.equal(doc:find(",}", 1, true) + 1, off1)
    assert.equal(20000, n1)
    assert.equal(20000, n2) -- every record before the error still arrives
  end)

  -- a new file holding text; its path
  local function write(text)
    local path = helper.tmp_name()
    helper.write_file(path, text)
    return path
  end

  describe("read(file)", function()
    -- the records of a file read with read(file, bytes), and the last read's results
    local function read_all(path, opts, bytes)
      local rec = core.records(opts)
      local out, reads = {}, 0
      local function take(kind, layer, value, key) out[#out + 1] = { kind, layer, value, key } end
      local f = assert(io.open(path, "rb"))
      local n, msg, offset
      repeat
        n, msg, offset = rec:read(f, bytes)
        reads = reads + 1
        rec:drain(take)
      until not n or n == 0
      f:close()
      if n then n, msg, offset = rec:finish() end
      rec:drain(take)
      rec:close()
      return out, n, msg, offset, reads
    end

    it("gives the records feed gives, on this thread and on the worker, in any read size", function()
      local doc = big_doc(20000)
      local path = write(doc)
      local expected = collect(doc, #doc, { worker_after = false })
      for _, case in ipairs{ { { worker_after = false }, nil }, { {}, nil }, { { worker_after = 1 }, 7 },
                             { {}, 1 << 20 } } do
        local out, ok, _, _, reads = read_all(path, case[1], case[2])
        assert.is_true(ok)
        assert.equal(#expected, #out)
        for i = 1, #out, 997 do
          assert.same({ expected[i].kind, expected[i].layer, expected[i].value, expected[i].key }, out[i])
        end
        if case[2] == 7 then assert.is_true(reads > #doc / 7) end -- it never reads more than asked
      end
    end)

    it("returns 0 at the end of the file and reports a JSON error with feed's message and offset", function()
      local doc = big_doc(20000, ',"x":[1,2,}')
      local path = write(doc)
      local rec = core.records{ worker_after = false }
      local ok, msg, offset = rec:feed(doc)
      if ok then ok, msg, offset = rec:finish() end
      for _, opts in ipairs{ { worker_after = false }, { worker_after = 1 } } do
        local out, n, m, o = read_all(path, opts)
        assert.is_nil(n)
        assert.equal(msg, m)
        assert.equal(offset, o)
        assert.equal(20000 + 2, #out) -- the records before the error: the adds, the layer, the gen field
      end
      assert.is_nil(ok)
      local empty = write("")
      local f = assert(io.open(empty, "rb"))
      local r = core.records()
      assert.equal(0, r:read(f))
      f:close()
      assert.is_nil((r:finish())) -- an empty document is not a result
    end)

    it("refuses a closed file and a size below 1, and reports a file it cannot read", function()
      local rec = core.records()
      local f = assert(io.open(write("{}"), "rb"))
      assert.has_error(function() rec:read(f, 0) end, "bad argument #2 to 'read' (bytes must be at least 1)")
      assert.has_error(function() rec:read("{}") end)
      f:close()
      assert.has_error(function() rec:read(f) end, "bad argument #1 to 'read' (attempt to use a closed file)")
      local w = assert(io.open(helper.tmp_name(), "wb")) -- open for writing only: reading it fails
      local n, msg, offset = rec:read(w)
      w:close()
      assert.is_nil(n)
      assert.matches("^cannot read the file: .", msg)
      assert.is_nil(offset) -- not a JSON error: no offset
    end)
  end)

  describe("read_all(file, fn)", function()
    -- the records read_all delivers, then finish's and the last drain's; and read_all's results
    local function read_whole(path, opts, bytes)
      local rec = core.records(opts)
      local out = {}
      local function take(kind, layer, value, key) out[#out + 1] = { kind, layer, value, key } end
      local f = assert(io.open(path, "rb"))
      local n, msg, offset = rec:read_all(f, take, bytes)
      local during = #out
      f:close()
      if n then
        assert.equal(n, rec:fed())
        local ok, m, o = rec:finish()
        if not ok then n, msg, offset = ok, m, o end
      end
      rec:drain(take)
      rec:close()
      return out, n, msg, offset, during
    end

    it("gives the records feed gives, on the worker and on this thread, in any read size", function()
      local doc = big_doc(20000)
      local path = write(doc)
      local expected = collect(doc, #doc, { worker_after = false })
      for _, case in ipairs{ { {}, nil }, { { worker_after = false }, nil }, { {}, 61 },
                             { { worker_after = 1 }, 1 << 20 }, { { worker_after = false }, 1000 } } do
        local out, n, _, _, during = read_whole(path, case[1], case[2])
        assert.equal(#doc, n) -- every byte of the file was read and fed
        assert.equal(#expected, #out)
        assert.is_true(during >= #expected - 1) -- all but what the end completes came while reading
        for i = 1, #out, 997 do
          assert.same({ expected[i].kind, expected[i].layer, expected[i].value, expected[i].key }, out[i])
        end
      end
    end)

    it("continues a document begun with feed, and one split across two files", function()
      local doc = big_doc(20000)
      local expected = #collect(doc, #doc, { worker_after = false })
      for _, cut in ipairs{ 1000, 300000 } do -- before and after the worker took over the feeds
        local head, tail = doc:sub(1, cut), write(doc:sub(cut + 1))
        for _, first_file in ipairs{ false, true } do
          local rec, n = core.records(), 0
          local function take() n = n + 1 end
          if first_file then
            local f = assert(io.open(write(head), "rb"))
            assert.equal(cut, rec:read_all(f, take))
            f:close()
          else
            assert(rec:feed(head))
          end
          local f = assert(io.open(tail, "rb"))
          assert.equal(#doc - cut, rec:read_all(f, take))
          f:close()
          assert(rec:finish())
          rec:drain(take)
          assert.equal(#doc, rec:fed())
          assert.equal(expected, n)
          rec:close()
        end
      end
    end)

    it("reports a JSON error with feed's message and offset, after the records before it", function()
      local doc = big_doc(20000, ',"x":[1,2,}')
      local path = write(doc)
      local rec = core.records{ worker_after = false }
      local ok, msg, offset = rec:feed(doc)
      if ok then ok, msg, offset = rec:finish() end
      assert.is_nil(ok)
      for _, opts in ipairs{ {}, { worker_after = false } } do
        local out, n, m, o = read_whole(path, opts)
        assert.is_nil(n)
        assert.equal(msg, m)
        assert.equal(offset, o)
        assert.equal(20000 + 2, #out) -- the adds, the layer, the gen field
      end
    end)

    it("reports a file it cannot read, and refuses bad arguments", function()
      for _, opts in ipairs{ {}, { worker_after = false } } do
        local rec = core.records(opts)
        local w = assert(io.open(helper.tmp_name(), "wb")) -- open for writing only: reading it fails
        local n, msg, offset = rec:read_all(w, function() end)
        w:close()
        assert.is_nil(n)
        assert.matches("^cannot read the file: .", msg)
        assert.is_nil(offset)
      end
      local rec = core.records()
      local f = assert(io.open(write("{}"), "rb"))
      assert.has_error(function() rec:read_all(f) end)
      assert.has_error(function() rec:read_all(f, print, 0) end,
        "bad argument #3 to 'read_all' (bytes must be at least 1)")
      f:close()
      assert.has_error(function() rec:read_all(f, print) end,
        "bad argument #1 to 'read_all' (attempt to use a closed file)")
    end)

    it("passes fn's error on, and then no longer reads the file", function()
      local path = write(big_doc(20000))
      local rec = core.records()
      local f = assert(io.open(path, "rb"))
      local seen = 0
      local ok, err = pcall(rec.read_all, rec, f, function()
        seen = seen + 1
        if seen == 100 then error("stop here", 0) end
      end, 4096)
      assert.is_false(ok)
      assert.equal("stop here", err)
      local at = f:seek("cur")
      local t0 = core.monotonic()
      while core.monotonic() - t0 < 0.05 do end -- the worker would read on meanwhile
      assert.equal(at, f:seek("cur"))
      assert.is_true(at < 2 * 1024 * 1024) -- it stopped long before the end
      assert.is_true(rec:close() == nil) -- usable again: not left busy
      f:close()
    end)

    it("refuses to let fn use the Records it is called from", function()
      local path = write(big_doc(2000))
      for _, use in ipairs{ function(r) r:feed("{}") end, function(r) r:drain(print) end,
                            function(r) r:finish() end, function(r) r:close() end } do
        local rec = core.records()
        local f = assert(io.open(path, "rb"))
        local ok, err = pcall(rec.read_all, rec, f, function() use(rec) end)
        f:close()
        assert.is_false(ok)
        assert.matches("attempt to use a Records inside its own read_all", err, 1, true)
        rec:close()
      end
    end)
  end)

  it("refuses a worker_after below 1", function()
    assert.has_error(function() core.records{ worker_after = 0 } end)
  end)

  it("never mistakes one key for another of the same length (the replay's key cache)", function()
    -- keys of every length up to 45 that differ from a base key in one byte,
    -- at every position, all in one record and repeated in a second one
    local keys, members = {}, {}
    for len = 1, 45 do
      local base = ("k"):rep(len)
      for pos = 1, len do
        local key = base:sub(1, pos - 1) .. "x" .. base:sub(pos + 1)
        keys[#keys + 1] = key
        members[#members + 1] = ('"%s":%d'):format(key, #keys)
      end
      keys[#keys + 1] = base
      members[#members + 1] = ('"%s":%d'):format(base, #keys)
    end
    local object = "{" .. table.concat(members, ",") .. "}"
    local doc = '{"edits":[{"id":1,"features":{"adds":[' .. object .. "," .. object .. "]}}]}"
    local out = collect(doc, 4096)
    local seen = 0
    for _, r in ipairs(out) do
      if r.kind == "add" then
        seen = seen + 1
        for i, key in ipairs(keys) do assert.equal(i, r.value[key], key) end
        local n = 0
        for _ in pairs(r.value) do n = n + 1 end
        assert.equal(#keys, n)
      end
    end
    assert.equal(2, seen)
  end)

  it("reports invalid input with its byte offset, never a crash", function()
    local cases = {
      { '{"edits":[', "unexpected end of input" },
      { '{"a":"\\q"}', "invalid escape" },
      { '{"a":"\255"}', "invalid UTF-8" },
      { '{"edits":[{"id":0}}', "expected" },
      { '[1]', "must be a JSON object" },
    }
    for _, case in ipairs(cases) do
      local rec = core.records()
      local ok, msg, offset = rec:feed(case[1])
      if ok then ok, msg, offset = rec:finish() end
      assert.is_nil(ok, case[1])
      assert.matches("^invalid JSON at byte %d+: ", msg)
      assert.matches(case[2], msg, 1, true)
      assert.is_true(offset >= 1 and offset <= #case[1] + 1)
    end
  end)

  it("refuses a 1 GB string at the value size limit instead of holding it", function()
    local rec = core.records()
    assert(rec:feed('{"a":"'))
    local chunk = ("x"):rep(1024 * 1024)
    local fed, ok, msg = 0, true, nil
    while ok and fed < 1024 do
      ok, msg = rec:feed(chunk)
      fed = fed + 1
    end
    assert.is_nil(ok)
    assert.matches("value too large", msg)
    assert.is_true(fed < 100) -- stopped at the 64 MiB limit, long before 1 GB
    assert.is_true(rec:pending() < 1024 * 1024)
  end)

  it("is created closed-safe: double close, use after close", function()
    local rec = core.records()
    rec:close()
    rec:close()
    assert.has_error(function() rec:feed("{}") end, "attempt to use a closed Records")
  end)
end)

describe("streaming synchronization results", function()
  local emu
  local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
  local CREW2 = "{5E1A0C2B-2222-4A5B-9C8D-000000000002}"
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function() emu:reset() end)

  local function seed(client, n)
    local e = geoservices.edits()
    for i = 1, n do e:add(i % 2, { attributes = { APN = "s-" .. i } }) end
    assert(client:synchronize_replica("Parcels", { replicaID = CREW2, replicaServerGen = 1, edits = e }))
  end

  it("on_change receives every downloaded record and the result keeps counts, not edits", function()
    local client = geoservices.client{ url = emu.url }
    seed(client, 30)
    for _, transport in ipairs{ "embedded", "url" } do
      local seen = {}
      local r = assert(client:synchronize_replica("Parcels", { replicaID = CREW1, replicaServerGen = 1,
        transportType = transport }, { on_change = function(layer, kind, record)
          seen[#seen + 1] = { layer, kind, record.attributes.APN }
        end }))
      assert.equal(30, #seen, transport)
      assert.equal(30, r.downloaded)
      assert.is_nil(r.edits)
      assert.equal("add", seen[1][2])
      assert.equal("integer", math.type(r.replicaServerGen))
      emu:reset()
      seed(client, 30)
    end
  end)

  it("a truncated result file delivers records, then fails, and the state file does not move", function()
    local client = geoservices.client{ url = emu.url }
    seed(client, 200)
    local path = helper.tmp_name()
    local r = assert(geoservices.replica(path .. ".state", { service = "Parcels", replicaID = CREW1,
                                                           replicaServerGen = 1 }))
    local before = helper.read_all(r.path)
    emu:fault{ route = "results", kind = "truncate" }
    local delivered = 0
    local result, err = client:sync(r, nil, { params = { transportType = "url" },
      on_change = function() delivered = delivered + 1 end })
    assert.is_nil(result)
    assert.equal("protocol", err.kind)
    assert.is_true(delivered > 0 and delivered < 200, "delivered " .. delivered .. " " .. tostring(err))
    assert.equal(before, helper.read_all(r.path))
    os.remove(r.path)
    os.remove(path)
  end)
end)

describe("download progress", function()
  local emu
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)

  it("on_progress reports the bytes of a result file as they arrive, against its total", function()
    local client = geoservices.client{ url = emu.url }
    local e = geoservices.edits()
    for i = 1, 300 do e:add(0, { attributes = { APN = ("p-%d"):format(i), NOTE = ("x"):rep(200) } }) end
    assert(client:synchronize_replica("Parcels", { replicaID = "{5E1A0C2B-2222-4A5B-9C8D-000000000002}",
      replicaServerGen = 1, edits = e }))
    local calls, last = 0, nil
    local r = assert(client:synchronize_replica("Parcels", { replicaID = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}",
      replicaServerGen = 1, transportType = "url" }, { on_progress = function(received, total)
        calls = calls + 1
        if total then assert.is_true(received <= total) end
        last = { received, total }
      end }))
    assert.equal(300, r.downloaded)
    assert.is_true(calls >= 1)
    assert.equal(last[2], last[1]) -- the whole file arrived
    assert.is_true(last[2] > 300 * 200)
  end)
end)
