/* The pool of idle easy handles and spare buffers of a Lua state. */
#include <stdio.h>
#include <string.h>

#include "net/request_internal.h"

/* ---- idle easy handles ------------------------------------------------
 * curl_easy_init and curl_easy_cleanup cost about as much as a fifth of a
 * small request's whole client side (measured with callgrind: ~13,000 of
 * ~75,000 instructions of a plain libcurl request), so a closed request's
 * handle is reset (curl_easy_reset: every option back to its default) and
 * kept for the next request of the same Lua state. What libcurl keeps in a
 * reset handle is its caches (TLS sessions, which it matches against each
 * new request's TLS options, and DNS); connections belong to the drivers'
 * multi handles either way. One pool per state, in the registry. */
/* The pool, the callbacks and the user values: net/request_internal.h. */

static const char pool_key = 0; /* its registry key is this variable's address */

easy_pool *geoservices_pool_get(lua_State *L) {
  easy_pool *pool;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &pool_key);
  pool = (easy_pool *)lua_touserdata(L, -1);
  lua_pop(L, 1);
  return pool;
}

CURL *geoservices_pool_take(easy_pool *pool, int *preset) {
  if (pool && !pool->closed && pool->n > 0) {
    pool->n--;
    *preset = pool->preset[pool->n];
    return pool->idle[pool->n];
  }
  *preset = 0;
  return curl_easy_init();
}

/* keep_options: the handle's request was a plain one (no TLS options, no
 * multipart) that finished, so the next request may keep the options that
 * every request sets alike and set the others anew (configure) instead of
 * paying for a reset and setting them all again: the same handle serves
 * request after request, as an easy handle reused with curl_easy_perform
 * does. Any other handle is reset. */
void geoservices_pool_give(easy_pool *pool, CURL *easy, int keep_options) {
  if (pool && !pool->closed && pool->n < POOL_MAX) {
    if (!keep_options) curl_easy_reset(easy);
    pool->preset[pool->n] = keep_options;
    pool->idle[pool->n++] = easy;
  } else {
    curl_easy_cleanup(easy);
  }
}

/* The buffer of a new request: a kept one if there is one, else none yet. */
void geoservices_pool_take_buf(easy_pool *pool, int which, geoservices_buf *b, size_t limit) {
  if (pool && !pool->closed && pool->spare[which].data) {
    *b = pool->spare[which];
    geoservices_buf_init(&pool->spare[which], 0);
  } else {
    geoservices_buf_init(b, 0);
  }
  b->limit = limit;
}

/* A closed request's buffer: kept, emptied, when there is room; else freed. */
void geoservices_pool_give_buf(easy_pool *pool, int which, geoservices_buf *b) {
  if (pool && !pool->closed && !pool->spare[which].data && b->data && b->cap <= SPARE_MAX) {
    pool->spare[which] = *b;
    pool->spare[which].len = 0;
    geoservices_buf_init(b, 0);
  } else {
    geoservices_buf_free(b);
  }
}

static int l_pool_gc(lua_State *L) {
  easy_pool *pool = (easy_pool *)lua_touserdata(L, 1);
  int i;
  while (pool->n > 0) curl_easy_cleanup(pool->idle[--pool->n]);
  for (i = 0; i < SPARES; i++) geoservices_buf_free(&pool->spare[i]);
  pool->closed = 1;
  return 0;
}

void geoservices_pool_open(lua_State *L) {
  easy_pool *pool;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &pool_key) == LUA_TUSERDATA) { /* luaopen ran before */
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  pool = (easy_pool *)lua_newuserdatauv(L, sizeof(*pool), 0);
  memset(pool, 0, sizeof(*pool));
  snprintf(pool->agent, sizeof pool->agent, "lua-geoservices/%s libcurl/%s", GEOSERVICES_VERSION,
           curl_version_info(CURLVERSION_NOW)->version);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, l_pool_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &pool_key);
}

