/* Lua binding of the record extractor: replays the tape into one Lua table
 * per record and calls a Lua function with it, outside any libcurl callback.
 * Used by requests in records mode (request.c) and by the standalone
 * Records class (feed strings or file chunks yourself). This file is the
 * Records class; the replay itself is lua_replay.c. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "class.h"
#include "common.h"
#include "json/lua_records.h"

/* ---- the Records class ---------------------------------------------------- */

typedef geoservices_records_ud records_ud;

/* Bytes fed to every record extractor of the process (core.records_fed()):
 * how many times a result was parsed, counted by specs and benchmarks. Only
 * the thread of a Lua state feeds its extractors (a worker parses what they
 * were fed); several states on several threads may make the count approximate. */
static unsigned long long fed_total;

static void count_fed(records_ud *u, size_t n) {
  u->fed += n;
  fed_total += n;
}

geoservices_records_ud *geoservices_check_records(lua_State *L, int idx) {
  return (records_ud *)luaL_checkudata(L, idx, GEOSERVICES_RECORDS_MT);
}

static records_ud *check_records(lua_State *L, int idx) {
  records_ud *u = geoservices_check_records(L, idx);
  if (!u->records) luaL_error(L, "attempt to use a closed Records");
  if (u->busy) luaL_error(L, "attempt to use a Records inside its own read_all");
  return u;
}

int geoservices_records_ud_feed(geoservices_records_ud *u, const char *s, size_t len) {
  int rc;
  if (!u->records) return GEOSERVICES_JSON_EABORT;
  rc = geoservices_records_feed(u->records, s, len);
  if (rc != 0) u->failed = 1;
  else count_fed(u, len);
  return rc;
}

lua_Integer geoservices_records_drain(lua_State *L, int ud_idx, int fn_idx) {
  records_ud *u;
  lua_Integer n;
  ud_idx = lua_absindex(L, ud_idx);
  fn_idx = lua_absindex(L, fn_idx);
  u = geoservices_check_records(L, ud_idx);
  if (!u->records) luaL_error(L, "attempt to use a closed Records");
  lua_getiuservalue(L, ud_idx, 1);
  lua_getiuservalue(L, ud_idx, 2);
  n = geoservices_records_replay(L, u->records, &u->replay, fn_idx, -2, -1);
  lua_pop(L, 2);
  return n;
}

static int l_records_close(lua_State *L) {
  records_ud *u = (records_ud *)luaL_checkudata(L, 1, GEOSERVICES_RECORDS_MT);
  if (u->busy) return luaL_error(L, "attempt to use a Records inside its own read_all");
  if (u->records) geoservices_records_free(u->records);
  u->records = NULL;
  return 0;
}

void geoservices_read_json_limits(lua_State *L, int idx, geoservices_json_limits *lim) {
  memset(lim, 0, sizeof *lim);
  if (lua_isnoneornil(L, idx)) return;
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_getfield(L, idx, "max_depth");
  lim->max_depth = (size_t)luaL_optinteger(L, -1, 0);
  lua_getfield(L, idx, "max_value_bytes");
  lim->max_value_bytes = (size_t)luaL_optinteger(L, -1, 0);
  lua_pop(L, 2);
}

/* records([{max_depth=, max_value_bytes=, worker_after=, values=}]) -> Records.
 * worker_after: bytes fed before parsing moves to a worker thread (false:
 * never; the default is GEOSERVICES_RECORDS_WORKER_AFTER). values = false:
 * a layer entry's records are delivered without their value (nil), for a
 * reader that only counts them: one whose layer id comes after them then
 * waits as a count, not as a table each. */
