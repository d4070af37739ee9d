/* Lua binding of the record extractor: replays the tape into one Lua table
 * per record and calls a Lua function with it, outside any libcurl callback.
 * Used by requests in records mode (request.c) and by the standalone
 * Records class (feed strings or file chunks yourself). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "class.h"
#include "common.h"
#include "json/lua_records.h"
#include "json/strcache.h"


/* The state's string cache (json/strcache.h) during a replay: keys, and
 * short values (names, codes, flags repeat; a longer value is mostly an id
 * seen once, which would only evict the keys). */
/* Where the strings of the ids table sit: the record kinds first, then the
 * extractor's string ids (TAPE_KEY_ID, TAPE_STRING_ID). */
#define KIND_SLOT(kind) ((lua_Integer)(kind) + 1)
#define ID_SLOT(id) ((lua_Integer)(id) + 1 + RECORD_KIND_COUNT)
/* Stack room for this many nested containers is made once per replay
 * (each holds its table, a key and a value, and a cached value's copy);
 * deeper ones check as they open. */
#define ROOMY_DEPTH 8
/* At most this many slots go to the window (the first ids: mostly keys, and
 * the values that repeat from the first records on); later ones are looked up. */
#define WINDOW_MAX (RECORD_KIND_COUNT + 128)

typedef struct {
  geoservices_strcache *c;
  int table_idx;
  int ids_idx; /* the Records' strings: record kinds, then its string ids; or 0 */
  int depth;   /* containers open in the value being pushed */
  /* The ids table's first slots, copied to the stack once per replay, so a
   * key is one lua_pushvalue: slot k at window + k - 1, when its bit is set. */
  int window, window_n;
  uint64_t in_window[(WINDOW_MAX + 63) / 64];
} key_cache;

static int window_has(const key_cache *kc, lua_Integer slot) {
  return slot <= kc->window_n && (kc->in_window[(slot - 1) / 64] >> ((slot - 1) % 64) & 1);
}

/* Pushes the string of an ids table slot: from the window, else from the
 * table (else nil: the caller makes it and calls keep_slot). */
static int push_slot(lua_State *L, key_cache *kc, lua_Integer slot) {
  if (window_has(kc, slot)) {
    lua_pushvalue(L, kc->window + (int)slot - 1);
    return LUA_TSTRING;
  }
  return lua_rawgeti(L, kc->ids_idx, slot);
}

/* Keeps the string on the top (left there) in an ids table slot. */
static void keep_slot(lua_State *L, key_cache *kc, lua_Integer slot) {
  lua_pushvalue(L, -1);
  lua_rawseti(L, kc->ids_idx, slot);
  if (slot <= kc->window_n) {
    lua_copy(L, -1, kc->window + (int)slot - 1);
    kc->in_window[(slot - 1) / 64] |= (uint64_t)1 << ((slot - 1) % 64);
  }
}

#define VALUE_CACHE_MAXLEN 16

/* Pushes the string s[0, len) the extractor numbered `id` (-1: none): from
 * the ids table once seen, else through the state's string cache (strings
 * of up to max_len bytes are kept there), numbered for the next time. */
static inline void push_numbered(lua_State *L, key_cache *kc, int id, const char *s, uint32_t len, size_t max_len) {
  if (id >= 0 && kc->ids_idx) {
    if (push_slot(L, kc, ID_SLOT(id)) != LUA_TNIL) return;
    lua_pop(L, 1); /* the id's first use */
  }
  geoservices_strcache_push(L, kc->c, kc->table_idx, s, len, max_len);
  if (id >= 0 && kc->ids_idx) keep_slot(L, kc, ID_SLOT(id));
}

/* Pushes the scalar at *p: inlined into the loops of the containers, where
 * most values are scalars. */
static inline void push_scalar(lua_State *L, const char **p, key_cache *kc) {
  uint32_t len;
  double d;
  int op = (unsigned char)**p;
  if (geoservices_tape_is_string(op)) {
    int id;
    const char *s = geoservices_tape_key_id(p, &len, &id);
    push_numbered(L, kc, id, s, len, VALUE_CACHE_MAXLEN);
    return;
  }
  (*p)++;
  switch (op) {
    case TAPE_INTEGER:
      lua_pushinteger(L, (lua_Integer)geoservices_tape_i64(p));
      break;
    case TAPE_DOUBLE:
      memcpy(&d, *p, sizeof d);
      *p += sizeof d;
      lua_pushnumber(L, (lua_Number)d);
      break;
    case TAPE_TRUE: lua_pushboolean(L, 1); break;
    case TAPE_FALSE: lua_pushboolean(L, 0); break;
    default: lua_pushlightuserdata(L, NULL); break; /* TAPE_NULL == cjson.null */
  }
}

static void push_container(lua_State *L, const char **p, int array_mt, key_cache *kc);

/* Pushes the value at *p: a scalar here (no call), a container by push_container. */
static inline void push_value(lua_State *L, const char **p, int array_mt, key_cache *kc) {
  int op = (unsigned char)**p;
  if (op == TAPE_OBJECT || op == TAPE_ARRAY) push_container(L, p, array_mt, kc);
  else push_scalar(L, p, kc);
}

