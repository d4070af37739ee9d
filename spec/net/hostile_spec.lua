-- synchronizeReplica against what real and hostile servers send, from a
-- scripted server (spec/support/scripted_server.py on 127.0.0.1): error
-- bodies with HTTP 200, promised data that is missing, foreign and file://
-- URLs, endless bodies, gzip bombs, reflected tokens. The promise under
-- test: the replica's generation never moves past data the user does not
-- have, and no secret leaves for another origin or shows in an error.
local core = require "geoservices.core"
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local REPLICA = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local SYNC = "/server/Parcels/FeatureServer/synchronizeReplica"
local TOKEN = "s3cret-token-value"

local function tmp_path()
  local p = helper.tmp_name()
  os.remove(p)
  return p
end

local function state_file(gen)
  local path = tmp_path() .. ".json"
  local f = assert(io.open(path, "wb"))
  f:write(json.encode{ service = "Parcels", replicaID = REPLICA, model = "perReplica", replicaServerGen = gen or 5 })
  f:close()
  return path
end

local function url_response(url)
  return { json = { transportType = "svcTransportTypeUrl", responseType = "svcReplicaResponseTypeEdits",
                    replicaID = REPLICA, replicaServerGen = 9, URL = url } }
end

local rss_kib = helper.rss_kib

