/* Lua binding of jsonstream, decoding: json_decode and the JsonStream class
 * (the encoder is lua_encode.c). Decoding builds tables directly from parser
 * events on the caller's stack; between feed() calls the partial tree is
 * parked on a private thread kept in the userdata's user value. Arrays get
 * the JSON array metatable (core.json_array_mt). All C memory hangs off
 * userdata with __gc, so a Lua error (e.g. out of memory) inside a handler
 * leaks nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "class.h"
#include "common.h"
#include "json/jsonstream.h"
#include "json/lua_decode.h"
#include "json/strcache.h"

/* An open container. Its elements wait on the Lua stack above its own slot
 * (for an object: key, value, key, value...) and the table is created when
 * it closes, at its final size: no rehash while it fills. A container with
 * more than FLUSH_AT waiting elements, or one below a very deep stack, moves
 * them into its table early, so the stack stays small for any document. */
typedef struct frame {
  int base;          /* its slot, relative to the tree's base (the array metatable) */
  int created;       /* the table exists in the slot (else the slot holds nil) */
  int array;
  int pending;       /* elements waiting on the stack */
  lua_Integer total; /* elements already in the table */
} frame;

#define FLUSH_AT 64
#define STACK_SOFT_LIMIT 4096 /* slots above the base before parents flush early */

typedef struct jsonstream_ud {
  geoservices_jsonstream *parser; /* NULL once closed */
  lua_State *L;                   /* caller's state during feed/finish */
  int mt;                         /* stack index of the array metatable (the tree's base) */
  geoservices_strcache *cache;    /* the state's string cache */
  int cache_idx;                  /* stack index of its string table */
  int busy;    /* set during feed/finish; still set if a Lua error escaped */
  frame *frames; /* per open container */
  size_t depth, cap;
  geoservices_buf held; /* geoservices_json_decode_buf: the bytes, its own while it decodes */
  size_t max_depth;     /* the parser's depth limit as asked (0: the default) */
} jsonstream_ud;

/* Moves the waiting elements of f into its table (creating it, at their
 * number, if needed); `extra` values above them stay on top. */
static void flush(jsonstream_ud *u, frame *f, int extra) {
  lua_State *L = u->L;
  int base = u->mt + f->base, n = f->pending, i, width = f->array ? 1 : 2;
  if (!f->created) {
    if (f->array) lua_createtable(L, n, 0);
    else lua_createtable(L, 0, n);
    lua_replace(L, base);
    f->created = 1;
  }
  if (f->array && !extra && f->total == 0) {
    for (i = n; i >= 1; i--) lua_rawseti(L, base, i); /* pops them, last first */
  } else {
    if (f->array) {
      for (i = 1; i <= n; i++) {
        lua_pushvalue(L, base + i);
        lua_rawseti(L, base, f->total + i);
      }
    } else { /* in document order, so a repeated key keeps its last value */
      for (i = 0; i < n; i++) {
        lua_pushvalue(L, base + 1 + 2 * i);
        lua_pushvalue(L, base + 2 + 2 * i);
        lua_rawset(L, base);
      }
    }
    for (i = 1; i <= extra; i++) lua_copy(L, base + n * width + i, base + i);
    lua_settop(L, base + extra);
  }
  f->total += n;
  f->pending = 0;
}

/* The value at the top joins its container (or stays: the root). */
static int add_value(jsonstream_ud *u) {
  frame *f;
  if (u->depth == 0) return 0;
  f = &u->frames[u->depth - 1];
  if (++f->pending >= FLUSH_AT) flush(u, f, 0);
  return 0;
}

/* Pushes a parsed string: from the cache when it is short and was seen. */
static void push_string(jsonstream_ud *u, const char *s, size_t n) {
  geoservices_strcache_push(u->L, u->cache, u->cache_idx, s, n, GEOSERVICES_STRCACHE_MAXLEN);
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
  push_string(u, s, n);
  return add_value(u);
}

static int on_key(void *ctx, const char *s, size_t n) {
  jsonstream_ud *u = ctx;
  push_string(u, s, n);
  return 0;
}

