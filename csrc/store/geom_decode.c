/* A GeoPackage binary geometry read into a geoservices_geom (geom.h): any
 * byte order, every envelope kind, ISO or extended Z/M WKB, the curve types
 * as QGIS and GDAL write them; and a blob's envelope read from its header
 * where it has one (the R-tree's and the bounding box queries' way). A
 * blob that is not a geometry we can represent is an error, never a guess. */
#include "store/geom.h"

#include <math.h>
#include <string.h>

typedef struct {
  const unsigned char *p, *end;
  const char *error;
} reader;

static int need(reader *r, size_t n) {
  if ((size_t)(r->end - r->p) < n) {
    if (!r->error) r->error = "truncated geometry";
    return -1;
  }
  return 0;
}

static uint32_t rd_u32(reader *r, int le) {
  const unsigned char *p = r->p;
  r->p += 4;
  if (le) return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  return (uint32_t)p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[0] << 24;
}

static double rd_f64(reader *r, int le) {
  uint64_t u = 0;
  double d;
  int i;
  for (i = 0; i < 8; i++) u |= (uint64_t)r->p[le ? i : 7 - i] << (8 * i);
  r->p += 8;
  memcpy(&d, &u, sizeof d);
  return d;
}

typedef struct {
  int le;
  uint32_t base; /* 1..7 */
  int z, m;      /* the ordinates beyond x and y */
  size_t dims;   /* 2, 3 or 4 ordinates per point */
} wkb_head;

static int rd_head(reader *r, wkb_head *h) {
  uint32_t type;
  int z = 0, m = 0;
  if (need(r, 5)) return -1;
  if (*r->p > 1) return r->error = "bad WKB byte order", -1;
  h->le = *r->p++ == 1;
  type = rd_u32(r, h->le);
  if (type & 0x80000000u) z = 1; /* extended WKB flags */
  if (type & 0x40000000u) m = 1;
  if (type & 0x20000000u) { /* an embedded SRID */
    if (need(r, 4)) return -1;
    r->p += 4;
  }
  type &= 0x0fffffffu;
  if (type >= 1000 && type < 4000) { /* ISO: 1000 Z, 2000 M, 3000 ZM */
    z |= type / 1000 == 1 || type / 1000 == 3;
    m |= type / 1000 == 2 || type / 1000 == 3;
    type %= 1000;
  }
  if (type < 1 || type > 12 || type == 7) return r->error = "unsupported geometry type", -1;
  h->base = type;
  h->z = z;
  h->m = m;
  h->dims = 2 + (size_t)z + (size_t)m;
  return 0;
}

static int rd_count(reader *r, int le, size_t min_each, uint32_t *n) {
  if (need(r, 4)) return -1;
  *n = rd_u32(r, le);
  if (min_each && *n > (size_t)(r->end - r->p) / min_each) return r->error = "truncated geometry", -1;
  return 0;
}

/* One point's ordinates (the room checked by the caller) into g: its z and
 * m, NaN for those this element lacks. With skip_nan, not a point without x/y. */
static int rd_ordinates(reader *r, geoservices_geom *g, const wkb_head *h, int skip_nan) {
  double x = rd_f64(r, h->le), y = rd_f64(r, h->le), z = NAN, m = NAN;
  if (h->z) z = rd_f64(r, h->le);
  if (h->m) m = rd_f64(r, h->le);
  if (skip_nan && (isnan(x) || isnan(y))) return 0;
  if (geoservices_geom_point_zm(g, x, y, z, m)) return r->error = "out of memory", -1;
  return 0;
}

static int rd_points(reader *r, geoservices_geom *g, const wkb_head *h) {
  uint32_t n, i;
  if (rd_count(r, h->le, 8 * h->dims, &n)) return -1;
  for (i = 0; i < n; i++)
    if (rd_ordinates(r, g, h, 0)) return -1;
  return 0;
}

static int rd_point(reader *r, geoservices_geom *g, const wkb_head *h) {
  if (need(r, 8 * h->dims)) return -1;
  return rd_ordinates(r, g, h, 1); /* NaN x or y: POINT EMPTY */
}

static int rd_polygon(reader *r, geoservices_geom *g, const wkb_head *h) {
  uint32_t n, i;
  if (rd_count(r, h->le, 4, &n)) return -1;
  for (i = 0; i < n; i++) {
    if (geoservices_geom_part(g)) return r->error = "out of memory", -1;
    if (rd_points(r, g, h)) return -1;
  }
  return 0;
}

