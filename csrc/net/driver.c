/* The driver userdata: a libcurl multi handle and the non-blocking step API.
 * Requests in flight are anchored in the registry (Lua-cURL's h_ref), so a
 * caller may drop its reference and still get the request back from step().
 *
 * Two ways to drive it, not to be mixed while transfers are in flight:
 *  - step(timeout_ms): curl_multi_perform + curl_multi_poll (blocking callers);
 *  - host-loop mode (cqueues' pollfd/events/timeout contract): fds() lists the
 *    sockets libcurl wants watched (kept by CURLMOPT_SOCKETFUNCTION, pure C),
 *    timeout() the time it needs, and action(fd, events) / action_timeout()
 *    run curl_multi_socket_action. core.poll(fds, timeout_ms) is a poll(2)
 *    over such a list, for a Lua loop with no host loop of its own, and
 *    core.drive(drivers, timeout_ms) drives many drivers in one poll(2)
 *    (both in drive.c, which stands on this file).
 * curl_multi_perform moves every transfer on without telling the socket
 * callback, so a transfer it moved is missing from fds() until a libcurl
 * timer of its fires (for a request on a kept-alive connection: its
 * timeout). add(request, true) marks a transfer the socket API will drive;
 * socket_driven() tells while one is attached, and the blocking path then
 * drives the driver through the socket API too (geoservices.loop). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "class.h"
#include "net/idle_gc.h"
#include "net/request.h"

/* The driver's user value: the request perform() makes its requests with. */
#define UV_PERFORM 1

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
  free(drv->watch);
  drv->watch = NULL;
  drv->nwatch = drv->capwatch = 0;
  return 0;
}

/* CURLMOPT_SOCKETFUNCTION: keeps the list of sockets to watch. C only: no
 * Lua here (the callback runs inside curl_multi_* calls). */
static int socket_cb(CURL *easy, curl_socket_t s, int what, void *clientp, void *socketp) {
  geoservices_driver *drv = (geoservices_driver *)clientp;
  size_t i;
  (void)easy;
  (void)socketp;
  for (i = 0; i < drv->nwatch && drv->watch[i].fd != s; i++) continue;
  if (what == CURL_POLL_REMOVE) {
    if (i < drv->nwatch) {
      drv->watch[i] = drv->watch[--drv->nwatch];
      drv->watch_gen++;
    }
    return 0;
  }
  if (i == drv->nwatch) {
    if (drv->nwatch == drv->capwatch) {
      size_t cap = drv->capwatch ? drv->capwatch * 2 : 8;
      geoservices_watch *grown = (geoservices_watch *)realloc(drv->watch, cap * sizeof(*grown));
      if (!grown) {
        drv->watch_oom = 1;
        return -1; /* the curl_multi_* call returns CURLM_ABORTED_BY_CALLBACK */
      }
      drv->watch = grown;
      drv->capwatch = cap;
    }
    drv->watch[i].fd = s;
    drv->watch[i].what = 0;
    drv->watch[i].id = ++drv->watch_serial;
    drv->nwatch++;
  }
  if (drv->watch[i].what != what) {
    drv->watch[i].what = what;
    drv->watch_gen++;
  }
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
  drv = (geoservices_driver *)lua_newuserdatauv(L, sizeof(*drv), 1);
  memset(drv, 0, sizeof(*drv));
  luaL_setmetatable(L, GEOSERVICES_DRIVER_MT);
  drv->multi = curl_multi_init();
  if (!drv->multi) return luaL_error(L, "driver: curl_multi_init failed");
  curl_multi_setopt(drv->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
  curl_multi_setopt(drv->multi, CURLMOPT_SOCKETDATA, (void *)drv);
  if (per_host > 0) curl_multi_setopt(drv->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)per_host);
  if (total > 0) curl_multi_setopt(drv->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)total);
  return 1;
}

/* Starts the transfer of req (the userdata at index ud) on the next
 * perform of the multi handle, anchored until it finishes. */
