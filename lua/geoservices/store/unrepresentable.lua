--- Geometries the store cannot represent (issue 28, bad input): what the
-- server sent that no GeoPackage blob of the layer's column holds exactly.
-- The C core (csrc/store/apply_geometry.c) never stores such a geometry as a NULL
-- that hides it, nor as a blob of another type than the column's: the
-- column gets an empty geometry of the layer's type (another kind, or no
-- kind it knows), the points it could read (a coordinate that is no
-- number), or the curves cut into points (Bézier and elliptic segments),
-- and the server's JSON is kept in geoservices_original_geometries with the
-- blob it made. While the blob is unchanged, st:get gives the server's JSON
-- back and a sync uploads it, never the degraded blob; once QGIS, GDAL or
-- the library changed the blob, the feature is what the user drew and is no
-- longer listed here.
--
-- The reason is read from the kept JSON and the layer's kind, so nothing
-- more is written while downloading. Used by Store:status (store.inspect)
-- and `geoservices status`.
-- @module geoservices.store.unrepresentable
-- @local
local json = require "geoservices.json"
local schema = require "geoservices.store.schema"

local unrepresentable = {}

--- At most this many are listed (the count is always whole).
unrepresentable.LIMIT = 100

-- The kind of an Esri geometry, from its members.
local function kind_of(g)
  if g.x ~= nil or g.y ~= nil then return "point" end
  if g.points ~= nil then return "multipoint" end
  if g.paths ~= nil or g.curvePaths ~= nil then return "polyline" end
  if g.rings ~= nil or g.curveRings ~= nil then return "polygon" end
  return nil
end

local function finite(v)
  return math.type(v) == "integer" or (type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge)
end

-- null and "NaN" are Esri's empty point
local function point_ordinate_ok(v)
  return v == nil or v == json.null or v == "NaN" or finite(v)
end

-- Whether a coordinate array (or curve object) of a geometry is no point the
-- store can read; and whether the geometry has Bézier or elliptic segments.
local function scan(value, found)
  if type(value) ~= "table" then return end
  if value.a ~= nil or value.b ~= nil then found.curves = true end
  for _, key in ipairs{ "a", "b", "c" } do scan(value[key], found) end -- a curve object's points
  if value[1] ~= nil and type(value[1]) ~= "table" then -- a coordinate: [x, y, ...]
    if not (finite(value[1]) and finite(value[2])) then found.not_a_number = true end
    return
  end
  for _, v in ipairs(value) do scan(v, found) end
end

--- Why the store cannot represent `geometry` (the server's JSON) in a layer
-- of kind `layer_kind` ("point", "multipoint", "polyline", "polygon"). Pure.
-- @treturn string the reason
function unrepresentable.reason(geometry, layer_kind)
  if type(geometry) ~= "table" then return "a geometry that is not a JSON object" end
  local kind = kind_of(geometry)
  if not kind then
    local members = {}
    for k in pairs(geometry) do
      if k ~= "spatialReference" and k ~= "hasZ" and k ~= "hasM" then members[#members + 1] = tostring(k) end
    end
    table.sort(members)
    return ("no geometry the store knows (members: %s)"):format(table.concat(members, ", "))
  end
  if kind ~= layer_kind then
    return ("a %s in a %s layer"):format(kind, tostring(layer_kind))
  end
  if kind == "point" and not (point_ordinate_ok(geometry.x) and point_ordinate_ok(geometry.y)) then
    return "a coordinate that is not a number (an empty point is stored)"
  end
  local found = {}
  for _, member in ipairs{ "points", "paths", "rings", "curvePaths", "curveRings" } do scan(geometry[member], found) end
  if found.not_a_number then return "a coordinate that is not a number (the other points are stored)" end
  if found.curves then return "Bézier or elliptic segments (stored cut into points)" end
  return "kept as the server sent it"
end

--- The features whose geometry the store holds only as the server's JSON,
-- their blob unchanged since: `{ {layer =, layerId =, globalId =, reason =}, ..., count = n }`
-- (at most @{LIMIT} listed, `count` all of them), layers in order.
-- @param st the store
-- @return the list, or nil, message, code
function unrepresentable.list(st)
  local db = st:_db()
  local out = { count = 0 }
  local rows, msg, code = db:rows("SELECT 1 AS yes FROM sqlite_master WHERE name = 'geoservices_original_geometries'")
  if not rows then return nil, msg, code end
  if not rows[1] then return out end
  local ids = {}
  for id in pairs(st.layers) do ids[#ids + 1] = id end
  table.sort(ids)
  for _, id in ipairs(ids) do
    local spec = st.layers[id]
    if spec.geometry_column and spec.globalid then
      local from = (" FROM geoservices_original_geometries AS o JOIN %s AS t ON t.%s = o.global_id "
        .. "WHERE o.layer_id = ? AND t.%s IS o.gpkg_geometry"):format(schema.ident(spec.table),
        schema.ident(spec.globalid), schema.ident(spec.geometry_column))
      rows, msg, code = db:rows("SELECT count(*) AS n" .. from, id)
      if not rows then return nil, msg, code end
      out.count = out.count + rows[1].n
      local room = unrepresentable.LIMIT - #out
      if rows[1].n > 0 and room > 0 then
        rows, msg, code = db:rows("SELECT o.global_id, o.geometry" .. from .. " ORDER BY o.global_id LIMIT ?", id, room)
        if not rows then return nil, msg, code end
        for _, r in ipairs(rows) do
          out[#out + 1] = { layer = spec.name or spec.table, layerId = id, globalId = r.global_id,
                            reason = unrepresentable.reason(json.decode(r.geometry), spec.geometry_kind) }
        end
      end
    end
  end
  return out
end

--- Whether feature `gid` of layer `spec` still holds the blob made from
-- the server's kept JSON: its geometry is the server's, and an update sends
-- none (the kept JSON may be one the server refuses back, a polyline in a
-- point layer; a base decoded from the blob never equals it).
-- @treturn boolean
function unrepresentable.unchanged(st, spec, gid)
  if not (spec.geometry_column and spec.globalid) then return false end
  local rows = st.db:rows(("SELECT 1 AS yes FROM geoservices_original_geometries AS o JOIN %s AS t ON t.%s = "
    .. "o.global_id WHERE o.layer_id = ? AND o.global_id = ? AND t.%s IS o.gpkg_geometry"):format(
    schema.ident(spec.table), schema.ident(spec.globalid), schema.ident(spec.geometry_column)), spec.id, gid)
  return rows ~= nil and rows[1] ~= nil -- no table: none kept
end

--- "N geometries the store cannot represent" (nil for none).
function unrepresentable.summary(list)
  local n = list and list.count or 0
  if n == 0 then return nil end
  return ("%d geometr%s the store cannot represent"):format(n, n == 1 and "y" or "ies")
end

--- One line per listed feature: "layer Parcels {GUID}: reason".
function unrepresentable.line(u)
  return ("%s %s: %s"):format(u.layer, u.globalId, u.reason)
end

return unrepresentable
