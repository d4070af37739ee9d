/* The class helper shared by the Lua-facing C files: geoservices.core's
 * bindings and geoservices.httpd. Lives apart from core.c, so no binding
 * depends on the file that opens the module. */
#ifndef GEOSERVICES_CLASS_H
#define GEOSERVICES_CLASS_H

#include <lua.h>
#include <lauxlib.h>

/* Sets a metatable from luaL_Reg lists, reusing it if luaopen ran before
 * (luaL_newmetatable returns 0 then and we just refresh the functions).
 * methods become __index; NULL for a class without methods. */
void geoservices_new_class(lua_State *L, const char *name, const luaL_Reg *methods,
                           const luaL_Reg *meta);

#endif
