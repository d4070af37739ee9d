/* The store's record dispatcher (apply.h: geoservices_store_apply): the
 * records of a tape dispatched to the feature tables (features, deletes), to
 * the attachments' table, or to the caller's callback, and those waiting for
 * their layer's id replayed when it comes. It stands on the other apply_*.c
 * files (layers, binding, geometry, attachments, R-tree) and on apply.c's
 * base; none of them calls back into it. */
#include "store/apply_internal.h"

#include <string.h>

/* ---- reading records off the tape ----------------------------------------- */

/* One value of an attribute into its column. */
static int bind_tape_value(geoservices_store *s, geoservices_store_layer *l, size_t col, const char **p) {
  int op = (unsigned char)**p;
  uint32_t len;
  switch (op) {
    case TAPE_STRING:
    case TAPE_STRING_ID: {
      const char *v = geoservices_tape_string(p, &len);
      return geoservices_store_bind_text(s, l, col, v, len);
    }
    case TAPE_INTEGER:
      (*p)++;
      return geoservices_store_bind_integer(s, l, col, geoservices_tape_i64(p));
    case TAPE_DOUBLE:
      (*p)++;
      return geoservices_store_bind_double(s, l, col, geoservices_tape_f64(p));
    case TAPE_TRUE:
    case TAPE_FALSE:
      (*p)++;
      return geoservices_store_bind_integer(s, l, col, op == TAPE_TRUE);
    default: /* null stays NULL; an object or array is not a column value */
      *p = geoservices_tape_skip(*p);
      return 0;
  }
}


/* Notes an attribute name the layer's table has no column for, once (as
 * many names as fit in l->unknown): the store tells the user what it drops. */
static void note_unknown(geoservices_store_layer *l, const char *name, size_t len) {
  const char *at = l->unknown, *end = l->unknown + l->unknown_len;
  if (len == 0 || l->unknown_len + len + 1 > sizeof l->unknown) return;
  while (at < end) {
    const char *nl = memchr(at, '\n', (size_t)(end - at));
    size_t n = nl ? (size_t)(nl - at) : (size_t)(end - at);
    if (n == len && memcmp(at, name, len) == 0) return;
    at += n + 1;
  }
  memcpy(l->unknown + l->unknown_len, name, len);
  l->unknown_len += len;
  l->unknown[l->unknown_len++] = '\n';
}

static int apply_feature(geoservices_store *s, geoservices_store_layer *l, const char **p) {
  uint32_t n, i, len, m, j;
  const char *geometry = NULL; /* where its geometry is on the tape */
  if ((unsigned char)**p != TAPE_OBJECT)
    return geoservices_store_fail(s, 0, "a feature of layer %lld is not an object", (long long)l->id);
  (*p)++;
  n = geoservices_tape_u32(p);
  geoservices_store_bind_begin(l);
  geoservices_geom_reset(&s->geom, GEOM_NONE);
  for (i = 0; i < n; i++) {
    const char *key = geoservices_tape_key(p, &len);
    int op = (unsigned char)**p;
    if (op == TAPE_OBJECT && geoservices_store_key_is(key, len, "attributes")) {
      (*p)++;
      m = geoservices_tape_u32(p);
      for (j = 0; j < m; j++) {
        uint32_t name_len;
        const char *name = geoservices_tape_key(p, &name_len);
        size_t col;
        col = geoservices_store_find_column(l, name, name_len, j);
        if (col == GEOSERVICES_STORE_NONE) { /* not a column: dropped, its name noted */
          note_unknown(l, name, name_len);
          *p = geoservices_tape_skip(*p);
        } else if (bind_tape_value(s, l, col, p)) return -1;
      }
    } else if (op == TAPE_OBJECT && geoservices_store_key_is(key, len, "geometry") && l->geom_col) {
      geometry = *p;
      if (geoservices_store_tape_geometry(s, l, p) || geoservices_store_bind_geometry(s, l)) return -1;
    } else {
      *p = geoservices_tape_skip(*p);
    }
  }
  if (geoservices_store_upsert(s, l)) return -1;
  if (geometry && s->geom.inexact && s->geom.kind != GEOM_NONE) { /* the blob is not the JSON: kept beside it */
    geoservices_buf_reset(&s->json);
    if (geoservices_store_tape_json(&geometry, &s->json))
      return geoservices_store_fail(s, SQLITE_NOMEM, "out of memory");
    return geoservices_store_keep_original(s, l, s->json.data, s->json.len);
  }
  return l->originals ? geoservices_store_keep_original(s, l, NULL, 0) : 0;
}

static int apply_delete(geoservices_store *s, geoservices_store_layer *l, const char **p) {
  int op = (unsigned char)**p;
  uint32_t len;
  if (geoservices_tape_is_string(op)) {
    const char *v = geoservices_tape_string(p, &len);
    return geoservices_store_remove(s, l, v, len) < 0 ? -1 : 0;
  }
  if (op == TAPE_INTEGER && l->remove_oid) { /* an OBJECTID, from a server that sends them */
    int rc;
    (*p)++;
    rc = sqlite3_bind_int64(l->remove_oid, 1, geoservices_tape_i64(p));
    if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, "bind");
    return geoservices_store_remove_with(s, l, l->remove_oid) < 0 ? -1 : 0;
  }
  return geoservices_store_fail(s, 0, "a deleted id of layer %lld is not a GlobalID", (long long)l->id);
}

/* ---- records --------------------------------------------------------------- */

