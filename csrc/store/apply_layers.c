/* The layers the store applies to (apply.h): their columns, the DEFAULTs and
 * geometry column flags read from the file, and their statements prepared
 * (the upsert keeping the local fid, deletes by GlobalID and by OBJECTID, the
 * R-tree insert). */
#include "store/apply_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- layers ---------------------------------------------------------------- */

void geoservices_store_free_layer(geoservices_store_layer *l) {
  size_t i;
  if (!l) return;
  sqlite3_finalize(l->replace);
  sqlite3_finalize(l->insert_new);
  sqlite3_finalize(l->remove);
  sqlite3_finalize(l->remove_oid);
  sqlite3_finalize(l->rtree);
  free(l->rtree_name);
  for (i = 0; i < l->ncols; i++) {
    free(l->cols[i].name);
    if (l->defaults) sqlite3_value_free(l->defaults[i]);
  }
  free(l->defaults);
  free(l->given);
  free(l->cols);
  free(l->guess);
  free(l->scratch);
  free(l->table);
  free(l->geom_col);
  free(l);
}

static char *dup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* "name" with inner quotes doubled, appended. */
static int put_ident(geoservices_buf *b, const char *name) {
  if (geoservices_buf_putc(b, '"')) return -1;
  for (; *name; name++) {
    if (*name == '"' && geoservices_buf_putc(b, '"')) return -1;
    if (geoservices_buf_putc(b, *name)) return -1;
  }
  return geoservices_buf_putc(b, '"');
}

static int put_str(geoservices_buf *b, const char *s) {
  return geoservices_buf_append(b, s, strlen(s));
}

int geoservices_store_put_gid_match(geoservices_buf *b, const geoservices_store_layer *l, size_t param) {
  char num[24];
  snprintf(num, sizeof num, " = ?%zu", param);
  return put_ident(b, l->cols[l->gid_col].name) | put_str(b, num);
}

/* The table's INTEGER PRIMARY KEY when it is none of the layer's columns
 * (the GeoPackage fid, local: the server's OBJECTID is a column of its own),
 * malloc'ed; NULL when the key is a layer column (or there is none). */
static char *local_fid(geoservices_store *s, geoservices_store_layer *l) {
  sqlite3_stmt *st = NULL;
  char *name = NULL;
  if (sqlite3_prepare_v2(s->db, "SELECT name FROM pragma_table_info(?1) WHERE pk = 1 AND upper(type) = 'INTEGER' "
                         "AND NOT EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE pk > 1)", -1, &st, NULL) != SQLITE_OK)
    return NULL;
  sqlite3_bind_text(st, 1, l->table, -1, SQLITE_STATIC);
  if (sqlite3_step(st) == SQLITE_ROW) {
    const char *text = (const char *)sqlite3_column_text(st, 0);
    if (text && geoservices_store_find_column(l, text, strlen(text), GEOSERVICES_STORE_NONE) == GEOSERVICES_STORE_NONE)
      name = dup(text);
  }
  sqlite3_finalize(st);
  return name;
}

/* INSERT INTO t ([fid, ]columns..., geometry) VALUES (...): the replace
 * writes over the row of its GlobalID under its local fid (when the table
 * has one), the one QGIS knows it by, as an upsert of the server's columns
 * only (ON CONFLICT(fid) DO UPDATE ... RETURNING fid): a column the user
 * added to the table (a local-only field, QGIS's "add field") keeps its
 * value; without a local fid, INSERT OR REPLACE. The plain insert (fid
 * NULL: filling) takes the next. */
static int upsert_tail(geoservices_buf *sql, const geoservices_store_layer *l, const char *fid) {
  size_t i;
  int err = put_str(sql, " ON CONFLICT(") | put_ident(sql, fid) | put_str(sql, ") DO UPDATE SET ");
  for (i = 0; i < l->ncols + (l->geom_col != NULL); i++) {
    const char *name = i < l->ncols ? l->cols[i].name : l->geom_col;
    err |= (i ? put_str(sql, ", ") : 0) | put_ident(sql, name) | put_str(sql, " = excluded.") | put_ident(sql, name);
  }
  return err | put_str(sql, " RETURNING ") | put_ident(sql, fid);
}