describe("a hostile or broken server", function()
  local serve, stop_all = helper.scripted_servers()
  after_each(stop_all)

  describe("downloaded changes are never lost", function()
    it("a result file that is a JSON error body with HTTP 200 is an error; the state is byte-identical", function()
      local s = serve{
        { method = "POST", path = SYNC, responses = { url_response("{ROOT}/results/r1.json") } },
        { method = "GET", path = "/results/r1.json", responses = { { json = { error = { code = 499,
          message = "Token Required", messageCode = "GWM_0003", details = { "Token Required" } } } } } },
      }
      local path = state_file(5)
      local before = helper.read_all(path)
      local c = geoservices.client{ url = s.url, token = TOKEN, retry = false }
      local result, err = c:sync(path)
      assert.is_nil(result)
      assert.equal("auth", err.kind)
      assert.truthy(err.message:find("Token Required", 1, true))
      assert.equal(before, helper.read_all(path))
      os.remove(path)
    end)

    it("a URL-transport response without a result address is an error, not an empty result", function()
      local s = serve{
        { method = "POST", path = SYNC, responses = { { json = { transportType = "svcTransportTypeUrl",
          responseType = "svcReplicaResponseTypeEdits", replicaID = REPLICA, replicaServerGen = 9 } } } },
      }
      local path = state_file(5)
      local before = helper.read_all(path)
      local c = geoservices.client{ url = s.url, token = TOKEN }
      local result, err = c:sync(path)
      assert.is_nil(result)
      assert.equal("protocol", err.kind)
      assert.truthy(err.message:find("no result", 1, true), err.message)
      assert.equal(before, helper.read_all(path))
      os.remove(path)
    end)

    it("an async job Completed with resultUrl \"\" is an error, not an empty result", function()
      local s = serve{
        { method = "POST", path = SYNC, responses = { { json = { statusUrl = "{ROOT}/jobs/j1" } } } },
        { method = "POST", path = "/jobs/j1", responses = { { json = { status = "Completed", resultUrl = "",
          transportType = "svcTransportTypeUrl", responseType = "svcReplicaResponseTypeEdits",
          replicaID = REPLICA, replicaServerGen = "9" } } } },
      }
      local path = state_file(5)
      local before = helper.read_all(path)
      local c = geoservices.client{ url = s.url, token = TOKEN }
      local result, err = c:sync(path, nil, { params = { async = true }, poll_interval = 0.05 })
      assert.is_nil(result)
      assert.equal("protocol", err.kind)
      assert.equal(before, helper.read_all(path))
      os.remove(path)
    end)

    it("opts.output of an embedded result is written, not ignored", function()
      local s = serve{
        { method = "POST", path = SYNC, responses = { { json = { transportType = "svcTransportTypeEmbedded",
          responseType = "svcReplicaResponseTypeEdits", replicaID = REPLICA, replicaServerGen = 9,
          edits = { { id = 0, features = { adds = { { attributes = { GlobalID = "{A}", NAME = "x" } } },
                                            updates = {}, deleteIds = {} } } } } } } },
      }
      local path, out = state_file(5), tmp_path()
      local c = geoservices.client{ url = s.url, token = TOKEN }
      local r = assert(c:sync(path, nil, { output = out }))
      assert.equal(9, r.replicaServerGen)
      local saved = json.decode(assert(helper.read_all(out)))
      assert.equal("x", saved.edits[1].features.adds[1].attributes.NAME)
      os.remove(path)
      os.remove(out)
    end)

    it("opts.output in a directory that does not exist is refused before anything is sent", function()
      local s = serve{ { method = "POST", path = SYNC, responses = { url_response("{ROOT}/r.json") } } }
      local path = state_file(5)
      local c = geoservices.client{ url = s.url, token = TOKEN }
      local result, err = c:sync(path, nil, { output = "/nonexistent-dir/x/result.json" })
      assert.is_nil(result)
      assert.equal("invalid", err.kind)
      assert.equal("output", err.parameter)
      assert.equal(0, #s:requests())
      os.remove(path)
    end)

    it("strict mode after the state advanced says the replica was synchronized", function()
      local s = serve{
        { method = "POST", path = SYNC, responses = { { json = { transportType = "svcTransportTypeEmbedded",
          responseType = "svcReplicaResponseTypeEdits", replicaID = REPLICA, replicaServerGen = 9,
          edits = { { id = 0, features = { addResults = { { globalId = "{B}", success = false,
            error = { code = 1000, description = "bad value" } } } } } } } } } },
      }
      local path = state_file(5)
      local c = geoservices.client{ url = s.url, token = TOKEN }
      local e = geoservices.edits()
      e:add(0, { attributes = { GlobalID = "{B}", NAME = "y" } })
      local result, err = c:sync(path, e, { strict = true })
      assert.is_nil(result)
      assert.equal("edits", err.kind)
      assert.is_true(err.synchronized)
      assert.equal(9, err.result.replicaServerGen)
      assert.truthy(err.message:find("generation 9", 1, true), err.message)
      assert.equal(9, json.decode(helper.read_all(path)).replicaServerGen)
      os.remove(path)
    end)

    it("edits answered without a per-edit result are read back from the server, not 0 uploaded", function()
      local s = serve{
        { method = "POST", path = SYNC, responses = { { json = { transportType = "esriTransportTypeEmbedded",
          responseType = "esriReplicaResponseTypeEdits", replicaID = REPLICA, replicaServerGen = 9, edits = {} } } } },
        { method = "POST", path = "/server/Parcels/FeatureServer/0/query",
          responses = { { json = { features = {} } } } },
      }
      local path = state_file(5)
      local c = geoservices.client{ url = s.url, token = TOKEN }
      local e = geoservices.edits()
      local gid = e:add(0, { attributes = { NAME = "z" } })
      local result = assert(c:sync(path, e))
      -- the server does not have it: it skipped the add (rollbackOnFailure false gives no reason)
      assert.equal(1, #result.failed_edits)
      assert.equal(gid, result.failed_edits[1].globalId)
      assert.equal("skipped", result.failed_edits[1].code)
      assert.equal(1, result.verified)
      os.remove(path)
    end)
  end)

  describe("credentials stay with the client's own origin", function()
    it("never sends the token to a status URL on another host or port", function()
      local foreign = serve{ { method = "POST", path = "/jobs/j1", responses = { { json = { status = "Completed",
        transportType = "svcTransportTypeEmbedded", responseType = "svcReplicaResponseTypeNoEdits",
        replicaID = REPLICA, replicaServerGen = "9" } } } } }
      local s = serve{ { method = "POST", path = SYNC, responses = {
        { json = { statusUrl = foreign.root .. "/jobs/j1" } } } } }
      local c = geoservices.client{ url = s.url, token = TOKEN }
      c:synchronize_replica("Parcels", { replicaID = REPLICA, replicaServerGen = 5, async = true },
        { poll_interval = 0.05, timeout = 5 })
      for _, req in ipairs(foreign:requests()) do
        assert.falsy(req.body:find(TOKEN, 1, true), "token sent to another origin")
        assert.falsy(json.encode(req.headers):find(TOKEN, 1, true))
      end
      assert.is_true(#s:requests() == 1 and s:requests()[1].body:find(TOKEN, 1, true) ~= nil)
    end)

    it("refuses file:// and other non-http(s) status and result URLs", function()
      for _, doc in ipairs{ { statusUrl = "file:///etc/passwd" },
                            { transportType = "svcTransportTypeUrl", responseType = "svcReplicaResponseTypeEdits",
                              replicaID = REPLICA, replicaServerGen = 9, URL = "file:///dev/zero" },
                            { transportType = "svcTransportTypeUrl", responseType = "svcReplicaResponseTypeEdits",
                              replicaID = REPLICA, replicaServerGen = 9, URL = "gopher://127.0.0.1/x" } } do
        local s = serve{ { method = "POST", path = SYNC, responses = { { json = doc } } } }
        local c = geoservices.client{ url = s.url, token = TOKEN }
        -- the deadline is far beyond any stall of a loaded machine: a client that
        -- tried the address until it gave up would take all of it
        local timeout = 10 * helper.WAIT_SCALE
        local t0 = core.monotonic()
        local result, err = c:synchronize_replica("Parcels", { replicaID = REPLICA, replicaServerGen = 5 },
          { timeout = timeout })
        local took = core.monotonic() - t0
        assert.is_nil(result)
        assert.equal("protocol", err.kind)
        assert.truthy(err.message:find("refused", 1, true), err.message)
        assert.is_true(took < timeout / 2, tostring(took))
      end
    end)

    it("scrubs the token from an error body that reflects the request", function()
      local s = serve{ { method = "POST", path = "/server/admin/services/getServicesById", responses = {
        { status = 400, json = { error = { code = 400, message = "bad request: token=" .. TOKEN,
          details = { "f=json&token=" .. TOKEN } } } } } } }
      local c = geoservices.client{ url = s.url, token = TOKEN }
      local _, err = c:get_services_by_id{ "a" }
      assert.truthy(err)
      assert.falsy(tostring(err):find(TOKEN, 1, true), tostring(err))
      assert.falsy(json.encode(err.details or {}):find(TOKEN, 1, true))
    end)
  end)

  describe("bodies held in memory are bounded by default", function()
    it("an endless response body ends in an error within seconds, with bounded memory", function()
      local s = serve{ { method = "POST", path = "/server/admin/services/getServicesById",
                         responses = { { endless = true } } } }
      local c = geoservices.client{ url = s.url, token = TOKEN, retry = false }
      local before = rss_kib()
      local _, err = c:get_services_by_id({ "a" }, { timeout = 20 })
      assert.equal("protocol", err.kind)
      assert.equal("too_large", err.code)
      assert.is_true(rss_kib() - before < 512 * 1024, "memory grew by " .. (rss_kib() - before) .. " KiB")
    end)

    it("a gzip bomb ends in an error with bounded memory", function()
      local s = serve{ { method = "POST", path = "/server/admin/services/getServicesById",
                         responses = { { gzip_bomb_mb = 300 } } } }
      local c = geoservices.client{ url = s.url, token = TOKEN, retry = false }
      local before = rss_kib()
      local _, err = c:get_services_by_id({ "a" }, { timeout = 20 })
      assert.equal("protocol", err.kind)
      assert.is_true(rss_kib() - before < 512 * 1024, "memory grew by " .. (rss_kib() - before) .. " KiB")
    end)
  end)

  describe("careless callers are refused before anything is sent", function()
    it("poll_interval = 0 is refused", function()
      local s = serve{ { method = "POST", path = SYNC, responses = { { json = { statusUrl = "{ROOT}/jobs/j" } } } } }
      local c = geoservices.client{ url = s.url, token = TOKEN }
      local result, err = c:synchronize_replica("Parcels", { replicaID = REPLICA, replicaServerGen = 5, async = true },
        { poll_interval = 0 })
      assert.is_nil(result)
      assert.equal("invalid", err.kind)
      assert.equal("poll_interval", err.parameter)
      assert.equal(0, #s:requests())
    end)

    it("a nil hole in an edits list is refused", function()
      local s = serve{ { method = "POST", path = SYNC, responses = { url_response("{ROOT}/r.json") } } }
      local c = geoservices.client{ url = s.url, token = TOKEN }
      local adds = { { attributes = { GlobalID = "{C}" } } }
      adds[3] = { attributes = { GlobalID = "{D}" } }
      local result, err = c:synchronize_replica("Parcels", { replicaID = REPLICA, replicaServerGen = 5,
        edits = { { id = 0, features = { adds = adds } } } })
      assert.is_nil(result)
      assert.equal("invalid", err.kind)
      assert.truthy(err.parameter:find("edits", 1, true))
      assert.equal(0, #s:requests())
    end)

    it("an explicit vendor enumeration is sent verbatim", function()
      local s = serve{ { method = "POST", path = SYNC, responses = { { json = {
        transportType = "esriTransportTypeEmbedded", responseType = "esriReplicaResponseTypeNoEdits",
        replicaID = REPLICA, replicaServerGen = 9 } } } } }
      local c = geoservices.client{ url = s.url, token = TOKEN }
      assert(c:synchronize_replica("Parcels", { replicaID = REPLICA, replicaServerGen = 5,
        transportType = "esriTransportTypeEmbedded" }))
      assert.truthy(s:requests()[1].body:find("transportType=esriTransportTypeEmbedded", 1, true))
    end)

    it("the edits builder keeps one GlobalID whatever its case", function()
      local e = geoservices.edits()
      local gid = e:add(0, { attributes = { globalid = "{E}", NAME = "n" } })
      assert.equal("{E}", gid)
      local attrs = e:to_table()[1].features.adds[1].attributes
      assert.same({ GlobalID = "{E}", NAME = "n" }, attrs)
      assert.has_error(function() e:add(0, { attributes = { GlobalID = "{F}", GLOBALID = "{G}" } }) end)
    end)

    it("an option of the wrong kind raises when the client is made, not after edits were applied", function()
      assert.has_error(function() geoservices.client{ url = "http://127.0.0.1:1/server", download_chunk = 0.5 } end)
      assert.has_error(function() geoservices.client{ url = "http://127.0.0.1:1/server", download_chunk = -1 } end)
    end)
  end)
end)