static int l_records_new(lua_State *L) {
  geoservices_json_limits lim;
  records_ud *u;
  size_t worker_after = GEOSERVICES_RECORDS_WORKER_AFTER;
  int count_only = 0;
  geoservices_read_json_limits(L, 1, &lim);
  if (lua_istable(L, 1)) {
    lua_getfield(L, 1, "worker_after");
    if (lua_isboolean(L, -1) && !lua_toboolean(L, -1)) worker_after = 0;
    else if (!lua_isnil(L, -1)) {
      lua_Integer n = luaL_checkinteger(L, -1);
      luaL_argcheck(L, n >= 1, 1, "worker_after must be at least 1 (false: never)");
      worker_after = (size_t)n;
    }
    lua_pop(L, 1);
    lua_getfield(L, 1, "values");
    count_only = lua_isboolean(L, -1) && !lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  u = (records_ud *)lua_newuserdatauv(L, sizeof *u, 2);
  memset(u, 0, sizeof *u);
  u->replay.count_only = count_only;
  luaL_setmetatable(L, GEOSERVICES_RECORDS_MT);
  lua_newtable(L);
  lua_setiuservalue(L, -2, 1); /* records waiting for their layer id */
  lua_createtable(L, 48, 0); /* Lua strings: the record kinds, then the extractor's key ids */
  {
    int k;
    for (k = 0; k < RECORD_KIND_COUNT; k++) {
      lua_pushstring(L, geoservices_record_kind_names[k]);
      lua_rawseti(L, -2, GEOSERVICES_RECORDS_KIND_SLOT(k));
    }
  }
  lua_setiuservalue(L, -2, 2);
  u->records = geoservices_records_new(&lim);
  if (!u->records) return luaL_error(L, "records: not enough memory");
  geoservices_records_set_worker_after(u->records, worker_after);
  return 1;
}

int geoservices_push_records_error(lua_State *L, geoservices_records *r) {
  size_t offset = geoservices_records_offset(r) + 1; /* 1-based, as string.sub */
  luaL_pushfail(L);
  lua_pushfstring(L, "invalid JSON at byte %I: %s", (lua_Integer)offset, geoservices_records_error(r));
  lua_pushinteger(L, (lua_Integer)offset);
  return 3;
}

static int l_records_feed(lua_State *L) {
  records_ud *u = check_records(L, 1);
  size_t len;
  const char *s = luaL_checklstring(L, 2, &len);
  if (geoservices_records_ud_feed(u, s, len) != 0) return geoservices_push_records_error(L, u->records);
  lua_pushboolean(L, 1);
  return 1;
}

/* fail, "cannot read the file: ..." (not a JSON error: no offset). */
static int push_read_error(lua_State *L, int e) {
  luaL_pushfail(L);
  lua_pushfstring(L, "cannot read the file: %s", strerror(e));
  return 2;
}

static long fill_from_file(void *ctx, char *room, size_t k) {
  FILE *f = ctx;
  size_t got = fread(room, 1, k, f);
  if (got == 0 && ferror(f)) return -1;
  return (long)got;
}

/* read(file [, bytes = 262144]) -> bytes read and fed (0 at the end of the
 * file); fail, message, offset on a JSON error; fail, message, errno when
 * the file cannot be read. The bytes go from the file straight to the
 * parser (into the worker's ring once it runs): no Lua string per chunk. */
static int l_records_read(lua_State *L) {
  records_ud *u = check_records(L, 1);
  luaL_Stream *file = (luaL_Stream *)luaL_checkudata(L, 2, LUA_FILEHANDLE);
  lua_Integer max = luaL_optinteger(L, 3, 262144);
  long n;
  luaL_argcheck(L, file->closef != NULL, 2, "attempt to use a closed file");
  luaL_argcheck(L, max >= 1, 3, "bytes must be at least 1");
  if (u->failed) return geoservices_push_records_error(L, u->records);
  if (geoservices_records_fill(u->records, fill_from_file, file->f, (size_t)max, &n) != 0) {
    u->failed = 1;
    return geoservices_push_records_error(L, u->records);
  }
  if (n < 0) return push_read_error(L, errno);
  count_fed(u, (size_t)n);
  lua_pushinteger(L, (lua_Integer)n);
  return 1;
}

/* read_all's loop, in a protected call so that the worker stops reading
 * the file before an error of fn leaves: stack ud, fn, its state. */
typedef struct {
  int threaded; /* the worker reads the file; else this thread does, chunk by chunk */
  int rc;       /* a JSON error's code */
  int read_failed, read_errno;
  size_t max;
  FILE *f;
} read_all_state;

static int read_all_loop(lua_State *L) {
  read_all_state *st = (read_all_state *)lua_touserdata(L, 3);
  records_ud *u = geoservices_check_records(L, 1);
  if (st->threaded) {
    unsigned long seen = 0;
    geoservices_source_status src;
    for (;;) {
      st->rc = geoservices_records_await(u->records, &seen, &src);
      geoservices_records_drain(L, 1, 2);
      if (st->rc != 0) return 0;
      if (src.state == GEOSERVICES_SOURCE_FAILED) {
        st->read_failed = 1;
        st->read_errno = src.read_errno;
      }
      if (src.state != GEOSERVICES_SOURCE_READING) return 0;
    }
  }
  for (;;) {
    long n;
    st->rc = geoservices_records_fill(u->records, fill_from_file, st->f, st->max, &n);
    if (n < 0) {
      st->read_failed = 1;
      st->read_errno = errno;
    }
    geoservices_records_drain(L, 1, 2);
    if (st->rc != 0 || n <= 0) return 0;
  }
}

/* read_all(file, fn [, bytes = 262144]) -> bytes read. Reads the file to
 * its end, `bytes` at a time, and calls fn(kind, layer_id, value, key) for
 * each record as it completes (as drain does): the reading and the parsing
 * run on the worker thread while this one builds the records, so a large
 * file costs this thread only its records. finish() and a last drain(fn)
 * follow, as after read(). fail, message, offset on a JSON error (the
 * records before it were delivered); fail, message when the file cannot be
 * read. fn may not use this Records. */
static int l_records_read_all(lua_State *L) {
  records_ud *u = check_records(L, 1);
  luaL_Stream *file = (luaL_Stream *)luaL_checkudata(L, 2, LUA_FILEHANDLE);
  lua_Integer max = luaL_optinteger(L, 4, 262144);
  read_all_state st;
  size_t before;
  int status;
  luaL_checktype(L, 3, LUA_TFUNCTION);
  luaL_argcheck(L, file->closef != NULL, 2, "attempt to use a closed file");
  luaL_argcheck(L, max >= 1, 4, "bytes must be at least 1");
  if (u->failed) return geoservices_push_records_error(L, u->records);
  memset(&st, 0, sizeof st);
  st.max = (size_t)max;
  st.f = file->f;
  before = geoservices_records_fed(u->records);
  st.rc = geoservices_records_source(u->records, fill_from_file, file->f, st.max);
  if (st.rc > 0) {
    u->failed = 1;
    return geoservices_push_records_error(L, u->records);
  }
  st.threaded = st.rc == 0;
  st.rc = 0;
  lua_pushcfunction(L, read_all_loop);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 3);
  lua_pushlightuserdata(L, &st);
  u->busy = 1;
  status = lua_pcall(L, 3, 0, 0);
  geoservices_records_end_source(u->records); /* the file is the caller's again (close refuses while busy) */
  u->busy = 0;
  count_fed(u, geoservices_records_fed(u->records) - before);
  if (status != LUA_OK) return lua_error(L);
  if (st.rc != 0) {
    u->failed = 1;
    return geoservices_push_records_error(L, u->records);
  }
  if (st.read_failed) return push_read_error(L, st.read_errno);
  lua_pushinteger(L, (lua_Integer)(geoservices_records_fed(u->records) - before));
  return 1;
}

