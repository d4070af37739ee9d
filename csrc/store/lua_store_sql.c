/* Store:exec, run and rows (SQL from the Lua layer, through the statement
 * cache of lua_store.c) and the transaction: begin, commit, rollback. */
#include "store/lua_store_internal.h"

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

void geoservices_store_push_column(lua_State *L, sqlite3_stmt *st, int i) {
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

void geoservices_store_finish_stmt(sqlite3_stmt *st) {
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
}

/* exec(sql) -> true: one or more statements without parameters */
static int l_store_exec(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  const char *sql = luaL_checkstring(L, 2);
  char *msg = NULL;
  int rc = sqlite3_exec(u->db, sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK) {
    lua_pushstring(L, msg ? msg : sqlite3_errstr(rc));
    sqlite3_free(msg);
    luaL_pushfail(L);
    lua_insert(L, -2);
    lua_pushstring(L, geoservices_store_code_of(rc));
    return 3;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* run(sql, ...) -> changes, last_insert_rowid */
static int l_store_run(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  int rc = SQLITE_OK;
  sqlite3_stmt *st = geoservices_store_statement(u, luaL_checkstring(L, 2), &rc);
  if (!st) return geoservices_store_push_db_fail(L, u, rc);
  bind_args(L, st, 3);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {}
  geoservices_store_finish_stmt(st);
  if (rc != SQLITE_DONE) return geoservices_store_push_db_fail(L, u, rc);
  lua_pushinteger(L, (lua_Integer)sqlite3_changes(u->db));
  lua_pushinteger(L, (lua_Integer)sqlite3_last_insert_rowid(u->db));
  return 2;
}

/* rows(sql, ...) -> { {column = value, ...}, ... } (NULLs are absent) */
static int l_store_rows(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  int rc = SQLITE_OK, ncols, i;
  lua_Integer n = 0;
  sqlite3_stmt *st = geoservices_store_statement(u, luaL_checkstring(L, 2), &rc);
  if (!st) return geoservices_store_push_db_fail(L, u, rc);
  bind_args(L, st, 3);
  ncols = sqlite3_column_count(st);
  lua_newtable(L);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    lua_createtable(L, 0, ncols);
    for (i = 0; i < ncols; i++) {
      geoservices_store_push_column(L, st, i);
      lua_setfield(L, -2, sqlite3_column_name(st, i));
    }
    lua_rawseti(L, -2, ++n);
  }
  geoservices_store_finish_stmt(st);
  if (rc != SQLITE_DONE) return geoservices_store_push_db_fail(L, u, rc);
  return 1;
}

/* begin([mode]) -> true: BEGIN IMMEDIATE (default), DEFERRED or EXCLUSIVE */
static int l_store_begin(lua_State *L) {
  static const char *const modes[] = {"immediate", "deferred", "exclusive", NULL};
  static const char *const sql[] = {"BEGIN IMMEDIATE", "BEGIN DEFERRED", "BEGIN EXCLUSIVE"};
  store_ud *u = geoservices_check_store(L, 1);
  int mode = luaL_checkoption(L, 2, "immediate", modes);
  int rc = sqlite3_exec(u->db, sql[mode], NULL, NULL, NULL);
  if (rc != SQLITE_OK) return geoservices_store_push_db_fail(L, u, rc);
  geoservices_store_forget_extents(u->store);
  geoservices_store_drop_waiting(u->store);
  lua_pushboolean(L, 1);
  return 1;
}

/* commit() -> true: the layers' extents into gpkg_contents, then COMMIT.
 * On failure the transaction stays open (roll it back, or commit again
 * after a "busy"). */
static int l_store_commit(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  int rc;
  if (sqlite3_get_autocommit(u->db)) return luaL_error(L, "store: commit() without a transaction");
  if (geoservices_store_flush_extents(u->store) != 0) return geoservices_store_push_store_fail(L, u);
  rc = sqlite3_exec(u->db, "COMMIT", NULL, NULL, NULL);
  if (rc != SQLITE_OK) return geoservices_store_push_db_fail(L, u, rc);
  lua_pushboolean(L, 1);
  return 1;
}

/* rollback() -> true (also without a transaction: nothing to undo) */
static int l_store_rollback(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  geoservices_store_forget_extents(u->store);
  geoservices_store_drop_waiting(u->store);
  if (!sqlite3_get_autocommit(u->db)) {
    int rc = sqlite3_exec(u->db, "ROLLBACK", NULL, NULL, NULL);
    if (rc != SQLITE_OK) return geoservices_store_push_db_fail(L, u, rc);
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int l_store_in_transaction(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  lua_pushboolean(L, !sqlite3_get_autocommit(u->db));
  return 1;
}

static int l_store_path(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  const char *path = sqlite3_db_filename(u->db, "main");
  lua_pushstring(L, path ? path : "");
  return 1;
}

const luaL_Reg geoservices_store_sql_methods[] = {
  {"exec", l_store_exec},
  {"run", l_store_run},
  {"rows", l_store_rows},
  {"begin", l_store_begin},
  {"commit", l_store_commit},
  {"rollback", l_store_rollback},
  {"in_transaction", l_store_in_transaction},
  {"path", l_store_path},
  {NULL, NULL},
};
