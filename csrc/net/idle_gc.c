/* The collector's work done while a request is in flight (geoservices_idle_gc_step):
 * while the caller would only wait for the network, rather than while the
 * next answer is turned into tables. Its own concern, apart from the
 * drivers that call it when they are about to wait (driver.c's wait,
 * drive.c's core.drive): memory, not transfers. */
#include "net/idle_gc.h"

#include <lauxlib.h>

/* The largest collector step taken while a request is in flight, in KiB
 * of allocation it stands for; and the least. A step leaves the collector
 * a credit of about its step size (8 KiB by default) before the next one:
 * allocations of less than half of it, added to the debt, would often not
 * make it due at the wait, only sooner during the next call. They add up
 * from wait to wait until they are enough. */
#define IDLE_GC_MAX_KB 32
#define IDLE_GC_MIN_KB 5

/* Stack slots made sure of at the idle step: about what decoding an answer
 * of a few KB takes (the decoder asks for 134 more per open container).
 * The collector shrinks a thread's stack to twice what it uses when it
 * finishes a cycle; grown back here, a decode after that does not pay for
 * the reallocation, which is also the first large allocation after the
 * collector freed the previous answer (glibc then sorts every chunk freed
 * since: about 75,000 instructions, once per cycle). */
#define IDLE_STACK_SLOTS 300

/* Its registry key (this variable's address): a size_t, the bytes the Lua
 * state held after its last idle step. Made when the core loads, so the
 * step itself allocates nothing. */
static const char idle_gc_key = 0;

/* Bytes the Lua state holds (collectgarbage("count") * 1024). */
static size_t lua_bytes(lua_State *L) {
  return (size_t)lua_gc(L, LUA_GCCOUNT, 0) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB, 0);
}

/* The collector's work for what Lua allocated since the last idle step
 * (mostly the previous answer's tables, now garbage), done while a request
 * is in flight and the caller would only wait, rather than when the next
 * allocations ask for it (while the answer is turned into tables).
 * LUA_GCSTEP with their size adds it to the collector's debt: a step is
 * taken only if the debt is then due, so the pause between cycles stays
 * (shortened by that much), and the credit the step leaves keeps the
 * allocations of the next answer from stepping again. A collector the user
 * stopped is left alone, and none is taken inside a finalizer. Then the
 * stack is made sure of (IDLE_STACK_SLOTS).
 * The step may run finalizers: Lua code, which may use any driver (this
 * one too), or close it. Callers call it outside libcurl's callbacks, and
 * look at their drivers and requests again afterwards. */
void geoservices_idle_gc_step(lua_State *L) {
  size_t *mark, now, kb;
  if (lua_gc(L, LUA_GCISRUNNING, 0) != 1) return; /* stopped, or -1: inside a finalizer */
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &idle_gc_key) != LUA_TUSERDATA) {
    lua_pop(L, 1);
    return;
  }
  mark = (size_t *)lua_touserdata(L, -1);
  lua_pop(L, 1); /* the registry anchors it */
  now = lua_bytes(L);
  kb = now > *mark ? (now - *mark + 1023) / 1024 : 0;
  if (now < *mark) { /* collected since (by allocations): counted from here */
    *mark = now;
  } else if (kb >= IDLE_GC_MIN_KB) { /* else too little yet: it adds up until the next wait */
    if (kb > IDLE_GC_MAX_KB) kb = IDLE_GC_MAX_KB;
    lua_gc(L, LUA_GCSTEP, (int)kb);
    *mark = lua_bytes(L);
  }
  lua_checkstack(L, IDLE_STACK_SLOTS); /* after the step (it may shrink the stack); a failure is the decode's */
}

void geoservices_open_idle_gc(lua_State *L) {
  *(size_t *)lua_newuserdatauv(L, sizeof(size_t), 0) = 0;
  lua_rawsetp(L, LUA_REGISTRYINDEX, &idle_gc_key);
}