static int l_records_finish(lua_State *L) {
  records_ud *u = check_records(L, 1);
  if (u->failed) return geoservices_push_records_error(L, u->records);
  if (geoservices_records_finish(u->records) != 0) {
    u->failed = 1;
    return geoservices_push_records_error(L, u->records);
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* drain(fn) -> number of records delivered as fn(kind, layer_id, value, key) */
static int l_records_drain(lua_State *L) {
  check_records(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushinteger(L, geoservices_records_drain(L, 1, 2));
  return 1;
}

/* fed() -> bytes fed so far; error() -> message, offset of a failure or nil */
static int l_records_fed(lua_State *L) {
  records_ud *u = check_records(L, 1);
  lua_pushinteger(L, (lua_Integer)u->fed);
  return 1;
}

static int l_records_error(lua_State *L) {
  records_ud *u = check_records(L, 1);
  if (!u->failed) return 0;
  geoservices_push_records_error(L, u->records); /* nil, message, offset */
  lua_remove(L, -3);
  return 2;
}

/* records:waiting() -> entries waiting for their layer's id: a record each,
 * or (values = false) a run of records alike each. */
static int l_records_waiting(lua_State *L) {
  check_records(L, 1);
  lua_getiuservalue(L, 1, 1);
  lua_pushinteger(L, (lua_Integer)lua_rawlen(L, -1));
  return 1;
}

static int l_records_pending(lua_State *L) {
  records_ud *u = check_records(L, 1);
  lua_pushinteger(L, (lua_Integer)geoservices_records_pending(u->records));
  return 1;
}

static int l_records_tostring(lua_State *L) {
  records_ud *u = (records_ud *)luaL_checkudata(L, 1, GEOSERVICES_RECORDS_MT);
  lua_pushfstring(L, "%s (%p%s)", GEOSERVICES_RECORDS_MT, (void *)u, u->records ? "" : ", closed");
  return 1;
}

/* core.records_fed() -> bytes fed to every record extractor of this process so far */
static int l_records_fed_total(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)fed_total);
  return 1;
}

void geoservices_open_records(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"feed", l_records_feed},
    {"read", l_records_read},
    {"read_all", l_records_read_all},
    {"finish", l_records_finish},
    {"drain", l_records_drain},
    {"pending", l_records_pending},
    {"waiting", l_records_waiting},
    {"fed", l_records_fed},
    {"error", l_records_error},
    {"close", l_records_close},
    {NULL, NULL},
  };
  static const luaL_Reg meta[] = {
    {"__gc", l_records_close},
    {"__close", l_records_close},
    {"__tostring", l_records_tostring},
    {NULL, NULL},
  };
  geoservices_new_class(L, GEOSERVICES_RECORDS_MT, methods, meta);
  lua_pushcfunction(L, l_records_new);
  lua_setfield(L, -2, "records");
  lua_pushcfunction(L, l_records_fed_total);
  lua_setfield(L, -2, "records_fed");
}
