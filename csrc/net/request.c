/* The request userdata: one libcurl easy handle with its body, headers and
 * response buffers. Created closed (liolib style): the metatable is set
 * before curl_easy_init, so a failure half-way is collected safely. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "class.h"
#include "fdio.h"
#include "json/lua_decode.h"
#include "net/request_internal.h"

static const char *const state_names[] = {"closed", "ready", "running", "done"};

geoservices_request *geoservices_check_request(lua_State *L, int idx) {
  return (geoservices_request *)luaL_checkudata(L, idx, GEOSERVICES_REQUEST_MT);
}

static geoservices_request *check_open_request(lua_State *L, int idx) {
  geoservices_request *req = geoservices_check_request(L, idx);
  if (req->state == REQUEST_CLOSED) luaL_error(L, "attempt to use a closed request");
  return req;
}

/* In records mode the tape may hold this much before the transfer pauses
 * until Lua drains it: memory stays flat however large the result. */
#define RECORDS_PAUSE_BYTES ((size_t)1 << 20)
/* ...and this much of the raw body is kept to describe an error page. */
#define RAW_PREFIX_BYTES ((size_t)64 << 10)

/* save_to: a successful body goes to its file as it arrives, so a result
 * of any size is kept without being held in memory. */
static int save_bytes(geoservices_request *req, const char *p, size_t n) {
  if (geoservices_write_all(req->save_fd, p, n) == 0) return 0;
  req->save_errno = errno;
  return -1;
}

static size_t on_records_body(geoservices_request *req, char *ptr, size_t n) {
  long status = 0;
  if (!req->records->records) return 0; /* its Records was closed: abort */
  /* Only a successful response is a result: an error page (a 502 from a
   * proxy, say) is kept for the error message and never reaches the
   * extractor, so a retried request continues the same parse. */
  curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300) {
    if (req->response_body.len < RAW_PREFIX_BYTES) {
      size_t keep = RAW_PREFIX_BYTES - req->response_body.len;
      if (geoservices_buf_append(&req->response_body, ptr, n < keep ? n : keep)) return 0;
    }
    req->received += n;
    return n;
  }
  if (!req->records->failed && geoservices_records_pending(req->records->records) > RECORDS_PAUSE_BYTES) {
    req->paused = 1;
    return CURL_WRITEFUNC_PAUSE; /* the same bytes come back after the unpause */
  }
  if (req->response_body.len < RAW_PREFIX_BYTES) {
    size_t keep = RAW_PREFIX_BYTES - req->response_body.len;
    if (geoservices_buf_append(&req->response_body, ptr, n < keep ? n : keep)) return 0;
  }
  req->received += n;
  if (req->save_fd >= 0 && save_bytes(req, ptr, n) != 0) return 0;
  /* a broken result (now or in an earlier request of the same document) is
   * not worth downloading further; the failure is kept in records->failed */
  if (geoservices_records_ud_feed(req->records, ptr, n) != 0) return 0;
  return n;
}

/* libcurl callbacks: they only append to C buffers or feed the extractor,
 * never touch Lua. */
size_t geoservices_request_on_body(char *ptr, size_t size, size_t nmemb, void *userdata) {
  geoservices_request *req = (geoservices_request *)userdata;
  size_t n = size * nmemb;
  if (req->max_response_bytes && req->received + n > req->max_response_bytes) {
    req->too_large = 1;
    return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
  }
  if (req->records) return on_records_body(req, ptr, n);
  if (req->save_fd >= 0) {
    long status = 0;
    curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300) { /* an error page is kept for its message instead */
      req->received += n;
      return save_bytes(req, ptr, n) == 0 ? n : 0;
    }
  }
  if (!req->discard) {
    if (req->response_body.cap == 0) {
      /* room for the announced body at once (up to 1 MiB: a bigger or
       * unannounced one grows by doubling), not a realloc per doubling */
      curl_off_t announced = -1;
      size_t want = (size_t)16 << 10;
      curl_easy_getinfo(req->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &announced);
      if (announced > 0) want = announced < ((curl_off_t)1 << 20) ? (size_t)announced : (size_t)1 << 20;
      if (want > n && geoservices_buf_reserve(&req->response_body, want)) return 0;
    }
    if (geoservices_buf_append(&req->response_body, ptr, n)) return 0;
  }
  req->received += n;
  return n;
}

