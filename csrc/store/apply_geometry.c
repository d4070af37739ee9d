/* An Esri JSON geometry read off the record tape into s->geom (geom.h):
 * points, multipoints, paths, rings and true curves, with their Z and M. */
#include "store/apply_internal.h"

#include <math.h>
#include <string.h>

/* A number on the tape (integers become doubles); 0 if the value is not one.
 * Advances past the value either way. */
static int tape_number(const char **p, double *d) {
  int op = (unsigned char)**p;
  if (op == TAPE_INTEGER) {
    (*p)++;
    *d = (double)geoservices_tape_i64(p);
    return 1;
  }
  if (op == TAPE_DOUBLE) {
    (*p)++;
    *d = geoservices_tape_f64(p);
    return 1;
  }
  *p = geoservices_tape_skip(*p);
  return 0;
}

/* [x, y, ...] at *p into v: x and y must be numbers (else 0: no point); a
 * third and fourth are kept as they come (NaN when not a number, a null)
 * for geoservices_geom_ordinates_as to place, and noted in g->extra.
 * Advances past the value. */
static int tape_xyzm(geoservices_geom *g, const char **p, double v[4]) {
  uint32_t n, i;
  int ok = 1;
  v[0] = v[1] = v[2] = v[3] = NAN;
  if ((unsigned char)**p != TAPE_ARRAY) {
    *p = geoservices_tape_skip(*p);
    return 0;
  }
  (*p)++;
  n = geoservices_tape_u32(p);
  for (i = 0; i < n; i++) {
    if (i < 4) {
      int number = tape_number(p, &v[i]);
      if (i < 2) ok &= number;
      else if (!number) v[i] = NAN;
    } else {
      *p = geoservices_tape_skip(*p);
    }
  }
  if (!isnan(v[2])) g->extra |= 1;
  if (!isnan(v[3])) g->extra |= 2;
  return n >= 2 && ok;
}

/* [x, y, ...] into the geometry (anything else is no point). */
static int tape_coordinate(geoservices_store *s, const char **p) {
  double v[4];
  if (!tape_xyzm(&s->geom, p, v) || !isfinite(v[0]) || !isfinite(v[1])) {
    s->geom.inexact = 1; /* a point left out: the server's JSON is kept (apply_feature) */
    return 0;
  }
  if (geoservices_geom_point_zm(&s->geom, v[0], v[1], v[2], v[3]))
    return geoservices_store_fail(s, SQLITE_NOMEM, "out of memory");
  return 0;
}

/* A number or a boolean (Esri's curve flags come as either). Advances. */
static int tape_scalar(const char **p, double *d) {
  int op = (unsigned char)**p;
  if (op == TAPE_TRUE || op == TAPE_FALSE) {
    (*p)++;
    *d = op == TAPE_TRUE;
    return 1;
  }
  return tape_number(p, d);
}

/* A curve object of a curve path: {"c": [end, point on the arc]},
 * {"a": [end, centre, minor, clockwise(, rotation, axis, ratio)]},
 * {"b": [end, control 1, control 2]}, or one of a kind the store does not
 * know (a straight line to its end). geom.h says what each becomes. */
static int tape_curve_object(geoservices_store *s, const char **p) {
  geoservices_segment sg;
  uint32_t n, i, len, m, j;
  memset(&sg, 0, sizeof sg);
  (*p)++; /* TAPE_OBJECT */
  n = geoservices_tape_u32(p);
  for (i = 0; i < n; i++) {
    const char *key = geoservices_tape_key(p, &len);
    double v[4];
    if (sg.has_end || (unsigned char)**p != TAPE_ARRAY) { /* one segment per object */
      *p = geoservices_tape_skip(*p);
      continue;
    }
    sg.kind = len == 1 && (key[0] == 'c' || key[0] == 'a' || key[0] == 'b') ? key[0] : 0;
    (*p)++;
    m = geoservices_tape_u32(p);
    for (j = 0; j < m; j++) {
      if (j == 0) {
        sg.has_end = tape_xyzm(&s->geom, p, sg.end);
      } else if (j <= 2 && (unsigned char)**p == TAPE_ARRAY) {
        int ok = tape_xyzm(&s->geom, p, v);
        double *dst = j == 1 ? sg.p1 : sg.p2;
        dst[0] = v[0], dst[1] = v[1];
        if (j == 1) sg.has_p1 = ok;
        else sg.has_p2 = ok;
      } else if (j >= 2 && j <= 6) {
        double d = NAN;
        int ok = tape_scalar(p, &d);
        if (ok && sg.numbers == (int)j - 2) {
          double *slot[] = {&sg.minor, &sg.clockwise, &sg.rotation, &sg.axis, &sg.ratio};
          *slot[j - 2] = d;
          sg.numbers++;
        }
      } else {
        *p = geoservices_tape_skip(*p);
      }
    }
  }
  if (geoservices_geom_segment(&s->geom, &sg)) return geoservices_store_fail(s, SQLITE_NOMEM, "out of memory");
  return 0;
}

