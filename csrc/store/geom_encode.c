/* A geoservices_geom as a GeoPackage binary geometry (geom.h says which
 * type each Esri shape becomes): the header and its envelope, the rings
 * grouped into polygons (each hole with the exterior it lies in), paths
 * and rings with arcs as CompoundCurves of LineStrings and
 * CircularStrings. The size is counted first and reserved once. */
#include "store/geom.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Little-endian writers into memory reserved beforehand. */
static unsigned char *w_u8(unsigned char *p, unsigned v) {
  *p = (unsigned char)v;
  return p + 1;
}

static unsigned char *w_u32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
  return p + 4;
}

static unsigned char *w_f64(unsigned char *p, double d) {
  uint64_t u;
  int i;
  memcpy(&u, &d, sizeof u);
  for (i = 0; i < 8; i++) p[i] = (unsigned char)(u >> (8 * i));
  return p + 8;
}

/* A WKB geometry's byte order and type: ISO codes, +1000 Z, +2000 M, +3000 ZM. */
static unsigned char *w_head(unsigned char *p, const geoservices_geom *g, uint32_t type) {
  return w_u32(w_u8(p, 1), type + (g->has_z ? 1000 : 0) + (g->has_m ? 2000 : 0));
}

/* Point k: x y, then z and m when the geometry has them. */
static unsigned char *w_point(unsigned char *p, const geoservices_geom *g, size_t k) {
  p = w_f64(w_f64(p, g->xy[2 * k]), g->xy[2 * k + 1]);
  if (g->has_z) p = w_f64(p, g->zm[2 * k]);
  if (g->has_m) p = w_f64(p, g->zm[2 * k + 1]);
  return p;
}

/* Bytes of one point in WKB. */
static size_t point_size(const geoservices_geom *g) {
  return 8 * (2 + (size_t)g->has_z + (size_t)g->has_m);
}

static int closed(const double *xy, size_t first, size_t end) {
  return end - first >= 2 && xy[2 * first] == xy[2 * (end - 1)] && xy[2 * first + 1] == xy[2 * (end - 1) + 1];
}

/* A ring's points, closed if the server left it open (WKB LinearRings are). */
static size_t ring_points(const geoservices_geom *g, size_t i) {
  size_t first = g->parts[i], end = geoservices_geom_part_end(g, i);
  return end - first + (end > first && !closed(g->xy, first, end));
}

static unsigned char *w_ring(unsigned char *p, const geoservices_geom *g, size_t i) {
  size_t first = g->parts[i], end = geoservices_geom_part_end(g, i), k;
  p = w_u32(p, (uint32_t)ring_points(g, i));
  for (k = first; k < end; k++) p = w_point(p, g, k);
  if (end > first && !closed(g->xy, first, end)) p = w_point(p, g, first);
  return p;
}

static unsigned char *w_path(unsigned char *p, const geoservices_geom *g, size_t i) {
  size_t first = g->parts[i], end = geoservices_geom_part_end(g, i), k;
  p = w_u32(p, (uint32_t)(end - first));
  for (k = first; k < end; k++) p = w_point(p, g, k);
  return p;
}

/* Drops parts without points (a path or ring of nothing says nothing). */
static void drop_empty_parts(geoservices_geom *g) {
  size_t i, n = 0;
  for (i = 0; i < g->nparts; i++) {
    if (geoservices_geom_part_end(g, i) > g->parts[i]) g->parts[n++] = g->parts[i];
  }
  g->nparts = n;
}

static int point_in_ring(const double *xy, size_t first, size_t end, double x, double y) {
  int inside = 0;
  size_t i, j;
  for (i = first, j = end - 1; i < end; j = i++) {
    double xi = xy[2 * i], yi = xy[2 * i + 1], xj = xy[2 * j], yj = xy[2 * j + 1];
    if ((yi > y) != (yj > y) && x < (xj - xi) * (y - yi) / (yj - yi) + xi) inside = !inside;
  }
  return inside;
}

/* Clockwise (negative area), degenerate, or not a number: an exterior. One
 * predicate for every use, so NaN coordinates cannot make a ring both. */
