/* libFuzzer target: any bytes as a synchronization result, through the
 * record extractor (fed in two pieces) into an in-memory GeoPackage of four
 * layers (point, multipoint ZM, polyline M, polygon Z) with R-tree
 * triggers, inside a transaction rolled back after each input. The apply
 * must succeed or fail with a message, never crash; after the flush (which
 * packs the empty R-trees in bulk) every R-tree holds exactly its rows with a
 * geometry, and every geometry decodes with its layer's Z and M (true
 * curves too; a Bézier's JSON kept beside its blob is valid JSON). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/records.h"
#include "store/apply.h"
#include "store/geom.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sqlite3 *db;
static geoservices_store store;

static void setup(void) {
  static const char *const names[] = {"OBJECTID", "GlobalID", "NAME", "N", "V", "D", "G", "B"};
  static const int types[] = {STORE_COL_INTEGER, STORE_COL_GUID, STORE_COL_TEXT, STORE_COL_INTEGER,
                              STORE_COL_REAL, STORE_COL_DATE, STORE_COL_GUID, STORE_COL_BLOB};
  static const char *const tables[] = {"p0", "p1", "p2", "p3"};
  static const int kinds[] = {GEOM_POINT, GEOM_MULTIPOINT, GEOM_POLYLINE, GEOM_POLYGON};
  char sql[2048];
  int i;
  if (sqlite3_open(":memory:", &db) != SQLITE_OK || geoservices_store_init(&store, db) != 0) abort();
  sqlite3_exec(db, "CREATE TABLE gpkg_contents (table_name TEXT PRIMARY KEY, last_change TEXT, min_x, min_y, max_x,"
               " max_y); CREATE TABLE geoservices_attachments (global_id TEXT PRIMARY KEY, layer_id, "
               "parent_global_id, attachment_id, name, content_type, size, keywords, url, data);"
               "CREATE TABLE gpkg_geometry_columns (table_name, column_name, z, m);"
               "INSERT INTO gpkg_geometry_columns VALUES ('p0', 'geom', 0, 0), ('p1', 'geom', 1, 1), "
               "('p2', 'geom', 0, 1), ('p3', 'geom', 1, 0)",
               NULL, NULL, NULL);
  for (i = 0; i < 4; i++) {
    snprintf(sql, sizeof sql,
             "CREATE TABLE %s (OBJECTID INTEGER PRIMARY KEY, geom BLOB, GlobalID TEXT UNIQUE, NAME TEXT, N INTEGER,"
             " V REAL, D DATETIME, G TEXT, B BLOB);"
             "INSERT INTO gpkg_contents (table_name) VALUES ('%s');"
             "CREATE VIRTUAL TABLE rtree_%s_geom USING rtree(id, minx, maxx, miny, maxy);"
             "CREATE TRIGGER %s_i AFTER INSERT ON %s WHEN (NEW.geom NOT NULL AND NOT ST_IsEmpty(NEW.geom)) BEGIN "
             "INSERT OR REPLACE INTO rtree_%s_geom VALUES (NEW.OBJECTID, ST_MinX(NEW.geom), ST_MaxX(NEW.geom), "
             "ST_MinY(NEW.geom), ST_MaxY(NEW.geom)); END;"
             "CREATE TRIGGER %s_d AFTER DELETE ON %s WHEN OLD.geom NOT NULL BEGIN "
             "DELETE FROM rtree_%s_geom WHERE id = OLD.OBJECTID; END;",
             tables[i], tables[i], tables[i], tables[i], tables[i], tables[i], tables[i], tables[i], tables[i]);
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) abort();
    if (!geoservices_store_add_layer(&store, i, tables[i], "geom", kinds[i], 4326, names, types, 8, 1, 0)) abort();
  }
}

static int count(const char *sql) {
  sqlite3_stmt *st;
  int n = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) abort();
  if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  return n;
}

/* Every geometry of table i decodes, with the layer's Z and M. */
static void check_dims(int i) {
  static const char *const sql[] = {"SELECT geom FROM p0", "SELECT geom FROM p1", "SELECT geom FROM p2",
                                    "SELECT geom FROM p3"};
  static const int dims[][2] = {{0, 0}, {1, 1}, {0, 1}, {1, 0}};
  sqlite3_stmt *st;
  geoservices_geom g;
  geoservices_geom_init(&g);
  if (sqlite3_prepare_v2(db, sql[i], -1, &st, NULL) != SQLITE_OK) abort();
  while (sqlite3_step(st) == SQLITE_ROW) {
    int32_t srs;
    const char *err;
    if (sqlite3_column_type(st, 0) != SQLITE_BLOB) continue;
    if (geoservices_geom_decode(&g, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), &srs, &err))
      abort();
    if (g.has_z != dims[i][0] || g.has_m != dims[i][1]) abort();
  }
  sqlite3_finalize(st);
  geoservices_geom_free(&g);
}

