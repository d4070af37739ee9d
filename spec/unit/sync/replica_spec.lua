-- Replica state files in a temporary directory: creation, loading, the
-- request parameters they imply, and atomic generation updates.
local errors = require "geoservices.base.errors"
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local replica = require "geoservices.sync.replica"

local R = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return text
end

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local function entries(dir)
  local p = assert(io.popen("ls -A " .. quote(dir)))
  local names = {}
  for name in p:lines() do names[#names + 1] = name end
  p:close()
  return names
end

describe("replica state", function()
  local dir, path
  before_each(function()
    dir = helper.tmp_dir()
    path = dir .. "/parcels.json"
  end)
  after_each(function()
    os.execute("rm -rf " .. quote(dir))
  end)

  local function per_replica(gen)
    return { service = "Parcels", replicaID = R, replicaServerGen = gen or 12, syncDirection = "bidirectional" }
  end

  local function per_layer()
    return { service = "Parcels", replicaID = R, model = "perLayer",
             layers = { { id = 0, serverGen = 12, syncDirection = "download" }, { id = 3, serverGen = 7 } } }
  end

  describe("open", function()
    it("creates the file from init when it does not exist, defaulting the model", function()
      local r = assert(replica.open(path, per_replica()))
      assert.equal(path, r.path)
      assert.equal(R, r.replicaID)
      assert.equal("Parcels", r.service)
      assert.equal("perReplica", r.model)
      assert.equal(12, r.replicaServerGen)
      local on_disk = assert(json.decode(assert(read(path))))
      assert.same({ service = "Parcels", replicaID = R, model = "perReplica", replicaServerGen = 12,
                    syncDirection = "bidirectional" }, on_disk)
      assert.same({ "parcels.json" }, entries(dir))
    end)

    it("does not keep a reference to the caller's init table", function()
      local init = per_replica()
      local r = assert(replica.open(path, init))
      assert(r:advance{ replicaServerGen = 13 })
      assert.equal(12, init.replicaServerGen)
    end)

    it("loads an existing file and ignores init", function()
      write(path, json.encode(per_replica(40)))
      local r = assert(replica.open(path, per_replica(1)))
      assert.equal(40, r.replicaServerGen)
      assert.equal(40, json.decode(read(path)).replicaServerGen)
    end)

    it("prints as a one-line summary", function()
      local r = assert(replica.open(path, per_replica()))
      assert.equal(("geoservices.Replica %s of Parcels (perReplica, generation 12) <%s>"):format(R, path),
        tostring(r))
      local layered = assert(replica.open(dir .. "/layers.json", per_layer()))
      assert.equal(("geoservices.Replica %s of Parcels (perLayer, generation layers 0:12,3:7) <%s>"):format(
        R, dir .. "/layers.json"), tostring(layered))
    end)

    it("is an io error when the file does not exist and no init is given", function()
      local r, err = replica.open(path)
      assert.is_nil(r)
      assert.is_true(errors.is(err))
      assert.equal("io", err.kind)
      assert.equal(("replica state %s does not exist"):format(path), err.message)
      assert.is_nil(read(path))
    end)

    it("is an invalid error for a file that is not JSON, with the byte offset", function()
      write(path, '{"service": "Parcels",')
      local r, err = replica.open(path)
      assert.is_nil(r)
      assert.equal("invalid", err.kind)
      assert.matches("^replica state .-parcels%.json: invalid JSON at byte %d+: ", err.message)
      assert.equal('{"service": "Parcels",', read(path))
    end)

    it("refuses states that break a rule, naming it, and writes nothing", function()
      local cases = {
        { { replicaID = R }, "'service' is required" },
        { { service = "", replicaID = R }, "'service' is required" },
        { { service = "Parcels" }, "'replicaID' is required" },
        { { service = "Parcels", replicaID = R, model = "perFeature" }, "'model' must be perReplica or perLayer" },
        { { service = "Parcels", replicaID = R, model = "perLayer" }, "a perLayer replica needs 'layers'" },
        { { service = "Parcels", replicaID = R, model = "perLayer", layers = {} },
          "a perLayer replica needs 'layers'" },
        { { service = "Parcels", replicaID = R, model = "perLayer", layers = { { id = 0 }, { id = "one" } } },
          "layers[2] needs an integer id" },
      }
      for _, case in ipairs(cases) do
        local r, err = replica.open(path, case[1])
        assert.is_nil(r)
        assert.equal("invalid", err.kind)
        assert.equal(("replica state %s: %s"):format(path, case[2]), err.message)
        assert.is_nil(read(path))
      end
      write(path, "[1, 2]")
      local r, err = replica.open(path)
      assert.is_nil(r)
      assert.equal("invalid", err.kind)
      write(path, '"text"')
      r, err = replica.open(path)
      assert.is_nil(r)
      assert.equal(("replica state %s: not a JSON object"):format(path), err.message)
    end)

    it("raises when the path is not a string", function()
      assert.has_error(function() replica.open(nil) end, "geoservices.replica: expected a file path")
      assert.has_error(function() replica.open({}) end, "geoservices.replica: expected a file path")
    end)
  end)

  describe("request_params", function()
    it("gives the generation and direction of a perReplica replica", function()
      local r = assert(replica.open(path, per_replica()))
      assert.same({ replicaID = R, syncDirection = "bidirectional", replicaServerGen = 12 }, r:request_params())
    end)

    it("gives syncLayers of a perLayer replica, as a JSON array the caller may change", function()
      local r = assert(replica.open(path, per_layer()))
      local params = r:request_params()
      assert.same({ replicaID = R, syncLayers = { { id = 0, serverGen = 12, syncDirection = "download" },
                                                  { id = 3, serverGen = 7 } } }, params)
      assert.is_nil(params.replicaServerGen)
      assert.is_true(json.is_array(params.syncLayers))
      params.syncLayers[1].serverGen = 999
      assert.equal(12, r:request_params().syncLayers[1].serverGen)
    end)
  end)

  describe("advance", function()
    it("takes the new generation and writes it atomically (no temporary file left)", function()
      local r = assert(replica.open(path, per_replica()))
      assert.is_true(r:advance{ replicaServerGen = 13 })
      assert.equal(13, r.replicaServerGen)
      assert.equal(13, json.decode(read(path)).replicaServerGen)
      assert.same({ "parcels.json" }, entries(dir))
      assert.equal(13, assert(replica.open(path)).replicaServerGen)
    end)

    it("marks the state closed after closeReplica", function()
      local r = assert(replica.open(path, per_replica()))
      assert(r:advance{ replicaServerGen = 14, closed = true })
      assert.is_true(r.closed)
      assert.is_true(assert(replica.open(path)).closed)
    end)

    it("is a protocol error for a perReplica replica without replicaServerGen, leaving the file as it was", function()
      local r = assert(replica.open(path, per_replica()))
      local before = read(path)
      local ok, err = r:advance{ layerServerGens = { { id = 0, serverGen = 20 } } }
      assert.is_nil(ok)
      assert.equal("protocol", err.kind)
      assert.equal(before, read(path))
      assert.equal(12, r.replicaServerGen)
    end)

    it("moves each listed layer of a perLayer replica and keeps the others", function()
      local r = assert(replica.open(path, per_layer()))
      assert(r:advance{ layerServerGens = { { id = 3, serverGen = 30 }, { id = 9, serverGen = 90 } } })
      local layers = json.decode(read(path)).layers
      assert.same({ { id = 0, serverGen = 12, syncDirection = "download" }, { id = 3, serverGen = 30 } }, layers)
      assert.equal(30, r.layers[2].serverGen)
    end)

    it("moves every layer to replicaServerGen when the result has no per-layer generations", function()
      local r = assert(replica.open(path, per_layer()))
      assert(r:advance{ replicaServerGen = 50 })
      local layers = json.decode(read(path)).layers
      assert.equal(50, layers[1].serverGen)
      assert.equal(50, layers[2].serverGen)
    end)

    it("restores the state in memory when the file cannot be written", function()
      local r = assert(replica.open(path, per_replica()))
      os.execute("rm -rf " .. quote(dir)) -- the directory is gone: the temporary file cannot be made
      local ok, err = r:advance{ replicaServerGen = 13, closed = true }
      assert.is_nil(ok)
      assert.equal("io", err.kind)
      assert.matches("parcels.json", err.message, 1, true)
      assert.equal(12, r.replicaServerGen)
      assert.is_nil(r.closed)
      assert.same({ replicaID = R, syncDirection = "bidirectional", replicaServerGen = 12 }, r:request_params())
    end)
  end)

  describe("journal", function()
    local EDITS = { { id = 0, features = { adds = { { attributes = { GlobalID = "{A}" } } } } } }

    it("loads the attempt journaled beside the state", function()
      local r = assert(replica.open(path, per_replica()))
      assert(r:begin_attempt(json.array(EDITS), { syncDirection = "bidirectional" }))
      local again = assert(replica.open(path))
      assert.equal("{A}", again.attempt.edits[1].features.adds[1].attributes.GlobalID)
    end)

    it("drops a journal the state's generations already moved past", function()
      local r = assert(replica.open(path, per_replica()))
      assert(r:begin_attempt(json.array(EDITS), {}))
      local journal = read(path .. ".journal")
      assert(r:advance{ replicaServerGen = 13 })
      write(path .. ".journal", journal) -- as a crash between the two writes leaves it
      local again = assert(replica.open(path))
      assert.is_nil(again.attempt)
      assert.is_nil(read(path .. ".journal"))
    end)

    for _, case in ipairs{
      { "not JSON", '{"edits":[{"id":0,"features":{"adds":[{"attributes":{"GlobalID":"{A}"' },
      { "empty", "" },
      { "not an object", "[1, 2]" },
      { "an object without its generations", '{"edits":[]}' },
      { "edits that are not a list", '{"edits":"x","from":"12"}' },
    } do
      it(("is an error naming the file when it is damaged (%s), and is left in place"):format(case[1]), function()
        assert(replica.open(path, per_replica()))
        write(path .. ".journal", case[2])
        local r, err = replica.open(path)
        assert.is_nil(r)
        assert.is_true(errors.is(err))
        assert.equal("io", err.kind)
        assert.equal("damaged", err.code)
        assert.truthy(err.message:find(path .. ".journal", 1, true), err.message)
        assert.equal(case[2], read(path .. ".journal")) -- its edits are not lost
        assert.equal(12, json.decode(read(path)).replicaServerGen)
      end)
    end

    it("damaged, stops client:sync before anything is sent", function()
      local serve, stop_all = helper.scripted_servers()
      local server = serve{}
      local ok, err = pcall(function()
        assert(replica.open(path, per_replica()))
        write(path .. ".journal", "{\"edits\": [")
        local c = require("geoservices").client{ url = server.url, retry = false }
        local result, sync_err = c:sync(path)
        assert.is_nil(result)
        assert.equal("damaged", sync_err.code)
        assert.truthy(sync_err.message:find(path .. ".journal", 1, true), sync_err.message)
        assert.equal(0, #server:requests())
        assert.equal("{\"edits\": [", read(path .. ".journal"))
      end)
      stop_all()
      assert(ok, err)
    end)
  end)
end)
