/* Unit tests of the store's fast path (store/apply.c) on an in-memory
 * SQLite database: records from the extractor's tape into a feature table
 * with its R-tree triggers, GlobalIDs normalized, dates as DATETIME text,
 * REPLACE keeping the R-tree right, records before their layer id,
 * attachments, Z and M as the geometry column's flags say, the callback for
 * the rest, errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "check.h"
#include "json/records.h"
#include "store/apply.h"

static sqlite3 *db;
static geoservices_store store;

static const char *const SCHEMA =
  "CREATE TABLE gpkg_contents (table_name TEXT PRIMARY KEY, data_type TEXT, last_change TEXT,"
  " min_x DOUBLE, min_y DOUBLE, max_x DOUBLE, max_y DOUBLE);"
  "INSERT INTO gpkg_contents (table_name, data_type) VALUES ('pts', 'features');"
  "CREATE TABLE pts (OBJECTID INTEGER PRIMARY KEY, geom POINT, GlobalID TEXT UNIQUE, NAME TEXT,"
  " N INTEGER, V REAL, D DATETIME);"
  "CREATE VIRTUAL TABLE rtree_pts_geom USING rtree(id, minx, maxx, miny, maxy);"
  "CREATE TRIGGER rtree_pts_geom_insert AFTER INSERT ON pts WHEN (NEW.geom NOT NULL AND NOT ST_IsEmpty(NEW.geom))"
  " BEGIN INSERT OR REPLACE INTO rtree_pts_geom VALUES (NEW.OBJECTID, ST_MinX(NEW.geom), ST_MaxX(NEW.geom),"
  " ST_MinY(NEW.geom), ST_MaxY(NEW.geom)); END;"
  "CREATE TRIGGER rtree_pts_geom_delete AFTER DELETE ON pts WHEN OLD.geom NOT NULL"
  " BEGIN DELETE FROM rtree_pts_geom WHERE id = OLD.OBJECTID; END;"
  "CREATE TABLE geoservices_attachments (global_id TEXT PRIMARY KEY, layer_id INTEGER, parent_global_id TEXT,"
  " attachment_id INTEGER, name TEXT, content_type TEXT, size INTEGER, keywords TEXT, url TEXT, data BLOB);";

static void setup(void) {
  static const char *const names[] = {"OBJECTID", "GlobalID", "NAME", "N", "V", "D"};
  static const int types[] = {STORE_COL_INTEGER, STORE_COL_GUID, STORE_COL_TEXT, STORE_COL_INTEGER, STORE_COL_REAL,
                              STORE_COL_DATE};
  CHECK(sqlite3_open(":memory:", &db) == SQLITE_OK);
  CHECK(geoservices_store_init(&store, db) == 0);
  CHECK(sqlite3_exec(db, SCHEMA, NULL, NULL, NULL) == SQLITE_OK);
  CHECK(geoservices_store_add_layer(&store, 0, "pts", "geom", GEOM_POINT, 3857, names, types, 6, 1, 0) != NULL);
}

static void teardown(void) {
  geoservices_store_clear(&store);
  sqlite3_close(db);
}

typedef struct seen {
  int fields, layers, results, others;
  int64_t last_layer;
  char last_key[32];
} seen;

static int on_other(void *ctx, int kind, int has_layer, int64_t layer, const char *value, const char *key,
                    size_t key_len) {
  seen *s = (seen *)ctx;
  (void)value;
  if (kind == GEOSERVICES_STORE_LAYER) s->layers++;
  else if (kind == RECORD_FIELD) s->fields++;
  else if (kind == RECORD_ADD_RESULT || kind == RECORD_UPDATE_RESULT || kind == RECORD_DELETE_RESULT) s->results++;
  else s->others++;
  if (has_layer) s->last_layer = layer;
  if (key_len < sizeof s->last_key) {
    memcpy(s->last_key, key ? key : "", key_len);
    s->last_key[key_len] = '\0';
  }
  return 0;
}

/* Feeds doc in pieces of `step` bytes, applying after each; returns the
 * apply status (or -100 for a parse error). */
static int apply_doc(const char *doc, size_t step, seen *s, geoservices_store_cursor *c) {
  geoservices_records *r = geoservices_records_new(NULL);
  size_t len = strlen(doc), pos = 0, tape_len;
  const char *tape;
  int rc = 0;
  if (step == 0) step = len;
  while (pos < len) {
    size_t n = len - pos < step ? len - pos : step;
    if (geoservices_records_feed(r, doc + pos, n) != 0) {
      geoservices_records_free(r);
      return -100;
    }
    pos += n;
    tape = geoservices_records_tape(r, &tape_len);
    rc = geoservices_store_apply(&store, c, tape, tape_len, on_other, s);
    geoservices_records_consume(r);
    if (rc) break;
  }
  if (rc == 0 && geoservices_records_finish(r) != 0) rc = -100;
  if (rc == 0) {
    tape = geoservices_records_tape(r, &tape_len);
    rc = geoservices_store_apply(&store, c, tape, tape_len, on_other, s);
  }
  geoservices_records_free(r);
  return rc;
}

static int64_t count(const char *sql) {
  sqlite3_stmt *st;
  int64_t n = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -2;
  if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return n;
}

static char text_buf[256];
static const char *text(const char *sql) {
  sqlite3_stmt *st;
  text_buf[0] = '\0';
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return "(prepare failed)";
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
    strncpy(text_buf, (const char *)sqlite3_column_text(st, 0), sizeof text_buf - 1);
    text_buf[sizeof text_buf - 1] = '\0';
  }
  sqlite3_finalize(st);
  return text_buf;
}

