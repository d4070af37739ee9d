/* Store:apply: the records of a core.records() extractor drained into the
 * store (store/apply.h), the others delivered to a Lua function; and the
 * counts, applied and waiting. */
#include "store/lua_store_internal.h"

#include "common.h"
#include "json/lua_records.h"

/* ---- the fast path ------------------------------------------------------------ */

typedef struct apply_ctx {
  lua_State *L;
  int fn;        /* stack index of the receiver, 0 for none */
  int array_mt;
  lua_Integer delivered;
} apply_ctx;

/* The records the store does not apply go to fn(kind, layer_id, value, key),
 * as Records:drain would deliver them. A Lua error is caught here and stays
 * on the stack top; apply() raises it again once the tape is consumed. */
static int deliver_other(void *ctxp, int kind, int has_layer, int64_t layer, const char *value, const char *key,
                         size_t key_len) {
  apply_ctx *ctx = (apply_ctx *)ctxp;
  lua_State *L = ctx->L;
  if (!ctx->fn) return 0;
  lua_pushvalue(L, ctx->fn);
  lua_pushstring(L, kind == GEOSERVICES_STORE_LAYER ? "layer" : geoservices_record_kind_names[kind]);
  if (has_layer) lua_pushinteger(L, (lua_Integer)layer);
  else lua_pushnil(L);
  if (value) geoservices_records_push_tape_value(L, &value, ctx->array_mt);
  else lua_pushnil(L);
  if (key_len) lua_pushlstring(L, key, key_len);
  else lua_pushnil(L);
  if (kind != GEOSERVICES_STORE_LAYER) ctx->delivered++;
  return lua_pcall(L, 4, 0, 0) == LUA_OK ? 0 : 2;
}

/* apply(records[, fn]) -> applied, delivered: drains the complete records of
 * a core.records() extractor: features and attachments into the store (inside
 * the caller's transaction), the others to fn(kind, layer_id, value, key).
 * A failure still drains the tape and returns nil, message, code (roll back). */
static int l_store_apply(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  geoservices_records_ud *r = geoservices_check_records(L, 2);
  geoservices_store_cursor cursor;
  apply_ctx ctx;
  uint64_t before = 0, after = 0;
  size_t len, k;
  const char *tape;
  int rc;
  if (!r->records) return luaL_error(L, "store:apply: the Records is closed");
  if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TFUNCTION);
  if (sqlite3_get_autocommit(u->db)) return luaL_error(L, "store:apply needs a transaction (store:begin())");
  if (u->applying) return luaL_error(L, "store:apply is not re-entrant");
  lua_settop(L, 3);
  ctx.L = L;
  ctx.fn = lua_isnil(L, 3) ? 0 : 3;
  ctx.delivered = 0;
  geoservices_push_json_array_mt(L);
  ctx.array_mt = lua_gettop(L);
  cursor.has_id = r->replay.has_id;
  cursor.id_entry = r->replay.id_entry;
  cursor.layer_id = r->replay.layer_id;
  for (k = 0; k < RECORD_KIND_COUNT; k++) before += u->store->applied[k];
  tape = geoservices_records_tape(r->records, &len);
  u->applying = 1;
  rc = geoservices_store_apply(u->store, &cursor, tape, len, deliver_other, &ctx);
  u->applying = 0;
  r->replay.has_id = cursor.has_id;
  r->replay.id_entry = cursor.id_entry;
  r->replay.layer_id = cursor.layer_id;
  geoservices_records_consume(r->records);
  if (rc == 2) return lua_error(L); /* the receiver's error, on the top */
  if (rc != 0) return geoservices_store_push_store_fail(L, u);
  for (k = 0; k < RECORD_KIND_COUNT; k++) after += u->store->applied[k];
  lua_pushinteger(L, (lua_Integer)(after - before));
  lua_pushinteger(L, ctx.delivered);
  return 2;
}

/* applied() -> {add = n, update = n, delete = n, add_attachment = n, ...}
 * records applied since the Store was opened */
static int l_store_applied(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  int k;
  lua_newtable(L);
  for (k = 0; k < RECORD_KIND_COUNT; k++) {
    if (!u->store->applied[k]) continue;
    lua_pushinteger(L, (lua_Integer)u->store->applied[k]);
    lua_setfield(L, -2, geoservices_record_kind_names[k]);
  }
  return 1;
}

/* applied_layers() -> {[layer_id] = {add = n, add_attachment = n, unknown = {name, ...}}, ...}:
 * the features and attachments added to each layer since the Store was
 * opened, and the attribute names its records carried that its table has
 * no column for (apply.h: unknown) */
static int l_store_applied_layers(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  size_t i;
  lua_newtable(L);
  for (i = 0; i < u->store->nlayers; i++) {
    const geoservices_store_layer *l = u->store->layers[i];
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, (lua_Integer)l->adds);
    lua_setfield(L, -2, "add");
    lua_pushinteger(L, (lua_Integer)l->attachment_adds);
    lua_setfield(L, -2, "add_attachment");
    {
      const char *at = l->unknown, *end = l->unknown + l->unknown_len;
      lua_Integer k = 0;
      lua_newtable(L);
      while (at < end) {
        const char *nl = memchr(at, '\n', (size_t)(end - at));
        size_t n = nl ? (size_t)(nl - at) : (size_t)(end - at);
        lua_pushlstring(L, at, n);
        lua_rawseti(L, -2, ++k);
        at += n + 1;
      }
      lua_setfield(L, -2, "unknown");
    }
    lua_rawseti(L, -2, (lua_Integer)l->id);
  }
  return 1;
}

/* db:waiting() -> the records read that wait for their layer entry's id
 * (spooled: store/spool.h); a fill's progress counts them as read. */
static int l_store_waiting(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  lua_pushinteger(L, (lua_Integer)u->store->waiting.count);
  return 1;
}

/* db:filling() -> true: until this transaction ends, applied records are
 * plain INSERTs, no GlobalID looked up (store.create_from fills empty tables,
 * builds their GlobalID index after, and settles a repeated GlobalID itself). */
static int l_store_filling(lua_State *L) {
  store_ud *u = geoservices_check_store(L, 1);
  if (sqlite3_get_autocommit(u->store->db)) return luaL_error(L, "store:filling needs a transaction");
  geoservices_store_set_filling(u->store, 1);
  lua_pushboolean(L, 1);
  return 1;
}

const luaL_Reg geoservices_store_apply_methods[] = {
  {"apply", l_store_apply},
  {"filling", l_store_filling},
  {"applied", l_store_applied},
  {"applied_layers", l_store_applied_layers},
  {"waiting", l_store_waiting},
  {NULL, NULL},
};
