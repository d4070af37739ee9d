/* A wkid's WKT 1 from PROJ's database (see srs.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <proj.h>

#include "store/srs.h"

static char *copy_text(const char *s) {
  size_t n = strlen(s) + 1;
  char *c = malloc(n);
  if (c) memcpy(c, s, n);
  return c;
}

/* The CRS's WKT 1 as GDAL writes it (see srs.h), or NULL when it has none. */
static const char *wkt1_of(PJ_CONTEXT *ctx, PJ *crs) {
  static const char *const as_gdal[] = {"MULTILINE=NO", "OUTPUT_AXIS=YES", NULL};
  static const char *const height_as_vertical[] = {"MULTILINE=NO", "OUTPUT_AXIS=YES",
                                                   "ALLOW_ELLIPSOIDAL_HEIGHT_AS_VERTICAL_CRS=YES", NULL};
  const char *wkt = proj_as_wkt(ctx, crs, PJ_WKT1_GDAL, as_gdal);
  if (!wkt) wkt = proj_as_wkt(ctx, crs, PJ_WKT1_GDAL, height_as_vertical);
  return wkt;
}

int geoservices_srs_lookup(int64_t wkid, geoservices_srs *out, char *err, size_t errlen) {
  static const char *const authorities[] = {"EPSG", "ESRI"};
  char code[24];
  int rc = GEOSERVICES_SRS_UNKNOWN, no_wkt1 = 0;
  PJ_CONTEXT *ctx;
  size_t i;

  memset(out, 0, sizeof *out);
  if (errlen) err[0] = '\0';
  snprintf(code, sizeof code, "%lld", (long long)wkid);
  if (wkid <= 0) {
    snprintf(err, errlen, "wkid %s is no authority code", code);
    return GEOSERVICES_SRS_UNKNOWN;
  }
  ctx = proj_context_create();
  if (!ctx) {
    snprintf(err, errlen, "PROJ: out of memory");
    return GEOSERVICES_SRS_NOMEM;
  }
  proj_log_level(ctx, PJ_LOG_NONE); /* PROJ would print "crs not found" on stderr for every EPSG miss */
  if (!proj_context_get_database_path(ctx)) {
    snprintf(err, errlen, "PROJ's database (proj.db) cannot be opened: set PROJ_DATA to its directory");
    proj_context_destroy(ctx);
    return GEOSERVICES_SRS_NO_DATABASE;
  }
  for (i = 0; i < sizeof authorities / sizeof authorities[0] && rc != GEOSERVICES_SRS_FOUND; i++) {
    PJ *crs = proj_create_from_database(ctx, authorities[i], code, PJ_CATEGORY_CRS, 0, NULL);
    const char *wkt, *name;
    if (!crs) continue;
    wkt = wkt1_of(ctx, crs);
    name = proj_get_name(crs);
    if (!wkt) {
      no_wkt1 = 1;
    } else {
      out->wkt = copy_text(wkt);
      out->name = copy_text(name ? name : "");
      if (!out->wkt || !out->name) {
        geoservices_srs_free(out);
        snprintf(err, errlen, "out of memory");
        rc = GEOSERVICES_SRS_NOMEM;
      } else {
        memcpy(out->authority, authorities[i], strlen(authorities[i]) + 1);
        rc = GEOSERVICES_SRS_FOUND;
      }
    }
    proj_destroy(crs);
    if (rc == GEOSERVICES_SRS_NOMEM) break;
  }
  if (rc == GEOSERVICES_SRS_UNKNOWN) {
    if (no_wkt1) snprintf(err, errlen, "PROJ has no WKT 1 form of wkid %s", code);
    else snprintf(err, errlen, "neither EPSG:%s nor ESRI:%s is in PROJ's database", code, code);
  }
  proj_context_destroy(ctx);
  return rc;
}

void geoservices_srs_free(geoservices_srs *s) {
  free(s->wkt);
  free(s->name);
  s->wkt = s->name = NULL;
  s->authority[0] = '\0';
}
