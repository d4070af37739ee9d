-- createReplica -> replica store parses the result once (issue 38, "one
-- path, one parse"): the Lua API (geoservices.store.create) and the CLI
-- (`geoservices replica create OUT.gpkg`) fill the store while the result
-- file downloads, instead of parsing it once to check it and again from the
-- saved file to fill the store. Counted, not timed: the bytes fed to the
-- process's record extractors (core.records_fed()) against the file's size.
-- The checks stay: a result file cut short, an error served with HTTP 200,
-- another replica's result are refused, and nothing is left at OUT nor
-- beside it but the create's journal (for a rerun).
local core = require "geoservices.core"
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local RECORDS = 5000
local BASE = "/server/Parcels/FeatureServer"
-- the replica spec/bench/generate_replica.lua writes in its results
local REPLICA = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local OTHER = "{5E1A0C2B-1111-4A5B-9C8D-0000000000FF}"
local CLI = 'local code = require("geoservices.cli").main(arg) '
  .. 'io.stderr:write("records_fed=", require("geoservices.core").records_fed(), "\\n") os.exit(code)'

local SERVICE = {
  currentVersion = 11.1, serviceDescription = "", syncEnabled = true, capabilities = "Query,Sync",
  spatialReference = { wkid = 4326, latestWkid = 4326 },
  syncCapabilities = { supportsAsync = true, supportsPerReplicaSync = true, supportsPerLayerSync = true,
                       supportsSyncModelNone = true, supportsRollbackOnFailure = true },
  layers = { { id = 0, name = "parcels_0", geometryType = "esriGeometryPoint" } }, tables = json.array(),
}

local function layer_doc()
  return { id = 0, name = "parcels_0", type = "Feature Layer", geometryType = "esriGeometryPoint",
           spatialReference = { wkid = 4326, latestWkid = 4326 }, objectIdField = "OBJECTID",
           globalIdField = "GlobalID", hasAttachments = false,
           fields = json.array(require("spec.bench.fields").replica()), relationships = json.array() }
end

describe("createReplica -> store parses the result once (issue 38)", function()
  local serve, stop_all = helper.scripted_servers()
  after_each(stop_all)
  local dir, result, size

  setup(function()
    dir = helper.tmp_dir()
    result = dir .. "/result.json"
    local out, ok = helper.run_shell(("LUA_PATH=%s LUA_CPATH=%s lua5.4 spec/bench/generate_replica.lua %d first %s")
      :format(q(package.path), q(package.cpath), RECORDS, q(result)))
    assert(ok, out)
    size = #helper.read_all(result)
  end)
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  -- a service whose synchronous createReplica names `replica_id` and serves `file` as its result;
  -- with `job`, an asynchronous one (createReplica's job: Pending, then Completed with the result)
  local function server(file, replica_id, file_response, job)
    if job then
      return serve{
        { path = BASE, responses = { { json = SERVICE } } },
        { path = BASE .. "/0", responses = { { json = layer_doc() } } },
        { path = BASE .. "/replicas", responses = { { json = json.array() } } },
        { path = BASE .. "/createReplica", responses = { { json = { statusUrl = "{ROOT}" .. BASE .. "/jobs/1" } } } },
        { path = BASE .. "/jobs/1", responses = {
          { json = { status = "Pending", replicaID = "" } },
          { json = { status = "Completed", replicaID = REPLICA, transportType = "esriTransportTypeUrl",
                     resultUrl = "{ROOT}" .. BASE .. "/replicafiles/r.json" } } } },
        { path = BASE .. "/replicafiles/r.json", responses = { { file = file } } },
      }
    end
    return serve{
      { path = BASE, responses = { { json = SERVICE } } },
      { path = BASE .. "/0", responses = { { json = layer_doc() } } },
      { path = BASE .. "/replicas", responses = { { json = json.array() } } },
      { path = BASE .. "/createReplica", responses = { { json = {
        replicaID = replica_id or REPLICA, transportType = "esriTransportTypeUrl",
        responseUrl = "{ROOT}" .. BASE .. "/replicafiles/r.json" } } } },
      { path = BASE .. "/replicafiles/r.json", responses = { file_response or { file = file } } },
      { path = BASE .. "/unRegisterReplica", responses = { { json = { success = true } } } },
    }
  end

  -- the files an interrupted or refused create left beside `out` (its journal is for a rerun)
  local function left_beside(out)
    local name = out:match("[^/]+$")
    local left = {}
    for f in helper.run_shell("ls -A " .. q(dir)):gmatch("[^\n]+") do
      if f:sub(1, #name) == name and f ~= name .. ".create.json" then left[#left + 1] = f end
    end
    return left
  end

  local function cli(s, out, job)
    local text, ok = helper.run_shell(("env LUA_PATH=%s LUA_CPATH=%s lua5.4 -e %s /dev/null --url %s replica create "
      .. "Parcels --layers 0 %s %s 2>&1"):format(q(package.path), q(package.cpath), q(CLI), q(s.url),
      job and "--poll-interval 0.05" or "--sync", q(out)))
    return text, ok, tonumber(text:match("records_fed=(%d+)"))
  end

  it("the Lua API feeds the result's bytes to a parser once", function()
    local s = server(result)
    local out = dir .. "/lua.gpkg"
    local before = core.records_fed()
    local st, err = geoservices.store.create(geoservices.client{ url = s.url }, out, {
      service = "Parcels", layers = { 0 }, async = false })
    local parsed = core.records_fed() - before
    assert.is_not_nil(st, err and tostring(err))
    assert.equal(RECORDS, st:count(0))
    assert.equal(REPLICA, st:replica().replicaID)
    st:close()
    -- once, and the small answers around it (twice before: 2.0x)
    assert.is_true(parsed >= size and parsed < size * 1.1,
      ("%d bytes parsed for a result of %d (%.2fx)"):format(parsed, size, parsed / size))
  end)

  it("the Lua API's on_fill follows the store filling as the result downloads, the last call with every record",
    function()
    local s = server(result)
    local calls = {}
    local st, err = geoservices.store.create(geoservices.client{ url = s.url }, dir .. "/fill.gpkg", {
      service = "Parcels", layers = { 0 }, async = false }, {
      on_fill = function(bytes, total, records) calls[#calls + 1] = { bytes, total, records } end })
    assert.is_not_nil(st, err and tostring(err))
    st:close()
    assert.is_true(#calls >= 2, #calls .. " calls")
    assert.same({ size, size, RECORDS }, calls[#calls])
    for i = 2, #calls do
      assert.is_true(calls[i][1] >= calls[i - 1][1] and calls[i][3] >= calls[i - 1][3], "never back")
    end
    assert.is_true(calls[1][1] < size and calls[1][3] > 0, "one before the end, with records")
  end)

  it("the CLI feeds the result's bytes to a parser once, through the same path", function()
    local s = server(result)
    local out = dir .. "/cli.gpkg"
    local text, ok, parsed = cli(s, out)
    assert(ok, text)
    assert.is_not_nil(parsed, text)
    local st = assert(geoservices.store.open(out))
    assert.equal(RECORDS, st:count(0))
    st:close()
    assert.is_true(parsed >= size and parsed < size * 1.1,
      ("%d bytes parsed for a result of %d (%.2fx)"):format(parsed, size, parsed / size))
  end)

  it("through a createReplica job too (the default), by the Lua API and the CLI", function()
    local s = server(result, nil, nil, true)
    local out = dir .. "/job-lua.gpkg"
    local before = core.records_fed()
    local st, err = geoservices.store.create(geoservices.client{ url = s.url }, out, {
      service = "Parcels", layers = { 0 } }, { poll_interval = 0.05 })
    local parsed = core.records_fed() - before
    assert.is_not_nil(st, err and tostring(err))
    assert.equal(RECORDS, st:count(0))
    st:close()
    assert.is_true(parsed >= size and parsed < size * 1.1,
      ("Lua: %d bytes parsed for a result of %d (%.2fx)"):format(parsed, size, parsed / size))
    s = server(result, nil, nil, true)
    out = dir .. "/job-cli.gpkg"
    local text, ok
    text, ok, parsed = cli(s, out, true)
    assert(ok, text)
    st = assert(geoservices.store.open(out))
    assert.equal(RECORDS, st:count(0))
    st:close()
    assert.is_true(parsed >= size and parsed < size * 1.1,
      ("CLI: %d bytes parsed for a result of %d (%.2fx)"):format(parsed, size, parsed / size))
  end)

  local REFUSALS = {
    { name = "a result file cut short", kind = "protocol", message = "not a complete JSON document",
      file = function()
        local cut = dir .. "/cut.json"
        helper.write_file(cut, helper.read_all(result):sub(1, size // 2))
        return cut
      end },
    { name = "an error served with HTTP 200", kind = "server", message = "Unable to complete operation",
      response = { json = { error = { code = 400, message = "Unable to complete operation.", details = {} } } } },
    { name = "another replica's result", kind = "protocol", message = OTHER, replica = OTHER },
  }
  for _, case in ipairs(REFUSALS) do
    it("refuses " .. case.name .. " and keeps nothing of it, by the Lua API and the CLI", function()
      local s = server(case.file and case.file() or result, case.replica, case.response)
      local out = dir .. "/refused-lua.gpkg"
      local st, err = geoservices.store.create(geoservices.client{ url = s.url }, out, {
        service = "Parcels", layers = { 0 }, async = false })
      assert.is_nil(st)
      assert.equal(case.kind, err.kind, tostring(err))
      assert.truthy(err.message:find(case.message, 1, true), err.message)
      assert.is_nil(helper.read_all(out))
      assert.same({}, left_beside(out))

      out = dir .. "/refused-cli.gpkg"
      local text, ok = cli(s, out)
      assert.falsy(ok, text)
      assert.truthy(text:find(case.message, 1, true), text)
      assert.is_nil(helper.read_all(out))
      assert.same({}, left_beside(out))
    end)
  end
end)