static int open_container(jsonstream_ud *u, int array) {
  lua_State *L = u->L;
  frame *f;
  /* its slot, a key and a value, the metatable, and a parent's flush */
  luaL_checkstack(L, 6 + 2 * FLUSH_AT, "JSON nested too deeply");
  if (u->depth == u->cap) {
    size_t cap = u->cap ? u->cap * 2 : 16;
    frame *grown = realloc(u->frames, cap * sizeof *grown);
    if (!grown) return luaL_error(L, "not enough memory");
    u->frames = grown;
    u->cap = cap;
  }
  if (u->depth > 0 && lua_gettop(L) - u->mt > STACK_SOFT_LIMIT) {
    f = &u->frames[u->depth - 1];
    if (f->pending > 0) flush(u, f, f->array ? 0 : 1); /* an object's parent keeps this key on top */
  }
  lua_pushnil(L); /* the table's slot */
  f = &u->frames[u->depth++];
  f->base = lua_gettop(L) - u->mt;
  f->created = 0;
  f->array = array;
  f->pending = 0;
  f->total = 0;
  return 0;
}

static int on_start_object(void *ctx) { return open_container(ctx, 0); }
static int on_start_array(void *ctx) { return open_container(ctx, 1); }

static int on_end_object(void *ctx) {
  jsonstream_ud *u = ctx;
  flush(u, &u->frames[u->depth - 1], 0);
  u->depth--;
  return add_value(u);
}

static int on_end_array(void *ctx) {
  jsonstream_ud *u = ctx;
  flush(u, &u->frames[u->depth - 1], 0);
  lua_pushvalue(u->L, u->mt);
  lua_setmetatable(u->L, -2);
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

/* Pushes a new userdata of class `mt` (pre-closed until the parser exists). */
static jsonstream_ud *new_decoder(lua_State *L, const geoservices_json_limits *lim, const char *mt) {
  jsonstream_ud *u = lua_newuserdatauv(L, sizeof *u, 1);
  memset(u, 0, sizeof *u);
  luaL_setmetatable(L, mt);
  u->max_depth = lim->max_depth;
  u->parser = geoservices_jsonstream_new(&decode_handlers, u, lim);
  if (!u->parser) luaL_error(L, "not enough memory");
  return u;
}

/* Pushes a new JsonStream. */
static jsonstream_ud *new_jsonstream(lua_State *L, const geoservices_json_limits *lim) {
  return new_decoder(L, lim, GEOSERVICES_JSONSTREAM_MT);
}

static void release(jsonstream_ud *u) {
  geoservices_buf_free(&u->held); /* bytes taken and not given back: an error was raised */
  geoservices_jsonstream_free(u->parser);
  u->parser = NULL;
  free(u->frames);
  u->frames = NULL;
  u->depth = u->cap = 0;
  u->busy = 0;
  u->L = NULL;
}

/* Pushes the string cache and the array metatable, then brings back the
 * parked partial tree. Returns the base: the metatable's slot, below the
 * first tree item. */
static int stream_begin(lua_State *L, jsonstream_ud *u, int idx) {
  int base;
  u->cache = geoservices_strcache_open(L);
  u->cache_idx = lua_gettop(L);
  geoservices_push_json_array_mt(L);
  base = lua_gettop(L);
  u->mt = base;
  if (lua_getiuservalue(L, idx, 1) == LUA_TTHREAD) {
    lua_State *T = lua_tothread(L, -1);
    int n = lua_gettop(T);
    lua_pop(L, 1); /* T stays anchored by the user value */
    /* the innermost open container may still take up to 2 * FLUSH_AT
     * slots of elements (its own open() reserved them in an earlier call,
     * whose reservation ended with it); a new one reserves its own */
    luaL_checkstack(L, n + 2 * FLUSH_AT + 8 + LUA_MINSTACK, "JSON nested too deeply");
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

/* ---- the state's decoder -------------------------------------------------
 * geoservices_json_decode_buf decodes every response with one decoder kept
 * in the registry (its parser and frame stack live on between decodes)
 * rather than a new JsonStream each time: a userdata, three mallocs and a
 * finalizer less per response. While it decodes it is a to-be-closed value
 * of the caller's stack, so a Lua error raised meanwhile (out of memory)
 * resets it and frees the bytes it holds; a decode that starts while it is
 * in use (from a finalizer) makes its own. */
#define DECODER_MT "geoservices.JsonDecoder"

static const char decoder_key = 0; /* its registry key is this variable's address */

/* __close: back to idle (the bytes it still holds are an error's leftover). */
static int l_decoder_reset(lua_State *L) {
  jsonstream_ud *u = (jsonstream_ud *)luaL_checkudata(L, 1, DECODER_MT);
  geoservices_buf_free(&u->held);
  if (u->parser) geoservices_jsonstream_reset(u->parser);
  u->depth = 0;
  u->busy = 0;
  u->L = NULL;
  return 0;
}

/* __gc */
static int l_decoder_gc(lua_State *L) {
  release((jsonstream_ud *)luaL_checkudata(L, 1, DECODER_MT));
  return 0;
}

/* Pushes the decoder to use for depth limit max_depth and returns it, with
 * whether it is the state's: the state's when it is idle (made anew when
 * it has another limit: one client's limit, usually the default, is asked
 * again and again), marked to be closed; else, while it is in use, a new
 * JsonStream. */
static jsonstream_ud *push_decoder(lua_State *L, size_t max_depth, int *shared) {
  geoservices_json_limits lim;
  jsonstream_ud *u = NULL;
  lim.max_depth = max_depth;
  lim.max_value_bytes = 0;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &decoder_key) == LUA_TUSERDATA) {
    u = (jsonstream_ud *)lua_touserdata(L, -1);
    if (u->busy || !u->parser) {
      lua_pop(L, 1);
      *shared = 0;
      return new_jsonstream(L, &lim); /* __gc frees the parser (and the bytes) if we raise */
    }
  }
  if (!u || u->max_depth != max_depth) {
    lua_pop(L, 1);
    u = new_decoder(L, &lim, DECODER_MT);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &decoder_key);
  }
  lua_toclose(L, -1);
  *shared = 1;
  return u;
}

