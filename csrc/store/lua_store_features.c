/* Store:layer registers a feature table; Store:put, get and remove write,
 * read and delete one feature by hand (the Lua layer's local edits), through
 * the same binding as apply (store/apply.h). */
#include "store/lua_store_internal.h"

#include <string.h>

#include "common.h"
#include "json/lua_decode.h"
#include "store/isotime.h"

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
  store_ud *u = geoservices_check_store(L, 1);
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
    return geoservices_store_push_store_fail(L, u);
  lua_pushboolean(L, 1);
  return 1;
}

static geoservices_store_layer *check_layer(lua_State *L, store_ud *u, int idx) {
  lua_Integer id = luaL_checkinteger(L, idx);
  geoservices_store_layer *l = geoservices_store_layer_of(u->store, id);
  if (!l) luaL_error(L, "store: layer %I is not registered", id);
  return l;
}

/* ---- features by hand --------------------------------------------------------- */

/* put(layer_id, {attributes = {...}, geometry = {...}}) -> true: INSERT OR
 * REPLACE of the whole row, as apply does for a downloaded add; a column
 * the attributes do not name (a null names it) gets the table's default. */
/* The upsert of a put, outside apply: the R-tree entry written here as apply
 * writes it (the standard update trigger's INSERT OR REPLACE into the R-tree
 * would take the upsert's own conflict handling, ABORT, and fail on the
 * entry already there). */
static int put_row(geoservices_store *s, geoservices_store_layer *l) {
  int rc, state = l->rtree_state;
  if (s->bulk) return geoservices_store_upsert(s, l);
  s->bulk = 1;
  l->rtree_state = -1;
  rc = geoservices_store_upsert(s, l);
  s->bulk = 0;
  l->rtree_state = state;
  return rc;
}

static int l_store_put(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
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
        return geoservices_store_push_store_fail(L, u);
      }
      lua_pop(L, 1);
    }
  } else if (!lua_isnil(L, 4)) {
    return luaL_error(L, "store:put: attributes must be a table");
  }
  if (geoservices_store_bind_defaults(s, l)) {
    geoservices_store_bind_begin(l);
    return geoservices_store_push_store_fail(L, u);
  }
  geoservices_geom_reset(&s->geom, GEOM_NONE);
  geoservices_buf_reset(&s->json);
  if (lua_getfield(L, 3, "geometry") == LUA_TTABLE && l->geom_col) {
    geoservices_store_lua_geometry(L, -1, &s->geom, l->has_z, l->has_m);
    /* a geometry the blob holds only approximately is kept as given (apply.h) */
    if (s->geom.inexact && s->geom.kind != GEOM_NONE) geoservices_json_encode_into(L, -1, &s->json);
    if (geoservices_store_bind_geometry(s, l)) {
      geoservices_store_bind_begin(l);
      return geoservices_store_push_store_fail(L, u);
    }
  }
  if (put_row(s, l) ||
      geoservices_store_keep_original(s, l, s->json.len ? s->json.data : NULL, s->json.len)) {
    geoservices_store_bind_begin(l);
    return geoservices_store_push_store_fail(L, u);
  }
  sqlite3_clear_bindings(l->upsert);
  lua_pushboolean(L, 1);
  return 1;
}

/* get(layer_id, global_id) -> {attributes = {...}, geometry = {...}}, or nil
 * when there is no such feature. NULL columns are the JSON null, dates are
 * epoch milliseconds again. */
static int l_store_get(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  geoservices_store_layer *l = check_layer(L, u, 2);
  size_t len, n;
  const char *gid = luaL_checklstring(L, 3, &len);
  char norm[40];
  const char *sql;
  sqlite3_stmt *st;
  int rc = SQLITE_OK, ncols, i;
  scratch *sc;
  /* SELECT * FROM "t" WHERE "gid" = ?1, through the statement cache and a seek in the GlobalID index */
  {
    geoservices_buf b;
    char *table = sqlite3_mprintf("SELECT * FROM \"%w\" WHERE ", l->table);
    int err = !table;
    geoservices_buf_init(&b, 0);
    if (!err) err = geoservices_buf_append(&b, table, strlen(table)) | geoservices_store_put_gid_match(&b, l, 1);
    sqlite3_free(table);
    if (!err) lua_pushlstring(L, b.data, b.len);
    geoservices_buf_free(&b);
    if (err) return luaL_error(L, "store: not enough memory");
    sql = lua_tostring(L, -1);
  }
  st = geoservices_store_statement(u, sql, &rc);
  if (!st) return geoservices_store_push_db_fail(L, u, rc);
  n = geoservices_store_normalize_guid(gid, len, norm);
  if (n) sqlite3_bind_text(st, 1, norm, (int)n, SQLITE_STATIC);
  else sqlite3_bind_text(st, 1, gid, (int)len, SQLITE_STATIC);
  rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) {
    geoservices_store_finish_stmt(st);
    lua_pushnil(L);
    return 1;
  }
  if (rc != SQLITE_ROW) {
    geoservices_store_finish_stmt(st);
    return geoservices_store_push_db_fail(L, u, rc);
  }
  sc = geoservices_store_new_scratch(L);
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
        geoservices_store_finish_stmt(st);
        return geoservices_store_push_store_fail(L, u);
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
        geoservices_store_push_geometry(L, &sc->g);
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
      geoservices_store_push_column(L, st, i);
    }
    lua_setfield(L, -2, name);
  }
  geoservices_store_finish_stmt(st);
  lua_setfield(L, -2, "attributes");
  return 1;
}

/* remove(layer_id, global_id) -> number of rows deleted (0 or 1) */
static int l_store_remove(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  geoservices_store_layer *l = check_layer(L, u, 2);
  size_t len;
  const char *gid = luaL_checklstring(L, 3, &len);
  int n = geoservices_store_remove(u->store, l, gid, len);
  if (n < 0) return geoservices_store_push_store_fail(L, u);
  lua_pushinteger(L, n);
  return 1;
}

const luaL_Reg geoservices_store_feature_methods[] = {
  {"layer", l_store_layer},
  {"put", l_store_put},
  {"get", l_store_get},
  {"remove", l_store_remove},
  {NULL, NULL},
};
