#include "store/geom.h"

#include <math.h>

#include "store/arc.h"
#include <stdlib.h>
#include <string.h>

/* ---- collecting points ----------------------------------------------------- */

void geoservices_geom_init(geoservices_geom *g) {
  memset(g, 0, sizeof *g);
}

void geoservices_geom_free(geoservices_geom *g) {
  free(g->xy);
  free(g->zm);
  free(g->parts);
  free(g->arc);
  free(g->ring_area);
  free(g->ring_box);
  free(g->ring_owner);
  free(g->ring_next);
  free(g->ring_tail);
  free(g->ring_count);
  geoservices_geom_init(g);
}

void geoservices_geom_reset(geoservices_geom *g, int kind) {
  g->kind = kind;
  g->npoints = 0;
  g->nparts = 0;
  g->has_arcs = 0;
  g->inexact = 0;
  g->extra = 0;
}

void geoservices_geom_dims(geoservices_geom *g, int has_z, int has_m) {
  g->has_z = has_z != 0;
  g->has_m = has_m != 0;
}

/* Makes room for `need` elements of `elem` bytes; doubles the capacity. */
static int grow(void *pp, size_t *cap, size_t need, size_t elem) {
  void **p = (void **)pp;
  size_t n;
  void *q;
  if (need <= *cap) return 0;
  n = *cap ? *cap : 16;
  while (n < need) {
    if (n > (SIZE_MAX / 2) / elem) return -1;
    n *= 2;
  }
  q = realloc(*p, n * elem);
  if (!q) return -1;
  *p = q;
  *cap = n;
  return 0;
}

int geoservices_geom_part(geoservices_geom *g) {
  if (grow(&g->parts, &g->part_cap, g->nparts + 2, sizeof *g->parts)) return -1;
  g->parts[g->nparts++] = g->npoints;
  return 0;
}

int geoservices_geom_point_zm(geoservices_geom *g, double x, double y, double z, double m) {
  if (g->nparts == 0 && geoservices_geom_part(g)) return -1;
  if (g->npoints >= g->point_cap) {
    size_t cap2 = g->point_cap * 2; /* capacity counted in doubles, two per point */
    if (grow(&g->xy, &cap2, (g->npoints + 1) * 2, sizeof *g->xy)) return -1;
    g->point_cap = cap2 / 2;
  }
  if ((g->has_z || g->has_m) && g->npoints >= g->zm_cap) {
    size_t cap2 = g->zm_cap * 2; /* z and m slots: two doubles per point too */
    if (grow(&g->zm, &cap2, (g->npoints + 1) * 2, sizeof *g->zm)) return -1;
    g->zm_cap = cap2 / 2;
  }
  g->xy[2 * g->npoints] = x;
  g->xy[2 * g->npoints + 1] = y;
  if (g->has_z || g->has_m) { /* both slots as given: only those the geometry has are ever read */
    g->zm[2 * g->npoints] = z;
    g->zm[2 * g->npoints + 1] = m;
  }
  if (g->has_arcs) {
    if (grow(&g->arc, &g->arc_cap, g->npoints + 1, 1)) return -1;
    g->arc[g->npoints] = 0;
  }
  g->npoints++;
  return 0;
}

int geoservices_geom_arc_middle(geoservices_geom *g, double x, double y) {
  if (geoservices_geom_point_zm(g, x, y, NAN, NAN)) return -1;
  if (!g->has_arcs) { /* the first arc: every point before it is a vertex */
    if (grow(&g->arc, &g->arc_cap, g->npoints, 1)) return -1;
    memset(g->arc, 0, g->npoints);
    g->has_arcs = 1;
  }
  g->arc[g->npoints - 1] = 1;
  return 0;
}

/* The last point of the current part, or NULL when it has none. */
static int last_point(const geoservices_geom *g, double xy[2], double zm[2]) {
  if (g->nparts == 0 || g->npoints == g->parts[g->nparts - 1]) return 0;
  xy[0] = g->xy[2 * (g->npoints - 1)];
  xy[1] = g->xy[2 * (g->npoints - 1) + 1];
  zm[0] = zm[1] = NAN;
  if (g->has_z || g->has_m) {
    zm[0] = g->zm[2 * (g->npoints - 1)];
    zm[1] = g->zm[2 * (g->npoints - 1) + 1];
  }
  return 1;
}

/* A point made along a segment at fraction t: its z and m between the ends'. */
static int point_between(geoservices_geom *g, double x, double y, const double zm0[2], const double end[4], double t) {
  return geoservices_geom_point_zm(g, x, y, zm0[0] + t * (end[2] - zm0[0]), zm0[1] + t * (end[3] - zm0[1]));
}

/* An arc's middle point: Esri gives it no z or m; it gets the mean of its
 * ends' (what the arc's ends say of the height halfway), so that a reader
 * linearizing the arc (QGIS, GDAL) never meets a NaN z. Uploads leave it out. */
