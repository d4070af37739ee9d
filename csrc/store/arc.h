/* Circular arcs through three points (a start, a point on the arc, an end:
 * Esri JSON's "c" segment and an ISO WKB CIRCULARSTRING's triple), the
 * other curve segments of Esri JSON as points (cubic Bézier "b", elliptic
 * arc "a"), and what a geometry needs of an arc: its extent (the arc bulges
 * beyond its points) and its share of a ring's signed area.
 * Pure C, no allocation. */
#ifndef GEOSERVICES_STORE_ARC_H
#define GEOSERVICES_STORE_ARC_H

typedef struct geoservices_arc {
  double cx, cy, r; /* the circle */
  double a0;        /* the start's angle on it */
  double sweep;     /* signed: positive counter-clockwise (y up); +-2 pi for a full circle */
  int straight;     /* the three points are on a line (or two of them coincide): a segment */
} geoservices_arc;

/* The arc from (ax, ay) through (mx, my) to (bx, by). An arc whose end is
 * its start is the full circle through the middle point, taken clockwise
 * (three points cannot say which way; a ring of one circle is an exterior). */
void geoservices_arc_of(double ax, double ay, double mx, double my, double bx, double by, geoservices_arc *arc);

/* Extends box (minx maxx miny maxy) by the arc from a to b. */
void geoservices_arc_extend(const geoservices_arc *arc, double ax, double ay, double bx, double by, double box[4]);

/* Twice the signed area the arc from a to b adds to a ring (Green's theorem:
 * the line segment's term plus the circular segment's), coordinates taken
 * as given (the caller subtracts an origin for precision). */
double geoservices_arc_area2(const geoservices_arc *arc, double ax, double ay, double bx, double by);

/* The point of the arc at its sweep's fraction t (0: the start, 1: the end). */
void geoservices_arc_point(const geoservices_arc *arc, double t, double *x, double *y);

/* The circular arc from a to b around (cx, cy), clockwise or not (Esri's
 * "a" segment of a circle): the point halfway along it, so that it becomes
 * an arc through three points. */
void geoservices_arc_midpoint_around(double ax, double ay, double bx, double by, double cx, double cy, int clockwise,
                                     double *mx, double *my);

/* Points of a cubic Bézier curve from p0 with control points c1, c2 to p3
 * at t = i / n (i = 1..n-1 are the ones between). */
void geoservices_bezier_point(const double p0[2], const double c1[2], const double c2[2], const double p3[2],
                              double t, double *x, double *y);

/* An elliptic arc (Esri's "a" segment with rotation, axis and ratio): the
 * start's and end's parameter angles on the ellipse around (cx, cy) whose
 * semi-major axis `axis` makes `rotation` radians with the x axis and whose
 * minor axis is `ratio` times it, and the signed sweep (clockwise negative). */
typedef struct geoservices_ellipse {
  double cx, cy, rotation, axis, ratio, t0, sweep;
} geoservices_ellipse;
void geoservices_ellipse_of(double ax, double ay, double bx, double by, double cx, double cy, int clockwise,
                            double rotation, double axis, double ratio, geoservices_ellipse *e);
void geoservices_ellipse_point(const geoservices_ellipse *e, double t, double *x, double *y);

/* How many pieces a curve segment is cut into for display: enough that a
 * piece turns by at most 2 pi / 128 (a full circle in 128 chords). */
int geoservices_arc_pieces(double sweep);

#endif
