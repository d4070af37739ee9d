/* The definition of a coordinate reference system a feature service names
 * by a bare number (a spatialReference's wkid or latestWkid), from PROJ's
 * database (proj.db), for the store's gpkg_spatial_ref_sys rows.
 *
 * A wkid carries no authority: the vendor's codes below 32768 are EPSG's,
 * its own above them are ESRI's (102003, 54030...), and PROJ knows both.
 * EPSG is tried first, then ESRI, so the row names the authority that
 * really defines the code.
 *
 * The definition is WKT 1 (12-128r18 table 21 asks for it in the
 * definition column) written as GDAL writes it into a GeoPackage:
 * PJ_WKT1_GDAL on one line with its axes, byte for byte GDAL 3.6's
 * exportToWkt for every code compared (4326, 3857, 2193, 2227, 27700,
 * 32633, 5498, ESRI 102003 and 54030). A CRS with no WKT 1 form (a
 * geographic 3D one such as 4979) is written with its ellipsoidal height as
 * a vertical CRS (GDAL's own option for WKT 1), which GDAL reads back as
 * the same CRS.
 *
 * Pure C with PROJ, no Lua. Each call makes and destroys its own
 * PJ_CONTEXT, so it is safe from any thread, holds nothing between calls
 * and keeps proj.db closed afterwards; a call costs an open of proj.db,
 * which the store pays once per layer when it is created. A missing or
 * unreadable proj.db is a failure with a message, never a crash, and PROJ's
 * own logging is silenced (the caller decides what to say). */
#ifndef GEOSERVICES_STORE_SRS_H
#define GEOSERVICES_STORE_SRS_H

#include <stddef.h>
#include <stdint.h>

typedef struct geoservices_srs {
  char *wkt;          /* WKT 1, malloc'd */
  char *name;         /* the CRS's name ("USA_Contiguous_Albers_Equal_Area_Conic"), malloc'd */
  char authority[8];  /* "EPSG" or "ESRI": the authority that defines the code */
} geoservices_srs;

/* Outcomes of geoservices_srs_lookup. */
#define GEOSERVICES_SRS_FOUND 0
#define GEOSERVICES_SRS_UNKNOWN 1   /* neither EPSG nor ESRI has the code, or it has no WKT 1 */
#define GEOSERVICES_SRS_NO_DATABASE 2 /* proj.db cannot be opened */
#define GEOSERVICES_SRS_NOMEM 3

/* Looks wkid up; on GEOSERVICES_SRS_FOUND fills *out (free it with
 * geoservices_srs_free), otherwise leaves it empty and writes a message
 * into err (NUL-terminated, cut to errlen). */
int geoservices_srs_lookup(int64_t wkid, geoservices_srs *out, char *err, size_t errlen);

/* Frees what a lookup filled; safe on an empty or already freed one. */
void geoservices_srs_free(geoservices_srs *s);

/* The Lua binding (store/lua_srs.c): registers core.srs_definition into the
 * module table at -1. */
struct lua_State;
void geoservices_open_srs(struct lua_State *L);

#endif
