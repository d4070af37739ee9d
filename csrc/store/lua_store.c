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
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "class.h"
#include "common.h"
#include "json/lua_decode.h"
#include "json/lua_records.h"
#include "store/apply.h"
#include "store/isotime.h"
#include "store/srs.h"

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
} store_ud;

static const char *code_of(int rc) {
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

static int push_fail(lua_State *L, const char *message, int rc) {
  luaL_pushfail(L);
  lua_pushstring(L, message);
  lua_pushstring(L, code_of(rc));
  return 3;
}

static int push_db_fail(lua_State *L, store_ud *u, int rc) {
  return push_fail(L, sqlite3_errmsg(u->db), rc);
}

static int push_store_fail(lua_State *L, store_ud *u) {
  return push_fail(L, u->store->message, u->store->rc);
}

static store_ud *check_store(lua_State *L, int idx) {
  store_ud *u = (store_ud *)luaL_checkudata(L, idx, STORE_MT);
  if (!u->db) luaL_error(L, "attempt to use a closed Store");
  return u;
}

/* ---- blobs from files -------------------------------------------------------- */

/* blob_from_file(table, column, rowid, path) -> bytes: a file's bytes into a
 * column of an existing row (an attachment downloaded to a file), through
 * SQLite's incremental blob I/O in 64 KiB pieces: the row is given a
 * zeroblob of the file's size, then written piece by piece, so memory stays
 * flat however large the file. */
static int l_store_blob_from_file(lua_State *L) {
  store_ud *u = check_store(L, 1);
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
  if (!f) return push_fail(L, "cannot open the downloaded file", SQLITE_CANTOPEN);
  if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || size > 0x7fffffffL || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return push_fail(L, "the downloaded file is unreadable or larger than a blob can hold", SQLITE_TOOBIG);
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
  if (rc != SQLITE_OK) return push_db_fail(L, u, rc);
  lua_pushinteger(L, (lua_Integer)offset);
  return 1;
}

/* blob_to_file(table, column, rowid, path) -> bytes: the reverse, a column's
 * blob written to a new file in 64 KiB pieces (an attachment uploaded from
 * disk, never held whole in memory). */
static int l_store_blob_to_file(lua_State *L) {
  store_ud *u = check_store(L, 1);
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
    return push_db_fail(L, u, rc);
  }
  f = fopen(path, "wb");
  if (!f) {
    sqlite3_blob_close(blob);
    return push_fail(L, "cannot create the file to upload", SQLITE_CANTOPEN);
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
  if (rc != SQLITE_OK) return push_db_fail(L, u, rc);
  if (failed) return push_fail(L, "cannot write the file to upload", SQLITE_IOERR);
  lua_pushinteger(L, (lua_Integer)offset);
  return 1;
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
  lua_pushboolean(L, 1);
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
  luaL_setmetatable(L, STORE_MT); /* closed until the connection is open */
  flags = (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | (create && !readonly ? SQLITE_OPEN_CREATE : 0) |
          SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  rc = sqlite3_open_v2(path, &u->db, flags, NULL);
  if (rc != SQLITE_OK) {
    int n = push_fail(L, u->db ? sqlite3_errmsg(u->db) : "cannot open the store", rc);
    sqlite3_close_v2(u->db);
    u->db = NULL;
    return n;
  }
  sqlite3_busy_timeout(u->db, (int)busy_ms);
  u->store = calloc(1, sizeof *u->store);
  if (!u->store) {
    sqlite3_close_v2(u->db);
    u->db = NULL;
    return luaL_error(L, "store: not enough memory");
  }
  if (geoservices_store_init(u->store, u->db) != 0) {
    int n = push_store_fail(L, u);
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
static sqlite3_stmt *statement(store_ud *u, const char *sql, int *rc) {
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

/* Binds the Lua values from index `first` to the top as ?1, ?2, ...
 * (strings without copies: the statement is stepped and its bindings
 * cleared before this call returns). Raises on a value SQL cannot take. */
static void bind_args(lua_State *L, sqlite3_stmt *st, int first) {
  int top = lua_gettop(L), i, n = sqlite3_bind_parameter_count(st);
  if (top - first + 1 > n) luaL_error(L, "store: %d values for %d parameters", top - first + 1, n);
  for (i = first; i <= top; i++) {
    int param = i - first + 1;
    size_t len;
    const char *s;
    switch (lua_type(L, i)) {
      case LUA_TNIL: sqlite3_bind_null(st, param); break;
      case LUA_TBOOLEAN: sqlite3_bind_int(st, param, lua_toboolean(L, i)); break;
      case LUA_TNUMBER:
        if (lua_isinteger(L, i)) sqlite3_bind_int64(st, param, (sqlite3_int64)lua_tointeger(L, i));
        else sqlite3_bind_double(st, param, (double)lua_tonumber(L, i));
        break;
      case LUA_TSTRING:
        s = lua_tolstring(L, i, &len);
        sqlite3_bind_text(st, param, s, (int)len, SQLITE_STATIC);
        break;
      case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, i) == NULL) { /* the JSON null */
          sqlite3_bind_null(st, param);
          break;
        }
        /* fallthrough */
      default:
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        luaL_error(L, "store: parameter %d is a %s, not an SQL value", param, luaL_typename(L, i));
    }
  }
}

static void push_column(lua_State *L, sqlite3_stmt *st, int i) {
  switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER: lua_pushinteger(L, (lua_Integer)sqlite3_column_int64(st, i)); break;
    case SQLITE_FLOAT: lua_pushnumber(L, (lua_Number)sqlite3_column_double(st, i)); break;
    case SQLITE_TEXT:
      lua_pushlstring(L, (const char *)sqlite3_column_text(st, i), (size_t)sqlite3_column_bytes(st, i));
      break;
    case SQLITE_BLOB:
      lua_pushlstring(L, (const char *)sqlite3_column_blob(st, i), (size_t)sqlite3_column_bytes(st, i));
      break;
    default: lua_pushnil(L); break;
  }
}

static void finish_stmt(sqlite3_stmt *st) {
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
}

/* exec(sql) -> true: one or more statements without parameters */
static int l_store_exec(lua_State *L) {
  store_ud *u = check_store(L, 1);
  const char *sql = luaL_checkstring(L, 2);
  char *msg = NULL;
  int rc = sqlite3_exec(u->db, sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK) {
    lua_pushstring(L, msg ? msg : sqlite3_errstr(rc));
    sqlite3_free(msg);
    luaL_pushfail(L);
    lua_insert(L, -2);
    lua_pushstring(L, code_of(rc));
    return 3;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* run(sql, ...) -> changes, last_insert_rowid */
static int l_store_run(lua_State *L) {
  store_ud *u = check_store(L, 1);
  int rc = SQLITE_OK;
  sqlite3_stmt *st = statement(u, luaL_checkstring(L, 2), &rc);
  if (!st) return push_db_fail(L, u, rc);
  bind_args(L, st, 3);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {}
  finish_stmt(st);
  if (rc != SQLITE_DONE) return push_db_fail(L, u, rc);
  lua_pushinteger(L, (lua_Integer)sqlite3_changes(u->db));
  lua_pushinteger(L, (lua_Integer)sqlite3_last_insert_rowid(u->db));
  return 2;
}

/* rows(sql, ...) -> { {column = value, ...}, ... } (NULLs are absent) */
static int l_store_rows(lua_State *L) {
  store_ud *u = check_store(L, 1);
  int rc = SQLITE_OK, ncols, i;
  lua_Integer n = 0;
  sqlite3_stmt *st = statement(u, luaL_checkstring(L, 2), &rc);
  if (!st) return push_db_fail(L, u, rc);
  bind_args(L, st, 3);
  ncols = sqlite3_column_count(st);
  lua_newtable(L);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    lua_createtable(L, 0, ncols);
    for (i = 0; i < ncols; i++) {
      push_column(L, st, i);
      lua_setfield(L, -2, sqlite3_column_name(st, i));
    }
    lua_rawseti(L, -2, ++n);
  }
  finish_stmt(st);
  if (rc != SQLITE_DONE) return push_db_fail(L, u, rc);
  return 1;
}

/* begin([mode]) -> true: BEGIN IMMEDIATE (default), DEFERRED or EXCLUSIVE */
static int l_store_begin(lua_State *L) {
  static const char *const modes[] = {"immediate", "deferred", "exclusive", NULL};
  static const char *const sql[] = {"BEGIN IMMEDIATE", "BEGIN DEFERRED", "BEGIN EXCLUSIVE"};
  store_ud *u = check_store(L, 1);
  int mode = luaL_checkoption(L, 2, "immediate", modes);
  int rc = sqlite3_exec(u->db, sql[mode], NULL, NULL, NULL);
  if (rc != SQLITE_OK) return push_db_fail(L, u, rc);
  geoservices_store_forget_extents(u->store);
  geoservices_store_drop_waiting(u->store);
  lua_pushboolean(L, 1);
  return 1;
}

/* commit() -> true: the layers' extents into gpkg_contents, then COMMIT.
 * On failure the transaction stays open (roll it back, or commit again
 * after a "busy"). */
static int l_store_commit(lua_State *L) {
  store_ud *u = check_store(L, 1);
  int rc;
  if (sqlite3_get_autocommit(u->db)) return luaL_error(L, "store: commit() without a transaction");
  if (geoservices_store_flush_extents(u->store) != 0) return push_store_fail(L, u);
  rc = sqlite3_exec(u->db, "COMMIT", NULL, NULL, NULL);
  if (rc != SQLITE_OK) return push_db_fail(L, u, rc);
  lua_pushboolean(L, 1);
  return 1;
}

/* rollback() -> true (also without a transaction: nothing to undo) */
static int l_store_rollback(lua_State *L) {
  store_ud *u = check_store(L, 1);
  geoservices_store_forget_extents(u->store);
  geoservices_store_drop_waiting(u->store);
  if (!sqlite3_get_autocommit(u->db)) {
    int rc = sqlite3_exec(u->db, "ROLLBACK", NULL, NULL, NULL);
    if (rc != SQLITE_OK) return push_db_fail(L, u, rc);
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int l_store_in_transaction(lua_State *L) {
  store_ud *u = check_store(L, 1);
  lua_pushboolean(L, !sqlite3_get_autocommit(u->db));
  return 1;
}

static int l_store_path(lua_State *L) {
  store_ud *u = check_store(L, 1);
  const char *path = sqlite3_db_filename(u->db, "main");
  lua_pushstring(L, path ? path : "");
  return 1;
}

/* ---- layers ----------------------------------------------------------------- */

static const char *const col_types[] = {"integer", "real", "text", "date", "guid", "blob", NULL};
static const char *const geom_kinds[] = {"none", "point", "multipoint", "polyline", "polygon", NULL};

static const char *opt_field_string(lua_State *L, int idx, const char *name) {
  const char *s;
  lua_getfield(L, idx, name);
  s = lua_isnil(L, -1) ? NULL : lua_tostring(L, -1);
  if (!s && !lua_isnil(L, -1)) luaL_error(L, "store:layer: '%s' must be a string", name);
  lua_pop(L, 1); /* the string stays alive in the spec table */
  return s;
}

/* layer{id =, table =, geometry_column =, geometry_kind =, srs_id =,
 *       columns = {{name =, type =}, ...}, globalid = name, oid = name}
 * registers a feature table for apply/put/get/remove. */
static int l_store_layer(lua_State *L) {
  store_ud *u = check_store(L, 1);
  const char *table, *geom_col, *gid, *oid;
  const char **names;
  int *types, kind = GEOM_NONE;
  size_t n, i, gid_col = GEOSERVICES_STORE_NONE, oid_col = GEOSERVICES_STORE_NONE;
  lua_Integer id, srs_id;
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_getfield(L, 2, "id");
  id = luaL_checkinteger(L, -1);
  lua_getfield(L, 2, "srs_id");
  srs_id = luaL_optinteger(L, -1, -1);
  lua_getfield(L, 2, "geometry_kind");
  kind = luaL_checkoption(L, -1, "none", geom_kinds);
  lua_pop(L, 3);
  table = opt_field_string(L, 2, "table");
  geom_col = opt_field_string(L, 2, "geometry_column");
  gid = opt_field_string(L, 2, "globalid");
  oid = opt_field_string(L, 2, "oid");
  if (!table || !gid) return luaL_error(L, "store:layer: 'table' and 'globalid' are required");
  lua_getfield(L, 2, "columns");
  luaL_checktype(L, -1, LUA_TTABLE);
  n = (size_t)lua_rawlen(L, -1);
  names = (const char **)lua_newuserdatauv(L, (n ? n : 1) * sizeof *names, 0);
  types = (int *)lua_newuserdatauv(L, (n ? n : 1) * sizeof *types, 0);
  for (i = 0; i < n; i++) {
    lua_rawgeti(L, -3, (lua_Integer)i + 1);
    luaL_checktype(L, -1, LUA_TTABLE);
    lua_getfield(L, -1, "name");
    names[i] = luaL_checkstring(L, -1); /* alive in the spec */
    lua_getfield(L, -2, "type");
    types[i] = luaL_checkoption(L, -1, "text", col_types);
    lua_pop(L, 3);
    if (strcmp(names[i], gid) == 0) gid_col = i;
    if (oid && strcmp(names[i], oid) == 0) oid_col = i;
  }
  if (gid_col == GEOSERVICES_STORE_NONE) return luaL_error(L, "store:layer: '%s' is not a column", gid);
  if (!geoservices_store_add_layer(u->store, id, table, kind == GEOM_NONE ? NULL : geom_col, kind, (int32_t)srs_id,
                                   names, types, n, gid_col, oid_col))
    return push_store_fail(L, u);
  lua_pushboolean(L, 1);
  return 1;
}

static geoservices_store_layer *check_layer(lua_State *L, store_ud *u, int idx) {
  lua_Integer id = luaL_checkinteger(L, idx);
  geoservices_store_layer *l = geoservices_store_layer_of(u->store, id);
  if (!l) luaL_error(L, "store: layer %I is not registered", id);
  return l;
}

/* ---- geometries from and to Lua --------------------------------------------- */

static int lua_number_at(lua_State *L, int t, lua_Integer i, double *d) {
  int ok;
  lua_rawgeti(L, t, i);
  ok = lua_type(L, -1) == LUA_TNUMBER;
  if (ok) *d = (double)lua_tonumber(L, -1);
  lua_pop(L, 1);
  return ok;
}

/* {x, y, ...} at the top into the geometry's current part; a third and
 * fourth number as they come (NaN for anything else: nil, the JSON null),
 * for geoservices_geom_ordinates_as to place. */
static void lua_coordinate(lua_State *L, geoservices_geom *g) {
  double x = 0, y = 0, third = NAN, fourth = NAN;
  int t = lua_gettop(L);
  if (lua_type(L, t) != LUA_TTABLE) luaL_error(L, "store: a coordinate must be an array {x, y}");
  if (!lua_number_at(L, t, 1, &x) || !lua_number_at(L, t, 2, &y))
    luaL_error(L, "store: a coordinate must be an array {x, y}");
  if (!lua_number_at(L, t, 3, &third)) third = NAN;
  if (!lua_number_at(L, t, 4, &fourth)) fourth = NAN;
  if (geoservices_geom_point_zm(g, x, y, third, fourth)) luaL_error(L, "store: not enough memory");
}

static void lua_parts(lua_State *L, geoservices_geom *g, int nested) {
  int t = lua_gettop(L);
  lua_Integer i, j, n, m;
  luaL_checktype(L, t, LUA_TTABLE);
  n = (lua_Integer)lua_rawlen(L, t);
  for (i = 1; i <= n; i++) {
    lua_rawgeti(L, t, i);
    if (!nested) {
      lua_coordinate(L, g);
    } else {
      luaL_checktype(L, -1, LUA_TTABLE);
      if (geoservices_geom_part(g)) luaL_error(L, "store: not enough memory");
      m = (lua_Integer)lua_rawlen(L, -1);
      for (j = 1; j <= m; j++) {
        lua_rawgeti(L, -1, j);
        lua_coordinate(L, g);
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
}

/* {x, y, ...} at idx into v (a third and fourth number as they come, NaN
 * otherwise); 1 when x and y are numbers. */
static int lua_xyzm(lua_State *L, int idx, double v[4]) {
  int ok;
  v[0] = v[1] = v[2] = v[3] = NAN;
  if (lua_type(L, idx) != LUA_TTABLE) return 0;
  ok = lua_number_at(L, idx, 1, &v[0]) && lua_number_at(L, idx, 2, &v[1]);
  if (!lua_number_at(L, idx, 3, &v[2])) v[2] = NAN;
  if (!lua_number_at(L, idx, 4, &v[3])) v[3] = NAN;
  return ok;
}

/* A curve object at the top ({c = {end, point}}, {a = {end, centre, minor,
 * clockwise, ...}}, {b = {end, c1, c2}}, or another kind) as a segment. */
static void lua_curve_object(lua_State *L, geoservices_geom *g) {
  static const char *const kinds[] = {"c", "a", "b"};
  geoservices_segment sg;
  int t = lua_gettop(L), k, list = 0;
  lua_Integer j;
  memset(&sg, 0, sizeof sg);
  for (k = 0; k < 3 && !list; k++) {
    if (lua_getfield(L, t, kinds[k]) == LUA_TTABLE) {
      sg.kind = kinds[k][0];
      list = lua_gettop(L);
    } else {
      lua_pop(L, 1);
    }
  }
  if (!list) { /* another kind: a straight line to its end, the JSON kept */
    lua_pushnil(L);
    while (lua_next(L, t)) {
      if (lua_type(L, -1) == LUA_TTABLE) {
        lua_remove(L, -2);
        list = lua_gettop(L);
        break;
      }
      lua_pop(L, 1);
    }
  }
  if (list) {
    double v[4];
    lua_rawgeti(L, list, 1);
    sg.has_end = lua_xyzm(L, -1, sg.end);
    lua_rawgeti(L, list, 2);
    sg.has_p1 = lua_xyzm(L, -1, v);
    sg.p1[0] = v[0], sg.p1[1] = v[1];
    lua_rawgeti(L, list, 3);
    if (lua_type(L, -1) == LUA_TTABLE) {
      sg.has_p2 = lua_xyzm(L, -1, v);
      sg.p2[0] = v[0], sg.p2[1] = v[1];
    }
    lua_pop(L, 3);
    for (j = 3; j <= 7; j++) { /* minor, clockwise, rotation, axis, ratio */
      double *slot[] = {&sg.minor, &sg.clockwise, &sg.rotation, &sg.axis, &sg.ratio};
      int type = lua_rawgeti(L, list, j);
      if (type == LUA_TNUMBER) *slot[j - 3] = (double)lua_tonumber(L, -1);
      else if (type == LUA_TBOOLEAN) *slot[j - 3] = lua_toboolean(L, -1);
      lua_pop(L, 1);
      if (type != LUA_TNUMBER && type != LUA_TBOOLEAN) break;
      sg.numbers++;
    }
  }
  lua_settop(L, t);
  if (geoservices_geom_segment(g, &sg)) luaL_error(L, "store: not enough memory");
}

/* curvePaths or curveRings at the top: parts of coordinates and curve objects. */
static void lua_curve_parts(lua_State *L, geoservices_geom *g) {
  int t = lua_gettop(L);
  lua_Integer i, j, n, m;
  luaL_checktype(L, t, LUA_TTABLE);
  n = (lua_Integer)lua_rawlen(L, t);
  for (i = 1; i <= n; i++) {
    lua_rawgeti(L, t, i);
    luaL_checktype(L, -1, LUA_TTABLE);
    if (geoservices_geom_part(g)) luaL_error(L, "store: not enough memory");
    m = (lua_Integer)lua_rawlen(L, -1);
    for (j = 1; j <= m; j++) {
      int curve = 0;
      lua_rawgeti(L, -1, j);
      if (lua_type(L, -1) == LUA_TTABLE) { /* not an array: a curve object */
        curve = lua_rawgeti(L, -1, 1) == LUA_TNIL;
        lua_pop(L, 1);
      }
      if (curve) lua_curve_object(L, g);
      else lua_coordinate(L, g);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
}

/* A boolean member of a geometry table: 1 or 0; -1 when absent or not a boolean. */
static int lua_flag(lua_State *L, int idx, const char *name) {
  int t = lua_getfield(L, idx, name), v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return t == LUA_TBOOLEAN ? v : -1;
}

/* A number member of a geometry table, NaN otherwise. */
static double lua_ordinate(lua_State *L, int idx, const char *name) {
  double v = lua_getfield(L, idx, name) == LUA_TNUMBER ? (double)lua_tonumber(L, -1) : NAN;
  lua_pop(L, 1);
  return v;
}

/* An Esri geometry table at idx into g (kind from its members), carrying Z
 * and M as has_z / has_m say (the layer's). The coordinates' third and fourth
 * numbers mean what the table's own hasZ / hasM say, else what the layer's do. */
static void lua_geometry(lua_State *L, int idx, geoservices_geom *g, int has_z, int has_m) {
  int had_z, had_m;
  idx = lua_absindex(L, idx);
  geoservices_geom_reset(g, GEOM_NONE);
  geoservices_geom_dims(g, has_z, has_m);
  had_z = lua_flag(L, idx, "hasZ");
  had_m = lua_flag(L, idx, "hasM");
  if (had_z < 0) had_z = has_z;
  if (had_m < 0) had_m = has_m;
  if (lua_getfield(L, idx, "curveRings") != LUA_TNIL) { /* true curves first: paths beside them are densified */
    geoservices_geom_reset(g, GEOM_POLYGON);
    lua_curve_parts(L, g);
  } else if (lua_getfield(L, idx, "curvePaths") != LUA_TNIL) {
    geoservices_geom_reset(g, GEOM_POLYLINE);
    lua_curve_parts(L, g);
  } else if (lua_getfield(L, idx, "rings") != LUA_TNIL) {
    geoservices_geom_reset(g, GEOM_POLYGON);
    lua_parts(L, g, 1);
  } else if (lua_getfield(L, idx, "paths") != LUA_TNIL) {
    geoservices_geom_reset(g, GEOM_POLYLINE);
    lua_parts(L, g, 1);
  } else if (lua_getfield(L, idx, "points") != LUA_TNIL) {
    geoservices_geom_reset(g, GEOM_MULTIPOINT);
    lua_parts(L, g, 0);
  } else {
    int tx = lua_getfield(L, idx, "x"), ty = lua_getfield(L, idx, "y");
    if (tx != LUA_TNIL || ty != LUA_TNIL) { /* a point's z and m are named: no flags needed */
      geoservices_geom_reset(g, GEOM_POINT);
      if (tx == LUA_TNUMBER && ty == LUA_TNUMBER &&
          geoservices_geom_point_zm(g, (double)lua_tonumber(L, -2), (double)lua_tonumber(L, -1),
                                    lua_ordinate(L, idx, "z"), lua_ordinate(L, idx, "m")))
        luaL_error(L, "store: not enough memory");
    }
    lua_pop(L, 2);
  }
  if (g->kind != GEOM_POINT) geoservices_geom_ordinates_as(g, had_z, had_m);
  lua_settop(L, idx);
}

static void push_array(lua_State *L, int n, int array_mt) {
  lua_createtable(L, n, 0);
  lua_pushvalue(L, array_mt);
  lua_setmetatable(L, -2);
}

/* Whether some point of g has a value of ordinate `which` (0 z, 1 m). */
static int has_values(const geoservices_geom *g, int which) {
  size_t k;
  if (!(which == 0 ? g->has_z : g->has_m)) return 0;
  for (k = 0; k < g->npoints; k++)
    if (!isnan(g->zm[2 * k + (size_t)which])) return 1;
  return 0;
}

/* An ordinate of an Esri coordinate array: the number, or the JSON null for
 * a point without one (NaN is no JSON). */
static void push_ordinate(lua_State *L, double v) {
  if (isnan(v)) lua_pushlightuserdata(L, NULL);
  else lua_pushnumber(L, v);
}

/* [x, y], [x, y, z], [x, y, m] or [x, y, z, m] of point k. */
static void push_coordinate(lua_State *L, const geoservices_geom *g, size_t k, int with_z, int with_m,
                            int array_mt) {
  lua_Integer n = 2;
  push_array(L, 2 + with_z + with_m, array_mt);
  lua_pushnumber(L, g->xy[2 * k]);
  lua_rawseti(L, -2, 1);
  lua_pushnumber(L, g->xy[2 * k + 1]);
  lua_rawseti(L, -2, 2);
  if (with_z) {
    push_ordinate(L, g->zm[2 * k]);
    lua_rawseti(L, -2, ++n);
  }
  if (with_m) {
    push_ordinate(L, g->zm[2 * k + 1]);
    lua_rawseti(L, -2, ++n);
  }
}

/* Pushes the Esri table of g: {x =, y =}, {points =}, {paths =} or {rings =}.
 * Z and M as the server writes them: a point's z and m members (absent when
 * it has none), the others' coordinate arrays with hasZ / hasM set (an
 * ordinate no point of the geometry has is left out: the geometry it came
 * from had none). */
static void push_geometry(lua_State *L, const geoservices_geom *g) {
  static const char *const member[] = {NULL, NULL, "points", "paths", "rings"};
  size_t i, k;
  int array_mt, with_z = has_values(g, 0), with_m = has_values(g, 1);
  luaL_checkstack(L, 6, "store: geometry");
  geoservices_push_json_array_mt(L);
  array_mt = lua_gettop(L);
  lua_createtable(L, 0, 4);
  if (g->kind == GEOM_POINT) {
    if (g->npoints) {
      lua_pushnumber(L, g->xy[0]);
      lua_setfield(L, -2, "x");
      lua_pushnumber(L, g->xy[1]);
      lua_setfield(L, -2, "y");
      if (with_z) {
        lua_pushnumber(L, g->zm[0]);
        lua_setfield(L, -2, "z");
      }
      if (with_m) {
        lua_pushnumber(L, g->zm[1]);
        lua_setfield(L, -2, "m");
      }
    } else {
      lua_pushlightuserdata(L, NULL); /* an empty point: {"x": null} */
      lua_setfield(L, -2, "x");
    }
  } else if (g->kind == GEOM_MULTIPOINT) {
    push_array(L, (int)g->npoints, array_mt);
    for (k = 0; k < g->npoints; k++) {
      push_coordinate(L, g, k, with_z, with_m, array_mt);
      lua_rawseti(L, -2, (lua_Integer)k + 1);
    }
    lua_setfield(L, -2, member[GEOM_MULTIPOINT]);
  } else if ((g->kind == GEOM_POLYLINE || g->kind == GEOM_POLYGON) && g->has_arcs) {
    /* curvePaths / curveRings: an arc as {"c": [its end, its middle]} */
    push_array(L, (int)g->nparts, array_mt);
    for (i = 0; i < g->nparts; i++) {
      size_t first = g->parts[i], end = geoservices_geom_part_end(g, i);
      lua_Integer n = 0;
      push_array(L, 0, array_mt);
      for (k = first; k < end; k++) {
        if (geoservices_geom_is_arc_middle(g, i, k)) {
          lua_createtable(L, 0, 1);
          push_array(L, 2, array_mt);
          push_coordinate(L, g, k + 1, with_z, with_m, array_mt);
          lua_rawseti(L, -2, 1);
          push_array(L, 2, array_mt);
          lua_pushnumber(L, g->xy[2 * k]);
          lua_rawseti(L, -2, 1);
          lua_pushnumber(L, g->xy[2 * k + 1]);
          lua_rawseti(L, -2, 2);
          lua_rawseti(L, -2, 2);
          lua_setfield(L, -2, "c");
          k++; /* its end is in the curve object */
        } else {
          push_coordinate(L, g, k, with_z, with_m, array_mt);
        }
        lua_rawseti(L, -2, ++n);
      }
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, g->kind == GEOM_POLYLINE ? "curvePaths" : "curveRings");
  } else if (g->kind == GEOM_POLYLINE || g->kind == GEOM_POLYGON) {
    push_array(L, (int)g->nparts, array_mt);
    for (i = 0; i < g->nparts; i++) {
      size_t first = g->parts[i], end = geoservices_geom_part_end(g, i);
      push_array(L, (int)(end - first), array_mt);
      for (k = first; k < end; k++) {
        push_coordinate(L, g, k, with_z, with_m, array_mt);
        lua_rawseti(L, -2, (lua_Integer)(k - first) + 1);
      }
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, member[g->kind]);
  }
  if (g->kind != GEOM_POINT && with_z) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "hasZ");
  }
  if (g->kind != GEOM_POINT && with_m) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "hasM");
  }
  lua_remove(L, array_mt);
}

/* A geometry and a blob buffer owned by a userdata, so that a Lua error
 * while reading a table leaks nothing (__gc frees them). */
#define SCRATCH_MT "geoservices.store.scratch"
typedef struct scratch {
  geoservices_geom g;
  geoservices_buf out;
} scratch;

static int l_scratch_gc(lua_State *L) {
  scratch *sc = (scratch *)luaL_checkudata(L, 1, SCRATCH_MT);
  geoservices_geom_free(&sc->g);
  geoservices_buf_free(&sc->out);
  return 0;
}

static scratch *new_scratch(lua_State *L) {
  scratch *sc = (scratch *)lua_newuserdatauv(L, sizeof *sc, 0);
  geoservices_geom_init(&sc->g);
  geoservices_buf_init(&sc->out, 0);
  luaL_setmetatable(L, SCRATCH_MT);
  return sc;
}

/* gpkg_geometry(esri_geometry, srs_id) -> GeoPackage blob, envelope {minx, maxx, miny, maxy} or nil.
 * Z and M as the geometry says: its hasZ / hasM, a point's z / m. */
static int l_gpkg_geometry(lua_State *L) {
  double env[4];
  lua_Integer srs = luaL_optinteger(L, 2, 0);
  scratch *sc;
  int i, has_z, has_m;
  luaL_checktype(L, 1, LUA_TTABLE);
  has_z = lua_flag(L, 1, "hasZ") == 1 || !isnan(lua_ordinate(L, 1, "z"));
  has_m = lua_flag(L, 1, "hasM") == 1 || !isnan(lua_ordinate(L, 1, "m"));
  sc = new_scratch(L);
  lua_geometry(L, 1, &sc->g, has_z, has_m);
  if (sc->g.kind == GEOM_NONE) return luaL_argerror(L, 1, "not an Esri geometry (x/y, points, paths or rings)");
  if (geoservices_geom_encode(&sc->g, (int32_t)srs, &sc->out, env)) return luaL_error(L, "store: not enough memory");
  lua_pushlstring(L, sc->out.data, sc->out.len);
  if (isnan(env[0])) {
    lua_pushnil(L);
  } else {
    lua_createtable(L, 4, 0);
    for (i = 0; i < 4; i++) {
      lua_pushnumber(L, env[i]);
      lua_rawseti(L, -2, i + 1);
    }
  }
  return 2;
}

/* esri_geometry(blob) -> Esri geometry table, srs_id; or nil, message */
static int l_esri_geometry(lua_State *L) {
  size_t len;
  const char *blob = luaL_checklstring(L, 1, &len);
  int32_t srs = 0;
  const char *error = NULL;
  scratch *sc = new_scratch(L);
  if (geoservices_geom_decode(&sc->g, (const unsigned char *)blob, len, &srs, &error) != 0) {
    luaL_pushfail(L);
    lua_pushstring(L, error);
    return 2;
  }
  push_geometry(L, &sc->g);
  lua_pushinteger(L, srs);
  return 2;
}

/* ---- features by hand --------------------------------------------------------- */

/* put(layer_id, {attributes = {...}, geometry = {...}}) -> true: INSERT OR
 * REPLACE of the whole row, as apply does for a downloaded add; a column
 * the attributes do not name (a null names it) gets the table's default. */
static int l_store_put(lua_State *L) {
  store_ud *u = check_store(L, 1);
  geoservices_store_layer *l = check_layer(L, u, 2);
  geoservices_store *s = u->store;
  luaL_checktype(L, 3, LUA_TTABLE);
  lua_settop(L, 3);
  geoservices_store_bind_begin(l);
  if (lua_getfield(L, 3, "attributes") == LUA_TTABLE) { /* index 4 */
    lua_pushnil(L);
    while (lua_next(L, 4)) {
      size_t len, col;
      const char *name;
      int rc = 0;
      if (lua_type(L, -2) != LUA_TSTRING) {
        geoservices_store_bind_begin(l);
        return luaL_error(L, "store:put: attribute names must be strings");
      }
      name = lua_tolstring(L, -2, &len);
      col = geoservices_store_find_column(l, name, len, GEOSERVICES_STORE_NONE);
      if (col != GEOSERVICES_STORE_NONE) {
        geoservices_store_given(l, col);
        switch (lua_type(L, -1)) {
          case LUA_TNUMBER:
            if (lua_isinteger(L, -1)) rc = geoservices_store_bind_integer(s, l, col, (int64_t)lua_tointeger(L, -1));
            else rc = geoservices_store_bind_double(s, l, col, (double)lua_tonumber(L, -1));
            break;
          case LUA_TSTRING: {
            size_t n;
            const char *v = lua_tolstring(L, -1, &n); /* alive in the attributes table */
            rc = geoservices_store_bind_text(s, l, col, v, n);
            break;
          }
          case LUA_TBOOLEAN: rc = geoservices_store_bind_integer(s, l, col, lua_toboolean(L, -1)); break;
          case LUA_TLIGHTUSERDATA:
            if (lua_touserdata(L, -1) == NULL) break; /* the JSON null */
            /* fallthrough */
          default:
            geoservices_store_bind_begin(l);
            return luaL_error(L, "store:put: attribute '%s' is a %s", name, luaL_typename(L, -1));
        }
      }
      if (rc) {
        geoservices_store_bind_begin(l);
        return push_store_fail(L, u);
      }
      lua_pop(L, 1);
    }
  } else if (!lua_isnil(L, 4)) {
    return luaL_error(L, "store:put: attributes must be a table");
  }
  if (geoservices_store_bind_defaults(s, l)) {
    geoservices_store_bind_begin(l);
    return push_store_fail(L, u);
  }
  geoservices_geom_reset(&s->geom, GEOM_NONE);
  geoservices_buf_reset(&s->json);
  if (lua_getfield(L, 3, "geometry") == LUA_TTABLE && l->geom_col) {
    lua_geometry(L, -1, &s->geom, l->has_z, l->has_m);
    /* a geometry the blob holds only approximately is kept as given (apply.h) */
    if (s->geom.inexact && s->geom.kind != GEOM_NONE) geoservices_json_encode_into(L, -1, &s->json);
    if (geoservices_store_bind_geometry(s, l)) {
      geoservices_store_bind_begin(l);
      return push_store_fail(L, u);
    }
  }
  if (geoservices_store_upsert(s, l) ||
      geoservices_store_keep_original(s, l, s->json.len ? s->json.data : NULL, s->json.len)) {
    geoservices_store_bind_begin(l);
    return push_store_fail(L, u);
  }
  sqlite3_clear_bindings(l->upsert);
  lua_pushboolean(L, 1);
  return 1;
}

/* get(layer_id, global_id) -> {attributes = {...}, geometry = {...}}, or nil
 * when there is no such feature. NULL columns are the JSON null, dates are
 * epoch milliseconds again. */
static int l_store_get(lua_State *L) {
  store_ud *u = check_store(L, 1);
  geoservices_store_layer *l = check_layer(L, u, 2);
  size_t len, n;
  const char *gid = luaL_checklstring(L, 3, &len);
  char norm[40];
  const char *sql;
  sqlite3_stmt *st;
  int rc = SQLITE_OK, ncols, i;
  scratch *sc;
  /* SELECT * FROM "t" WHERE "gid" = ?1, through the statement cache and the GlobalID index (its key: substr) */
  {
    char *text = sqlite3_mprintf("SELECT * FROM \"%w\" WHERE substr(\"%w\", 2, 8) = substr(?1, 2, 8) AND +\"%w\" = ?1",
                                 l->table, l->cols[l->gid_col].name, l->cols[l->gid_col].name);
    if (!text) return luaL_error(L, "store: not enough memory");
    lua_pushstring(L, text);
    sqlite3_free(text);
    sql = lua_tostring(L, -1);
  }
  st = statement(u, sql, &rc);
  if (!st) return push_db_fail(L, u, rc);
  n = geoservices_store_normalize_guid(gid, len, norm);
  if (n) sqlite3_bind_text(st, 1, norm, (int)n, SQLITE_STATIC);
  else sqlite3_bind_text(st, 1, gid, (int)len, SQLITE_STATIC);
  rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) {
    finish_stmt(st);
    lua_pushnil(L);
    return 1;
  }
  if (rc != SQLITE_ROW) {
    finish_stmt(st);
    return push_db_fail(L, u, rc);
  }
  sc = new_scratch(L);
  ncols = sqlite3_column_count(st);
  lua_createtable(L, 0, 2);
  lua_createtable(L, 0, ncols);
  for (i = 0; i < ncols; i++) {
    const char *name = sqlite3_column_name(st, i);
    size_t col = geoservices_store_find_column(l, name, strlen(name), GEOSERVICES_STORE_NONE);
    int type = sqlite3_column_type(st, i);
    if (l->geom_col && strcmp(name, l->geom_col) == 0) {
      int32_t srs;
      const char *error;
      const void *blob = sqlite3_column_blob(st, i);
      size_t blob_len = (size_t)sqlite3_column_bytes(st, i);
      int kept = type == SQLITE_BLOB ? geoservices_store_original_of(u->store, l, n ? norm : gid, n ? n : len, blob,
                                                                     blob_len) : 0;
      if (kept < 0) {
        finish_stmt(st);
        return push_store_fail(L, u);
      }
      if (kept) { /* the server's own JSON: the blob is still the one made from it */
        int top = lua_gettop(L);
        if (geoservices_json_decode_buf(L, &u->store->json, 0) == 1 && lua_istable(L, -1)) {
          lua_setfield(L, -3, "geometry");
          continue;
        }
        lua_settop(L, top); /* a kept text that is no JSON object (edited by hand): the blob's */
      }
      if (type == SQLITE_BLOB && geoservices_geom_decode(&sc->g, blob, blob_len, &srs, &error) == 0) {
        push_geometry(L, &sc->g);
        lua_setfield(L, -3, "geometry");
      }
      continue;
    }
    if (type == SQLITE_NULL) {
      lua_pushlightuserdata(L, NULL);
    } else if (col != GEOSERVICES_STORE_NONE && l->cols[col].type == STORE_COL_DATE && type == SQLITE_TEXT) {
      int64_t ms;
      const char *text = (const char *)sqlite3_column_text(st, i);
      if (geoservices_ms_from_iso(text, (size_t)sqlite3_column_bytes(st, i), &ms) == 0)
        lua_pushinteger(L, (lua_Integer)ms);
      else
        lua_pushstring(L, text);
    } else {
      push_column(L, st, i);
    }
    lua_setfield(L, -2, name);
  }
  finish_stmt(st);
  lua_setfield(L, -2, "attributes");
  return 1;
}

/* remove(layer_id, global_id) -> number of rows deleted (0 or 1) */
static int l_store_remove(lua_State *L) {
  store_ud *u = check_store(L, 1);
  geoservices_store_layer *l = check_layer(L, u, 2);
  size_t len;
  const char *gid = luaL_checklstring(L, 3, &len);
  int n = geoservices_store_remove(u->store, l, gid, len);
  if (n < 0) return push_store_fail(L, u);
  lua_pushinteger(L, n);
  return 1;
}

/* ---- the fast path ------------------------------------------------------------ */

typedef struct apply_ctx {
  lua_State *L;
  int fn;        /* stack index of the receiver, 0 for none */
  int array_mt;
  lua_Integer delivered;
} apply_ctx;

/* The records the store does not apply go to fn(kind, layer_id, value, key),
 * as Records:drain would deliver them. A Lua error is caught here and stays
 * on the stack top; apply() raises it again once the tape is consumed. */
static int deliver_other(void *ctxp, int kind, int has_layer, int64_t layer, const char *value, const char *key,
                         size_t key_len) {
  apply_ctx *ctx = (apply_ctx *)ctxp;
  lua_State *L = ctx->L;
  if (!ctx->fn) return 0;
  lua_pushvalue(L, ctx->fn);
  lua_pushstring(L, kind == GEOSERVICES_STORE_LAYER ? "layer" : geoservices_record_kind_names[kind]);
  if (has_layer) lua_pushinteger(L, (lua_Integer)layer);
  else lua_pushnil(L);
  if (value) geoservices_records_push_tape_value(L, &value, ctx->array_mt);
  else lua_pushnil(L);
  if (key_len) lua_pushlstring(L, key, key_len);
  else lua_pushnil(L);
  if (kind != GEOSERVICES_STORE_LAYER) ctx->delivered++;
  return lua_pcall(L, 4, 0, 0) == LUA_OK ? 0 : 2;
}

/* apply(records[, fn]) -> applied, delivered: drains the complete records of
 * a core.records() extractor: features and attachments into the store (inside
 * the caller's transaction), the others to fn(kind, layer_id, value, key).
 * A failure still drains the tape and returns nil, message, code (roll back). */
static int l_store_apply(lua_State *L) {
  store_ud *u = check_store(L, 1);
  geoservices_records_ud *r = geoservices_check_records(L, 2);
  geoservices_store_cursor cursor;
  apply_ctx ctx;
  uint64_t before = 0, after = 0;
  size_t len, k;
  const char *tape;
  int rc;
  if (!r->records) return luaL_error(L, "store:apply: the Records is closed");
  if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TFUNCTION);
  if (sqlite3_get_autocommit(u->db)) return luaL_error(L, "store:apply needs a transaction (store:begin())");
  if (u->applying) return luaL_error(L, "store:apply is not re-entrant");
  lua_settop(L, 3);
  ctx.L = L;
  ctx.fn = lua_isnil(L, 3) ? 0 : 3;
  ctx.delivered = 0;
  geoservices_push_json_array_mt(L);
  ctx.array_mt = lua_gettop(L);
  cursor.has_id = r->replay.has_id;
  cursor.id_entry = r->replay.id_entry;
  cursor.layer_id = r->replay.layer_id;
  for (k = 0; k < RECORD_KIND_COUNT; k++) before += u->store->applied[k];
  tape = geoservices_records_tape(r->records, &len);
  u->applying = 1;
  rc = geoservices_store_apply(u->store, &cursor, tape, len, deliver_other, &ctx);
  u->applying = 0;
  r->replay.has_id = cursor.has_id;
  r->replay.id_entry = cursor.id_entry;
  r->replay.layer_id = cursor.layer_id;
  geoservices_records_consume(r->records);
  if (rc == 2) return lua_error(L); /* the receiver's error, on the top */
  if (rc != 0) return push_store_fail(L, u);
  for (k = 0; k < RECORD_KIND_COUNT; k++) after += u->store->applied[k];
  lua_pushinteger(L, (lua_Integer)(after - before));
  lua_pushinteger(L, ctx.delivered);
  return 2;
}

/* applied() -> {add = n, update = n, delete = n, add_attachment = n, ...}
 * records applied since the Store was opened */
static int l_store_applied(lua_State *L) {
  store_ud *u = check_store(L, 1);
  int k;
  lua_newtable(L);
  for (k = 0; k < RECORD_KIND_COUNT; k++) {
    if (!u->store->applied[k]) continue;
    lua_pushinteger(L, (lua_Integer)u->store->applied[k]);
    lua_setfield(L, -2, geoservices_record_kind_names[k]);
  }
  return 1;
}

/* db:waiting() -> the records read that wait for their layer entry's id
 * (spooled: store/spool.h); a fill's progress counts them as read. */
static int l_store_waiting(lua_State *L) {
  store_ud *u = check_store(L, 1);
  lua_pushinteger(L, (lua_Integer)u->store->waiting.count);
  return 1;
}

/* ---- the class -------------------------------------------------------------- */

void geoservices_open_store(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"close", l_store_close},
    {"exec", l_store_exec},
    {"run", l_store_run},
    {"rows", l_store_rows},
    {"begin", l_store_begin},
    {"commit", l_store_commit},
    {"rollback", l_store_rollback},
    {"in_transaction", l_store_in_transaction},
    {"path", l_store_path},
    {"layer", l_store_layer},
    {"put", l_store_put},
    {"get", l_store_get},
    {"remove", l_store_remove},
    {"apply", l_store_apply},
    {"applied", l_store_applied},
    {"waiting", l_store_waiting},
    {"blob_from_file", l_store_blob_from_file},
    {"blob_to_file", l_store_blob_to_file},
    {NULL, NULL},
  };
  static const luaL_Reg meta[] = {
    {"__gc", l_store_close},
    {"__close", l_store_close},
    {"__tostring", l_store_tostring},
    {NULL, NULL},
  };
  static const luaL_Reg scratch_meta[] = {
    {"__gc", l_scratch_gc},
    {NULL, NULL},
  };
  geoservices_new_class(L, STORE_MT, methods, meta);
  geoservices_new_class(L, SCRATCH_MT, NULL, scratch_meta);
  lua_pushcfunction(L, l_store_open);
  lua_setfield(L, -2, "store_open");
  lua_pushcfunction(L, l_gpkg_geometry);
  lua_setfield(L, -2, "gpkg_geometry");
  lua_pushcfunction(L, l_esri_geometry);
  lua_setfield(L, -2, "esri_geometry");
  lua_pushstring(L, sqlite3_libversion());
  lua_setfield(L, -2, "sqlite_version");
  geoservices_open_srs(L); /* core.srs_definition (store/lua_srs.c) */
}