static const char DOC[] =
  "{\"replicaServerGen\": 12, \"edits\": [{\"id\": 0, \"features\": {"
  "\"adds\": ["
  "{\"attributes\": {\"OBJECTID\": 1, \"GlobalID\": \"{0b7b1111-2222-4333-8444-555566667777}\", \"NAME\": \"a\","
  " \"N\": 5, \"V\": 2.5, \"D\": 1700000000000, \"EXTRA\": [1, {\"x\": 2}]}, \"geometry\": {\"x\": 10, \"y\": 20}},"
  "{\"attributes\": {\"OBJECTID\": 2, \"GlobalID\": \"0B7B1111-2222-4333-8444-000000000002\", \"NAME\": null,"
  " \"n\": 7.0, \"V\": 3, \"D\": null}, \"geometry\": {\"x\": \"NaN\", \"y\": \"NaN\"}},"
  "{\"geometry\": {\"x\": -1.5, \"y\": -2.5, \"spatialReference\": {\"wkid\": 3857}}, \"attributes\": {\"GlobalID\":"
  " \"{0B7B1111-2222-4333-8444-000000000003}\", \"OBJECTID\": 3, \"NAME\": \"Zo\\u00eb \\\"q\\\"\", \"D\": -1}}"
  "], \"updates\": [], \"deleteIds\": [], \"addResults\": [{\"globalId\": \"x\", \"success\": true}]},"
  "\"attachments\": {\"adds\": [{\"globalId\": \"{aaaaaaaa-2222-4333-8444-555566667777}\","
  " \"parentGlobalId\": \"{0b7b1111-2222-4333-8444-555566667777}\", \"name\": \"p.jpg\","
  " \"contentType\": \"image/jpeg\", \"size\": 3, \"id\": 9, \"data\": \"AQID\"}]}}]}";

static void test_adds(void) {
  seen s;
  geoservices_store_cursor c;
  size_t step;
  for (step = 0; step < 200; step += 37) {
    memset(&s, 0, sizeof s);
    memset(&c, 0, sizeof c);
    sqlite3_exec(db, "DELETE FROM pts; DELETE FROM geoservices_attachments", NULL, NULL, NULL);
    CHECK_MSG(apply_doc(DOC, step, &s, &c) == 0, "step %zu: %s", step, store.message);
    CHECK(count("SELECT count(*) FROM pts") == 3);
    CHECK(s.fields == 1 && s.layers == 1 && s.results == 1 && s.others == 0 && s.last_layer == 0);
  }
  CHECK_STREQ(text("SELECT GlobalID FROM pts WHERE OBJECTID = 1"), "{0B7B1111-2222-4333-8444-555566667777}");
  CHECK_STREQ(text("SELECT GlobalID FROM pts WHERE OBJECTID = 2"), "{0B7B1111-2222-4333-8444-000000000002}");
  CHECK_STREQ(text("SELECT D FROM pts WHERE OBJECTID = 1"), "2023-11-14T22:13:20.000Z");
  CHECK_STREQ(text("SELECT D FROM pts WHERE OBJECTID = 3"), "1969-12-31T23:59:59.999Z");
  CHECK(count("SELECT D IS NULL AND NAME IS NULL FROM pts WHERE OBJECTID = 2") == 1);
  CHECK(count("SELECT N FROM pts WHERE OBJECTID = 2") == 7); /* case-insensitive name, integral double */
  CHECK_STREQ(text("SELECT typeof(V) FROM pts WHERE OBJECTID = 2"), "real");
  CHECK_STREQ(text("SELECT NAME FROM pts WHERE OBJECTID = 3"), "Zo\xc3\xab \"q\"");
  /* short strings come numbered on the tape (TAPE_STRING_ID): the same bytes land */
  CHECK_STREQ(text("SELECT NAME FROM pts WHERE OBJECTID = 1"), "a");
  CHECK_STREQ(text("SELECT name || ' ' || content_type FROM geoservices_attachments"), "p.jpg image/jpeg");
  /* the NaN point is an empty geometry: no R-tree entry */
  CHECK(count("SELECT count(*) FROM rtree_pts_geom") == 2);
  CHECK(count("SELECT ST_IsEmpty(geom) FROM pts WHERE OBJECTID = 2") == 1);
  CHECK(count("SELECT ST_MinX(geom) = -1.5 AND ST_MaxY(geom) = -2.5 FROM pts WHERE OBJECTID = 3") == 1);
  CHECK(count("SELECT count(*) FROM rtree_pts_geom WHERE minx <= 10 AND maxx >= 10 AND miny <= 20 AND maxy >= 20")
        == 1);
  /* the attachment, its bytes decoded */
  CHECK_STREQ(text("SELECT hex(data) FROM geoservices_attachments"), "010203");
  CHECK_STREQ(text("SELECT parent_global_id || '|' || name || '|' || attachment_id || '|' || layer_id FROM "
                   "geoservices_attachments"),
              "{0B7B1111-2222-4333-8444-555566667777}|p.jpg|9|0");
  CHECK(store.applied[RECORD_ADD] > 0 && store.applied[RECORD_ADD_ATTACHMENT] > 0);
  /* extents: written into gpkg_contents by the flush */
  CHECK(geoservices_store_flush_extents(&store) == 0);
  CHECK(count("SELECT min_x = -1.5 AND max_x = 10 AND min_y = -2.5 AND max_y = 20 AND last_change NOT NULL "
              "FROM gpkg_contents WHERE table_name = 'pts'") == 1);
}

