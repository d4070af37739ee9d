/* store/srs.c: a wkid's WKT 1 from PROJ's database, EPSG first then ESRI,
 * and a message (never a crash) for an unknown code or a missing proj.db.
 * Run under valgrind by `make ctest`: every lookup frees its context. */
#include <stdlib.h>
#include <string.h>

#include "store/srs.h"
#include "tests/check.h"

static void expect_found(int64_t wkid, const char *authority, const char *name, const char *wkt_start) {
  geoservices_srs s;
  char err[160];
  int rc = geoservices_srs_lookup(wkid, &s, err, sizeof err);
  CHECK_MSG(rc == GEOSERVICES_SRS_FOUND, "wkid %lld: rc %d (%s)", (long long)wkid, rc, err);
  if (rc != GEOSERVICES_SRS_FOUND) return;
  CHECK_STREQ(s.authority, authority);
  CHECK_STREQ(s.name, name);
  CHECK_MSG(strncmp(s.wkt, wkt_start, strlen(wkt_start)) == 0, "wkid %lld: %.60s", (long long)wkid, s.wkt);
  geoservices_srs_free(&s);
  geoservices_srs_free(&s); /* twice: harmless */
}

static void expect_missing(int64_t wkid, int want, const char *message) {
  geoservices_srs s;
  char err[160];
  int rc = geoservices_srs_lookup(wkid, &s, err, sizeof err);
  CHECK_MSG(rc == want, "wkid %lld: rc %d, want %d (%s)", (long long)wkid, rc, want, err);
  CHECK(s.wkt == NULL && s.name == NULL);
  CHECK_STREQ(err, message);
  geoservices_srs_free(&s);
}

int main(void) {
  char small[8];
  geoservices_srs s;

  expect_found(2193, "EPSG", "NZGD2000 / New Zealand Transverse Mercator 2000", "PROJCS[\"NZGD2000 / New Zealand");
  expect_found(3857, "EPSG", "WGS 84 / Pseudo-Mercator", "PROJCS[\"WGS 84 / Pseudo-Mercator\"");
  expect_found(102003, "ESRI", "USA_Contiguous_Albers_Equal_Area_Conic",
               "PROJCS[\"USA_Contiguous_Albers_Equal_Area_Conic\"");
  expect_found(54030, "ESRI", "World_Robinson", "PROJCS[\"World_Robinson\"");
  expect_found(4979, "EPSG", "WGS 84", "COMPD_CS[\"WGS 84 + Ellipsoid (metre)\""); /* no WKT 1 form of its own */
  expect_missing(999999, GEOSERVICES_SRS_UNKNOWN, "neither EPSG:999999 nor ESRI:999999 is in PROJ's database");
  expect_missing(0, GEOSERVICES_SRS_UNKNOWN, "wkid 0 is no authority code");
  expect_missing(-1, GEOSERVICES_SRS_UNKNOWN, "wkid -1 is no authority code");
  /* a message cut to the buffer, still NUL-terminated */
  CHECK(geoservices_srs_lookup(999999, &s, small, sizeof small) == GEOSERVICES_SRS_UNKNOWN);
  CHECK_STREQ(small, "neither");

  /* no proj.db where PROJ looks: a message, no crash, nothing to free */
  setenv("PROJ_DATA", "/nonexistent", 1);
  expect_missing(2193, GEOSERVICES_SRS_NO_DATABASE,
                 "PROJ's database (proj.db) cannot be opened: set PROJ_DATA to its directory");
  return CHECK_DONE("test_srs");
}