/* curvePaths or curveRings: an array of arrays of coordinates and curve objects. */
static int tape_curve_parts(geoservices_store *s, const char **p) {
  uint32_t n, i, m, j;
  if ((unsigned char)**p != TAPE_ARRAY) {
    *p = geoservices_tape_skip(*p);
    return 0;
  }
  (*p)++;
  n = geoservices_tape_u32(p);
  for (i = 0; i < n; i++) {
    if ((unsigned char)**p != TAPE_ARRAY) {
      *p = geoservices_tape_skip(*p);
      s->geom.inexact = 1;
      continue;
    }
    (*p)++;
    m = geoservices_tape_u32(p);
    if (geoservices_geom_part(&s->geom)) return geoservices_store_fail(s, SQLITE_NOMEM, "out of memory");
    for (j = 0; j < m; j++) {
      int op = (unsigned char)**p;
      if (op == TAPE_OBJECT) {
        if (tape_curve_object(s, p)) return -1;
      } else if (op == TAPE_ARRAY) {
        if (tape_coordinate(s, p)) return -1;
      } else {
        *p = geoservices_tape_skip(*p);
        s->geom.inexact = 1;
      }
    }
  }
  return 0;
}

/* paths or rings: an array of arrays of coordinates. */
static int tape_parts(geoservices_store *s, const char **p) {
  uint32_t n, i, m, j;
  if ((unsigned char)**p != TAPE_ARRAY) {
    *p = geoservices_tape_skip(*p);
    return 0;
  }
  (*p)++;
  n = geoservices_tape_u32(p);
  for (i = 0; i < n; i++) {
    if ((unsigned char)**p != TAPE_ARRAY) {
      *p = geoservices_tape_skip(*p);
      continue;
    }
    (*p)++;
    m = geoservices_tape_u32(p);
    if (geoservices_geom_part(&s->geom)) return geoservices_store_fail(s, SQLITE_NOMEM, "out of memory");
    for (j = 0; j < m; j++)
      if (tape_coordinate(s, p)) return -1;
  }
  return 0;
}

/* A JSON boolean on the tape: 1 or 0, -1 for anything else. Advances past it. */
static int tape_flag(const char **p) {
  int op = (unsigned char)**p;
  *p = geoservices_tape_skip(*p);
  return op == TAPE_TRUE ? 1 : op == TAPE_FALSE ? 0 : -1;
}

/* A point's x or y: a finite number, or null or "NaN" (Esri's empty point:
 * NAN); 0 for anything else. Advances past it. */
static int tape_point_ordinate(const char **p, double *d) {
  int op = (unsigned char)**p;
  uint32_t len;
  *d = NAN;
  if (op == TAPE_NULL) {
    *p = geoservices_tape_skip(*p);
    return 1;
  }
  if (geoservices_tape_is_string(op)) {
    const char *v = geoservices_tape_string(p, &len);
    return len == 3 && memcmp(v, "NaN", 3) == 0;
  }
  if (!tape_number(p, d)) return 0;
  if (isfinite(*d)) return 1;
  *d = NAN;
  return 0;
}

/* Whether the geometry just read has Z or M values (or numbers past x and y
 * of no known meaning) that the layer's column cannot hold: a service that
 * declares less than its data has (issue 41). The blob then holds what the
 * column can, and the server's JSON is kept beside it (apply_feature), never
 * flattened silently. had_z / had_m: the geometry's own flags (-1: none). */
static int drops_ordinates(const geoservices_store_layer *l, const geoservices_geom *g, int had_z, int had_m,
                           double z, double m) {
  int gz, gm, k;
  if (g->kind == GEOM_POINT || (g->kind == GEOM_NONE && g->extra == 0))
    return (!isnan(z) && !l->has_z) || (!isnan(m) && !l->has_m);
  gz = had_z < 0 ? l->has_z : had_z;
  gm = had_m < 0 ? l->has_m : had_m;
  k = (gz != 0) + (gm != 0); /* the numbers past x and y that have a meaning */
  if ((g->extra & 2) && k < 2) return 1;
  if ((g->extra & 1) && k < 1) return 1;
  if (gz && !l->has_z && (g->extra & 1)) return 1;
  if (gm && !l->has_m && (g->extra & (gz ? 2 : 1))) return 1;
  return 0;
}

