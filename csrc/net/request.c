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
#include "net/request.h"

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
static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata) {
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

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *userdata) {
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
#define POOL_MAX 8

/* A closed request's buffers are kept the same way, emptied, for the next
 * request: its body, its answer and the answer's headers would otherwise
 * be a malloc and a free of a few KB each per request (libcurl's own 16 KB
 * buffer comes on top), and glibc pays for such sizes with consolidations. */
#define SPARE_MAX ((size_t)64 << 10) /* a larger buffer is freed, not kept */
enum { SPARE_REQUEST_BODY, SPARE_RESPONSE_BODY, SPARE_RESPONSE_HEADERS, SPARES };

typedef struct easy_pool {
  CURL *idle[POOL_MAX];
  int preset[POOL_MAX]; /* not reset: it keeps what every request sets alike (configure) */
  int n;
  int closed;      /* its __gc ran (the state is closing): handles are cleaned up */
  char agent[128]; /* the default User-Agent, formatted once */
  geoservices_buf spare[SPARES]; /* data NULL: none kept */
} easy_pool;

static const char pool_key = 0; /* its registry key is this variable's address */

static easy_pool *get_pool(lua_State *L) {
  easy_pool *pool;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &pool_key);
  pool = (easy_pool *)lua_touserdata(L, -1);
  lua_pop(L, 1);
  return pool;
}

