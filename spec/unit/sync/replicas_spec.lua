-- A replica's resource in every shape real servers send, normalized:
-- layerServerGens as an array or its JSON text, serverSibGen 0 or -1, both
-- spellings of returnAttachments, generations as opaque 64-bit integers.
local json = require "geoservices.base.json"
local replicas = require "geoservices.sync.replicas"

local R = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"

describe("replica info", function()
  it("reads a per-layer replica whose layerServerGens is a JSON text, with epoch-millisecond generations", function()
    local info = replicas.build_info("Parcels", json.decode([[{
      "replicaName": "office", "replicaID": "{5E1A0C2B-1111-4A5B-9C8D-000000000001}", "replicaOwner": "alice",
      "layers": [0, 1], "syncModel": "perLayer", "targetType": "client", "syncDirection": "bidirectional",
      "layerServerGens":
        "[{\"id\":0,\"serverGen\":1700000000123,\"serverSibGen\":-1},{\"id\":1,\"serverGen\":1700000000456}]",
      "creationDate": 1699999999000, "lastSyncDate": 1700000000500, "returnsAttachments": true
    }]]))
    assert.same({ 0, 1 }, info.layers)
    assert.same({ { id = 0, serverGen = 1700000000123, serverSibGen = -1 }, { id = 1, serverGen = 1700000000456 } },
      info.layerServerGens)
    assert.equal("integer", math.type(info.layerServerGens[1].serverGen))
    assert.same({ [0] = 1700000000123, [1] = 1700000000456 }, info.generations)
    assert.is_true(info.returnAttachments)
    assert.is_true(info.returnsAttachments) -- the server's own member is kept
    assert.equal("alice", info.replicaOwner)
    assert.equal("replica office " .. R .. " of Parcels: perLayer, bidirectional, layers 0,1, "
      .. "layer generations 0:1700000000123,1:1700000000456", tostring(info))
  end)

  it("reads a per-replica replica with small counters, serverSibGen 0 and returnAttachments", function()
    local info = replicas.build_info("Parcels", {
      replicaName = "crew-1", replicaID = R, layers = "0,1", replicaServerGen = "12", serverSibGen = 0,
      returnAttachments = "false", syncModel = "perReplica",
    })
    assert.same({ 0, 1 }, info.layers)
    assert.equal(12, info.replicaServerGen)
    assert.equal(0, info.replicaServerSibGen)
    assert.is_false(info.returnAttachments)
    assert.same({ [0] = 12, [1] = 12 }, info.generations)
    assert.equal("replica crew-1 " .. R .. " of Parcels: perReplica, bidirectional, layers 0,1, generation 12",
      tostring(info))
  end)

  it("keeps generations past 2^53 exact: they are identifiers, not quantities", function()
    local info = replicas.build_info("P", json.decode('{"replicaID":"x","replicaServerGen":9007199254740993,'
      .. '"layerServerGens":[{"id":"2","serverGen":"9223372036854775807"}]}'))
    assert.equal(9007199254740993, info.replicaServerGen)
    assert.equal(math.maxinteger, info.layerServerGens[1].serverGen)
    assert.equal(2, info.layerServerGens[1].id)
    assert.same({ 2 }, info.layers)            -- from the generations, when no layers are listed
    assert.equal("perLayer", info.syncModel)   -- and the model, when not said
  end)

  it("treats replicaID \"\" as missing and tolerates a resource with no generation at all", function()
    local info = replicas.build_info("P", { replicaID = "", replicaName = "r" })
    assert.is_nil(info.replicaID)
    assert.same({}, info.generations)
    assert.is_nil(info.syncModel)
  end)

  it("reads integers only from integer spellings", function()
    assert.equal(5, replicas.integer(5.0))
    assert.equal(-1, replicas.integer(" -1 "))
    assert.is_nil(replicas.integer("1e3"))
    assert.is_nil(replicas.integer(1.5))
    assert.is_nil(replicas.integer({}))
    assert.is_nil(replicas.layer_gens("not json"))
  end)
end)
