/* Lua binding of jsonstream: json_decode, json_encode and the JsonStream
 * class. Decoding builds tables directly from parser events on the caller's
 * stack; between feed() calls the partial tree is parked on a private thread
 * kept in the userdata's user value. All C memory hangs off userdata with
 * __gc, so a Lua error (e.g. out of memory) inside a handler leaks nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "common.h"
#include "jsonstream.h"

#define ARRAY_MT_KEY "geoservices.json.array" /* registry field the Lua layer may set */
#define ENCBUF_MT "geoservices.JsonEncodeBuffer"

/* ---------------------------------------------------------------- decode */

typedef struct jsonstream_ud {
  geoservices_jsonstream *parser; /* NULL once closed */
  lua_State *L;                   /* caller's state during feed/finish */
  int mt;                         /* stack index of the array metatable, 0 = none */
  int busy;    /* set during feed/finish; still set if a Lua error escaped */
  lua_Integer *counts; /* per open container: elements so far, -1 for objects */
  size_t depth, cap;
} jsonstream_ud;

/* Stores the value at the top into its container (or leaves the root). */
static int add_value(jsonstream_ud *u) {
  lua_Integer *c;
  if (u->depth == 0) return 0;
  c = &u->counts[u->depth - 1];
  if (*c >= 0)
    lua_rawseti(u->L, -2, ++*c);
  else
    lua_rawset(u->L, -3);
  return 0;
}

static int on_null(void *ctx) {
  jsonstream_ud *u = ctx;
  lua_pushlightuserdata(u->L, NULL); /* == cjson.null */
  return add_value(u);
}

static int on_boolean(void *ctx, int v) {
  jsonstream_ud *u = ctx;
  lua_pushboolean(u->L, v);
  return add_value(u);
}

static int on_integer(void *ctx, long long v) {
  jsonstream_ud *u = ctx;
  lua_pushinteger(u->L, (lua_Integer)v);
  return add_value(u);
}

static int on_double(void *ctx, double v) {
  jsonstream_ud *u = ctx;
  lua_pushnumber(u->L, (lua_Number)v);
  return add_value(u);
}

static int on_string(void *ctx, const char *s, size_t n) {
  jsonstream_ud *u = ctx;
  lua_pushlstring(u->L, s, n);
  return add_value(u);
}

static int on_key(void *ctx, const char *s, size_t n) {
  jsonstream_ud *u = ctx;
  lua_pushlstring(u->L, s, n);
  return 0;
}

static int open_container(jsonstream_ud *u, int array) {
  lua_State *L = u->L;
  luaL_checkstack(L, 4, "JSON nested too deeply"); /* table, key, value, metatable */
  if (u->depth == u->cap) {
    size_t cap = u->cap ? u->cap * 2 : 16;
    lua_Integer *c = realloc(u->counts, cap * sizeof *c);
    if (!c) return luaL_error(L, "not enough memory");
    u->counts = c;
    u->cap = cap;
  }
  lua_createtable(L, 0, 0);
  u->counts[u->depth++] = array ? 0 : -1;
  return 0;
}

static int on_start_object(void *ctx) { return open_container(ctx, 0); }
static int on_start_array(void *ctx) { return open_container(ctx, 1); }

static int on_end_object(void *ctx) {
  jsonstream_ud *u = ctx;
  u->depth--;
  return add_value(u);
}

static int on_end_array(void *ctx) {
  jsonstream_ud *u = ctx;
  if (u->mt) {
    lua_pushvalue(u->L, u->mt);
    lua_setmetatable(u->L, -2);
  }
  u->depth--;
  return add_value(u);
}

static const geoservices_json_handlers decode_handlers = {
  on_null, on_boolean, on_integer, on_double, on_string, on_key,
  on_start_object, on_end_object, on_start_array, on_end_array,
};

static jsonstream_ud *check_jsonstream(lua_State *L, int idx) {
  return luaL_checkudata(L, idx, GEOSERVICES_JSONSTREAM_MT);
}

static jsonstream_ud *check_open(lua_State *L, int idx) {
  jsonstream_ud *u = check_jsonstream(L, idx);
  if (!u->parser) luaL_error(L, "attempt to use a closed JsonStream");
  if (u->busy) luaL_error(L, "attempt to use a JsonStream after an error inside feed");
  return u;
}

/* Reads {max_depth=, max_value_bytes=} at idx (nil = defaults). */
static size_t opt_size(lua_State *L, int idx, const char *name) {
  lua_Integer v;
  int isnum;
  size_t r = 0;
  if (lua_getfield(L, idx, name) != LUA_TNIL) {
    v = lua_tointegerx(L, -1, &isnum);
    if (!isnum || v <= 0) luaL_error(L, "option %s must be a positive integer", name);
    r = (size_t)v;
  }
  lua_pop(L, 1);
  return r;
}

