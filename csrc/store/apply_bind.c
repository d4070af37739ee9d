/* Binding one feature to its layer's upsert (apply.h): each value converted
 * for its column's type, the geometry blob (a curve may widen the column:
 * apply_curves.c), then the upsert, with its R-tree entry written by hand
 * inside apply (apply_rtree.c), and the delete by GlobalID. */
#include "store/apply_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/isotime.h"

/* ---- binding --------------------------------------------------------------- */

static char *scratch_of(geoservices_store_layer *l, size_t col) {
  return l->scratch + col * GEOSERVICES_STORE_SCRATCH;
}

static int bind_rc(geoservices_store *s, int rc) {
  if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, "bind");
  return 0;
}

void geoservices_store_bind_begin(geoservices_store_layer *l) {
  sqlite3_reset(l->upsert);
  sqlite3_clear_bindings(l->upsert);
  l->gid_bound = 0;
  l->gid_text = NULL;
  l->gid_len = 0;
  l->geom_bound = 0;
  memset(l->given, 0, l->ncols ? l->ncols : 1);
}

void geoservices_store_given(geoservices_store_layer *l, size_t col) {
  if (col < l->ncols) l->given[col] = 1;
}

int geoservices_store_bind_defaults(geoservices_store *s, geoservices_store_layer *l) {
  size_t i;
  for (i = 0; i < l->ncols; i++)
    if (!l->given[i] && l->defaults[i] && bind_rc(s, sqlite3_bind_value(l->upsert, (int)i + 1, l->defaults[i])))
      return -1;
  return 0;
}

int geoservices_store_bind_integer(geoservices_store *s, geoservices_store_layer *l, size_t col, int64_t v) {
  int param = (int)col + 1;
  char *text = scratch_of(l, col);
  size_t n;
  switch (l->cols[col].type) {
    case STORE_COL_DATE: /* any year: see isotime.h */
      n = geoservices_iso_from_ms(v, text);
      return bind_rc(s, sqlite3_bind_text(l->upsert, param, text, (int)n, SQLITE_STATIC));
    case STORE_COL_REAL:
      return bind_rc(s, sqlite3_bind_double(l->upsert, param, (double)v));
    case STORE_COL_TEXT:
    case STORE_COL_GUID:
      n = (size_t)snprintf(text, GEOSERVICES_STORE_SCRATCH, "%lld", (long long)v);
      return bind_rc(s, sqlite3_bind_text(l->upsert, param, text, (int)n, SQLITE_STATIC));
    default:
      break;
  }
  return bind_rc(s, sqlite3_bind_int64(l->upsert, param, v));
}

int geoservices_store_bind_double(geoservices_store *s, geoservices_store_layer *l, size_t col, double v) {
  int param = (int)col + 1;
  char *text = scratch_of(l, col);
  size_t n;
  switch (l->cols[col].type) {
    case STORE_COL_DATE:
    case STORE_COL_INTEGER:
      if (v >= -9.2e18 && v <= 9.2e18 && v == floor(v)) return geoservices_store_bind_integer(s, l, col, (int64_t)v);
      break;
    case STORE_COL_TEXT:
    case STORE_COL_GUID:
      n = (size_t)snprintf(text, GEOSERVICES_STORE_SCRATCH, "%.17g", v);
      return bind_rc(s, sqlite3_bind_text(l->upsert, param, text, (int)n, SQLITE_STATIC));
    default:
      break;
  }
  if (isnan(v)) return 0; /* NaN is SQL NULL */
  return bind_rc(s, sqlite3_bind_double(l->upsert, param, v));
}

int geoservices_store_bind_text(geoservices_store *s, geoservices_store_layer *l, size_t col, const char *v,
                                size_t len) {
  int param = (int)col + 1;
  if (len > 0x7fffffff) return geoservices_store_fail(s, SQLITE_TOOBIG, "a value of %zu bytes is too long", len);
  if (l->cols[col].type == STORE_COL_GUID) {
    char *text = scratch_of(l, col);
    size_t n = geoservices_store_normalize_guid(v, len, text);
    if (col == l->gid_col) l->gid_bound = 1;
    if (n) {
      if (col == l->gid_col) l->gid_text = text, l->gid_len = n;
      return bind_rc(s, sqlite3_bind_text(l->upsert, param, text, (int)n, SQLITE_STATIC));
    }
  } else if (col == l->gid_col) {
    l->gid_bound = 1;
  }
  if (col == l->gid_col) l->gid_text = v, l->gid_len = len;
  return bind_rc(s, sqlite3_bind_text(l->upsert, param, v, (int)len, SQLITE_STATIC));
}

