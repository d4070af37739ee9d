/* Unit tests of the GeoPackage geometry codec (store/geom*.c) and of the
 * date conversions (store/isotime.c): headers and envelopes, ring
 * orientation deciding the polygons of a MultiPolygon, holes finding their
 * exterior, single parts written as MULTI, Z and M, decoding of foreign
 * blobs, truncated input. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "check.h"
#include "store/geom.h"
#include "store/isotime.h"

static uint32_t u32le(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static double f64le(const unsigned char *p) {
  uint64_t u = 0;
  double d;
  int i;
  for (i = 0; i < 8; i++) u |= (uint64_t)p[i] << (8 * i);
  memcpy(&d, &u, sizeof d);
  return d;
}

/* Adds a ring/path of n points (x y pairs). */
static void part(geoservices_geom *g, const double *xy, size_t n) {
  size_t i;
  geoservices_geom_part(g);
  for (i = 0; i < n; i++) geoservices_geom_point(g, xy[2 * i], xy[2 * i + 1]);
}

/* Encodes g; returns the blob in b (reset first). */
static void encode(geoservices_geom *g, geoservices_buf *b, double env[4]) {
  geoservices_buf_reset(b);
  CHECK(geoservices_geom_encode(g, 3857, b, env) == 0);
}

static const unsigned char *wkb_of(const geoservices_buf *b) {
  static const size_t env_size[] = {0, 32, 48, 48, 64};
  const unsigned char *p = (const unsigned char *)b->data;
  int kind = (p[3] >> 1) & 7;
  return p + 8 + env_size[kind];
}

/* Clockwise (Esri exterior) and counter-clockwise (hole) squares. */
static const double EXT[] = {0, 0, 0, 10, 10, 10, 10, 0, 0, 0};
static const double HOLE[] = {2, 2, 8, 2, 8, 8, 2, 8, 2, 2};
static const double EXT2[] = {20, 20, 20, 30, 30, 30, 30, 20, 20, 20};
static const double HOLE2[] = {22, 22, 28, 22, 28, 28, 22, 28, 22, 22};

static void test_point(void) {
  geoservices_geom g, d;
  geoservices_buf b;
  double env[4];
  int32_t srs = 0;
  const char *err = NULL;
  const unsigned char *p, *w;
  geoservices_geom_init(&g);
  geoservices_geom_init(&d);
  geoservices_buf_init(&b, 0);
  geoservices_geom_reset(&g, GEOM_POINT);
  geoservices_geom_point(&g, -117.5, 34.25);
  encode(&g, &b, env);
  p = (const unsigned char *)b.data;
  CHECK(b.len == 8 + 21); /* no envelope: a point is its own, as GDAL writes it */
  CHECK(p[0] == 'G' && p[1] == 'P' && p[2] == 0);
  CHECK(p[3] == 0x01); /* little-endian, no envelope */
  CHECK(u32le(p + 4) == 3857);
  w = wkb_of(&b);
  CHECK(w[0] == 1 && u32le(w + 1) == WKB_POINT);
  CHECK(f64le(w + 5) == -117.5 && f64le(w + 13) == 34.25);
  CHECK(env[0] == -117.5 && env[1] == -117.5 && env[2] == 34.25 && env[3] == 34.25);
  CHECK(geoservices_geom_decode(&d, p, b.len, &srs, &err) == 0);
  CHECK(d.kind == GEOM_POINT && d.npoints == 1 && d.xy[0] == -117.5 && d.xy[1] == 34.25 && srs == 3857);
  /* its envelope read from its x and y in place, without a geometry to fill */
  CHECK(geoservices_gpkg_envelope(NULL, p, b.len, env) == 1 && env[0] == -117.5 && env[1] == -117.5 &&
        env[2] == 34.25 && env[3] == 34.25);
  CHECK(geoservices_gpkg_envelope(NULL, p, b.len - 1, env) == -1); /* truncated */

  /* an empty point: the empty flag, no envelope, NaN coordinates */
  geoservices_geom_reset(&g, GEOM_POINT);
  encode(&g, &b, env);
  p = (const unsigned char *)b.data;
  CHECK(p[3] == 0x11 && b.len == 8 + 21 && isnan(env[0]));
  CHECK(isnan(f64le(p + 8 + 5)));
  CHECK(geoservices_geom_decode(&d, p, b.len, &srs, &err) == 0 && d.kind == GEOM_POINT && d.npoints == 0);
  CHECK(geoservices_gpkg_envelope(&d, p, b.len, env) == 0);

  geoservices_geom_free(&g);
  geoservices_geom_free(&d);
  geoservices_buf_free(&b);
}

