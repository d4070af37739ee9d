-- Two things a real feature service does that the emulator did not (issue
-- 34): GlobalIDs (and replica IDs) compare as a GUID column does, in any
-- letter case and with or without braces, wherever the emulator looks one
-- up (an edit's add, update, delete and attachment parent, a query's where
-- GlobalID IN (...), queryAttachments, the replica of a sync); and edits
-- uploaded as an item of the service's uploads are a sync's edits when it
-- names them by editsUploadId with editsUploadFormat JSON (any case), while
-- SQLITE, a missing format, an unknown item, or edits sent both ways are
-- refused with nothing applied, naming the parameter.
local core = require "geoservices.core"
local json = require "geoservices.base.json"
local transport = require "geoservices.net.transport"
local helper = require "spec.helper"

local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local PARCEL2 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}"
local NEW1 = "{D0C0DE00-0000-4000-8000-00000000AB01}"
local NEW2 = "{D0C0DE00-0000-4000-8000-00000000AB02}"

-- lower case, no braces: the same GUID as `gid`
local function spelt_otherwise(gid) return gid:gsub("[{}]", ""):lower() end

local function post(emu, path, fields)
  local parts = {}
  for _, kv in ipairs(fields) do parts[#parts + 1] = core.urlencode(kv[1]) .. "=" .. core.urlencode(kv[2]) end
  local resp = assert(transport.perform(emu.driver, { url = emu.url .. path, method = "POST",
    body = table.concat(parts, "&"), content_type = "application/x-www-form-urlencoded", timeout_ms = 10000 }))
  return resp.status, json.decode(resp.body)
end

local function get(emu, path)
  local resp = assert(transport.perform(emu.driver, { url = emu.url .. path, timeout_ms = 10000 }))
  return resp.status, json.decode(resp.body)
end

local function sync(emu, edits, extra, replica)
  local fields = { { "f", "json" }, { "replicaID", replica or CREW1 }, { "replicaServerGen", "1" },
                   { "transportType", "esriTransportTypeEmbedded" } }
  if edits then fields[#fields + 1] = { "edits", json.encode(edits) } end
  for _, kv in ipairs(extra or {}) do fields[#fields + 1] = kv end
  return post(emu, "/Parcels/FeatureServer/synchronizeReplica", fields)
end

local function layer0(features) return { { id = 0, features = features } } end

local function parcels(emu) return emu:control("state").featureServices.Parcels end

local function details(body)
  return body.error.message .. " " .. table.concat(body.error.details or {}, " ")
end

describe("emulator: GlobalIDs compare as a GUID column does", function()
  local emu
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function() emu:reset() end)

  it("an update and a delete naming a GlobalID in lower case without braces reach its feature", function()
    local _, body = sync(emu, layer0{
      updates = { { attributes = { GlobalID = spelt_otherwise(PARCEL1), OWNER = "lower case" } } },
      deleteIds = { "{" .. spelt_otherwise(PARCEL2) .. "}" } })
    assert.is_nil(body.error)
    local features = parcels(emu).layers["0"].features
    assert.equal("lower case", features[PARCEL1].attributes.OWNER)
    assert.equal(PARCEL1, features[PARCEL1].attributes.GlobalID) -- kept as the column keeps it
    assert.is_nil(features[PARCEL2])
  end)

  it("an add whose GlobalID exists in another spelling is a duplicate", function()
    local _, body = sync(emu, layer0{ adds = { { attributes = { GlobalID = spelt_otherwise(NEW1), APN = "a" },
                                                 geometry = { x = -117.2, y = 34.1 } } } })
    assert.is_nil(body.error)
    assert.equal(NEW1, parcels(emu).layers["0"].features[NEW1].attributes.GlobalID)
    local _, again = sync(emu, layer0{ adds = { { attributes = { GlobalID = NEW1, APN = "b" },
                                                  geometry = { x = -117.2, y = 34.1 } } } })
    assert.is_table(again.error) -- rollbackOnFailure: the duplicate refuses the request
    assert.matches(NEW1, details(again), 1, true)
    assert.equal("a", parcels(emu).layers["0"].features[NEW1].attributes.APN)
  end)

  it("query where GlobalID IN (...) finds features in any spelling", function()
    local where = ("GlobalID IN ('%s', '{%s}')"):format(spelt_otherwise(PARCEL1), spelt_otherwise(PARCEL2))
    local _, body = get(emu, "/Parcels/FeatureServer/0/query?f=json&outFields=*&where=" .. core.urlencode(where))
    assert.equal(2, #body.features)
  end)

  it("an attachment's parent and queryAttachments' globalIds in any spelling", function()
    local att = "{D0C0DE00-0000-4000-8000-00000000A77A}"
    local _, body = sync(emu, { { id = 0, attachments = { adds = { {
      globalId = spelt_otherwise(att), parentGlobalId = spelt_otherwise(PARCEL1), name = "a.txt",
      contentType = "text/plain" } } } } })
    assert.is_nil(body.error)
    local _, groups = get(emu, "/Parcels/FeatureServer/0/queryAttachments?f=json&globalIds="
      .. core.urlencode(spelt_otherwise(PARCEL1)))
    assert.equal(1, #groups.attachmentGroups)
    assert.equal(att, groups.attachmentGroups[1].attachmentInfos[1].globalId)
  end)

  it("a sync names its replica in any spelling", function()
    local _, body = sync(emu, nil, nil, spelt_otherwise(CREW1))
    assert.is_nil(body.error)
    assert.equal(CREW1, body.replicaID)
  end)

  it("unRegisterReplica: * unregisters every replica (documented since 10.5.1)", function()
    local _, body = post(emu, "/Parcels/FeatureServer/unRegisterReplica", { { "f", "json" }, { "replicaID", "*" } })
    assert.is_true(body.success)
    assert.same({}, parcels(emu).replicas)
  end)
end)

-- A multipart POST of one file part `file`.
local function upload(emu, content, filename)
  local boundary = "----geoservices-spec-boundary"
  local body = table.concat{
    "--", boundary, "\r\n",
    'Content-Disposition: form-data; name="f"\r\n\r\njson\r\n',
    "--", boundary, "\r\n",
    ('Content-Disposition: form-data; name="file"; filename="%s"\r\n'):format(filename or "edits.json"),
    "Content-Type: application/json\r\n\r\n", content, "\r\n",
    "--", boundary, "--\r\n" }
  local resp = assert(transport.perform(emu.driver, { url = emu.url .. "/Parcels/FeatureServer/uploads/upload",
    method = "POST", body = body, content_type = "multipart/form-data; boundary=" .. boundary, timeout_ms = 10000 }))
  return json.decode(resp.body)
end

describe("emulator: edits uploaded as an item (editsUploadId, editsUploadFormat)", function()
  local emu
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function() emu:reset() end)

  local EDITS = layer0{ adds = { { attributes = { GlobalID = NEW1, APN = "uploaded" },
                                   geometry = { x = -117.2, y = 34.1 } } },
                        updates = { { attributes = { GlobalID = PARCEL1, OWNER = "uploaded" } } } }

  it("uploads an item and serves its resource", function()
    local answer = upload(emu, json.encode(EDITS))
    assert.is_true(answer.success)
    local id = answer.item.itemID
    assert.matches("^i[%x%-]+$", id)
    local _, item = get(emu, "/Parcels/FeatureServer/uploads/" .. id .. "?f=json")
    assert.equal(id, item.itemID)
    assert.equal("edits.json", item.itemName)
    assert.is_true(item.committed)
  end)

  for _, format in ipairs{ "JSON", "json", "Json" } do
    it("applies the item's edits with editsUploadFormat " .. format, function()
      local id = upload(emu, json.encode(EDITS)).item.itemID
      local gen = parcels(emu).gen
      local _, body = sync(emu, nil, { { "editsUploadId", id }, { "editsUploadFormat", format } })
      assert.is_nil(body.error)
      local svc = parcels(emu)
      assert.equal(gen + 1, svc.gen)
      assert.equal("uploaded", svc.layers["0"].features[NEW1].attributes.APN)
      assert.equal("uploaded", svc.layers["0"].features[PARCEL1].attributes.OWNER)
      local results = body.edits[1].features
      assert.is_true(results.addResults[1].success)
      assert.is_true(results.updateResults[1].success)
    end)
  end

  local REFUSED = {
    { "SQLITE", function(id) return { { "editsUploadId", id }, { "editsUploadFormat", "SQLITE" } } end,
      "editsUploadFormat" },
    { "sqlite in lower case", function(id) return { { "editsUploadId", id }, { "editsUploadFormat", "sqlite" } } end,
      "editsUploadFormat" },
    { "no editsUploadFormat", function(id) return { { "editsUploadId", id } } end, "editsUploadFormat" },
    { "an unknown format", function(id) return { { "editsUploadId", id }, { "editsUploadFormat", "zip" } } end,
      "editsUploadFormat" },
    { "an item that was never uploaded", function() return { { "editsUploadId", "i0000" },
      { "editsUploadFormat", "JSON" } } end, "editsUploadId" },
    { "edits sent both ways", function(id) return { { "editsUploadId", id }, { "editsUploadFormat", "JSON" },
      { "edits", json.encode(layer0{ adds = { { attributes = { GlobalID = NEW2 } } } }) } } end, "edits" },
    { "a format without an item", function() return { { "editsUploadFormat", "JSON" } } end, "editsUploadFormat" },
  }
  for _, case in ipairs(REFUSED) do
    it("refuses " .. case[1] .. " with a 400 naming " .. case[3] .. "; nothing applied", function()
      local id = upload(emu, json.encode(EDITS)).item.itemID
      local gen = parcels(emu).gen
      local status, body = sync(emu, nil, case[2](id))
      assert.equal(400, status)
      assert.is_table(body.error)
      assert.matches(case[3], details(body), 1, true)
      assert.equal(gen, parcels(emu).gen)
      assert.is_nil(parcels(emu).layers["0"].features[NEW1])
      assert.is_nil(parcels(emu).layers["0"].features[NEW2])
    end)
  end

  it("refuses an item whose content is not an edits array, naming the position", function()
    local id = upload(emu, '{"not": "edits"}').item.itemID
    local status, body = sync(emu, nil, { { "editsUploadId", id }, { "editsUploadFormat", "JSON" } })
    assert.equal(400, status)
    assert.matches("edits", details(body))
  end)
end)

describe("emulator: uploaded items across a restart with --state-file", function()
  it("are still there", function()
    local dir = helper.tmp_dir()
    local args = { "--state-file", dir .. "/state.json" }
    local emu = helper.start_emulator{ args = args }
    local id = upload(emu, json.encode(layer0{ adds = { { attributes = { GlobalID = NEW2, APN = "kept" },
                                                            geometry = { x = -117.2, y = 34.1 } } } })).item.itemID
    emu:stop()
    emu = helper.start_emulator{ args = args }
    local _, body = sync(emu, nil, { { "editsUploadId", id }, { "editsUploadFormat", "json" } })
    local kept = parcels(emu).layers["0"].features[NEW2]
    emu:stop()
    os.execute("rm -rf " .. helper.shell_quote(dir))
    assert.is_nil(body.error)
    assert.equal("kept", kept.attributes.APN)
  end)
end)
