/* The R-tree inside apply (apply.h): an empty tree is packed in bulk at the
 * flush (rtree.h), any other written entry by entry; and at the flush the
 * extents and last_change of what was written go into gpkg_contents. */
#include "store/apply_internal.h"

#include <math.h>
#include <stdarg.h>

#include "store/rtree.h"

/* ---- R-trees packed in bulk (rtree.h) ------------------------------------- */

static int exec_fmt(geoservices_store *s, const char *fmt, ...) {
  va_list ap;
  char *sql;
  int rc;
  va_start(ap, fmt);
  sql = sqlite3_vmprintf(fmt, ap);
  va_end(ap);
  if (!sql) return geoservices_store_fail(s, SQLITE_NOMEM, "out of memory");
  rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
  sqlite3_free(sql);
  if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, "R-tree");
  return 0;
}

/* The number of entries in the R-tree's root node (0: the tree is empty). */
static int rtree_root_cells(geoservices_store *s, geoservices_store_layer *l, int *ncell) {
  sqlite3_stmt *st;
  char *sql = sqlite3_mprintf("SELECT data FROM \"%w_node\" WHERE nodeno = 1", l->rtree_name);
  int rc;
  if (!sql) return geoservices_store_fail(s, SQLITE_NOMEM, "out of memory");
  rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
  sqlite3_free(sql);
  if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, "R-tree");
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
int geoservices_store_decide_rtree(geoservices_store *s, geoservices_store_layer *l) {
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
  if (!sql) return geoservices_store_fail(s, SQLITE_NOMEM, "out of memory");
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
  if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, "R-tree");
  return 0;
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
      if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, "gpkg_contents");
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
    geoservices_store_fail_sqlite(s, rc, "gpkg_contents");
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
  s->filling = 0;
  for (i = 0; i < s->nlayers; i++) {
    geoservices_store_layer *l = s->layers[i];
    l->touched = 0;
    l->env[0] = l->env[1] = l->env[2] = l->env[3] = NAN;
    l->rtree_state = 0;
    l->upsert = l->replace; /* a transaction ended: filling ends with it */
    originals |= l->originals;
    /* a transaction ended: its column's type is what the file says */
    if (l->promoted) geoservices_store_read_dims(s, l);
    l->promoted = 0;
  }
  if (!originals) return;
  /* a transaction ended: what it kept of the server's geometries (and the
   * table itself, made in it) is there if it committed, gone if not */
  sqlite3_finalize(s->original_forget);
  sqlite3_finalize(s->original_get);
  s->original_forget = s->original_get = NULL;
  for (i = 0; i < s->nlayers; i++)
    if (s->layers[i]->originals) geoservices_store_read_originals(s, s->layers[i]);
}
