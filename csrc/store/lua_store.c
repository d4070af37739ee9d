/* The Store class (geoservices.Store): one SQLite connection to a replica
 * store (a GeoPackage), its life, and the one place where the class is put
 * together: its methods come from lua_store_*.c, one file per concern
 * (SQL statements, features, apply, blobs, geometries), each standing on
 * lua_store_base.c (the open-Store check, failures, the statement cache).
 * The class uses them; none of them uses this file.
 *
 * Lifecycle as liolib's: the userdata is created closed with its metatable
 * set, then the connection is opened; close() is idempotent and also __gc
 * and __close (an open transaction is rolled back by the close); any other
 * method on a closed Store raises "attempt to use a closed Store".
 *
 * Runtime failures return nil, message, code (the codes: lua_store_base.c).
 * Misuse raises. Nothing here yields or runs inside a libcurl callback:
 * apply() drains what the extractor holds when Lua calls it. */
#include "store/lua_store_internal.h"

#include <stdlib.h>
#include <string.h>

#include "class.h"
#include "common.h"
#include "store/open_read.h"
#include "store/srs.h"

/* ---- lifecycle -------------------------------------------------------------- */

static int l_store_close(lua_State *L) {
  store_ud *u = (store_ud *)luaL_checkudata(L, 1, STORE_MT);
  int i;
  if (u->store) {
    geoservices_store_clear(u->store);
    free(u->store);
    u->store = NULL;
  }
  for (i = 0; i < CACHE_SIZE; i++) {
    sqlite3_finalize(u->cache[i].stmt);
    free(u->cache[i].sql);
    u->cache[i].stmt = NULL;
    u->cache[i].sql = NULL;
  }
  if (u->db) {
    sqlite3_close_v2(u->db); /* rolls back a transaction left open */
    u->db = NULL;
  }
  luaL_unref(L, LUA_REGISTRYINDEX, u->tick_ref);
  u->tick_ref = LUA_NOREF;
  lua_pushboolean(L, 1);
  return 1;
}

unsigned long long geoservices_store_vm_steps;

/* SQLite's progress handler: counts the work done by the store's
 * connections (core.store_vm_steps), so that a spec or the bench can tell
 * a seek from a scan by counts, not by time; and stops the statement when
 * a Ctrl-C waits (geoservices_store_interrupt_pending). */
static int on_progress(void *ud) {
  store_ud *u = (store_ud *)ud;
  lua_State *L = u->caller;
  geoservices_store_vm_steps += STORE_PROGRESS_STEPS;
  if (u->tick_interrupted || geoservices_store_interrupt_pending(u)) return 1;
  if (u->tick_ref == LUA_NOREF || !L || u->in_tick) return 0;
  u->tick_steps += STORE_PROGRESS_STEPS;
  if (u->tick_steps < STORE_TICK_STEPS || !lua_checkstack(L, 2)) return 0;
  /* on_tick, protected: its error is dropped, unless it is a Ctrl-C that a
   * count hook of the calling task raised there (cli/watch.lua), which
   * stops the statement and is raised again (geoservices_store_push_db_fail) */
  u->tick_steps = 0;
  u->in_tick = 1;
  lua_rawgeti(L, LUA_REGISTRYINDEX, u->tick_ref);
  if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
    const char *m = lua_tostring(L, -1);
    if (m && strstr(m, "interrupted!")) u->tick_interrupted = 1;
    lua_pop(L, 1);
  }
  u->in_tick = 0;
  return u->tick_interrupted;
}

/* on_tick(fn | nil): fn() is called every STORE_TICK_STEPS VM instructions
 * of a long statement (an index built over 1M rows), so that a progress
 * display moves while the statement runs; it must not use the Store (it
 * raises then), and what it raises is dropped. */
static int l_store_on_tick(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
  luaL_unref(L, LUA_REGISTRYINDEX, u->tick_ref);
  u->tick_ref = LUA_NOREF;
  u->tick_steps = 0;
  if (!lua_isnoneornil(L, 2)) {
    lua_pushvalue(L, 2);
    u->tick_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  return 0;
}

/* store_vm_steps() -> the SQLite VM instructions run on every store
 * connection of the process so far, to the nearest STORE_PROGRESS_STEPS. */
static int l_store_vm_steps(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)geoservices_store_vm_steps);
  return 1;
}

