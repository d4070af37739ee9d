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

static void release_resources(lua_State *L, geoservices_request *req) {
  easy_pool *pool = geoservices_pool_get(L);
  if (req->easy) {
    if (req->mime) {
      curl_easy_cleanup(req->easy); /* a multipart handle is not kept: its mime is freed below */
    } else {
      geoservices_pool_give(pool, req->easy, req->state == REQUEST_DONE && req->result == CURLE_OK && !req->reset_handle);
    }
  }
  req->easy = NULL;
  if (req->mime) curl_mime_free(req->mime); /* after the easy handle let go of it */
  req->mime = NULL;
  curl_slist_free_all(req->header_list);
  req->header_list = NULL;
  /* libcurl no longer points into them (the handle was reset or cleaned up) */
  geoservices_pool_give_buf(pool, SPARE_REQUEST_BODY, &req->request_body);
  geoservices_pool_give_buf(pool, SPARE_RESPONSE_BODY, &req->response_body);
  geoservices_pool_give_buf(pool, SPARE_RESPONSE_HEADERS, &req->response_headers);
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
 * insecure, user_agent, max_response_bytes, discard, save_to, resume_from, records, and
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

/* resume() -> lets a transfer paused for a full record tape go on, once its
 * records were taken another way than drain() (a store's apply takes them
 * from the extractor in C). */
static int l_request_resume(lua_State *L) {
  geoservices_request *req = check_open_request(L, 1);
  if (req->paused && req->easy) {
    req->paused = 0;
    curl_easy_pause(req->easy, CURLPAUSE_CONT);
  }
  return 0;
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
    {"resume", l_request_resume},
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
  geoservices_pool_open(L);
  geoservices_request_open_result(L);
  lua_pushcfunction(L, l_request_new);
  lua_setfield(L, -2, "request");
}
