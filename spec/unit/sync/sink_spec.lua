-- The record sink of a synchronization result, fed by hand, by a real record
-- extractor and by absorb(); nothing is downloaded.
local json = require "geoservices.base.json"
local sink_mod = require "geoservices.sync.sink"

local DUPLICATE = -2147217395

-- A response with downloaded changes and the outcomes of uploaded edits.
local DOC = [[{"replicaID":"{R}","replicaServerGen":13,"edits":[
{"id":0,"features":{"adds":[{"attributes":{"GlobalID":"{A1}"}}],"updates":[{"attributes":{"GlobalID":"{U1}"}}],
"deleteIds":["{D1}"],"addResults":[{"globalId":"{N1}","success":true},
{"globalId":"{N2}","success":false,"error":{"code":-2147217395,"description":"exists"}}],
"updateResults":[{"globalId":"{U9}","objectId":9,"success":"true"}]},
"attachments":{"adds":[{"globalId":"{AT1}"}],
"deleteResults":[{"globalID":"{AT9}","success":false,"error":{"code":1019,"message":"Object is missing."}}]}},
{"id":3,"features":{"deleteIds":["{D3}"]}}]}]]

local function stream(sink, text)
  assert(sink.records:feed(text))
  assert(sink.records:finish())
  sink.records:drain(sink.deliver)
end

