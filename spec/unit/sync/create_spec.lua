-- createReplica's record sink and result, without I/O: the data in the
-- vendor's shape goes through the C core's record extractor one record at
-- a time, and one result comes out of any answer, file and job status.
local core = require "geoservices.core"
local create = require "geoservices.sync.create"
local json = require "geoservices.base.json"

local R = "{5E1A0C2B-AAAA-4A5B-9C8D-00000000000A}"

-- as a server writes it: features before attachments in each layer
local DOC = [==[{"replicaName":"crew-1","replicaID":"]==] .. R .. [==[","replicaServerGen":1700000000123,
  "transportType":"esriTransportTypeEmbedded","responseType":"esriReplicaResponseTypeData","layers":[
  {"id":0,"features":[{"attributes":{"OBJECTID":1,"GlobalID":"{A}","NAME":"x"},"geometry":{"x":1.5,"y":2}},
                      {"attributes":{"OBJECTID":2,"GlobalID":"{B}","NAME":null},"geometry":{"rings":[[[0,0]]]}}],
   "attachments":[{"id":1,"globalId":"{AT}","parentGlobalId":"{A}","name":"a.jpg","size":12}]},
  {"id":3,"features":[],"attachments":[]}]}]==]

-- Feeds a document to a sink in pieces of `step` bytes, as a download does.
local function feed(sink, text, step)
  for i = 1, #text, step do
    assert(sink.records:feed(text:sub(i, i + step - 1)))
    sink.records:drain(sink.deliver)
  end
  assert(sink.records:finish())
  sink.records:drain(sink.deliver)
end