static CURLMcode attach(lua_State *L, geoservices_driver *drv, geoservices_request *req, int ud, int by_sockets) {
  CURLMcode rc;
  /* A finished or cancelled request may be sent again (same body): start clean. */
  geoservices_buf_reset(&req->response_body);
  geoservices_buf_reset(&req->response_headers);
  req->too_large = 0;
  req->received = 0;
  req->errbuf[0] = '\0';
  rc = curl_multi_add_handle(drv->multi, req->easy);
  if (rc != CURLM_OK) return rc;
  lua_pushvalue(L, ud);
  req->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  req->driver = drv;
  req->state = REQUEST_RUNNING;
  req->by_sockets = by_sockets;
  if (by_sockets) drv->socket_transfers++; /* until it is detached */
  req->prev = NULL;
  req->next = drv->attached;
  if (drv->attached) drv->attached->prev = req;
  drv->attached = req;
  return CURLM_OK;
}

/* add(request[, by_sockets]): starts the transfer on the next step() or
 * action. With by_sockets, the transfer is the socket API's (a task's
 * request): socket_driven() is true until it finished or was removed. */
static int l_driver_add(lua_State *L) {
  geoservices_driver *drv = check_open_driver(L, 1);
  geoservices_request *req = geoservices_check_request(L, 2);
  CURLMcode rc;
  if (req->state == REQUEST_CLOSED) return luaL_error(L, "attempt to use a closed request");
  if (req->state == REQUEST_RUNNING) return luaL_error(L, "driver:add: request is already running");
  /* its extractor has seen part of a document: it cannot start over */
  if (req->records && (req->state == REQUEST_DONE || req->received > 0))
    return luaL_error(L, "driver:add: a records request cannot be sent again");
  rc = attach(L, drv, req, 2, lua_toboolean(L, 3));
  if (rc != CURLM_OK) return push_multi_error(L, rc);
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
  geoservices_request *r;
  lua_newtable(L);
  rc = curl_multi_perform(drv->multi, &drv->running);
  if (rc != CURLM_OK) return push_multi_error(L, rc);
  n = drain_finished(L, drv, n);
  /* A transfer paused for a full record tape waits for Lua to drain it:
   * polling now would only sleep, since libcurl ignores a paused socket. */
  for (r = drv->attached; r && timeout_ms > 0; r = r->next)
    if (r->paused) timeout_ms = 0;
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

/* Reads finished transfers like drain_finished, without building a list;
 * returns how many finished. */
int geoservices_driver_finish_transfers(lua_State *L, geoservices_driver *drv) {
  CURLMsg *msg;
  int left, n = 0;
  while ((msg = curl_multi_info_read(drv->multi, &left))) {
    geoservices_request *req = NULL;
    if (msg->msg != CURLMSG_DONE) continue;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&req);
    if (!req || req->ref == LUA_NOREF) continue;
    geoservices_request_finished(L, req, msg->data.result);
    n++;
  }
  return n;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Drives the multi handle until req is no longer running, max_ms passed or
 * the transfer paused until its records are drained (curl_multi_perform,
 * then curl_multi_poll for as long as libcurl's own timeout allows, never
 * past max_ms); other requests that finish meanwhile finish as in step().
 * With idle_gc, the first time it would wait it takes an idle collector
 * step first (idle_gc_step); if the driver was closed meanwhile, req is no
 * longer running. */
static CURLMcode wait_request(lua_State *L, geoservices_driver *drv, geoservices_request *req, lua_Integer max_ms,
                              int idle_gc) {
  double until = now_ms() + (double)max_ms;
  CURLMcode rc;
  for (;;) {
    long t = -1;
    double left;
    rc = curl_multi_perform(drv->multi, &drv->running);
    if (rc != CURLM_OK) return rc;
    geoservices_driver_finish_transfers(L, drv);
    if (req->state != REQUEST_RUNNING) return CURLM_OK;
    left = until - now_ms();
    if (left <= 0 || req->paused) return CURLM_OK;
    rc = curl_multi_timeout(drv->multi, &t);
    if (rc != CURLM_OK) return rc;
    if (t < 0 || (double)t > left) t = (long)left + 1;
    if (t > 0 && idle_gc) {
      idle_gc = 0;
      geoservices_idle_gc_step(L);
      if (!drv->multi || req->state != REQUEST_RUNNING) return CURLM_OK;
    }
    if (t > 0) {
      rc = curl_multi_poll(drv->multi, NULL, 0, (int)t, NULL);
      if (rc != CURLM_OK) return rc;
    }
  }
}

/* wait(request, max_ms) -> true once the request is no longer running,
 * false when max_ms passed first (or the transfer paused until its records
 * are drained), or nil, message, code on a multi error. The blocking wait
 * of a caller outside any task, in one call instead of a step() per wake-up
 * (curl_multi_perform, then curl_multi_poll for as long as libcurl's own
 * timeout allows, never past max_ms). Other requests of the driver that
 * finish meanwhile finish as they would in step(). */
static int l_driver_wait(lua_State *L) {
  geoservices_driver *drv = check_open_driver(L, 1);
  geoservices_request *req = geoservices_check_request(L, 2);
  lua_Integer max_ms = luaL_checkinteger(L, 3);
  CURLMcode rc;
  if (req->state == REQUEST_RUNNING && req->driver != drv)
    return luaL_argerror(L, 2, "the request runs on another driver");
  rc = wait_request(L, drv, req, max_ms, 0);
  if (rc != CURLM_OK) return push_multi_error(L, rc);
  lua_pushboolean(L, req->state != REQUEST_RUNNING);
  return 1;
}

/* perform(spec, max_ms) -> what request:result() returns | false, request
 * | nil, message, code: the blocking request of a caller that drives this
 * driver alone, in one call instead of core.request, add, wait, result and
 * close (and without a new userdata: the driver keeps one for it). The
 * request is made from spec (the options of core.request, which raise as
 * there), sent, and waited for as wait() does for up to max_ms; once it
 * finished, its result is returned and it is closed. When max_ms passed
 * first, false and the running request are returned: the caller goes on
 * waiting for it (wait()) and closes it. nil, message, code for a multi
 * error (the request is closed). */
static int l_driver_perform(lua_State *L) {
  geoservices_driver *drv = check_open_driver(L, 1);
  lua_Integer max_ms = luaL_checkinteger(L, 3);
  geoservices_request *req = NULL;
  CURLMcode rc;
  int n;
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 3);
  /* the kept request when it is idle; else (in use: a finalizer performing
   * during a perform, or an error left it unfinished) a new one kept instead */
  if (lua_getiuservalue(L, 1, UV_PERFORM) == LUA_TUSERDATA)
    req = (geoservices_request *)luaL_testudata(L, -1, GEOSERVICES_REQUEST_MT);
  if (!req || req->state != REQUEST_CLOSED) {
    lua_pop(L, 1);
    req = geoservices_request_push_closed(L);
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, 1, UV_PERFORM);
  }
  geoservices_request_setup(L, req, 4, 2); /* raises on bad options; the next perform closes it */
  rc = attach(L, drv, req, 4, 0);
  if (rc == CURLM_OK) rc = wait_request(L, drv, req, max_ms, 1);
  if (rc != CURLM_OK) {
    geoservices_request_close(L, req);
    return push_multi_error(L, rc);
  }
  if (req->state == REQUEST_RUNNING) { /* max_ms passed: the caller's now */
    lua_pushnil(L);
    lua_setiuservalue(L, 1, UV_PERFORM);
    lua_pushboolean(L, 0);
    lua_pushvalue(L, 4);
    return 2;
  }
  if (req->state != REQUEST_DONE) { /* a finalizer closed the driver while it waited */
    geoservices_request_close(L, req);
    luaL_pushfail(L);
    lua_pushliteral(L, "the client was closed while the request was in flight");
    lua_pushliteral(L, "closed");
    return 3;
  }
  n = geoservices_request_push_result(L, req, 4);
  geoservices_request_close(L, req);
  return n;
}

