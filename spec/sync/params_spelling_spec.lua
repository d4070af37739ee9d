-- The attachments-by-URL parameter as each operation's form spells it
-- (issue 34): synchronizeReplica's is returnAttachmentDatabyURL (the
-- service's own form; the vendor's Python API sends that name),
-- createReplica's returnAttachmentsDataByUrl (its reference page, the
-- vendor's sync workflow examples). The store sent createReplica's name to
-- synchronizeReplica, which a server does not read. What goes out is seen
-- through an observer of the client (Client:observe), against the emulator.
local geoservices = require "geoservices"
local helper = require "spec.helper"

-- the request events of `client` for one operation: `{ [name] = value }` per request
local function capture(client, operation)
  local list = {}
  client:observe(function(event)
    if event.type == "request" and event.url:find("/" .. operation, 1, true) then
      local fields = {}
      for _, pair in ipairs(event.fields or {}) do fields[pair[1]] = pair[2] end
      list[#list + 1] = fields
    end
  end)
  return list
end

describe("the attachments-by-URL parameter", function()
  local world = helper.store_world{ service = "Utilities", layers = { 2 }, syncModel = "perLayer",
                                    returnAttachments = true }
  setup(world.start)
  teardown(world.stop)

  it("goes to createReplica as returnAttachmentsDataByUrl, to a store's synchronizeReplica as "
    .. "returnAttachmentDatabyURL", function()
    local client = world.client()
    local creates = capture(client, "createReplica")
    local st = assert(geoservices.store.create(client, world.dir .. "/v.gpkg",
      { service = "Utilities", layers = { 2 }, syncModel = "perLayer", replicaName = "v", returnAttachments = true },
      { poll_interval = 0.05, timeout = 30 }))
    assert.equal(1, #creates)
    assert.equal("true", creates[1].returnAttachmentsDataByUrl)
    assert.is_nil(creates[1].returnAttachmentDatabyURL)
    local syncs = capture(client, "synchronizeReplica")
    assert(st:sync(client))
    st:close()
    assert.equal(1, #syncs)
    assert.equal("true", syncs[1].returnAttachmentDatabyURL)
    assert.is_nil(syncs[1].returnAttachmentsDataByUrl)
  end)

  it("takes either name from client:synchronize_replica and sends the form's; two that disagree are refused "
    .. "before anything is sent", function()
    local client = world.client()
    local st = world.create("w")
    local rep = assert(st:replica())
    st:close()
    local syncs = capture(client, "synchronizeReplica")
    local gens = {}
    for _, l in ipairs(rep.layerServerGens) do gens[#gens + 1] = { id = l.id, serverGen = l.serverGen } end
    assert(client:synchronize_replica("Utilities", { replicaID = rep.replicaID, syncLayers = gens,
                                                     returnAttachmentsDataByUrl = false }))
    assert.equal("false", syncs[1].returnAttachmentDatabyURL)
    assert.is_nil(syncs[1].returnAttachmentsDataByUrl)
    local _, err = client:synchronize_replica("Utilities", { replicaID = rep.replicaID, syncLayers = gens,
      returnAttachmentDatabyURL = true, returnAttachmentsDataByUrl = false })
    assert.equal("invalid", err.kind)
    assert.truthy(err.message:find("returnAttachmentDatabyURL", 1, true), err.message)
    assert.truthy(err.message:find("returnAttachmentsDataByUrl", 1, true), err.message)
    assert.equal(1, #syncs)
  end)
end)
