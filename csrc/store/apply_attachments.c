/* Attachments of a synchronization result (their metadata and any inline
 * base64 data) into geoservices_attachments, and their deletes. */
#include "store/apply_internal.h"

#include <string.h>

/* ---- attachments ----------------------------------------------------------- */

static const char ATT_UPSERT[] =
  "INSERT OR REPLACE INTO geoservices_attachments (global_id, layer_id, parent_global_id, attachment_id, name, "
  "content_type, size, keywords, url, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
static const char ATT_REMOVE[] = "DELETE FROM geoservices_attachments WHERE global_id = ?1";

static int prepare(geoservices_store *s, const char *sql, sqlite3_stmt **st) {
  int rc;
  if (*st) return 0;
  rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
  if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, "prepare");
  return 0;
}

static int b64_value(int c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

/* Base64 (standard or URL alphabet; whitespace and padding skipped) into s->bytes. */
static int base64_decode(geoservices_store *s, const char *text, size_t len) {
  uint32_t acc = 0;
  int bits = 0;
  size_t i;
  geoservices_buf_reset(&s->bytes);
  if (geoservices_buf_reserve(&s->bytes, len / 4 * 3 + 3))
    return geoservices_store_fail(s, SQLITE_NOMEM, "out of memory");
  for (i = 0; i < len; i++) {
    int v = b64_value((unsigned char)text[i]);
    if (v < 0) continue;
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      s->bytes.data[s->bytes.len++] = (char)((acc >> bits) & 0xff);
    }
  }
  return 0;
}

static int att_bind_guid(geoservices_store *s, int param, const char *v, uint32_t len, char buf[40]) {
  size_t n = geoservices_store_normalize_guid(v, len, buf);
  int rc = n ? sqlite3_bind_text(s->att_upsert, param, buf, (int)n, SQLITE_STATIC)
             : sqlite3_bind_text(s->att_upsert, param, v, (int)len, SQLITE_STATIC);
  return rc == SQLITE_OK ? 0 : geoservices_store_fail_sqlite(s, rc, "bind");
}

int geoservices_store_apply_attachment(geoservices_store *s, int64_t layer, const char **p) {
  static const char *const names[] = {"globalId", "", "parentGlobalId", "id", "name", "contentType",
                                      "size", "keywords", "url", "data"};
  char gid[40], parent[40];
  uint32_t n, i, len;
  int rc, has_gid = 0;
  if ((unsigned char)**p != TAPE_OBJECT)
    return geoservices_store_fail(s, 0, "an attachment of layer %lld is not an object", (long long)layer);
  if (prepare(s, ATT_UPSERT, &s->att_upsert)) return -1;
  sqlite3_reset(s->att_upsert);
  sqlite3_clear_bindings(s->att_upsert);
  sqlite3_bind_int64(s->att_upsert, 2, layer);
  (*p)++;
  n = geoservices_tape_u32(p);
  for (i = 0; i < n; i++) {
    const char *key = geoservices_tape_key(p, &len);
    int param = 0, k, op;
    for (k = 0; k < (int)(sizeof names / sizeof names[0]); k++)
      if (names[k][0] && geoservices_store_key_is_ci(key, len, names[k])) param = k + 1;
    if (!param && geoservices_store_key_is_ci(key, len, "attachmentId")) param = 4;
    op = (unsigned char)**p;
    if (!param || (!geoservices_tape_is_string(op) && op != TAPE_INTEGER && op != TAPE_DOUBLE)) {
      *p = geoservices_tape_skip(*p);
      continue;
    }
    if (geoservices_tape_is_string(op)) {
      const char *v = geoservices_tape_string(p, &len);
      if (param == 1) {
        has_gid = 1;
        rc = att_bind_guid(s, 1, v, len, gid);
      } else if (param == 3) {
        rc = att_bind_guid(s, 3, v, len, parent);
      } else if (param == 10) {
        if (base64_decode(s, v, len)) return -1;
        rc = sqlite3_bind_blob(s->att_upsert, 10, s->bytes.data, (int)s->bytes.len, SQLITE_STATIC);
        rc = rc == SQLITE_OK ? 0 : geoservices_store_fail_sqlite(s, rc, "bind");
      } else {
        rc = sqlite3_bind_text(s->att_upsert, param, v, (int)len, SQLITE_STATIC);
        rc = rc == SQLITE_OK ? 0 : geoservices_store_fail_sqlite(s, rc, "bind");
      }
    } else if (op == TAPE_INTEGER) {
      (*p)++;
      rc = sqlite3_bind_int64(s->att_upsert, param, geoservices_tape_i64(p));
      rc = rc == SQLITE_OK ? 0 : geoservices_store_fail_sqlite(s, rc, "bind");
    } else {
      (*p)++;
      rc = sqlite3_bind_double(s->att_upsert, param, geoservices_tape_f64(p));
      rc = rc == SQLITE_OK ? 0 : geoservices_store_fail_sqlite(s, rc, "bind");
    }
    if (rc) return -1;
  }
  if (!has_gid) return geoservices_store_fail(s, 0, "an attachment of layer %lld has no globalId", (long long)layer);
  rc = sqlite3_step(s->att_upsert);
  sqlite3_reset(s->att_upsert);
  if (rc != SQLITE_DONE) return geoservices_store_fail_sqlite(s, rc, "geoservices_attachments");
  return 0;
}

int geoservices_store_apply_attachment_delete(geoservices_store *s, int64_t layer, const char **p) {
  char text[40];
  uint32_t len;
  size_t n;
  int rc;
  const char *v;
  if (!geoservices_tape_is_string((unsigned char)**p))
    return geoservices_store_fail(s, 0, "a deleted attachment id of layer %lld is not a GlobalID", (long long)layer);
  if (prepare(s, ATT_REMOVE, &s->att_remove)) return -1;
  v = geoservices_tape_string(p, &len);
  n = geoservices_store_normalize_guid(v, len, text);
  rc = n ? sqlite3_bind_text(s->att_remove, 1, text, (int)n, SQLITE_STATIC)
         : sqlite3_bind_text(s->att_remove, 1, v, (int)len, SQLITE_STATIC);
  if (rc == SQLITE_OK) rc = sqlite3_step(s->att_remove);
  sqlite3_reset(s->att_remove);
  sqlite3_clear_bindings(s->att_remove);
  if (rc != SQLITE_DONE) return geoservices_store_fail_sqlite(s, rc, "geoservices_attachments");
  return 0;
}