static void test_polygons(void) {
  geoservices_geom g, d;
  geoservices_buf b;
  double env[4];
  int32_t srs;
  const char *err;
  const unsigned char *w;
  geoservices_geom_init(&g);
  geoservices_geom_init(&d);
  geoservices_buf_init(&b, 0);

  CHECK(geoservices_ring_area(EXT, 0, 5) < 0);  /* clockwise with y up */
  CHECK(geoservices_ring_area(HOLE, 0, 5) > 0); /* counter-clockwise */

  /* exterior + hole: a MultiPolygon of one Polygon of two rings */
  geoservices_geom_reset(&g, GEOM_POLYGON);
  part(&g, EXT, 5);
  part(&g, HOLE, 5);
  encode(&g, &b, env);
  w = wkb_of(&b);
  CHECK(u32le(w + 1) == WKB_MULTIPOLYGON && u32le(w + 5) == 1);
  w += 9;
  CHECK(u32le(w + 1) == WKB_POLYGON && u32le(w + 5) == 2);
  CHECK(u32le(w + 9) == 5 && u32le(w + 9 + 4 + 80) == 5);
  CHECK(f64le(w + 9 + 4 + 16) == 0 && f64le(w + 9 + 4 + 24) == 10); /* the order the server sent */
  CHECK(env[0] == 0 && env[1] == 10 && env[2] == 0 && env[3] == 10);
  CHECK(geoservices_geom_decode(&d, (const unsigned char *)b.data, b.len, &srs, &err) == 0);
  CHECK(d.kind == GEOM_POLYGON && d.nparts == 2 && d.npoints == 10);

  /* two exteriors, each with a hole, the second hole first in the list:
   * a MultiPolygon of two polygons of two rings */
  geoservices_geom_reset(&g, GEOM_POLYGON);
  part(&g, HOLE2, 5);
  part(&g, EXT, 5);
  part(&g, EXT2, 5);
  part(&g, HOLE, 5);
  encode(&g, &b, env);
  w = wkb_of(&b);
  CHECK(u32le(w + 1) == WKB_MULTIPOLYGON && u32le(w + 5) == 2);
  w += 9;
  CHECK(w[0] == 1 && u32le(w + 1) == WKB_POLYGON && u32le(w + 5) == 2);
  CHECK(f64le(w + 13) == 0 && f64le(w + 13 + 80 + 4) == 2); /* EXT then HOLE */
  w += 9 + 2 * (4 + 80);
  CHECK(u32le(w + 1) == WKB_POLYGON && u32le(w + 5) == 2);
  CHECK(f64le(w + 13) == 20 && f64le(w + 13 + 80 + 4) == 22); /* EXT2 then HOLE2 */
  CHECK(env[0] == 0 && env[1] == 30 && env[2] == 0 && env[3] == 30);
  CHECK(geoservices_geom_decode(&d, (const unsigned char *)b.data, b.len, &srs, &err) == 0);
  CHECK(d.kind == GEOM_POLYGON && d.nparts == 4);

  /* an island in a lake in an island: two polygons (the inner island alone) */
  {
    static const double lake[] = {1, 1, 9, 1, 9, 9, 1, 9, 1, 1};
    static const double island[] = {4, 4, 4, 6, 6, 6, 6, 4, 4, 4};
    geoservices_geom_reset(&g, GEOM_POLYGON);
    part(&g, EXT, 5);
    part(&g, lake, 5);
    part(&g, island, 5);
    encode(&g, &b, env);
    w = wkb_of(&b);
    CHECK(u32le(w + 1) == WKB_MULTIPOLYGON && u32le(w + 5) == 2);
    CHECK(u32le(w + 9 + 5) == 2);                     /* EXT with the lake */
    CHECK(u32le(w + 9 + 9 + 2 * (4 + 80) + 5) == 1); /* the island alone */
  }

  /* an open ring is closed on the way out */
  {
    geoservices_geom_reset(&g, GEOM_POLYGON);
    part(&g, EXT, 4);
    encode(&g, &b, env);
    w = wkb_of(&b) + 9;
    CHECK(u32le(w + 1) == WKB_POLYGON && u32le(w + 5) == 1 && u32le(w + 9) == 5);
    CHECK(f64le(w + 13 + 64) == 0 && f64le(w + 13 + 72) == 0);
  }

  /* only counter-clockwise rings: each stands alone */
  geoservices_geom_reset(&g, GEOM_POLYGON);
  part(&g, HOLE, 5);
  part(&g, HOLE2, 5);
  encode(&g, &b, env);
  w = wkb_of(&b);
  CHECK(u32le(w + 1) == WKB_MULTIPOLYGON && u32le(w + 5) == 2);

  /* no rings: MULTIPOLYGON EMPTY */
  geoservices_geom_reset(&g, GEOM_POLYGON);
  encode(&g, &b, env);
  CHECK((unsigned char)b.data[3] == 0x11 && u32le(wkb_of(&b) + 1) == WKB_MULTIPOLYGON && u32le(wkb_of(&b) + 5) == 0);
  CHECK(geoservices_geom_decode(&d, (const unsigned char *)b.data, b.len, &srs, &err) == 0);
  CHECK(d.kind == GEOM_POLYGON && d.nparts == 0);

  geoservices_geom_free(&g);
  geoservices_geom_free(&d);
  geoservices_buf_free(&b);
}