static void test_replace_and_delete(void) {
  seen s;
  geoservices_store_cursor c;
  memset(&s, 0, sizeof s);
  memset(&c, 0, sizeof c);
  /* the same GlobalID with a new OBJECTID (a local add getting the
   * server's): one row, and its old R-tree entry gone */
  CHECK(apply_doc("{\"edits\": [{\"id\": 0, \"features\": {\"updates\": [{\"attributes\": {\"OBJECTID\": 100,"
                  "\"GlobalID\": \"{0B7B1111-2222-4333-8444-555566667777}\", \"NAME\": \"b\"},"
                  "\"geometry\": {\"x\": 11, \"y\": 21}}]}}]}",
                  0, &s, &c) == 0);
  CHECK(count("SELECT count(*) FROM pts") == 3);
  CHECK(count("SELECT OBJECTID FROM pts WHERE NAME = 'b'") == 100);
  CHECK(count("SELECT count(*) FROM rtree_pts_geom") == 2);
  CHECK(count("SELECT count(*) FROM rtree_pts_geom WHERE id = 1") == 0);
  /* deletes by GlobalID (any spelling) and by OBJECTID; unknown ones are no error */
  memset(&c, 0, sizeof c);
  CHECK(apply_doc("{\"edits\": [{\"id\": 0, \"features\": {\"deleteIds\": ["
                  "\"0b7b1111-2222-4333-8444-555566667777\", 3, \"{FFFFFFFF-2222-4333-8444-555566667777}\"]},"
                  "\"attachments\": {\"deleteIds\": [\"{AAAAAAAA-2222-4333-8444-555566667777}\"]}}]}",
                  0, &s, &c) == 0);
  CHECK(count("SELECT count(*) FROM pts") == 1);
  CHECK(count("SELECT count(*) FROM rtree_pts_geom") == 0);
  CHECK(count("SELECT count(*) FROM geoservices_attachments") == 0);
}

static void test_id_after_records(void) {
  seen s;
  geoservices_store_cursor c;
  size_t step;
  for (step = 0; step < 120; step += 13) {
    memset(&s, 0, sizeof s);
    memset(&c, 0, sizeof c);
    sqlite3_exec(db, "DELETE FROM pts", NULL, NULL, NULL);
    CHECK_MSG(apply_doc("{\"edits\": [{\"features\": {\"adds\": [{\"attributes\": {\"OBJECTID\": 5, \"GlobalID\":"
                        "\"{0B7B1111-2222-4333-8444-000000000005}\"}, \"geometry\": {\"x\": 1, \"y\": 1}}]},"
                        "\"layerServerGen\": 4, \"id\": 0}]}",
                        step, &s, &c) == 0,
              "step %zu: %s", step, store.message);
    CHECK(count("SELECT count(*) FROM pts WHERE OBJECTID = 5") == 1);
    CHECK(s.others == 1 && strcmp(s.last_key, "layerServerGen") == 0 && s.last_layer == 0);
  }
  /* an entry with records and no id at all */
  memset(&c, 0, sizeof c);
  CHECK(apply_doc("{\"edits\": [{\"features\": {\"deleteIds\": [\"x\"]}}]}", 0, &s, &c) == -1);
  CHECK(strstr(store.message, "no integer id") != NULL);
  geoservices_store_drop_waiting(&store);
}

static void test_errors(void) {
  seen s;
  geoservices_store_cursor c;
  memset(&s, 0, sizeof s);
  memset(&c, 0, sizeof c);
  CHECK(apply_doc("{\"edits\": [{\"id\": 7, \"features\": {\"adds\": [{\"attributes\": {}}]}}]}", 0, &s, &c) == -1);
  CHECK(strstr(store.message, "layer 7") != NULL);
  memset(&c, 0, sizeof c);
  CHECK(apply_doc("{\"edits\": [{\"id\": 0, \"features\": {\"adds\": [{\"attributes\": {\"NAME\": \"x\"}}]}}]}",
                  0, &s, &c) == -1);
  CHECK(strstr(store.message, "GlobalID") != NULL);
  memset(&c, 0, sizeof c);
  CHECK(apply_doc("{\"edits\": [{\"id\": 0, \"features\": {\"adds\": [42]}}]}", 0, &s, &c) == -1);
  memset(&c, 0, sizeof c);
  CHECK(apply_doc("{\"edits\": [{\"id\": 0, \"features\": {\"deleteIds\": [true]}}]}", 0, &s, &c) == -1);
  memset(&c, 0, sizeof c);
  CHECK(apply_doc("{\"edits\": [{\"id\": 0, \"attachments\": {\"adds\": [{\"name\": \"x\"}]}}]}", 0, &s, &c) == -1);
  CHECK(strstr(store.message, "globalId") != NULL);
  /* a duplicate OBJECTID with another GlobalID: REPLACE, the server wins */
  memset(&c, 0, sizeof c);
  sqlite3_exec(db, "DELETE FROM pts", NULL, NULL, NULL);
  CHECK(apply_doc("{\"edits\": [{\"id\": 0, \"features\": {\"adds\": ["
                  "{\"attributes\": {\"OBJECTID\": 1, \"GlobalID\": \"{0B7B1111-2222-4333-8444-000000000001}\"}},"
                  "{\"attributes\": {\"OBJECTID\": 1, \"GlobalID\": \"{0B7B1111-2222-4333-8444-000000000002}\"}}"
                  "]}}]}",
                  0, &s, &c) == 0);
  CHECK(count("SELECT count(*) FROM pts") == 1);
}

/* Many records through one store: the reused buffers stay the size of the
 * largest record. */
static void test_flat(void) {
  geoservices_buf doc;
  seen s;
  geoservices_store_cursor c;
  char rec[256];
  int i;
  geoservices_buf_init(&doc, 0);
  {
    static const char head[] = "{\"edits\": [{\"id\": 0, \"features\": {\"adds\": [";
    geoservices_buf_append(&doc, head, strlen(head));
  }
  for (i = 0; i < 5000; i++) {
    int n = snprintf(rec, sizeof rec,
                     "%s{\"attributes\": {\"OBJECTID\": %d, \"GlobalID\": \"{0B7B1111-2222-4333-8444-%012d}\","
                     " \"N\": %d}, \"geometry\": {\"x\": %d.5, \"y\": 1}}",
                     i ? "," : "", i + 1, i, i, i);
    geoservices_buf_append(&doc, rec, (size_t)n);
  }
  geoservices_buf_append(&doc, "]}}]}", 6); /* with the NUL */
  memset(&s, 0, sizeof s);
  memset(&c, 0, sizeof c);
  sqlite3_exec(db, "DELETE FROM pts; BEGIN", NULL, NULL, NULL);
  CHECK(apply_doc(doc.data, 4096, &s, &c) == 0);
  sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
  CHECK(count("SELECT count(*) FROM pts") == 5000);
  CHECK(count("SELECT count(*) FROM rtree_pts_geom") == 5000);
  CHECK(store.blob.cap < 1024 && store.geom.point_cap < 64);
  geoservices_buf_free(&doc);
}