/* Finishes an action: the array of finished requests, then running count. */
static int push_action_result(lua_State *L, geoservices_driver *drv, CURLMcode rc) {
  if (rc != CURLM_OK) {
    drv->watch_oom = 0;
    return push_multi_error(L, rc);
  }
  lua_newtable(L);
  drain_finished(L, drv, 0);
  lua_pushinteger(L, drv->running);
  lua_insert(L, -2);
  return 2;
}

/* "r", "w", "rw", with an optional "e" (error/hang-up) -> CURL_CSELECT_* */
static int check_events(lua_State *L, int idx) {
  const char *ev = luaL_optstring(L, idx, "");
  int mask = 0;
  for (; *ev; ev++) {
    if (*ev == 'r') mask |= CURL_CSELECT_IN;
    else if (*ev == 'w') mask |= CURL_CSELECT_OUT;
    else if (*ev == 'e') mask |= CURL_CSELECT_ERR;
    else luaL_argerror(L, idx, "events must be made of 'r', 'w' and 'e'");
  }
  return mask;
}

/* action(fd, events) -> running_count, {finished requests}
 * The host loop saw `events` on `fd` (one of fds()); never blocks. */
static int l_driver_action(lua_State *L) {
  geoservices_driver *drv = check_open_driver(L, 1);
  lua_Integer fd = luaL_checkinteger(L, 2);
  int mask = check_events(L, 3);
  CURLMcode rc;
  luaL_argcheck(L, fd >= 0 && fd <= 0x7fffffff, 2, "not a file descriptor");
  rc = curl_multi_socket_action(drv->multi, (curl_socket_t)fd, mask, &drv->running);
  return push_action_result(L, drv, rc);
}

