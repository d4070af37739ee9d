/* Lua binding of the JSON encoder: json_encode, and
 * geoservices_json_encode_into for form.c (JSON form values). Integers stay
 * exact, doubles keep 17 significant digits, object keys are sorted. A table
 * is an array when it carries the JSON array metatable, which this file owns
 * (core.json_array_mt), or another metatable with __jsontype = "array"; an
 * unmarked table is an array when its keys are exactly 1..n. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "common.h"
#include "json/jsonstream.h"

#define ENCBUF_MT "geoservices.JsonEncodeBuffer"

/* ------------------------------------------------------ the array mark */

/* Its registry key is this variable's address (lua_rawsetp), so no Lua code
 * can replace it by name. Created by the first luaopen and reused after. */
static const char array_mt_key = 0;

void geoservices_push_json_array_mt(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &array_mt_key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_createtable(L, 0, 2);
  lua_pushliteral(L, "array");
  lua_setfield(L, -2, "__jsontype");
  lua_pushliteral(L, GEOSERVICES_JSON_ARRAY_MT);
  lua_setfield(L, -2, "__name");
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &array_mt_key);
}

/* ---------------------------------------------------------------- encode */

typedef struct encoder {
  geoservices_buf *b;
  int array_mt; /* stack index of the array metatable */
  lua_Integer max_depth;
} encoder;

typedef struct keyent {
  const char *s; /* string keys: anchored by the table being encoded */
  size_t len;
  lua_Integer ik;
  int isint;
  char num[24]; /* integer keys as decimal text */
} keyent;

enum { T_AUTO, T_ARRAY, T_OBJECT };

static void encode_value(lua_State *L, encoder *e, int idx, lua_Integer depth);

static void put(lua_State *L, encoder *e, const char *s, size_t n) {
  if (geoservices_buf_append(e->b, s, n)) luaL_error(L, "not enough memory");
}

#define PUTLIT(L, e, s) put(L, e, "" s, sizeof(s) - 1)

/* 1 = byte needs escaping in a JSON string. */
static const unsigned char needs_escape[256] = {
  1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,
  0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
  0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,
};

static void encode_string(lua_State *L, encoder *e, const char *s, size_t n) {
  size_t i = 0, start;
  char esc[8];
  if (geoservices_buf_reserve(e->b, n + 2)) luaL_error(L, "not enough memory");
  PUTLIT(L, e, "\"");
  while (i < n) {
    start = i;
    while (i < n && !needs_escape[(unsigned char)s[i]]) i++;
    if (i > start) put(L, e, s + start, i - start);
    if (i == n) break;
    switch (s[i]) {
    case '"': PUTLIT(L, e, "\\\""); break;
    case '\\': PUTLIT(L, e, "\\\\"); break;
    case '\n': PUTLIT(L, e, "\\n"); break;
    case '\r': PUTLIT(L, e, "\\r"); break;
    case '\t': PUTLIT(L, e, "\\t"); break;
    case '\b': PUTLIT(L, e, "\\b"); break;
    case '\f': PUTLIT(L, e, "\\f"); break;
    default:
      snprintf(esc, sizeof esc, "\\u%04x", (unsigned)(unsigned char)s[i]);
      put(L, e, esc, 6);
      break;
    }
    i++;
  }
  PUTLIT(L, e, "\"");
}

static void encode_number(lua_State *L, encoder *e, int idx) {
  char tmp[48];
  int n, i, plain = 1;
  if (lua_isinteger(L, idx)) {
    n = snprintf(tmp, sizeof tmp, "%lld", (long long)lua_tointeger(L, idx));
  } else {
    double d = (double)lua_tonumber(L, idx);
    if (!isfinite(d)) luaL_error(L, "cannot encode non-finite number %s", d != d ? "nan" : d > 0 ? "inf" : "-inf");
    n = snprintf(tmp, sizeof tmp, "%.17g", d);
    for (i = 0; i < n; i++) {
      char c = tmp[i];
      if (c == 'e' || c == '.') plain = 0;
      else if (c != '-' && c != '+' && (c < '0' || c > '9')) { /* a locale's decimal comma */
        tmp[i] = '.';
        plain = 0;
      }
    }
    if (plain) { /* keep it a float on decode: 12 -> 12.0 */
      tmp[n++] = '.';
      tmp[n++] = '0';
    }
  }
  put(L, e, tmp, (size_t)n);
}

