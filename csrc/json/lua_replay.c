/* Replaying a record tape into Lua (lua_replay.h): one table per record,
 * at its final size, keys and short values from the state's string cache,
 * and records that wait for their layer's id. For the Records class
 * (lua_records.c) and requests in records mode (request.c). */
#include <string.h>

#include "common.h"
#include "json/lua_replay.h"
#include "json/strcache.h"

/* The state's string cache (json/strcache.h) during a replay: keys, and
 * short values (names, codes, flags repeat; a longer value is mostly an id
 * seen once, which would only evict the keys). */
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
    if (push_slot(L, kc, GEOSERVICES_RECORDS_ID_SLOT(id)) != LUA_TNIL) return;
    lua_pop(L, 1); /* the id's first use */
  }
  geoservices_strcache_push(L, kc->c, kc->table_idx, s, len, max_len);
  if (id >= 0 && kc->ids_idx) keep_slot(L, kc, GEOSERVICES_RECORDS_ID_SLOT(id));
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
  if (push_slot(L, kc, GEOSERVICES_RECORDS_KIND_SLOT(kind)) == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushstring(L, geoservices_record_kind_names[kind]);
    keep_slot(L, kc, GEOSERVICES_RECORDS_KIND_SLOT(kind));
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