static int is_exterior(double area) {
  return !(area > 0);
}

/* Groups rings into polygons: ring_owner[r] is the exterior ring of r (r
 * itself for an exterior). Returns the number of polygons. */
static size_t assemble_rings(geoservices_geom *g) {
  size_t n = g->nparts, r, e, exteriors = 0, last_exterior = SIZE_MAX;
  for (r = 0; r < n; r++) {
    size_t first = g->parts[r], end = geoservices_geom_part_end(g, r);
    double *box = g->ring_box + 4 * r;
    g->ring_area[r] = geoservices_part_area(g, r);
    box[0] = box[2] = INFINITY;
    box[1] = box[3] = -INFINITY;
    geoservices_geom_extend_part(g, first, end, box);
    if (is_exterior(g->ring_area[r])) exteriors++;
  }
  for (r = 0; r < n; r++) {
    size_t best = SIZE_MAX;
    const double *hb = g->ring_box + 4 * r;
    if (exteriors == 0 || is_exterior(g->ring_area[r])) { /* without any exterior every ring stands alone */
      g->ring_owner[r] = r;
      last_exterior = r;
      continue;
    }
    for (e = 0; e < n; e++) {
      const double *eb = g->ring_box + 4 * e;
      if (!is_exterior(g->ring_area[e])) continue;
      if (hb[0] < eb[0] || hb[1] > eb[1] || hb[2] < eb[2] || hb[3] > eb[3]) continue;
      if (!point_in_ring(g->xy, g->parts[e], geoservices_geom_part_end(g, e), g->xy[2 * g->parts[r]],
                         g->xy[2 * g->parts[r] + 1]))
        continue;
      if (best == SIZE_MAX || -g->ring_area[e] < -g->ring_area[best]) best = e;
    }
    if (best == SIZE_MAX) { /* in no exterior: the one before it, as the server ordered them */
      best = last_exterior;
      if (best == SIZE_MAX)
        for (e = 0; e < n && best == SIZE_MAX; e++)
          if (is_exterior(g->ring_area[e])) best = e;
    }
    g->ring_owner[r] = best;
  }
  /* chain each polygon's rings in order, its exterior first */
  for (r = 0; r < n; r++) {
    size_t o = g->ring_owner[r];
    g->ring_next[r] = SIZE_MAX;
    if (o == r) {
      g->ring_tail[r] = r;
      g->ring_count[r] = 1;
    }
  }
  for (r = 0; r < n; r++) {
    size_t o = g->ring_owner[r];
    if (o == r) continue;
    g->ring_next[g->ring_tail[o]] = r;
    g->ring_tail[o] = r;
    g->ring_count[o]++;
  }
  return exteriors ? exteriors : n;
}

/* Scratch arrays for n rings, all of the same capacity. */
static int ring_scratch(geoservices_geom *g, size_t n) {
  size_t cap = g->ring_cap ? g->ring_cap : 16;
  if (n <= g->ring_cap) return 0;
  while (cap < n) {
    if (cap > SIZE_MAX / 64) return -1;
    cap *= 2;
  }
#define RESIZE(field, count)                                             \
  do {                                                                   \
    void *q_ = realloc(g->field, (cap * (count)) * sizeof *g->field);    \
    if (!q_) return -1;                                                  \
    g->field = q_;                                                       \
  } while (0)
  RESIZE(ring_area, 1);
  RESIZE(ring_box, 4);
  RESIZE(ring_owner, 1);
  RESIZE(ring_next, 1);
  RESIZE(ring_tail, 1);
  RESIZE(ring_count, 1);
#undef RESIZE
  g->ring_cap = cap;
  return 0;
}

/* The range of ordinate `which` (0 z, 1 m) over the points, NaNs left out;
 * 0 when no point has a value. */
static int ordinate_range(const geoservices_geom *g, int which, double range[2]) {
  size_t k;
  range[0] = INFINITY;
  range[1] = -INFINITY;
  for (k = 0; k < g->npoints; k++) {
    double v = g->zm[2 * k + (size_t)which];
    if (v < range[0]) range[0] = v;
    if (v > range[1]) range[1] = v;
  }
  return range[0] <= range[1];
}

