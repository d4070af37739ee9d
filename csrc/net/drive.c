/* Waiting on many drivers at once: core.drive(drivers, timeout_ms), the
 * scheduler's turn (geoservices.loop) over every driver its tasks wait on
 * through the socket API in one poll(2), and core.poll(fds, timeout_ms), a
 * poll(2) over a list shaped like driver:fds() for a Lua loop with no host
 * loop of its own. One driver, its multi handle and its own waits are
 * driver.c; this file stands on it and on the idle collector step. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/idle_gc.h"
#include "net/request.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* core.poll(fds, timeout_ms) -> { {fd =, events = "r"|"w"|"rw" [.. "e"]}, ... }
 * poll(2) over a list shaped like driver:fds(); timeout_ms < 0 or nil waits
 * without limit. Interrupted by a signal: an empty list. */
static int l_poll(lua_State *L) {
  lua_Integer n, i, timeout_ms;
  struct pollfd *pfd;
  int rc, out = 0;
  luaL_checktype(L, 1, LUA_TTABLE);
  timeout_ms = luaL_optinteger(L, 2, -1);
  if (timeout_ms < 0) timeout_ms = -1;
  if (timeout_ms > 0x7fffffff) timeout_ms = 0x7fffffff;
  n = luaL_len(L, 1);
  luaL_argcheck(L, n >= 0 && n <= 0x100000, 1, "too many descriptors");
  pfd = (struct pollfd *)lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof(*pfd), 0);
  for (i = 0; i < n; i++) {
    const char *ev;
    lua_Integer fd;
    lua_rawgeti(L, 1, i + 1);
    luaL_argcheck(L, lua_istable(L, -1), 1, "expected a list of {fd =, events =}");
    lua_getfield(L, -1, "fd");
    fd = luaL_checkinteger(L, -1);
    luaL_argcheck(L, fd >= 0 && fd <= 0x7fffffff, 1, "not a file descriptor");
    lua_getfield(L, -2, "events");
    ev = luaL_optstring(L, -1, "r");
    pfd[i].fd = (int)fd;
    pfd[i].events = 0;
    pfd[i].revents = 0;
    if (strchr(ev, 'r')) pfd[i].events |= POLLIN;
    if (strchr(ev, 'w')) pfd[i].events |= POLLOUT;
    lua_pop(L, 3);
  }
  rc = poll(pfd, (nfds_t)n, (int)timeout_ms);
  if (rc < 0 && errno != EINTR) {
    int e = errno;
    luaL_pushfail(L);
    lua_pushstring(L, strerror(e));
    lua_pushstring(L, "poll");
    return 3;
  }
  lua_newtable(L);
  for (i = 0; rc > 0 && i < n; i++) {
    char ev[4];
    int k = 0;
    if (!pfd[i].revents) continue;
    if (pfd[i].revents & (POLLIN | POLLHUP)) ev[k++] = 'r';
    if (pfd[i].revents & POLLOUT) ev[k++] = 'w';
    if (pfd[i].revents & (POLLERR | POLLNVAL)) ev[k++] = 'e';
    ev[k] = '\0';
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, (lua_Integer)pfd[i].fd);
    lua_setfield(L, -2, "fd");
    lua_pushstring(L, ev);
    lua_setfield(L, -2, "events");
    lua_rawseti(L, -2, ++out);
  }
  return 1;
}

/* A driver of core.drive's table and whether it failed. */
typedef struct {
  geoservices_driver *drv;
  int key;      /* stack index of the driver userdata (its key in the table) */
  CURLMcode rc; /* the first multi error, or CURLM_OK */
} drive_entry;

#define DRIVE_INLINE 16 /* drivers and sockets handled without an allocation */

/* Runs one action of a driver; returns how many of its transfers finished. */
static int drive_action(lua_State *L, drive_entry *e, curl_socket_t fd, int mask) {
  CURLMcode rc;
  if (e->rc != CURLM_OK || !e->drv->multi) return 0;
  rc = curl_multi_socket_action(e->drv->multi, fd, mask, &e->drv->running);
  if (rc != CURLM_OK) {
    e->drv->watch_oom = 0;
    e->rc = rc;
    return 0;
  }
  return geoservices_driver_finish_transfers(L, e->drv);
}

/* True when a request of the driver has something for its task although it
 * still runs: records to drain, or a transfer paused until they are (what
 * request:ready() tells, for the requests still attached). */
static int has_ready_records(const geoservices_driver *drv) {
  const geoservices_request *r;
  for (r = drv->attached; r; r = r->next) {
    size_t complete = 0;
    if (r->paused) return 1;
    if (r->records && r->records->records) {
      geoservices_records_tape(r->records->records, &complete);
      if (complete > 0) return 1;
    }
  }
  return 0;
}