/* A layer entry whose id comes after many records (a createReplica
 * result's "layers", as the emulator writes them): the records wait in the
 * spool, in memory up to GEOSERVICES_SPOOL_MEMORY then in a file, and are
 * applied in their order when the id comes; memory stays that size. */
static void test_id_last_spooled(void) {
  geoservices_buf doc;
  seen s;
  geoservices_store_cursor c;
  char rec[300];
  int i, n = 20000;
  geoservices_buf_init(&doc, 0);
  {
    static const char head[] = "{\"layers\": [{\"features\": [";
    geoservices_buf_append(&doc, head, strlen(head));
  }
  for (i = 0; i < n; i++) {
    /* the last of each GlobalID's two records wins: order matters */
    int k = snprintf(rec, sizeof rec,
                     "%s{\"attributes\": {\"OBJECTID\": %d, \"GlobalID\": \"{0B7B1111-2222-4333-8444-%012d}\","
                     " \"NAME\": \"record %d of a layer whose id comes last, long enough to fill the spool\"},"
                     " \"geometry\": {\"x\": %d, \"y\": 2}}",
                     i ? "," : "", i + 1, i % (n / 2), i, i);
    geoservices_buf_append(&doc, rec, (size_t)k);
  }
  {
    static const char tail[] = "], \"attachments\": [], \"id\": 0}]}";
    geoservices_buf_append(&doc, tail, sizeof tail);
  }
  CHECK(doc.len > 3 * GEOSERVICES_SPOOL_MEMORY);
  memset(&s, 0, sizeof s);
  memset(&c, 0, sizeof c);
  sqlite3_exec(db, "DELETE FROM pts; BEGIN", NULL, NULL, NULL);
  CHECK_MSG(apply_doc(doc.data, 65536, &s, &c) == 0, "%s", store.message);
  CHECK(geoservices_store_flush_extents(&store) == 0);
  sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
  CHECK(count("SELECT count(*) FROM pts") == n / 2);
  CHECK(count("SELECT count(*) FROM pts WHERE OBJECTID > 10000") == n / 2); /* the later record of each */
  CHECK(count("SELECT count(*) FROM rtree_pts_geom") == n / 2);
  CHECK(s.layers == 1 && store.waiting.count == 0);
  CHECK(store.waiting.file != NULL); /* it went to a file, emptied since */
  CHECK(store.waiting.mem.cap <= 2 * GEOSERVICES_SPOOL_MEMORY + 1024);
  CHECK(store.waiting.one.cap < 1024);
  geoservices_buf_free(&doc);
}

/* The spool alone: records of any size, in order, across the memory limit
 * and the file; emptied for the next layer; a record the callback refuses
 * stops the replay and empties it. */
static int collect(void *ctx, const char *rec, size_t len) {
  geoservices_buf *out = (geoservices_buf *)ctx;
  if (len == 3 && memcmp(rec, "bad", 3) == 0) return 7;
  geoservices_buf_append(out, rec, len);
  return geoservices_buf_putc(out, '|');
}

static void test_spool(void) {
  geoservices_spool sp;
  geoservices_buf want, got;
  char rec[64];
  int i, round, failed;
  geoservices_spool_init(&sp, "/tmp");
  geoservices_buf_init(&want, 0);
  geoservices_buf_init(&got, 0);
  for (round = 0; round < 2; round++) {
    geoservices_buf_reset(&want);
    geoservices_buf_reset(&got);
    for (i = failed = 0; i < 100000; i++) {
      int k = snprintf(rec, sizeof rec, "%d:%d", round, i * 7919);
      failed += geoservices_spool_put(&sp, rec, (size_t)k) != 0;
      geoservices_buf_append(&want, rec, (size_t)k);
      geoservices_buf_putc(&want, '|');
    }
    CHECK(failed == 0);
    CHECK(geoservices_spool_put(&sp, "", 0) == 0); /* an empty one too */
    geoservices_buf_putc(&want, '|');
    CHECK(sp.count == 100001 && sp.file != NULL && sp.mem.len < GEOSERVICES_SPOOL_MEMORY);
    CHECK(geoservices_spool_replay(&sp, collect, &got) == 0);
    CHECK(got.len == want.len && memcmp(got.data, want.data, want.len) == 0);
    CHECK(sp.count == 0 && sp.file_bytes == 0);
  }
  CHECK(geoservices_spool_put(&sp, "ok", 2) == 0);
  CHECK(geoservices_spool_put(&sp, "bad", 3) == 0);
  CHECK(geoservices_spool_put(&sp, "never", 5) == 0);
  geoservices_buf_reset(&got);
  CHECK(geoservices_spool_replay(&sp, collect, &got) == 7);
  CHECK(got.len == 3 && sp.count == 0);
  geoservices_buf_reset(&got);
  CHECK(geoservices_spool_replay(&sp, collect, &got) == 0 && got.len == 0);
  geoservices_spool_free(&sp);
  geoservices_buf_free(&want);
  geoservices_buf_free(&got);
}

/* An empty R-tree filled inside a transaction is packed in bulk at the
 * flush: the module's own check passes, every row with a geometry has its
 * entry (not those deleted or replaced meanwhile), queries find them, and
 * the module keeps updating the packed tree afterwards. */
