/* The driver userdata: a libcurl multi handle and the non-blocking step API.
 * Requests in flight are anchored in the registry (Lua-cURL's h_ref), so a
 * caller may drop its reference and still get the request back from step(). */
#include <string.h>

#include "request.h"

static geoservices_driver *check_driver(lua_State *L, int idx) {
  return (geoservices_driver *)luaL_checkudata(L, idx, GEOSERVICES_DRIVER_MT);
}

static geoservices_driver *check_open_driver(lua_State *L, int idx) {
  geoservices_driver *drv = check_driver(L, idx);
  if (!drv->multi) luaL_error(L, "attempt to use a closed driver");
  return drv;
}

static int l_driver_close(lua_State *L) {
  geoservices_driver *drv = check_driver(L, 1);
  if (!drv->multi) return 0;
  /* Detach every request first: libcurl requires easy handles removed before
   * curl_multi_cleanup, and the requests must forget this driver. */
  while (drv->attached) geoservices_request_detach(L, drv->attached, REQUEST_READY);
  curl_multi_cleanup(drv->multi);
  drv->multi = NULL;
  return 0;
}

static int push_multi_error(lua_State *L, CURLMcode rc) {
  luaL_pushfail(L);
  lua_pushstring(L, curl_multi_strerror(rc));
  lua_pushfstring(L, "multi_%d", (int)rc);
  return 3;
}

static int l_driver_new(lua_State *L) {
  geoservices_driver *drv;
  lua_Integer per_host = 0, total = 0;
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_getfield(L, 1, "max_host_connections");
    per_host = luaL_optinteger(L, -1, 0);
    lua_getfield(L, 1, "max_total_connections");
    total = luaL_optinteger(L, -1, 0);
    lua_pop(L, 2);
  }
  drv = (geoservices_driver *)lua_newuserdatauv(L, sizeof(*drv), 0);
  memset(drv, 0, sizeof(*drv));
  luaL_setmetatable(L, GEOSERVICES_DRIVER_MT);
  drv->multi = curl_multi_init();
  if (!drv->multi) return luaL_error(L, "driver: curl_multi_init failed");
  if (per_host > 0) curl_multi_setopt(drv->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)per_host);
  if (total > 0) curl_multi_setopt(drv->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)total);
  return 1;
}

/* add(request): starts the transfer on the next step(). */
static int l_driver_add(lua_State *L) {
  geoservices_driver *drv = check_open_driver(L, 1);
  geoservices_request *req = geoservices_check_request(L, 2);
  CURLMcode rc;
  if (req->state == REQUEST_CLOSED) return luaL_error(L, "attempt to use a closed request");
  if (req->state == REQUEST_RUNNING) return luaL_error(L, "driver:add: request is already running");
  /* A finished or cancelled request may be sent again (same body): start clean. */
  geoservices_buf_reset(&req->response_body);
  geoservices_buf_reset(&req->response_headers);
  req->too_large = 0;
  req->errbuf[0] = '\0';
  rc = curl_multi_add_handle(drv->multi, req->easy);
  if (rc != CURLM_OK) return push_multi_error(L, rc);
  lua_pushvalue(L, 2);
  req->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  req->driver = drv;
  req->state = REQUEST_RUNNING;
  req->prev = NULL;
  req->next = drv->attached;
  if (drv->attached) drv->attached->prev = req;
  drv->attached = req;
  lua_pushboolean(L, 1);
  return 1;
}

/* remove(request): cancels a running transfer; the request becomes closed
 * for reuse purposes (its partial response is discarded). */
static int l_driver_remove(lua_State *L) {
  geoservices_driver *drv = check_open_driver(L, 1);
  geoservices_request *req = geoservices_check_request(L, 2);
  int was_attached = req->state == REQUEST_RUNNING && req->driver == drv;
  if (was_attached) geoservices_request_detach(L, req, REQUEST_READY);
  lua_pushboolean(L, was_attached);
  return 1;
}