static int arc_middle_between(geoservices_geom *g, double x, double y, const double zm0[2], const double end[4]) {
  if (geoservices_geom_arc_middle(g, x, y)) return -1;
  if (g->has_z || g->has_m) {
    g->zm[2 * (g->npoints - 1)] = (zm0[0] + end[2]) / 2;
    g->zm[2 * (g->npoints - 1) + 1] = (zm0[1] + end[3]) / 2;
  }
  return 0;
}

#define BEZIER_PIECES 32

int geoservices_geom_segment(geoservices_geom *g, const geoservices_segment *seg) {
  double start[2], zm0[2], x, y;
  int i, n;
  if (!seg->has_end) { /* nowhere to go: the segment is left out, the JSON kept */
    g->inexact = 1;
    return 0;
  }
  if (!last_point(g, start, zm0)) { /* no start: its end begins the part */
    g->inexact = 1;
    return geoservices_geom_point_zm(g, seg->end[0], seg->end[1], seg->end[2], seg->end[3]);
  }
  if (seg->kind == 'c' && seg->has_p1) {
    if (arc_middle_between(g, seg->p1[0], seg->p1[1], zm0, seg->end)) return -1;
  } else if (seg->kind == 'a' && seg->has_p1 && seg->numbers >= 5 && fabs(seg->ratio - 1) > 1e-12) {
    geoservices_ellipse e; /* an elliptic arc: points along it */
    geoservices_ellipse_of(start[0], start[1], seg->end[0], seg->end[1], seg->p1[0], seg->p1[1], seg->clockwise != 0,
                           seg->rotation, seg->axis, seg->ratio, &e);
    n = geoservices_arc_pieces(e.sweep);
    for (i = 1; i < n; i++) {
      geoservices_ellipse_point(&e, (double)i / n, &x, &y);
      if (point_between(g, x, y, zm0, seg->end, (double)i / n)) return -1;
    }
    g->inexact = 1;
  } else if (seg->kind == 'a' && seg->has_p1) { /* an arc of a circle around p1: through its middle */
    geoservices_arc_midpoint_around(start[0], start[1], seg->end[0], seg->end[1], seg->p1[0], seg->p1[1],
                                    seg->numbers >= 2 && seg->clockwise != 0, &x, &y);
    if (arc_middle_between(g, x, y, zm0, seg->end)) return -1;
    g->inexact = 1;
  } else if (seg->kind == 'b' && seg->has_p1 && seg->has_p2) {
    for (i = 1; i < BEZIER_PIECES; i++) {
      geoservices_bezier_point(start, seg->p1, seg->p2, seg->end, (double)i / BEZIER_PIECES, &x, &y);
      if (point_between(g, x, y, zm0, seg->end, (double)i / BEZIER_PIECES)) return -1;
    }
    g->inexact = 1;
  } else { /* unknown, or without its points: a straight line to its end */
    g->inexact = 1;
  }
  return geoservices_geom_point_zm(g, seg->end[0], seg->end[1], seg->end[2], seg->end[3]);
}

int geoservices_geom_point(geoservices_geom *g, double x, double y) {
  return geoservices_geom_point_zm(g, x, y, NAN, NAN);
}

void geoservices_geom_ordinates_as(geoservices_geom *g, int had_z, int had_m) {
  size_t k;
  if (!(g->has_z || g->has_m) || (had_z && had_m)) return; /* each already in its slot */
  for (k = 0; k < g->npoints; k++) {
    double third = g->zm[2 * k];
    g->zm[2 * k] = had_z ? third : NAN;
    g->zm[2 * k + 1] = had_m ? third : NAN; /* [x, y, m]: the third number is the measure */
  }
}

size_t geoservices_geom_part_end(const geoservices_geom *g, size_t i) {
  return i + 1 < g->nparts ? g->parts[i + 1] : g->npoints;
}

double geoservices_ring_area(const double *xy, size_t first, size_t end) {
  double sum = 0, x0, y0;
  size_t i;
  if (end - first < 3) return 0;
  x0 = xy[2 * first];
  y0 = xy[2 * first + 1];
  /* relative to the first point: large coordinates lose no precision */
  for (i = first; i < end; i++) {
    size_t j = i + 1 < end ? i + 1 : first;
    sum += (xy[2 * i] - x0) * (xy[2 * j + 1] - y0) - (xy[2 * j] - x0) * (xy[2 * i + 1] - y0);
  }
  return sum / 2;
}

/* ---- arcs ------------------------------------------------------------------ */

/* Point j of part i's ring (j == its count: the first again, closing it). */
static size_t ring_index(const geoservices_geom *g, size_t i, size_t j) {
  size_t first = g->parts[i], end = geoservices_geom_part_end(g, i);
  return first + j < end ? first + j : first;
}

/* Whether point k (of the part [first, end)) is the middle of an arc: an arc
 * needs a point before and after it that are not middles themselves. */
static int arc_at(const geoservices_geom *g, size_t first, size_t end, size_t k) {
  return g->has_arcs && k > first && k + 1 < end && g->arc[k] && !g->arc[k - 1] && !g->arc[k + 1];
}

int geoservices_geom_is_arc_middle(const geoservices_geom *g, size_t i, size_t k) {
  return i < g->nparts && arc_at(g, g->parts[i], geoservices_geom_part_end(g, i), k);
}

