/* The idle collector step (idle_gc.c). */
#ifndef GEOSERVICES_NET_IDLE_GC_H
#define GEOSERVICES_NET_IDLE_GC_H

#include <lua.h>

/* Makes the registry mark the step counts from (when the core loads: the
 * step itself allocates nothing). */
void geoservices_open_idle_gc(lua_State *L);
/* The collector's work for what Lua allocated since the last step, done
 * before a wait; may run finalizers (Lua code that may use or close any
 * driver): callers look at their drivers and requests again afterwards. */
void geoservices_idle_gc_step(lua_State *L);

#endif