static CURL *pool_take(easy_pool *pool, int *preset) {
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
static void pool_take_buf(easy_pool *pool, int which, geoservices_buf *b, size_t limit) {
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
  easy_pool *pool = get_pool(L);
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

/* ---- construction ---------------------------------------------------- */

/* The options of core.request. read_opts looks them up in one pass over the
 * table (a lookup per name, about twenty of them, cost a small request
 * about 4,000 instructions); each one present stays on the stack while the
 * request is configured, so its strings stay alive. */
enum {
  O_URL, O_METHOD, O_CA_FILE, O_USER_AGENT, O_CONTENT_TYPE, O_TIMEOUT_MS, O_CONNECT_TIMEOUT_MS,
  O_MAX_RESPONSE_BYTES, O_DISCARD, O_SAVE_TO, O_INSECURE, O_HEADERS, O_FORM, O_BODY, O_MULTIPART,
  O_RECORDS, O_JSON, O_MAX_JSON_DEPTH, O_FRESH_CONNECT, O_COUNT
};

/* Each name with its length, so that a key is told by its length first. */
#define OPT_NAME(s) {s, sizeof(s) - 1}
static const struct {
  const char *name;
  size_t len;
} opt_names[O_COUNT] = {
  OPT_NAME("url"), OPT_NAME("method"), OPT_NAME("ca_file"), OPT_NAME("user_agent"), OPT_NAME("content_type"),
  OPT_NAME("timeout_ms"), OPT_NAME("connect_timeout_ms"), OPT_NAME("max_response_bytes"), OPT_NAME("discard"),
  OPT_NAME("save_to"), OPT_NAME("insecure"), OPT_NAME("headers"), OPT_NAME("form"), OPT_NAME("body"),
  OPT_NAME("multipart"), OPT_NAME("records"), OPT_NAME("json"), OPT_NAME("max_json_depth"),
  OPT_NAME("fresh_connect"),
};

typedef struct {
  int at[O_COUNT]; /* stack index of each option that is not nil; 0: absent */
} request_opts;

static int opt_lookup(const char *name, size_t len) {
  int i;
  for (i = 0; i < O_COUNT; i++)
    if (opt_names[i].len == len && memcmp(opt_names[i].name, name, len) == 0) return i;
  return -1;
}

/* Pushes the options of the table at idx that are not nil. A table with a
 * metatable is asked name by name, as lua_getfield does (its __index may
 * supply some); a plain one is walked once with lua_next. */
static void read_opts(lua_State *L, int idx, request_opts *o) {
  int i;
  memset(o, 0, sizeof *o);
  luaL_checkstack(L, O_COUNT + 4, NULL);
  if (lua_getmetatable(L, idx)) {
    lua_pop(L, 1);
    for (i = 0; i < O_COUNT; i++) {
      if (lua_getfield(L, idx, opt_names[i].name) == LUA_TNIL) lua_pop(L, 1);
      else o->at[i] = lua_gettop(L);
    }
    return;
  }
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    int which = -1;
    if (lua_type(L, -2) == LUA_TSTRING) {
      size_t len;
      const char *name = lua_tolstring(L, -2, &len);
      which = opt_lookup(name, len);
    }
    if (which >= 0) {
      lua_rotate(L, -2, 1); /* the value stays, below the key lua_next needs on top */
      o->at[which] = lua_gettop(L) - 1;
    } else {
      lua_pop(L, 1);
    }
  }
}

static const char *check_string(lua_State *L, int idx, const char *field) {
  if (lua_type(L, idx) != LUA_TSTRING)
    luaL_error(L, "request option '%s': expected string, got %s", field, luaL_typename(L, idx));
  return lua_tostring(L, idx);
}

static const char *opt_string(lua_State *L, const request_opts *o, int which) {
  return o->at[which] ? check_string(L, o->at[which], opt_names[which].name) : NULL;
}

static lua_Integer opt_integer(lua_State *L, const request_opts *o, int which, lua_Integer def) {
  lua_Integer v = def;
  if (o->at[which]) {
    int ok;
    v = lua_tointegerx(L, o->at[which], &ok);
    if (!ok || v < 0) luaL_error(L, "request option '%s': expected a non-negative integer", opt_names[which].name);
  }
  return v;
}

static int opt_boolean(lua_State *L, const request_opts *o, int which) {
  return o->at[which] && lua_toboolean(L, o->at[which]);
}

/* A multipart part's field (a string or nil). */
static const char *part_string(lua_State *L, int idx, const char *field) {
  const char *s = NULL;
  lua_getfield(L, idx, field);
  if (!lua_isnil(L, -1)) s = check_string(L, -1, field);
  lua_pop(L, 1); /* the string stays alive: it is referenced by the part's table */
  return s;
}

static void check_curl(lua_State *L, CURLcode rc, const char *what) {
  if (rc != CURLE_OK) luaL_error(L, "request: cannot set %s: %s", what, curl_easy_strerror(rc));
}

/* Pushes a copy of option `which` (nil when absent): the checks below raise
 * about the value at -1, as they always have. */
static int push_opt(lua_State *L, const request_opts *o, int which) {
  if (o->at[which]) lua_pushvalue(L, o->at[which]);
  else lua_pushnil(L);
  return !lua_isnil(L, -1);
}

static void set_headers(lua_State *L, geoservices_request *req, const request_opts *o) {
  lua_Integer i, n;
  if (!push_opt(L, o, O_HEADERS)) {
    lua_pop(L, 1);
    return;
  }
  luaL_checktype(L, -1, LUA_TTABLE);
  n = (lua_Integer)lua_rawlen(L, -1);
  for (i = 1; i <= n; i++) {
    struct curl_slist *grown;
    lua_rawgeti(L, -1, i);
    if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "request option 'headers': entries are \"Name: value\" strings");
    grown = curl_slist_append(req->header_list, lua_tostring(L, -1));
    if (!grown) luaL_error(L, "request: not enough memory");
    req->header_list = grown;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* Parts: {name=, value=} text, {name=, file=path[, filename=, type=]} streamed
 * from disk by libcurl, or {name=, data=, filename=[, type=]} from memory. */
static void set_multipart(lua_State *L, geoservices_request *req, int idx) {
  lua_Integer i, n;
  n = (lua_Integer)lua_rawlen(L, idx);
  req->mime = curl_mime_init(req->easy);
  if (!req->mime) luaL_error(L, "request: not enough memory");
  for (i = 1; i <= n; i++) {
    curl_mimepart *part;
    const char *name, *value, *file, *data, *filename, *type;
    size_t data_len = 0;
    CURLcode rc = CURLE_OK;
    if (lua_rawgeti(L, idx, i) != LUA_TTABLE) luaL_error(L, "request option 'multipart': part %d is not a table", (int)i);
    name = part_string(L, -1, "name");
    value = part_string(L, -1, "value");
    file = part_string(L, -1, "file");
    data = part_string(L, -1, "data");
    filename = part_string(L, -1, "filename");
    type = part_string(L, -1, "type");
    if (!name) luaL_error(L, "request option 'multipart': part %d has no name", (int)i);
    if ((value != NULL) + (file != NULL) + (data != NULL) != 1)
      luaL_error(L, "request option 'multipart': part '%s' needs exactly one of value, file, data", name);
    part = curl_mime_addpart(req->mime);
    if (!part) luaL_error(L, "request: not enough memory");
    rc = curl_mime_name(part, name);
    if (rc == CURLE_OK && (value || data)) {
      const char *bytes;
      lua_getfield(L, -1, value ? "value" : "data");
      bytes = lua_tolstring(L, -1, &data_len); /* length first: argument order is unspecified */
      rc = curl_mime_data(part, bytes, data_len); /* copies */
      lua_pop(L, 1);
    }
    if (rc == CURLE_OK && file) rc = curl_mime_filedata(part, file); /* streamed at send time */
    if (rc == CURLE_OK && filename) rc = curl_mime_filename(part, filename);
    if (rc == CURLE_OK && type) rc = curl_mime_type(part, type);
    check_curl(L, rc, "multipart part");
    lua_pop(L, 1);
  }
  check_curl(L, curl_easy_setopt(req->easy, CURLOPT_MIMEPOST, req->mime), "multipart body");
}

static void set_body(lua_State *L, geoservices_request *req, const request_opts *o, const char **method) {
  int has_form, has_body, has_multipart;
  has_form = push_opt(L, o, O_FORM);
  if (has_form) {
    luaL_checktype(L, -1, LUA_TTABLE);
    geoservices_form_encode_table(L, -1, &req->request_body);
  }
  lua_pop(L, 1);
  has_body = push_opt(L, o, O_BODY);
  if (has_body) {
    size_t len;
    const char *s;
    if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "request option 'body': expected string");
    s = lua_tolstring(L, -1, &len);
    if (has_form) luaL_error(L, "request options 'form' and 'body' are exclusive");
    if (geoservices_buf_append(&req->request_body, s, len)) luaL_error(L, "request: not enough memory");
  }
  lua_pop(L, 1);
  has_multipart = push_opt(L, o, O_MULTIPART);
  if (has_multipart) {
    luaL_checktype(L, -1, LUA_TTABLE);
    if (has_form || has_body) luaL_error(L, "request option 'multipart' excludes 'form' and 'body'");
    req->reset_handle = 1; /* its mime goes with it: the handle is cleaned up, not kept */
    set_multipart(L, req, lua_gettop(L));
  }
  lua_pop(L, 1);
  if (!*method) *method = (has_form || has_body || has_multipart) ? "POST" : "GET";
  if (strcmp(*method, "POST") == 0 && !has_multipart) {
    /* The buffer lives in the request, so libcurl need not copy it. */
    check_curl(L, curl_easy_setopt(req->easy, CURLOPT_POSTFIELDSIZE_LARGE,
                                   (curl_off_t)req->request_body.len), "body size");
    check_curl(L, curl_easy_setopt(req->easy, CURLOPT_POSTFIELDS,
                                   req->request_body.data ? req->request_body.data : ""), "body");
  } else if (strcmp(*method, "GET") == 0) {
    if (has_form || has_body || has_multipart) luaL_error(L, "request: a GET has no body");
    if (req->preset) /* a POST's body may still be set: forget it (this also makes a POST)... */
      check_curl(L, curl_easy_setopt(req->easy, CURLOPT_POSTFIELDS, (char *)NULL), "body");
    check_curl(L, curl_easy_setopt(req->easy, CURLOPT_HTTPGET, 1L), "method"); /* ...and a GET again */
  } else if (strcmp(*method, "POST") != 0) {
    luaL_error(L, "request option 'method': expected GET or POST, got '%s'", *method);
  }
}

/* Sets every option of the request on its easy handle. A handle from the
 * pool that was not reset (req->preset: its last request was a plain one
 * that finished) keeps the options every request sets alike, and gets
 * every other one set again, to its value or back to its default. */
static void configure(lua_State *L, geoservices_request *req, const request_opts *o) {
  CURL *e = req->easy;
  const char *url = opt_string(L, o, O_URL);
  const char *method = opt_string(L, o, O_METHOD);
  const char *ca_file = opt_string(L, o, O_CA_FILE);
  const char *user_agent = opt_string(L, o, O_USER_AGENT);
  const char *content_type = opt_string(L, o, O_CONTENT_TYPE);
  lua_Integer timeout_ms = opt_integer(L, o, O_TIMEOUT_MS, 0);
  lua_Integer connect_timeout_ms = opt_integer(L, o, O_CONNECT_TIMEOUT_MS, 0);
  int preset = req->preset;
  if (!url) luaL_error(L, "request option 'url' is required");
  req->max_response_bytes = (size_t)opt_integer(L, o, O_MAX_RESPONSE_BYTES, 0);
  req->discard = opt_boolean(L, o, O_DISCARD);
  {
    const char *save_to = opt_string(L, o, O_SAVE_TO);
    if (save_to) {
      req->save_fd = open(save_to, O_WRONLY | O_APPEND | O_CLOEXEC);
      if (req->save_fd < 0) luaL_error(L, "request option 'save_to': cannot open %s: %s", save_to, strerror(errno));
    }
  }
  check_curl(L, curl_easy_setopt(e, CURLOPT_URL, url), "url");
  if (!preset) {
    check_curl(L, curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https,file"), "protocols");
    check_curl(L, curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L), "nosignal");
    check_curl(L, curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body), "write callback");
    check_curl(L, curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header), "header callback");
    /* "" lets libcurl offer every encoding it was built with (gzip, deflate...). */
    check_curl(L, curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, ""), "accept-encoding");
  }
  check_curl(L, curl_easy_setopt(e, CURLOPT_PRIVATE, (void *)req), "private");
  check_curl(L, curl_easy_setopt(e, CURLOPT_ERRORBUFFER, req->errbuf), "error buffer");
  check_curl(L, curl_easy_setopt(e, CURLOPT_WRITEDATA, (void *)req), "write data");
  check_curl(L, curl_easy_setopt(e, CURLOPT_HEADERDATA, (void *)req), "header data");
  if (!user_agent) {
    easy_pool *pool = get_pool(L);
    user_agent = pool ? pool->agent : "lua-geoservices/" GEOSERVICES_VERSION;
  }
  check_curl(L, curl_easy_setopt(e, CURLOPT_USERAGENT, user_agent), "user agent");
  if (timeout_ms || preset) check_curl(L, curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout_ms), "timeout");
  if (connect_timeout_ms || preset)
    check_curl(L, curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_timeout_ms), "connect timeout");
  /* TLS: verification stays on unless the caller explicitly opts out. Such
   * a handle is reset before it serves another request. */
  if (ca_file) {
    req->reset_handle = 1;
    check_curl(L, curl_easy_setopt(e, CURLOPT_CAINFO, ca_file), "ca_file");
  }
  if (opt_boolean(L, o, O_INSECURE)) {
    req->reset_handle = 1;
    check_curl(L, curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L), "insecure");
    check_curl(L, curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L), "insecure");
  }
  /* A request that must reach the server at most once (edits) takes a new
   * connection: on a reused one that the server closed before answering,
   * libcurl would silently send the body again on a fresh connection. The
   * handle is reset afterwards so the option does not stick to the pool. */
  if (opt_boolean(L, o, O_FRESH_CONNECT)) {
    req->reset_handle = 1;
    check_curl(L, curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L), "fresh_connect");
  }
  set_headers(L, req, o);
  if (content_type) {
    char line[256];
    struct curl_slist *grown;
    snprintf(line, sizeof line, "Content-Type: %s", content_type);
    grown = curl_slist_append(req->header_list, line);
    if (!grown) luaL_error(L, "request: not enough memory");
    req->header_list = grown;
  }
  if (req->header_list || preset)
    check_curl(L, curl_easy_setopt(e, CURLOPT_HTTPHEADER, req->header_list), "headers");
  set_body(L, req, o, &method);
}