/* One record whose layer (if any) is known. *p is at its value. */
static int apply_record(geoservices_store *s, int kind, int has_layer, int64_t layer, const char *key,
                        uint32_t key_len, const char **p, geoservices_store_other_fn other, void *ctx) {
  geoservices_store_layer *l = NULL;
  int rc;
  switch (kind) {
    case RECORD_ADD:
    case RECORD_UPDATE:
    case RECORD_DELETE:
      l = geoservices_store_layer_of(s, layer);
      if (!l) return geoservices_store_fail(s, 0, "layer %lld of the result is not in the store", (long long)layer);
      rc = kind == RECORD_DELETE ? apply_delete(s, l, p) : apply_feature(s, l, p);
      break;
    case RECORD_ADD_ATTACHMENT:
    case RECORD_UPDATE_ATTACHMENT:
      rc = geoservices_store_apply_attachment(s, layer, p);
      break;
    case RECORD_DELETE_ATTACHMENT:
      rc = geoservices_store_apply_attachment_delete(s, layer, p);
      break;
    default:
      rc = other ? other(ctx, kind, has_layer, layer, *p, key, key_len) : 0;
      *p = geoservices_tape_skip(*p);
      return rc;
  }
  if (rc == 0) {
    s->applied[kind]++;
    if (kind == RECORD_ADD) l->adds++;
    else if (kind == RECORD_ADD_ATTACHMENT && (l = geoservices_store_layer_of(s, layer)) != NULL) l->attachment_adds++;
  }
  return rc;
}

/* Replaying the records that waited for their layer's id. */
typedef struct replay_ctx {
  geoservices_store *s;
  geoservices_store_cursor *c;
  geoservices_store_other_fn other;
  void *ctx;
  int failed; /* the apply failed (not the spool): its message is set */
} replay_ctx;

static int apply_tape(geoservices_store *s, geoservices_store_cursor *c, const char *tape, size_t len,
                      geoservices_store_other_fn other, void *ctx, int replaying);

static int replay_waiting(void *arg, const char *rec, size_t len) {
  replay_ctx *r = (replay_ctx *)arg;
  int rc = apply_tape(r->s, r->c, rec, len, r->other, r->ctx, 1);
  if (rc) r->failed = 1;
  return rc;
}

static int fail_spool(geoservices_store *s) {
  if (s->waiting.error == 0) return geoservices_store_fail(s, SQLITE_NOMEM, "out of memory");
  return geoservices_store_fail(s, SQLITE_IOERR, "records waiting for their layer's id: %s",
                                strerror(s->waiting.error));
}

static int apply_tape(geoservices_store *s, geoservices_store_cursor *c, const char *tape, size_t len,
                      geoservices_store_other_fn other, void *ctx, int replaying) {
  const char *p = tape, *end;
  int rc;
  if (len == 0) return 0; /* the extractor may not even have a tape yet */
  end = tape + len;
  while (p < end) {
    const char *start = p;
    int op = (unsigned char)*p++;
    if (op == TAPE_RECORD) {
      geoservices_tape_record h = geoservices_tape_record_header(&p);
      if (h.kind >= RECORD_KIND_COUNT) return geoservices_store_fail(s, 0, "corrupt record tape (kind %d)", h.kind);
      if (h.entry < 0) {
        rc = apply_record(s, h.kind, 0, 0, h.key, h.key_len, &p, other, ctx);
      } else if (c->has_id && c->id_entry == h.entry) {
        rc = apply_record(s, h.kind, 1, c->layer_id, h.key, h.key_len, &p, other, ctx);
      } else if (replaying) {
        return geoservices_store_fail(s, 0, "corrupt record tape (a waiting record)");
      } else { /* its layer entry's id comes later: the record waits for it (store/spool.h) */
        p = geoservices_tape_skip(p);
        if (geoservices_spool_put(&s->waiting, start, (size_t)(p - start))) return fail_spool(s);
        rc = 0;
      }
      if (rc) return rc;
    } else if (op == TAPE_LAYER_ID && !replaying) {
      c->id_entry = geoservices_tape_i64(&p);
      c->layer_id = geoservices_tape_i64(&p);
      c->has_id = 1;
      if (other && (rc = other(ctx, GEOSERVICES_STORE_LAYER, 1, c->layer_id, NULL, NULL, 0)) != 0) return rc;
      if (s->waiting.count) {
        replay_ctx r;
        r.s = s;
        r.c = c;
        r.other = other;
        r.ctx = ctx;
        r.failed = 0;
        rc = geoservices_spool_replay(&s->waiting, replay_waiting, &r);
        if (rc && !r.failed) return fail_spool(s);
        if (rc) return rc;
      }
    } else if (op == TAPE_ENTRY_END && !replaying) {
      int64_t entry = geoservices_tape_i64(&p);
      if (s->waiting.count && !(c->has_id && c->id_entry == entry)) {
        geoservices_spool_drop(&s->waiting);
        return geoservices_store_fail(s, 0, "a layer entry of edits has records but no integer id");
      }
    } else {
      return geoservices_store_fail(s, 0, "corrupt record tape (op %d)", op);
    }
  }
  return 0;
}

int geoservices_store_apply(geoservices_store *s, geoservices_store_cursor *cursor, const char *tape, size_t len,
                            geoservices_store_other_fn other, void *ctx) {
  int rc;
  s->rc = 0;
  s->message[0] = '\0';
  s->bulk = 1;
  rc = apply_tape(s, cursor, tape, len, other, ctx, 0);
  s->bulk = 0;
  return rc;
}