static void test_lines_and_points(void) {
  static const double path1[] = {0, 0, 1, 1, 2, 0};
  static const double path2[] = {5, 5, 6, 7};
  geoservices_geom g, d;
  geoservices_buf b;
  double env[4];
  int32_t srs;
  const char *err;
  const unsigned char *w;
  geoservices_geom_init(&g);
  geoservices_geom_init(&d);
  geoservices_buf_init(&b, 0);

  /* one path: a MultiLineString of one LineString all the same */
  geoservices_geom_reset(&g, GEOM_POLYLINE);
  part(&g, path1, 3);
  encode(&g, &b, env);
  w = wkb_of(&b);
  CHECK(u32le(w + 1) == WKB_MULTILINESTRING && u32le(w + 5) == 1);
  CHECK(u32le(w + 9 + 1) == WKB_LINESTRING && u32le(w + 9 + 5) == 3);
  CHECK(geoservices_geom_decode(&d, (const unsigned char *)b.data, b.len, &srs, &err) == 0);
  CHECK(d.kind == GEOM_POLYLINE && d.nparts == 1 && d.npoints == 3);

  part(&g, path2, 2);
  encode(&g, &b, env);
  w = wkb_of(&b);
  CHECK(u32le(w + 1) == WKB_MULTILINESTRING && u32le(w + 5) == 2);
  CHECK(u32le(w + 9 + 1) == WKB_LINESTRING && u32le(w + 9 + 5) == 3);
  CHECK(env[0] == 0 && env[1] == 6 && env[2] == 0 && env[3] == 7);
  CHECK(geoservices_geom_decode(&d, (const unsigned char *)b.data, b.len, &srs, &err) == 0);
  CHECK(d.kind == GEOM_POLYLINE && d.nparts == 2 && d.npoints == 5 && geoservices_geom_part_end(&d, 0) == 3);

  geoservices_geom_reset(&g, GEOM_MULTIPOINT);
  part(&g, path1, 3);
  encode(&g, &b, env);
  w = wkb_of(&b);
  CHECK(u32le(w + 1) == WKB_MULTIPOINT && u32le(w + 5) == 3);
  CHECK(w[9] == 1 && u32le(w + 10) == WKB_POINT && f64le(w + 14 + 21) == 1);
  CHECK(geoservices_geom_decode(&d, (const unsigned char *)b.data, b.len, &srs, &err) == 0);
  CHECK(d.kind == GEOM_MULTIPOINT && d.npoints == 3 && d.xy[4] == 2);

  geoservices_geom_free(&g);
  geoservices_geom_free(&d);
  geoservices_buf_free(&b);
}

/* Z and M: ISO WKB types, every ordinate in place, envelopes with their
 * ranges, the third number of an M-only coordinate its measure, and back. */
