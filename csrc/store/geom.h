/* Esri JSON geometries <-> GeoPackage binary geometries (OGC 12-128r18,
 * 2.1.3: a "GP" header with the SRS id and an envelope, then ISO WKB).
 *
 * A geometry is collected point by point into a geoservices_geom (parts of
 * coordinates), by whoever reads it: the record tape (store/apply.c) or a
 * Lua table (store/lua_store.c). Encoding turns it into a GeoPackage blob:
 *   point       -> Point (an empty one: POINT(NaN NaN), the empty flag set)
 *   multipoint  -> MultiPoint
 *   polyline    -> MultiLineString, whatever its number of paths
 *   polygon     -> MultiPolygon, whatever its number of polygons: Esri rings
 *                  are exterior clockwise and holes counter-clockwise (by
 *                  signed area, y up); each hole goes to the smallest exterior
 *                  that contains it. Rings keep the order and orientation the
 *                  server sent, so a blob decodes back to the same rings.
 * Single parts are promoted to MULTI rather than the column declared
 * GEOMETRY: an Esri polyline or polygon is one multi-part type on the server,
 * a MULTI* column keeps the layer one geometry type for GDAL and QGIS (a
 * GEOMETRY column makes QGIS ask which type to load), and 12-128r18
 * requirement 32 holds only when every blob has the column's type.
 *
 * Z and M: a geometry carries them when has_z / has_m are set (the layer's
 * hasZ / hasM, its column's z / m flags); every point then has both slots,
 * NaN where there is no value (a Z-layer point the server sent without z).
 * The blob is ISO WKB Z, M or ZM, with an XYZ envelope when there are z
 * values (no m range, as GDAL writes none). Coordinates are copied as
 * doubles, bit for bit.
 *
 * Decoding reads any GeoPackage blob (either byte order, every envelope
 * kind, ISO or extended Z/M WKB) into the Esri shape, with the blob's Z/M.
 * Pure C: no lua.h, no sqlite3.h; unit-tested and fuzzed alone. */
#ifndef GEOSERVICES_STORE_GEOM_H
#define GEOSERVICES_STORE_GEOM_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* Esri geometry kinds (the shape of the JSON object). */
typedef enum {
  GEOM_NONE = 0, GEOM_POINT, GEOM_MULTIPOINT, GEOM_POLYLINE, GEOM_POLYGON
} geoservices_geom_kind;

/* WKB geometry type codes. */
enum {
  WKB_POINT = 1, WKB_LINESTRING = 2, WKB_POLYGON = 3,
  WKB_MULTIPOINT = 4, WKB_MULTILINESTRING = 5, WKB_MULTIPOLYGON = 6
};

typedef struct geoservices_geom {
  int kind;          /* geoservices_geom_kind */
  int has_z, has_m;  /* the ordinates the geometry carries beyond x and y */
  double *xy;        /* x0 y0 x1 y1 ... */
  double *zm;        /* z0 m0 z1 m1 ... (NaN: no value), when has_z or has_m */
  size_t npoints, point_cap, zm_cap;
  size_t *parts;     /* first point of each part; parts[nparts] == npoints once ended */
  size_t nparts, part_cap;
  /* polygon assembly scratch, reused */
  double *ring_area;
  double *ring_box;  /* minx maxx miny maxy per ring */
  size_t *ring_owner; /* the exterior ring of each ring (itself for an exterior) */
  size_t *ring_next;  /* the next ring of the same polygon, SIZE_MAX at the end */
  size_t *ring_tail;  /* per exterior: its last ring so far */
  size_t *ring_count; /* per exterior: its number of rings */
  size_t ring_cap;
} geoservices_geom;

void geoservices_geom_init(geoservices_geom *g);
void geoservices_geom_free(geoservices_geom *g);
/* Starts a new geometry of `kind` (keeps the memory, and has_z / has_m). */
void geoservices_geom_reset(geoservices_geom *g, int kind);
/* The ordinates the next points carry (before any point of the geometry). */
void geoservices_geom_dims(geoservices_geom *g, int has_z, int has_m);
/* Starts a part (a path, a ring; multipoints and points have one). -1 on OOM. */
int geoservices_geom_part(geoservices_geom *g);
/* Appends a point to the current part (one is started if none); without z
 * and m (NaN) when the geometry has them. -1 on OOM. */
int geoservices_geom_point(geoservices_geom *g, double x, double y);
/* The same with its z and m (kept as given when the geometry has either; only
 * those it has are written out). */
int geoservices_geom_point_zm(geoservices_geom *g, double x, double y, double z, double m);
/* Esri JSON coordinate arrays are [x, y, z, m], [x, y, z] or [x, y, m] by
 * the geometry's own hasZ / hasM: readers store the third and fourth numbers
 * as z and m, then call this with the flags the geometry had, so that each
 * lands where it belongs (a third number of an M-only geometry is its m). */
void geoservices_geom_ordinates_as(geoservices_geom *g, int had_z, int had_m);
/* Points of part i: [parts[i], end) */
size_t geoservices_geom_part_end(const geoservices_geom *g, size_t i);

/* Appends the GeoPackage blob of g to out (which it does not reset).
 * env receives minx, maxx, miny, maxy, or NaNs when the geometry is empty.
 * 0, or -1 on OOM. */
int geoservices_geom_encode(geoservices_geom *g, int32_t srs_id, geoservices_buf *out, double env[4]);

/* Reads a GeoPackage blob into g (Esri shape). 0, or -1 with *error set
 * (a static message) for anything that is not a geometry we can represent. */
int geoservices_geom_decode(geoservices_geom *g, const unsigned char *blob, size_t len, int32_t *srs_id,
                            const char **error);

/* The envelope of a GeoPackage blob, from its header when it has one, else
 * from its points (g is scratch). 1 with env set, 0 for an empty geometry,
 * -1 for a blob that is not a GeoPackage geometry; with g NULL, -2 when the
 * header has no envelope (the points would be needed). */
int geoservices_gpkg_envelope(geoservices_geom *g, const unsigned char *blob, size_t len, double env[4]);

/* Signed area of the ring of points [first, end) (shoelace; negative when
 * clockwise with y up). */
double geoservices_ring_area(const double *xy, size_t first, size_t end);

#endif
