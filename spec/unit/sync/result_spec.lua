-- Building the normalized result of a synchronization from what a sink kept
-- and what the response, the job status and the result file said.
local errors = require "geoservices.base.errors"
local sink_mod = require "geoservices.sync.sink"
local sync_result = require "geoservices.sync.result"

local DUPLICATE = -2147217395

local function failure(layer, gid)
  return { globalId = gid, success = false, error = { code = 1000 + layer, description = "no " .. gid } }
end

describe("sync result", function()
  it("builds from an embedded response: fields, edits, counts, transport and response kind", function()
    local sink = sink_mod.new()
    sink:record("add", 0, { attributes = { GlobalID = "{A}" } })
    sink:record("add_result", 0, { globalId = "{N}", success = true })
    local doc = { replicaID = "{R}", replicaServerGen = 13, transportType = "svcTransportTypeEmbedded",
                  responseType = "svcReplicaResponseTypeEdits" }
    local result = assert(sync_result.build(doc, nil, sink, nil))
    assert.equal("{R}", result.replicaID)
    assert.equal(13, result.replicaServerGen)
    assert.is_nil(result.layerServerGens)
    assert.equal("svcTransportTypeEmbedded", result.transportType)
    assert.equal("embedded", result.transport)
    assert.equal("svcReplicaResponseTypeEdits", result.responseType)
    assert.equal("edits", result.response)
    assert.equal(sink.edits, result.edits)
    assert.equal(1, result.downloaded)
    assert.equal(1, result.succeeded)
    assert.same({}, result.failed_edits)
    assert.same({ [0] = { succeeded = 1, failed = 0 } }, result.counts)
    assert.is_nil(result.partial)
    assert.is_nil(result.result_url)
  end)

  it("picks each field from the result file first, then the response, then the job status", function()
    local file = { url = "https://x/result.json", fields = { replicaServerGen = 20 } }
    local doc = { replicaServerGen = 10, replicaID = "{FROM DOC}", responseType = "svcReplicaResponseTypeNoEdits" }
    local status = { replicaServerGen = 5, replicaID = "{FROM STATUS}", responseType = "x",
                     layerServerGens = { { id = 0, serverGen = 4 } } }
    local result = assert(sync_result.build(doc, status, sink_mod.new(), file))
    assert.equal(20, result.replicaServerGen)
    assert.equal("{FROM DOC}", result.replicaID)
    assert.equal("no_edits", result.response)
    assert.same({ { id = 0, serverGen = 4 } }, result.layerServerGens)
    assert.equal("https://x/result.json", result.result_url)
  end)

  it("takes the transport from the job status or the response before the result file", function()
    local file = { url = "https://x/r.json",
                   fields = { replicaServerGen = 1, transportType = "svcTransportTypeEmbedded" } }
    local result = assert(sync_result.build({ transportType = "esriTransportTypeURL" }, nil, sink_mod.new(), file))
    assert.equal("esriTransportTypeURL", result.transportType)
    assert.equal("url", result.transport)
    result = assert(sync_result.build({ transportType = "svcTransportTypeEmbedded" },
      { transportType = "svcTransportTypeUrl" }, sink_mod.new(), file))
    assert.equal("url", result.transport)
    result = assert(sync_result.build({}, nil, sink_mod.new(), file))
    assert.equal("embedded", result.transport)
  end)

  it("guesses the transport from where the result came when nothing says", function()
    local result = assert(sync_result.build({ replicaServerGen = 1 }, nil, sink_mod.new(), nil))
    assert.equal("embedded", result.transport)
    assert.is_nil(result.transportType)
    result = assert(sync_result.build({}, nil, sink_mod.new(),
      { url = "https://x/r.json", fields = { replicaServerGen = 2 } }))
    assert.equal("url", result.transport)
    assert.is_nil(result.response)
  end)

  it("makes generations integers, also when the status resource carries them as strings", function()
    local status = { replicaServerGen = "42",
                     layerServerGens = { { id = "1", serverGen = "7" }, { id = 2, serverGen = 8.0 } } }
    local result = assert(sync_result.build({}, status, sink_mod.new(), nil))
    assert.equal(42, result.replicaServerGen)
    assert.equal("integer", math.type(result.replicaServerGen))
    assert.same({ { id = 1, serverGen = 7 }, { id = 2, serverGen = 8 } }, result.layerServerGens)
    for _, l in ipairs(result.layerServerGens) do
      assert.equal("integer", math.type(l.id))
      assert.equal("integer", math.type(l.serverGen))
    end
  end)

  it("accepts layerServerGens alone (a perLayer replica)", function()
    local result = assert(sync_result.build({ layerServerGens = { { id = 0, serverGen = 3 } } }, nil, sink_mod.new()))
    assert.is_nil(result.replicaServerGen)
    assert.same({ { id = 0, serverGen = 3 } }, result.layerServerGens)
  end)

  it("is a protocol error when no generation arrived", function()
    local result, err = sync_result.build({ replicaID = "{R}", replicaServerGen = "soon" }, nil, sink_mod.new(),
      { url = "https://x/r.json", fields = {} })
    assert.is_nil(result)
    assert.is_true(errors.is(err))
    assert.equal("protocol", err.kind)
    assert.equal("https://x/r.json", err.url)
    assert.matches("replicaServerGen soon, not an integer", err.message)
    local none
    none, err = sync_result.build({ replicaID = "{R}" }, nil, sink_mod.new(), { url = "https://x/r.json", fields = {} })
    assert.is_nil(none)
    assert.matches("neither replicaServerGen nor layerServerGens", err.message)
  end)

  it("is partial when the job ended CompletedWithErrors, whatever the case", function()
    local doc = { replicaServerGen = 1 }
    assert.is_true(assert(sync_result.build(doc, { status = "CompletedWithErrors" }, sink_mod.new())).partial)
    assert.is_true(assert(sync_result.build(doc, { status = "COMPLETEDWITHERRORS" }, sink_mod.new())).partial)
    assert.is_nil(assert(sync_result.build(doc, { status = "Completed" }, sink_mod.new())).partial)
  end)

  it("sorts the failed edits by layer, then GlobalID", function()
    local sink = sink_mod.new()
    sink:record("update_result", 3, failure(3, "{B}"))
    sink:record("add_result", 1, failure(1, "{Z}"))
    sink:record("delete_result", 3, failure(3, "{A}"))
    sink:record("add_attachment_result", 1, failure(1, "{C}"))
    local result = assert(sync_result.build({ replicaServerGen = 1 }, nil, sink))
    local order = {}
    for i, f in ipairs(result.failed_edits) do order[i] = f.layer .. f.globalId end
    assert.same({ "1{C}", "1{Z}", "3{A}", "3{B}" }, order)
    assert.same({ [1] = { succeeded = 0, failed = 2 }, [3] = { succeeded = 0, failed = 2 } }, result.counts)
  end)

  it("keeps no edits when the result file was saved to a path", function()
    local sink = sink_mod.new()
    sink:record("add", 0, { a = 1 })
    local result = assert(sync_result.build({}, nil, sink, { url = "https://x/r", output = "/tmp/r.json",
                                                             fields = { replicaServerGen = 9 } }))
    assert.is_nil(result.edits)
    assert.equal("/tmp/r.json", result.output)
  end)

  it("prints as a one-line summary", function()
    local sink = sink_mod.new()
    for i = 1, 3 do sink:record("add_result", 0, { globalId = "{N" .. i .. "}", success = true }) end
    sink:record("add_result", 0, failure(0, "{F}"))
    for _ = 1, 7 do sink:record("update", 0, { attributes = {} }) end
    local result = assert(sync_result.build({ replicaID = "{R}", replicaServerGen = 13,
      responseType = "svcReplicaResponseTypeEdits" }, nil, sink, { url = "https://x/r", fields = {} }))
    assert.equal("sync {R}: edits via url, 3 uploaded ok, 1 failed, 7 downloaded, generation 13", tostring(result))

    result = assert(sync_result.build({ replicaID = "{R}", layerServerGens = { { id = 0, serverGen = 5 },
      { id = 2, serverGen = 6 } } }, { status = "CompletedWithErrors" }, sink_mod.new(),
      { url = "https://x/r", output = "out.json", fields = {} }))
    assert.equal("sync {R}: nil via url, 0 uploaded ok, 0 failed, saved to out.json, generation layers 0:5,2:6 "
      .. "(partial)", tostring(result))
  end)

  it("strict_error fails the call on the first failed edit, keeping the result reachable", function()
    local sink = sink_mod.new()
    sink:record("add_result", 2,
      { globalId = "{B}", success = false, error = { code = DUPLICATE, description = "exists" } })
    sink:record("delete_result", 1, failure(1, "{A}"))
    local result = assert(sync_result.build({ replicaServerGen = 1 }, nil, sink))
    local err = sync_result.strict_error(result)
    assert.is_true(errors.is(err))
    assert.equal("edits", err.kind)
    assert.equal("2 edit(s) failed; first: layer 1 delete feature {A}: no {A}. The replica was synchronized "
      .. "(generation 1): do not send the same request again", err.message)
    assert.is_true(err.synchronized)
    assert.equal(1001, err.code)
    assert.equal(result.failed_edits, err.failed_edits)
    assert.equal(result, err.result)
  end)

  it("finds the result address under each of its spellings", function()
    for _, key in ipairs{ "URL", "resultUrl", "responseUrl", "resultURL", "url" } do
      assert.equal("https://x/" .. key, sync_result.result_url{ [key] = "https://x/" .. key }, key)
    end
    assert.equal("https://x/URL", sync_result.result_url{ url = "https://x/url", URL = "https://x/URL" })
    assert.is_nil(sync_result.result_url{ statusUrl = "https://x/status" })
  end)

  it("finds the status address under each of its spellings", function()
    for _, key in ipairs{ "statusUrl", "statusURL", "statusurl" } do
      assert.equal("https://x/" .. key, sync_result.status_url{ [key] = "https://x/" .. key }, key)
    end
    assert.is_nil(sync_result.status_url{ resultUrl = "https://x/r" })
  end)

  it("a store's result prints its summary: one count per outcome, conflicts by the policy that decided them", function()
    local s = sync_result.summary{ sent = 2, merged = 1, held = 1, local_kept = 1, refused = 1, downloaded = 4 }
    assert.equal(2, s.conflicts)
    assert.equal("2 sent, 1 merged, 2 conflicts (1 held back, 1 local values sent over the server's), 0 rejected "
      .. "by the server, 1 refused here, 4 downloaded", tostring(s))
    assert.equal("0 sent, 0 merged, 0 conflicts, 0 rejected by the server, 0 refused here, 1 queued again, "
      .. "0 downloaded", tostring(sync_result.summary{ requeued = 1 }))
    local result = assert(sync_result.build({ replicaID = "{R}", replicaServerGen = 13 }, nil, sink_mod.new()))
    result.summary = s
    assert.equal("sync {R}: " .. tostring(s) .. ", generation 13", tostring(result))
  end)
end)