static void test_zm(void) {
  geoservices_geom g, d;
  geoservices_buf b;
  double env[4];
  int32_t srs;
  const char *err;
  const unsigned char *p, *w;
  const double odd = 0.1 + 0.2;
  geoservices_geom_init(&g);
  geoservices_geom_init(&d);
  geoservices_buf_init(&b, 0);

  /* POINT ZM: no envelope (a point is its own), type 3001 */
  geoservices_geom_reset(&g, GEOM_POINT);
  geoservices_geom_dims(&g, 1, 1);
  geoservices_geom_point_zm(&g, 6000000.123456789, 2000000.987654321, 512.25, 7.5);
  encode(&g, &b, env);
  p = (const unsigned char *)b.data;
  CHECK(p[3] == 0x01);
  CHECK(b.len == 8 + 5 + 32);
  w = wkb_of(&b);
  CHECK(u32le(w + 1) == 3001 && f64le(w + 5) == 6000000.123456789 && f64le(w + 21) == 512.25 && f64le(w + 29) == 7.5);
  CHECK(env[0] == 6000000.123456789 && env[3] == 2000000.987654321); /* the caller's envelope stays x/y */
  CHECK(geoservices_geom_decode(&d, p, b.len, &srs, &err) == 0);
  CHECK(d.has_z && d.has_m && d.npoints == 1 && d.zm[0] == 512.25 && d.zm[1] == 7.5);
  CHECK(geoservices_gpkg_envelope(NULL, p, b.len, env) == 1 && env[1] == 6000000.123456789);

  /* a Z point without its z: NaN in the blob, the envelope x/y only */
  geoservices_geom_reset(&g, GEOM_POINT);
  geoservices_geom_dims(&g, 1, 0);
  geoservices_geom_point(&g, 1, 2);
  encode(&g, &b, env);
  p = (const unsigned char *)b.data;
  CHECK(p[3] == 0x01 && u32le(wkb_of(&b) + 1) == 1001 && isnan(f64le(wkb_of(&b) + 21)));
  /* an empty Z point: three NaNs */
  geoservices_geom_reset(&g, GEOM_POINT);
  encode(&g, &b, env);
  CHECK((unsigned char)b.data[3] == 0x11 && b.len == 8 + 5 + 24 && isnan(f64le(wkb_of(&b) + 21)));

  /* a path of [x, y, m] numbers in an M layer: the third number is m */
  {
    static const double path[] = {0, 0, 5, 3, 4, 6};
    size_t k;
    geoservices_geom_reset(&g, GEOM_POLYLINE);
    geoservices_geom_dims(&g, 0, 1);
    geoservices_geom_part(&g);
    for (k = 0; k < 3; k++) geoservices_geom_point_zm(&g, path[2 * k], path[2 * k + 1], (double)k + odd, NAN);
    geoservices_geom_ordinates_as(&g, 0, 1);
    encode(&g, &b, env);
    p = (const unsigned char *)b.data;
    CHECK(p[3] == (0x01 | 1 << 1)); /* XY envelope: no m range */
    w = wkb_of(&b);
    CHECK(u32le(w + 1) == 2005 && u32le(w + 5) == 1 && u32le(w + 9 + 1) == 2002 && u32le(w + 9 + 5) == 3);
    CHECK(f64le(w + 9 + 9 + 16) == odd && f64le(w + 9 + 9 + 24 + 16) == 1 + odd);
    CHECK(geoservices_geom_decode(&d, p, b.len, &srs, &err) == 0);
    CHECK(!d.has_z && d.has_m && d.npoints == 3 && d.zm[2 * 2 + 1] == 2 + odd);
  }

  /* [x, y, z] numbers in a ZM layer whose geometry says hasZ only: no m */
  geoservices_geom_reset(&g, GEOM_MULTIPOINT);
  geoservices_geom_dims(&g, 1, 1);
  geoservices_geom_point_zm(&g, 1, 2, 3, NAN);
  geoservices_geom_point_zm(&g, 4, 5, 6, NAN);
  geoservices_geom_ordinates_as(&g, 1, 0);
  encode(&g, &b, env);
  p = (const unsigned char *)b.data;
  CHECK(p[3] == (0x01 | 2 << 1)); /* XYZ envelope: no point has an m */
  w = wkb_of(&b);
  CHECK(u32le(w + 1) == 3004 && u32le(w + 9 + 1) == 3001 && f64le(w + 9 + 5 + 16) == 3 && isnan(f64le(w + 9 + 5 + 24)));

  /* an open Z ring is closed with its first point's z */
  {
    static const double ring[] = {0, 0, 0, 10, 10, 10, 10, 0};
    size_t k;
    geoservices_geom_reset(&g, GEOM_POLYGON);
    geoservices_geom_dims(&g, 1, 0);
    geoservices_geom_part(&g);
    for (k = 0; k < 4; k++) geoservices_geom_point_zm(&g, ring[2 * k], ring[2 * k + 1], 100 + (double)k, NAN);
    encode(&g, &b, env);
    w = wkb_of(&b) + 9;
    CHECK(u32le(w + 1) == 1003 && u32le(w + 9) == 5 && f64le(w + 13 + 4 * 24 + 16) == 100);
    CHECK(geoservices_geom_decode(&d, (const unsigned char *)b.data, b.len, &srs, &err) == 0);
    CHECK(d.has_z && !d.has_m && d.npoints == 5 && d.zm[2 * 4] == 100);
  }

  /* a 2D geometry keeps no z even when given one */
  geoservices_geom_reset(&g, GEOM_POINT);
  geoservices_geom_dims(&g, 0, 0);
  geoservices_geom_point_zm(&g, 1, 2, 3, 4);
  encode(&g, &b, env);
  CHECK(b.len == 8 + 21 && u32le(wkb_of(&b) + 1) == WKB_POINT);

  geoservices_geom_free(&g);
  geoservices_geom_free(&d);
  geoservices_buf_free(&b);
}

