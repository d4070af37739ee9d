/* geoservices_new_class: one metatable per class, safe to run again when
 * luaopen runs more than once in a state. */
#include "class.h"

void geoservices_new_class(lua_State *L, const char *name, const luaL_Reg *methods,
                           const luaL_Reg *meta) {
  luaL_newmetatable(L, name); /* an existing one is refreshed in place */
  luaL_setfuncs(L, meta, 0);
  if (methods) {
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
  }
  lua_pushstring(L, name);
  lua_setfield(L, -2, "__name");
  lua_pop(L, 1);
}
