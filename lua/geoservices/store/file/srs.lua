--- The replica store's coordinate systems: the gpkg_spatial_ref_sys row of
-- each layer's spatialReference, and which layers have a CRS the store
-- could not define (for `st:status()`). Internal (geoservices.store.file.schema
-- re-exports the rows; geoservices.store.edits.inspect reports the unknown ones).
--
-- A row's definition is WKT 1, as 12-128r18 asks and GDAL and QGIS read:
-- * the service's own `wkt` when its spatialReference carries one (the
--   server's word before any database's);
-- * else the WKT of `latestWkid`, then of `wkid`, from PROJ's database
--   (core.srs_definition, csrc/store/srs.c: EPSG first, then ESRI, so an
--   Esri-only code such as 102003 is defined too, and the row names the
--   authority that defines it), the WKT GDAL itself writes;
-- * else, a code neither knows (or no proj.db), "undefined", with the
--   reason in the row's description: GDAL and QGIS then show no CRS, and
--   @{unknown} lists the layer so `geoservices status` says so.
-- The Web Mercator codes (102100, 102113, 900913) are stored as EPSG:3857,
-- the code every GIS reads. The standard's three rows (4326, -1, 0) are
-- written whatever PROJ holds; 4326's is the WKT PROJ and GDAL give.
-- @module geoservices.store.file.srs
-- @local
local core = require "geoservices.core"
local shared = require "geoservices.store.shared"

local srs = {}

-- EPSG:4326 as PROJ's database and GDAL write it (core.srs_definition(4326)
-- gives these bytes; spec/store/crs_spec checks), kept here so the row
-- every GeoPackage must have never depends on proj.db.
local WGS84 = 'GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563,'
  .. 'AUTHORITY["EPSG","7030"]],AUTHORITY["EPSG","6326"]],PRIMEM["Greenwich",0,AUTHORITY["EPSG","8901"]],'
  .. 'UNIT["degree",0.0174532925199433,AUTHORITY["EPSG","9122"]],AXIS["Latitude",NORTH],'
  .. 'AXIS["Longitude",EAST],AUTHORITY["EPSG","4326"]]'
srs.WGS84_WKT = WGS84

local SRS_4326 = {
  srs_name = "WGS 84 geodetic", srs_id = 4326, organization = "EPSG", organization_coordsys_id = 4326,
  definition = WGS84, description = "longitude/latitude coordinates in decimal degrees on the WGS 84 spheroid",
}

--- The three rows every GeoPackage has (12-128r18 requirement 11).
srs.REQUIRED = {
  SRS_4326,
  { srs_name = "Undefined cartesian SRS", srs_id = -1, organization = "NONE", organization_coordsys_id = -1,
    definition = "undefined", description = "undefined cartesian coordinate reference system" },
  { srs_name = "Undefined geographic SRS", srs_id = 0, organization = "NONE", organization_coordsys_id = 0,
    definition = "undefined", description = "undefined geographic coordinate reference system" },
}

-- Esri's codes of Web Mercator, stored as EPSG:3857.
local MERCATOR_WKIDS = { [3857] = true, [102100] = true, [102113] = true, [900913] = true }

-- The authority a code would have: the vendor's codes below 32768 are EPSG's, its own above.
local function authority_of(code) return code < 32768 and "EPSG" or "ESRI" end