/* store_open(path, {create =, readonly =, busy_timeout = ms}) -> Store, or nil, message, code */
static int l_store_open(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int create = 0, readonly = 0, flags, rc;
  lua_Integer busy_ms = 5000;
  store_ud *u;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_getfield(L, 2, "create");
    create = lua_toboolean(L, -1);
    lua_getfield(L, 2, "readonly");
    readonly = lua_toboolean(L, -1);
    lua_getfield(L, 2, "busy_timeout");
    busy_ms = luaL_optinteger(L, -1, busy_ms);
    lua_pop(L, 3);
    luaL_argcheck(L, busy_ms >= 0 && busy_ms <= 0x7fffffff, 2, "busy_timeout must be milliseconds");
  }
  u = (store_ud *)lua_newuserdatauv(L, sizeof *u, 0);
  memset(u, 0, sizeof *u);
  u->tick_ref = LUA_NOREF;
  luaL_setmetatable(L, STORE_MT); /* closed until the connection is open */
  flags = (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | (create && !readonly ? SQLITE_OPEN_CREATE : 0) |
          SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  if (readonly) {
    int immutable;
    rc = geoservices_store_open_read(path, flags, &u->db, &immutable);
    if (rc == GEOSERVICES_OPEN_READ_WAL) {
      luaL_pushfail(L);
      lua_pushfstring(L, "its last commits are in %s-wal, which SQLite reads only beside %s-shm or in a folder "
                      "it can write", path, path);
      lua_pushstring(L, "wal");
      return 3;
    }
  } else {
    rc = sqlite3_open_v2(path, &u->db, flags, NULL);
  }
  if (rc != SQLITE_OK) {
    int n = geoservices_store_push_fail_cause(L, u->db, u->db ? sqlite3_errmsg(u->db) : "cannot open the store", rc);
    sqlite3_close_v2(u->db);
    u->db = NULL;
    return n;
  }
  sqlite3_busy_timeout(u->db, (int)busy_ms);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  u->main = lua_tothread(L, -1);
  lua_pop(L, 1);
  sqlite3_progress_handler(u->db, STORE_PROGRESS_STEPS, on_progress, u);
  u->store = calloc(1, sizeof *u->store);
  if (!u->store) {
    sqlite3_close_v2(u->db);
    u->db = NULL;
    return luaL_error(L, "store: not enough memory");
  }
  if (geoservices_store_init(u->store, u->db) != 0) {
    int n = geoservices_store_push_store_fail(L, u);
    lua_pushcfunction(L, l_store_close);
    lua_pushvalue(L, -5);
    lua_call(L, 1, 0);
    return n;
  }
  return 1;
}

static int l_store_tostring(lua_State *L) {
  store_ud *u = (store_ud *)luaL_checkudata(L, 1, STORE_MT);
  lua_pushfstring(L, "%s (%p%s)", STORE_MT, (void *)u, u->db ? "" : ", closed");
  return 1;
}

/* ---- the class -------------------------------------------------------------- */

void geoservices_open_store(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"close", l_store_close},
    {"on_tick", l_store_on_tick},
    {NULL, NULL},
  };
  /* the other methods, each list beside the functions of its concern */
  static const luaL_Reg *const concerns[] = {geoservices_store_sql_methods, geoservices_store_feature_methods,
                                             geoservices_store_apply_methods, geoservices_store_blob_methods};
  static const luaL_Reg meta[] = {
    {"__gc", l_store_close},
    {"__close", l_store_close},
    {"__tostring", l_store_tostring},
    {NULL, NULL},
  };
  size_t i;
  geoservices_new_class(L, STORE_MT, methods, meta);
  luaL_getmetatable(L, STORE_MT);
  lua_getfield(L, -1, "__index");
  for (i = 0; i < sizeof concerns / sizeof concerns[0]; i++) luaL_setfuncs(L, concerns[i], 0);
  lua_pop(L, 2);
  geoservices_open_store_geometry(L); /* core.gpkg_geometry, core.esri_geometry (store/lua_store_geometry.c) */
  lua_pushcfunction(L, l_store_open);
  lua_setfield(L, -2, "store_open");
  lua_pushcfunction(L, l_store_vm_steps);
  lua_setfield(L, -2, "store_vm_steps");
  lua_pushstring(L, sqlite3_libversion());
  lua_setfield(L, -2, "sqlite_version");
  geoservices_open_srs(L); /* core.srs_definition (store/lua_srs.c) */
}
