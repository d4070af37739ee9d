-- The true curves of issue 28 as a server sends them (spec/store/curves_spec.lua,
-- spec/qgis/curves_in_qgis.lua): the Utilities service's layers, their
-- geometries (circular arcs, a Bézier, elliptic arcs, straight ones, Z), a
-- store made from its result file, and the edits a sync of it sends.
local json = require "geoservices.base.json"
local scripted = require "spec.support.scripted_store"
local store = require "geoservices.store"

local M = {}

-- the Utilities service, its result file and the edits a sync sends (spec/support/scripted_store.lua)
local layer, gid = scripted.layer, scripted.gid

local LAYERS = {
  layer(0, "Mains", "esriGeometryPolyline"),
  layer(1, "Parcels", "esriGeometryPolygon"),
  layer(2, "Pipes", "esriGeometryPolyline", true),
  layer(3, "Ditches", "esriGeometryPolyline"),
}

-- layer id -> its geometries, as a server sends them
local CURVES = {
  [0] = {
    { curvePaths = { { { 0, 0 }, { c = { { 10, 0 }, { 5, 5 } } }, { 20, 0 } } } }, -- an arc, then a segment
    { paths = { { { 0, 10 }, { 20, 10 } } } },                                      -- straight
    { curvePaths = { { { 0, 20 }, { b = { { 30, 20 }, { 10, 30 }, { 20, 30 } } } } } }, -- a cubic Bézier
    { curvePaths = { { { 40, 0 }, { a = { { 30, 0 }, { 35, 0 }, 0, 0, 0, 5, 0.4 } } } } }, -- an elliptic arc
    { curvePaths = { { { 50, 0 }, { a = { { 60, 0 }, { 55, 0 }, 1, 1 } } } } }, -- a circular arc by its centre
    { curvePaths = { { { 0, 40 }, { q = { { 10, 40 } } } } } },                 -- a kind the store does not know
  },
  [1] = {
    { curveRings = { -- a disc with a round hole
      { { 0, 0 }, { c = { { 20, 0 }, { 10, 10 } } }, { c = { { 0, 0 }, { 10, -10 } } } },
      { { 5, 0 }, { c = { { 15, 0 }, { 10, -5 } } }, { c = { { 5, 0 }, { 10, 5 } } } } } },
    { rings = { { { 0, 20 }, { 0, 25 }, { 5, 25 }, { 5, 20 }, { 0, 20 } } } },
    { curveRings = { { { 0, 30 }, { 0, 40 }, { c = { { 10, 40 }, { 5, 45 } } }, { 10, 30 }, { 0, 30 } } } },
  },
  [2] = {
    { hasZ = true, curvePaths = { { { 0, 0, 5 }, { c = { { 10, 0, 7 }, { 5, 5 } } } } } },
  },
  [3] = {
    { paths = { { { 0, 0 }, { 1, 1 } } } },
  },
}

local REPLICA = scripted.replica("{5E1A0C2B-1111-4A5B-9C8D-000000000029}")

-- The edits a sync of st sends, by GlobalID; the server's version of the edited features, read before
-- the upload (the rebase, issue 36), is unchanged.
function M.uploaded(st)
  local features = json.array()
  for i, g in ipairs(CURVES[0]) do features[i] = scripted.feature(0, i, g) end
  local by_gid = {}
  for _, e in ipairs(scripted.uploaded(st, { [0] = features })) do
    for _, f in ipairs(e.features.updates or {}) do by_gid[f.attributes.GlobalID] = f end
  end
  return by_gid
end

--- JSON round trip: what a geometry is once encoded (arrays and objects alike).
function M.plain(v) return json.decode(json.encode(v)) end

M.LAYERS, M.CURVES, M.gid = LAYERS, CURVES, gid

--- A store made in `dir` from the curves' result file: its path.
function M.make_store(dir)
  local path = dir .. "/curves.gpkg"
  scripted.write_result(dir .. "/curves.json", CURVES)
  local st = assert(store.create_from(path, REPLICA, LAYERS, dir .. "/curves.json"))
  st:close()
  return path
end

return M