describe("sync sink", function()
  it("starts empty, with an edits array when there is no on_change", function()
    local sink = sink_mod.new()
    assert.same({}, sink.fields)
    assert.same({}, sink.failed_edits)
    assert.same({}, sink.counts)
    assert.equal(0, sink.succeeded)
    assert.equal(0, sink.downloaded)
    assert.is_true(json.is_array(sink.edits))
    assert.equal("[]", json.encode(sink.edits))
    assert.is_nil(sink_mod.new(function() end).edits)
  end)

  it("keeps top-level fields by key", function()
    local sink = sink_mod.new()
    sink:record("field", nil, "{R}", "replicaID")
    sink.deliver("field", nil, 12, "replicaServerGen")
    assert.same({ replicaID = "{R}", replicaServerGen = 12 }, sink.fields)
    assert.equal("[]", json.encode(sink.edits)) -- fields are no edits
  end)

  it("creates a layer entry on its first record, in document order, with empty lists", function()
    local sink = sink_mod.new()
    sink:record("layer", 5)
    sink:record("layer_field", 5, 77, "layerServerGen")
    sink:record("layer", 2)
    sink:record("layer", 5)
    assert.equal(2, #sink.edits)
    assert.equal(5, sink.edits[1].id)
    assert.equal(77, sink.edits[1].layerServerGen)
    assert.equal(2, sink.edits[2].id)
    for _, part in ipairs{ "features", "attachments" } do
      local text = json.encode(sink.edits[2][part])
      for _, list in ipairs{ "adds", "updates", "deleteIds" } do
        assert.matches('"' .. list .. '":%[%]', text) -- empty lists encode as [], never {}
      end
    end
    assert.equal(0, sink.downloaded)
  end)

  it("counts edit results per layer, keeping each failure with its code and description", function()
    local sink = sink_mod.new()
    sink:record("add_result", 0, { globalId = "{N1}", success = true })
    sink:record("update_result", 0, { globalId = "{U1}", success = "true" })
    sink:record("add_result", 0, { globalId = "{N2}", objectId = 4, success = false,
                                   error = { code = DUPLICATE + 0.0, description = "exists" } })
    sink:record("delete_attachment_result", 1, { globalID = "{AT}", success = false,
                                                 error = { code = 1019, message = "Object is missing." } })
    sink:record("update_result", 1, { globalId = "{U2}" }) -- no success member: a failure without details
    assert.equal(2, sink.succeeded)
    assert.same({ [0] = { succeeded = 2, failed = 1 }, [1] = { succeeded = 0, failed = 2 } }, sink.counts)
    assert.same({
      { layer = 0, op = "add", target = "feature", globalId = "{N2}", objectId = 4, code = DUPLICATE,
        description = "exists" },
      { layer = 1, op = "delete", target = "attachment", globalId = "{AT}", code = 1019,
        description = "Object is missing." },
      { layer = 1, op = "update", target = "feature", globalId = "{U2}" },
    }, sink.failed_edits)
    assert.equal("integer", math.type(sink.failed_edits[1].code))
    assert.equal(0, sink.downloaded)
  end)

  it("puts downloaded records and results into the 2.1 edits array", function()
    local sink = sink_mod.new()
    local add = { attributes = { GlobalID = "{A}" } }
    sink:record("add", 0, add)
    sink:record("delete", 0, "{D}")
    sink:record("add_attachment", 0, { globalId = "{AT}" })
    sink:record("add_result", 0, { globalId = "{N}", success = true })
    assert.equal(3, sink.downloaded)
    assert.equal(1, #sink.edits)
    local e = sink.edits[1]
    assert.equal(add, e.features.adds[1])
    assert.same({ "{D}" }, e.features.deleteIds)
    assert.same({ { globalId = "{AT}" } }, e.attachments.adds)
    assert.same({ { globalId = "{N}", success = true } }, e.features.addResults)
    assert.is_true(json.is_array(e.features.addResults))
  end)

  it("hands downloaded records to on_change instead, and builds no edits", function()
    local got = {}
    local sink = sink_mod.new(function(layer, kind, value) got[#got + 1] = { layer, kind, value } end)
    sink:record("layer", 0)
    sink:record("update", 0, { attributes = { GlobalID = "{U}" } })
    sink:record("delete_attachment", 2, "{X}")
    sink:record("add_result", 0, { success = false, error = { code = 1 } })
    assert.same({ { 0, "update", { attributes = { GlobalID = "{U}" } } }, { 2, "delete_attachment", "{X}" } }, got)
    assert.equal(2, sink.downloaded)
    assert.equal(1, #sink.failed_edits)
    assert.is_nil(sink.edits)
  end)

  it("gives the same outcome streamed through the extractor as absorbed from the decoded response", function()
    local streamed = sink_mod.new()
    stream(streamed, DOC)
    local absorbed = sink_mod.new()
    absorbed:absorb(assert(json.decode(DOC)))
    for _, sink in ipairs{ streamed, absorbed } do
      assert.equal(5, sink.downloaded)
      assert.equal(2, sink.succeeded)
      assert.same({ [0] = { succeeded = 2, failed = 2 } }, sink.counts)
      assert.equal(2, #sink.edits)
      assert.same({ 0, 3 }, { sink.edits[1].id, sink.edits[2].id })
      assert.same({ "{D3}" }, sink.edits[2].features.deleteIds)
      assert.equal(2, #sink.edits[1].features.addResults)
    end
    assert.same(streamed.edits, absorbed.edits)
    assert.same(streamed.failed_edits, absorbed.failed_edits)
    assert.equal("{R}", streamed.fields.replicaID)
    assert.same({}, absorbed.fields) -- absorb takes the records only; the caller holds the document
  end)

  it("absorbs layer ids given as strings and skips lists it does not know", function()
    local sink = sink_mod.new()
    sink:absorb{ edits = { { id = "4", features = { adds = { { a = 1 } }, somethingNew = { { b = 2 } } } } } }
    assert.equal(4, sink.edits[1].id)
    assert.equal(1, sink.downloaded)
    assert.is_nil(sink.edits[1].features.somethingNew)
    sink:absorb{}
    sink:absorb{ edits = "not a list" }
    assert.equal(1, #sink.edits)
  end)

  it("starts a fresh document with next_document: fields reset, outcomes and records add up", function()
    local sink = sink_mod.new()
    stream(sink, '{"statusUrl":"s","edits":[{"id":0,"features":{"addResults":[{"globalId":"{N}","success":true}]}}]}')
    local first = sink.records
    sink:next_document()
    assert.are_not.equal(first, sink.records)
    assert.same({}, sink.fields)
    stream(sink, '{"replicaServerGen":14,"edits":[{"id":0,"features":{"adds":[{"x":1}]}},'
      .. '{"id":1,"features":{"deleteIds":["{Z}"]}}]}')
    assert.same({ replicaServerGen = 14 }, sink.fields)
    assert.equal(1, sink.succeeded)
    assert.equal(2, sink.downloaded)
    assert.equal(2, #sink.edits) -- layer 0's entry is reused
    assert.same({ { x = 1 } }, sink.edits[1].features.adds)
    assert.equal(1, #sink.edits[1].features.addResults)
  end)
end)