/* Blobs other writers make: big-endian, no envelope, ISO Z, extended WKB. */
static void test_foreign_blobs(void) {
  /* GP v0, flags 0 (big-endian header, no envelope), srs 4326, then a
   * big-endian WKB Point Z (1001) 1 2 3 */
  static const unsigned char be_point_z[] = {
    'G', 'P', 0, 0x00, 0, 0, 0x10, 0xE6,
    0, 0, 0, 0x03, 0xE9,
    0x3F, 0xF0, 0, 0, 0, 0, 0, 0,
    0x40, 0x00, 0, 0, 0, 0, 0, 0,
    0x40, 0x08, 0, 0, 0, 0, 0, 0,
  };
  geoservices_geom g;
  int32_t srs = 0;
  const char *err = NULL;
  double env[4];
  geoservices_geom_init(&g);
  CHECK(geoservices_geom_decode(&g, be_point_z, sizeof be_point_z, &srs, &err) == 0);
  CHECK(srs == 4326 && g.kind == GEOM_POINT && g.npoints == 1 && g.xy[0] == 1 && g.xy[1] == 2);
  CHECK(g.has_z && !g.has_m && g.zm[0] == 3);
  CHECK(geoservices_gpkg_envelope(&g, be_point_z, sizeof be_point_z, env) == 1);
  CHECK(env[0] == 1 && env[1] == 1 && env[2] == 2 && env[3] == 2);
  {
    size_t n;
    for (n = 0; n < sizeof be_point_z; n++) { /* every truncation fails cleanly */
      unsigned char *copy = malloc(n ? n : 1);
      memcpy(copy, be_point_z, n);
      CHECK_MSG(geoservices_geom_decode(&g, copy, n, &srs, &err) != 0, "prefix of %zu bytes", n);
      free(copy);
    }
  }
  {
    unsigned char bad[sizeof be_point_z];
    memcpy(bad, be_point_z, sizeof bad);
    bad[0] = 'X';
    CHECK(geoservices_geom_decode(&g, bad, sizeof bad, &srs, &err) != 0 && strstr(err, "GeoPackage"));
    CHECK(geoservices_gpkg_envelope(&g, bad, sizeof bad, env) == -1);
    memcpy(bad, be_point_z, sizeof bad);
    bad[3] = 0x20; /* extended type */
    CHECK(geoservices_geom_decode(&g, bad, sizeof bad, &srs, &err) != 0);
    memcpy(bad, be_point_z, sizeof bad);
    bad[12] = 7; /* a GeometryCollection */
    CHECK(geoservices_geom_decode(&g, bad, sizeof bad, &srs, &err) != 0 && strstr(err, "unsupported"));
    memcpy(bad, be_point_z, sizeof bad);
    bad[9] = 0x40; /* extended WKB: Point with the M flag (0x40000001), the third number its m */
    bad[11] = 0;
    bad[12] = 1;
    CHECK(geoservices_geom_decode(&g, bad, sizeof bad, &srs, &err) == 0 && !g.has_z && g.has_m && g.zm[1] == 3);
  }
  {
    /* a MultiPoint Z (1004) holding a 2D point: its z is NaN */
    static const unsigned char mixed[] = {'G', 'P', 0, 0x01, 0, 0, 0, 0,
                                          1, 0xEC, 3, 0, 0, 1, 0, 0, 0,
                                          1, 1, 0, 0, 0,
                                          0, 0, 0, 0, 0, 0, 0xF0, 0x3F,
                                          0, 0, 0, 0, 0, 0, 0, 0x40};
    CHECK(geoservices_geom_decode(&g, mixed, sizeof mixed, &srs, &err) == 0);
    CHECK(g.kind == GEOM_MULTIPOINT && g.has_z && g.npoints == 1 && g.xy[0] == 1 && g.xy[1] == 2 && isnan(g.zm[0]));
  }
  {
    /* a LineString claiming 2^32-1 points in a few bytes */
    static const unsigned char huge[] = {'G', 'P', 0, 0x01, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0};
    CHECK(geoservices_geom_decode(&g, huge, sizeof huge, &srs, &err) != 0 && strstr(err, "truncated"));
  }
  geoservices_geom_free(&g);
}

