/* The geometry in memory (geom.h): a geoservices_geom collected point by
 * point, its arcs (which points are the middles of circular arcs, kept
 * only where they make an arc), the areas and extents those arcs bulge.
 * Writing it as a GeoPackage blob is geom_encode.c, reading one into it
 * geom_decode.c; both stand on this file. */
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
size_t geoservices_geom_ring_index(const geoservices_geom *g, size_t i, size_t j) {
  size_t first = g->parts[i], end = geoservices_geom_part_end(g, i);
  return first + j < end ? first + j : first;
}

/* Whether point k (of the part [first, end)) is the middle of an arc: an arc
 * needs a point before and after it that are not middles themselves. */
int geoservices_geom_arc_at(const geoservices_geom *g, size_t first, size_t end, size_t k) {
  return g->has_arcs && k > first && k + 1 < end && g->arc[k] && !g->arc[k - 1] && !g->arc[k + 1];
}

int geoservices_geom_is_arc_middle(const geoservices_geom *g, size_t i, size_t k) {
  return i < g->nparts && geoservices_geom_arc_at(g, g->parts[i], geoservices_geom_part_end(g, i), k);
}

/* Clears the flags that make no arc (a middle at either end of its part, two
 * middles in a row) and has_arcs when none is left. */
void geoservices_geom_settle_arcs(geoservices_geom *g) {
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
    size_t a = geoservices_geom_ring_index(g, i, j), b;
    geoservices_arc arc;
    double ax = g->xy[2 * a] - x0, ay = g->xy[2 * a + 1] - y0, bx, by;
    if (j + 2 <= n && geoservices_geom_arc_at(g, first, end, first + j + 1)) {
      size_t m = first + j + 1;
      b = geoservices_geom_ring_index(g, i, j + 2);
      bx = g->xy[2 * b] - x0, by = g->xy[2 * b + 1] - y0;
      geoservices_arc_of(ax, ay, g->xy[2 * m] - x0, g->xy[2 * m + 1] - y0, bx, by, &arc);
      j += 2;
    } else {
      b = geoservices_geom_ring_index(g, i, j + 1);
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
void geoservices_geom_extend_part(const geoservices_geom *g, size_t first, size_t end, double box[4]) {
  size_t k;
  for (k = first; k < end; k++) {
    double x = g->xy[2 * k], y = g->xy[2 * k + 1];
    if (x < box[0]) box[0] = x;
    if (x > box[1]) box[1] = x;
    if (y < box[2]) box[2] = y;
    if (y > box[3]) box[3] = y;
    if (geoservices_geom_arc_at(g, first, end, k)) {
      geoservices_arc arc;
      const double *a = g->xy + 2 * (k - 1), *b = g->xy + 2 * (k + 1);
      geoservices_arc_of(a[0], a[1], x, y, b[0], b[1], &arc);
      geoservices_arc_extend(&arc, a[0], a[1], b[0], b[1], box);
    }
  }
}

/* The extent (minx maxx miny maxy) of g's points and the bulges of their
 * arcs; NaNs when there is none. */
void geoservices_geom_envelope(const geoservices_geom *g, double env[4]) {
  size_t k, i;
  env[0] = env[2] = INFINITY;
  env[1] = env[3] = -INFINITY;
  if (g->has_arcs) { /* an arc reaches beyond its points */
    for (i = 0; i < g->nparts; i++) geoservices_geom_extend_part(g, g->parts[i], geoservices_geom_part_end(g, i), env);
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