/* User values: 1 the Records (records mode), 2 the depth limit of the json
 * option (0: the default), nil without it. */
#define UV_RECORDS 1
#define UV_JSON 2

void geoservices_request_setup(lua_State *L, geoservices_request *req, int ud, int spec) {
  easy_pool *pool;
  request_opts o;
  int top = lua_gettop(L);
  luaL_checktype(L, spec, LUA_TTABLE);
  memset(req, 0, sizeof(*req));
  req->state = REQUEST_CLOSED;
  req->ref = LUA_NOREF;
  req->save_fd = -1;
  geoservices_buf_init(&req->request_body, 0);
  geoservices_buf_init(&req->response_body, 0);
  geoservices_buf_init(&req->response_headers, 1 << 20);
  pool = get_pool(L);
  req->easy = pool_take(pool, &req->preset);
  if (!req->easy) luaL_error(L, "request: curl_easy_init failed");
  req->state = REQUEST_READY; /* from here on closing releases what configure acquires */
  pool_take_buf(pool, SPARE_REQUEST_BODY, &req->request_body, 0);
  pool_take_buf(pool, SPARE_RESPONSE_BODY, &req->response_body, 0);
  pool_take_buf(pool, SPARE_RESPONSE_HEADERS, &req->response_headers, 1 << 20);
  read_opts(L, spec, &o);
  configure(L, req, &o);
  if (push_opt(L, &o, O_RECORDS)) {
    req->records = geoservices_check_records(L, -1);
    if (!req->records->records) luaL_error(L, "request option 'records': the Records is closed");
  }
  lua_setiuservalue(L, ud, UV_RECORDS); /* keeps it alive as long as this request (or nil) */
  if (opt_boolean(L, &o, O_JSON)) {
    lua_Integer depth = opt_integer(L, &o, O_MAX_JSON_DEPTH, 0);
    if (req->records || req->save_fd >= 0 || req->discard)
      luaL_error(L, "request option 'json' excludes 'records', 'save_to' and 'discard'");
    lua_pushinteger(L, depth);
  } else {
    lua_pushnil(L);
  }
  lua_setiuservalue(L, ud, UV_JSON);
  lua_settop(L, top);
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

/* ---- results ----------------------------------------------------------- */

static const char *error_code(const geoservices_request *req) {
  switch (req->result) {
    case CURLE_COULDNT_CONNECT: return "couldnt_connect";
    case CURLE_OPERATION_TIMEDOUT: return "timeout";
    case CURLE_COULDNT_RESOLVE_HOST: return "resolve";
    case CURLE_COULDNT_RESOLVE_PROXY: return "resolve_proxy";
    case CURLE_GOT_NOTHING: return "empty_reply";
    case CURLE_SEND_ERROR: return "send";
    case CURLE_RECV_ERROR: return "recv";
    case CURLE_PARTIAL_FILE: return "partial";
    case CURLE_PEER_FAILED_VERIFICATION: return "tls_verify";
    case CURLE_SSL_CONNECT_ERROR: return "tls";
    case CURLE_SSL_CACERT_BADFILE: return "tls_ca_file";
    case CURLE_UNSUPPORTED_PROTOCOL: return "unsupported_protocol";
    case CURLE_URL_MALFORMAT: return "bad_url";
    case CURLE_FILE_COULDNT_READ_FILE:
    case CURLE_READ_ERROR: return "read";
    case CURLE_ABORTED_BY_CALLBACK: return "aborted";
    case CURLE_BAD_CONTENT_ENCODING: return "bad_encoding";
    case CURLE_WRITE_ERROR: return req->too_large ? "too_large" : "write";
    default: return NULL;
  }
}

static void push_headers(lua_State *L, const char *data, size_t len) {
  const char *p = data, *end = data + len, *q;
  int lines = 0;
  for (q = p; q && q < end && (q = memchr(q, '\n', (size_t)(end - q))) != NULL; q++) lines++;
  lua_createtable(L, 0, lines > 1 ? lines - 1 : 0); /* less the status line */
  while (p && p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    const char *line_end = eol ? eol : end, *colon;
    const char *value, *value_end = line_end;
    colon = memchr(p, ':', (size_t)(line_end - p));
    if (colon && colon > p) {
      char name[64];
      size_t i, n = (size_t)(colon - p);
      if (n <= sizeof name) { /* lower-cased on the stack: no Lua buffer for a usual name */
        for (i = 0; i < n; i++) name[i] = (char)tolower((unsigned char)p[i]);
        lua_pushlstring(L, name, n);
      } else {
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        for (i = 0; i < n; i++) luaL_addchar(&b, (char)tolower((unsigned char)p[i]));
        luaL_pushresult(&b);
      }
      value = colon + 1;
      while (value < value_end && (*value == ' ' || *value == '\t')) value++;
      while (value_end > value && (value_end[-1] == '\r' || value_end[-1] == ' ')) value_end--;
      lua_pushvalue(L, -1);
      if (lua_rawget(L, -3) == LUA_TSTRING) { /* repeated header: join as HTTP allows */
        lua_pushliteral(L, ", ");
        lua_pushlstring(L, value, (size_t)(value_end - value));
        lua_concat(L, 3);
      } else {
        lua_pop(L, 1);
        lua_pushlstring(L, value, (size_t)(value_end - value));
      }
      lua_rawset(L, -3);
    }
    p = line_end + 1;
  }
}

/* The lean result of the json option keeps the response's header block as
 * a string under this private key; its metatable (under lean_mt_key in the
 * registry) makes it the `headers` table on first use. */
static const char header_block_key = 0;
static const char lean_mt_key = 0;

/* __index of a lean result: `headers`, parsed from the kept block once. */
static int l_lean_index(lua_State *L) {
  size_t len;
  const char *block;
  if (lua_type(L, 2) != LUA_TSTRING || strcmp(lua_tostring(L, 2), "headers") != 0) return 0;
  if (lua_rawgetp(L, 1, &header_block_key) != LUA_TSTRING) return 0;
  block = lua_tolstring(L, -1, &len);
  push_headers(L, block, len);
  lua_pushvalue(L, -1);
  lua_setfield(L, 1, "headers"); /* no __newindex: a plain rawset, so the next look finds it */
  return 1;
}

static void open_lean_mt(lua_State *L) {
  lua_createtable(L, 0, 2);
  lua_pushcfunction(L, l_lean_index);
  lua_setfield(L, -2, "__index");
  lua_pushliteral(L, "geoservices.Response");
  lua_setfield(L, -2, "__name");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &lean_mt_key);
}

