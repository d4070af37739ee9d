#include "store/arc.h"

#include <math.h>

#define TWO_PI 6.283185307179586476925286766559

/* a in [0, 2 pi) */
static double wrap(double a) {
  a = fmod(a, TWO_PI);
  return a < 0 ? a + TWO_PI : a;
}

void geoservices_arc_of(double ax, double ay, double mx, double my, double bx, double by, geoservices_arc *arc) {
  /* relative to the start: large coordinates lose no precision */
  double px = mx - ax, py = my - ay, qx = bx - ax, qy = by - ay;
  double cross = px * qy - py * qx;
  double scale = fmax(fmax(fabs(px), fabs(py)), fmax(fabs(qx), fabs(qy)));
  double ux, uy, a1;
  arc->straight = 0;
  if (!(scale > 0) || !isfinite(scale)) { /* every point the same, or not numbers */
    arc->straight = 1;
    arc->cx = ax, arc->cy = ay, arc->r = 0, arc->a0 = 0, arc->sweep = 0;
    return;
  }
  if (qx == 0 && qy == 0) { /* back to the start: the full circle through the middle point */
    ux = px / 2, uy = py / 2;
    arc->cx = ax + ux, arc->cy = ay + uy;
    arc->r = hypot(ux, uy);
    arc->a0 = atan2(-uy, -ux);
    arc->sweep = -TWO_PI;
    return;
  }
  if (fabs(cross) <= 1e-12 * scale * scale) { /* on a line: a segment */
    arc->straight = 1;
    arc->cx = ax, arc->cy = ay, arc->r = 0, arc->a0 = 0, arc->sweep = 0;
    return;
  }
  {
    double d = 2 * cross, p2 = px * px + py * py, q2 = qx * qx + qy * qy;
    ux = (qy * p2 - py * q2) / d;
    uy = (px * q2 - qx * p2) / d;
  }
  arc->cx = ax + ux, arc->cy = ay + uy;
  arc->r = hypot(ux, uy);
  arc->a0 = atan2(-uy, -ux);
  a1 = atan2(qy - uy, qx - ux);
  /* the middle point on the left of start -> end: counter-clockwise */
  arc->sweep = cross > 0 ? wrap(a1 - arc->a0) : -wrap(arc->a0 - a1);
}

void geoservices_arc_extend(const geoservices_arc *arc, double ax, double ay, double bx, double by, double box[4]) {
  static const double quadrant[4][2] = {{1, 0}, {0, 1}, {-1, 0}, {0, -1}};
  double xs[6], ys[6];
  int n = 0, k;
  xs[n] = ax, ys[n++] = ay;
  xs[n] = bx, ys[n++] = by;
  if (!arc->straight) { /* each axis crossing the arc passes (a quarter turn k from angle 0) */
    for (k = 0; k < 4; k++) {
      double at = k * (TWO_PI / 4);
      double turn = arc->sweep >= 0 ? wrap(at - arc->a0) : wrap(arc->a0 - at);
      if (turn <= fabs(arc->sweep)) {
        xs[n] = arc->cx + arc->r * quadrant[k][0];
        ys[n++] = arc->cy + arc->r * quadrant[k][1];
      }
    }
  }
  for (k = 0; k < n; k++) {
    if (xs[k] < box[0]) box[0] = xs[k];
    if (xs[k] > box[1]) box[1] = xs[k];
    if (ys[k] < box[2]) box[2] = ys[k];
    if (ys[k] > box[3]) box[3] = ys[k];
  }
}

double geoservices_arc_area2(const geoservices_arc *arc, double ax, double ay, double bx, double by) {
  if (arc->straight) return ax * by - bx * ay;
  /* the integral of x dy - y dx along the arc */
  return arc->r * arc->r * arc->sweep + arc->cx * (by - ay) - arc->cy * (bx - ax);
}

void geoservices_arc_point(const geoservices_arc *arc, double t, double *x, double *y) {
  double a = arc->a0 + t * arc->sweep;
  *x = arc->cx + arc->r * cos(a);
  *y = arc->cy + arc->r * sin(a);
}

void geoservices_arc_midpoint_around(double ax, double ay, double bx, double by, double cx, double cy, int clockwise,
                                     double *mx, double *my) {
  double r = hypot(ax - cx, ay - cy), a0 = atan2(ay - cy, ax - cx), a1 = atan2(by - cy, bx - cx);
  double sweep = clockwise ? -wrap(a0 - a1) : wrap(a1 - a0);
  if (sweep == 0) sweep = clockwise ? -TWO_PI : TWO_PI; /* the end is the start: the whole circle */
  *mx = cx + r * cos(a0 + sweep / 2);
  *my = cy + r * sin(a0 + sweep / 2);
}

void geoservices_bezier_point(const double p0[2], const double c1[2], const double c2[2], const double p3[2],
                              double t, double *x, double *y) {
  double u = 1 - t, b0 = u * u * u, b1 = 3 * u * u * t, b2 = 3 * u * t * t, b3 = t * t * t;
  *x = b0 * p0[0] + b1 * c1[0] + b2 * c2[0] + b3 * p3[0];
  *y = b0 * p0[1] + b1 * c1[1] + b2 * c2[1] + b3 * p3[1];
}

/* The parameter angle of (x, y) on the ellipse. */
static double ellipse_angle(const geoservices_ellipse *e, double x, double y) {
  double dx = x - e->cx, dy = y - e->cy, c = cos(e->rotation), s = sin(e->rotation);
  double u = dx * c + dy * s, v = -dx * s + dy * c;
  double b = e->axis * e->ratio;
  return atan2(b != 0 ? v / b : 0, e->axis != 0 ? u / e->axis : 0);
}

void geoservices_ellipse_of(double ax, double ay, double bx, double by, double cx, double cy, int clockwise,
                            double rotation, double axis, double ratio, geoservices_ellipse *e) {
  double t1;
  e->cx = cx, e->cy = cy, e->rotation = rotation, e->axis = fabs(axis), e->ratio = fabs(ratio);
  e->t0 = ellipse_angle(e, ax, ay);
  t1 = ellipse_angle(e, bx, by);
  e->sweep = clockwise ? -wrap(e->t0 - t1) : wrap(t1 - e->t0);
  if (e->sweep == 0 && ax == bx && ay == by) e->sweep = clockwise ? -TWO_PI : TWO_PI; /* the whole ellipse */
}

void geoservices_ellipse_point(const geoservices_ellipse *e, double t, double *x, double *y) {
  double a = e->t0 + t * e->sweep, c = cos(e->rotation), s = sin(e->rotation);
  double u = e->axis * cos(a), v = e->axis * e->ratio * sin(a);
  *x = e->cx + u * c - v * s;
  *y = e->cy + u * s + v * c;
}

int geoservices_arc_pieces(double sweep) {
  double n = ceil(fabs(sweep) / (TWO_PI / 128));
  if (!(n >= 4)) return 4; /* NaN too */
  return n > 128 ? 128 : (int)n;
}
