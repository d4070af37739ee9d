/* The per-state short-string cache (strcache.h) of the JSON bindings. */
#include "json/strcache.h"

static const char cache_key = 0; /* its registry key is this variable's address */

geoservices_strcache *geoservices_strcache_open(lua_State *L) {
  geoservices_strcache *c;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &cache_key) == LUA_TUSERDATA) {
    c = (geoservices_strcache *)lua_touserdata(L, -1);
  } else {
    lua_pop(L, 1);
    c = (geoservices_strcache *)lua_newuserdatauv(L, sizeof *c, 1);
    memset(c, 0, sizeof *c);
    c->sets = (geoservices_strcache_set *)(void *)(c->room + (64 - (uintptr_t)c->room % 64) % 64);
    lua_createtable(L, GEOSERVICES_STRCACHE_SETS * GEOSERVICES_STRCACHE_WAYS, 0);
    lua_setiuservalue(L, -2, 1);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &cache_key);
  }
  lua_getiuservalue(L, -1, 1);
  lua_replace(L, -2); /* the userdata stays anchored by the registry */
  return c;
}

void geoservices_strcache_push(lua_State *L, geoservices_strcache *c, int table_idx, const char *s, size_t n,
                               size_t max_len) {
  geoservices_strcache_set *set;
  uint64_t head, tail;
  unsigned index, way;
  if (n == 0 || n > max_len) {
    lua_pushlstring(L, s, n);
    return;
  }
  geoservices_strcache_probe(s, (uint32_t)n, &head, &tail);
  index = geoservices_strcache_hash(s, (uint32_t)n) % GEOSERVICES_STRCACHE_SETS;
  set = &c->sets[index];
  for (way = 0; way < GEOSERVICES_STRCACHE_WAYS; way++) {
    if (set->len[way] == n && set->head[way] == head && set->tail[way] == tail &&
        (n <= 16 || geoservices_same_bytes(set->text[way] + 8, s + 8, (uint32_t)n - 16))) {
      set->victim = (unsigned char)(way ^ 1);
      lua_rawgeti(L, table_idx, (lua_Integer)(index * GEOSERVICES_STRCACHE_WAYS + way) + 1);
      return;
    }
  }
  way = set->victim;
  set->victim = (unsigned char)(way ^ 1);
  set->text[way] = lua_pushlstring(L, s, n);
  set->len[way] = (uint32_t)n;
  set->head[way] = head;
  set->tail[way] = tail;
  lua_pushvalue(L, -1);
  lua_rawseti(L, table_idx, (lua_Integer)(index * GEOSERVICES_STRCACHE_WAYS + way) + 1); /* keeps text alive */
}
