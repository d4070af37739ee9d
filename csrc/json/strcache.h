/* Short-string helpers shared by the Lua bindings that turn parsed JSON
 * into Lua values (lua_decode.c, lua_replay.c). Keys (and short values)
 * repeat: a small direct-mapped cache of Lua strings, probed by length and a
 * few bytes and compared with word loads, hands back the interned string
 * without Lua hashing the bytes again. Only the push of an already parsed
 * and validated string is replaced: nothing here looks at JSON. */
#ifndef GEOSERVICES_STRCACHE_H
#define GEOSERVICES_STRCACHE_H

#include <stdint.h>
#include <string.h>

#include "common.h"

/* Lua interns strings up to this length (LUAI_MAXSHORTLEN); longer ones are
 * copied without hashing, so caching them would gain nothing. */
#define GEOSERVICES_STRCACHE_MAXLEN 40

/* memcmp of a short string without a library call or a loop over its tail:
 * overlapping 8- or 4-byte loads cover any length with few branches. */
static inline int geoservices_same_bytes(const char *a, const char *b, uint32_t len) {
  uint64_t x, y;
  uint32_t u, v, i;
  if (len >= 8) {
    for (i = 0; i + 8 < len; i += 8) {
      memcpy(&x, a + i, 8);
      memcpy(&y, b + i, 8);
      if (x != y) return 0;
    }
    memcpy(&x, a + len - 8, 8);
    memcpy(&y, b + len - 8, 8);
    return x == y;
  }
  if (len >= 4) {
    memcpy(&u, a, 4);
    memcpy(&v, b, 4);
    if (u != v) return 0;
    memcpy(&u, a + len - 4, 4);
    memcpy(&v, b + len - 4, 4);
    return u == v;
  }
  return len == 0 || (a[0] == b[0] && a[len / 2] == b[len / 2] && a[len - 1] == b[len - 1]);
}

/* The probe of a string of 1..MAXLEN bytes: its length and three of its bytes. */
static inline unsigned geoservices_strcache_hash(const char *s, uint32_t len) {
  const unsigned char *u = (const unsigned char *)s;
  return len * 31u + u[0] * 7u + u[len - 1] * 3u + u[len / 2];
}

/* The probe of a string of 1..MAXLEN bytes as two words: its first and last
 * 8 bytes (overlapping loads; for a shorter string its bytes, packed), so
 * that with the length they tell apart any two strings of up to 16 bytes. */
static inline void geoservices_strcache_probe(const char *s, uint32_t len, uint64_t *head, uint64_t *tail) {
  const unsigned char *u = (const unsigned char *)s;
  if (len >= 8) {
    memcpy(head, s, 8);
    memcpy(tail, s + len - 8, 8);
  } else if (len >= 4) {
    uint32_t a, b;
    memcpy(&a, s, 4);
    memcpy(&b, s + len - 4, 4);
    *head = (uint64_t)a | (uint64_t)b << 32;
    *tail = 0;
  } else {
    *head = (uint64_t)u[0] | (uint64_t)u[len / 2] << 8 | (uint64_t)u[len - 1] << 16;
    *tail = 0;
  }
}

/* The cache of a Lua state (strcache.c): one per state, shared by every
 * decode and every Records replay, kept in the registry with its strings in
 * a table beside it. Two ways per set, so two strings of the same probe
 * (the keys of one object often share length and ends) do not evict each
 * other; a set is one 64-byte line holding both ways' lengths and probes, so
 * a string of up to 16 bytes is told without touching its bytes. */
#define GEOSERVICES_STRCACHE_SETS 256
#define GEOSERVICES_STRCACHE_WAYS 2

typedef struct geoservices_strcache_set {
  uint64_t head[GEOSERVICES_STRCACHE_WAYS], tail[GEOSERVICES_STRCACHE_WAYS];
  const char *text[GEOSERVICES_STRCACHE_WAYS]; /* bytes of the Lua string in the table */
  uint32_t len[GEOSERVICES_STRCACHE_WAYS];     /* 0: empty */
  unsigned char victim; /* the way a miss replaces: not the one used last */
} geoservices_strcache_set;

typedef struct geoservices_strcache {
  geoservices_strcache_set *sets; /* GEOSERVICES_STRCACHE_SETS, 64-byte aligned inside room */
  char room[GEOSERVICES_STRCACHE_SETS * 64 + 63];
} geoservices_strcache;

/* Pushes the state's cache table (creating the cache on first use) and
 * returns the cache. The caller keeps the table's stack index for the
 * pushes (not the cache: a finalizer may decode inside a decode). */
geoservices_strcache *geoservices_strcache_open(lua_State *L);

/* Pushes the string s[0, n): the cached Lua string when it is one, else a
 * new one (kept in the cache when n <= max_len, which must not exceed
 * GEOSERVICES_STRCACHE_MAXLEN). table_idx: where open() pushed the table. */
void geoservices_strcache_push(lua_State *L, geoservices_strcache *c, int table_idx, const char *s, size_t n,
                               size_t max_len);

#endif