/* An Esri geometry object into s->geom, with the layer's Z and M; its kind
 * comes from its members (x/y, points, paths, rings). The meaning of the
 * coordinates' third and fourth numbers is the geometry's own hasZ / hasM,
 * wherever they come among its members, else the layer's. True curves
 * (curvePaths, curveRings) as geom.h says; unknown shapes give no geometry. */
int geoservices_store_tape_geometry(geoservices_store *s, const geoservices_store_layer *l, const char **p) {
  uint32_t n, i, len, m, j;
  double x = NAN, y = NAN, z = NAN, mv = NAN;
  int has_xy = 0, had_z = -1, had_m = -1, curved = 0, unknown = 0, bad = 0;
  geoservices_geom_reset(&s->geom, GEOM_NONE);
  geoservices_geom_dims(&s->geom, l->has_z, l->has_m);
  (*p)++; /* TAPE_OBJECT */
  n = geoservices_tape_u32(p);
  for (i = 0; i < n; i++) {
    const char *key = geoservices_tape_key(p, &len);
    if (geoservices_store_key_is(key, len, "x")) {
      has_xy = 1;
      bad |= !tape_point_ordinate(p, &x);
    } else if (geoservices_store_key_is(key, len, "y")) {
      bad |= !tape_point_ordinate(p, &y);
    } else if (geoservices_store_key_is(key, len, "z")) {
      if (!tape_number(p, &z)) z = NAN;
    } else if (geoservices_store_key_is(key, len, "m")) {
      if (!tape_number(p, &mv)) mv = NAN;
    } else if (geoservices_store_key_is(key, len, "hasZ")) {
      had_z = tape_flag(p);
    } else if (geoservices_store_key_is(key, len, "hasM")) {
      had_m = tape_flag(p);
    } else if (geoservices_store_key_is(key, len, "points")) {
      geoservices_geom_reset(&s->geom, GEOM_MULTIPOINT);
      if ((unsigned char)**p != TAPE_ARRAY) {
        *p = geoservices_tape_skip(*p);
        continue;
      }
      (*p)++;
      m = geoservices_tape_u32(p);
      for (j = 0; j < m; j++)
        if (tape_coordinate(s, p)) return -1;
    } else if (!curved && geoservices_store_key_is(key, len, "paths")) {
      geoservices_geom_reset(&s->geom, GEOM_POLYLINE);
      if (tape_parts(s, p)) return -1;
    } else if (!curved && geoservices_store_key_is(key, len, "rings")) {
      geoservices_geom_reset(&s->geom, GEOM_POLYGON);
      if (tape_parts(s, p)) return -1;
    } else if (geoservices_store_key_is(key, len, "curvePaths") || geoservices_store_key_is(key, len, "curveRings")) {
      /* the true curves win over densified paths or rings sent beside them */
      geoservices_geom_reset(&s->geom, key[5] == 'P' ? GEOM_POLYLINE : GEOM_POLYGON);
      curved = 1;
      if (tape_curve_parts(s, p)) return -1;
    } else {
      unknown |= !geoservices_store_key_is(key, len, "spatialReference");
      *p = geoservices_tape_skip(*p);
    }
  }
  if (s->geom.kind == GEOM_NONE && has_xy) { /* a point's z and m are named: no flags needed */
    geoservices_geom_reset(&s->geom, GEOM_POINT);
    if (!isnan(x) && !isnan(y) && geoservices_geom_point_zm(&s->geom, x, y, z, mv))
      return geoservices_store_fail(s, SQLITE_NOMEM, "out of memory");
  } else {
    geoservices_geom_ordinates_as(&s->geom, had_z < 0 ? l->has_z : had_z, had_m < 0 ? l->has_m : had_m);
  }
  if (bad) s->geom.inexact = 1; /* a point's x or y that is no number: kept as sent */
  if (drops_ordinates(l, &s->geom, had_z, had_m, z, mv)) s->geom.inexact = 1;
  /* another kind than the layer's, or none the store knows: an empty geometry
   * of the layer's kind (never a blob of another type than the column's, nor
   * a NULL that hides it) and the server's JSON kept (geoservices.store.file.unrepresentable) */
  if (l->geom_kind != GEOM_NONE && s->geom.kind != l->geom_kind && (s->geom.kind != GEOM_NONE || unknown)) {
    geoservices_geom_reset(&s->geom, l->geom_kind);
    geoservices_geom_dims(&s->geom, l->has_z, l->has_m);
    s->geom.inexact = 1;
  }
  return 0;
}