describe("createReplica's sink and result", function()
  it("hands each feature and attachment to on_change as it arrives, whatever the split", function()
    for _, step in ipairs{ 1, 7, #DOC } do
      local seen = {}
      local sink = create.new_sink(function(layer, kind, record)
        seen[#seen + 1] = ("%d %s %s"):format(layer, kind, record.attributes and record.attributes.GlobalID
          or record.globalId)
      end)
      feed(sink, DOC, step)
      assert.same({ "0 add {A}", "0 add {B}", "0 add_attachment {AT}" }, seen)
      assert.is_nil(sink.data) -- nothing collected
      assert.same({ 0, 3 }, sink.layer_ids)
      assert.same({ features = 2, attachments = 1 }, sink.counts[0])
      assert.same({ features = 0, attachments = 0 }, sink.counts[3])
      assert.equal(R, sink.fields.replicaID)
      assert.equal(1700000000123, sink.fields.replicaServerGen)
    end
  end)

  it("collects the data in the vendor's shape, nulls and exact numbers kept", function()
    local sink = create.new_sink(nil)
    feed(sink, DOC, 16)
    assert.equal(2, #sink.data)
    assert.equal(json.null, sink.data[1].features[2].attributes.NAME)
    assert.equal("a.jpg", sink.data[1].attachments[1].name)
    assert.equal(3, sink.data[2].id)
    assert.equal("[]", json.encode(sink.data[2].features))
  end)

  it("builds one result from the answer, the file and the job, the first non-empty replicaID winning", function()
    local sink = create.new_sink(nil)
    feed(sink, DOC, 64)
    local ctx = { service = "Parcels", model = "perReplica", layers = { 0, 3 }, replicaName = "asked" }
    local file = { url = "http://h/f.json", fields = sink.fields }
    local result, err = create.build(ctx, { transportType = "esriTransportTypeUrl", responseUrl = "x" },
      { status = "Completed", replicaID = "", resultUrl = "x" }, sink, file)
    assert.is_nil(err)
    assert.equal(R, result.replicaID)
    assert.equal("crew-1", result.replicaName)
    assert.equal(1700000000123, result.replicaServerGen)
    assert.same({ [0] = 1700000000123, [3] = 1700000000123 }, result.generations)
    assert.equal("url", result.transport)
    assert.equal("http://h/f.json", result.result_url)
    assert.equal(2, result.features)
    assert.equal(1, result.attachments)
    assert.same({ 0, 3 }, result.layers)
    assert.equal("createReplica crew-1 " .. R .. " of Parcels: perReplica, layers 0,3, 2 features, 1 attachment, "
      .. "via url, generation 1700000000123", tostring(result))
    assert.same({ service = "Parcels", replicaID = R, replicaName = "crew-1", model = "perReplica",
                  syncDirection = "bidirectional", replicaServerGen = 1700000000123 }, result:replica_state())
  end)

  it("gives a perLayer replica answered with one generation that generation for every layer", function()
    local sink = create.new_sink(nil)
    feed(sink, DOC, 64)
    local result = create.build({ service = "S", model = "perLayer", layers = { 0, 3 } }, sink.fields, nil, sink, nil)
    assert.same({ { id = 0, serverGen = 1700000000123 }, { id = 3, serverGen = 1700000000123 } },
      result.layerServerGens)
    assert.is_nil(result.replicaServerGen)
    assert.same({ { id = 0, serverGen = 1700000000123 }, { id = 3, serverGen = 1700000000123 } },
      result:replica_state().layers)
  end)

  it("takes per-layer generations sent as a JSON text, and refuses a perReplica answer they contradict", function()
    local sink = create.new_sink(nil)
    local result, err = create.build({ service = "S", model = "perLayer", layers = { 0, 1 } },
      { layerServerGens = '[{"id":0,"serverGen":"5"},{"id":1,"serverGen":6}]', replicaID = R }, nil, sink, nil)
    assert.is_nil(err)
    assert.same({ [0] = 5, [1] = 6 }, result.generations)
    local _, contradiction = create.build({ service = "S", model = "perReplica", layers = { 0, 1 } },
      { layerServerGens = { { id = 0, serverGen = 5 }, { id = 1, serverGen = 6 } } }, nil, sink, nil)
    assert.equal("protocol", contradiction.kind)
    result, err = create.build({ service = "S", model = "perReplica", layers = { 0, 1 } },
      { layerServerGens = { { id = 0, serverGen = 5 }, { id = 1, serverGen = 5 } } }, nil, sink, nil)
    assert.is_nil(err)
    assert.equal(5, result.replicaServerGen)
  end)

  it("streams a 50 000-feature result with its memory flat", function()
    local parts = { '{"replicaID":"' .. R .. '","replicaServerGen":7,"layers":[{"id":0,"features":[' }
    for i = 1, 50000 do
      parts[#parts + 1] = (i > 1 and "," or "") .. ('{"attributes":{"OBJECTID":%d,"NAME":"feature %d"},'
        .. '"geometry":{"x":%d.5,"y":2.25}}'):format(i, i, i)
    end
    parts[#parts + 1] = "]}]}"
    local text = table.concat(parts)
    parts = nil -- luacheck: ignore 311
    collectgarbage()
    local n, peak = 0, 0
    local sink = create.new_sink(function() n = n + 1 end)
    for i = 1, #text, 65536 do
      assert(sink.records:feed(text:sub(i, i + 65535)))
      sink.records:drain(sink.deliver)
      peak = math.max(peak, sink.records:pending())
    end
    assert(sink.records:finish())
    sink.records:drain(sink.deliver)
    assert.equal(50000, n)
    -- between drains the tape holds what was parsed since the last one: a
    -- chunk's records, or with the parse worker what its 1 MiB ring held
    assert.is_true(#text > 4 * 1024 * 1024)
    assert.is_true(peak < 2 * 1024 * 1024, "the tape held " .. peak .. " bytes")
  end)

  it("takes what a job status carried whole (absorb)", function()
    local sink = create.new_sink(nil)
    sink:absorb(json.decode(DOC))
    assert.equal(3, sink.downloaded)
    assert.same({ 0, 3 }, sink.layer_ids)
    assert.is_true(core.records ~= nil)
  end)
end)
