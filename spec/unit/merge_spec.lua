-- The three-way merge of a feature (geoservices.sync.merge): what is sent,
-- what is kept from the server, what conflicts, and what each policy makes
-- of a conflict. Pure: no store, no server.
local json = require "geoservices.base.json"
local merge = require "geoservices.sync.merge"

local FIELDS = {
  { name = "OBJECTID", type = "esriFieldTypeOID" }, { name = "GlobalID", type = "esriFieldTypeGlobalID" },
  { name = "NAME", type = "esriFieldTypeString" }, { name = "OWNER", type = "esriFieldTypeString" },
  { name = "HEIGHT", type = "esriFieldTypeSingle" }, { name = "ACRES", type = "esriFieldTypeDouble" },
  { name = "REF", type = "esriFieldTypeGUID" }, { name = "UPDATED", type = "esriFieldTypeDate" },
}
local SKIP = { OBJECTID = true, GlobalID = true }

local function f(a, x, y)
  local attributes = { OBJECTID = 7, GlobalID = "{AAAAAAAA-0000-4000-8000-000000000001}", NAME = "Elm", OWNER = "Ann",
                       HEIGHT = 12.5, ACRES = 1.25, REF = json.null, UPDATED = 1700000000000 }
  for k, v in pairs(a or {}) do attributes[k] = v end
  return { attributes = attributes, geometry = { x = x or 10, y = y or 20 } }
end

local function run(base, mine, theirs, extra)
  local v = { base = base, mine = mine, theirs = theirs, fields = FIELDS, skip = SKIP }
  for k, val in pairs(extra or {}) do v[k] = val end
  return merge.feature(v)
end

