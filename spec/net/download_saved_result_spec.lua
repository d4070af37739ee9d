-- Issue 35: a result file that is saved, not parsed (dataFormat = sqlite:
-- a geodatabase), is kept only when every byte of it came. The JSON parser
-- cannot notice a missing piece there, so the download itself must: a Range
-- chunk shorter than its Content-Range, and a body shorter than its
-- Content-Length, are retried as reads, and when they never come whole the
-- sync fails with the replica's generation unmoved and no output file.
-- `download_chunk = false` is one plain GET, as documented.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local REPLICA = "{5E1A0C2B-1111-4A5B-9C8D-0000000000AA}"
local SIZE = 65536
local CHUNK = 10000

describe("a saved (sqlite) result file", function()
  local serve, stop_all = helper.scripted_servers()
  after_each(stop_all)

  local dir, blob_path, blob
  setup(function()
    dir = helper.tmp_dir()
    -- a geodatabase's bytes: no JSON parser can tell a piece is missing
    local parts = {}
    for i = 1, SIZE // 16 do parts[i] = ("SQLite%08d\0\0"):format(i) end
    blob = table.concat(parts)
    assert.equal(SIZE, #blob)
    blob_path = dir .. "/result.geodatabase"
    helper.write_file(blob_path, blob)
  end)
  teardown(function() os.execute("rm -rf " .. helper.shell_quote(dir)) end)

  -- a server whose sync answers with a result URL (generation 1 -> 5) and serves the file with `answers`
  local function server(answers)
    for _, a in ipairs(answers) do
      a.file, a.headers = blob_path, { ["Content-Type"] = "application/octet-stream" }
      if a.ranges == nil then a.ranges = true end
    end
    return serve{
      { method = "POST", path = "/server/Parcels/FeatureServer/synchronizeReplica", responses = { { json = {
        replicaID = REPLICA, replicaServerGen = 5, transportType = "esriTransportTypeUrl",
        responseType = "esriReplicaResponseTypeData", resultUrl = "{ROOT}/files/result.geodatabase" } } } },
      { method = "GET", path = "/files/result.geodatabase", responses = answers },
    }
  end

  local n = 0
  local function state_file()
    n = n + 1
    local path = ("%s/state-%d.json"):format(dir, n)
    helper.write_file(path, json.encode{ service = "Parcels", replicaID = REPLICA, model = "perReplica",
                                         replicaServerGen = 1 })
    return path
  end

  local function run(s, chunk)
    local state, output = state_file(), ("%s/out-%d.geodatabase"):format(dir, n + 1)
    local before = helper.read_all(state)
    local c = geoservices.client{ url = s.url, token = "crew-token", download_chunk = chunk,
                                  retry = { base_delay = 0.01, max_delay = 0.02 } }
    local result, err = c:sync(state, nil, { output = output, params = { dataFormat = "sqlite",
                                                                         transportType = "url" } })
    c:close()
    local gets = {}
    for _, r in ipairs(s:requests()) do
      if r.method == "GET" then gets[#gets + 1] = r.headers.Range or "whole" end
    end
    return { result = result, err = err, gets = gets, state_before = before, state = helper.read_all(state),
             output = helper.read_all(output) }
  end

  local function saved_whole(o)
    assert.is_not_nil(o.result, o.err and tostring(o.err))
    assert.equal(SIZE, #o.output)
    assert.is_true(o.output == blob, "the saved file is the server's, byte for byte")
    assert.equal(5, json.decode(o.state).replicaServerGen)
  end

  local function kept_nothing(o)
    assert.is_nil(o.result)
    assert.is_nil(o.output, "no output file")
    assert.equal(o.state_before, o.state, "the replica's generation did not move")
    assert.is_nil(o.err.message:find("outcome is unknown", 1, true)) -- no edits went: a read, retried
  end

  it("download_chunk = false is one plain GET", function()
    local o = run(server{ { ranges = false } }, false)
    saved_whole(o)
    assert.same({ "whole" }, o.gets)
  end)

  it("comes in Range chunks, each counted from what was saved", function()
    local o = run(server{ {} }, CHUNK)
    saved_whole(o)
    assert.equal(math.ceil(SIZE / CHUNK), #o.gets)
    assert.equal("bytes=0-9999", o.gets[1])
    assert.equal("bytes=60000-69999", o.gets[#o.gets])
  end)

  it("a chunk shorter than its Content-Range is resumed where it stopped", function()
    local o = run(server{ {}, { cut_range = 1000 }, {} }, CHUNK)
    saved_whole(o)
    assert.equal("bytes=10000-19999", o.gets[2])
    assert.equal("bytes=19000-28999", o.gets[3])
  end)

  it("chunks shorter than their Content-Range, always: an error, generation unmoved, nothing kept", function()
    local o = run(server{ {}, { cut_range = 1000 } }, CHUNK)
    kept_nothing(o)
    assert.equal("protocol", o.err.kind)
    assert.matches("not complete", o.err.message)
    assert.equal(4, #o.gets) -- the first chunk, then three tries of the second
  end)

  it("a body shorter than its Content-Length is asked again", function()
    local o = run(server{ { ranges = false, cut = 5000 }, { ranges = false } }, false)
    saved_whole(o)
    assert.same({ "whole", "whole" }, o.gets)
  end)

  it("bodies shorter than their Content-Length, always: an error, generation unmoved, nothing kept", function()
    local o = run(server{ { ranges = false, cut = 5000 } }, false)
    kept_nothing(o)
    assert.equal(3, #o.gets)
  end)

  it("a resumed chunk answered with the whole file (200): saved once, byte for byte", function()
    local o = run(server{ {}, { cut_range = 1000 }, { ranges = false } }, CHUNK)
    saved_whole(o)
    assert.same({ "bytes=0-9999", "bytes=10000-19999", "bytes=19000-28999" }, o.gets)
  end)

  it("a chunk cut short by the connection is resumed where it stopped", function()
    local o = run(server{ {}, { cut = 4000 }, {} }, CHUNK)
    saved_whole(o)
    assert.equal("bytes=10000-19999", o.gets[2])
    assert.equal("bytes=16000-25999", o.gets[3])
  end)
end)
