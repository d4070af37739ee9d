/* libFuzzer target: any bytes as a GeoPackage geometry blob. Decoding must
 * fail cleanly or give a geometry that encodes and decodes again to the
 * same kind and Z/M (and, but for polygons whose open rings get closed, the
 * same points, every ordinate bit for bit, and the same arcs); the
 * envelope reader must agree with the decoder about validity. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "store/geom.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same_ordinate(double a, double b) {
  return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  geoservices_geom g, h;
  geoservices_buf b;
  int32_t srs = 0, srs2 = 0;
  const char *err = NULL;
  double env[4];
  int ok, e;
  geoservices_geom_init(&g);
  geoservices_geom_init(&h);
  geoservices_buf_init(&b, 0);
  ok = geoservices_geom_decode(&g, data, size, &srs, &err) == 0;
  e = geoservices_gpkg_envelope(&h, data, size, env);
  if (e < 0 && ok && size >= 8 && !(data[3] & 0x10)) {
    /* the envelope reader only fails on what the decoder refuses too
     * (a flagged-empty blob is empty whatever follows) */
    abort();
  }
  if (ok) {
    size_t before = g.npoints;
    int kind = g.kind;
    if (geoservices_geom_encode(&g, srs, &b, env) != 0) abort();
    if (geoservices_geom_decode(&h, (const unsigned char *)b.data, b.len, &srs2, &err) != 0) abort();
    if (srs2 != srs || h.kind != kind) abort();
    if (h.has_z != g.has_z || h.has_m != g.has_m) abort();
    if (kind != GEOM_POLYGON && kind != GEOM_POINT && h.npoints != before) abort();
    if (kind != GEOM_POLYGON && h.npoints == g.npoints) {
      size_t k;
      for (k = 0; k < 2 * g.npoints; k++)
        if (!same_ordinate(g.xy[k], h.xy[k])) abort();
      for (k = 0; (g.has_z || g.has_m) && k < g.npoints; k++)
        if ((g.has_z && !same_ordinate(g.zm[2 * k], h.zm[2 * k])) ||
            (g.has_m && !same_ordinate(g.zm[2 * k + 1], h.zm[2 * k + 1])))
          abort();
    }
    if (kind != GEOM_POLYGON && h.npoints == g.npoints && h.has_arcs != g.has_arcs) abort();
    if (kind != GEOM_POLYGON && h.npoints == g.npoints && g.has_arcs) { /* the same arcs (the encoder settled them) */
      size_t k;
      for (k = 0; k < g.npoints; k++)
        if (!g.arc[k] != !h.arc[k]) abort();
    }
    if (kind == GEOM_POLYGON && h.npoints < g.npoints) abort();
    if (!isnan(env[0]) && (env[0] > env[1] || env[2] > env[3])) abort();
  }
  geoservices_geom_free(&g);
  geoservices_geom_free(&h);
  geoservices_buf_free(&b);
  return 0;
}
