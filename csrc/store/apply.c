#include "store/apply.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/isotime.h"
#include "store/rtree.h"

/* ---- errors ---------------------------------------------------------------- */

static int fail(geoservices_store *s, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->message, sizeof s->message, fmt, ap);
  va_end(ap);
  s->rc = rc;
  return -1;
}

static int fail_sqlite(geoservices_store *s, int rc, const char *what) {
  return fail(s, rc, "%s: %s", what, sqlite3_errmsg(s->db));
}

/* ---- the tape -------------------------------------------------------------- */

static int key_is(const char *key, uint32_t len, const char *name) {
  return len == strlen(name) && memcmp(key, name, len) == 0;
}

static int key_is_ci(const char *key, uint32_t len, const char *name) {
  uint32_t i;
  if (len != strlen(name)) return 0;
  for (i = 0; i < len; i++) {
    char a = key[i], b = name[i];
    if (a >= 'A' && a <= 'Z') a = (char)(a - 'A' + 'a');
    if (b >= 'A' && b <= 'Z') b = (char)(b - 'A' + 'a');
    if (a != b) return 0;
  }
  return 1;
}

/* A number on the tape (integers become doubles); 0 if the value is not one.
 * Advances past the value either way. */
static int tape_number(const char **p, double *d) {
  int op = (unsigned char)**p;
  if (op == TAPE_INTEGER) {
    (*p)++;
    *d = (double)geoservices_tape_i64(p);
    return 1;
  }
  if (op == TAPE_DOUBLE) {
    (*p)++;
    *d = geoservices_tape_f64(p);
    return 1;
  }
  *p = geoservices_tape_skip(*p);
  return 0;
}

/* ---- GUIDs ----------------------------------------------------------------- */

static int is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

size_t geoservices_store_normalize_guid(const char *s, size_t len, char out[40]) {
  size_t i;
  if (len == 38 && s[0] == '{' && s[37] == '}') {
    s++;
    len = 36;
  }
  if (len != 36) return 0;
  for (i = 0; i < 36; i++) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-') return 0;
    } else if (!is_hex(s[i])) {
      return 0;
    }
  }
  out[0] = '{';
  for (i = 0; i < 36; i++) out[i + 1] = (char)(s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 'A' : s[i]);
  out[37] = '}';
  out[38] = '\0';
  return 38;
}

/* ---- binding --------------------------------------------------------------- */

static char *scratch_of(geoservices_store_layer *l, size_t col) {
  return l->scratch + col * GEOSERVICES_STORE_SCRATCH;
}