static void read_limits(lua_State *L, int idx, geoservices_json_limits *lim) {
  lim->max_depth = lim->max_value_bytes = 0;
  if (lua_isnoneornil(L, idx)) return;
  luaL_checktype(L, idx, LUA_TTABLE);
  lim->max_depth = opt_size(L, idx, "max_depth");
  lim->max_value_bytes = opt_size(L, idx, "max_value_bytes");
}

/* Pushes a new JsonStream (pre-closed until the parser exists). */
static jsonstream_ud *new_jsonstream(lua_State *L, const geoservices_json_limits *lim) {
  jsonstream_ud *u = lua_newuserdatauv(L, sizeof *u, 1);
  memset(u, 0, sizeof *u);
  luaL_setmetatable(L, GEOSERVICES_JSONSTREAM_MT);
  u->parser = geoservices_jsonstream_new(&decode_handlers, u, lim);
  if (!u->parser) luaL_error(L, "not enough memory");
  return u;
}

static void release(jsonstream_ud *u) {
  geoservices_jsonstream_free(u->parser);
  u->parser = NULL;
  free(u->counts);
  u->counts = NULL;
  u->depth = u->cap = 0;
  u->busy = 0;
  u->L = NULL;
}

/* Pushes the array metatable slot, then brings back the parked partial tree.
 * Returns the base: the slot below the first tree item. */
static int stream_begin(lua_State *L, jsonstream_ud *u, int idx) {
  int base;
  lua_getfield(L, LUA_REGISTRYINDEX, ARRAY_MT_KEY);
  base = lua_gettop(L);
  u->mt = lua_istable(L, -1) ? base : 0;
  if (lua_getiuservalue(L, idx, 1) == LUA_TTHREAD) {
    lua_State *T = lua_tothread(L, -1);
    int n = lua_gettop(T);
    lua_pop(L, 1); /* T stays anchored by the user value */
    luaL_checkstack(L, n + LUA_MINSTACK, "JSON nested too deeply");
    lua_xmove(T, L, n);
  } else {
    lua_pop(L, 1);
    luaL_checkstack(L, LUA_MINSTACK, NULL);
  }
  u->L = L;
  u->busy = 1;
  return base;
}

/* Parks the partial tree above base on the private thread. */
static void stream_park(lua_State *L, jsonstream_ud *u, int idx, int base) {
  int n = lua_gettop(L) - base;
  if (n > 0) {
    lua_State *T;
    if (lua_getiuservalue(L, idx, 1) == LUA_TTHREAD) {
      T = lua_tothread(L, -1);
      lua_pop(L, 1);
    } else {
      lua_pop(L, 1);
      T = lua_newthread(L);
      lua_setiuservalue(L, idx, 1);
    }
    if (!lua_checkstack(T, n)) luaL_error(L, "JSON nested too deeply");
    lua_xmove(L, T, n);
  }
  u->L = NULL;
  u->busy = 0;
}

/* Drops any partial tree and readies the parser for a new document. */
static void stream_reset(lua_State *L, jsonstream_ud *u, int idx, int base) {
  lua_settop(L, base);
  if (lua_getiuservalue(L, idx, 1) == LUA_TTHREAD) lua_settop(lua_tothread(L, -1), 0);
  lua_pop(L, 1);
  geoservices_jsonstream_reset(u->parser);
  u->depth = 0;
  u->L = NULL;
  u->busy = 0;
}

/* nil, "invalid JSON at byte N: why", N with N 1-based (#s + 1 at end of input). */
static int push_error(lua_State *L, jsonstream_ud *u, int rc) {
  lua_Integer off = (lua_Integer)geoservices_jsonstream_offset(u->parser) + 1;
  if (rc == GEOSERVICES_JSON_ENOMEM) return luaL_error(L, "not enough memory");
  lua_pushnil(L);
  lua_pushfstring(L, "invalid JSON at byte %I: %s", off,
                  geoservices_jsonstream_error(u->parser));
  lua_pushinteger(L, off);
  return 3;
}

static int l_json_decode(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  geoservices_json_limits lim;
  jsonstream_ud *u;
  int base, rc;
  read_limits(L, 2, &lim);
  lua_settop(L, 2);
  u = new_jsonstream(L, &lim); /* index 3; __gc frees the parser if we raise */
  base = stream_begin(L, u, 3);
  rc = geoservices_jsonstream_feed(u->parser, s, len);
  if (!rc) rc = geoservices_jsonstream_finish(u->parser);
  if (rc) {
    lua_settop(L, base);
    rc = push_error(L, u, rc);
    release(u);
    return rc;
  }
  release(u); /* the value stays on the stack */
  return 1;
}