/* ---- curves: a part as a LineString or a CompoundCurve ------------------- */

/* Points of part i as a curve: a ring (close) gets its first point again
 * when the server left it open. */
static size_t curve_points(const geoservices_geom *g, size_t i, int close) {
  return close ? ring_points(g, i) : geoservices_geom_part_end(g, i) - g->parts[i];
}

/* Whether point j of part i is an arc's middle (j counted from the part's
 * first point; the closing point never is). */
static int middle(const geoservices_geom *g, size_t i, size_t j) {
  size_t first = g->parts[i], end = geoservices_geom_part_end(g, i);
  return first + j < end && geoservices_geom_arc_at(g, first, end, first + j);
}

static int part_has_arcs(const geoservices_geom *g, size_t i) {
  size_t j, n = geoservices_geom_part_end(g, i) - g->parts[i];
  for (j = 1; j < n; j++)
    if (middle(g, i, j)) return 1;
  return 0;
}

/* The run of segments that starts at point j (< n - 1): arcs (a
 * CircularString) or straight segments (a LineString). Its last point. */
static size_t run_from(const geoservices_geom *g, size_t i, size_t n, size_t j, int *arcs) {
  *arcs = middle(g, i, j + 1);
  if (*arcs)
    while (j + 2 < n && middle(g, i, j + 1)) j += 2;
  else
    while (j + 1 < n && !middle(g, i, j + 1)) j++;
  return j;
}

static size_t curve_size(const geoservices_geom *g, size_t i, int close, size_t pt) {
  size_t n = curve_points(g, i, close), j = 0, size = 9;
  int arcs;
  if (!part_has_arcs(g, i) || n < 2) return 9 + pt * n; /* a LineString */
  while (j + 1 < n) {
    size_t last = run_from(g, i, n, j, &arcs);
    size += 9 + pt * (last - j + 1);
    j = last;
  }
  return size;
}

static unsigned char *w_curve(unsigned char *p, const geoservices_geom *g, size_t i, int close) {
  size_t n = curve_points(g, i, close), j, k, runs = 0;
  int arcs;
  if (!part_has_arcs(g, i) || n < 2) {
    p = w_u32(w_head(p, g, WKB_LINESTRING), (uint32_t)n);
    for (j = 0; j < n; j++) p = w_point(p, g, geoservices_geom_ring_index(g, i, j));
    return p;
  }
  for (j = 0; j + 1 < n; runs++) j = run_from(g, i, n, j, &arcs);
  p = w_u32(w_head(p, g, WKB_COMPOUNDCURVE), (uint32_t)runs);
  for (j = 0; j + 1 < n;) { /* each run begins where the one before ended */
    size_t last = run_from(g, i, n, j, &arcs);
    p = w_u32(w_head(p, g, arcs ? WKB_CIRCULARSTRING : WKB_LINESTRING), (uint32_t)(last - j + 1));
    for (k = j; k <= last; k++) p = w_point(p, g, geoservices_geom_ring_index(g, i, k));
    j = last;
  }
  return p;
}

