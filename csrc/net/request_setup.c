/* A request's options: read from the table of core.request in one pass,
 * then set on its easy handle (URL, TLS, headers, the body: form, bytes or
 * multipart), with the handle and buffers taken from the pool. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "class.h"
#include "net/request_internal.h"

/* ---- construction ---------------------------------------------------- */

/* The options of core.request. read_opts looks them up in one pass over the
 * table (a lookup per name, about twenty of them, cost a small request
 * about 4,000 instructions); each one present stays on the stack while the
 * request is configured, so its strings stay alive. */
enum {
  O_URL, O_METHOD, O_CA_FILE, O_USER_AGENT, O_CONTENT_TYPE, O_TIMEOUT_MS, O_CONNECT_TIMEOUT_MS,
  O_MAX_RESPONSE_BYTES, O_DISCARD, O_SAVE_TO, O_INSECURE, O_HEADERS, O_FORM, O_BODY, O_MULTIPART,
  O_RECORDS, O_JSON, O_MAX_JSON_DEPTH, O_FRESH_CONNECT, O_RESUME_FROM, O_COUNT
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
  OPT_NAME("fresh_connect"), OPT_NAME("resume_from"),
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
  req->resume_from = (size_t)opt_integer(L, o, O_RESUME_FROM, 0);
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
    check_curl(L, curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, geoservices_request_on_body), "write callback");
    check_curl(L, curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, geoservices_request_on_header), "header callback");
    /* "" lets libcurl offer every encoding it was built with (gzip, deflate...). */
    check_curl(L, curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, ""), "accept-encoding");
  }
  check_curl(L, curl_easy_setopt(e, CURLOPT_PRIVATE, (void *)req), "private");
  check_curl(L, curl_easy_setopt(e, CURLOPT_ERRORBUFFER, req->errbuf), "error buffer");
  check_curl(L, curl_easy_setopt(e, CURLOPT_WRITEDATA, (void *)req), "write data");
  check_curl(L, curl_easy_setopt(e, CURLOPT_HEADERDATA, (void *)req), "header data");
  if (!user_agent) {
    easy_pool *pool = geoservices_pool_get(L);
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
  pool = geoservices_pool_get(L);
  req->easy = geoservices_pool_take(pool, &req->preset);
  if (!req->easy) luaL_error(L, "request: curl_easy_init failed");
  req->state = REQUEST_READY; /* from here on closing releases what configure acquires */
  geoservices_pool_take_buf(pool, SPARE_REQUEST_BODY, &req->request_body, 0);
  geoservices_pool_take_buf(pool, SPARE_RESPONSE_BODY, &req->response_body, 0);
  geoservices_pool_take_buf(pool, SPARE_RESPONSE_HEADERS, &req->response_headers, 1 << 20);
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