static void extend(double env[4], const double e[4]) {
  if (isnan(e[0])) return;
  if (isnan(env[0])) {
    memcpy(env, e, 4 * sizeof *env);
    return;
  }
  if (e[0] < env[0]) env[0] = e[0];
  if (e[1] > env[1]) env[1] = e[1];
  if (e[2] < env[2]) env[2] = e[2];
  if (e[3] > env[3]) env[3] = e[3];
}

int geoservices_store_bind_geometry(geoservices_store *s, geoservices_store_layer *l) {
  double env[4];
  if (!l->geom_col || s->geom.kind == GEOM_NONE) return 0; /* stays NULL */
  geoservices_buf_reset(&s->blob);
  if (geoservices_geom_encode(&s->geom, l->srs_id, &s->blob, env))
    return geoservices_store_fail(s, SQLITE_NOMEM, "out of memory encoding a geometry");
  if (s->geom.has_arcs && !l->curves && geoservices_store_promote_to_curves(s, l, s->geom.kind)) return -1;
  extend(l->env, env);
  l->geom_bound = !isnan(env[0]);
  memcpy(l->geom_env, env, sizeof env);
  return bind_rc(s, sqlite3_bind_blob(l->upsert, (int)l->ncols + 1, s->blob.data, (int)s->blob.len, SQLITE_STATIC));
}

int geoservices_store_upsert(geoservices_store *s, geoservices_store_layer *l) {
  int rc;
  sqlite3_int64 fid;
  if (!l->gid_bound) {
    sqlite3_reset(l->upsert);
    return geoservices_store_fail(s, 0, "a feature of layer %lld has no %s", (long long)l->id,
                                  l->cols[l->gid_col].name);
  }
  rc = sqlite3_step(l->upsert);
  /* the upsert gives its row's fid back (an UPDATE sets no last insert rowid) */
  if (rc == SQLITE_ROW) {
    fid = sqlite3_column_int64(l->upsert, 0);
    rc = sqlite3_step(l->upsert);
  } else {
    fid = sqlite3_last_insert_rowid(s->db);
  }
  sqlite3_reset(l->upsert);
  if (rc != SQLITE_DONE) return geoservices_store_fail_sqlite(s, rc, l->table);
  l->touched = 1;
  if (s->bulk && l->rtree && l->geom_bound) { /* the insert trigger stood aside (see apply.h) */
    sqlite3_stmt *st;
    int k;
    if (l->rtree_state == 0 && geoservices_store_decide_rtree(s, l)) return -1;
    if (l->rtree_state > 0) return 0; /* packed at the flush */
    st = l->rtree;
    sqlite3_bind_int64(st, 1, fid);
    for (k = 0; k < 4; k++) sqlite3_bind_double(st, k + 2, l->geom_env[k]);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) return geoservices_store_fail_sqlite(s, rc, "R-tree");
  }
  return 0;
}

int geoservices_store_remove_with(geoservices_store *s, geoservices_store_layer *l, sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (rc != SQLITE_DONE) return geoservices_store_fail_sqlite(s, rc, l->table);
  l->touched = 1;
  return sqlite3_changes(s->db);
}

int geoservices_store_remove(geoservices_store *s, geoservices_store_layer *l, const char *gid, size_t len) {
  char text[40];
  size_t n = geoservices_store_normalize_guid(gid, len, text);
  int rc;
  if (len > 0x7fffffff) return geoservices_store_fail(s, SQLITE_TOOBIG, "a GlobalID of %zu bytes", len);
  rc = n ? sqlite3_bind_text(l->remove, 1, text, (int)n, SQLITE_STATIC)
         : sqlite3_bind_text(l->remove, 1, gid, (int)len, SQLITE_STATIC);
  if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, "bind");
  rc = geoservices_store_remove_with(s, l, l->remove);
  if (rc > 0 && l->originals) {
    l->gid_text = n ? text : gid;
    l->gid_len = n ? n : len;
    if (geoservices_store_keep_original(s, l, NULL, 0)) rc = -1;
    l->gid_text = NULL;
  }
  return rc;
}