/* Decodes the bytes of b (see lua_decode.h). They are the decoder's while
 * it runs: a Lua error raised meanwhile (out of memory) frees them with the
 * decoder, and whatever happens to b's owner during the decode (a
 * finalizer closing it) cannot free them under the parser. */
int geoservices_json_decode_buf(lua_State *L, geoservices_buf *b, size_t max_depth) {
  jsonstream_ud *u;
  int top = lua_gettop(L), base, rc, i, shared;
  luaL_checkstack(L, 8, NULL);
  u = push_decoder(L, max_depth, &shared); /* top + 1 */
  u->held = *b;
  geoservices_buf_init(b, b->limit);
  base = stream_begin(L, u, top + 1);
  rc = geoservices_jsonstream_feed(u->parser, u->held.data ? u->held.data : "", u->held.len);
  if (!rc) rc = geoservices_jsonstream_finish(u->parser);
  if (rc) {
    lua_settop(L, base);
    rc = push_error(L, u, rc);
  } else {
    rc = 1; /* the value, on top */
  }
  *b = u->held; /* given back */
  geoservices_buf_init(&u->held, 0);
  if (shared) lua_closeslot(L, top + 1); /* idle again (l_decoder_reset) */
  else release(u);
  for (i = 1; i <= rc; i++) lua_copy(L, -rc - 1 + i, top + i); /* the results in place of the decoder's slots */
  lua_settop(L, top + rc);
  return rc;
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


static const luaL_Reg json_decode_funcs[] = {
  {"json_decode", l_json_decode},
  {"jsonstream", l_jsonstream_new},
  {NULL, NULL},
};

void geoservices_open_json_decode(lua_State *L) {
  if (luaL_newmetatable(L, DECODER_MT)) {
    lua_pushcfunction(L, l_decoder_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_decoder_reset);
    lua_setfield(L, -2, "__close");
  }
  lua_pop(L, 1);
  geoservices_new_class(L, GEOSERVICES_JSONSTREAM_MT, jsonstream_methods, jsonstream_meta);
  luaL_setfuncs(L, json_decode_funcs, 0);
}
