/* Geometries the blob holds only approximately keep the server's JSON beside
 * it, written back from the tape (apply.h: gpkgext_geoservices_original_geometries). */
#include "store/apply_internal.h"

#include <stdio.h>
#include <string.h>

/* ---- geometries kept as the server sent them (apply.h) ---------------------- */

static const char ORIGINALS_SQL[] =
  "CREATE TABLE IF NOT EXISTS gpkgext_geoservices_original_geometries (layer_id INTEGER NOT NULL, global_id TEXT NOT NULL, "
  "geometry TEXT NOT NULL, gpkg_geometry BLOB NOT NULL, PRIMARY KEY (layer_id, global_id)) WITHOUT ROWID";

static int prepare_original(geoservices_store *s, sqlite3_stmt **st, const char *sql) {
  int rc;
  if (*st) return 0;
  rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
  if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, "gpkgext_geoservices_original_geometries");
  return 0;
}

int geoservices_store_keep_original(geoservices_store *s, geoservices_store_layer *l, const char *json, size_t len) {
  sqlite3_stmt *st;
  int rc;
  if (!json && !l->originals) return 0; /* nothing kept for this layer: nothing to forget */
  if (!l->gid_text) return 0;           /* a row without a GlobalID is refused by the upsert anyway */
  if (json) {
    /* made when first needed (a rollback may have taken it away again) */
    rc = sqlite3_exec(s->db, ORIGINALS_SQL, NULL, NULL, NULL);
    if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, "gpkgext_geoservices_original_geometries");
    if (prepare_original(s, &s->original_put, "INSERT OR REPLACE INTO gpkgext_geoservices_original_geometries (layer_id, "
                         "global_id, geometry, gpkg_geometry) VALUES (?1, ?2, ?3, ?4)"))
      return -1;
    st = s->original_put;
    sqlite3_bind_text(st, 3, json, (int)len, SQLITE_STATIC);
    sqlite3_bind_blob(st, 4, s->blob.data, (int)s->blob.len, SQLITE_STATIC);
    l->originals = 1;
  } else {
    if (prepare_original(s, &s->original_forget, "DELETE FROM gpkgext_geoservices_original_geometries "
                         "WHERE layer_id = ?1 AND global_id = ?2"))
      return -1;
    st = s->original_forget;
  }
  sqlite3_bind_int64(st, 1, l->id);
  sqlite3_bind_text(st, 2, l->gid_text, (int)l->gid_len, SQLITE_STATIC);
  rc = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (rc != SQLITE_DONE) return geoservices_store_fail_sqlite(s, rc, "gpkgext_geoservices_original_geometries");
  return 0;
}

int geoservices_store_original_of(geoservices_store *s, geoservices_store_layer *l, const char *gid, size_t gid_len,
                                  const void *blob, size_t blob_len) {
  sqlite3_stmt *st;
  int rc, found = 0;
  if (!l->originals) return 0;
  if (prepare_original(s, &s->original_get, "SELECT geometry, gpkg_geometry FROM gpkgext_geoservices_original_geometries "
                       "WHERE layer_id = ?1 AND global_id = ?2"))
    return -1;
  st = s->original_get;
  sqlite3_bind_int64(st, 1, l->id);
  sqlite3_bind_text(st, 2, gid, (int)gid_len, SQLITE_STATIC);
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW && (size_t)sqlite3_column_bytes(st, 1) == blob_len &&
      memcmp(sqlite3_column_blob(st, 1), blob, blob_len) == 0) { /* the blob is still the one made from it */
    geoservices_buf_reset(&s->json);
    found = geoservices_buf_append(&s->json, sqlite3_column_text(st, 0), (size_t)sqlite3_column_bytes(st, 0)) ? -1 : 1;
  }
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (found < 0) return geoservices_store_fail(s, SQLITE_NOMEM, "out of memory");
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    return geoservices_store_fail_sqlite(s, rc, "gpkgext_geoservices_original_geometries");
  return found;
}

/* Whether the table of kept geometries has rows of layer l (read once, when
 * it is registered). */
void geoservices_store_read_originals(geoservices_store *s, geoservices_store_layer *l) {
  sqlite3_stmt *st = NULL;
  l->originals = 0;
  if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM gpkgext_geoservices_original_geometries WHERE layer_id = ?1 LIMIT 1", -1, &st,
                         NULL) != SQLITE_OK)
    return; /* none made yet */
  sqlite3_bind_int64(st, 1, l->id);
  l->originals = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
}

/* A JSON string's text, escaped. */
static int json_string(geoservices_buf *out, const char *v, size_t len) {
  static const char hex[] = "0123456789abcdef";
  size_t i;
  int err = geoservices_buf_putc(out, '"');
  for (i = 0; i < len && !err; i++) {
    unsigned char c = (unsigned char)v[i];
    if (c == '"' || c == '\\') {
      err = geoservices_buf_putc(out, '\\') || geoservices_buf_putc(out, (char)c);
    } else if (c < 0x20) {
      char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      err = geoservices_buf_append(out, esc, sizeof esc);
    } else {
      err = geoservices_buf_putc(out, (char)c);
    }
  }
  return err || geoservices_buf_putc(out, '"');
}

/* The value at *p as JSON text appended to out (numbers with every bit:
 * %.17g); advances past it. 0 or -1 (out of memory). */
int geoservices_store_tape_json(const char **p, geoservices_buf *out) {
  int op = (unsigned char)**p;
  uint32_t n, i, len;
  char num[32];
  int k;
  switch (op) {
    case TAPE_OBJECT:
    case TAPE_ARRAY:
      (*p)++;
      n = geoservices_tape_u32(p);
      if (geoservices_buf_putc(out, op == TAPE_OBJECT ? '{' : '[')) return -1;
      for (i = 0; i < n; i++) {
        if (i && geoservices_buf_putc(out, ',')) return -1;
        if (op == TAPE_OBJECT) {
          const char *key = geoservices_tape_key(p, &len);
          if (json_string(out, key, len) || geoservices_buf_putc(out, ':')) return -1;
        }
        if (geoservices_store_tape_json(p, out)) return -1;
      }
      return geoservices_buf_putc(out, op == TAPE_OBJECT ? '}' : ']');
    case TAPE_STRING:
    case TAPE_STRING_ID: {
      const char *v = geoservices_tape_string(p, &len);
      return json_string(out, v, len);
    }
    case TAPE_INTEGER:
      (*p)++;
      k = snprintf(num, sizeof num, "%lld", (long long)geoservices_tape_i64(p));
      return geoservices_buf_append(out, num, (size_t)k);
    case TAPE_DOUBLE:
      (*p)++;
      k = snprintf(num, sizeof num, "%.17g", geoservices_tape_f64(p));
      return geoservices_buf_append(out, num, (size_t)k);
    case TAPE_TRUE:
    case TAPE_FALSE:
    case TAPE_NULL:
      (*p)++;
      return geoservices_buf_append(out, op == TAPE_TRUE ? "true" : op == TAPE_FALSE ? "false" : "null",
                                    op == TAPE_FALSE ? 5 : 4);
    default:
      *p = geoservices_tape_skip(*p);
      return geoservices_buf_append(out, "null", 4);
  }
}
