--- Geometries the store cannot represent (issue 28, bad input): what the
-- server sent that no GeoPackage blob of the layer's column holds exactly.
-- The C core (csrc/store/apply_geometry.c) never stores such a geometry as a NULL
-- that hides it, nor as a blob of another type than the column's: the
-- column gets an empty geometry of the layer's type (another kind, or no
-- kind it knows), the points it could read (a coordinate that is no
-- number), or the curves cut into points (Bézier and elliptic segments),
-- and the server's JSON is kept in gpkgext_geoservices_original_geometries with the
-- blob it made. While the blob is unchanged, st:get gives the server's JSON
-- back and a sync uploads it, never the degraded blob; once QGIS, GDAL or
-- the library changed the blob, the feature is what the user drew and is no
-- longer listed here.
--
-- The reason is read from the kept JSON and the layer's kind, so nothing
-- more is written while downloading. Used by Store:status (store.inspect)
-- and `geoservices status`.
-- @module geoservices.store.file.unrepresentable
-- @local
local json = require "geoservices.base.json"
local schema = require "geoservices.store.file.schema"

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

-- The ordinates past x and y a geometry has that a column with `has_z` /
-- `has_m` cannot hold (what csrc/store/apply_geometry.c keeps the JSON for,
-- issue 41: a service declaring less than its data holds): "Z", "M", "Z and
-- M", "numbers past x and y", or nil. The meaning of a coordinate's third
-- and fourth numbers is the geometry's own hasZ / hasM, else the layer's.
local function dropped(geometry, has_z, has_m)
  local z, m, extra
  if geometry.x ~= nil then
    z, m = type(geometry.z) == "number" and not has_z, type(geometry.m) == "number" and not has_m
  else
    local third, fourth = false, false
    local function walk(list)
      if type(list) ~= "table" then return end
      if type(list[1]) == "number" then
        third = third or (finite(list[3]) and true)
        fourth = fourth or (finite(list[4]) and true)
        return
      end
      for _, key in ipairs{ "a", "b", "c" } do walk(list[key]) end
      for _, v in ipairs(list) do walk(v) end
    end
    for _, member in ipairs{ "points", "paths", "rings", "curvePaths", "curveRings" } do walk(geometry[member]) end
    local gz, gm = has_z, has_m
    if geometry.hasZ ~= nil then gz = geometry.hasZ == true end
    if geometry.hasM ~= nil then gm = geometry.hasM == true end
    local k = (gz and 1 or 0) + (gm and 1 or 0)
    extra = (fourth and k < 2) or (third and k < 1)
    z = gz and not has_z and third
    m = gm and not has_m and (gz and fourth or (not gz and third))
  end
  if z and m then return "Z and M" end
  if z then return "Z" end
  if m then return "M" end
  if extra then return "numbers past x and y" end
end