local function kinds(r)
  local list = {}
  for _, k in ipairs(r.conflicts) do list[#list + 1] = k.kind .. (k.field and (":" .. k.field) or "") end
  table.sort(list)
  return list
end

describe("merge.feature", function()
  it("sends a field only we changed, and nothing else", function()
    local r = run(f(), f{ NAME = "Oak" }, f())
    assert.equal("update", r.op)
    assert.same({ NAME = "Oak" }, r.send.attributes)
    assert.is_nil(r.send.geometry)
    assert.same({}, r.conflicts)
    assert.same({}, r.kept)
  end)

  it("keeps a field only the server changed and sends ours beside it (disjoint edits: no conflict)", function()
    local r = run(f(), f{ NAME = "Oak" }, f{ OWNER = "Bob" })
    assert.same({ NAME = "Oak" }, r.send.attributes)
    assert.same({ OWNER = "Bob" }, r.kept)
    assert.same({}, r.conflicts)
    assert.equal("merged", merge.decide(r, "manual").outcome)
  end)

  it("finds no conflict when both sides changed a field to the same value", function()
    local r = run(f(), f{ NAME = "Oak" }, f{ NAME = "Oak" })
    assert.equal("none", r.op)
    assert.same({ "NAME" }, r.same)
    assert.same({}, r.conflicts)
    assert.equal("nothing", merge.decide(r, "manual").outcome)
  end)

  it("finds a conflict when both sides changed one field to different values, with the three values", function()
    local r = run(f(), f{ NAME = "Oak", OWNER = "Cid" }, f{ NAME = "Ash" })
    assert.same({ "field:NAME" }, kinds(r))
    local k = r.conflicts[1]
    assert.same({ "Elm", "Oak", "Ash" }, { k.base, k.mine, k.theirs })
    assert.same({ OWNER = "Cid" }, r.send.attributes) -- the rest of our edit
    assert.equal('NAME: base "Elm", here "Oak", server "Ash"', merge.describe(k))
  end)

  it("compares at the precision of the field's type: float32, doubles, GUIDs, dates", function()
    -- a float32 field gives back 12.3 as 12.300000190734863: the same value
    local r = run(f{ HEIGHT = 10 }, f{ HEIGHT = 12.3 }, f{ HEIGHT = 12.300000190734863 })
    assert.same({ "HEIGHT" }, r.same)
    assert.same({}, r.conflicts)
    -- but a double keeps its digits
    r = run(f{ ACRES = 1 }, f{ ACRES = 12.3 }, f{ ACRES = 12.300000190734863 })
    assert.same({ "field:ACRES" }, kinds(r))
    -- a GUID in another spelling is the same GUID
    r = run(f(), f{ REF = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}" }, f{ REF = "0b7b2d2a-5c1e-4f6a-9d3b-1a2b3c4d5e01" })
    assert.same({}, r.conflicts)
    -- a date one millisecond apart is another date
    r = run(f(), f{ UPDATED = 1700000000001 }, f{ UPDATED = 1700000000002 })
    assert.same({ "field:UPDATED" }, kinds(r))
  end)

  it("null and absent are alike; a field set to null here is sent as null", function()
    local r = run(f{ OWNER = "Ann" }, f{ OWNER = json.null }, f{ OWNER = "Ann" })
    assert.equal(json.null, r.send.attributes.OWNER)
    r = run(f{ OWNER = json.null }, f{ OWNER = json.null }, f{ OWNER = nil })
    assert.equal("none", r.op)
  end)

  it("moves: ours only is sent, theirs only kept, both to different places a move conflict", function()
    local r = run(f(), f(nil, 11, 20), f())
    assert.same({ x = 11, y = 20 }, r.send.geometry)
    r = run(f(), f(), f(nil, 12, 20))
    assert.equal("none", r.op)
    assert.same({ x = 12, y = 20 }, r.kept.geometry)
    r = run(f(), f(nil, 11, 20), f(nil, 12, 20))
    assert.same({ "move:geometry" }, kinds(r))
    -- moved alike, to the server's resolution
    r = run(f(), f(nil, 11, 20), f(nil, 11 + 1e-12, 20))
    assert.same({}, r.conflicts)
    -- a ring the server re-oriented and started elsewhere is the same polygon
    local square = { rings = { { { 0, 0 }, { 0, 1 }, { 1, 1 }, { 1, 0 }, { 0, 0 } } } }
    local turned = { rings = { { { 1, 1 }, { 0, 1 }, { 0, 0 }, { 1, 0 }, { 1, 1 } } } }
    r = merge.feature{ base = { attributes = {}, geometry = square }, mine = { attributes = {}, geometry = square },
                       theirs = { attributes = {}, geometry = turned }, skip = SKIP }
    assert.same({ "none" }, { r.op })
    assert.is_nil(r.kept.geometry)
    -- the spatial reference a server adds is not a move
    local located = { attributes = f().attributes, geometry = { x = 10, y = 20, spatialReference = { wkid = 4326 } } }
    r = run(f(), f(), located)
    assert.same({}, r.conflicts)
    assert.is_nil(r.kept.geometry)
  end)

  it("update vs delete, delete vs update: conflicts naming what changed; delete vs delete: nothing", function()
    local r = run(f(), f{ NAME = "Oak" }, nil)
    assert.same({ "update_delete" }, kinds(r))
    assert.same({ "NAME" }, r.conflicts[1].changed)
    assert.equal("none", r.op)
    r = run(f(), nil, f{ OWNER = "Bob" })
    assert.same({ "delete_update" }, kinds(r))
    assert.same({ "OWNER" }, r.conflicts[1].changed)
    r = run(f(), nil, f(nil, 1, 1))
    assert.same({ "geometry" }, r.conflicts[1].changed)
    r = run(f(), nil, f())
    assert.equal("delete", r.op)
    assert.same({}, r.conflicts)
    r = run(f(), nil, nil)
    assert.equal("none", r.op)
    assert.same({}, r.conflicts)
  end)

  it("a local add sends the whole feature; the server holding it already (our own add) sends nothing", function()
    local r = run(nil, f(), nil)
    assert.equal("add", r.op)
    r = run(nil, f(), f())
    assert.equal("none", r.op)
  end)

  it("merges attachments by id: ours sent, theirs kept, both changed one differently a conflict", function()
    local a1, a2 = { name = "a.jpg", size = 10 }, { name = "b.jpg", size = 20 }
    local r = run(f(), f(), f(), {
      base_attachments = { [1] = a1, [2] = a2 },
      mine_attachments = { [1] = { name = "a.jpg", size = 11 }, [2] = a2, [3] = { name = "c.jpg", size = 3 } },
      theirs_attachments = { [1] = a1, [2] = { name = "b.jpg", size = 21 } },
    })
    assert.same({}, r.conflicts)
    assert.same({ { id = 1, op = "update", value = { name = "a.jpg", size = 11 } },
                  { id = 3, op = "add", value = { name = "c.jpg", size = 3 } } }, r.attachments.send)
    assert.same({ { id = 2, value = { name = "b.jpg", size = 21 } } }, r.attachments.kept)
    r = run(f(), f(), f(), {
      base_attachments = { [1] = a1, [2] = a2 },
      mine_attachments = { [1] = { name = "a.jpg", size = 11 } },
      theirs_attachments = { [1] = { name = "a.jpg", size = 12 }, [2] = { name = "b.jpg", size = 21 } },
    })
    local how = {}
    for _, k in ipairs(r.conflicts) do how[k.id] = k.how end
    assert.same({ [1] = "update_update", [2] = "delete_update" }, how)
    r = run(f(), f(), f(), { base_attachments = { [1] = a1 }, mine_attachments = {}, theirs_attachments = {} })
    assert.same({}, r.conflicts)
    assert.same({}, r.attachments.send)
  end)
end)

describe("merge.decide", function()
  local conflict = function() return run(f(), f{ NAME = "Oak", OWNER = "Cid" }, f{ NAME = "Ash", ACRES = 3 }) end

  it("manual holds the whole edit back and overwrites nothing", function()
    local d = merge.decide(conflict(), "manual")
    assert.same({ "none", "held" }, { d.op, d.outcome })
    assert.is_nil(d.send)
    assert.equal(1, #d.conflicts)
  end)

  it("server keeps the server's value of the conflicting field and sends the rest", function()
    local d = merge.decide(conflict(), "server")
    assert.same({ "update", "server_kept" }, { d.op, d.outcome })
    assert.same({ OWNER = "Cid" }, d.send.attributes)
  end)

  it("local sends our value over the server's, and still reports the conflict", function()
    local d = merge.decide(conflict(), "local")
    assert.same({ "update", "local_kept" }, { d.op, d.outcome })
    assert.same({ NAME = "Oak", OWNER = "Cid" }, d.send.attributes)
    assert.equal(1, #d.conflicts)
    d = merge.decide(run(f(), nil, f{ OWNER = "Bob" }), "local")
    assert.same({ "delete", "local_kept" }, { d.op, d.outcome })
    -- the server deleted it: a server never takes a deleted GlobalID again, so it is held back
    d = merge.decide(run(f(), f{ NAME = "Oak" }, nil), "local")
    assert.same({ "none", "held" }, { d.op, d.outcome })
    d = merge.decide(run(f(), f(nil, 1, 1), f(nil, 2, 2)), "local")
    assert.same({ x = 1, y = 1 }, d.send.geometry)
  end)

  it("without conflict says whether the server's changes were merged in", function()
    assert.equal("sent", merge.decide(run(f(), f{ NAME = "Oak" }, f()), "manual").outcome)
    assert.equal("merged", merge.decide(run(f(), f{ NAME = "Oak" }, f{ OWNER = "Bob" }), "server").outcome)
  end)

  it("refuses an unknown policy naming it", function()
    assert.has_error(function() merge.decide(conflict(), "newest") end,
      "merge.decide: policy must be manual, server or local, not newest")
  end)
end)
