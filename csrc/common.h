/* Shared by the Lua-facing C files of geoservices.core. */
#ifndef GEOSERVICES_COMMON_H
#define GEOSERVICES_COMMON_H

#include <lua.h>
#include <lauxlib.h>

#define GEOSERVICES_API __attribute__((visibility("default")))
#define GEOSERVICES_VERSION "0.1.0"

#define GEOSERVICES_DRIVER_MT "geoservices.Driver"
#define GEOSERVICES_REQUEST_MT "geoservices.Request"
#define GEOSERVICES_JSONSTREAM_MT "geoservices.JsonStream"

/* Each file registers its functions/metatables into the module table at -1. */
void geoservices_open_request(lua_State *L);
void geoservices_open_driver(lua_State *L);
void geoservices_open_form(lua_State *L);
void geoservices_open_jsonstream(lua_State *L);
void geoservices_open_fileio(lua_State *L);
void geoservices_open_records(lua_State *L);

/* Appends the JSON text of the value at idx to b (exact integers, 17-digit
 * doubles, arrays marked by the registered metatable); raises on values JSON
 * cannot hold. The caller owns b and frees it if this raises. */
struct geoservices_buf;
void geoservices_json_encode_into(lua_State *L, int idx, struct geoservices_buf *b);

/* Sets a metatable from a luaL_Reg list, reusing it if luaopen ran before
 * (luaL_newmetatable returns 0 then and we just refresh the functions). */
void geoservices_new_class(lua_State *L, const char *name, const luaL_Reg *methods,
                           const luaL_Reg *meta);

#endif