static int bind_rc(geoservices_store *s, int rc) {
  if (rc != SQLITE_OK) return fail_sqlite(s, rc, "bind");
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

size_t geoservices_store_find_column(geoservices_store_layer *l, const char *name, size_t len, size_t position) {
  size_t i, g;
  if (position < l->guess_cap) { /* records list their attributes in the same order */
    g = l->guess[position];
    if (g < l->ncols && l->cols[g].len == len && memcmp(l->cols[g].name, name, len) == 0) return g;
  }
  for (i = 0; i < l->ncols; i++)
    if (l->cols[i].len == len && memcmp(l->cols[i].name, name, len) == 0) break;
  if (i == l->ncols) /* field names are case-insensitive on the server */
    for (i = 0; i < l->ncols; i++)
      if (key_is_ci(name, (uint32_t)len, l->cols[i].name)) break;
  if (i == l->ncols) return GEOSERVICES_STORE_NONE;
  if (position == GEOSERVICES_STORE_NONE || position > (1u << 20)) return i; /* no order to learn */
  if (position >= l->guess_cap) {
    size_t cap = l->guess_cap ? l->guess_cap : 32, k;
    size_t *q;
    while (cap <= position) cap *= 2;
    q = realloc(l->guess, cap * sizeof *q);
    if (!q) return i; /* the guess is only a shortcut */
    for (k = l->guess_cap; k < cap; k++) q[k] = GEOSERVICES_STORE_NONE;
    l->guess = q;
    l->guess_cap = cap;
  }
  l->guess[position] = i;
  return i;
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
  if (len > 0x7fffffff) return fail(s, SQLITE_TOOBIG, "a value of %zu bytes is too long", len);
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

/* ---- curve columns (apply.h) ---------------------------------------------- */

static void read_dims(geoservices_store *s, geoservices_store_layer *l);

static const char *const CURVE_LINE_TYPES[] = {"CIRCULARSTRING", "COMPOUNDCURVE", "MULTICURVE", NULL};
static const char *const CURVE_AREA_TYPES[] = {"CIRCULARSTRING", "COMPOUNDCURVE", "CURVEPOLYGON", "MULTISURFACE",
                                               NULL};

/* The column's declared type in the table's CREATE statement (12-128r18
 * requirement 31: the same as gpkg_geometry_columns'). SQLite has no ALTER
 * for a column's type; its documented writable_schema procedure edits the
 * CREATE text in sqlite_schema inside the transaction and bumps
 * schema_version, so that every connection (QGIS, GDAL) reads the schema
 * again, and a rollback undoes it with the rest. Sound here because nothing
 * stored changes meaning: MULTILINESTRING, MULTIPOLYGON, MULTICURVE and
 * MULTISURFACE all have NUMERIC affinity (and blobs are never converted).
 * Only the declaration the store itself wrote ("geom" MULTILINESTRING) is
 * replaced; a table declared otherwise is left as it is. */
static int declare_column(geoservices_store *s, geoservices_store_layer *l, const char *from, const char *to) {
  sqlite3_stmt *st = NULL;
  char *old_decl = sqlite3_mprintf("\"%w\" %s", l->geom_col, from);
  char *new_decl = sqlite3_mprintf("\"%w\" %s", l->geom_col, to);
  char *sql = NULL, *bump = NULL;
  int rc = SQLITE_NOMEM, version = -1, found = 0;
  if (!old_decl || !new_decl) goto done;
  rc = sqlite3_prepare_v2(s->db, "SELECT instr(sql, ?1) > 0, replace(sql, ?1, ?2), "
                          "(SELECT schema_version FROM pragma_schema_version) FROM sqlite_master "
                          "WHERE type = 'table' AND name = ?3", -1, &st, NULL);
  if (rc != SQLITE_OK) goto done;
  sqlite3_bind_text(st, 1, old_decl, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, new_decl, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, l->table, -1, SQLITE_STATIC);
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW && sqlite3_column_int(st, 0)) {
    found = 1;
    sql = sqlite3_mprintf("%s", (const char *)sqlite3_column_text(st, 1));
    version = sqlite3_column_int(st, 2);
  }
  rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
  sqlite3_finalize(st);
  st = NULL;
  if (rc != SQLITE_OK || !found) goto done;
  bump = sqlite3_mprintf("PRAGMA schema_version = %d", version + 1);
  if (!sql || !bump) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  if (sqlite3_exec(s->db, "PRAGMA writable_schema = ON", NULL, NULL, NULL) != SQLITE_OK) goto done; /* refused */
  rc = sqlite3_prepare_v2(s->db, "UPDATE sqlite_master SET sql = ?1 WHERE type = 'table' AND name = ?2", -1, &st,
                          NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(st, 1, sql, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, l->table, -1, SQLITE_STATIC);
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(s->db);
    sqlite3_finalize(st);
  }
  if (rc == SQLITE_OK) rc = sqlite3_exec(s->db, bump, NULL, NULL, NULL);
  sqlite3_exec(s->db, "PRAGMA writable_schema = OFF", NULL, NULL, NULL);
done:
  sqlite3_free(old_decl);
  sqlite3_free(new_decl);
  sqlite3_free(sql);
  sqlite3_free(bump);
  if (rc != SQLITE_OK) return fail_sqlite(s, rc, l->table);
  return 0;
}

/* The layer's column becomes MULTICURVE (lines) or MULTISURFACE (polygons),
 * with the extension rows of the curve types its blobs hold. A store
 * without the GeoPackage tables (the C tests') just takes the blobs. */
static int promote_to_curves(geoservices_store *s, geoservices_store_layer *l, int kind) {
  const char *const *types = kind == GEOM_POLYGON ? CURVE_AREA_TYPES : CURVE_LINE_TYPES;
  const char *to = kind == GEOM_POLYGON ? "MULTISURFACE" : "MULTICURVE";
  sqlite3_stmt *st = NULL;
  char from[32] = "";
  int rc, i;
  l->curves = l->promoted = 1;
  rc = sqlite3_prepare_v2(s->db, "SELECT upper(geometry_type_name) FROM gpkg_geometry_columns WHERE table_name = ?1 "
                          "AND column_name = ?2", -1, &st, NULL);
  if (rc != SQLITE_OK) return 0; /* no such table */
  sqlite3_bind_text(st, 1, l->table, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, l->geom_col, -1, SQLITE_STATIC);
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
    snprintf(from, sizeof from, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  if (strcmp(from, "MULTILINESTRING") && strcmp(from, "MULTIPOLYGON") && strcmp(from, "LINESTRING") &&
      strcmp(from, "POLYGON"))
    return 0; /* a wider type already (or none): the blobs fit */
  if (declare_column(s, l, from, to)) return -1;
  rc = sqlite3_prepare_v2(s->db, "UPDATE gpkg_geometry_columns SET geometry_type_name = ?1 WHERE table_name = ?2 "
                          "AND column_name = ?3", -1, &st, NULL);
  if (rc != SQLITE_OK) return fail_sqlite(s, rc, "gpkg_geometry_columns");
  sqlite3_bind_text(st, 1, to, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, l->table, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, l->geom_col, -1, SQLITE_STATIC);
  rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return fail_sqlite(s, rc, "gpkg_geometry_columns");
  rc = sqlite3_prepare_v2(s->db, "INSERT OR IGNORE INTO gpkg_extensions (table_name, column_name, extension_name, "
                          "definition, scope) VALUES (?1, ?2, 'gpkg_geom_' || ?3, "
                          "'http://www.geopackage.org/spec120/#extension_geometry_types', 'read-write')",
                          -1, &st, NULL);
  if (rc != SQLITE_OK) return 0;
  for (i = 0; types[i] && rc != -1; i++) {
    sqlite3_bind_text(st, 1, l->table, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, l->geom_col, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, types[i], -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    rc = rc == SQLITE_DONE ? 0 : fail_sqlite(s, rc, "gpkg_extensions");
  }
  sqlite3_finalize(st);
  return rc;
}

int geoservices_store_bind_geometry(geoservices_store *s, geoservices_store_layer *l) {
  double env[4];
  if (!l->geom_col || s->geom.kind == GEOM_NONE) return 0; /* stays NULL */
  geoservices_buf_reset(&s->blob);
  if (geoservices_geom_encode(&s->geom, l->srs_id, &s->blob, env))
    return fail(s, SQLITE_NOMEM, "out of memory encoding a geometry");
  if (s->geom.has_arcs && !l->curves && promote_to_curves(s, l, s->geom.kind)) return -1;
  extend(l->env, env);
  l->geom_bound = !isnan(env[0]);
  memcpy(l->geom_env, env, sizeof env);
  return bind_rc(s, sqlite3_bind_blob(l->upsert, (int)l->ncols + 1, s->blob.data, (int)s->blob.len, SQLITE_STATIC));
}

/* ---- R-trees packed in bulk (rtree.h) ------------------------------------- */

static int exec_fmt(geoservices_store *s, const char *fmt, ...) {
  va_list ap;
  char *sql;
  int rc;
  va_start(ap, fmt);
  sql = sqlite3_vmprintf(fmt, ap);
  va_end(ap);
  if (!sql) return fail(s, SQLITE_NOMEM, "out of memory");
  rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
  sqlite3_free(sql);
  if (rc != SQLITE_OK) return fail_sqlite(s, rc, "R-tree");
  return 0;
}

/* The number of entries in the R-tree's root node (0: the tree is empty). */
static int rtree_root_cells(geoservices_store *s, geoservices_store_layer *l, int *ncell) {
  sqlite3_stmt *st;
  char *sql = sqlite3_mprintf("SELECT data FROM \"%w_node\" WHERE nodeno = 1", l->rtree_name);
  int rc;
  if (!sql) return fail(s, SQLITE_NOMEM, "out of memory");
  rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
  sqlite3_free(sql);
  if (rc != SQLITE_OK) return fail_sqlite(s, rc, "R-tree");
  *ncell = -1;
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_bytes(st, 0) >= 4) {
    const unsigned char *d = sqlite3_column_blob(st, 0);
    *ncell = d[2] << 8 | d[3];
  }
  sqlite3_finalize(st);
  return 0;
}

/* The first entry of a layer in this transaction: an empty R-tree is not
 * written entry by entry but packed at the flush from the table itself
 * (its rows then are exactly what the tree must hold: deleted and replaced
 * rows are simply gone). */
static int decide_rtree(geoservices_store *s, geoservices_store_layer *l) {
  int ncell;
  if (sqlite3_get_autocommit(s->db)) { /* no transaction to defer to: one insert at a time */
    l->rtree_state = -1;
    return 0;
  }
  if (rtree_root_cells(s, l, &ncell)) return -1;
  l->rtree_state = ncell == 0 ? 1 : -1;
  return 0;
}

/* Packs the deferred R-tree from the rows of the table, sorted by the
 * Hilbert index of their envelopes' centres in the extent written (SQLite's
 * sorter: temporary files, flat memory). If something else wrote to the
 * tree meanwhile, the rows it misses are inserted one by one instead. */
static int finish_rtree(geoservices_store *s, geoservices_store_layer *l) {
  sqlite3_stmt *select = NULL;
  char *sql;
  int ncell, rc = SQLITE_OK, k;
  l->rtree_state = 0;
  if (rtree_root_cells(s, l, &ncell)) return -1;
  if (ncell != 0)
    return exec_fmt(s, "INSERT OR REPLACE INTO \"%w\" SELECT rowid, ST_MinX(\"%w\"), ST_MaxX(\"%w\"), "
                    "ST_MinY(\"%w\"), ST_MaxY(\"%w\") FROM \"%w\" WHERE ST_MinX(\"%w\") IS NOT NULL AND "
                    "rowid NOT IN (SELECT id FROM \"%w\")", l->rtree_name, l->geom_col, l->geom_col, l->geom_col,
                    l->geom_col, l->table, l->geom_col, l->rtree_name);
  /* empty geometries come out with NULL bounds: the packer skips them */
  sql = sqlite3_mprintf("SELECT rowid, ST_MinX(\"%w\"), ST_MaxX(\"%w\"), ST_MinY(\"%w\"), ST_MaxY(\"%w\") "
                        "FROM \"%w\" WHERE \"%w\" IS NOT NULL ORDER BY geoservices_hilbert(\"%w\", ?1, ?2, ?3, ?4)",
                        l->geom_col, l->geom_col, l->geom_col, l->geom_col, l->table, l->geom_col, l->geom_col);
  if (!sql) return fail(s, SQLITE_NOMEM, "out of memory");
  /* the sort on files, whatever the statement journals use (SQLite refuses
   * the switch inside a transaction only when TEMP objects exist: then the
   * sort simply stays in memory) */
  sqlite3_exec(s->db, "PRAGMA temp_store = FILE", NULL, NULL, NULL);
  rc = sqlite3_prepare_v2(s->db, sql, -1, &select, NULL);
  sqlite3_free(sql);
  if (rc == SQLITE_OK) {
    for (k = 0; k < 4; k++) sqlite3_bind_double(select, k + 1, isnan(l->env[0]) ? (double)(k & 1) : l->env[k]);
    rc = geoservices_rtree_pack(s->db, l->rtree_name, select);
  }
  sqlite3_finalize(select);
  sqlite3_exec(s->db, "PRAGMA temp_store = MEMORY", NULL, NULL, NULL);
  if (rc != SQLITE_OK) return fail_sqlite(s, rc, "R-tree");
  return 0;
}

/* COMMIT without the flush would leave a layer without its spatial index:
 * the hook turns it into a ROLLBACK. */
static int commit_hook(void *arg) {
  const geoservices_store *s = (const geoservices_store *)arg;
  size_t i;
  for (i = 0; i < s->nlayers; i++)
    if (s->layers[i]->rtree_state > 0) return 1;
  return 0;
}

int geoservices_store_upsert(geoservices_store *s, geoservices_store_layer *l) {
  int rc;
  if (!l->gid_bound) {
    sqlite3_reset(l->upsert);
    return fail(s, 0, "a feature of layer %lld has no %s", (long long)l->id, l->cols[l->gid_col].name);
  }
  rc = sqlite3_step(l->upsert);
  sqlite3_reset(l->upsert);
  if (rc != SQLITE_DONE) return fail_sqlite(s, rc, l->table);
  l->touched = 1;
  if (s->bulk && l->rtree && l->geom_bound) { /* the insert trigger stood aside (see apply.h) */
    sqlite3_stmt *st;
    int k;
    if (l->rtree_state == 0 && decide_rtree(s, l)) return -1;
    if (l->rtree_state > 0) return 0; /* packed at the flush */
    st = l->rtree;
    sqlite3_bind_int64(st, 1, sqlite3_last_insert_rowid(s->db));
    for (k = 0; k < 4; k++) sqlite3_bind_double(st, k + 2, l->geom_env[k]);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) return fail_sqlite(s, rc, "R-tree");
  }
  return 0;
}

static int remove_with(geoservices_store *s, geoservices_store_layer *l, sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (rc != SQLITE_DONE) return fail_sqlite(s, rc, l->table);
  l->touched = 1;
  return sqlite3_changes(s->db);
}

int geoservices_store_remove(geoservices_store *s, geoservices_store_layer *l, const char *gid, size_t len) {
  char text[40];
  size_t n = geoservices_store_normalize_guid(gid, len, text);
  int rc;
  if (len > 0x7fffffff) return fail(s, SQLITE_TOOBIG, "a GlobalID of %zu bytes", len);
  rc = n ? sqlite3_bind_text(l->remove, 1, text, (int)n, SQLITE_STATIC)
         : sqlite3_bind_text(l->remove, 1, gid, (int)len, SQLITE_STATIC);
  if (rc != SQLITE_OK) return fail_sqlite(s, rc, "bind");
  rc = remove_with(s, l, l->remove);
  if (rc > 0 && l->originals) {
    l->gid_text = n ? text : gid;
    l->gid_len = n ? n : len;
    if (geoservices_store_keep_original(s, l, NULL, 0)) rc = -1;
    l->gid_text = NULL;
  }
  return rc;
}

/* ---- geometries kept as the server sent them (apply.h) ---------------------- */

static const char ORIGINALS_SQL[] =
  "CREATE TABLE IF NOT EXISTS geoservices_original_geometries (layer_id INTEGER NOT NULL, global_id TEXT NOT NULL, "
  "geometry TEXT NOT NULL, gpkg_geometry BLOB NOT NULL, PRIMARY KEY (layer_id, global_id)) WITHOUT ROWID";

static int prepare_original(geoservices_store *s, sqlite3_stmt **st, const char *sql) {
  int rc;
  if (*st) return 0;
  rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
  if (rc != SQLITE_OK) return fail_sqlite(s, rc, "geoservices_original_geometries");
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
    if (rc != SQLITE_OK) return fail_sqlite(s, rc, "geoservices_original_geometries");
    if (prepare_original(s, &s->original_put, "INSERT OR REPLACE INTO geoservices_original_geometries (layer_id, "
                         "global_id, geometry, gpkg_geometry) VALUES (?1, ?2, ?3, ?4)"))
      return -1;
    st = s->original_put;
    sqlite3_bind_text(st, 3, json, (int)len, SQLITE_STATIC);
    sqlite3_bind_blob(st, 4, s->blob.data, (int)s->blob.len, SQLITE_STATIC);
    l->originals = 1;
  } else {
    if (prepare_original(s, &s->original_forget, "DELETE FROM geoservices_original_geometries "
                         "WHERE layer_id = ?1 AND global_id = ?2"))
      return -1;
    st = s->original_forget;
  }
  sqlite3_bind_int64(st, 1, l->id);
  sqlite3_bind_text(st, 2, l->gid_text, (int)l->gid_len, SQLITE_STATIC);
  rc = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (rc != SQLITE_DONE) return fail_sqlite(s, rc, "geoservices_original_geometries");
  return 0;
}