/* True when a driver of the entries was closed or failed, or has records
 * for its task: core.drive returns. */
static int must_stop(const drive_entry *entries, int n) {
  int i;
  for (i = 0; i < n; i++)
    if (!entries[i].drv->multi || entries[i].rc != CURLM_OK || has_ready_records(entries[i].drv)) return 1;
  return 0;
}

/* Transfers the entries' drivers finished so far. */
static unsigned long finished_total(const drive_entry *entries, int n) {
  unsigned long total = 0;
  int i;
  for (i = 0; i < n; i++) total += entries[i].drv->finished;
  return total;
}

/* The sockets of the drivers to poll, in arrays that grow as Lua userdata
 * (freed by the collector if anything raises). */
typedef struct {
  struct pollfd *pfd;
  int *owner; /* index of the entry each socket belongs to */
  int n, cap;
} drive_fds;

static void collect_fds(lua_State *L, drive_entry *entries, int n, drive_fds *fds) {
  int i;
  size_t w;
  fds->n = 0;
  for (i = 0; i < n; i++) {
    geoservices_driver *drv = entries[i].drv;
    if (!drv->multi || entries[i].rc != CURLM_OK) continue;
    for (w = 0; w < drv->nwatch; w++) {
      if (fds->n == fds->cap) {
        struct pollfd *grown_pfd;
        int *grown_owner;
        luaL_checkstack(L, 2, NULL);
        fds->cap *= 2;
        grown_pfd = (struct pollfd *)lua_newuserdatauv(L, (size_t)fds->cap * sizeof(*grown_pfd), 0);
        grown_owner = (int *)lua_newuserdatauv(L, (size_t)fds->cap * sizeof(*grown_owner), 0);
        memcpy(grown_pfd, fds->pfd, (size_t)fds->n * sizeof(*grown_pfd));
        memcpy(grown_owner, fds->owner, (size_t)fds->n * sizeof(*grown_owner));
        fds->pfd = grown_pfd;
        fds->owner = grown_owner;
      }
      fds->pfd[fds->n].fd = (int)drv->watch[w].fd;
      fds->pfd[fds->n].events = (short)((drv->watch[w].what & CURL_POLL_IN ? POLLIN : 0) |
                                        (drv->watch[w].what & CURL_POLL_OUT ? POLLOUT : 0));
      fds->pfd[fds->n].revents = 0;
      fds->owner[fds->n] = i;
      fds->n++;
    }
  }
}

/* core.drive(drivers, timeout_ms) -> true[, failures] | nil, message
 * A scheduler's wait over every driver that is a key of the table `drivers`,
 * through the socket API: poll(2) over all their sockets (never longer than
 * their libcurl timers ask), curl_multi_socket_action for each ready socket
 * and each due timer, again and again, until a transfer finished (its
 * request leaves "running"), a request has records for its task, a driver
 * failed, poll(2) was interrupted, or timeout_ms passed; with timeout_ms 0,
 * one turn that never waits. So Lua wakes only when a task can go on, not
 * for every step of a transfer (sending a request, then its answer).
 * What Scheduler:fds/:timeout/:action/:action_timeout do for a host loop,
 * without a Lua table per socket and per event. `failures` lists, for the
 * drivers that failed as a whole, {driver, message, code, ...} (a closed
 * driver has code "closed"). nil, message when poll(2) itself fails. */