static int drain(geoservices_records *r, geoservices_store_cursor *c) {
  size_t len;
  const char *tape = geoservices_records_tape(r, &len);
  int rc = geoservices_store_apply(&store, c, tape, len, NULL, NULL);
  geoservices_records_consume(r);
  if (rc != 0 && store.message[0] == '\0') abort();
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  geoservices_json_limits lim = {32, 1 << 16};
  geoservices_records *r;
  geoservices_store_cursor c = {0, 0, 0};
  size_t split = size ? data[0] % (size + 1) : 0;
  int rc, i;
  if (!db) setup();
  r = geoservices_records_new(&lim);
  if (!r) abort();
  sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
  rc = geoservices_records_feed(r, (const char *)data, split);
  if (rc == 0) rc = drain(r, &c);
  if (rc == 0) rc = geoservices_records_feed(r, (const char *)data + split, size - split);
  if (rc == 0) rc = drain(r, &c);
  if (rc == 0 && geoservices_records_finish(r) == 0) rc = drain(r, &c);
  /* the R-trees (packed in bulk by the flush when they were empty) hold
   * exactly the rows with a geometry, and pass the module's own check */
  if (geoservices_store_flush_extents(&store) != 0) abort();
  for (i = 0; i < 4; i++) {
    static const char *const checks[] = {
      "SELECT (SELECT count(*) FROM rtree_p0_geom) = (SELECT count(*) FROM p0 WHERE ST_MinX(geom) NOT NULL)"
      " AND rtreecheck('rtree_p0_geom') = 'ok'",
      "SELECT (SELECT count(*) FROM rtree_p1_geom) = (SELECT count(*) FROM p1 WHERE ST_MinX(geom) NOT NULL)"
      " AND rtreecheck('rtree_p1_geom') = 'ok'",
      "SELECT (SELECT count(*) FROM rtree_p2_geom) = (SELECT count(*) FROM p2 WHERE ST_MinX(geom) NOT NULL)"
      " AND rtreecheck('rtree_p2_geom') = 'ok'",
      "SELECT (SELECT count(*) FROM rtree_p3_geom) = (SELECT count(*) FROM p3 WHERE ST_MinX(geom) NOT NULL)"
      " AND rtreecheck('rtree_p3_geom') = 'ok'",
    };
    if (count(checks[i]) != 1) abort();
    check_dims(i);
  }
  /* what is kept of the server's geometries is JSON */
  if (count("SELECT count(*) FROM sqlite_master WHERE name = 'gpkgext_geoservices_original_geometries'") == 1 &&
      count("SELECT count(*) FROM gpkgext_geoservices_original_geometries WHERE NOT json_valid(geometry)") != 0)
    abort();
  sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  geoservices_store_forget_extents(&store); /* as the binding does after a rollback */
  geoservices_store_drop_waiting(&store);
  geoservices_records_free(r);
  return 0;
}