static int table_kind(lua_State *L, encoder *e, int idx) {
  int kind = T_AUTO;
  if (!lua_getmetatable(L, idx)) return T_AUTO;
  if (lua_rawequal(L, -1, e->array_mt)) {
    kind = T_ARRAY;
  } else {
    lua_pushliteral(L, "__jsontype");
    if (lua_rawget(L, -2) == LUA_TSTRING) {
      const char *t = lua_tostring(L, -1);
      if (strcmp(t, "array") == 0) kind = T_ARRAY;
      else if (strcmp(t, "object") == 0) kind = T_OBJECT;
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return kind;
}

static int key_cmp(const void *a, const void *b) {
  const keyent *x = a, *y = b;
  const char *xs = x->isint ? x->num : x->s, *ys = y->isint ? y->num : y->s;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(xs, ys, n);
  if (c) return c;
  return x->len < y->len ? -1 : x->len > y->len;
}

static void encode_array(lua_State *L, encoder *e, int idx, lua_Integer n, lua_Integer depth) {
  lua_Integer i;
  PUTLIT(L, e, "[");
  for (i = 1; i <= n; i++) {
    if (i > 1) PUTLIT(L, e, ",");
    lua_rawgeti(L, idx, i);
    encode_value(L, e, lua_gettop(L), depth);
    lua_pop(L, 1);
  }
  PUTLIT(L, e, "]");
}

static void encode_object(lua_State *L, encoder *e, int idx, size_t n, lua_Integer depth) {
  keyent *ks;
  size_t i = 0;
  if (n == 0) {
    PUTLIT(L, e, "{}");
    return;
  }
  ks = lua_newuserdatauv(L, n * sizeof *ks, 0); /* collected with the stack slot */
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    keyent *k;
    lua_pop(L, 1);
    if (i == n) luaL_error(L, "table changed during encoding");
    k = &ks[i];
    if (lua_type(L, -1) == LUA_TSTRING) {
      k->s = lua_tolstring(L, -1, &k->len);
      k->isint = 0;
    } else if (lua_isinteger(L, -1)) {
      k->ik = lua_tointeger(L, -1);
      k->isint = 1;
      k->len = (size_t)snprintf(k->num, sizeof k->num, "%lld", (long long)k->ik);
    } else {
      luaL_error(L, "cannot encode key of type %s", luaL_typename(L, -1));
    }
    i++;
  }
  n = i;
  qsort(ks, n, sizeof *ks, key_cmp);
  PUTLIT(L, e, "{");
  for (i = 0; i < n; i++) {
    keyent *k = &ks[i];
    const char *ksz = k->isint ? k->num : k->s;
    if (i > 0) {
      if (key_cmp(&ks[i - 1], k) == 0)
        luaL_error(L, "cannot encode duplicate key \"%s\" (string and integer)", ksz);
      PUTLIT(L, e, ",");
    }
    encode_string(L, e, ksz, k->len);
    PUTLIT(L, e, ":");
    if (k->isint)
      lua_rawgeti(L, idx, k->ik);
    else {
      lua_pushlstring(L, k->s, k->len);
      lua_rawget(L, idx);
    }
    encode_value(L, e, lua_gettop(L), depth);
    lua_pop(L, 1);
  }
  PUTLIT(L, e, "}");
  lua_pop(L, 1); /* ks */
}

static void encode_table(lua_State *L, encoder *e, int idx, lua_Integer depth) {
  int kind;
  size_t count = 0;
  lua_Integer max = 0;
  int seq = 1;
  if (depth > e->max_depth)
    luaL_error(L, "cannot encode: maximum depth %I exceeded (cycle?)", e->max_depth);
  luaL_checkstack(L, 6, "JSON nested too deeply");
  kind = table_kind(L, e, idx);
  if (kind == T_ARRAY) {
    encode_array(L, e, idx, (lua_Integer)lua_rawlen(L, idx), depth + 1);
    return;
  }
  /* count keys and see whether they are exactly 1..n */
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    count++;
    if (seq && lua_isinteger(L, -1)) {
      lua_Integer k = lua_tointeger(L, -1);
      if (k >= 1) {
        if (k > max) max = k;
      } else {
        seq = 0;
      }
    } else {
      seq = 0;
    }
  }
  if (kind == T_AUTO && seq && count > 0 && (lua_Integer)count == max)
    encode_array(L, e, idx, max, depth + 1);
  else
    encode_object(L, e, idx, count, depth + 1);
}