static int l_jsonstream_new(lua_State *L) {
  geoservices_json_limits lim;
  read_limits(L, 1, &lim);
  new_jsonstream(L, &lim);
  return 1;
}

static int l_jsonstream_feed(lua_State *L) {
  jsonstream_ud *u = check_open(L, 1);
  size_t len;
  const char *s = luaL_checklstring(L, 2, &len);
  int base, rc;
  lua_settop(L, 2);
  base = stream_begin(L, u, 1);
  rc = geoservices_jsonstream_feed(u->parser, s, len);
  if (rc) {
    lua_settop(L, base); /* the tree is useless now; the parser keeps the error */
    u->depth = 0;
    u->L = NULL;
    u->busy = 0;
    return push_error(L, u, rc);
  }
  stream_park(L, u, 1, base);
  lua_pushboolean(L, 1);
  return 1;
}

/* Returns the document's value (or nil, msg, offset) and resets the stream. */
static int l_jsonstream_finish(lua_State *L) {
  jsonstream_ud *u = check_open(L, 1);
  int base, rc;
  lua_settop(L, 1);
  base = stream_begin(L, u, 1);
  rc = geoservices_jsonstream_finish(u->parser);
  if (rc) {
    lua_settop(L, base);
    rc = push_error(L, u, rc);
    stream_reset(L, u, 1, base + rc); /* keep the 3 results */
    return rc;
  }
  lua_replace(L, base); /* the root value, in place of the metatable slot */
  stream_reset(L, u, 1, base);
  return 1;
}

static int l_jsonstream_reset(lua_State *L) {
  jsonstream_ud *u = check_jsonstream(L, 1);
  if (!u->parser) return luaL_error(L, "attempt to use a closed JsonStream");
  lua_settop(L, 1);
  stream_reset(L, u, 1, 1); /* also recovers a stream broken by an error in feed */
  return 0;
}

static int l_jsonstream_close(lua_State *L) {
  jsonstream_ud *u = check_jsonstream(L, 1);
  if (u->parser) {
    release(u);
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 1); /* let the parked tree go */
  }
  return 0;
}

static int l_jsonstream_tostring(lua_State *L) {
  lua_pushfstring(L, "%s (%p)", GEOSERVICES_JSONSTREAM_MT, (void *)check_jsonstream(L, 1));
  return 1;
}

static const luaL_Reg jsonstream_methods[] = {
  {"feed", l_jsonstream_feed},
  {"finish", l_jsonstream_finish},
  {"reset", l_jsonstream_reset},
  {"close", l_jsonstream_close},
  {NULL, NULL},
};

static const luaL_Reg jsonstream_meta[] = {
  {"__gc", l_jsonstream_close},
  {"__close", l_jsonstream_close},
  {"__tostring", l_jsonstream_tostring},
  {NULL, NULL},
};

/* ---------------------------------------------------------------- encode */

typedef struct encoder {
  geoservices_buf *b;
  int array_mt; /* stack index of the registered array metatable, 0 = none */
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
  if (e->array_mt && lua_rawequal(L, -1, e->array_mt)) {
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
  lua_getfield(L, LUA_REGISTRYINDEX, ARRAY_MT_KEY);
  e.array_mt = lua_istable(L, -1) ? lua_gettop(L) : 0;
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
  lua_getfield(L, LUA_REGISTRYINDEX, ARRAY_MT_KEY); /* index 4 */
  e.array_mt = lua_istable(L, 4) ? 4 : 0;
  encode_value(L, &e, 1, 1); /* a top-level table is depth 1 */
  lua_pushlstring(L, e.b->data ? e.b->data : "", e.b->len);
  geoservices_buf_free(e.b);
  return 1;
}

static const luaL_Reg json_funcs[] = {
  {"json_decode", l_json_decode},
  {"json_encode", l_json_encode},
  {"jsonstream", l_jsonstream_new},
  {NULL, NULL},
};

void geoservices_open_jsonstream(lua_State *L) {
  geoservices_new_class(L, GEOSERVICES_JSONSTREAM_MT, jsonstream_methods, jsonstream_meta);
  luaL_newmetatable(L, ENCBUF_MT); /* reused if luaopen runs again */
  lua_pushcfunction(L, l_encbuf_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_setfuncs(L, json_funcs, 0);
}