/* One element of a multi geometry: a whole WKB geometry of type `want`. */
static int rd_element(reader *r, geoservices_geom *g, uint32_t want) {
  wkb_head h;
  if (rd_head(r, &h)) return -1;
  if (h.base != want) return r->error = "a multi geometry holds another type", -1;
  switch (want) {
    case WKB_POINT: return rd_point(r, g, &h);
    case WKB_LINESTRING:
      if (geoservices_geom_part(g)) return r->error = "out of memory", -1;
      return rd_points(r, g, &h);
    default: return rd_polygon(r, g, &h);
  }
}

/* The points of a LineString or CircularString (head h) appended to the
 * current part; `joined`: it continues the part (a CompoundCurve's next
 * component), whose last point is its first and is not repeated. */
static int rd_curve_points(reader *r, geoservices_geom *g, const wkb_head *h, int joined) {
  uint32_t n, i;
  if (rd_count(r, h->le, 8 * h->dims, &n)) return -1;
  for (i = 0; i < n; i++) {
    size_t before = g->npoints;
    if (rd_ordinates(r, g, h, 0)) return -1;
    /* bit for bit (a NaN joint too): the same point written twice */
    if (i == 0 && joined && before > g->parts[g->nparts - 1] &&
        memcmp(g->xy + 2 * before, g->xy + 2 * before - 2, 2 * sizeof *g->xy) == 0) {
      g->npoints = before; /* the component starts where the one before ended */
      continue;
    }
    if (h->base == WKB_CIRCULARSTRING && i % 2 == 1) { /* every other point is an arc's middle */
      double x = g->xy[2 * before], y = g->xy[2 * before + 1], zm[2] = {NAN, NAN};
      if (g->has_z || g->has_m) memcpy(zm, g->zm + 2 * before, sizeof zm);
      g->npoints = before;
      if (geoservices_geom_arc_middle(g, x, y)) return r->error = "out of memory", -1;
      if (g->has_z || g->has_m) memcpy(g->zm + 2 * before, zm, sizeof zm); /* its own z and m, as the blob had */
    }
  }
  return 0;
}

/* A curve (LineString, CircularString or CompoundCurve) as a new part of g. */
static int rd_curve(reader *r, geoservices_geom *g, const wkb_head *h) {
  uint32_t n, i;
  if (geoservices_geom_part(g)) return r->error = "out of memory", -1;
  if (h->base == WKB_LINESTRING || h->base == WKB_CIRCULARSTRING) return rd_curve_points(r, g, h, 0);
  if (h->base != WKB_COMPOUNDCURVE) return r->error = "a curve of another type", -1;
  if (rd_count(r, h->le, 9, &n)) return -1;
  for (i = 0; i < n; i++) {
    wkb_head c;
    if (rd_head(r, &c)) return -1;
    if (c.base != WKB_LINESTRING && c.base != WKB_CIRCULARSTRING)
      return r->error = "a compound curve holds another type", -1;
    if (rd_curve_points(r, g, &c, i > 0)) return -1;
  }
  return 0;
}

/* A CurvePolygon's rings (or a Polygon's) as parts of g. */
static int rd_curve_polygon(reader *r, geoservices_geom *g, const wkb_head *h) {
  uint32_t n, i;
  if (h->base == WKB_POLYGON) return rd_polygon(r, g, h);
  if (rd_count(r, h->le, 9, &n)) return -1;
  for (i = 0; i < n; i++) {
    wkb_head c;
    if (rd_head(r, &c) || rd_curve(r, g, &c)) return -1;
  }
  return 0;
}

static int rd_header(reader *r, int32_t *srs_id, int *empty, double env[4]) {
  static const size_t env_size[] = {0, 32, 48, 48, 64};
  unsigned flags, kind, i;
  int le;
  if (need(r, 8)) return -1;
  if (r->p[0] != 'G' || r->p[1] != 'P') return r->error = "not a GeoPackage geometry", -1;
  if (r->p[2] != 0) return r->error = "unsupported GeoPackage geometry version", -1;
  flags = r->p[3];
  if (flags & 0x20) return r->error = "extended GeoPackage geometries are not supported", -1;
  kind = (flags >> 1) & 7;
  if (kind > 4) return r->error = "bad GeoPackage envelope indicator", -1;
  le = flags & 1;
  r->p += 4;
  *srs_id = (int32_t)rd_u32(r, le);
  *empty = (flags & 0x10) != 0;
  if (need(r, env_size[kind])) return -1;
  if (kind == 0) {
    if (env) env[0] = NAN;
  } else {
    for (i = 0; i < 4; i++) {
      double d = rd_f64(r, le);
      if (env) env[i] = d;
    }
    r->p += env_size[kind] - 32;
  }
  return 0;
}