static void test_bulk_rtree(void) {
  geoservices_buf doc;
  seen s;
  geoservices_store_cursor c;
  char rec[256];
  int i, n = 20000;
  geoservices_buf_init(&doc, 0);
  {
    static const char head[] = "{\"edits\": [{\"id\": 0, \"features\": {\"adds\": [";
    geoservices_buf_append(&doc, head, strlen(head));
  }
  for (i = 0; i < n; i++) {
    int k = snprintf(rec, sizeof rec,
                     "%s{\"attributes\": {\"OBJECTID\": %d, \"GlobalID\": \"{0B7B1111-2222-4333-8444-%012d}\"},"
                     " \"geometry\": {\"x\": %d.25, \"y\": %d.5}}",
                     i ? "," : "", i + 1, i, (i * 7919) % 1000, (i * 104729) % 1000);
    geoservices_buf_append(&doc, rec, (size_t)k);
  }
  /* the same GlobalID as feature 1 with another OBJECTID (REPLACE deletes 1),
   * and deletes of 2 and 3 */
  {
    static const char tail[] = ",{\"attributes\": {\"OBJECTID\": 50000, \"GlobalID\":"
                               " \"{0B7B1111-2222-4333-8444-000000000000}\"}, \"geometry\": {\"x\": 5000, \"y\": 5000}}"
                               "], \"deleteIds\": [\"{0B7B1111-2222-4333-8444-000000000001}\", 3]}}]}";
    geoservices_buf_append(&doc, tail, sizeof tail);
  }
  memset(&s, 0, sizeof s);
  memset(&c, 0, sizeof c);
  sqlite3_exec(db, "DELETE FROM pts", NULL, NULL, NULL);
  geoservices_store_forget_extents(&store);
  CHECK(count("SELECT count(*) FROM rtree_pts_geom") == 0);

  /* a COMMIT that skips the flush is refused (it would leave no index) */
  sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
  CHECK(apply_doc(doc.data, 65536, &s, &c) == 0);
  CHECK(count("SELECT count(*) FROM rtree_pts_geom") == 0); /* deferred */
  CHECK(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_CONSTRAINT);
  CHECK(sqlite3_get_autocommit(db));
  geoservices_store_forget_extents(&store);
  CHECK(count("SELECT count(*) FROM pts") == 0);

  memset(&c, 0, sizeof c);
  sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
  CHECK(apply_doc(doc.data, 65536, &s, &c) == 0);
  CHECK(geoservices_store_flush_extents(&store) == 0);
  CHECK(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK);
  CHECK(count("SELECT count(*) FROM pts") == n - 2);
  CHECK(count("SELECT count(*) FROM rtree_pts_geom") == n - 2);
  CHECK_STREQ(text("SELECT rtreecheck('rtree_pts_geom')"), "ok");
  CHECK(count("SELECT count(*) FROM sqlite_master WHERE name LIKE 'geoservices_pending%'") == 0);
  CHECK(count("SELECT count(*) FROM sqlite_temp_master") == 0);
  CHECK(count("SELECT count(*) FROM rtree_pts_geom WHERE id IN (1, 2, 3)") == 0);
  CHECK(count("SELECT id FROM rtree_pts_geom WHERE minx <= 5000 AND maxx >= 5000 AND miny <= 5000") == 50000);
  /* every entry is found by its own box, and is its row's */
  CHECK(count("SELECT count(*) FROM pts p WHERE NOT EXISTS (SELECT 1 FROM rtree_pts_geom r WHERE r.id = p.OBJECTID"
              " AND r.minx <= ST_MinX(p.geom) AND r.maxx >= ST_MaxX(p.geom) AND r.miny <= ST_MinY(p.geom)"
              " AND r.maxy >= ST_MaxY(p.geom))") == 0);
  CHECK(count("SELECT count(*) FROM rtree_pts_geom WHERE minx >= 100 AND maxx <= 200 AND miny >= 100 AND maxy <= 200")
        == count("SELECT count(*) FROM pts WHERE ST_MinX(geom) >= 100 AND ST_MaxX(geom) <= 200 AND ST_MinY(geom) >= 100"
                 " AND ST_MaxY(geom) <= 200"));
  /* the module goes on with the packed tree: deletes and inserts one by one */
  CHECK(sqlite3_exec(db, "DELETE FROM pts WHERE OBJECTID % 3 = 0", NULL, NULL, NULL) == SQLITE_OK);
  memset(&c, 0, sizeof c);
  CHECK(apply_doc("{\"edits\": [{\"id\": 0, \"features\": {\"adds\": [{\"attributes\": {\"OBJECTID\": 60000,"
                  "\"GlobalID\": \"{0B7B1111-2222-4333-8444-999999999999}\"}, \"geometry\": {\"x\": 1, \"y\": 2}}]}}]}",
                  0, &s, &c) == 0);
  CHECK_STREQ(text("SELECT rtreecheck('rtree_pts_geom')"), "ok");
  CHECK(count("SELECT count(*) FROM rtree_pts_geom") == count("SELECT count(*) FROM pts"));
  geoservices_buf_free(&doc);
}

/* The geometry of a row, decoded. */
static int row_geometry(const char *sql, geoservices_geom *g) {
  sqlite3_stmt *st;
  int32_t srs;
  const char *err;
  int rc = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_BLOB)
    rc = geoservices_geom_decode(g, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), &srs, &err);
  sqlite3_finalize(st);
  return rc;
}

/* A ZM line layer (its z and m flags in gpkg_geometry_columns) and an
 * M-only point layer: the coordinates' third and fourth numbers land as the
 * geometry's hasZ / hasM say, wherever those come, else as the layer's. */
