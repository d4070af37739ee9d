-- A download resumed with Range that the server answers 200 (the whole
-- file) instead of 206 (issue 30): the download starts again from byte 0,
-- the bytes already received are skipped as they arrive (never appended to
-- what was kept, never fed twice to the record extractor), and observers are
-- told so. Before, the 200 body was appended to the partial stream and the
-- sync failed with "trailing garbage" / "expected ','".
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local REPLICA = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local SYNC = "/server/Parcels/FeatureServer/synchronizeReplica"
local RESULT = "/results/r1.json"

-- A result file of `n` adds, as text.
local function result_file(n)
  local adds = {}
  for i = 1, n do
    adds[i] = { attributes = { GlobalID = ("{00000000-0000-4000-8000-%012d}"):format(i), NAME = "feature " .. i },
                geometry = { x = i, y = -i } }
  end
  return json.encode{ replicaID = REPLICA, replicaServerGen = 9, transportType = "svcTransportTypeUrl",
                      edits = { { id = 0, features = { adds = adds, updates = json.array(),
                                                       deleteIds = json.array() } } } }
end

-- The first `chunk` bytes as a 206, then the whole file as a 200.
local function ranged_then_whole(text, chunk)
  return {
    { status = 206, headers = { ["Content-Range"] = ("bytes 0-%d/%d"):format(chunk - 1, #text) },
      body = text:sub(1, chunk) },
    { status = 200, body = text },
  }
end

local function state_file(dir)
  local path = dir .. "/state.json"
  helper.write_file(path, json.encode{ service = "Parcels", replicaID = REPLICA, model = "perReplica",
                                       replicaServerGen = 5 })
  return path
end

describe("a resumed download answered with the whole file", function()
  local serve, stop_all = helper.scripted_servers()
  after_each(stop_all)

  local text = result_file(300)
  local CHUNK = 4096

  local function server()
    return serve{
      { method = "POST", path = SYNC, responses = { { json = {
        transportType = "svcTransportTypeUrl", responseType = "svcReplicaResponseTypeEdits",
        replicaID = REPLICA, replicaServerGen = 9, URL = "{ROOT}" .. RESULT } } } },
      { method = "GET", path = RESULT, responses = ranged_then_whole(text, CHUNK) },
    }
  end

  local function observed(client)
    local events = {}
    client:observe(function(e)
      if e.type == "restart" then events[#events + 1] = e end
    end)
    return events
  end

  local function assert_told(events)
    assert.equal(1, #events)
    local message = tostring(events[1].error)
    assert.truthy(message:find("HTTP 200", 1, true), message)
    assert.truthy(message:find(("from byte %d"):format(CHUNK), 1, true), message)
    assert.truthy(message:find("started again from byte 0 and skipped the bytes already received", 1, true), message)
  end

  it("held in memory: the whole file, once", function()
    local s = server()
    local c = geoservices.client{ url = s.url, token = "t", download_chunk = CHUNK }
    local events = observed(c)
    local body = assert(c:download(s.root .. RESULT))
    assert.equal(#text, #body)
    assert.equal(text, body)
    assert_told(events)
  end)

  it("streamed into a sync's records: every change once, no 'trailing garbage'", function()
    local s = server()
    local dir = helper.tmp_dir()
    local c = geoservices.client{ url = s.url, token = "t", download_chunk = CHUNK }
    local events = observed(c)
    local seen = {}
    local result = assert(c:sync(state_file(dir), nil, { on_change = function(_, kind, record)
      assert.equal("add", kind)
      seen[#seen + 1] = record.attributes.NAME
    end }))
    assert.equal(300, #seen)
    for i = 1, 300 do assert.equal("feature " .. i, seen[i]) end
    assert.equal(9, result.replicaServerGen)
    assert_told(events)
    os.execute("rm -rf " .. helper.shell_quote(dir))
  end)

  it("saved to a file (opts.output): the file is the whole file, once", function()
    local s = server()
    local dir = helper.tmp_dir()
    local c = geoservices.client{ url = s.url, token = "t", download_chunk = CHUNK }
    local events = observed(c)
    assert(c:sync(state_file(dir), nil, { output = dir .. "/changes.json" }))
    assert.equal(text, helper.read_all(dir .. "/changes.json"))
    assert_told(events)
    os.execute("rm -rf " .. helper.shell_quote(dir))
  end)

  it("a 200 shorter than the bytes already received is an error that says so", function()
    local s = serve{ { method = "GET", path = RESULT, responses = {
      ranged_then_whole(text, CHUNK)[1], { status = 200, body = text:sub(1, 100) } } } }
    local c = geoservices.client{ url = s.url, token = "t", download_chunk = CHUNK, retry = false }
    local _, err = c:download(s.root .. RESULT)
    assert.equal("protocol", err.kind)
    assert.truthy(err.message:find("HTTP 200", 1, true), err.message)
    assert.truthy(err.message:find("shorter", 1, true), err.message)
  end)
end)
