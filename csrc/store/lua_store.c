/* The Store class (geoservices.Store): one SQLite connection to a replica
 * store (a GeoPackage), its transaction, a few prepared-statement helpers
 * for the Lua layer (geoservices.store), and the fast path that applies a
 * Records tape straight into the feature tables (store/apply.c).
 *
 * Lifecycle as liolib's: the userdata is created closed with its metatable
 * set, then the connection is opened; close() is idempotent and also __gc
 * and __close (an open transaction is rolled back by the close); any other
 * method on a closed Store raises "attempt to use a closed Store".
 *
 * Runtime failures return nil, message, code; the code is a stable short
 * string: "busy" (another connection holds the lock past the busy timeout),
 * "constraint", "corrupt", "full", "io", "cantopen", "readonly", "nomem",
 * "toobig", "data" (a record the store cannot take), "sqlite" (anything
 * else). Misuse raises. Nothing here yields or runs inside a libcurl
 * callback: apply() drains what the extractor holds when Lua calls it. */
#include "store/lua_store_internal.h"

#include <stdlib.h>
#include <string.h>

#include "class.h"
#include "common.h"
#include "store/srs.h"

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
static int push_fail_with_cause(lua_State *L, sqlite3 *db, const char *message, int rc) {
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
static int interrupt_pending(const store_ud *u) {
  return u->main && lua_gethook(u->main) != NULL && lua_gethookcount(u->main) == 1 &&
         lua_gethookmask(u->main) == (LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT);
}

/* A statement stopped by a Ctrl-C raises "interrupted!" as lstop would (its
 * hook cleared: raised once, as cli/watch.lua's check does for a task);
 * anything else is returned. */
static int push_fail_of(lua_State *L, store_ud *u, const char *message, int rc) {
  if ((rc & 0xff) == SQLITE_INTERRUPT && (u->tick_interrupted || interrupt_pending(u))) {
    u->tick_interrupted = 0;
    if (interrupt_pending(u)) lua_sethook(u->main, NULL, 0, 0);
    return luaL_error(L, "interrupted!");
  }
  return push_fail_with_cause(L, u->db, message, rc);
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
 * a Ctrl-C waits (interrupt_pending). */
static int on_progress(void *ud) {
  store_ud *u = (store_ud *)ud;
  lua_State *L = u->caller;
  geoservices_store_vm_steps += STORE_PROGRESS_STEPS;
  if (u->tick_interrupted || interrupt_pending(u)) return 1;
  if (u->tick_ref == LUA_NOREF || !L || u->in_tick) return 0;
  u->tick_steps += STORE_PROGRESS_STEPS;
  if (u->tick_steps < STORE_TICK_STEPS || !lua_checkstack(L, 2)) return 0;
  /* on_tick, protected: its error is dropped, unless it is a Ctrl-C that a
   * count hook of the calling task raised there (cli/watch.lua), which
   * stops the statement and is raised again (push_fail_of) */
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
  rc = sqlite3_open_v2(path, &u->db, flags, NULL);
  if (rc != SQLITE_OK) {
    int n = push_fail_with_cause(L, u->db, u->db ? sqlite3_errmsg(u->db) : "cannot open the store", rc);
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