static void test_zm(void) {
  static const char *const names[] = {"OBJECTID", "GlobalID"};
  static const int types[] = {STORE_COL_INTEGER, STORE_COL_GUID};
  static const char doc[] =
    "{\"edits\": [{\"id\": 5, \"features\": {\"adds\": ["
    "{\"attributes\": {\"OBJECTID\": 1, \"GlobalID\": \"{00000005-0000-4000-8000-000000000001}\"},"
    " \"geometry\": {\"paths\": [[[1, 2, 3, 4], [5, 6, 7.25, 8.5]]]}},"
    "{\"attributes\": {\"OBJECTID\": 2, \"GlobalID\": \"{00000005-0000-4000-8000-000000000002}\"},"
    " \"geometry\": {\"paths\": [[[1, 2, 3], [5, 6, 7]]], \"hasM\": false, \"hasZ\": true}},"
    "{\"attributes\": {\"OBJECTID\": 3, \"GlobalID\": \"{00000005-0000-4000-8000-000000000003}\"},"
    " \"geometry\": {\"hasZ\": false, \"hasM\": true, \"paths\": [[[1, 2, 30], [5, 6, null]]]}}"
    "]}}, {\"id\": 6, \"features\": {\"adds\": ["
    "{\"attributes\": {\"OBJECTID\": 1, \"GlobalID\": \"{00000006-0000-4000-8000-000000000001}\"},"
    " \"geometry\": {\"m\": 9.75, \"x\": 1, \"y\": 2, \"z\": 100}}"
    "]}}]}";
  geoservices_geom g;
  seen s;
  geoservices_store_cursor c;
  geoservices_geom_init(&g);
  memset(&s, 0, sizeof s);
  memset(&c, 0, sizeof c);
  CHECK(sqlite3_exec(db, "CREATE TABLE gpkg_geometry_columns (table_name TEXT, column_name TEXT, z INTEGER, "
                         "m INTEGER); INSERT INTO gpkg_geometry_columns VALUES ('lines', 'geom', 1, 1), "
                         "('mpts', 'geom', 0, 2); CREATE TABLE lines (OBJECTID INTEGER PRIMARY KEY, "
                         "GlobalID TEXT UNIQUE, geom MULTILINESTRING); CREATE TABLE mpts (OBJECTID INTEGER PRIMARY "
                         "KEY, GlobalID TEXT UNIQUE, geom POINT)", NULL, NULL, NULL) == SQLITE_OK);
  CHECK(geoservices_store_add_layer(&store, 5, "lines", "geom", GEOM_POLYLINE, 3857, names, types, 2, 1, 0) != NULL);
  CHECK(geoservices_store_add_layer(&store, 6, "mpts", "geom", GEOM_POINT, 3857, names, types, 2, 1, 0) != NULL);
  CHECK(geoservices_store_layer_of(&store, 5)->has_z && geoservices_store_layer_of(&store, 5)->has_m);
  CHECK(!geoservices_store_layer_of(&store, 6)->has_z && geoservices_store_layer_of(&store, 6)->has_m);
  CHECK(!geoservices_store_layer_of(&store, 0)->has_z); /* no row for pts */
  CHECK_MSG(apply_doc(doc, 0, &s, &c) == 0, "%s", store.message);
  CHECK(row_geometry("SELECT geom FROM lines WHERE OBJECTID = 1", &g) == 0);
  CHECK(g.has_z && g.has_m && g.npoints == 2 && g.zm[0] == 3 && g.zm[1] == 4 && g.zm[2] == 7.25 && g.zm[3] == 8.5);
  CHECK(row_geometry("SELECT geom FROM lines WHERE OBJECTID = 2", &g) == 0);
  CHECK(g.npoints == 2 && g.zm[0] == 3 && isnan(g.zm[1]) && g.zm[2] == 7 && isnan(g.zm[3]));
  CHECK(row_geometry("SELECT geom FROM lines WHERE OBJECTID = 3", &g) == 0);
  CHECK(g.npoints == 2 && isnan(g.zm[0]) && g.zm[1] == 30 && isnan(g.zm[2]) && isnan(g.zm[3]));
  CHECK(row_geometry("SELECT geom FROM mpts WHERE OBJECTID = 1", &g) == 0);
  CHECK(!g.has_z && g.has_m && g.npoints == 1 && g.zm[1] == 9.75);
  /* its z the M-only column cannot hold: the server's JSON kept beside it (issue 41), the lines' none */
  CHECK(count("SELECT count(*) FROM gpkgext_geoservices_original_geometries WHERE layer_id = 6 AND "
              "json_extract(geometry, '$.z') = 100") == 1);
  CHECK(count("SELECT count(*) FROM gpkgext_geoservices_original_geometries WHERE layer_id = 5") == 0);
  CHECK(count("SELECT ST_MinX(geom) = 1 AND ST_MaxY(geom) = 6 FROM lines WHERE OBJECTID = 1") == 1);
  geoservices_geom_free(&g);
}

/* True curves (after test_zm, whose gpkg_geometry_columns it extends): a
 * circular arc turns the layer's MULTILINESTRING column into MULTICURVE
 * (gpkg_geometry_columns, the table's own declaration, the extension rows);
 * a Bézier feature keeps the server's JSON beside its blob, forgotten when
 * the server replaces it by an exact geometry or deletes it; a rollback
 * takes the table of kept geometries away with the rest. */