static void test_isotime(void) {
  char out[GEOSERVICES_ISO_MAX + 1];
  int64_t ms, v;
  CHECK(geoservices_iso_from_ms(0, out) == 24);
  CHECK_STREQ(out, "1970-01-01T00:00:00.000Z");
  geoservices_iso_from_ms(INT64_C(1700000000000), out);
  CHECK_STREQ(out, "2023-11-14T22:13:20.000Z");
  geoservices_iso_from_ms(-1, out);
  CHECK_STREQ(out, "1969-12-31T23:59:59.999Z");
  geoservices_iso_from_ms(INT64_C(951782400123), out);
  CHECK_STREQ(out, "2000-02-29T00:00:00.123Z");
  /* beyond 0000..9999: the year as long as it needs, a sign before 0000 */
  CHECK(geoservices_iso_from_ms(INT64_C(253402300800000), out) == 25);
  CHECK_STREQ(out, "10000-01-01T00:00:00.000Z");
  CHECK(geoservices_iso_from_ms(INT64_C(253402300799999), out) == 24);
  CHECK_STREQ(out, "9999-12-31T23:59:59.999Z");
  CHECK(geoservices_iso_from_ms(INT64_C(-62167219200001), out) == 25);
  CHECK_STREQ(out, "-0001-12-31T23:59:59.999Z");
  CHECK(geoservices_iso_from_ms(INT64_C(-62167219200000), out) == 24);
  CHECK_STREQ(out, "0000-01-01T00:00:00.000Z");
  CHECK(geoservices_iso_from_ms(INT64_MAX, out) <= GEOSERVICES_ISO_MAX);
  CHECK_STREQ(out, "292278994-08-17T07:12:55.807Z");
  CHECK(geoservices_iso_from_ms(INT64_MIN, out) <= GEOSERVICES_ISO_MAX);
  CHECK_STREQ(out, "-292275055-05-16T16:47:04.192Z");
  {
    static const int64_t edges[] = {INT64_MAX, INT64_MIN, INT64_C(253402300800000), INT64_C(-62167219200001),
                                    INT64_C(3155760000000000)};
    size_t k;
    for (k = 0; k < sizeof edges / sizeof edges[0]; k++) {
      size_t n = geoservices_iso_from_ms(edges[k], out);
      CHECK_MSG(geoservices_ms_from_iso(out, n, &ms) == 0 && ms == edges[k], "round trip of %s", out);
    }
  }
  for (v = INT64_C(-30000000000000); v < INT64_C(30000000000000); v += INT64_C(7777777777)) {
    size_t n = geoservices_iso_from_ms(v, out);
    CHECK_MSG(n == 24 && geoservices_ms_from_iso(out, n, &ms) == 0 && ms == v, "round trip of %lld", (long long)v);
  }
  for (v = INT64_MIN; v < INT64_MAX - INT64_C(77777777777777777); v += INT64_C(77777777777777777)) {
    size_t n = geoservices_iso_from_ms(v, out);
    CHECK_MSG(geoservices_ms_from_iso(out, n, &ms) == 0 && ms == v, "round trip of %lld", (long long)v);
  }
  CHECK(geoservices_ms_from_iso("999999999-01-01", 15, &ms) != 0); /* beyond 64-bit milliseconds */
  CHECK(geoservices_ms_from_iso("1000000000-01-01", 16, &ms) != 0);
  CHECK(geoservices_ms_from_iso("-2023-11-14", 11, &ms) == 0 && ms < 0);
  CHECK(geoservices_ms_from_iso("202-11-14", 9, &ms) != 0);
  CHECK(geoservices_ms_from_iso("2024-02-29", 10, &ms) == 0);
  CHECK(geoservices_ms_from_iso("2023-02-29", 10, &ms) != 0); /* not a leap year */
  CHECK(geoservices_ms_from_iso("1900-02-29", 10, &ms) != 0);
  CHECK(geoservices_ms_from_iso("2000-02-29", 10, &ms) == 0);
  CHECK(geoservices_ms_from_iso("2023-11-14", 10, &ms) == 0 && ms == INT64_C(1699920000000));
  CHECK(geoservices_ms_from_iso("2023-11-14T22:13:20Z", 20, &ms) == 0 && ms == INT64_C(1700000000000));
  CHECK(geoservices_ms_from_iso("2023-11-14 23:13:20.5+01:00", 27, &ms) == 0 && ms == INT64_C(1700000000500));
  CHECK(geoservices_ms_from_iso("2023-11-14T22:13", 16, &ms) == 0 && ms == INT64_C(1699999980000));
  CHECK(geoservices_ms_from_iso("2023-02-30", 10, &ms) != 0);
  CHECK(geoservices_ms_from_iso("2023-11-14T25:00", 16, &ms) != 0);
  CHECK(geoservices_ms_from_iso("1700000000000", 13, &ms) != 0);
  CHECK(geoservices_ms_from_iso("2023-11-14T22:13:20Zx", 21, &ms) != 0);
  CHECK(geoservices_ms_from_iso("2023-11-14T22:13:20.", 20, &ms) != 0);
}

/* A segment of Esri JSON from the last point: kind, end (x, y), p1, p2. */
static void seg(geoservices_geom *g, int kind, double x, double y, const double *p1, const double *p2) {
  geoservices_segment sg;
  memset(&sg, 0, sizeof sg);
  sg.kind = kind;
  sg.has_end = 1;
  sg.end[0] = x, sg.end[1] = y, sg.end[2] = NAN, sg.end[3] = NAN;
  if (p1) sg.has_p1 = 1, sg.p1[0] = p1[0], sg.p1[1] = p1[1];
  if (p2) sg.has_p2 = 1, sg.p2[0] = p2[0], sg.p2[1] = p2[1];
  CHECK(geoservices_geom_segment(g, &sg) == 0);
}

static int near(double a, double b) { return fabs(a - b) < 1e-9; }

/* True curves: circular arcs kept exactly in curve types, with extents
 * that take in their bulges; the other segments as points, said inexact. */