static int decode(reader *r, geoservices_geom *g, int32_t *srs_id, double env[4]) {
  wkb_head h;
  uint32_t n, i;
  int empty;
  if (rd_header(r, srs_id, &empty, env) || rd_head(r, &h)) return -1;
  geoservices_geom_dims(g, h.z, h.m); /* the elements of a multi geometry fill what they lack with NaN */
  switch (h.base) {
    case WKB_POINT:
      geoservices_geom_reset(g, GEOM_POINT);
      return rd_point(r, g, &h);
    case WKB_LINESTRING:
    case WKB_CIRCULARSTRING:
    case WKB_COMPOUNDCURVE:
      geoservices_geom_reset(g, GEOM_POLYLINE);
      return rd_curve(r, g, &h);
    case WKB_POLYGON:
    case WKB_CURVEPOLYGON:
      geoservices_geom_reset(g, GEOM_POLYGON);
      return rd_curve_polygon(r, g, &h);
    case WKB_MULTIPOINT:
      geoservices_geom_reset(g, GEOM_MULTIPOINT);
      break;
    case WKB_MULTILINESTRING:
    case WKB_MULTICURVE:
      geoservices_geom_reset(g, GEOM_POLYLINE);
      break;
    default:
      geoservices_geom_reset(g, GEOM_POLYGON);
      break;
  }
  if (rd_count(r, h.le, 9, &n)) return -1;
  for (i = 0; i < n; i++) {
    wkb_head e;
    if (h.base <= WKB_MULTIPOLYGON) {
      if (rd_element(r, g, h.base - 3)) return -1;
      continue;
    }
    if (rd_head(r, &e)) return -1;
    if (h.base == WKB_MULTICURVE) {
      if (e.base != WKB_LINESTRING && e.base != WKB_CIRCULARSTRING && e.base != WKB_COMPOUNDCURVE)
        return r->error = "a multi curve holds another type", -1;
      if (rd_curve(r, g, &e)) return -1;
    } else {
      if (e.base != WKB_POLYGON && e.base != WKB_CURVEPOLYGON) return r->error = "a multi surface holds another type", -1;
      if (rd_curve_polygon(r, g, &e)) return -1;
    }
  }
  return 0;
}

int geoservices_geom_decode(geoservices_geom *g, const unsigned char *blob, size_t len, int32_t *srs_id,
                            const char **error) {
  reader r;
  r.p = blob;
  r.end = blob + len;
  r.error = NULL;
  if (decode(&r, g, srs_id, NULL) == 0) return 0;
  *error = r.error ? r.error : "invalid geometry";
  return -1;
}

int geoservices_gpkg_envelope(geoservices_geom *g, const unsigned char *blob, size_t len, double env[4]) {
  reader r;
  int32_t srs_id;
  int empty;
  r.p = blob;
  r.end = blob + len;
  r.error = NULL;
  if (rd_header(&r, &srs_id, &empty, env)) return -1;
  if (empty) return 0;
  if (!isnan(env[0])) return 1;
  { /* no envelope in the header: a point's is its x and y, read in place */
    wkb_head h;
    const unsigned char *wkb = r.p;
    if (rd_head(&r, &h)) return -1;
    if (h.base == WKB_POINT) {
      double x, y;
      if (need(&r, 8 * h.dims)) return -1;
      x = rd_f64(&r, h.le);
      y = rd_f64(&r, h.le);
      if (isnan(x) || isnan(y)) return 0; /* POINT EMPTY */
      env[0] = env[1] = x;
      env[2] = env[3] = y;
      return 1;
    }
    r.p = wkb;
  }
  if (!g) return -2;
  /* no envelope in the header (another writer left it out): from the points */
  r.p = blob;
  if (decode(&r, g, &srs_id, NULL)) return -1;
  geoservices_geom_envelope(g, env);
  return isnan(env[0]) ? 0 : 1;
}