/* Pushes the object or array at *p; tables are created at their final size. */
static void push_container(lua_State *L, const char **p, int array_mt, key_cache *kc) {
  int op = (unsigned char)*(*p)++;
  uint32_t n, i, len;
  switch (op) {
    case TAPE_OBJECT:
      n = geoservices_tape_u32(p);
      if (++kc->depth > ROOMY_DEPTH) luaL_checkstack(L, 4, "record too deeply nested");
      lua_createtable(L, 0, (int)n);
      for (i = 0; i < n; i++) {
        int id;
        const char *key = geoservices_tape_key_id(p, &len, &id);
        push_numbered(L, kc, id, key, len, GEOSERVICES_STRCACHE_MAXLEN);
        push_value(L, p, array_mt, kc);
        lua_rawset(L, -3);
      }
      kc->depth--;
      break;
    case TAPE_ARRAY:
      n = geoservices_tape_u32(p);
      if (++kc->depth > ROOMY_DEPTH) luaL_checkstack(L, 4, "record too deeply nested");
      lua_createtable(L, (int)n, 0);
      for (i = 1; i <= n; i++) {
        push_value(L, p, array_mt, kc);
        lua_rawseti(L, -2, (lua_Integer)i);
      }
      lua_pushvalue(L, array_mt);
      lua_setmetatable(L, -2);
      kc->depth--;
      break;
  }
}

void geoservices_records_push_tape_value(lua_State *L, const char **p, int array_mt) {
  key_cache kc;
  array_mt = lua_absindex(L, array_mt);
  luaL_checkstack(L, 4 * ROOMY_DEPTH + 2, "record too deeply nested");
  kc.c = geoservices_strcache_open(L);
  kc.table_idx = lua_gettop(L);
  kc.ids_idx = 0;
  kc.depth = 0;
  kc.window_n = 0;
  push_value(L, p, array_mt, &kc);
  lua_remove(L, kc.table_idx);
}

/* Pushes the name of a record kind (kept in the ids table: no lookup of its bytes). */
static void push_kind(lua_State *L, key_cache *kc, int kind) {
  if (push_slot(L, kc, KIND_SLOT(kind)) == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushstring(L, geoservices_record_kind_names[kind]);
    keep_slot(L, kc, KIND_SLOT(kind));
  }
}

/* Calls fn(kind, layer_id, value, key) for the record on the stack top area:
 * expects [kind, value, key] pushed by the caller at the top. */
static void deliver(lua_State *L, int fn_idx, const geoservices_replay_state *st, int has_layer) {
  /* stack: kind value key */
  lua_pushvalue(L, fn_idx);
  lua_pushvalue(L, -4);
  if (has_layer) lua_pushinteger(L, (lua_Integer)st->layer_id);
  else lua_pushnil(L);
  lua_pushvalue(L, -5);
  lua_pushvalue(L, -5);
  lua_call(L, 4, 0);
  lua_pop(L, 3);
}

/* Records of a layer entry whose id has not arrived yet wait in the pending
 * table (only when a server writes "id" after the records): {kind, value,
 * key} each, or without values (count_only) a run {kind, nil, key, count}
 * of records alike, so that counting an id-last layer holds no memory. */
static void flush_pending(lua_State *L, int fn_idx, int pending_idx, const geoservices_replay_state *st) {
  lua_Integer i, n = (lua_Integer)lua_rawlen(L, pending_idx);
  for (i = 1; i <= n; i++) {
    lua_Integer times = 1, t;
    lua_rawgeti(L, pending_idx, i);
    if (lua_rawgeti(L, -1, 4) == LUA_TNUMBER) times = lua_tointeger(L, -1);
    lua_pop(L, 1);
    for (t = 0; t < times; t++) {
      lua_rawgeti(L, -1, 1);
      lua_rawgeti(L, -2, 2);
      lua_rawgeti(L, -3, 3);
      deliver(L, fn_idx, st, 1);
    }
    lua_pop(L, 1);
  }
  for (i = n; i >= 1; i--) {
    lua_pushnil(L);
    lua_rawseti(L, pending_idx, i);
  }
}