static void test_curves(void) {
  static const char *const names[] = {"OBJECTID", "GlobalID"};
  static const int types[] = {STORE_COL_INTEGER, STORE_COL_GUID};
  static const char arc[] =
    "{\"edits\": [{\"id\": 7, \"features\": {\"adds\": ["
    "{\"attributes\": {\"OBJECTID\": 1, \"GlobalID\": \"{00000007-0000-4000-8000-000000000001}\"},"
    " \"geometry\": {\"paths\": [[[0, 0], [3, 0]]], \"curvePaths\": [[[0, 0], {\"c\": [[2, 0], [1, 1]]},"
    " [3, 0]]]}},"
    "{\"attributes\": {\"OBJECTID\": 2, \"GlobalID\": \"{00000007-0000-4000-8000-000000000002}\"},"
    " \"geometry\": {\"spatialReference\": {\"wkt\": \"PROJCS[\\\"x\\\"]\\n\\u0001\"},"
    " \"curvePaths\": [[[0, 0], {\"b\": [[3, 0], [1, 2.5], [2, 0.1]]}]]}}"
    "]}}]}";
  static const char replaced[] =
    "{\"edits\": [{\"id\": 7, \"features\": {\"updates\": ["
    "{\"attributes\": {\"OBJECTID\": 2, \"GlobalID\": \"{00000007-0000-4000-8000-000000000002}\"},"
    " \"geometry\": {\"paths\": [[[0, 0], [3, 0]]]}}], \"deleteIds\": []}}]}";
  static const char kept[] =
    "{\"spatialReference\":{\"wkt\":\"PROJCS[\\\"x\\\"]\\u000a\\u0001\"},"
    "\"curvePaths\":[[[0,0],{\"b\":[[3,0],[1,2.5],[2,0.10000000000000001]]}]]}";
  geoservices_geom g;
  geoservices_store_layer *l;
  seen s;
  geoservices_store_cursor c;
  geoservices_geom_init(&g);
  memset(&s, 0, sizeof s);
  memset(&c, 0, sizeof c);
  CHECK(sqlite3_exec(db, "ALTER TABLE gpkg_geometry_columns ADD COLUMN geometry_type_name TEXT;"
                         "INSERT INTO gpkg_geometry_columns VALUES ('curvy', 'geom', 0, 0, 'MULTILINESTRING');"
                         "CREATE TABLE gpkg_extensions (table_name TEXT, column_name TEXT, extension_name TEXT, "
                         "definition TEXT, scope TEXT, UNIQUE (table_name, column_name, extension_name));"
                         "CREATE TABLE curvy (OBJECTID INTEGER PRIMARY KEY, GlobalID TEXT UNIQUE, "
                         "\"geom\" MULTILINESTRING)", NULL, NULL, NULL) == SQLITE_OK);
  l = geoservices_store_add_layer(&store, 7, "curvy", "geom", GEOM_POLYLINE, 3857, names, types, 2, 1, 0);
  CHECK(l != NULL && !l->curves && !l->originals);
  sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
  CHECK_MSG(apply_doc(arc, 0, &s, &c) == 0, "%s", store.message);
  CHECK(geoservices_store_flush_extents(&store) == 0);
  CHECK(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK);
  CHECK(l->curves && l->originals);
  CHECK_STREQ(text("SELECT geometry_type_name FROM gpkg_geometry_columns WHERE table_name = 'curvy'"), "MULTICURVE");
  CHECK_STREQ(text("SELECT type FROM pragma_table_info('curvy') WHERE name = 'geom'"), "MULTICURVE");
  CHECK(count("SELECT count(*) FROM gpkg_extensions WHERE table_name = 'curvy' AND scope = 'read-write' AND "
              "extension_name IN ('gpkg_geom_CIRCULARSTRING', 'gpkg_geom_COMPOUNDCURVE', 'gpkg_geom_MULTICURVE')")
        == 3);
  CHECK_STREQ(text("PRAGMA integrity_check"), "ok");
  /* the arc exactly (the true curve won over the densified paths beside it) */
  CHECK(row_geometry("SELECT geom FROM curvy WHERE OBJECTID = 1", &g) == 0);
  CHECK(g.has_arcs && g.npoints == 4 && g.arc[1] && g.xy[2] == 1 && g.xy[3] == 1 && g.xy[6] == 3);
  /* the Bézier: points, and its JSON kept, every number and escape as sent */
  CHECK(row_geometry("SELECT geom FROM curvy WHERE OBJECTID = 2", &g) == 0);
  CHECK(!g.has_arcs && g.npoints == 33);
  CHECK_STREQ(text("SELECT geometry FROM gpkgext_geoservices_original_geometries WHERE layer_id = 7 AND "
                   "global_id = '{00000007-0000-4000-8000-000000000002}'"), kept);
  CHECK(count("SELECT json_valid(geometry) FROM gpkgext_geoservices_original_geometries WHERE layer_id = 7") == 1);
  CHECK(count("SELECT count(*) FROM gpkgext_geoservices_original_geometries o JOIN curvy c ON c.GlobalID = o.global_id "
              "AND c.geom = o.gpkg_geometry") == 1);
  /* kept only while the blob is the one made from it */
  {
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(db, "SELECT geom FROM curvy WHERE OBJECTID = 2", -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK(geoservices_store_original_of(&store, l, "{00000007-0000-4000-8000-000000000002}", 38,
                                        sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0)) == 1);
    CHECK(store.json.len == strlen(kept) && memcmp(store.json.data, kept, store.json.len) == 0);
    CHECK(geoservices_store_original_of(&store, l, "{00000007-0000-4000-8000-000000000002}", 38, "GP", 2) == 0);
    sqlite3_finalize(st);
  }
  /* replaced by an exact geometry: forgotten */
  memset(&c, 0, sizeof c);
  CHECK_MSG(apply_doc(replaced, 0, &s, &c) == 0, "%s", store.message);
  CHECK(count("SELECT count(*) FROM gpkgext_geoservices_original_geometries WHERE layer_id = 7") == 0);
  /* kept again, then deleted with its feature */
  memset(&c, 0, sizeof c);
  CHECK(apply_doc(arc, 0, &s, &c) == 0);
  CHECK(count("SELECT count(*) FROM gpkgext_geoservices_original_geometries WHERE layer_id = 7") == 1);
  memset(&c, 0, sizeof c);
  CHECK(apply_doc("{\"edits\": [{\"id\": 7, \"features\": {\"deleteIds\": "
                  "[\"{00000007-0000-4000-8000-000000000002}\"]}}]}", 0, &s, &c) == 0);
  CHECK(count("SELECT count(*) FROM gpkgext_geoservices_original_geometries WHERE layer_id = 7") == 0);
  /* a column promoted in a transaction rolled back is a MULTILINESTRING again, and promoted again later */
  CHECK(sqlite3_exec(db, "CREATE TABLE curvy2 (OBJECTID INTEGER PRIMARY KEY, GlobalID TEXT UNIQUE, "
                         "\"geom\" MULTILINESTRING); INSERT INTO gpkg_geometry_columns VALUES "
                         "('curvy2', 'geom', 0, 0, 'MULTILINESTRING')", NULL, NULL, NULL) == SQLITE_OK);
  {
    geoservices_store_layer *l2 = geoservices_store_add_layer(&store, 8, "curvy2", "geom", GEOM_POLYLINE, 3857,
                                                              names, types, 2, 1, 0);
    static const char arc8[] = "{\"edits\": [{\"id\": 8, \"features\": {\"adds\": [{\"attributes\": "
                               "{\"GlobalID\": \"{00000008-0000-4000-8000-000000000001}\"}, \"geometry\": "
                               "{\"curvePaths\": [[[0, 0], {\"c\": [[2, 0], [1, 1]]}]]}}]}}]}";
    CHECK(l2 != NULL);
    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    memset(&c, 0, sizeof c);
    CHECK(apply_doc(arc8, 0, &s, &c) == 0 && l2->curves);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    geoservices_store_forget_extents(&store);
    CHECK(!l2->curves);
    CHECK_STREQ(text("SELECT type FROM pragma_table_info('curvy2') WHERE name = 'geom'"), "MULTILINESTRING");
    memset(&c, 0, sizeof c);
    CHECK(apply_doc(arc8, 0, &s, &c) == 0 && l2->curves);
    CHECK_STREQ(text("SELECT type FROM pragma_table_info('curvy2') WHERE name = 'geom'"), "MULTICURVE");
    geoservices_store_forget_extents(&store);
  }
  /* a rollback takes the table away when it made it: later applies do without it */
  CHECK(sqlite3_exec(db, "DROP TABLE gpkgext_geoservices_original_geometries", NULL, NULL, NULL) == SQLITE_OK);
  geoservices_store_forget_extents(&store);
  CHECK(!l->originals);
  sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
  memset(&c, 0, sizeof c);
  CHECK(apply_doc(arc, 0, &s, &c) == 0 && l->originals);
  sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  geoservices_store_forget_extents(&store);
  CHECK(!l->originals && count("SELECT count(*) FROM sqlite_master WHERE name = 'gpkgext_geoservices_original_geometries'")
        == 0);
  memset(&c, 0, sizeof c);
  CHECK_MSG(apply_doc(replaced, 0, &s, &c) == 0, "%s", store.message);
  geoservices_geom_free(&g);
}

