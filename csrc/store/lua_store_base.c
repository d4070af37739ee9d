/* What every method of the Store class (geoservices.Store) stands on: the
 * open-Store check, the runtime failures (nil, message, code; a statement
 * a Ctrl-C stopped raised as "interrupted!") and the cache of prepared
 * statements. The class itself (its life and the registration of every
 * method) is lua_store.c; the methods, by concern, lua_store_*.c: each of
 * them uses this file, and this file uses none of them, so the calls go
 * one way (make graph).
 *
 * The codes of a failure are stable short strings: "busy" (another
 * connection holds the lock past the busy timeout), "constraint",
 * "corrupt", "full", "io", "cantopen", "readonly", "nomem", "toobig",
 * "data" (a record the store cannot take), "wal" (store_open to read: its
 * last commits are in its -wal and cannot be read where they are,
 * store/open_read.h), "sqlite" (anything else). */
#include "store/lua_store_internal.h"

#include <stdlib.h>
#include <string.h>

const char *geoservices_store_code_of(int rc) {
  switch (rc & 0xff) {
    case 0: return "data";
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return "busy";
    case SQLITE_CONSTRAINT: return "constraint";
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return "corrupt";
    case SQLITE_FULL: return "full";
    case SQLITE_IOERR: return "io";
    case SQLITE_CANTOPEN: return "cantopen";
    case SQLITE_READONLY:
    case SQLITE_PERM: return "readonly";
    case SQLITE_NOMEM: return "nomem";
    case SQLITE_TOOBIG: return "toobig";
    default: return "sqlite";
  }
}

int geoservices_store_push_fail(lua_State *L, const char *message, int rc) {
  luaL_pushfail(L);
  lua_pushstring(L, message);
  lua_pushstring(L, geoservices_store_code_of(rc));
  return 3;
}

/* A failure of the disk or the file system: SQLite's message with the
 * system's cause in words ("unable to open database file: Read-only file
 * system", "disk I/O error: No space left on device"), issue 39. */
int geoservices_store_push_fail_cause(lua_State *L, sqlite3 *db, const char *message, int rc) {
  int e = db ? sqlite3_system_errno(db) : 0;
  switch (rc & 0xff) {
    case SQLITE_IOERR: /* a CANTOPEN's errno is often its journal's (ENOENT): store.shared says why instead */
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_PERM:
      if (e != 0) {
        luaL_pushfail(L);
        lua_pushfstring(L, "%s: %s", message, strerror(e));
        lua_pushstring(L, geoservices_store_code_of(rc));
        return 3;
      }
      break;
    default:
      break;
  }
  return geoservices_store_push_fail(L, message, rc);
}

/* Whether a Ctrl-C waits on the main thread: lua.c's handler (laction)
 * hooks it with lstop, on every event with a count of 1, and the error
 * "interrupted!" comes when that thread next runs Lua code. A statement of
 * the store can run for many seconds without returning to Lua (an index
 * built over 1M rows): the progress handler stops it, and its failure is
 * raised as the Ctrl-C it is (issue 38). */
int geoservices_store_interrupt_pending(const store_ud *u) {
  return u->main && lua_gethook(u->main) != NULL && lua_gethookcount(u->main) == 1 &&
         lua_gethookmask(u->main) == (LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT);
}

/* A statement stopped by a Ctrl-C raises "interrupted!" as lstop would (its
 * hook cleared: raised once, as cli/watch.lua's check does for a task);
 * anything else is returned. */
static int push_fail_of(lua_State *L, store_ud *u, const char *message, int rc) {
  if ((rc & 0xff) == SQLITE_INTERRUPT && (u->tick_interrupted || geoservices_store_interrupt_pending(u))) {
    u->tick_interrupted = 0;
    if (geoservices_store_interrupt_pending(u)) lua_sethook(u->main, NULL, 0, 0);
    return luaL_error(L, "interrupted!");
  }
  return geoservices_store_push_fail_cause(L, u->db, message, rc);
}

int geoservices_store_push_db_fail(lua_State *L, store_ud *u, int rc) {
  return push_fail_of(L, u, sqlite3_errmsg(u->db), rc);
}

int geoservices_store_push_store_fail(lua_State *L, store_ud *u) {
  return push_fail_of(L, u, u->store->message, u->store->rc);
}

store_ud *geoservices_check_store(lua_State *L, int idx) {
  store_ud *u = (store_ud *)luaL_checkudata(L, idx, STORE_MT);
  if (!u->db) luaL_error(L, "attempt to use a closed Store");
  if (u->in_tick) luaL_error(L, "a Store cannot be used from its on_tick");
  u->caller = L;
  return u;
}

/* ---- statements ------------------------------------------------------------- */

/* The prepared statement of sql, from the cache or prepared now (the least
 * recently used one makes room). NULL with rc set on failure. */
sqlite3_stmt *geoservices_store_statement(store_ud *u, const char *sql, int *rc) {
  int i, victim = 0;
  for (i = 0; i < CACHE_SIZE; i++) {
    if (u->cache[i].sql && strcmp(u->cache[i].sql, sql) == 0) {
      u->cache[i].used = ++u->clock;
      sqlite3_reset(u->cache[i].stmt);
      sqlite3_clear_bindings(u->cache[i].stmt);
      return u->cache[i].stmt;
    }
    if (u->cache[i].used < u->cache[victim].used) victim = i;
  }
  sqlite3_finalize(u->cache[victim].stmt);
  free(u->cache[victim].sql);
  u->cache[victim].stmt = NULL;
  u->cache[victim].sql = NULL;
  u->cache[victim].used = 0;
  *rc = sqlite3_prepare_v3(u->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &u->cache[victim].stmt, NULL);
  if (*rc != SQLITE_OK) return NULL;
  if (!u->cache[victim].stmt) { /* only a comment or whitespace */
    *rc = SQLITE_MISUSE;
    return NULL;
  }
  u->cache[victim].sql = malloc(strlen(sql) + 1);
  if (u->cache[victim].sql) strcpy(u->cache[victim].sql, sql);
  u->cache[victim].used = ++u->clock;
  return u->cache[victim].stmt;
}