/* Clears the flags that make no arc (a middle at either end of its part, two
 * middles in a row) and has_arcs when none is left. */
static void settle_arcs(geoservices_geom *g) {
  size_t i, k, left = 0;
  if (!g->has_arcs) return;
  for (i = 0; i < g->nparts; i++) {
    size_t first = g->parts[i], end = geoservices_geom_part_end(g, i);
    for (k = first; k < end; k++) {
      if (g->arc[k] && !(k > first && k + 1 < end && !g->arc[k - 1])) g->arc[k] = 0;
      left += g->arc[k];
    }
    /* a flag cleared above may leave its next one valid: checked in order */
  }
  if (!left) g->has_arcs = 0;
}

double geoservices_part_area(const geoservices_geom *g, size_t i) {
  size_t first = g->parts[i], end = geoservices_geom_part_end(g, i), n = end - first, j;
  double x0, y0, sum = 0;
  if (!g->has_arcs) return geoservices_ring_area(g->xy, first, end);
  if (n < 2) return 0;
  x0 = g->xy[2 * first];
  y0 = g->xy[2 * first + 1];
  for (j = 0; j < n;) { /* segments from point j, the last one back to the first */
    size_t a = ring_index(g, i, j), b;
    geoservices_arc arc;
    double ax = g->xy[2 * a] - x0, ay = g->xy[2 * a + 1] - y0, bx, by;
    if (j + 2 <= n && arc_at(g, first, end, first + j + 1)) {
      size_t m = first + j + 1;
      b = ring_index(g, i, j + 2);
      bx = g->xy[2 * b] - x0, by = g->xy[2 * b + 1] - y0;
      geoservices_arc_of(ax, ay, g->xy[2 * m] - x0, g->xy[2 * m + 1] - y0, bx, by, &arc);
      j += 2;
    } else {
      b = ring_index(g, i, j + 1);
      bx = g->xy[2 * b] - x0, by = g->xy[2 * b + 1] - y0;
      arc.straight = 1;
      j += 1;
    }
    sum += geoservices_arc_area2(&arc, ax, ay, bx, by);
  }
  return sum / 2;
}

/* Extends box (minx maxx miny maxy) by the points of [first, end) and the
 * bulges of their arcs. */
static void extend_part(const geoservices_geom *g, size_t first, size_t end, double box[4]) {
  size_t k;
  for (k = first; k < end; k++) {
    double x = g->xy[2 * k], y = g->xy[2 * k + 1];
    if (x < box[0]) box[0] = x;
    if (x > box[1]) box[1] = x;
    if (y < box[2]) box[2] = y;
    if (y > box[3]) box[3] = y;
    if (arc_at(g, first, end, k)) {
      geoservices_arc arc;
      const double *a = g->xy + 2 * (k - 1), *b = g->xy + 2 * (k + 1);
      geoservices_arc_of(a[0], a[1], x, y, b[0], b[1], &arc);
      geoservices_arc_extend(&arc, a[0], a[1], b[0], b[1], box);
    }
  }
}

/* ---- encoding -------------------------------------------------------------- */

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
    extend_part(g, first, end, box);
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

static void envelope(const geoservices_geom *g, double env[4]) {
  size_t k, i;
  env[0] = env[2] = INFINITY;
  env[1] = env[3] = -INFINITY;
  if (g->has_arcs) { /* an arc reaches beyond its points */
    for (i = 0; i < g->nparts; i++) extend_part(g, g->parts[i], geoservices_geom_part_end(g, i), env);
  } else {
    for (k = 0; k < g->npoints; k++) {
      double x = g->xy[2 * k], y = g->xy[2 * k + 1];
      if (x < env[0]) env[0] = x;
      if (x > env[1]) env[1] = x;
      if (y < env[2]) env[2] = y;
      if (y > env[3]) env[3] = y;
    }
  }
  if (!(env[0] <= env[1] && env[2] <= env[3])) env[0] = env[1] = env[2] = env[3] = NAN;
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
  return first + j < end && arc_at(g, first, end, first + j);
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
    for (j = 0; j < n; j++) p = w_point(p, g, ring_index(g, i, j));
    return p;
  }
  for (j = 0; j + 1 < n; runs++) j = run_from(g, i, n, j, &arcs);
  p = w_u32(w_head(p, g, WKB_COMPOUNDCURVE), (uint32_t)runs);
  for (j = 0; j + 1 < n;) { /* each run begins where the one before ended */
    size_t last = run_from(g, i, n, j, &arcs);
    p = w_u32(w_head(p, g, arcs ? WKB_CIRCULARSTRING : WKB_LINESTRING), (uint32_t)(last - j + 1));
    for (k = j; k <= last; k++) p = w_point(p, g, ring_index(g, i, k));
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
  settle_arcs(g);
  if (g->kind == GEOM_POINT && g->npoints > 1) g->npoints = 1;
  empty = g->npoints == 0;
  envelope(g, env);
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

/* ---- decoding -------------------------------------------------------------- */

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
  envelope(g, env);
  return isnan(env[0]) ? 0 : 1;
}
