/* Form encoding for Lua: urlencode(s), urldecode(s), form_text(v) and
 * form_encode(fields), the last also used by request bodies (request.c);
 * fields are {name, value} pairs, a flat list name, value, name, value...,
 * or a map (see geoservices_form_encode_table in net/request.h).
 * Values may be strings, numbers or booleans, or tables, which are written as
 * JSON (json/lua_encode.c) straight into the form. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/request.h"
#include "net/urlencode.h"

/* Converts the scalar at idx to its form text; raises for anything else. */
static const char *scalar_text(lua_State *L, int idx, size_t *len, char *scratch, const char *what) {
  switch (lua_type(L, idx)) {
    case LUA_TSTRING:
      return lua_tolstring(L, idx, len);
    case LUA_TBOOLEAN:
      *len = lua_toboolean(L, idx) ? 4 : 5;
      return lua_toboolean(L, idx) ? "true" : "false";
    case LUA_TNUMBER:
      if (lua_isinteger(L, idx)) {
        *len = (size_t)snprintf(scratch, 32, "%lld", (long long)lua_tointeger(L, idx));
      } else {
        /* 17 significant digits: tostring keeps only 14 and loses coordinates */
        *len = (size_t)snprintf(scratch, 32, "%.17g", (double)lua_tonumber(L, idx));
      }
      return scratch;
    default:
      luaL_error(L, "form %s: expected string, number, boolean or table, got %s", what,
                 luaL_typename(L, idx));
      return NULL;
  }
}

static geoservices_buf *new_scratch(lua_State *L);

/* A table value is written as JSON straight into a scratch buffer and
 * percent-encoded from there: the edits of a large sync never become a Lua
 * string. */
static void append_field(lua_State *L, geoservices_buf *b, int name_idx, int value_idx) {
  char scratch_name[32], scratch_value[32];
  size_t name_len, value_len;
  const char *name = scalar_text(L, name_idx, &name_len, scratch_name, "field name");
  const char *value;
  geoservices_buf *json = NULL;
  value_idx = lua_absindex(L, value_idx);
  if (lua_type(L, value_idx) == LUA_TTABLE) {
    json = new_scratch(L);
    geoservices_json_encode_into(L, value_idx, json);
    value = json->data ? json->data : "";
    value_len = json->len;
  } else {
    value = scalar_text(L, value_idx, &value_len, scratch_value, "value");
  }
  if ((b->len && geoservices_buf_putc(b, '&')) || geoservices_urlencode_append(b, name, name_len) ||
      geoservices_buf_putc(b, '=') || geoservices_urlencode_append(b, value, value_len))
    luaL_error(L, "form: not enough memory");
  if (json) {
    geoservices_buf_free(json);
    lua_pop(L, 1);
  }
}

/* Map keys are sorted so that a given table always encodes the same way. */
static int sort_keys(lua_State *L, int idx) {
  int n = 0;
  lua_newtable(L);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, ++n);
  }
  lua_getglobal(L, "table");
  lua_getfield(L, -1, "sort");
  lua_remove(L, -2);
  lua_pushvalue(L, -2);
  lua_call(L, 1, 0); /* keys of mixed types raise here, as they should */
  return n;
}

void geoservices_form_encode_table(lua_State *L, int idx, geoservices_buf *b) {
  int first;
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  first = lua_rawgeti(L, idx, 1);
  if (first == LUA_TSTRING) { /* flat array: name, value, name, value... (no table per pair) */
    lua_Integer i, n = (lua_Integer)lua_rawlen(L, idx);
    lua_pop(L, 1);
    if (n % 2) luaL_error(L, "form: a flat list of fields needs a value after every name");
    for (i = 1; i < n; i += 2) {
      lua_rawgeti(L, idx, i);
      lua_rawgeti(L, idx, i + 1);
      append_field(L, b, -2, -1);
      lua_pop(L, 2);
    }
  } else if (first == LUA_TTABLE) { /* array of {name, value} pairs */
    lua_Integer i, n = (lua_Integer)lua_rawlen(L, idx);
    lua_pop(L, 1);
    for (i = 1; i <= n; i++) {
      if (lua_rawgeti(L, idx, i) != LUA_TTABLE)
        luaL_error(L, "form: field %d is not a {name, value} pair", (int)i);
      lua_rawgeti(L, -1, 1);
      lua_rawgeti(L, -2, 2);
      append_field(L, b, -2, -1);
      lua_pop(L, 3);
    }
  } else {
    int i, n;
    lua_pop(L, 1);
    n = sort_keys(L, idx);
    for (i = 1; i <= n; i++) {
      lua_rawgeti(L, -1, i);
      lua_pushvalue(L, -1);
      lua_rawget(L, idx);
      append_field(L, b, -2, -1);
      lua_pop(L, 2);
    }
    lua_pop(L, 1);
  }
}

/* A userdata owning a buffer, so a raise mid-encoding frees the memory. */
static int scratch_gc(lua_State *L) {
  geoservices_buf_free((geoservices_buf *)lua_touserdata(L, 1));
  return 0;
}

static geoservices_buf *new_scratch(lua_State *L) {
  geoservices_buf *b = (geoservices_buf *)lua_newuserdatauv(L, sizeof(*b), 0);
  geoservices_buf_init(b, 0);
  if (luaL_newmetatable(L, "geoservices.FormScratch")) {
    lua_pushcfunction(L, scratch_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return b;
}

static int l_urlencode(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  geoservices_buf *b = new_scratch(L);
  if (geoservices_urlencode_append(b, s, len)) return luaL_error(L, "urlencode: not enough memory");
  lua_pushlstring(L, b->data ? b->data : "", b->len);
  geoservices_buf_free(b);
  return 1;
}

static int l_urldecode(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  geoservices_buf *b = new_scratch(L);
  if (geoservices_urldecode_append(b, s, len)) {
    luaL_pushfail(L);
    lua_pushliteral(L, "malformed percent-escape");
    return 2;
  }
  lua_pushlstring(L, b->data ? b->data : "", b->len);
  geoservices_buf_free(b);
  return 1;
}

/* form_text(v) -> the text a scalar is sent as (17-digit floats). */
static int l_form_text(lua_State *L) {
  char scratch[32];
  size_t len;
  const char *text;
  luaL_checkany(L, 1);
  text = scalar_text(L, 1, &len, scratch, "value");
  lua_pushlstring(L, text, len);
  return 1;
}

static int l_form_encode(lua_State *L) {
  geoservices_buf *b;
  luaL_checktype(L, 1, LUA_TTABLE);
  b = new_scratch(L);
  geoservices_form_encode_table(L, 1, b);
  lua_pushlstring(L, b->data ? b->data : "", b->len);
  geoservices_buf_free(b);
  return 1;
}

void geoservices_open_form(lua_State *L) {
  static const luaL_Reg functions[] = {
    {"urlencode", l_urlencode},
    {"urldecode", l_urldecode},
    {"form_encode", l_form_encode},
    {"form_text", l_form_text},
    {NULL, NULL},
  };
  luaL_setfuncs(L, functions, 0);
}