static void encode_value(lua_State *L, encoder *e, int idx, lua_Integer depth) {
  switch (lua_type(L, idx)) {
  case LUA_TNIL: PUTLIT(L, e, "null"); break;
  case LUA_TBOOLEAN:
    if (lua_toboolean(L, idx)) PUTLIT(L, e, "true");
    else PUTLIT(L, e, "false");
    break;
  case LUA_TNUMBER: encode_number(L, e, idx); break;
  case LUA_TSTRING: {
    size_t n;
    const char *s = lua_tolstring(L, idx, &n);
    encode_string(L, e, s, n);
    break;
  }
  case LUA_TLIGHTUSERDATA:
    if (lua_touserdata(L, idx) == NULL) {
      PUTLIT(L, e, "null");
      break;
    }
    luaL_error(L, "cannot encode value of type lightuserdata");
    break;
  case LUA_TTABLE: encode_table(L, e, idx, depth); break;
  default: luaL_error(L, "cannot encode value of type %s", luaL_typename(L, idx));
  }
}

static int l_encbuf_gc(lua_State *L) {
  geoservices_buf *b = lua_touserdata(L, 1);
  if (b) geoservices_buf_free(b);
  return 0;
}

void geoservices_json_encode_into(lua_State *L, int idx, geoservices_buf *b) {
  encoder e;
  int top = lua_gettop(L);
  idx = lua_absindex(L, idx);
  e.b = b;
  e.max_depth = GEOSERVICES_JSON_DEFAULT_DEPTH;
  geoservices_push_json_array_mt(L);
  e.array_mt = lua_gettop(L);
  encode_value(L, &e, idx, 1);
  lua_settop(L, top);
}

static int l_json_encode(lua_State *L) {
  encoder e;
  luaL_checkany(L, 1);
  e.max_depth = GEOSERVICES_JSON_DEFAULT_DEPTH;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    if (lua_getfield(L, 2, "max_depth") != LUA_TNIL) {
      int isnum;
      e.max_depth = lua_tointegerx(L, -1, &isnum);
      if (!isnum || e.max_depth <= 0) luaL_error(L, "option max_depth must be a positive integer");
    }
  }
  lua_settop(L, 2);
  e.b = lua_newuserdatauv(L, sizeof *e.b, 0); /* index 3: frees the buffer if we raise */
  geoservices_buf_init(e.b, 0);
  luaL_setmetatable(L, ENCBUF_MT);
  geoservices_push_json_array_mt(L); /* index 4 */
  e.array_mt = 4;
  encode_value(L, &e, 1, 1); /* a top-level table is depth 1 */
  lua_pushlstring(L, e.b->data ? e.b->data : "", e.b->len);
  geoservices_buf_free(e.b);
  return 1;
}


void geoservices_open_json_encode(lua_State *L) {
  luaL_newmetatable(L, ENCBUF_MT); /* reused if luaopen runs again */
  lua_pushcfunction(L, l_encbuf_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  lua_pushcfunction(L, l_json_encode);
  lua_setfield(L, -2, "json_encode");
  geoservices_push_json_array_mt(L);
  lua_setfield(L, -2, "json_array_mt");
}
