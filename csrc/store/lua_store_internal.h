/* Shared by the files of the Store class (lua_store_base.c: what every
 * method stands on, the open-Store check, failures, the statement cache;
 * lua_store.c: its life and the class itself; lua_store_*.c: its methods by
 * concern). Calls go one way: lua_store.c -> the methods -> the base.
 * Nothing here leaves core.so (-fvisibility=hidden). */
#ifndef GEOSERVICES_STORE_LUA_STORE_INTERNAL_H
#define GEOSERVICES_STORE_LUA_STORE_INTERNAL_H

#include <lua.h>
#include <lauxlib.h>
#include <sqlite3.h>

#include "store/apply.h"

#define STORE_MT "geoservices.Store"
#define CACHE_SIZE 24

typedef struct cached_stmt {
  char *sql;
  sqlite3_stmt *stmt;
  unsigned long used;
} cached_stmt;

typedef struct store_ud {
  sqlite3 *db;                 /* NULL once closed */
  geoservices_store *store;
  cached_stmt cache[CACHE_SIZE];
  unsigned long clock;
  int applying;                /* inside apply(): its callback must not re-enter */
  lua_State *main;             /* the interpreter's main thread, where lua.c hooks a Ctrl-C */
  lua_State *caller;           /* the thread of the method running now: on_tick is called on it */
  int tick_ref;                /* on_tick's function in the registry, or LUA_NOREF */
  int in_tick;                 /* inside on_tick: the store is not to be used */
  int tick_interrupted;        /* on_tick raised a Ctrl-C: the statement stops, and it is raised again */
  unsigned long long tick_steps;
} store_ud;

/* How often (in VM instructions) SQLite calls a connection's progress handler (lua_store.c). */
#define STORE_PROGRESS_STEPS 1000
/* How often (in VM instructions) a long statement calls the connection's on_tick: some 10 to 100 ms. */
#define STORE_TICK_STEPS (1u << 20)
/* lua_store.c: the SQLite VM instructions run on every store connection of the process (core.store_vm_steps). */
extern unsigned long long geoservices_store_vm_steps;

/* A geometry and a blob buffer owned by a userdata, so that a Lua error
 * while reading a table leaks nothing (__gc frees them). */
#define SCRATCH_MT "geoservices.store.scratch"
typedef struct scratch {
  geoservices_geom g;
  geoservices_buf out;
} scratch;

/* lua_store_base.c: the open Store at idx for every method (raises on a closed one). */
store_ud *geoservices_check_store(lua_State *L, int idx);
/* lua_store_base.c: the stable short code of a SQLite result, for every method's nil, message, code. */
const char *geoservices_store_code_of(int rc);
/* lua_store_base.c: pushes nil, message, code (3): the methods' runtime failures. */
int geoservices_store_push_fail(lua_State *L, const char *message, int rc);
/* lua_store_base.c: the same with the system's cause of a disk failure in words (db may be NULL). */
int geoservices_store_push_fail_cause(lua_State *L, sqlite3 *db, const char *message, int rc);
/* lua_store_base.c: the same with the connection's message, or the C store's (u->store->message);
 * a statement a Ctrl-C stopped raises "interrupted!" instead. */
int geoservices_store_push_db_fail(lua_State *L, store_ud *u, int rc);
int geoservices_store_push_store_fail(lua_State *L, store_ud *u);
/* lua_store_base.c: whether a Ctrl-C waits on the interpreter's main thread (a statement stops). */
int geoservices_store_interrupt_pending(const store_ud *u);
/* lua_store_base.c: the cached prepared statement of sql (run, rows, get); NULL with *rc set. */
sqlite3_stmt *geoservices_store_statement(store_ud *u, const char *sql, int *rc);

/* lua_store_sql.c: a result column as a Lua value, and a statement reset for the cache (get reads rows too). */
void geoservices_store_push_column(lua_State *L, sqlite3_stmt *st, int i);
void geoservices_store_finish_stmt(sqlite3_stmt *st);

/* lua_store_geometry.c: an Esri geometry table into g, for put and gpkg_geometry. */
void geoservices_store_lua_geometry(lua_State *L, int idx, geoservices_geom *g, int has_z, int has_m);
/* lua_store_geometry.c: a scratch userdata on the stack top (get decodes blobs into it). */
scratch *geoservices_store_new_scratch(lua_State *L);
/* lua_store_geometry.c: the scratch class, core.gpkg_geometry and core.esri_geometry, for geoservices_open_store. */
void geoservices_open_store_geometry(lua_State *L);
/* lua_store_push_geometry.c: g as an Esri geometry table, for get and esri_geometry. */
void geoservices_store_push_geometry(lua_State *L, const geoservices_geom *g);

/* The Store's methods by concern, which geoservices_open_store puts together. */
extern const luaL_Reg geoservices_store_sql_methods[];     /* lua_store_sql.c */
extern const luaL_Reg geoservices_store_feature_methods[]; /* lua_store_features.c */
extern const luaL_Reg geoservices_store_apply_methods[];   /* lua_store_apply.c */
extern const luaL_Reg geoservices_store_blob_methods[];    /* lua_store_blob.c */

#endif