static int insert_sql(geoservices_buf *sql, const geoservices_store_layer *l, const char *fid, int replace) {
  char num[24];
  size_t i;
  int err = put_str(sql, replace && !fid ? "INSERT OR REPLACE INTO " : "INSERT INTO ") | put_ident(sql, l->table) |
            put_str(sql, " (");
  if (fid) err |= put_ident(sql, fid) | put_str(sql, ", ");
  for (i = 0; i < l->ncols; i++) err |= (i ? put_str(sql, ", ") : 0) | put_ident(sql, l->cols[i].name);
  if (l->geom_col) err |= (l->ncols ? put_str(sql, ", ") : 0) | put_ident(sql, l->geom_col);
  err |= put_str(sql, ") VALUES (");
  if (fid)
    err |= put_str(sql, "(SELECT ") | put_ident(sql, fid) | put_str(sql, " FROM ") | put_ident(sql, l->table) |
           put_str(sql, " WHERE ") | geoservices_store_put_gid_match(sql, l, l->gid_col + 1) | put_str(sql, "), ");
  for (i = 0; i < l->ncols + (l->geom_col != NULL); i++) {
    snprintf(num, sizeof num, "%s?%zu", i ? ", " : "", i + 1);
    err |= put_str(sql, num);
  }
  err |= put_str(sql, ")");
  if (replace && fid) err |= upsert_tail(sql, l, fid);
  return err | geoservices_buf_putc(sql, '\0');
}

static int prepare_layer(geoservices_store *s, geoservices_store_layer *l) {
  geoservices_buf sql;
  int rc = 0, err = 0;
  char *fid = local_fid(s, l);
  geoservices_buf_init(&sql, 0);
  err |= insert_sql(&sql, l, fid, 1);
  free(fid);
  if (!err) rc = sqlite3_prepare_v3(s->db, sql.data, -1, SQLITE_PREPARE_PERSISTENT, &l->replace, NULL);
  if (!err && rc == SQLITE_OK) {
    geoservices_buf_reset(&sql);
    err |= insert_sql(&sql, l, NULL, 0);
    if (!err) rc = sqlite3_prepare_v3(s->db, sql.data, -1, SQLITE_PREPARE_PERSISTENT, &l->insert_new, NULL);
  }
  l->upsert = s->filling ? l->insert_new : l->replace;
  if (!err && rc == SQLITE_OK) {
    geoservices_buf_reset(&sql);
    err |= put_str(&sql, "DELETE FROM ") | put_ident(&sql, l->table) | put_str(&sql, " WHERE ") |
           geoservices_store_put_gid_match(&sql, l, 1) | geoservices_buf_putc(&sql, '\0');
    if (!err) rc = sqlite3_prepare_v3(s->db, sql.data, -1, SQLITE_PREPARE_PERSISTENT, &l->remove, NULL);
  }
  if (!err && rc == SQLITE_OK && l->oid_col != GEOSERVICES_STORE_NONE) {
    geoservices_buf_reset(&sql);
    err |= put_str(&sql, "DELETE FROM ") | put_ident(&sql, l->table) | put_str(&sql, " WHERE ") |
           put_ident(&sql, l->cols[l->oid_col].name) | put_str(&sql, " = ?1") | geoservices_buf_putc(&sql, '\0');
    if (!err) rc = sqlite3_prepare_v3(s->db, sql.data, -1, SQLITE_PREPARE_PERSISTENT, &l->remove_oid, NULL);
  }
  if (!err && rc == SQLITE_OK && l->geom_col) { /* the R-tree of the GeoPackage extension, if there is one */
    geoservices_buf reg;
    geoservices_buf_init(&reg, 0);
    err |= put_str(&reg, "rtree_") | put_str(&reg, l->table) | put_str(&reg, "_") | put_str(&reg, l->geom_col) |
           geoservices_buf_putc(&reg, '\0');
    geoservices_buf_reset(&sql);
    err |= err || put_str(&sql, "INSERT OR REPLACE INTO ") || put_ident(&sql, reg.data) ||
           put_str(&sql, " VALUES (?1, ?2, ?3, ?4, ?5)") || geoservices_buf_putc(&sql, '\0');
    /* no such table: the layer has no spatial index to keep */
    if (!err && sqlite3_prepare_v3(s->db, sql.data, -1, SQLITE_PREPARE_PERSISTENT, &l->rtree, NULL) != SQLITE_OK)
      l->rtree = NULL;
    if (!err && l->rtree) {
      l->rtree_name = dup(reg.data);
      err |= !l->rtree_name;
    }
    geoservices_buf_free(&reg);
  }
  geoservices_buf_free(&sql);
  if (err) return geoservices_store_fail(s, SQLITE_NOMEM, "out of memory");
  if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, l->table);
  return 0;
}