int geoservices_geom_encode(geoservices_geom *g, int32_t srs_id, geoservices_buf *out, double env[4]) {
  size_t size, i, r, npolys = 0, pt;
  int empty, env_kind = 0;
  double zr[2] = {NAN, NAN};
  unsigned char *p, *start;
  if (g->kind == GEOM_POINT && g->npoints > 0 && (isnan(g->xy[0]) || isnan(g->xy[1]))) g->npoints = 0;
  drop_empty_parts(g);
  geoservices_geom_settle_arcs(g);
  if (g->kind == GEOM_POINT && g->npoints > 1) g->npoints = 1;
  empty = g->npoints == 0;
  geoservices_geom_envelope(g, env);
  /* the envelope: [minx maxx miny maxy] (kind 1), with the z range when
   * the points have z values (kind 2); none for an empty geometry, or one of
   * NaNs only. No m range (kinds 3, 4), as GDAL writes none: it helps no
   * reader, and GDAL 3.6's validator takes kind 4 for the empty flag. */
  if (!isnan(env[0])) env_kind = g->has_z && ordinate_range(g, 0, zr) ? 2 : 1;
  /* a point is its own envelope: 12-128r18 makes it optional, GDAL writes
   * none, and 32 bytes of each point's 61 go (readers take x and y instead:
   * geoservices_gpkg_envelope) */
  if (g->kind == GEOM_POINT) env_kind = 0;
  pt = point_size(g);

  /* the exact size first, then one reservation */
  size = 8 + (env_kind == 0 ? 0 : env_kind == 1 ? 32 : 48);
  switch (g->kind) {
    case GEOM_POINT:
      size += 5 + pt;
      break;
    case GEOM_MULTIPOINT:
      size += 9 + (5 + pt) * g->npoints;
      break;
    case GEOM_POLYLINE:
      if (g->has_arcs) {
        size += 9;
        for (i = 0; i < g->nparts; i++) size += curve_size(g, i, 0, pt);
      } else {
        size += 9 + 9 * g->nparts + pt * g->npoints;
      }
      break;
    case GEOM_POLYGON:
      if (ring_scratch(g, g->nparts)) return -1;
      npolys = g->nparts ? assemble_rings(g) : 0;
      size += 9 + 9 * npolys;
      for (r = 0; r < g->nparts; r++) size += g->has_arcs ? curve_size(g, r, 1, pt) : 4 + pt * ring_points(g, r);
      break;
    default:
      return -1;
  }
  if (geoservices_buf_reserve(out, size)) return -1;
  start = p = (unsigned char *)out->data + out->len;

  *p++ = 'G';
  *p++ = 'P';
  *p++ = 0; /* version 1 */
  /* little-endian, the envelope's kind, the empty flag */
  *p++ = (unsigned char)(0x01 | env_kind << 1 | (empty ? 0x10 : 0));
  p = w_u32(p, (uint32_t)srs_id);
  if (env_kind > 0)
    for (i = 0; i < 4; i++) p = w_f64(p, env[i]);
  if (env_kind == 2) p = w_f64(w_f64(p, zr[0]), zr[1]);

  switch (g->kind) {
    case GEOM_POINT:
      p = w_head(p, g, WKB_POINT);
      if (g->npoints) {
        p = w_point(p, g, 0);
      } else { /* POINT EMPTY: every ordinate NaN */
        size_t k;
        for (k = 0; k < pt / 8; k++) p = w_f64(p, NAN);
      }
      break;
    case GEOM_MULTIPOINT:
      p = w_u32(w_head(p, g, WKB_MULTIPOINT), (uint32_t)g->npoints);
      for (i = 0; i < g->npoints; i++) p = w_point(w_head(p, g, WKB_POINT), g, i);
      break;
    case GEOM_POLYLINE: /* MULTI for one path too: see geom.h */
      if (g->has_arcs) {
        p = w_u32(w_head(p, g, WKB_MULTICURVE), (uint32_t)g->nparts);
        for (i = 0; i < g->nparts; i++) p = w_curve(p, g, i, 0);
        break;
      }
      p = w_u32(w_head(p, g, WKB_MULTILINESTRING), (uint32_t)g->nparts);
      for (i = 0; i < g->nparts; i++) p = w_path(w_head(p, g, WKB_LINESTRING), g, i);
      break;
    case GEOM_POLYGON:
      p = w_u32(w_head(p, g, g->has_arcs ? WKB_MULTISURFACE : WKB_MULTIPOLYGON), (uint32_t)npolys);
      for (i = 0; i < g->nparts; i++) {
        if (g->ring_owner[i] != i) continue; /* a hole: written with its exterior */
        p = w_u32(w_head(p, g, g->has_arcs ? WKB_CURVEPOLYGON : WKB_POLYGON), (uint32_t)g->ring_count[i]);
        /* the exterior first, then its holes in the server's order */
        for (r = i; r != SIZE_MAX; r = g->ring_next[r]) p = g->has_arcs ? w_curve(p, g, r, 1) : w_ring(p, g, r);
      }
      break;
  }
  out->len += (size_t)(p - start);
  return 0;
}