static int l_drive(lua_State *L) {
  drive_entry inline_entries[DRIVE_INLINE], *entries = inline_entries;
  struct pollfd inline_pfd[DRIVE_INLINE];
  int inline_owner[DRIVE_INLINE];
  drive_fds fds;
  lua_Integer timeout_ms = luaL_checkinteger(L, 2);
  int n = 0, cap = DRIVE_INLINE, i, rc, failures = 0, listed = 0, top, idle_gc = 1;
  double until;
  luaL_checktype(L, 1, LUA_TTABLE);
  if (timeout_ms < 0) timeout_ms = 0;
  if (timeout_ms > 0x7fffffff) timeout_ms = 0x7fffffff;
  until = now_ms() + (double)timeout_ms;
  /* the drivers stay on the stack (anchored) while libcurl runs */
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    geoservices_driver *drv;
    lua_pop(L, 1);
    drv = (geoservices_driver *)luaL_testudata(L, -1, GEOSERVICES_DRIVER_MT);
    if (!drv) return luaL_error(L, "core.drive: the table's keys must be drivers");
    if (n == cap) {
      drive_entry *grown;
      luaL_checkstack(L, 2, NULL);
      cap *= 2;
      grown = (drive_entry *)lua_newuserdatauv(L, (size_t)cap * sizeof(*grown), 0);
      memcpy(grown, entries, (size_t)n * sizeof(*grown));
      entries = grown;
      lua_insert(L, -2); /* below the key lua_next needs on top */
    }
    luaL_checkstack(L, 4, NULL);
    lua_pushvalue(L, -1);
    lua_insert(L, -2); /* a copy stays below the key */
    entries[n].drv = drv;
    entries[n].key = lua_gettop(L) - 1;
    entries[n].rc = CURLM_OK;
    n++;
  }
  fds.pfd = inline_pfd;
  fds.owner = inline_owner;
  fds.cap = DRIVE_INLINE;
  for (;;) {
    int finished = 0, stop = 0;
    long wait = timeout_ms;
    /* the shortest libcurl timer, and the sockets to watch */
    for (i = 0; i < n; i++) {
      long t = -1;
      if (!entries[i].drv->multi) continue;
      if (curl_multi_timeout(entries[i].drv->multi, &t) != CURLM_OK) t = 0;
      if (t >= 0 && t < wait) wait = t;
    }
    if (wait > 0 && idle_gc) { /* about to block: the collector's step first (idle_gc_step) */
      unsigned long before = finished_total(entries, n);
      int stop_before = must_stop(entries, n);
      idle_gc = 0;
      geoservices_idle_gc_step(L);
      /* a finalizer may have driven these drivers (or closed one) */
      if (finished_total(entries, n) != before || (!stop_before && must_stop(entries, n))) break;
      timeout_ms = (lua_Integer)(until - now_ms());
      if (timeout_ms <= 0) break;
      continue;
    }
    collect_fds(L, entries, n, &fds);
    rc = fds.n == 0 && wait == 0 ? 0 : poll(fds.pfd, (nfds_t)fds.n, (int)wait);
    if (rc < 0 && errno != EINTR) {
      int e = errno;
      luaL_pushfail(L);
      lua_pushstring(L, strerror(e));
      return 2;
    }
    for (i = 0; rc > 0 && i < fds.n; i++) {
      int mask = 0;
      struct pollfd *p = &fds.pfd[i];
      if (!p->revents) continue;
      if (p->revents & (POLLIN | POLLHUP)) mask |= CURL_CSELECT_IN;
      if (p->revents & POLLOUT) mask |= CURL_CSELECT_OUT;
      if (p->revents & (POLLERR | POLLNVAL)) mask |= CURL_CSELECT_ERR;
      finished += drive_action(L, &entries[fds.owner[i]], (curl_socket_t)p->fd, mask);
    }
    /* then the timers that are due (also the first kick after an add) */
    for (i = 0; i < n; i++) {
      long t = -1;
      if (!entries[i].drv->multi || entries[i].rc != CURLM_OK) continue;
      if (curl_multi_timeout(entries[i].drv->multi, &t) == CURLM_OK && t == 0)
        finished += drive_action(L, &entries[i], CURL_SOCKET_TIMEOUT, 0);
    }
    stop = must_stop(entries, n);
    if (finished || stop || rc < 0 || timeout_ms == 0) break;
    timeout_ms = (lua_Integer)(until - now_ms());
    if (timeout_ms <= 0) break;
  }
  luaL_checkstack(L, 4, NULL);
  lua_pushboolean(L, 1);
  top = lua_gettop(L);
  for (i = 0; i < n; i++) {
    int closed = !entries[i].drv->multi;
    if (!closed && entries[i].rc == CURLM_OK) continue;
    if (!listed) {
      lua_newtable(L);
      listed = 1;
    }
    lua_pushvalue(L, entries[i].key);
    lua_rawseti(L, top + 1, ++failures);
    if (closed) {
      lua_pushliteral(L, "the client was closed while the request was in flight");
      lua_rawseti(L, top + 1, ++failures);
      lua_pushliteral(L, "closed");
    } else {
      lua_pushstring(L, curl_multi_strerror(entries[i].rc));
      lua_rawseti(L, top + 1, ++failures);
      lua_pushfstring(L, "multi_%d", (int)entries[i].rc);
    }
    lua_rawseti(L, top + 1, ++failures);
  }
  return listed ? 2 : 1;
}

void geoservices_open_drive(lua_State *L) {
  lua_pushcfunction(L, l_poll);
  lua_setfield(L, -2, "poll");
  lua_pushcfunction(L, l_drive);
  lua_setfield(L, -2, "drive");
}