size_t geoservices_request_on_header(char *ptr, size_t size, size_t nmemb, void *userdata) {
  geoservices_request *req = (geoservices_request *)userdata;
  size_t n = size * nmemb;
  /* A new status line starts a new response (100 Continue, redirects):
   * keep only the final one's headers. */
  if (n >= 5 && memcmp(ptr, "HTTP/", 5) == 0) geoservices_buf_reset(&req->response_headers);
  if (req->response_headers.cap == 0 && geoservices_buf_reserve(&req->response_headers, 1024)) return 0;
  if (geoservices_buf_append(&req->response_headers, ptr, n)) return 0;
  return n;
}

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
static void pool_give(easy_pool *pool, CURL *easy, int keep_options) {
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
static void pool_give_buf(easy_pool *pool, int which, geoservices_buf *b) {
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

static void open_pool(lua_State *L) {
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

static void release_resources(lua_State *L, geoservices_request *req) {
  easy_pool *pool = geoservices_pool_get(L);
  if (req->easy) {
    if (req->mime) {
      curl_easy_cleanup(req->easy); /* a multipart handle is not kept: its mime is freed below */
    } else {
      pool_give(pool, req->easy, req->state == REQUEST_DONE && req->result == CURLE_OK && !req->reset_handle);
    }
  }
  req->easy = NULL;
  if (req->mime) curl_mime_free(req->mime); /* after the easy handle let go of it */
  req->mime = NULL;
  curl_slist_free_all(req->header_list);
  req->header_list = NULL;
  /* libcurl no longer points into them (the handle was reset or cleaned up) */
  pool_give_buf(pool, SPARE_REQUEST_BODY, &req->request_body);
  pool_give_buf(pool, SPARE_RESPONSE_BODY, &req->response_body);
  pool_give_buf(pool, SPARE_RESPONSE_HEADERS, &req->response_headers);
  req->records = NULL; /* not ours: the Records userdata frees itself */
  if (req->save_fd >= 0) close(req->save_fd);
  req->save_fd = -1;
}

void geoservices_request_detach(lua_State *L, geoservices_request *req,
                                geoservices_request_state next_state) {
  geoservices_driver *drv = req->driver;
  if (drv) {
    if (drv->multi && req->easy) curl_multi_remove_handle(drv->multi, req->easy);
    if (req->prev) req->prev->next = req->next;
    else drv->attached = req->next;
    if (req->next) req->next->prev = req->prev;
    if (req->by_sockets) drv->socket_transfers--;
  }
  req->by_sockets = 0;
  req->prev = req->next = NULL;
  req->driver = NULL;
  if (req->ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, req->ref);
  req->ref = LUA_NOREF;
  req->state = next_state;
}

void geoservices_request_finished(lua_State *L, geoservices_request *req, CURLcode result) {
  req->result = result;
  if (req->driver) req->driver->finished++;
  /* ending the document (records:finish()) is the caller's: a download may
   * go on in a Range request that feeds the same Records */
  geoservices_request_detach(L, req, REQUEST_DONE);
}

void geoservices_request_close(lua_State *L, geoservices_request *req) {
  if (req->state == REQUEST_CLOSED) return;
  if (req->state == REQUEST_RUNNING) geoservices_request_detach(L, req, REQUEST_CLOSED);
  release_resources(L, req);
  req->state = REQUEST_CLOSED;
}

static int l_request_close(lua_State *L) {
  geoservices_request_close(L, geoservices_check_request(L, 1));
  return 0;
}

geoservices_request *geoservices_request_push_closed(lua_State *L) {
  geoservices_request *req = (geoservices_request *)lua_newuserdatauv(L, sizeof(*req), 2);
  memset(req, 0, sizeof(*req));
  req->state = REQUEST_CLOSED;
  req->ref = LUA_NOREF;
  req->save_fd = -1;
  luaL_setmetatable(L, GEOSERVICES_REQUEST_MT);
  return req;
}

/* core.request(opts): opts are url (required), method, form | body |
 * multipart, headers, content_type, timeout_ms, connect_timeout_ms, ca_file,
 * insecure, user_agent, max_response_bytes, discard, save_to, records, and
 * json (with max_json_depth): result() decodes a body that is JSON straight
 * from the response buffer and gives its value as `json` instead of `body`
 * (a body that is not JSON, or none, comes as `body`), in a lean result
 * with only what a decoded answer needs: status, headers (a table made on
 * first use), bytes. */
static int l_request_new(lua_State *L) {
  geoservices_request *req;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  req = geoservices_request_push_closed(L);
  geoservices_request_setup(L, req, 2, 1);
  return 1;
}

/* result() -> {status=, headers=, body=, url=, connects=, seconds=, bytes=}
 *          with the json option {status=, headers=, json= | body=, bytes=}
 *          or nil, message, code for a transfer failure (not for HTTP errors). */
static int l_request_result(lua_State *L) {
  geoservices_request *req = check_open_request(L, 1);
  if (req->state != REQUEST_DONE) return luaL_error(L, "request: result() before the request finished");
  return geoservices_request_push_result(L, req, 1);
}

/* drain(fn) -> n: delivers the complete records received so far as
 * fn(kind, layer_id, value, key), then lets a paused transfer go on. */
static int l_request_drain(lua_State *L) {
  geoservices_request *req = check_open_request(L, 1);
  lua_Integer n;
  luaL_checktype(L, 2, LUA_TFUNCTION);
  if (!req->records) return luaL_error(L, "request: drain() needs a request created with a records option");
  lua_getiuservalue(L, 1, UV_RECORDS);
  n = geoservices_records_drain(L, -1, 2);
  lua_pop(L, 1);
  if (req->paused && req->easy) {
    req->paused = 0;
    curl_easy_pause(req->easy, CURLPAUSE_CONT); /* may deliver buffered bytes right away */
  }
  lua_pushinteger(L, n);
  return 1;
}

/* progress() -> bytes of the body received so far, and its announced total
 * (Content-Length) or nil when unknown. */
static int l_request_progress(lua_State *L) {
  geoservices_request *req = check_open_request(L, 1);
  curl_off_t total = -1;
  lua_pushinteger(L, (lua_Integer)req->received);
  if (req->easy) curl_easy_getinfo(req->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &total);
  if (total >= 0) lua_pushinteger(L, (lua_Integer)total);
  else lua_pushnil(L);
  return 2;
}

/* has_records() -> true when drain() has records to deliver now, or the
 * transfer is paused until it is called. */
static int l_request_has_records(lua_State *L) {
  geoservices_request *req = geoservices_check_request(L, 1);
  size_t complete = 0;
  if (req->records && req->records->records) geoservices_records_tape(req->records->records, &complete);
  lua_pushboolean(L, complete > 0 || req->paused);
  return 1;
}

/* ready() -> true when a task waiting for the request has something to do:
 * the request is no longer running, or drain() has records for it (or the
 * transfer is paused until it is called). The scheduler's one check per
 * waiting request and wake-up. */
static int l_request_ready(lua_State *L) {
  geoservices_request *req = geoservices_check_request(L, 1);
  int ready = req->state != REQUEST_RUNNING || req->paused;
  if (!ready && req->records && req->records->records) {
    size_t complete = 0;
    geoservices_records_tape(req->records->records, &complete);
    ready = complete > 0;
  }
  lua_pushboolean(L, ready);
  return 1;
}

static int l_request_state(lua_State *L) {
  geoservices_request *req = geoservices_check_request(L, 1);
  lua_pushstring(L, state_names[req->state]);
  return 1;
}

static int l_request_tostring(lua_State *L) {
  geoservices_request *req = geoservices_check_request(L, 1);
  lua_pushfstring(L, "%s (%p, %s)", GEOSERVICES_REQUEST_MT, (void *)req, state_names[req->state]);
  return 1;
}

void geoservices_open_request(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"result", l_request_result},
    {"drain", l_request_drain},
    {"has_records", l_request_has_records},
    {"ready", l_request_ready},
    {"progress", l_request_progress},
    {"state", l_request_state},
    {"close", l_request_close},
    {NULL, NULL},
  };
  static const luaL_Reg meta[] = {
    {"__gc", l_request_close},
    {"__close", l_request_close},
    {"__tostring", l_request_tostring},
    {NULL, NULL},
  };
  geoservices_new_class(L, GEOSERVICES_REQUEST_MT, methods, meta);
  open_pool(L);
  geoservices_request_open_result(L);
  lua_pushcfunction(L, l_request_new);
  lua_setfield(L, -2, "request");
}
