/* The store on its SQLite connection (apply.h): the ST_* functions the
 * GeoPackage R-tree triggers call, the commit hook that guards the R-tree
 * flush, the directory of the waiting records' spool, the pragmas; and the
 * teardown. */
#include "store/apply_internal.h"

#include <stdlib.h>
#include <string.h>

#include "store/rtree.h"

/* COMMIT without the flush would leave a layer without its spatial index:
 * the hook turns it into a ROLLBACK. */
static int commit_hook(void *arg) {
  const geoservices_store *s = (const geoservices_store *)arg;
  size_t i;
  for (i = 0; i < s->nlayers; i++)
    if (s->layers[i]->rtree_state > 0) return 1;
  return 0;
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
  if (spool_beside_store(s)) return geoservices_store_fail(s, SQLITE_NOMEM, "out of memory");
  geoservices_buf_init(&s->bytes, 0);
  for (i = 0; i < 5; i++) {
    rc = sqlite3_create_function_v2(db, names[i], 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
                                    s, fns[i], NULL, NULL, NULL);
    if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, names[i]);
  }
  rc = geoservices_rtree_register(db);
  if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, "geoservices_hilbert");
  sqlite3_commit_hook(db, commit_hook, s);
  /* statement journals (each REPLACE with its triggers opens one) in memory,
   * not in a temporary file each: a third of an update's time otherwise */
  rc = sqlite3_exec(db, "PRAGMA temp_store = MEMORY", NULL, NULL, NULL);
  if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, "PRAGMA temp_store");
  /* REPLACE deletes the row it replaces; its R-tree entry goes with it only
   * when the delete trigger fires, which needs recursive triggers */
  rc = sqlite3_exec(db, "PRAGMA recursive_triggers = ON", NULL, NULL, NULL);
  if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, "PRAGMA recursive_triggers");
  return 0;
}

void geoservices_store_clear(geoservices_store *s) {
  size_t i;
  for (i = 0; i < s->nlayers; i++) geoservices_store_free_layer(s->layers[i]);
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
