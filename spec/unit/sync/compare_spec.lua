-- geoservices.sync.compare: a value the server gives back against the
-- value sent, at the precision its field keeps (issue 34).
local compare = require "geoservices.sync.compare"
local json = require "geoservices.base.json"

local FIELDS = {
  { name = "W", type = "esriFieldTypeSingle" }, { name = "L", type = "esriFieldTypeDouble" },
  { name = "N", type = "esriFieldTypeInteger" }, { name = "D", type = "esriFieldTypeDate" },
  { name = "Ref", type = "esriFieldTypeGUID" }, { name = "S", type = "esriFieldTypeString" },
}

describe("compare", function()
  local rules = compare.rules(FIELDS, { wkid = 3857 })

  it("knows each field's kind by its type, whatever the case of its name", function()
    assert.equal("single", compare.kind(rules, "W"))
    assert.equal("single", compare.kind(rules, "w"))
    assert.equal("guid", compare.kind(rules, "REF"))
    assert.is_nil(compare.kind(rules, "S"))
    assert.is_nil(compare.kind(rules, "unknown"))
  end)

  it("numbers: float32 to 1e-6, doubles (and unknown fields) to 1e-9, integers exactly", function()
    assert.is_true(compare.value("single", 3.14159265, 3.1415927410125732))
    assert.is_true(compare.value("single", 1e-20, 1.0000000200408773e-20))
    assert.is_false(compare.value("single", 3.14159, 3.1416))
    assert.is_false(compare.value("double", 3.14159265, 3.1415927410125732))
    assert.is_true(compare.value(nil, 1 / 3, 0.33333333333333331))
    assert.is_true(compare.value("integer", 5, 5.0))
    assert.is_false(compare.value("integer", 5, 6))
  end)

  it("dates: to the second where the server keeps seconds, to the millisecond where it keeps them", function()
    assert.is_true(compare.value("date", 1700000000999, 1700000000000, rules)) -- truncated
    assert.is_true(compare.value("date", 1700000000600, 1700000001000, rules)) -- rounded
    assert.is_false(compare.value("date", 1700000000000, 1700000002000, rules))
    assert.is_false(compare.value("date", 1700000000123, 1700000000456, rules)) -- it gives milliseconds back
    assert.is_true(compare.value("date", 1700000000123, 1700000000123, rules))
    -- what the layer says wins over what one value shows
    local ms = compare.rules(FIELDS, nil, { date_unit = "ms" })
    assert.is_false(compare.value("date", 1700000000999, 1700000000000, ms))
    local s = compare.rules(FIELDS, nil, { date_unit = "s" })
    assert.is_true(compare.value("date", 1700000000123, 1700000000456, s))
  end)

  it("GUIDs whatever their case and braces; strings exactly; null and absent alike", function()
    assert.is_true(compare.value("guid", "{5e1a0c2b-1111-4a5b-9c8d-000000000001}",
      "5E1A0C2B-1111-4A5B-9C8D-000000000001"))
    assert.is_false(compare.value(nil, "abc", "ABC"))
    assert.is_true(compare.value("double", json.null, nil))
    assert.is_false(compare.value("double", json.null, 0))
  end)

  it("rings: any start point, either orientation, with or without the closing vertex, in any order", function()
    local square = { { 0, 0 }, { 0, 10 }, { 10, 10 }, { 10, 0 }, { 0, 0 } }
    local reversed = { { 10, 0 }, { 10, 10 }, { 0, 10 }, { 0, 0 } } -- not closed, started elsewhere
    assert.is_true(compare.geometry({ rings = { square } }, { rings = { reversed } }, rules))
    local hole = { { 2, 2 }, { 4, 2 }, { 4, 4 }, { 2, 2 } }
    assert.is_true(compare.geometry({ rings = { square, hole } }, { rings = { hole, reversed } }, rules))
    assert.is_false(compare.geometry({ rings = { square, hole } }, { rings = { reversed } }, rules))
    -- the same vertices in another cyclic order is another ring (a bow tie)
    assert.is_false(compare.geometry({ rings = { square } },
      { rings = { { { 0, 0 }, { 10, 10 }, { 0, 10 }, { 10, 0 }, { 0, 0 } } } }, rules))
  end)

  it("paths keep their direction; points their order", function()
    local path = { { 0, 0 }, { 1, 1 }, { 2, 0 } }
    assert.is_true(compare.geometry({ paths = { path } }, { paths = { { { 0, 0 }, { 1, 1 }, { 2, 0 } } } }, rules))
    assert.is_false(compare.geometry({ paths = { path } }, { paths = { { { 2, 0 }, { 1, 1 }, { 0, 0 } } } }, rules))
    assert.is_false(compare.geometry({ points = { { 0, 0 }, { 1, 1 } } }, { points = { { 1, 1 }, { 0, 0 } } }, rules))
  end)

  it("coordinates within the layer's tolerance, else its resolution, else 1e-9 relative; z and m their own", function()
    local tol = compare.rules(nil, { xyTolerance = 0.001, zTolerance = 0.01, mTolerance = 0.5 })
    assert.is_true(compare.geometry({ x = 1.0004, y = 2, z = 3.005, m = 4.4 }, { x = 1, y = 2, z = 3, m = 4 }, tol))
    assert.is_false(compare.geometry({ x = 1.002, y = 2 }, { x = 1, y = 2 }, tol))
    assert.is_false(compare.geometry({ x = 1, y = 2, z = 3.02 }, { x = 1, y = 2, z = 3 }, tol))
    local grid = compare.rules(nil, { xyUnits = 10000 }) -- a 1e-4 grid
    assert.is_true(compare.geometry({ x = 1.00004, y = 2 }, { x = 1, y = 2 }, grid))
    assert.is_false(compare.geometry({ x = 1.0004, y = 2 }, { x = 1, y = 2 }, grid))
    assert.is_false(compare.geometry({ x = 1.00004, y = 2 }, { x = 1, y = 2 }, compare.rules(nil, nil)))
    -- a third value is m where the geometry has m and no z
    local zm = { rings = { { { 0, 0, 7 }, { 0, 10, 7 }, { 10, 0, 7 }, { 0, 0, 7 } } }, hasM = true }
    local held = { rings = { { { 0, 0, 7.4 }, { 0, 10, 7.4 }, { 10, 0, 7.4 }, { 0, 0, 7.4 } } }, hasM = true }
    assert.is_true(compare.geometry(zm, held, tol))
    zm.hasM, held.hasM = nil, nil -- now z, to 0.01
    assert.is_false(compare.geometry(zm, held, tol))
  end)

  it("leaves the spatial reference and hasZ/hasM out of the shape; other members compared as coordinates", function()
    assert.is_true(compare.geometry({ x = 1, y = 2 }, { x = 1, y = 2, spatialReference = { wkid = 3857 },
                                                         hasZ = false }, rules))
    assert.is_true(compare.geometry({ xmin = 0, ymin = 0, xmax = 1, ymax = 1 },
      { xmin = 0, ymin = 0, xmax = 1.0000000000001, ymax = 1 }, rules))
    assert.is_false(compare.geometry({ x = 1, y = 2 }, { x = 1, y = 2, z = 5 }, rules))
  end)

  it("holds: the fields an edit carries by their kinds, and its geometry", function()
    local held = { attributes = { W = 0.10000000149011612, D = 1700000000000, S = "a", OBJECTID = 9 },
                   geometry = { x = 1, y = 2 } }
    assert.is_true(compare.holds(held, { attributes = { W = 0.1, D = 1700000000500, S = "a", OBJECTID = -1 },
                                         geometry = { x = 1, y = 2 } }, { OBJECTID = true }, rules))
    assert.is_false(compare.holds(held, { attributes = { S = "b" } }, {}, rules))
    assert.is_false(compare.holds(held, { geometry = { x = 1, y = 3 } }, {}, rules))
    assert.is_true(compare.holds(held, { attributes = {} }, nil, nil))
    -- a field name in another case is the same field (the server's names are not case-sensitive)
    assert.is_true(compare.holds(held, { attributes = { w = 0.1, s = "a" } }, {}, rules))
    assert.is_false(compare.holds(held, { attributes = { s = "b" } }, {}, rules))
  end)
end)