/* The geometry column's z and m flags (0 prohibited, 1 mandatory, 2
 * optional): its blobs carry Z / M for 1 and 2; and whether its type takes
 * curves already. 2D without the table or row (a store made by hand, as the
 * C tests do). */
void geoservices_store_read_dims(geoservices_store *s, geoservices_store_layer *l) {
  sqlite3_stmt *st = NULL;
  l->has_z = l->has_m = 0;
  l->curves = 0;
  if (!l->geom_col || sqlite3_prepare_v2(s->db, "SELECT z, m FROM gpkg_geometry_columns WHERE table_name = ?1 "
                                         "AND column_name = ?2", -1, &st, NULL) != SQLITE_OK)
    return;
  sqlite3_bind_text(st, 1, l->table, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, l->geom_col, -1, SQLITE_STATIC);
  if (sqlite3_step(st) == SQLITE_ROW) {
    l->has_z = sqlite3_column_int(st, 0) > 0;
    l->has_m = sqlite3_column_int(st, 1) > 0;
  }
  sqlite3_finalize(st);
  if (sqlite3_prepare_v2(s->db, "SELECT upper(geometry_type_name) NOT IN ('POINT', 'LINESTRING', 'POLYGON', "
                         "'MULTIPOINT', 'MULTILINESTRING', 'MULTIPOLYGON') FROM gpkg_geometry_columns "
                         "WHERE table_name = ?1 AND column_name = ?2", -1, &st, NULL) != SQLITE_OK)
    return;
  sqlite3_bind_text(st, 1, l->table, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, l->geom_col, -1, SQLITE_STATIC);
  if (sqlite3_step(st) == SQLITE_ROW) l->curves = sqlite3_column_int(st, 0) != 0;
  sqlite3_finalize(st);
}

/* Each column's DEFAULT (PRAGMA table_info), evaluated once into a value. */
static int read_defaults(geoservices_store *s, geoservices_store_layer *l) {
  sqlite3_stmt *st = NULL, *eval = NULL;
  int rc = sqlite3_prepare_v2(s->db, "SELECT name, dflt_value FROM pragma_table_info(?1)", -1, &st, NULL);
  if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, l->table);
  sqlite3_bind_text(st, 1, l->table, -1, SQLITE_STATIC);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 0), *dflt = (const char *)sqlite3_column_text(st, 1);
    size_t col;
    char *sql;
    if (!name || !dflt) continue;
    col = geoservices_store_find_column(l, name, strlen(name), GEOSERVICES_STORE_NONE);
    if (col == GEOSERVICES_STORE_NONE || l->defaults[col]) continue;
    sql = sqlite3_mprintf("SELECT %s", dflt);
    if (!sql) break;
    rc = sqlite3_prepare_v2(s->db, sql, -1, &eval, NULL);
    sqlite3_free(sql);
    if (rc != SQLITE_OK) continue; /* not an expression of its own: SQLite still applies it when a column is left out */
    if (sqlite3_step(eval) == SQLITE_ROW) l->defaults[col] = sqlite3_value_dup(sqlite3_column_value(eval, 0));
    sqlite3_finalize(eval);
    eval = NULL;
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return rc == SQLITE_ROW ? geoservices_store_fail(s, SQLITE_NOMEM, "out of memory")
                                                 : geoservices_store_fail_sqlite(s, rc, "a column's default");
  return 0;
}

