--- The WKT of a few Esri-only coordinate systems (ESRI authority codes, no
-- EPSG code) that feature services commonly use, for the store's
-- gpkg_spatial_ref_sys rows: 12-128r18 asks for a WKT definition, and GDAL
-- and QGIS cannot resolve an ESRI code from a definition of "undefined".
-- A layer's own spatialReference.wkt always comes first (schema.srs_row);
-- an Esri code not listed here keeps "undefined".
--
-- Each definition is GDAL 3.6's WKT 1 of the code, as GDAL itself writes it
-- into a GeoPackage (PROJ's database), generated with python3-gdal:
--   sr = osr.SpatialReference(); sr.SetFromUserInput("ESRI:<code>")
--   ogr.GetDriverByName("GPKG").CreateDataSource(path).CreateLayer("l", sr)
-- then read back from its gpkg_spatial_ref_sys.
-- @module geoservices.store.esri_srs
-- @local
return {
  [54008] = { name = "World_Sinusoidal",
    definition = 'PROJCS["World_Sinusoidal",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,'
      .. '298.257223563,AUTHORITY["EPSG","7030"]],AUTHORITY["EPSG","6326"]],PRIMEM["Greenwich",0],'
      .. 'UNIT["Degree",0.0174532925199433]],PROJECTION["Sinusoidal"],PARAMETER["longitude_of_center",'
      .. '0],PARAMETER["false_easting",0],PARAMETER["false_northing",0],UNIT["metre",1,'
      .. 'AUTHORITY["EPSG","9001"]],AXIS["Easting",EAST],AXIS["Northing",NORTH],AUTHORITY["ESRI",'
      .. '"54008"]]' },
  [54009] = { name = "World_Mollweide",
    definition = 'PROJCS["World_Mollweide",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,'
      .. '298.257223563,AUTHORITY["EPSG","7030"]],AUTHORITY["EPSG","6326"]],PRIMEM["Greenwich",0],'
      .. 'UNIT["Degree",0.0174532925199433]],PROJECTION["Mollweide"],PARAMETER["central_meridian",0],'
      .. 'PARAMETER["false_easting",0],PARAMETER["false_northing",0],UNIT["metre",1,AUTHORITY["EPSG",'
      .. '"9001"]],AXIS["Easting",EAST],AXIS["Northing",NORTH],AUTHORITY["ESRI","54009"]]' },
  [54030] = { name = "World_Robinson",
    definition = 'PROJCS["World_Robinson",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,'
      .. '298.257223563,AUTHORITY["EPSG","7030"]],AUTHORITY["EPSG","6326"]],PRIMEM["Greenwich",0],'
      .. 'UNIT["Degree",0.0174532925199433]],PROJECTION["Robinson"],PARAMETER["longitude_of_center",'
      .. '0],PARAMETER["false_easting",0],PARAMETER["false_northing",0],UNIT["metre",1,'
      .. 'AUTHORITY["EPSG","9001"]],AXIS["Easting",EAST],AXIS["Northing",NORTH],AUTHORITY["ESRI",'
      .. '"54030"]]' },
  [54034] = { name = "World_Cylindrical_Equal_Area",
    definition = 'PROJCS["World_Cylindrical_Equal_Area",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",'
      .. '6378137,298.257223563,AUTHORITY["EPSG","7030"]],AUTHORITY["EPSG","6326"]],'
      .. 'PRIMEM["Greenwich",0],UNIT["Degree",0.0174532925199433]],'
      .. 'PROJECTION["Cylindrical_Equal_Area"],PARAMETER["standard_parallel_1",0],'
      .. 'PARAMETER["central_meridian",0],PARAMETER["false_easting",0],PARAMETER["false_northing",0],'
      .. 'UNIT["metre",1,AUTHORITY["EPSG","9001"]],AXIS["Easting",EAST],AXIS["Northing",NORTH],'
      .. 'AUTHORITY["ESRI","54034"]]' },
  [102003] = { name = "USA_Contiguous_Albers_Equal_Area_Conic",
    definition = 'PROJCS["USA_Contiguous_Albers_Equal_Area_Conic",GEOGCS["NAD83",'
      .. 'DATUM["North_American_Datum_1983",SPHEROID["GRS 1980",6378137,298.257222101,'
      .. 'AUTHORITY["EPSG","7019"]],AUTHORITY["EPSG","6269"]],PRIMEM["Greenwich",0,AUTHORITY["EPSG",'
      .. '"8901"]],UNIT["degree",0.0174532925199433,AUTHORITY["EPSG","9122"]],AUTHORITY["EPSG",'
      .. '"4269"]],PROJECTION["Albers_Conic_Equal_Area"],PARAMETER["latitude_of_center",37.5],'
      .. 'PARAMETER["longitude_of_center",-96],PARAMETER["standard_parallel_1",29.5],'
      .. 'PARAMETER["standard_parallel_2",45.5],PARAMETER["false_easting",0],'
      .. 'PARAMETER["false_northing",0],UNIT["metre",1,AUTHORITY["EPSG","9001"]],AXIS["Easting",EAST],'
      .. 'AXIS["Northing",NORTH],AUTHORITY["ESRI","102003"]]' },
  [102004] = { name = "USA_Contiguous_Lambert_Conformal_Conic",
    definition = 'PROJCS["USA_Contiguous_Lambert_Conformal_Conic",GEOGCS["NAD83",'
      .. 'DATUM["North_American_Datum_1983",SPHEROID["GRS 1980",6378137,298.257222101,'
      .. 'AUTHORITY["EPSG","7019"]],AUTHORITY["EPSG","6269"]],PRIMEM["Greenwich",0,AUTHORITY["EPSG",'
      .. '"8901"]],UNIT["degree",0.0174532925199433,AUTHORITY["EPSG","9122"]],AUTHORITY["EPSG",'
      .. '"4269"]],PROJECTION["Lambert_Conformal_Conic_2SP"],PARAMETER["latitude_of_origin",39],'
      .. 'PARAMETER["central_meridian",-96],PARAMETER["standard_parallel_1",33],'
      .. 'PARAMETER["standard_parallel_2",45],PARAMETER["false_easting",0],PARAMETER["false_northing",'
      .. '0],UNIT["metre",1,AUTHORITY["EPSG","9001"]],AXIS["Easting",EAST],AXIS["Northing",NORTH],'
      .. 'AUTHORITY["ESRI","102004"]]' },
  [102005] = { name = "USA_Contiguous_Equidistant_Conic",
    definition = 'PROJCS["USA_Contiguous_Equidistant_Conic",GEOGCS["NAD83",DATUM["North_American_Datum_1983",'
      .. 'SPHEROID["GRS 1980",6378137,298.257222101,AUTHORITY["EPSG","7019"]],AUTHORITY["EPSG",'
      .. '"6269"]],PRIMEM["Greenwich",0],UNIT["Degree",0.0174532925199433]],'
      .. 'PROJECTION["Equidistant_Conic"],PARAMETER["latitude_of_center",39],'
      .. 'PARAMETER["longitude_of_center",-96],PARAMETER["standard_parallel_1",33],'
      .. 'PARAMETER["standard_parallel_2",45],PARAMETER["false_easting",0],PARAMETER["false_northing",'
      .. '0],UNIT["metre",1,AUTHORITY["EPSG","9001"]],AXIS["Easting",EAST],AXIS["Northing",NORTH],'
      .. 'AUTHORITY["ESRI","102005"]]' },
  [102008] = { name = "North_America_Albers_Equal_Area_Conic",
    definition = 'PROJCS["North_America_Albers_Equal_Area_Conic",GEOGCS["NAD83",'
      .. 'DATUM["North_American_Datum_1983",SPHEROID["GRS 1980",6378137,298.257222101,'
      .. 'AUTHORITY["EPSG","7019"]],AUTHORITY["EPSG","6269"]],PRIMEM["Greenwich",0,AUTHORITY["EPSG",'
      .. '"8901"]],UNIT["degree",0.0174532925199433,AUTHORITY["EPSG","9122"]],AUTHORITY["EPSG",'
      .. '"4269"]],PROJECTION["Albers_Conic_Equal_Area"],PARAMETER["latitude_of_center",40],'
      .. 'PARAMETER["longitude_of_center",-96],PARAMETER["standard_parallel_1",20],'
      .. 'PARAMETER["standard_parallel_2",60],PARAMETER["false_easting",0],PARAMETER["false_northing",'
      .. '0],UNIT["metre",1,AUTHORITY["EPSG","9001"]],AXIS["Easting",EAST],AXIS["Northing",NORTH],'
      .. 'AUTHORITY["ESRI","102008"]]' },
  [102009] = { name = "North_America_Lambert_Conformal_Conic",
    definition = 'PROJCS["North_America_Lambert_Conformal_Conic",GEOGCS["NAD83",'
      .. 'DATUM["North_American_Datum_1983",SPHEROID["GRS 1980",6378137,298.257222101,'
      .. 'AUTHORITY["EPSG","7019"]],AUTHORITY["EPSG","6269"]],PRIMEM["Greenwich",0,AUTHORITY["EPSG",'
      .. '"8901"]],UNIT["degree",0.0174532925199433,AUTHORITY["EPSG","9122"]],AUTHORITY["EPSG",'
      .. '"4269"]],PROJECTION["Lambert_Conformal_Conic_2SP"],PARAMETER["latitude_of_origin",40],'
      .. 'PARAMETER["central_meridian",-96],PARAMETER["standard_parallel_1",20],'
      .. 'PARAMETER["standard_parallel_2",60],PARAMETER["false_easting",0],PARAMETER["false_northing",'
      .. '0],UNIT["metre",1,AUTHORITY["EPSG","9001"]],AXIS["Easting",EAST],AXIS["Northing",NORTH],'
      .. 'AUTHORITY["ESRI","102009"]]' },
  [102010] = { name = "North_America_Equidistant_Conic",
    definition = 'PROJCS["North_America_Equidistant_Conic",GEOGCS["NAD83",DATUM["North_American_Datum_1983",'
      .. 'SPHEROID["GRS 1980",6378137,298.257222101,AUTHORITY["EPSG","7019"]],AUTHORITY["EPSG",'
      .. '"6269"]],PRIMEM["Greenwich",0],UNIT["Degree",0.0174532925199433]],'
      .. 'PROJECTION["Equidistant_Conic"],PARAMETER["latitude_of_center",40],'
      .. 'PARAMETER["longitude_of_center",-96],PARAMETER["standard_parallel_1",20],'
      .. 'PARAMETER["standard_parallel_2",60],PARAMETER["false_easting",0],PARAMETER["false_northing",'
      .. '0],UNIT["metre",1,AUTHORITY["EPSG","9001"]],AXIS["Easting",EAST],AXIS["Northing",NORTH],'
      .. 'AUTHORITY["ESRI","102010"]]' },
  [102013] = { name = "Europe_Albers_Equal_Area_Conic",
    definition = 'PROJCS["Europe_Albers_Equal_Area_Conic",GEOGCS["ED50",DATUM["European_Datum_1950",'
      .. 'SPHEROID["International 1924",6378388,297,AUTHORITY["EPSG","7022"]],AUTHORITY["EPSG",'
      .. '"6230"]],PRIMEM["Greenwich",0,AUTHORITY["EPSG","8901"]],UNIT["degree",0.0174532925199433,'
      .. 'AUTHORITY["EPSG","9122"]],AUTHORITY["EPSG","4230"]],PROJECTION["Albers_Conic_Equal_Area"],'
      .. 'PARAMETER["latitude_of_center",30],PARAMETER["longitude_of_center",10],'
      .. 'PARAMETER["standard_parallel_1",43],PARAMETER["standard_parallel_2",62],'
      .. 'PARAMETER["false_easting",0],PARAMETER["false_northing",0],UNIT["metre",1,AUTHORITY["EPSG",'
      .. '"9001"]],AXIS["Easting",EAST],AXIS["Northing",NORTH],AUTHORITY["ESRI","102013"]]' },
  [102022] = { name = "Africa_Albers_Equal_Area_Conic",
    definition = 'PROJCS["Africa_Albers_Equal_Area_Conic",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",'
      .. '6378137,298.257223563,AUTHORITY["EPSG","7030"]],AUTHORITY["EPSG","6326"]],'
      .. 'PRIMEM["Greenwich",0,AUTHORITY["EPSG","8901"]],UNIT["degree",0.0174532925199433,'
      .. 'AUTHORITY["EPSG","9122"]],AUTHORITY["EPSG","4326"]],PROJECTION["Albers_Conic_Equal_Area"],'
      .. 'PARAMETER["latitude_of_center",0],PARAMETER["longitude_of_center",25],'
      .. 'PARAMETER["standard_parallel_1",20],PARAMETER["standard_parallel_2",-23],'
      .. 'PARAMETER["false_easting",0],PARAMETER["false_northing",0],UNIT["metre",1,AUTHORITY["EPSG",'
      .. '"9001"]],AXIS["Easting",EAST],AXIS["Northing",NORTH],AUTHORITY["ESRI","102022"]]' },
  [102039] = { name = "USA_Contiguous_Albers_Equal_Area_Conic_USGS_version",
    definition = 'PROJCS["USA_Contiguous_Albers_Equal_Area_Conic_USGS_version",GEOGCS["NAD83",'
      .. 'DATUM["North_American_Datum_1983",SPHEROID["GRS 1980",6378137,298.257222101,'
      .. 'AUTHORITY["EPSG","7019"]],AUTHORITY["EPSG","6269"]],PRIMEM["Greenwich",0,AUTHORITY["EPSG",'
      .. '"8901"]],UNIT["degree",0.0174532925199433,AUTHORITY["EPSG","9122"]],AUTHORITY["EPSG",'
      .. '"4269"]],PROJECTION["Albers_Conic_Equal_Area"],PARAMETER["latitude_of_center",23],'
      .. 'PARAMETER["longitude_of_center",-96],PARAMETER["standard_parallel_1",29.5],'
      .. 'PARAMETER["standard_parallel_2",45.5],PARAMETER["false_easting",0],'
      .. 'PARAMETER["false_northing",0],UNIT["metre",1,AUTHORITY["EPSG","9001"]],AXIS["Easting",EAST],'
      .. 'AXIS["Northing",NORTH],AUTHORITY["ESRI","102039"]]' },
}