/* The json option: sets `json` in the result table at the top to the
 * decoded body and returns 1; returns 0 (nothing set) for an empty body or
 * one that is not JSON (the caller then gives the body as it is, and the Lua
 * side tells why). The body is decoded where it lies, not copied into a Lua
 * string first. */
static int push_json(lua_State *L, geoservices_request *req, lua_Integer depth) {
  int n;
  if (req->response_body.len == 0) return 0;
  n = geoservices_json_decode_buf(L, &req->response_body, (size_t)depth);
  /* closed meanwhile (by a finalizer): the bytes came back to no owner */
  if (req->state == REQUEST_CLOSED) geoservices_buf_free(&req->response_body);
  if (n != 1) {
    lua_pop(L, n);
    return 0;
  }
  lua_setfield(L, -2, "json");
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

int geoservices_request_push_result(lua_State *L, geoservices_request *req, int ud) {
  long status = 0, connects = 0;
  double seconds = 0;
  char *url = NULL;
  if (req->result != CURLE_OK && !(req->records && req->records->failed && req->result == CURLE_WRITE_ERROR && !req->too_large)) {
    const char *code = error_code(req);
    char fallback[32];
    luaL_pushfail(L);
    if (req->save_errno) {
      lua_pushfstring(L, "cannot save the response: %s", strerror(req->save_errno));
      lua_pushliteral(L, "save_failed");
      return 3;
    }
    if (req->too_large)
      lua_pushfstring(L, "response larger than the limit of %I bytes", (lua_Integer)req->max_response_bytes);
    else if (req->errbuf[0])
      lua_pushstring(L, req->errbuf);
    else
      lua_pushstring(L, curl_easy_strerror(req->result));
    if (!code) {
      snprintf(fallback, sizeof fallback, "curl_%d", (int)req->result);
      code = fallback;
    }
    lua_pushstring(L, code);
    return 3;
  }
  curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
  if (lua_getiuservalue(L, ud, UV_JSON) == LUA_TNUMBER) { /* the json option: a lean result */
    lua_Integer depth = lua_tointeger(L, -1);
    lua_pop(L, 1);
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, status);
    lua_setfield(L, -2, "status");
    if (!push_json(L, req, depth)) {
      lua_pushlstring(L, req->response_body.data ? req->response_body.data : "", req->response_body.len);
      lua_setfield(L, -2, "body");
    }
    /* the headers as one string, made a table on first use (lean_index):
     * an answer that decodes fine never looks at them */
    lua_pushlstring(L, req->response_headers.data ? req->response_headers.data : "", req->response_headers.len);
    lua_rawsetp(L, -2, &header_block_key);
    lua_pushinteger(L, (lua_Integer)req->received);
    lua_setfield(L, -2, "bytes");
    lua_rawgetp(L, LUA_REGISTRYINDEX, &lean_mt_key);
    lua_setmetatable(L, -2);
    return 1;
  }
  lua_pop(L, 1);
  curl_easy_getinfo(req->easy, CURLINFO_NUM_CONNECTS, &connects);
  curl_easy_getinfo(req->easy, CURLINFO_TOTAL_TIME, &seconds);
  curl_easy_getinfo(req->easy, CURLINFO_EFFECTIVE_URL, &url);
  lua_createtable(L, 0, 8);
  lua_pushinteger(L, status);
  lua_setfield(L, -2, "status");
  lua_pushlstring(L, req->response_body.data ? req->response_body.data : "", req->response_body.len);
  lua_setfield(L, -2, "body");
  push_headers(L, req->response_headers.data, req->response_headers.len);
  lua_setfield(L, -2, "headers");
  lua_pushstring(L, url ? url : "");
  lua_setfield(L, -2, "url");
  lua_pushinteger(L, connects);
  lua_setfield(L, -2, "connects");
  lua_pushnumber(L, seconds);
  lua_setfield(L, -2, "seconds");
  lua_pushinteger(L, (lua_Integer)req->received);
  lua_setfield(L, -2, "bytes");
  if (req->records && req->records->failed && req->records->records) {
    size_t offset = geoservices_records_offset(req->records->records) + 1;
    lua_pushfstring(L, "invalid JSON at byte %I: %s", (lua_Integer)offset,
                    geoservices_records_error(req->records->records));
    lua_setfield(L, -2, "json_error");
    lua_pushinteger(L, (lua_Integer)offset);
    lua_setfield(L, -2, "json_offset");
  }
  return 1;
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
  open_lean_mt(L);
  lua_pushcfunction(L, l_request_new);
  lua_setfield(L, -2, "request");
}
