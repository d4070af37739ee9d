-- Reading an update back (geoservices.sync.verify) at the precision the
-- server's field keeps (issue 34): the server gives back what it stored, so
-- a float32 field, a date kept to the second, a ring re-oriented and
-- started elsewhere, coordinates snapped to the layer's grid are the values
-- sent; and a date kept to the millisecond is not taken for another one a
-- fraction of a second away (the old 1e-9 relative rule was 1.7 s on epoch
-- milliseconds: an edit not applied was taken as applied). The server is a
-- stub client whose query answers as a real one does (fields, spatial
-- reference, features).
local verify = require "geoservices.sync.verify"

local GID = "{5E1A0C2B-1111-4A5B-9C8D-00000000C001}"

local FIELDS = {
  { name = "OBJECTID", type = "esriFieldTypeOID" }, { name = "GlobalID", type = "esriFieldTypeGlobalID" },
  { name = "WIDTH", type = "esriFieldTypeSingle" }, { name = "LENGTH", type = "esriFieldTypeDouble" },
  { name = "INSPECTED", type = "esriFieldTypeDate" }, { name = "OWNER", type = "esriFieldTypeString" },
}

-- A client whose layer query answers `held` (attributes and geometry of the one feature).
local function server(held, sr)
  local attrs = { OBJECTID = 7, GlobalID = GID }
  for k, v in pairs(held.attributes or {}) do attrs[k] = v end
  return {
    url_for = function(_, path) return "http://127.0.0.1:9/server/" .. path end,
    post = function()
      return { fields = FIELDS, spatialReference = sr or { wkid = 3857 },
               features = { { attributes = attrs, geometry = held.geometry } } }
    end,
  }
end

-- The verdict on an update that sent `sent` over `base`, the server holding `held`.
local function verdict(sent, base, held, sr)
  local attrs = { GlobalID = GID }
  for k, v in pairs(sent.attributes or {}) do attrs[k] = v end
  local v = assert(verify.edits(server(held, sr), "Parcels", {
    { key = "k", layer = 0, op = "update", globalId = GID, feature = { attributes = attrs, geometry = sent.geometry },
      base = base },
  }))
  local out = v.k
  return type(out) == "table" and (out.conflict and "conflict" or "rejected") or out
end

describe("reading an update back", function()
  it("takes a float32 field's stored value for the value sent (0.1 kept as 0.100000001490116)", function()
    assert.equal("applied", verdict({ attributes = { WIDTH = 0.1 } }, { attributes = { WIDTH = 0.5 } },
      { attributes = { WIDTH = 0.10000000149011612 } }))
    -- a float32 value that is another number is still another value
    assert.equal("conflict", verdict({ attributes = { WIDTH = 0.1 } }, { attributes = { WIDTH = 0.5 } },
      { attributes = { WIDTH = 0.1001 } }))
  end)

  it("keeps a double to 1e-9", function()
    assert.equal("conflict", verdict({ attributes = { LENGTH = 0.1 } }, { attributes = { LENGTH = 0.5 } },
      { attributes = { LENGTH = 0.10000000149011612 } }))
  end)

  it("takes a date kept to the second for the date sent with milliseconds", function()
    assert.equal("applied", verdict({ attributes = { INSPECTED = 1700000000999 } },
      { attributes = { INSPECTED = 1600000000000 } }, { attributes = { INSPECTED = 1700000000000 } }))
  end)

  it("does not take a date kept to the millisecond for one 333 ms away: the server still holds the base", function()
    assert.equal("not_applied", verdict({ attributes = { INSPECTED = 1700000000123 } },
      { attributes = { INSPECTED = 1700000000456 } }, { attributes = { INSPECTED = 1700000000456 } }))
  end)

  it("takes a ring re-oriented and started elsewhere, rings in another order, for the polygon sent", function()
    local sent = { rings = { { { 0, 0 }, { 0, 10 }, { 10, 10 }, { 10, 0 }, { 0, 0 } },
                             { { 2, 2 }, { 4, 2 }, { 4, 4 }, { 2, 2 } } } }
    local held = { rings = { { { 4, 4 }, { 4, 2 }, { 2, 2 }, { 4, 4 } },
                             { { 10, 10 }, { 0, 10 }, { 0, 0 }, { 10, 0 }, { 10, 10 } } },
                   spatialReference = { wkid = 3857 } }
    assert.equal("applied", verdict({ geometry = sent }, { geometry = { rings = { { { 0, 0 }, { 1, 1 }, { 1, 0 },
      { 0, 0 } } } } }, { geometry = held }))
    -- another ring is another polygon
    local moved = { rings = { { { 0, 0 }, { 0, 11 }, { 10, 10 }, { 10, 0 }, { 0, 0 } }, held.rings[1] } }
    assert.equal("conflict", verdict({ geometry = sent }, { geometry = { rings = { { { 0, 0 }, { 1, 1 }, { 1, 0 },
      { 0, 0 } } } } }, { geometry = moved }))
  end)

  it("takes coordinates within the layer's xy tolerance for the ones sent", function()
    local sr = { wkid = 2229, xyTolerance = 0.001, zTolerance = 0.001, mTolerance = 0.001 }
    assert.equal("applied", verdict({ geometry = { x = 1234.5671, y = 20.0004 } }, { geometry = { x = 1, y = 1 } },
      { geometry = { x = 1234.567, y = 20 } }, sr))
    assert.equal("conflict", verdict({ geometry = { x = 1234.5671, y = 20.0004 } }, { geometry = { x = 1, y = 1 } },
      { geometry = { x = 1234.57, y = 20 } }, sr))
  end)
end)