int geoservices_store_original_of(geoservices_store *s, geoservices_store_layer *l, const char *gid, size_t gid_len,
                                  const void *blob, size_t blob_len) {
  sqlite3_stmt *st;
  int rc, found = 0;
  if (!l->originals) return 0;
  if (prepare_original(s, &s->original_get, "SELECT geometry, gpkg_geometry FROM geoservices_original_geometries "
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
  if (found < 0) return fail(s, SQLITE_NOMEM, "out of memory");
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fail_sqlite(s, rc, "geoservices_original_geometries");
  return found;
}

/* Whether the table of kept geometries has rows of layer l (read once, when
 * it is registered). */
static void read_originals(geoservices_store *s, geoservices_store_layer *l) {
  sqlite3_stmt *st = NULL;
  l->originals = 0;
  if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM geoservices_original_geometries WHERE layer_id = ?1 LIMIT 1", -1, &st,
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
static int tape_json(const char **p, geoservices_buf *out) {
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
        if (tape_json(p, out)) return -1;
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

/* [x, y, ...] at *p into v: x and y must be numbers (else 0: no point); a
 * third and fourth are kept as they come (NaN when not a number, a null)
 * for geoservices_geom_ordinates_as to place. Advances past the value. */
static int tape_xyzm(const char **p, double v[4]) {
  uint32_t n, i;
  int ok = 1;
  v[0] = v[1] = v[2] = v[3] = NAN;
  if ((unsigned char)**p != TAPE_ARRAY) {
    *p = geoservices_tape_skip(*p);
    return 0;
  }
  (*p)++;
  n = geoservices_tape_u32(p);
  for (i = 0; i < n; i++) {
    if (i < 4) {
      int number = tape_number(p, &v[i]);
      if (i < 2) ok &= number;
      else if (!number) v[i] = NAN;
    } else {
      *p = geoservices_tape_skip(*p);
    }
  }
  return n >= 2 && ok;
}

/* [x, y, ...] into the geometry (anything else is no point). */
static int tape_coordinate(geoservices_store *s, const char **p) {
  double v[4];
  if (!tape_xyzm(p, v) || !isfinite(v[0]) || !isfinite(v[1])) {
    s->geom.inexact = 1; /* a point left out: the server's JSON is kept (apply_feature) */
    return 0;
  }
  if (geoservices_geom_point_zm(&s->geom, v[0], v[1], v[2], v[3])) return fail(s, SQLITE_NOMEM, "out of memory");
  return 0;
}

/* A number or a boolean (Esri's curve flags come as either). Advances. */
static int tape_scalar(const char **p, double *d) {
  int op = (unsigned char)**p;
  if (op == TAPE_TRUE || op == TAPE_FALSE) {
    (*p)++;
    *d = op == TAPE_TRUE;
    return 1;
  }
  return tape_number(p, d);
}

/* A curve object of a curve path: {"c": [end, point on the arc]},
 * {"a": [end, centre, minor, clockwise(, rotation, axis, ratio)]},
 * {"b": [end, control 1, control 2]}, or one of a kind the store does not
 * know (a straight line to its end). geom.h says what each becomes. */
static int tape_curve_object(geoservices_store *s, const char **p) {
  geoservices_segment sg;
  uint32_t n, i, len, m, j;
  memset(&sg, 0, sizeof sg);
  (*p)++; /* TAPE_OBJECT */
  n = geoservices_tape_u32(p);
  for (i = 0; i < n; i++) {
    const char *key = geoservices_tape_key(p, &len);
    double v[4];
    if (sg.has_end || (unsigned char)**p != TAPE_ARRAY) { /* one segment per object */
      *p = geoservices_tape_skip(*p);
      continue;
    }
    sg.kind = len == 1 && (key[0] == 'c' || key[0] == 'a' || key[0] == 'b') ? key[0] : 0;
    (*p)++;
    m = geoservices_tape_u32(p);
    for (j = 0; j < m; j++) {
      if (j == 0) {
        sg.has_end = tape_xyzm(p, sg.end);
      } else if (j <= 2 && (unsigned char)**p == TAPE_ARRAY) {
        int ok = tape_xyzm(p, v);
        double *dst = j == 1 ? sg.p1 : sg.p2;
        dst[0] = v[0], dst[1] = v[1];
        if (j == 1) sg.has_p1 = ok;
        else sg.has_p2 = ok;
      } else if (j >= 2 && j <= 6) {
        double d = NAN;
        int ok = tape_scalar(p, &d);
        if (ok && sg.numbers == (int)j - 2) {
          double *slot[] = {&sg.minor, &sg.clockwise, &sg.rotation, &sg.axis, &sg.ratio};
          *slot[j - 2] = d;
          sg.numbers++;
        }
      } else {
        *p = geoservices_tape_skip(*p);
      }
    }
  }
  if (geoservices_geom_segment(&s->geom, &sg)) return fail(s, SQLITE_NOMEM, "out of memory");
  return 0;
}

/* curvePaths or curveRings: an array of arrays of coordinates and curve objects. */
static int tape_curve_parts(geoservices_store *s, const char **p) {
  uint32_t n, i, m, j;
  if ((unsigned char)**p != TAPE_ARRAY) {
    *p = geoservices_tape_skip(*p);
    return 0;
  }
  (*p)++;
  n = geoservices_tape_u32(p);
  for (i = 0; i < n; i++) {
    if ((unsigned char)**p != TAPE_ARRAY) {
      *p = geoservices_tape_skip(*p);
      s->geom.inexact = 1;
      continue;
    }
    (*p)++;
    m = geoservices_tape_u32(p);
    if (geoservices_geom_part(&s->geom)) return fail(s, SQLITE_NOMEM, "out of memory");
    for (j = 0; j < m; j++) {
      int op = (unsigned char)**p;
      if (op == TAPE_OBJECT) {
        if (tape_curve_object(s, p)) return -1;
      } else if (op == TAPE_ARRAY) {
        if (tape_coordinate(s, p)) return -1;
      } else {
        *p = geoservices_tape_skip(*p);
        s->geom.inexact = 1;
      }
    }
  }
  return 0;
}

/* paths or rings: an array of arrays of coordinates. */
static int tape_parts(geoservices_store *s, const char **p) {
  uint32_t n, i, m, j;
  if ((unsigned char)**p != TAPE_ARRAY) {
    *p = geoservices_tape_skip(*p);
    return 0;
  }
  (*p)++;
  n = geoservices_tape_u32(p);
  for (i = 0; i < n; i++) {
    if ((unsigned char)**p != TAPE_ARRAY) {
      *p = geoservices_tape_skip(*p);
      continue;
    }
    (*p)++;
    m = geoservices_tape_u32(p);
    if (geoservices_geom_part(&s->geom)) return fail(s, SQLITE_NOMEM, "out of memory");
    for (j = 0; j < m; j++)
      if (tape_coordinate(s, p)) return -1;
  }
  return 0;
}

/* A JSON boolean on the tape: 1 or 0, -1 for anything else. Advances past it. */
static int tape_flag(const char **p) {
  int op = (unsigned char)**p;
  *p = geoservices_tape_skip(*p);
  return op == TAPE_TRUE ? 1 : op == TAPE_FALSE ? 0 : -1;
}

/* A point's x or y: a finite number, or null or "NaN" (Esri's empty point:
 * NAN); 0 for anything else. Advances past it. */
static int tape_point_ordinate(const char **p, double *d) {
  int op = (unsigned char)**p;
  uint32_t len;
  *d = NAN;
  if (op == TAPE_NULL) {
    *p = geoservices_tape_skip(*p);
    return 1;
  }
  if (geoservices_tape_is_string(op)) {
    const char *v = geoservices_tape_string(p, &len);
    return len == 3 && memcmp(v, "NaN", 3) == 0;
  }
  if (!tape_number(p, d)) return 0;
  if (isfinite(*d)) return 1;
  *d = NAN;
  return 0;
}

/* An Esri geometry object into s->geom, with the layer's Z and M; its kind
 * comes from its members (x/y, points, paths, rings). The meaning of the
 * coordinates' third and fourth numbers is the geometry's own hasZ / hasM,
 * wherever they come among its members, else the layer's. True curves
 * (curvePaths, curveRings) as geom.h says; unknown shapes give no geometry. */
static int tape_geometry(geoservices_store *s, const geoservices_store_layer *l, const char **p) {
  uint32_t n, i, len, m, j;
  double x = NAN, y = NAN, z = NAN, mv = NAN;
  int has_xy = 0, had_z = -1, had_m = -1, curved = 0, unknown = 0, bad = 0;
  geoservices_geom_reset(&s->geom, GEOM_NONE);
  geoservices_geom_dims(&s->geom, l->has_z, l->has_m);
  (*p)++; /* TAPE_OBJECT */
  n = geoservices_tape_u32(p);
  for (i = 0; i < n; i++) {
    const char *key = geoservices_tape_key(p, &len);
    if (key_is(key, len, "x")) {
      has_xy = 1;
      bad |= !tape_point_ordinate(p, &x);
    } else if (key_is(key, len, "y")) {
      bad |= !tape_point_ordinate(p, &y);
    } else if (key_is(key, len, "z")) {
      if (!tape_number(p, &z)) z = NAN;
    } else if (key_is(key, len, "m")) {
      if (!tape_number(p, &mv)) mv = NAN;
    } else if (key_is(key, len, "hasZ")) {
      had_z = tape_flag(p);
    } else if (key_is(key, len, "hasM")) {
      had_m = tape_flag(p);
    } else if (key_is(key, len, "points")) {
      geoservices_geom_reset(&s->geom, GEOM_MULTIPOINT);
      if ((unsigned char)**p != TAPE_ARRAY) {
        *p = geoservices_tape_skip(*p);
        continue;
      }
      (*p)++;
      m = geoservices_tape_u32(p);
      for (j = 0; j < m; j++)
        if (tape_coordinate(s, p)) return -1;
    } else if (!curved && key_is(key, len, "paths")) {
      geoservices_geom_reset(&s->geom, GEOM_POLYLINE);
      if (tape_parts(s, p)) return -1;
    } else if (!curved && key_is(key, len, "rings")) {
      geoservices_geom_reset(&s->geom, GEOM_POLYGON);
      if (tape_parts(s, p)) return -1;
    } else if (key_is(key, len, "curvePaths") || key_is(key, len, "curveRings")) {
      /* the true curves win over densified paths or rings sent beside them */
      geoservices_geom_reset(&s->geom, key[5] == 'P' ? GEOM_POLYLINE : GEOM_POLYGON);
      curved = 1;
      if (tape_curve_parts(s, p)) return -1;
    } else {
      unknown |= !key_is(key, len, "spatialReference");
      *p = geoservices_tape_skip(*p);
    }
  }
  if (s->geom.kind == GEOM_NONE && has_xy) { /* a point's z and m are named: no flags needed */
    geoservices_geom_reset(&s->geom, GEOM_POINT);
    if (!isnan(x) && !isnan(y) && geoservices_geom_point_zm(&s->geom, x, y, z, mv))
      return fail(s, SQLITE_NOMEM, "out of memory");
  } else {
    geoservices_geom_ordinates_as(&s->geom, had_z < 0 ? l->has_z : had_z, had_m < 0 ? l->has_m : had_m);
  }
  if (bad) s->geom.inexact = 1; /* a point's x or y that is no number: kept as sent */
  /* another kind than the layer's, or none the store knows: an empty geometry
   * of the layer's kind (never a blob of another type than the column's, nor
   * a NULL that hides it) and the server's JSON kept (geoservices.store.unrepresentable) */
  if (l->geom_kind != GEOM_NONE && s->geom.kind != l->geom_kind && (s->geom.kind != GEOM_NONE || unknown)) {
    geoservices_geom_reset(&s->geom, l->geom_kind);
    geoservices_geom_dims(&s->geom, l->has_z, l->has_m);
    s->geom.inexact = 1;
  }
  return 0;
}

static int apply_feature(geoservices_store *s, geoservices_store_layer *l, const char **p) {
  uint32_t n, i, len, m, j;
  const char *geometry = NULL; /* where its geometry is on the tape */
  if ((unsigned char)**p != TAPE_OBJECT) return fail(s, 0, "a feature of layer %lld is not an object", (long long)l->id);
  (*p)++;
  n = geoservices_tape_u32(p);
  geoservices_store_bind_begin(l);
  geoservices_geom_reset(&s->geom, GEOM_NONE);
  for (i = 0; i < n; i++) {
    const char *key = geoservices_tape_key(p, &len);
    int op = (unsigned char)**p;
    if (op == TAPE_OBJECT && key_is(key, len, "attributes")) {
      (*p)++;
      m = geoservices_tape_u32(p);
      for (j = 0; j < m; j++) {
        uint32_t name_len;
        const char *name = geoservices_tape_key(p, &name_len);
        size_t col;
        col = geoservices_store_find_column(l, name, name_len, j);
        if (col == GEOSERVICES_STORE_NONE) *p = geoservices_tape_skip(*p); /* not a column: dropped */
        else if (bind_tape_value(s, l, col, p)) return -1;
      }
    } else if (op == TAPE_OBJECT && key_is(key, len, "geometry") && l->geom_col) {
      geometry = *p;
      if (tape_geometry(s, l, p) || geoservices_store_bind_geometry(s, l)) return -1;
    } else {
      *p = geoservices_tape_skip(*p);
    }
  }
  if (geoservices_store_upsert(s, l)) return -1;
  if (geometry && s->geom.inexact && s->geom.kind != GEOM_NONE) { /* the blob is not the JSON: kept beside it */
    geoservices_buf_reset(&s->json);
    if (tape_json(&geometry, &s->json)) return fail(s, SQLITE_NOMEM, "out of memory");
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
    if (rc != SQLITE_OK) return fail_sqlite(s, rc, "bind");
    return remove_with(s, l, l->remove_oid) < 0 ? -1 : 0;
  }
  return fail(s, 0, "a deleted id of layer %lld is not a GlobalID", (long long)l->id);
}

/* ---- attachments ----------------------------------------------------------- */

static const char ATT_UPSERT[] =
  "INSERT OR REPLACE INTO geoservices_attachments (global_id, layer_id, parent_global_id, attachment_id, name, "
  "content_type, size, keywords, url, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
static const char ATT_REMOVE[] = "DELETE FROM geoservices_attachments WHERE global_id = ?1";

static int prepare(geoservices_store *s, const char *sql, sqlite3_stmt **st) {
  int rc;
  if (*st) return 0;
  rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
  if (rc != SQLITE_OK) return fail_sqlite(s, rc, "prepare");
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
  if (geoservices_buf_reserve(&s->bytes, len / 4 * 3 + 3)) return fail(s, SQLITE_NOMEM, "out of memory");
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
  return rc == SQLITE_OK ? 0 : fail_sqlite(s, rc, "bind");
}

static int apply_attachment(geoservices_store *s, int64_t layer, const char **p) {
  static const char *const names[] = {"globalId", "", "parentGlobalId", "id", "name", "contentType",
                                      "size", "keywords", "url", "data"};
  char gid[40], parent[40];
  uint32_t n, i, len;
  int rc, has_gid = 0;
  if ((unsigned char)**p != TAPE_OBJECT) return fail(s, 0, "an attachment of layer %lld is not an object", (long long)layer);
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
      if (names[k][0] && key_is_ci(key, len, names[k])) param = k + 1;
    if (!param && key_is_ci(key, len, "attachmentId")) param = 4;
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
        rc = rc == SQLITE_OK ? 0 : fail_sqlite(s, rc, "bind");
      } else {
        rc = sqlite3_bind_text(s->att_upsert, param, v, (int)len, SQLITE_STATIC);
        rc = rc == SQLITE_OK ? 0 : fail_sqlite(s, rc, "bind");
      }
    } else if (op == TAPE_INTEGER) {
      (*p)++;
      rc = sqlite3_bind_int64(s->att_upsert, param, geoservices_tape_i64(p));
      rc = rc == SQLITE_OK ? 0 : fail_sqlite(s, rc, "bind");
    } else {
      (*p)++;
      rc = sqlite3_bind_double(s->att_upsert, param, geoservices_tape_f64(p));
      rc = rc == SQLITE_OK ? 0 : fail_sqlite(s, rc, "bind");
    }
    if (rc) return -1;
  }
  if (!has_gid) return fail(s, 0, "an attachment of layer %lld has no globalId", (long long)layer);
  rc = sqlite3_step(s->att_upsert);
  sqlite3_reset(s->att_upsert);
  if (rc != SQLITE_DONE) return fail_sqlite(s, rc, "geoservices_attachments");
  return 0;
}

static int apply_attachment_delete(geoservices_store *s, int64_t layer, const char **p) {
  char text[40];
  uint32_t len;
  size_t n;
  int rc;
  const char *v;
  if (!geoservices_tape_is_string((unsigned char)**p))
    return fail(s, 0, "a deleted attachment id of layer %lld is not a GlobalID", (long long)layer);
  if (prepare(s, ATT_REMOVE, &s->att_remove)) return -1;
  v = geoservices_tape_string(p, &len);
  n = geoservices_store_normalize_guid(v, len, text);
  rc = n ? sqlite3_bind_text(s->att_remove, 1, text, (int)n, SQLITE_STATIC)
         : sqlite3_bind_text(s->att_remove, 1, v, (int)len, SQLITE_STATIC);
  if (rc == SQLITE_OK) rc = sqlite3_step(s->att_remove);
  sqlite3_reset(s->att_remove);
  sqlite3_clear_bindings(s->att_remove);
  if (rc != SQLITE_DONE) return fail_sqlite(s, rc, "geoservices_attachments");
  return 0;
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
      if (!l) return fail(s, 0, "layer %lld of the result is not in the store", (long long)layer);
      rc = kind == RECORD_DELETE ? apply_delete(s, l, p) : apply_feature(s, l, p);
      break;
    case RECORD_ADD_ATTACHMENT:
    case RECORD_UPDATE_ATTACHMENT:
      rc = apply_attachment(s, layer, p);
      break;
    case RECORD_DELETE_ATTACHMENT:
      rc = apply_attachment_delete(s, layer, p);
      break;
    default:
      rc = other ? other(ctx, kind, has_layer, layer, *p, key, key_len) : 0;
      *p = geoservices_tape_skip(*p);
      return rc;
  }
  if (rc == 0) s->applied[kind]++;
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
  if (s->waiting.error == 0) return fail(s, SQLITE_NOMEM, "out of memory");
  return fail(s, SQLITE_IOERR, "records waiting for their layer's id: %s", strerror(s->waiting.error));
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
      if (h.kind >= RECORD_KIND_COUNT) return fail(s, 0, "corrupt record tape (kind %d)", h.kind);
      if (h.entry < 0) {
        rc = apply_record(s, h.kind, 0, 0, h.key, h.key_len, &p, other, ctx);
      } else if (c->has_id && c->id_entry == h.entry) {
        rc = apply_record(s, h.kind, 1, c->layer_id, h.key, h.key_len, &p, other, ctx);
      } else if (replaying) {
        return fail(s, 0, "corrupt record tape (a waiting record)");
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
        return fail(s, 0, "a layer entry of edits has records but no integer id");
      }
    } else {
      return fail(s, 0, "corrupt record tape (op %d)", op);
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

/* ---- layers ---------------------------------------------------------------- */

static void free_layer(geoservices_store_layer *l) {
  size_t i;
  if (!l) return;
  sqlite3_finalize(l->upsert);
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

/* "the layer's GlobalID is ?N" as the store's GlobalID index answers it: the
 * index holds substr(GlobalID, 2, 8) (geoservices.store.schema.gid_match; the
 * unary + keeps constant propagation from rewriting the key with ?N). */
static int put_gid_match(geoservices_buf *b, const geoservices_store_layer *l, size_t param) {
  char num[24];
  int err;
  snprintf(num, sizeof num, "?%zu", param);
  err = put_str(b, "substr(") | put_ident(b, l->cols[l->gid_col].name) | put_str(b, ", 2, 8) = substr(") |
        put_str(b, num) | put_str(b, ", 2, 8) AND +") | put_ident(b, l->cols[l->gid_col].name) | put_str(b, " = ") |
        put_str(b, num);
  return err;
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

static int prepare_layer(geoservices_store *s, geoservices_store_layer *l) {
  geoservices_buf sql;
  size_t i;
  int rc = 0, err = 0;
  char num[24];
  char *fid = local_fid(s, l);
  geoservices_buf_init(&sql, 0);
  err |= put_str(&sql, "INSERT OR REPLACE INTO ") | put_ident(&sql, l->table) | put_str(&sql, " (");
  if (fid) err |= put_ident(&sql, fid) | put_str(&sql, ", ");
  for (i = 0; i < l->ncols; i++) err |= (i ? put_str(&sql, ", ") : 0) | put_ident(&sql, l->cols[i].name);
  if (l->geom_col) err |= (l->ncols ? put_str(&sql, ", ") : 0) | put_ident(&sql, l->geom_col);
  err |= put_str(&sql, ") VALUES (");
  if (fid) { /* the row replaced by its GlobalID keeps its fid: the one QGIS knows it by */
    err |= put_str(&sql, "(SELECT ") | put_ident(&sql, fid) | put_str(&sql, " FROM ") | put_ident(&sql, l->table) |
           put_str(&sql, " WHERE ") | put_gid_match(&sql, l, l->gid_col + 1) | put_str(&sql, "), ");
    free(fid);
  }
  for (i = 0; i < l->ncols + (l->geom_col != NULL); i++) {
    snprintf(num, sizeof num, "%s?%zu", i ? ", " : "", i + 1);
    err |= put_str(&sql, num);
  }
  err |= put_str(&sql, ")") | geoservices_buf_putc(&sql, '\0');
  if (!err) rc = sqlite3_prepare_v3(s->db, sql.data, -1, SQLITE_PREPARE_PERSISTENT, &l->upsert, NULL);
  if (!err && rc == SQLITE_OK) {
    geoservices_buf_reset(&sql);
    err |= put_str(&sql, "DELETE FROM ") | put_ident(&sql, l->table) | put_str(&sql, " WHERE ") |
           put_gid_match(&sql, l, 1) | geoservices_buf_putc(&sql, '\0');
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
  if (err) return fail(s, SQLITE_NOMEM, "out of memory");
  if (rc != SQLITE_OK) return fail_sqlite(s, rc, l->table);
  return 0;
}

/* The geometry column's z and m flags (0 prohibited, 1 mandatory, 2
 * optional): its blobs carry Z / M for 1 and 2; and whether its type takes
 * curves already. 2D without the table or row (a store made by hand, as the
 * C tests do). */
static void read_dims(geoservices_store *s, geoservices_store_layer *l) {
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
  if (rc != SQLITE_OK) return fail_sqlite(s, rc, l->table);
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
  if (rc != SQLITE_DONE) return rc == SQLITE_ROW ? fail(s, SQLITE_NOMEM, "out of memory")
                                                 : fail_sqlite(s, rc, "a column's default");
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
    fail(s, 0, "layer %lld: the GlobalID and OBJECTID must be columns", (long long)id);
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
    free_layer(l);
    return NULL;
  }
  read_dims(s, l);
  read_originals(s, l);
  if (read_defaults(s, l)) {
    free_layer(l);
    return NULL;
  }
  for (i = 0; i < s->nlayers; i++) {
    if (s->layers[i]->id == id) { /* registered again: the new one wins */
      free_layer(s->layers[i]);
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
  free_layer(l);
  fail(s, SQLITE_NOMEM, "out of memory");
  return NULL;
}

/* ---- extents --------------------------------------------------------------- */

int geoservices_store_flush_extents(geoservices_store *s) {
  static const char sql[] =
    "UPDATE gpkg_contents SET last_change = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), "
    "min_x = CASE WHEN ?1 IS NULL THEN min_x ELSE min(coalesce(min_x, ?1), ?1) END, "
    "max_x = CASE WHEN ?2 IS NULL THEN max_x ELSE max(coalesce(max_x, ?2), ?2) END, "
    "min_y = CASE WHEN ?3 IS NULL THEN min_y ELSE min(coalesce(min_y, ?3), ?3) END, "
    "max_y = CASE WHEN ?4 IS NULL THEN max_y ELSE max(coalesce(max_y, ?4), ?4) END "
    "WHERE table_name = ?5";
  sqlite3_stmt *st = NULL;
  size_t i;
  int rc = SQLITE_OK, k;
  for (i = 0; i < s->nlayers; i++)
    if (s->layers[i]->rtree_state > 0 && finish_rtree(s, s->layers[i])) return -1;
  for (i = 0; i < s->nlayers; i++) {
    geoservices_store_layer *l = s->layers[i];
    if (!l->touched) continue;
    if (!st) {
      rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
      if (rc != SQLITE_OK) return fail_sqlite(s, rc, "gpkg_contents");
    }
    for (k = 0; k < 4; k++) {
      if (isnan(l->env[0])) sqlite3_bind_null(st, k + 1);
      else sqlite3_bind_double(st, k + 1, l->env[k]);
    }
    sqlite3_bind_text(st, 5, l->table, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) break;
    rc = SQLITE_OK;
  }
  if (rc != SQLITE_OK) {
    fail_sqlite(s, rc, "gpkg_contents");
    sqlite3_finalize(st);
    return -1;
  }
  sqlite3_finalize(st);
  geoservices_store_forget_extents(s);
  return 0;
}

void geoservices_store_forget_extents(geoservices_store *s) {
  size_t i;
  int originals = 0;
  for (i = 0; i < s->nlayers; i++) {
    geoservices_store_layer *l = s->layers[i];
    l->touched = 0;
    l->env[0] = l->env[1] = l->env[2] = l->env[3] = NAN;
    l->rtree_state = 0;
    originals |= l->originals;
    if (l->promoted) read_dims(s, l); /* a transaction ended: its column's type is what the file says */
    l->promoted = 0;
  }
  if (!originals) return;
  /* a transaction ended: what it kept of the server's geometries (and the
   * table itself, made in it) is there if it committed, gone if not */
  sqlite3_finalize(s->original_forget);
  sqlite3_finalize(s->original_get);
  s->original_forget = s->original_get = NULL;
  for (i = 0; i < s->nlayers; i++)
    if (s->layers[i]->originals) read_originals(s, s->layers[i]);
}

/* ---- SQL functions for the R-tree triggers --------------------------------- */

/* ST_MinX/MaxX/MinY/MaxY(geom) (which 0..3) and ST_IsEmpty(geom) (4). */
static void st_function(sqlite3_context *ctx, sqlite3_value **argv, int which) {
  const geoservices_store *s = (const geoservices_store *)sqlite3_user_data(ctx);
  const unsigned char *blob;
  double env[4];
  geoservices_geom g;
  int r;
  if (which == 4 && s->bulk) { /* apply writes the R-tree itself: the insert trigger stands aside */
    sqlite3_result_int(ctx, 1);
    return;
  }
  if (sqlite3_value_type(argv[0]) != SQLITE_BLOB) {
    sqlite3_result_null(ctx);
    return;
  }
  blob = sqlite3_value_blob(argv[0]);
  r = geoservices_gpkg_envelope(NULL, blob, (size_t)sqlite3_value_bytes(argv[0]), env);
  if (r == -2) { /* no envelope in the header: from the points */
    geoservices_geom_init(&g);
    r = geoservices_gpkg_envelope(&g, blob, (size_t)sqlite3_value_bytes(argv[0]), env);
    geoservices_geom_free(&g);
  }
  if (r < 0) sqlite3_result_null(ctx);
  else if (which == 4) sqlite3_result_int(ctx, r == 0);
  else if (r == 0) sqlite3_result_null(ctx);
  else sqlite3_result_double(ctx, env[which]);
}

#define ST_FUNCTION(name, which)                                                  \
  static void name(sqlite3_context *ctx, int argc, sqlite3_value **argv) {       \
    (void)argc;                                                                  \
    st_function(ctx, argv, which);                                               \
  }
ST_FUNCTION(st_minx, 0)
ST_FUNCTION(st_maxx, 1)
ST_FUNCTION(st_miny, 2)
ST_FUNCTION(st_maxy, 3)
ST_FUNCTION(st_isempty, 4)

/* Records waiting for their layer's id are spooled beside the store: its
 * disk has room for them (they are about to go into it), a tmpfs /tmp may not. */
static int spool_beside_store(geoservices_store *s) {
  const char *path = sqlite3_db_filename(s->db, "main");
  const char *slash = path ? strrchr(path, '/') : NULL;
  char *dir;
  int rc;
  if (!path || !*path) return 0; /* in memory, or a temporary database: the system's directory */
  if (!slash) return geoservices_spool_set_dir(&s->waiting, ".");
  if (slash == path) return geoservices_spool_set_dir(&s->waiting, "/");
  dir = malloc((size_t)(slash - path) + 1);
  if (!dir) return -1;
  memcpy(dir, path, (size_t)(slash - path));
  dir[slash - path] = '\0';
  rc = geoservices_spool_set_dir(&s->waiting, dir);
  free(dir);
  return rc;
}

void geoservices_store_drop_waiting(geoservices_store *s) {
  geoservices_spool_drop(&s->waiting);
}

int geoservices_store_init(geoservices_store *s, sqlite3 *db) {
  static const char *const names[] = {"ST_MinX", "ST_MaxX", "ST_MinY", "ST_MaxY", "ST_IsEmpty"};
  static void (*const fns[])(sqlite3_context *, int, sqlite3_value **) = {st_minx, st_maxx, st_miny, st_maxy,
                                                                            st_isempty};
  int i, rc;
  memset(s, 0, sizeof *s);
  s->db = db;
  geoservices_geom_init(&s->geom);
  geoservices_buf_init(&s->blob, 0);
  geoservices_spool_init(&s->waiting, NULL);
  if (spool_beside_store(s)) return fail(s, SQLITE_NOMEM, "out of memory");
  geoservices_buf_init(&s->bytes, 0);
  for (i = 0; i < 5; i++) {
    rc = sqlite3_create_function_v2(db, names[i], 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
                                    s, fns[i], NULL, NULL, NULL);
    if (rc != SQLITE_OK) return fail_sqlite(s, rc, names[i]);
  }
  rc = geoservices_rtree_register(db);
  if (rc != SQLITE_OK) return fail_sqlite(s, rc, "geoservices_hilbert");
  sqlite3_commit_hook(db, commit_hook, s);
  /* statement journals (each REPLACE with its triggers opens one) in memory,
   * not in a temporary file each: a third of an update's time otherwise */
  rc = sqlite3_exec(db, "PRAGMA temp_store = MEMORY", NULL, NULL, NULL);
  if (rc != SQLITE_OK) return fail_sqlite(s, rc, "PRAGMA temp_store");
  /* REPLACE deletes the row it replaces; its R-tree entry goes with it only
   * when the delete trigger fires, which needs recursive triggers */
  rc = sqlite3_exec(db, "PRAGMA recursive_triggers = ON", NULL, NULL, NULL);
  if (rc != SQLITE_OK) return fail_sqlite(s, rc, "PRAGMA recursive_triggers");
  return 0;
}

void geoservices_store_clear(geoservices_store *s) {
  size_t i;
  for (i = 0; i < s->nlayers; i++) free_layer(s->layers[i]);
  free(s->layers);
  s->layers = NULL;
  s->nlayers = s->layer_cap = 0;
  sqlite3_finalize(s->att_upsert);
  sqlite3_finalize(s->att_remove);
  s->att_upsert = s->att_remove = NULL;
  sqlite3_finalize(s->original_put);
  sqlite3_finalize(s->original_forget);
  sqlite3_finalize(s->original_get);
  s->original_put = s->original_forget = s->original_get = NULL;
  geoservices_buf_free(&s->json);
  geoservices_geom_free(&s->geom);
  geoservices_buf_free(&s->blob);
  geoservices_spool_free(&s->waiting);
  geoservices_buf_free(&s->bytes);
}