--- Why the store cannot represent `geometry` (the server's JSON) in a layer
-- of kind `layer_kind` ("point", "multipoint", "polyline", "polygon") whose
-- column holds Z and M as `layer` (a spec: has_z, has_m; optional) says. Pure.
-- @treturn string the reason
function unrepresentable.reason(geometry, layer_kind, layer)
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
  local lost = layer and dropped(geometry, layer.has_z == true, layer.has_m == true)
  if lost and lost:find("^numbers") then
    return "coordinates with " .. lost .. " in a layer declared without Z and M (stored without them; "
      .. "the server's are kept)"
  elseif lost then
    return lost .. " values in a layer declared without them (stored without them; the server's are kept)"
  end
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
  local rows, msg, code = db:rows("SELECT 1 AS yes FROM pragma_table_list "
    .. "WHERE name = 'gpkgext_geoservices_original_geometries'")
  if not rows then return nil, msg, code end
  if not rows[1] then return out end
  local ids = {}
  for id in pairs(st.layers) do ids[#ids + 1] = id end
  table.sort(ids)
  for _, id in ipairs(ids) do
    local spec = st.layers[id]
    if spec.geometry_column and spec.globalid then
      local from = (" FROM gpkgext_geoservices_original_geometries AS o JOIN %s AS t ON t.%s = o.global_id "
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
                            reason = unrepresentable.reason(json.decode(r.geometry), spec.geometry_kind, spec) }
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
  local rows = st.db:rows(("SELECT 1 AS yes FROM gpkgext_geoservices_original_geometries AS o JOIN %s AS t ON t.%s = "
    .. "o.global_id WHERE o.layer_id = ? AND o.global_id = ? AND t.%s IS o.gpkg_geometry"):format(
    schema.ident(spec.table), schema.ident(spec.globalid), schema.ident(spec.geometry_column)), spec.id, gid)
  return rows ~= nil and rows[1] ~= nil -- no table: none kept
end

-- The server's geometry kept for a feature (its JSON decoded), whatever the blob holds now, or nil.
local function kept(st, spec, gid)
  if not (spec.geometry_column and spec.globalid) then return nil end
  local rows = st.db:rows("SELECT geometry FROM gpkgext_geoservices_original_geometries WHERE layer_id = ? "
    .. "AND global_id = ?",
    spec.id, gid)
  return rows and rows[1] and json.decode(rows[1].geometry) or nil -- no table: none kept
end

local function count_coordinates(list)
  local shape = {}
  for i, part in ipairs(list) do
    if type(part) ~= "table" then return nil end
    shape[i] = #part
  end
  return shape
end

-- The parts of an Esri geometry with straight segments (nil for curves or none).
local function parts_of(g)
  if g.curvePaths ~= nil or g.curveRings ~= nil then return nil end
  if g.points ~= nil then return type(g.points) == "table" and { g.points } or nil end
  local list = g.paths or g.rings
  return type(list) == "table" and list or nil
end

--- The geometry an edit sends, and that st:get gives, for a feature whose
-- server geometry has ordinates the column cannot hold (issue 41: a service
-- declaring less than its data has; kept in gpkgext_geoservices_original_geometries):
-- `geometry` (the blob's, as the user left it) with, at each vertex, the
-- server's Z and M the column lacks, so that moving vertices never flattens
-- them. An edit that adds or removes vertices (or parts) cannot say which
-- Z and M each vertex has: it is refused, naming the rule, and stays queued.
-- A geometry the user removed (null) is sent as null.
-- @param st the store
-- @tparam table spec the layer's spec
-- @string gid the GlobalID
-- @param geometry the geometry read from the blob (nil or null: none)
-- @return the geometry to use (itself when nothing is kept or lost)
-- @treturn ?string the rule the edit breaks (then it is not sent)
function unrepresentable.with_server_ordinates(st, spec, gid, geometry)
  if type(geometry) ~= "table" then return geometry end
  local server = kept(st, spec, gid)
  local lost = type(server) == "table" and dropped(server, spec.has_z == true, spec.has_m == true)
  if not lost then return geometry end
  local refusal = ("its geometry on the server has %s values the store's column cannot hold (the layer declares "
    .. "no Z or M values) and this edit adds or removes vertices: sending it would flatten them; move "
    .. "vertices without adding or removing any, or discard the edit"):format(lost)
  if server.x ~= nil then
    if geometry.x == nil then return geometry, refusal end
    local out = json.object()
    for k, v in pairs(geometry) do out[k] = v end
    if not spec.has_z and server.z ~= nil then out.z = server.z end
    if not spec.has_m and server.m ~= nil then out.m = server.m end
    return out
  end
  local theirs, ours = parts_of(server), parts_of(geometry)
  if not (theirs and ours) or kind_of(server) ~= kind_of(geometry) then return geometry, refusal end
  local a, b = count_coordinates(theirs), count_coordinates(ours)
  if not (a and b) or #a ~= #b then return geometry, refusal end
  for i = 1, #a do
    if a[i] ~= b[i] then return geometry, refusal end
  end
  -- each vertex: the user's x and y (and the column's Z or M), the server's others
  local sz, sm = spec.has_z == true, spec.has_m == true
  local gz, gm = sz, sm -- what the server's numbers mean: its own flags, else the layer's
  if server.hasZ ~= nil then gz = server.hasZ == true end
  if server.hasM ~= nil then gm = server.hasM == true end
  local positional = not (gz or gm) -- numbers the layer gives no meaning: kept in their places
  local any_z, any_m = false, false
  local parts = json.array()
  for i, part in ipairs(ours) do
    local out = json.array()
    for j, c in ipairs(part) do
      local s = theirs[i][j]
      local v = json.array{ c[1], c[2] }
      if positional then
        for k = 3, #s do v[k] = s[k] end
      else
        local z = sz and c[3] or (gz and s[3] or nil)
        local m = sm and c[sz and 4 or 3] or (gm and s[gz and 4 or 3] or nil)
        any_z, any_m = any_z or z ~= nil, any_m or m ~= nil
        v[3], v[4] = z, m
      end
      out[j] = v
    end
    parts[i] = out
  end
  local out = json.object()
  for k, v in pairs(geometry) do out[k] = v end
  out[geometry.points and "points" or geometry.paths and "paths" or "rings"] = geometry.points and parts[1] or parts
  if positional then
    out.hasZ, out.hasM = server.hasZ, server.hasM
  else
    out.hasZ, out.hasM = any_z or nil, any_m or nil
    if any_m and not any_z then -- [x, y, m]
      for _, part in ipairs(geometry.points and { parts[1] } or parts) do
        for _, v in ipairs(part) do v[3], v[4] = v[4], nil end
      end
    end
  end
  return out
end

--- Runs `fn()` (a library write of feature `gid`, which forgets what was
-- kept for it) and keeps the server's geometry across it when that one has
-- Z or M values the column cannot hold (issue 41): with the blob made from
-- it, so that once the feature moved, with_server_ordinates still finds the
-- server's ordinates. Inside the write's transaction.
-- @return what fn returns
function unrepresentable.kept_across(st, spec, gid, fn)
  local rows = spec.geometry_column and spec.globalid and type(gid) == "string" and st.db:rows(
    "SELECT geometry, gpkg_geometry FROM gpkgext_geoservices_original_geometries WHERE layer_id = ? AND global_id = ?",
    spec.id, gid)
  local row = rows and rows[1]
  local server = row and json.decode(row.geometry)
  if not (type(server) == "table" and dropped(server, spec.has_z == true, spec.has_m == true)) then return fn() end
  local ok, msg, code = fn()
  if not ok then return ok, msg, code end
  local done, m, c = st.db:run("INSERT OR IGNORE INTO gpkgext_geoservices_original_geometries (layer_id, global_id, "
    .. "geometry, gpkg_geometry) VALUES (?, ?, ?, CAST(? AS BLOB))", spec.id, gid, row.geometry, row.gpkg_geometry)
  if not done then return nil, m, c end
  return ok, msg, code
end

--- The server's geometry kept for a feature (its JSON decoded, without a
-- spatial reference), whatever the blob holds now, or nil: the base a
-- three-way merge takes for that feature's geometry (the blob was only
-- the store's stand-in for it).
function unrepresentable.kept_geometry(st, spec, gid)
  local g = kept(st, spec, gid)
  if type(g) == "table" then g.spatialReference = nil end
  return g
end

--- The server's geometry kept for a feature whose blob the local side has
-- not touched since (its JSON decoded, without a spatial reference), or
-- nil: what a three-way merge takes as that feature's local and base
-- geometry, the blob being only the store's stand-in for it.
function unrepresentable.untouched_geometry(st, spec, gid)
  if not unrepresentable.unchanged(st, spec, gid) then return nil end
  local g = kept(st, spec, gid)
  if type(g) == "table" then g.spatialReference = nil end
  return g
end

--- Runs `fn` (a put of `f`), and when `f`'s geometry is the server's kept
-- one, puts back the blob and the kept JSON as they were: a put of the same
-- geometry is no local edit of it (the blob stays the store's stand-in).
function unrepresentable.put_unchanged(st, spec, f, same, fn)
  local gid = f.attributes and f.attributes[spec.globalid]
  local rows = spec.geometry_column and spec.globalid and type(gid) == "string" and st.db:rows(
    "SELECT geometry, gpkg_geometry FROM gpkgext_geoservices_original_geometries WHERE layer_id = ? AND global_id = ?",
    spec.id, gid)
  local row = rows and rows[1]
  local server = row and json.decode(row.geometry)
  if type(server) == "table" then server.spatialReference = nil end
  -- (a kept JSON without a blob of its own: Z and M dropped, kept_across's case)
  if not (server and row.gpkg_geometry ~= nil and same(server, f.geometry)) then return fn() end
  local ok, msg, code = fn()
  if not ok then return ok, msg, code end
  -- (a Lua string binds as text: CAST keeps its bytes a blob, as the column and the comparison want)
  local done, m, c = st.db:run(("UPDATE %s SET %s = CAST(? AS BLOB) WHERE %s = ?"):format(schema.ident(spec.table),
    schema.ident(spec.geometry_column), schema.ident(spec.globalid)), row.gpkg_geometry, gid)
  if done then
    done, m, c = st.db:run("INSERT OR REPLACE INTO gpkgext_geoservices_original_geometries (layer_id, "
      .. "global_id, geometry, "
      .. "gpkg_geometry) VALUES (?, ?, ?, CAST(? AS BLOB))", spec.id, gid, row.geometry, row.gpkg_geometry)
  end
  if not done then return nil, m, c end
  return ok, msg, code
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