static void test_curves(void) {
  static const double TOP[] = {1, 1}, LOW[] = {2, -1}, BOTTOM[] = {1, -1};
  geoservices_geom g, d;
  geoservices_buf b;
  double env[4];
  int32_t srs = 0;
  const char *err = NULL;
  const unsigned char *w;
  geoservices_geom_init(&g);
  geoservices_geom_init(&d);
  geoservices_buf_init(&b, 0);

  /* a path: a segment, an arc below the axis, a segment */
  geoservices_geom_reset(&g, GEOM_POLYLINE);
  geoservices_geom_part(&g);
  geoservices_geom_point(&g, 0, 0);
  seg(&g, 0, 1, 0, NULL, NULL); /* unknown kind: a straight line, inexact */
  CHECK(g.inexact == 1);
  g.inexact = 0;
  seg(&g, 'c', 3, 0, LOW, NULL);
  geoservices_geom_point(&g, 4, 0);
  CHECK(g.has_arcs && g.npoints == 5 && g.arc[2] == 1 && g.arc[3] == 0 && !g.inexact);
  encode(&g, &b, env);
  CHECK(env[0] == 0 && env[1] == 4 && near(env[2], -1) && env[3] == 0); /* the arc's bottom */
  w = wkb_of(&b);
  CHECK(u32le(w + 1) == WKB_MULTICURVE && u32le(w + 5) == 1);
  CHECK(u32le(w + 10) == WKB_COMPOUNDCURVE && u32le(w + 14) == 3);
  CHECK(u32le(w + 19) == WKB_LINESTRING && u32le(w + 23) == 2);
  CHECK(u32le(w + 27 + 32 + 1) == WKB_CIRCULARSTRING && u32le(w + 27 + 32 + 5) == 3);
  CHECK(f64le(w + 27 + 32 + 9 + 16) == 2 && f64le(w + 27 + 32 + 9 + 24) == -1); /* the middle, as given */
  CHECK(geoservices_geom_decode(&d, (const unsigned char *)b.data, b.len, &srs, &err) == 0);
  CHECK(d.kind == GEOM_POLYLINE && d.nparts == 1 && d.npoints == 5 && d.has_arcs);
  CHECK(d.arc[0] == 0 && d.arc[1] == 0 && d.arc[2] == 1 && d.arc[3] == 0 && d.arc[4] == 0);
  CHECK(memcmp(d.xy, g.xy, 10 * sizeof *d.xy) == 0);

  /* a second path without arcs is a LineString of the MultiCurve */
  part(&g, EXT, 2);
  encode(&g, &b, env);
  w = wkb_of(&b);
  CHECK(u32le(w + 1) == WKB_MULTICURVE && u32le(w + 5) == 2);
  CHECK(geoservices_geom_decode(&d, (const unsigned char *)b.data, b.len, &srs, &err) == 0);
  CHECK(d.nparts == 2 && d.npoints == 7 && d.arc[5] == 0 && d.arc[6] == 0);

  /* a middle point at the end of its part makes no arc: a plain MultiLineString */
  geoservices_geom_reset(&g, GEOM_POLYLINE);
  geoservices_geom_part(&g);
  geoservices_geom_point(&g, 0, 0);
  geoservices_geom_arc_middle(&g, 1, 1);
  encode(&g, &b, env);
  CHECK(u32le(wkb_of(&b) + 1) == WKB_MULTILINESTRING && !g.has_arcs);

  /* a ring of two arcs (a circle, clockwise: an exterior) with a circle hole */
  geoservices_geom_reset(&g, GEOM_POLYGON);
  geoservices_geom_part(&g);
  geoservices_geom_point(&g, 0, 0);
  seg(&g, 'c', 2, 0, TOP, NULL);
  seg(&g, 'c', 0, 0, BOTTOM, NULL);
  CHECK(near(geoservices_part_area(&g, 0), -3.14159265358979));
  geoservices_geom_part(&g);
  {
    static const double H1[] = {1, -0.5};
    geoservices_geom_point(&g, 0.5, 0);
    seg(&g, 'c', 1.5, 0, H1, NULL); /* below first: counter-clockwise */
    seg(&g, 'c', 0.5, 0, (const double[]){1, 0.5}, NULL);
  }
  CHECK(geoservices_part_area(&g, 1) > 0);
  encode(&g, &b, env);
  CHECK(near(env[0], 0) && near(env[1], 2) && near(env[2], -1) && near(env[3], 1));
  w = wkb_of(&b);
  CHECK(u32le(w + 1) == WKB_MULTISURFACE && u32le(w + 5) == 1);
  CHECK(u32le(w + 10) == WKB_CURVEPOLYGON && u32le(w + 14) == 2);
  CHECK(u32le(w + 19) == WKB_COMPOUNDCURVE && u32le(w + 23) == 1);
  CHECK(u32le(w + 28) == WKB_CIRCULARSTRING && u32le(w + 32) == 5);
  CHECK(geoservices_geom_decode(&d, (const unsigned char *)b.data, b.len, &srs, &err) == 0);
  CHECK(d.kind == GEOM_POLYGON && d.nparts == 2 && d.npoints == 10 && d.arc[1] && d.arc[3] && d.arc[6]);
  CHECK(memcmp(d.xy, g.xy, 20 * sizeof *d.xy) == 0);
  {
    double box[4];
    CHECK(geoservices_gpkg_envelope(NULL, (const unsigned char *)b.data, b.len, box) == 1 && near(box[2], -1));
  }

  /* Bézier and elliptic segments: points along them, inexact; the ends exact */
  geoservices_geom_reset(&g, GEOM_POLYLINE);
  geoservices_geom_part(&g);
  geoservices_geom_point(&g, 0, 0);
  seg(&g, 'b', 3, 0, (const double[]){1, 2}, (const double[]){2, 2});
  CHECK(g.inexact && !g.has_arcs && g.npoints == 33 && g.xy[64] == 3 && g.xy[65] == 0);
  CHECK(near(g.xy[32], 1.5) && near(g.xy[33], 1.5)); /* t = 1/2 */
  encode(&g, &b, env);
  CHECK(u32le(wkb_of(&b) + 1) == WKB_MULTILINESTRING);
  {
    geoservices_segment e;
    size_t n0 = g.npoints;
    memset(&e, 0, sizeof e);
    e.kind = 'a', e.has_end = 1, e.has_p1 = 1, e.numbers = 5;
    e.end[0] = 3, e.end[1] = 0, e.end[2] = e.end[3] = NAN;
    e.p1[0] = 5, e.p1[1] = 0; /* from (7, 0) around (5, 0), semi-axes 2 and 1, clockwise: under it */
    e.clockwise = 1, e.rotation = 0, e.axis = 2, e.ratio = 0.5;
    geoservices_geom_point(&g, 7, 0);
    n0 = g.npoints;
    CHECK(geoservices_geom_segment(&g, &e) == 0);
    CHECK(g.npoints == n0 + 64 && g.xy[2 * (g.npoints - 1)] == 3 && g.xy[2 * (g.npoints - 1) + 1] == 0);
    CHECK(near(g.xy[2 * (n0 + 31)], 5) && near(g.xy[2 * (n0 + 31) + 1], -1)); /* halfway: the bottom */
  }
  /* an arc of a circle given by its centre: an arc through its middle */
  geoservices_geom_reset(&g, GEOM_POLYLINE);
  geoservices_geom_part(&g);
  geoservices_geom_point(&g, 1, 0);
  {
    geoservices_segment e;
    memset(&e, 0, sizeof e);
    e.kind = 'a', e.has_end = 1, e.has_p1 = 1, e.numbers = 2, e.clockwise = 0;
    e.end[0] = -1, e.end[1] = 0, e.end[2] = e.end[3] = NAN;
    CHECK(geoservices_geom_segment(&g, &e) == 0);
  }
  CHECK(g.has_arcs && g.inexact && g.npoints == 3 && near(g.xy[2], 0) && near(g.xy[3], 1) && g.arc[1]);

  /* foreign blobs: a CircularString alone, a CompoundCurve whose parts repeat
   * their joints, with Z (the middle keeps the z it was given) */
  {
    static const unsigned char head[] = {'G', 'P', 0, 1, 0, 0, 0, 0};
    unsigned char blob[256], *q = blob;
    static const double cs[] = {0, 0, 5, 1, 1, 6, 2, 0, 7};
    size_t k;
    memcpy(q, head, 8);
    q += 8;
    *q++ = 1;
    q[0] = (unsigned char)((1000 + WKB_COMPOUNDCURVE) & 0xff), q[1] = (unsigned char)((1000 + WKB_COMPOUNDCURVE) >> 8);
    q[2] = q[3] = 0;
    q += 4;
    q[0] = 2, q[1] = q[2] = q[3] = 0;
    q += 4;
    *q++ = 1;
    q[0] = (unsigned char)((1000 + WKB_CIRCULARSTRING) & 0xff), q[1] = (unsigned char)((1000 + WKB_CIRCULARSTRING) >> 8);
    q[2] = q[3] = 0;
    q += 4;
    q[0] = 3, q[1] = q[2] = q[3] = 0;
    q += 4;
    for (k = 0; k < 9; k++, q += 8) memcpy(q, &cs[k], 8);
    *q++ = 1;
    q[0] = (unsigned char)((1000 + WKB_LINESTRING) & 0xff), q[1] = (unsigned char)((1000 + WKB_LINESTRING) >> 8);
    q[2] = q[3] = 0;
    q += 4;
    q[0] = 2, q[1] = q[2] = q[3] = 0;
    q += 4;
    for (k = 6; k < 9; k++, q += 8) memcpy(q, &cs[k], 8); /* the joint again */
    {
      static const double last[] = {3, 0, 8};
      for (k = 0; k < 3; k++, q += 8) memcpy(q, &last[k], 8);
    }
    CHECK(geoservices_geom_decode(&d, blob, (size_t)(q - blob), &srs, &err) == 0);
    CHECK(d.kind == GEOM_POLYLINE && d.has_z && !d.has_m && d.nparts == 1 && d.npoints == 4);
    CHECK(d.arc[1] && !d.arc[2] && d.xy[6] == 3 && d.zm[2] == 6 && d.zm[6] == 8);
    encode(&d, &b, env);
    CHECK(near(env[3], 1) && u32le(wkb_of(&b) + 1) == 1000 + WKB_MULTICURVE);
  }
  geoservices_geom_free(&g);
  geoservices_geom_free(&d);
  geoservices_buf_free(&b);
}

int main(void) {
  test_point();
  test_polygons();
  test_lines_and_points();
  test_zm();
  test_foreign_blobs();
  test_curves();
  test_isotime();
  return CHECK_DONE("test_geom");
}