/* action_timeout() -> running_count, {finished requests}
 * The time timeout() asked for has passed (also the first kick after add). */
static int l_driver_action_timeout(lua_State *L) {
  geoservices_driver *drv = check_open_driver(L, 1);
  CURLMcode rc = curl_multi_socket_action(drv->multi, CURL_SOCKET_TIMEOUT, 0, &drv->running);
  return push_action_result(L, drv, rc);
}

/* fds() -> { {fd = n, events = "r"|"w"|"rw", id = n}, ... }, generation
 * The sockets libcurl asked to watch in host-loop mode; the generation
 * changes whenever the list does, so a host can skip re-registering. `id`
 * is new for each registration: a socket closed and a new one opened under
 * the same number between two calls shows up with a different id, and a
 * host loop must then drop its old watcher (epoll forgets closed files). */
static int l_driver_fds(lua_State *L) {
  geoservices_driver *drv = check_open_driver(L, 1);
  size_t i;
  lua_createtable(L, (int)drv->nwatch, 0);
  for (i = 0; i < drv->nwatch; i++) {
    int what = drv->watch[i].what;
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, (lua_Integer)drv->watch[i].fd);
    lua_setfield(L, -2, "fd");
    lua_pushinteger(L, drv->watch[i].id);
    lua_setfield(L, -2, "id");
    lua_pushstring(L, what == CURL_POLL_INOUT ? "rw" : what == CURL_POLL_OUT ? "w" : "r");
    lua_setfield(L, -2, "events");
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_pushinteger(L, drv->watch_gen);
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

/* socket_driven() -> true while a transfer added by_sockets is attached:
 * then the driver must be driven through the socket API only (false once
 * closed). */
static int l_driver_socket_driven(lua_State *L) {
  geoservices_driver *drv = check_driver(L, 1);
  lua_pushboolean(L, drv->multi && drv->socket_transfers > 0);
  return 1;
}

/* closed() -> true once close() ran (the client was closed). */
static int l_driver_closed(lua_State *L) {
  geoservices_driver *drv = check_driver(L, 1);
  lua_pushboolean(L, drv->multi == NULL);
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
    {"wait", l_driver_wait},
    {"perform", l_driver_perform},
    {"fds", l_driver_fds},
    {"action", l_driver_action},
    {"action_timeout", l_driver_action_timeout},
    {"timeout", l_driver_timeout},
    {"wakeup", l_driver_wakeup},
    {"count", l_driver_count},
    {"closed", l_driver_closed},
    {"socket_driven", l_driver_socket_driven},
    {"close", l_driver_close},
    {NULL, NULL},
  };
  static const luaL_Reg meta[] = {
    {"__gc", l_driver_close},
    {"__close", l_driver_close},
    {"__tostring", l_driver_tostring},
    {NULL, NULL},
  };
  geoservices_open_idle_gc(L);
  geoservices_new_class(L, GEOSERVICES_DRIVER_MT, methods, meta);
  lua_pushcfunction(L, l_driver_new);
  lua_setfield(L, -2, "driver");
}