/* A feature bound by hand gets the table's defaults for the columns it does
 * not name (a null names one); a downloaded one never. */
static void test_defaults(void) {
  static const char *const names[] = {"OBJECTID", "GlobalID", "S", "N", "R"};
  static const int types[] = {STORE_COL_INTEGER, STORE_COL_GUID, STORE_COL_TEXT, STORE_COL_INTEGER, STORE_COL_REAL};
  geoservices_store_layer *l;
  seen s;
  geoservices_store_cursor c;
  memset(&s, 0, sizeof s);
  memset(&c, 0, sizeof c);
  CHECK(sqlite3_exec(db, "CREATE TABLE dflt (OBJECTID INTEGER PRIMARY KEY, GlobalID TEXT UNIQUE, "
                         "S TEXT(5) DEFAULT 'it''s', N SMALLINT NOT NULL DEFAULT 7, R REAL DEFAULT 0.1)",
                         NULL, NULL, NULL) == SQLITE_OK);
  l = geoservices_store_add_layer(&store, 7, "dflt", NULL, GEOM_NONE, 0, names, types, 5, 1, 0);
  CHECK(l != NULL);
  geoservices_store_bind_begin(l);
  geoservices_store_given(l, 1);
  CHECK(geoservices_store_bind_text(&store, l, 1, "{00000007-0000-4000-8000-000000000001}", 38) == 0);
  geoservices_store_given(l, 4); /* R named, as a null */
  CHECK(geoservices_store_bind_defaults(&store, l) == 0);
  CHECK(geoservices_store_upsert(&store, l) == 0);
  CHECK_STREQ(text("SELECT S || '|' || N || '|' || coalesce(R, 'null') FROM dflt"), "it's|7|null");
  /* downloaded: the row as the server sent it, NOT NULL's default only where REPLACE puts it */
  CHECK(apply_doc("{\"edits\": [{\"id\": 7, \"features\": {\"adds\": [{\"attributes\": {\"OBJECTID\": 2, "
                  "\"GlobalID\": \"{00000007-0000-4000-8000-000000000002}\", \"N\": null}}]}}]}",
                  0, &s, &c) == 0);
  CHECK_STREQ(text("SELECT coalesce(S, 'null') || '|' || N || '|' || coalesce(R, 'null') FROM dflt "
                   "WHERE OBJECTID = 2"), "null|7|null");
}

static void test_guid(void) {
  char out[40];
  CHECK(geoservices_store_normalize_guid("{0b7b1111-2222-4333-8444-555566667777}", 38, out) == 38);
  CHECK_STREQ(out, "{0B7B1111-2222-4333-8444-555566667777}");
  CHECK(geoservices_store_normalize_guid("0b7b1111-2222-4333-8444-555566667777", 36, out) == 38);
  CHECK(geoservices_store_normalize_guid("0b7b1111-2222-4333-8444-55556666777g", 36, out) == 0);
  CHECK(geoservices_store_normalize_guid("0b7b1111x2222-4333-8444-555566667777", 36, out) == 0);
  CHECK(geoservices_store_normalize_guid("{abc}", 5, out) == 0);
}

int main(void) {
  setup();
  test_guid();
  test_adds();
  test_replace_and_delete();
  test_id_after_records();
  test_errors();
  test_flat();
  test_id_last_spooled();
  test_spool();
  test_bulk_rtree();
  test_zm();
  test_curves();
  test_defaults();
  teardown();
  return CHECK_DONE("test_store_apply");
}