geoservices_store_layer *geoservices_store_layer_of(const geoservices_store *s, int64_t id) {
  size_t i;
  for (i = 0; i < s->nlayers; i++)
    if (s->layers[i]->id == id) return s->layers[i];
  return NULL;
}

geoservices_store_layer *geoservices_store_add_layer(geoservices_store *s, int64_t id, const char *table,
                                                     const char *geom_col, int geom_kind, int32_t srs_id,
                                                     const char *const *names, const int *types, size_t ncols,
                                                     size_t gid_col, size_t oid_col) {
  geoservices_store_layer *l;
  size_t i;
  if (gid_col >= ncols || (oid_col != GEOSERVICES_STORE_NONE && oid_col >= ncols)) {
    geoservices_store_fail(s, 0, "layer %lld: the GlobalID and OBJECTID must be columns", (long long)id);
    return NULL;
  }
  l = calloc(1, sizeof *l);
  if (!l) goto oom;
  l->id = id;
  l->geom_kind = geom_kind;
  l->srs_id = srs_id;
  l->gid_col = gid_col;
  l->oid_col = oid_col;
  l->env[0] = l->env[1] = l->env[2] = l->env[3] = NAN;
  l->table = dup(table);
  l->geom_col = geom_col ? dup(geom_col) : NULL;
  l->cols = calloc(ncols ? ncols : 1, sizeof *l->cols);
  l->scratch = malloc((ncols ? ncols : 1) * GEOSERVICES_STORE_SCRATCH);
  l->defaults = calloc(ncols ? ncols : 1, sizeof *l->defaults);
  l->given = calloc(ncols ? ncols : 1, 1);
  if (!l->table || (geom_col && !l->geom_col) || !l->cols || !l->scratch || !l->defaults || !l->given) goto oom;
  l->ncols = ncols;
  for (i = 0; i < ncols; i++) {
    l->cols[i].name = dup(names[i]);
    if (!l->cols[i].name) goto oom;
    l->cols[i].len = strlen(names[i]);
    l->cols[i].type = types[i];
  }
  if (prepare_layer(s, l)) {
    geoservices_store_free_layer(l);
    return NULL;
  }
  geoservices_store_read_dims(s, l);
  geoservices_store_read_originals(s, l);
  if (read_defaults(s, l)) {
    geoservices_store_free_layer(l);
    return NULL;
  }
  for (i = 0; i < s->nlayers; i++) {
    if (s->layers[i]->id == id) { /* registered again: the new one wins */
      geoservices_store_free_layer(s->layers[i]);
      s->layers[i] = l;
      return l;
    }
  }
  if (s->nlayers == s->layer_cap) {
    size_t cap = s->layer_cap ? 2 * s->layer_cap : 8;
    geoservices_store_layer **q = realloc(s->layers, cap * sizeof *q);
    if (!q) goto oom;
    s->layers = q;
    s->layer_cap = cap;
  }
  s->layers[s->nlayers++] = l;
  return l;
oom:
  geoservices_store_free_layer(l);
  geoservices_store_fail(s, SQLITE_NOMEM, "out of memory");
  return NULL;
}

void geoservices_store_set_filling(geoservices_store *s, int on) {
  size_t i;
  s->filling = on != 0;
  for (i = 0; i < s->nlayers; i++) s->layers[i]->upsert = on ? s->layers[i]->insert_new : s->layers[i]->replace;
}