/* Moves every finished transfer into the array at the top of the stack. */
static int drain_finished(lua_State *L, geoservices_driver *drv, int n) {
  CURLMsg *msg;
  int left;
  while ((msg = curl_multi_info_read(drv->multi, &left))) {
    geoservices_request *req = NULL;
    if (msg->msg != CURLMSG_DONE) continue;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&req);
    if (!req || req->ref == LUA_NOREF) continue;
    lua_rawgeti(L, LUA_REGISTRYINDEX, req->ref); /* push before the anchor goes */
    geoservices_request_finished(L, req, msg->data.result);
    lua_rawseti(L, -2, ++n);
  }
  return n;
}

/* step([timeout_ms]) -> running_count, {finished requests}
 * Performs whatever is ready; waits up to timeout_ms (default 0) for activity
 * only when nothing finished yet. Never calls Lua from libcurl callbacks. */
static int l_driver_step(lua_State *L) {
  geoservices_driver *drv = check_open_driver(L, 1);
  lua_Integer timeout_ms = luaL_optinteger(L, 2, 0);
  int n = 0;
  CURLMcode rc;
  lua_newtable(L);
  rc = curl_multi_perform(drv->multi, &drv->running);
  if (rc != CURLM_OK) return push_multi_error(L, rc);
  n = drain_finished(L, drv, n);
  if (n == 0 && timeout_ms > 0) {
    int numfds = 0;
    if (timeout_ms > 0x7fffffff) timeout_ms = 0x7fffffff;
    rc = curl_multi_poll(drv->multi, NULL, 0, (int)timeout_ms, &numfds);
    if (rc != CURLM_OK) return push_multi_error(L, rc);
    rc = curl_multi_perform(drv->multi, &drv->running);
    if (rc != CURLM_OK) return push_multi_error(L, rc);
    n = drain_finished(L, drv, n);
  }
  lua_pushinteger(L, drv->running);
  lua_insert(L, -2);
  return 2;
}

/* timeout() -> milliseconds the caller may wait before calling step(), or
 * nil when libcurl has no timer set. */
static int l_driver_timeout(lua_State *L) {
  geoservices_driver *drv = check_open_driver(L, 1);
  long ms = -1;
  CURLMcode rc = curl_multi_timeout(drv->multi, &ms);
  if (rc != CURLM_OK) return push_multi_error(L, rc);
  if (ms < 0) luaL_pushfail(L);
  else lua_pushinteger(L, ms);
  return 1;
}

static int l_driver_wakeup(lua_State *L) {
  geoservices_driver *drv = check_open_driver(L, 1);
  CURLMcode rc = curl_multi_wakeup(drv->multi);
  if (rc != CURLM_OK) return push_multi_error(L, rc);
  lua_pushboolean(L, 1);
  return 1;
}

/* count() -> number of requests attached (in flight). */
static int l_driver_count(lua_State *L) {
  geoservices_driver *drv = check_open_driver(L, 1);
  lua_Integer n = 0;
  geoservices_request *r;
  for (r = drv->attached; r; r = r->next) n++;
  lua_pushinteger(L, n);
  return 1;
}

static int l_driver_tostring(lua_State *L) {
  geoservices_driver *drv = check_driver(L, 1);
  lua_pushfstring(L, "%s (%p%s)", GEOSERVICES_DRIVER_MT, (void *)drv, drv->multi ? "" : ", closed");
  return 1;
}

void geoservices_open_driver(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"add", l_driver_add},
    {"remove", l_driver_remove},
    {"step", l_driver_step},
    {"timeout", l_driver_timeout},
    {"wakeup", l_driver_wakeup},
    {"count", l_driver_count},
    {"close", l_driver_close},
    {NULL, NULL},
  };
  static const luaL_Reg meta[] = {
    {"__gc", l_driver_close},
    {"__close", l_driver_close},
    {"__tostring", l_driver_tostring},
    {NULL, NULL},
  };
  geoservices_new_class(L, GEOSERVICES_DRIVER_MT, methods, meta);
  lua_pushcfunction(L, l_driver_new);
  lua_setfield(L, -2, "driver");
}