-- The name a WKT gives its CRS (PROJCS["name",...), or nil.
local function wkt_name(wkt) return wkt:match('^%s*[%a_]+%[%s*"([^"]*)"') end

--- The gpkg_spatial_ref_sys row of a layer's spatialReference (see the
-- module's description); a WKT-only reference gets a private id, none at
-- all the undefined cartesian row.
-- @tparam ?table sr the spatialReference ({wkid =, latestWkid =, wkt =})
-- @tparam function next_private_id gives an unused srs_id for a WKT-only reference
-- @tparam[opt] function lookup core.srs_definition unless given (wkid -> wkt, name, organization | nil, message)
-- @treturn table the row
function srs.row(sr, next_private_id, lookup)
  lookup = lookup or core.srs_definition
  if type(sr) ~= "table" then return srs.REQUIRED[2] end
  local wkid, latest = math.tointeger(sr.wkid), math.tointeger(sr.latestWkid)
  if wkid and wkid <= 0 then wkid = nil end
  if latest and latest <= 0 then latest = nil end
  if MERCATOR_WKIDS[latest or 0] or MERCATOR_WKIDS[wkid or 0] then latest, wkid = 3857, nil end
  local code = latest or wkid
  if code == 4326 then return SRS_4326 end
  local own_wkt = type(sr.wkt) == "string" and sr.wkt:find("%S") and sr.wkt
  if code and own_wkt then
    return { srs_name = wkt_name(own_wkt) or ("%s:%d"):format(authority_of(code), code), srs_id = code,
             organization = authority_of(code), organization_coordsys_id = code, definition = own_wkt,
             description = ("wkid %d of the feature service, with its own WKT"):format(code) }
  end
  if code then
    local message
    for _, c in ipairs(latest and wkid and latest ~= wkid and { latest, wkid } or { code }) do
      local wkt, name, org = lookup(c)
      if wkt then
        return { srs_name = name, srs_id = c, organization = org, organization_coordsys_id = c, definition = wkt,
                 description = ("wkid %d of the feature service (%s:%d in PROJ's database)"):format(c, org, c) }
      end
      message = message or name
    end
    return { srs_name = ("%s:%d"):format(authority_of(code), code), srs_id = code, organization = authority_of(code),
             organization_coordsys_id = code, definition = "undefined",
             description = ("wkid %d of the feature service, unknown: %s"):format(code, tostring(message)) }
  end
  if own_wkt then
    local id = next_private_id()
    return { srs_name = wkt_name(own_wkt) or ("feature service WKT " .. id), srs_id = id, organization = "NONE",
             organization_coordsys_id = id, definition = own_wkt, description = "from the layer's WKT" }
  end
  return srs.REQUIRED[2]
end

--- The layers whose CRS has a code but no definition in the file (neither
-- the service nor PROJ's database gave one): GDAL and QGIS show them
-- without a CRS. The standard's undefined rows (-1, 0) are not listed: a
-- layer without any spatialReference has no code to miss.
-- @param db the store's connection (core Store)
-- @string path the store's path, for an error
-- @treturn[1] {table,...} `{layer =, srs_id =, organization =, code =, reason =}` per layer, by layer name
-- @return[2] nil
-- @treturn[2] table err
function srs.unknown(db, path)
  local rows, msg, code = db:rows("SELECT c.table_name AS layer, s.srs_id, s.organization, "
    .. "s.organization_coordsys_id AS code, s.description AS reason FROM gpkg_geometry_columns c "
    .. "JOIN gpkg_spatial_ref_sys s ON s.srs_id = c.srs_id "
    .. "WHERE s.definition = 'undefined' AND s.srs_id NOT IN (-1, 0) ORDER BY c.table_name")
  if not rows then return nil, shared.db_error(path, msg, code) end
  return rows
end

--- The tail `status` adds to its line for @{unknown}'s list: "" when empty,
-- else "; unknown CRS: Parcels (ESRI:999999), ...".
function srs.unknown_text(list)
  if not list or #list == 0 then return "" end
  local parts = {}
  for i, u in ipairs(list) do parts[i] = ("%s (%s:%s)"):format(u.layer, u.organization, tostring(u.code)) end
  return "; unknown CRS: " .. table.concat(parts, ", ")
end

--- The SRS rows a store of these layers holds (the required three, then
-- one per distinct CRS), assigning each layer's spec its srs_id.
-- @tparam table specs the layer specs (schema.layer_spec), in order
-- @treturn table the rows, for gpkg_spatial_ref_sys
function srs.rows_for(specs)
  local rows, seen, private = {}, {}, 100000
  for _, r in ipairs(srs.REQUIRED) do
    rows[#rows + 1] = r
    seen[r.srs_id] = true
  end
  for _, spec in ipairs(specs) do
    if spec.geometry_column then
      local row = srs.row(spec.spatial_reference, function()
        while seen[private] do private = private + 1 end
        return private
      end)
      spec.srs_id = row.srs_id
      if not seen[row.srs_id] then
        seen[row.srs_id] = true
        rows[#rows + 1] = row
      end
    end
  end
  return rows
end

return srs