lua_Integer geoservices_records_replay(lua_State *L, geoservices_records *r, geoservices_replay_state *st,
                                       int fn_idx, int pending_idx, int ids_idx) {
  size_t len;
  const char *tape = geoservices_records_tape(r, &len);
  const char *p = tape, *end = tape ? tape + len : tape; /* no tape yet: nothing */
  lua_Integer delivered = 0;
  int array_mt;
  key_cache kc;
  fn_idx = lua_absindex(L, fn_idx);
  pending_idx = lua_absindex(L, pending_idx);
  kc.ids_idx = lua_absindex(L, ids_idx);
  kc.depth = 0;
  if (!tape || len == 0) { /* nothing to replay: no window to build */
    geoservices_records_consume(r);
    return 0;
  }
  /* the window, fn, its 4 arguments, and ROOMY_DEPTH containers */
  kc.window_n = (int)lua_rawlen(L, kc.ids_idx);
  if (kc.window_n > WINDOW_MAX) kc.window_n = WINDOW_MAX;
  luaL_checkstack(L, kc.window_n + 4 * ROOMY_DEPTH + 8, "record too deeply nested");
  memset(kc.in_window, 0, sizeof kc.in_window);
  kc.window = lua_gettop(L) + 1;
  {
    int k;
    for (k = 1; k <= kc.window_n; k++)
      if (lua_rawgeti(L, kc.ids_idx, k) != LUA_TNIL) kc.in_window[(k - 1) / 64] |= (uint64_t)1 << ((k - 1) % 64);
  }
  kc.c = geoservices_strcache_open(L);
  kc.table_idx = lua_gettop(L);
  geoservices_push_json_array_mt(L);
  array_mt = lua_gettop(L);
  while (p < end) {
    int op = (unsigned char)*p++;
    if (op == TAPE_RECORD) {
      geoservices_tape_record h = geoservices_tape_record_header(&p);
      int now = h.entry < 0 || (st->has_id && st->id_entry == h.entry);
      delivered++;
      if (st->count_only && h.entry >= 0 && !now) { /* counted: the last run of its kind grows, or one starts */
        lua_Integer n = (lua_Integer)lua_rawlen(L, pending_idx);
        int grown = 0;
        p = geoservices_tape_skip(p);
        if (n > 0 && h.key_len == 0) {
          lua_rawgeti(L, pending_idx, n); /* the run, its kind, this kind, its key, its count */
          lua_rawgeti(L, -1, 1);
          push_kind(L, &kc, h.kind);
          lua_rawgeti(L, -3, 3);
          lua_rawgeti(L, -4, 4);
          if (lua_rawequal(L, -3, -4) && lua_isnil(L, -2) && lua_isinteger(L, -1)) {
            lua_pushinteger(L, lua_tointeger(L, -1) + 1);
            lua_rawseti(L, -6, 4);
            grown = 1;
          }
          lua_pop(L, 5);
        }
        if (!grown) {
          lua_createtable(L, 4, 0);
          push_kind(L, &kc, h.kind);
          lua_rawseti(L, -2, 1);
          if (h.key_len) {
            lua_pushlstring(L, h.key, h.key_len);
            lua_rawseti(L, -2, 3);
          }
          lua_pushinteger(L, 1);
          lua_rawseti(L, -2, 4);
          lua_rawseti(L, pending_idx, n + 1);
        }
      } else if (now) { /* straight into the call's arguments: fn(kind, layer_id, value, key) */
        lua_pushvalue(L, fn_idx);
        push_kind(L, &kc, h.kind);
        if (h.entry < 0) lua_pushnil(L);
        else lua_pushinteger(L, (lua_Integer)st->layer_id);
        if (st->count_only && h.entry >= 0) {
          p = geoservices_tape_skip(p);
          lua_pushnil(L);
        } else {
          push_value(L, &p, array_mt, &kc);
        }
        if (h.key_len) lua_pushlstring(L, h.key, h.key_len);
        else lua_pushnil(L);
        lua_call(L, 4, 0);
      } else {
        push_kind(L, &kc, h.kind);
        push_value(L, &p, array_mt, &kc);
        if (h.key_len) lua_pushlstring(L, h.key, h.key_len);
        else lua_pushnil(L);
        lua_createtable(L, 3, 0);
        lua_insert(L, -4);
        lua_rawseti(L, -4, 3);
        lua_rawseti(L, -3, 2);
        lua_rawseti(L, -2, 1);
        lua_rawseti(L, pending_idx, (lua_Integer)lua_rawlen(L, pending_idx) + 1);
      }
    } else if (op == TAPE_LAYER_ID) {
      st->id_entry = geoservices_tape_i64(&p);
      st->layer_id = geoservices_tape_i64(&p);
      st->has_id = 1;
      /* "layer" announces the entry (even one without records), then its records */
      lua_pushliteral(L, "layer");
      lua_pushnil(L);
      lua_pushnil(L);
      deliver(L, fn_idx, st, 1);
      flush_pending(L, fn_idx, pending_idx, st);
    } else if (op == TAPE_ENTRY_END) {
      int64_t entry = geoservices_tape_i64(&p);
      if (lua_rawlen(L, pending_idx) > 0 && !(st->has_id && st->id_entry == entry))
        luaL_error(L, "a layer entry of edits has records but no integer id");
    } else {
      luaL_error(L, "corrupt record tape (op %d)", op);
    }
  }
  lua_pop(L, 2 + kc.window_n); /* the array metatable, the cache's table, the window */
  geoservices_records_consume(r);
  return delivered;
}

/* ---- the Records class ---------------------------------------------------- */

typedef geoservices_records_ud records_ud;

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
  else u->fed += len;
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
      lua_rawseti(L, -2, KIND_SLOT(k));
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
  u->fed += (size_t)n;
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
  u->fed += geoservices_records_fed(u->records) - before;
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
}
