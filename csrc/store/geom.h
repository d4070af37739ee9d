/* Esri JSON geometries <-> GeoPackage binary geometries (OGC 12-128r18,
 * 2.1.3: a "GP" header with the SRS id and an envelope, then ISO WKB).
 *
 * A geometry is collected point by point into a geoservices_geom (parts of
 * coordinates), by whoever reads it: the record tape (store/apply_geometry.c) or a
 * Lua table (store/lua_store_geometry.c). Encoding turns it into a GeoPackage blob:
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
 * True curves (Esri JSON's curvePaths / curveRings): a circular arc ("c":
 * an end point and a point on the arc) is kept exactly, as its middle point
 * flagged in `arc` between the points it joins. A geometry with arcs is
 * encoded as a curve type: polyline -> MultiCurve of CompoundCurves
 * (straight runs as LineStrings, arcs as CircularStrings; a path without
 * arcs stays a LineString), polygon -> MultiSurface of CurvePolygons whose
 * rings are CompoundCurves or LineStrings. A geometry without arcs keeps
 * the MULTI* types above: a MULTICURVE column admits MULTILINESTRING blobs
 * and a MULTISURFACE one MULTIPOLYGON blobs (12-128r18 Annex G's type
 * hierarchy; GDAL's validator accepts exactly those), so a layer's column
 * becomes a curve type only when a curve comes (store/apply.h). The other
 * segments have no GeoPackage form: a Bézier curve ("b") and an elliptic
 * arc ("a") are cut into points for display, a circular arc given by its
 * centre ("a" of a circle) becomes an arc through its middle point, and
 * `inexact` says so: the store then keeps the server's JSON beside the blob.
 * Extents (the header's envelope, the R-tree's) take in the arcs' bulges,
 * and a ring's orientation its arcs' areas.
 *
 * Z and M: a geometry carries them when has_z / has_m are set (the layer's
 * hasZ / hasM, its column's z / m flags); every point then has both slots,
 * NaN where there is no value (a Z-layer point the server sent without z).
 * The blob is ISO WKB Z, M or ZM, with an XYZ envelope when there are z
 * values (no m range, as GDAL writes none). Coordinates are copied as
 * doubles, bit for bit.
 *
 * Decoding reads any GeoPackage blob (either byte order, every envelope
 * kind, ISO or extended Z/M WKB; the curve types as QGIS and GDAL write
 * them) into the Esri shape, with the blob's Z/M and arcs.
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
  WKB_MULTIPOINT = 4, WKB_MULTILINESTRING = 5, WKB_MULTIPOLYGON = 6,
  WKB_CIRCULARSTRING = 8, WKB_COMPOUNDCURVE = 9, WKB_CURVEPOLYGON = 10,
  WKB_MULTICURVE = 11, WKB_MULTISURFACE = 12
};

typedef struct geoservices_geom {
  int kind;          /* geoservices_geom_kind */
  int has_z, has_m;  /* the ordinates the geometry carries beyond x and y */
  double *xy;        /* x0 y0 x1 y1 ... */
  double *zm;        /* z0 m0 z1 m1 ... (NaN: no value), when has_z or has_m */
  size_t npoints, point_cap, zm_cap;
  size_t *parts;     /* first point of each part; parts[nparts] == npoints once ended */
  size_t nparts, part_cap;
  unsigned char *arc; /* per point, when has_arcs: 1 for the middle point of a circular arc */
  size_t arc_cap;
  int has_arcs;      /* some part has a circular arc: the blob is a curve type */
  int inexact;       /* a segment was cut into points or rewritten: the blob is not the JSON */
  int extra;         /* numbers past x, y some coordinate had: bit 1 a third, bit 2 a fourth (not NaN) */
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

/* A curve segment of Esri JSON (curvePaths, curveRings), from the last
 * point of the current part to `end`:
 *   'c'  a circular arc through p1                       (kept exactly)
 *   'a'  an arc around the centre p1, clockwise or not; an ellipse when
 *        numbers > 2 and ratio is not 1 (rotation, axis, ratio)
 *   'b'  a cubic Bézier curve with control points p1, p2
 *   0    a segment of a kind the store does not know: a straight line
 * end[2] and end[3] are the end's third and fourth numbers as
 * geoservices_geom_point_zm takes them; points made between get z and m
 * interpolated along the segment. */
typedef struct geoservices_segment {
  int kind;
  int has_end, has_p1, has_p2;
  double end[4], p1[2], p2[2];
  int numbers;  /* how many of the numbers below were given */
  double minor, clockwise, rotation, axis, ratio;
} geoservices_segment;
/* Appends the segment (its points, its end). -1 on OOM. */
int geoservices_geom_segment(geoservices_geom *g, const geoservices_segment *seg);
/* Appends a point as the middle point of a circular arc (the next point
 * appended is its end). -1 on OOM. */
int geoservices_geom_arc_middle(geoservices_geom *g, double x, double y);
/* Whether point k of part i is the middle of an arc (one with a point
 * before and after it, neither a middle itself). */
int geoservices_geom_is_arc_middle(const geoservices_geom *g, size_t i, size_t k);

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
/* The same for part i of g, its arcs taken in. */
double geoservices_part_area(const geoservices_geom *g, size_t i);

/* The arcs of g, for its encoder (geom_encode.c) and decoder (geom_decode.c). */
/* Whether point k (of the part [first, end)) is the middle of an arc. */
int geoservices_geom_arc_at(const geoservices_geom *g, size_t first, size_t end, size_t k);
/* Point j of part i's ring (j == its count: the first again, closing it). */
size_t geoservices_geom_ring_index(const geoservices_geom *g, size_t i, size_t j);
/* Clears the arc flags that make no arc, and has_arcs when none is left. */
void geoservices_geom_settle_arcs(geoservices_geom *g);
/* Extends box (minx maxx miny maxy) by the points of [first, end) and their arcs' bulges. */
void geoservices_geom_extend_part(const geoservices_geom *g, size_t first, size_t end, double box[4]);
/* The extent of g, its arcs' bulges taken in: minx maxx miny maxy, NaNs when empty. */
void geoservices_geom_envelope(const geoservices_geom *g, double env[4]);

#endif
