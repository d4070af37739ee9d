/* Store:blob_from_file and Store:blob_to_file: an attachment's bytes between
 * a file and a column, through SQLite's incremental blob I/O (lua_store.c
 * describes the class). */
#include "store/lua_store_internal.h"

#include <stdio.h>

/* blob_from_file(table, column, rowid, path) -> bytes: a file's bytes into a
 * column of an existing row (an attachment downloaded to a file), through
 * SQLite's incremental blob I/O in 64 KiB pieces: the row is given a
 * zeroblob of the file's size, then written piece by piece, so memory stays
 * flat however large the file. */
static int l_store_blob_from_file(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  const char *table = luaL_checkstring(L, 2), *column = luaL_checkstring(L, 3);
  sqlite3_int64 rowid = (sqlite3_int64)luaL_checkinteger(L, 4);
  const char *path = luaL_checkstring(L, 5);
  char piece[65536];
  sqlite3_stmt *st = NULL;
  sqlite3_blob *blob = NULL;
  long size;
  int rc, offset = 0;
  size_t n;
  char *sql;
  FILE *f = fopen(path, "rb");
  if (!f) return geoservices_store_push_fail(L, "cannot open the downloaded file", SQLITE_CANTOPEN);
  if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || size > 0x7fffffffL || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return geoservices_store_push_fail(L, "the downloaded file is unreadable or larger than a blob can hold",
                                       SQLITE_TOOBIG);
  }
  sql = sqlite3_mprintf("UPDATE \"%w\" SET \"%w\" = zeroblob(?1) WHERE rowid = ?2", table, column);
  rc = sql ? sqlite3_prepare_v2(u->db, sql, -1, &st, NULL) : SQLITE_NOMEM;
  sqlite3_free(sql);
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, (sqlite3_int64)size);
    sqlite3_bind_int64(st, 2, rowid);
    rc = sqlite3_step(st);
    rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
  }
  sqlite3_finalize(st);
  if (rc == SQLITE_OK && size > 0) rc = sqlite3_blob_open(u->db, "main", table, column, rowid, 1, &blob);
  while (rc == SQLITE_OK && blob && (n = fread(piece, 1, sizeof piece, f)) > 0) {
    if ((long)offset + (long)n > size) n = (size_t)(size - offset); /* the file grew: its first size bytes */
    if (n == 0) break;
    rc = sqlite3_blob_write(blob, piece, (int)n, offset);
    offset += (int)n;
  }
  fclose(f);
  if (blob) {
    int close_rc = sqlite3_blob_close(blob);
    if (rc == SQLITE_OK) rc = close_rc;
  }
  if (rc != SQLITE_OK) return geoservices_store_push_db_fail(L, u, rc);
  lua_pushinteger(L, (lua_Integer)offset);
  return 1;
}

/* blob_to_file(table, column, rowid, path) -> bytes: the reverse, a column's
 * blob written to a new file in 64 KiB pieces (an attachment uploaded from
 * disk, never held whole in memory). */
static int l_store_blob_to_file(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  const char *table = luaL_checkstring(L, 2), *column = luaL_checkstring(L, 3);
  sqlite3_int64 rowid = (sqlite3_int64)luaL_checkinteger(L, 4);
  const char *path = luaL_checkstring(L, 5);
  char piece[65536];
  sqlite3_blob *blob = NULL;
  int rc, size, offset = 0, failed = 0;
  FILE *f;
  rc = sqlite3_blob_open(u->db, "main", table, column, rowid, 0, &blob);
  if (rc != SQLITE_OK) {
    if (blob) sqlite3_blob_close(blob);
    return geoservices_store_push_db_fail(L, u, rc);
  }
  f = fopen(path, "wb");
  if (!f) {
    sqlite3_blob_close(blob);
    return geoservices_store_push_fail(L, "cannot create the file to upload", SQLITE_CANTOPEN);
  }
  size = sqlite3_blob_bytes(blob);
  while (rc == SQLITE_OK && offset < size) {
    int n = size - offset < (int)sizeof piece ? size - offset : (int)sizeof piece;
    rc = sqlite3_blob_read(blob, piece, n, offset);
    if (rc == SQLITE_OK && fwrite(piece, 1, (size_t)n, f) != (size_t)n) failed = 1;
    if (failed) break;
    offset += n;
  }
  sqlite3_blob_close(blob);
  if (fclose(f) != 0) failed = 1;
  if (rc != SQLITE_OK) return geoservices_store_push_db_fail(L, u, rc);
  if (failed) return geoservices_store_push_fail(L, "cannot write the file to upload", SQLITE_IOERR);
  lua_pushinteger(L, (lua_Integer)offset);
  return 1;
}

const luaL_Reg geoservices_store_blob_methods[] = {
  {"blob_from_file", l_store_blob_from_file},
  {"blob_to_file", l_store_blob_to_file},
  {NULL, NULL},
};
