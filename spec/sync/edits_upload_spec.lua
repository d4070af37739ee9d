-- F4 of issue 34, the client side: a synchronizeReplica that references
-- uploaded edits (editsUploadId, with editsUploadFormat in any case of the
-- vendor's values SQLITE and JSON: its form offers those two) carries edits:
-- it goes once, on a fresh connection, and an answer lost or a gateway's
-- 504 leaves its outcome unknown (err.outcome_unknown), never a blind
-- repeat that would apply the uploaded edits twice. Before, it was taken
-- for a read (repeated after a 504) and SQLITE/JSON were refused. Against a
-- documented-server double (spec/support/scripted_server.py) that logs each
-- request and the client port it came from.
local geoservices = require "geoservices"
local helper = require "spec.helper"

local R = "{5E1A0C2B-1111-4A5B-9C8D-00000000F004}"
local SYNC = "/server/Parcels/FeatureServer/synchronizeReplica"

local ANSWER = { json = { replicaName = "crew-1", replicaID = R, replicaServerGen = 2,
                          transportType = "esriTransportTypeEmbedded", responseType = "esriReplicaResponseTypeEdits",
                          edits = {} } }

describe("a synchronizeReplica with editsUploadId", function()
  local serve, stop_all = helper.scripted_servers()
  after_each(stop_all)

  local function server(sync_responses)
    return serve{
      { method = "POST", path = SYNC, responses = sync_responses },
      { method = "POST", path = "/server/Parcels/FeatureServer/replicas", responses = { { json = {} } } },
    }
  end

  local function syncs(s)
    local list = {}
    for _, r in ipairs(s:requests()) do
      if r.path == SYNC then list[#list + 1] = r end
    end
    return list
  end

  local function params(format)
    return { replicaID = R, replicaServerGen = 1, syncDirection = "upload", editsUploadId = "a1b2c3",
             editsUploadFormat = format }
  end

  it("takes the vendor's editsUploadFormat values in any case, and sends them", function()
    local s = server{ ANSWER }
    local client = geoservices.client{ url = s.url, token = "t", retry = { attempts = 3, base_delay = 0.01 } }
    for _, format in ipairs{ "SQLITE", "sqlite", "JSON", "Json" } do
      local result, err = client:synchronize_replica("Parcels", params(format))
      assert.is_nil(err, format)
      assert.equal(2, result.replicaServerGen)
    end
    local sent = syncs(s)
    assert.equal(4, #sent)
    assert.truthy(sent[1].body:find("editsUploadFormat=SQLITE", 1, true), sent[1].body)
    assert.truthy(sent[1].body:find("editsUploadId=a1b2c3", 1, true), sent[1].body)
    local _, err = client:synchronize_replica("Parcels", params("xml"))
    client:close()
    assert.equal("invalid", err.kind)
    assert.truthy(err.message:find("editsUploadFormat", 1, true), err.message)
    assert.truthy(err.message:find("SQLITE or JSON", 1, true), err.message)
    assert.equal(4, #syncs(s)) -- refused before sending
  end)

  it("refuses a direction that would have the server ignore the uploaded edits, before sending", function()
    local s = server{ ANSWER }
    local p = params("SQLITE")
    p.syncDirection = "download"
    local _, err = geoservices.client{ url = s.url, token = "t" }:synchronize_replica("Parcels", p)
    assert.equal("invalid", err.kind)
    assert.truthy(err.message:find("editsUploadId", 1, true), err.message)
    assert.equal(0, #syncs(s))
  end)

  it("is sent once after a gateway's 504: its outcome is unknown, never repeated", function()
    local s = server{ { status = 504, body = "<html>Gateway Timeout</html>" }, ANSWER }
    local client = geoservices.client{ url = s.url, token = "t", retry = { attempts = 4, base_delay = 0.01 } }
    local result, err = client:synchronize_replica("Parcels", params("SQLITE"))
    client:close()
    assert.is_nil(result)
    assert.is_true(err.outcome_unknown)
    assert.is_true(err.ambiguous)
    assert.truthy(err.message:find(") is unknown", 1, true), err.message)
    assert.equal(1, #syncs(s))
  end)

  it("says it is the uploaded edits file's outcome that is unknown, naming the item", function()
    local s = server{ { status = 504, body = "<html>Gateway Timeout</html>" }, ANSWER }
    local client = geoservices.client{ url = s.url, token = "t", retry = { attempts = 4, base_delay = 0.01 } }
    local _, err = client:synchronize_replica("Parcels", params("SQLITE"))
    client:close()
    assert.truthy(err.message:find("the outcome of the uploaded edits file (editsUploadId a1b2c3) is unknown: "
      .. "the server may still apply it; client:sync and store:sync never send it again", 1, true), err.message)
    assert.is_nil(err.message:find("by reading the server", 1, true), err.message) -- a file is not read back
  end)

  it("is sent once when its answer is lost: its outcome is unknown, never repeated", function()
    local s = server{ { hang_up = true }, ANSWER }
    local client = geoservices.client{ url = s.url, token = "t", retry = { attempts = 4, base_delay = 0.01 } }
    local result, err = client:synchronize_replica("Parcels", params("JSON"))
    client:close()
    assert.is_nil(result)
    assert.is_true(err.outcome_unknown)
    assert.equal(1, #syncs(s))
  end)

  it("goes on a fresh connection, where a read reuses the open one", function()
    local s = server{ ANSWER }
    local client = geoservices.client{ url = s.url, token = "t" }
    assert(client:list_replicas("Parcels"))
    assert(client:list_replicas("Parcels"))
    assert(client:synchronize_replica("Parcels", params("SQLITE")))
    client:close()
    local list = s:requests()
    assert.equal(3, #list)
    assert.equal(list[1].peer_port, list[2].peer_port) -- the test can see a reused connection
    assert.are_not.equal(list[2].peer_port, list[3].peer_port)
  end)

  describe("against the emulator (uploads, and a gateway that answers 504 while the server goes on)", function()
    local world = helper.store_world()
    setup(world.start)
    teardown(world.stop)

    it("is sent once: the uploaded edits are applied once, when the server gets to them", function()
      local emu = world.emu
      local st = world.create("up")
      local rep = assert(st:replica())
      st:close()
      local gid = geoservices.new_global_id()
      local client = world.client()
      local item = assert(client:post(client:url_for("Parcels/FeatureServer/uploads/upload"), {}, {
        multipart = true, files = { { name = "file", filename = "edits.json", data = require("geoservices.base.json")
          .encode{ { id = 0, features = { adds = { { attributes = { GlobalID = gid, APN = "up-1" },
                                                     geometry = { x = -117.2, y = 34.1 } } } } } } } } }))
      emu:control("settings", { gateway = "504", gateway_delay_ms = 300 })
      local before = emu:count("synchronizeReplica")
      local result, err = client:synchronize_replica("Parcels", { replicaID = rep.replicaID,
        replicaServerGen = rep.replicaServerGen, syncDirection = "upload", editsUploadId = item.item.itemID,
        editsUploadFormat = "JSON" })
      assert.is_nil(result)
      assert.is_true(err.outcome_unknown)
      assert.equal(before + 1, emu:count("synchronizeReplica"))
      helper.wait_for("the held request to run", function() return emu:control("state").held == 0 end, 10)
      local adds = 0
      for _, e in ipairs(emu:control("changelog?service=Parcels").entries) do
        if e.op == "add" and e.globalId and e.globalId:upper():find(gid:upper():gsub("[{}]", ""), 1, true) then
          adds = adds + 1
        end
      end
      assert.equal(1, adds)
      assert.equal(before + 1, emu:count("synchronizeReplica"))
      client:close()
    end)
  end)
end)
