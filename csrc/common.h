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

#define GEOSERVICES_JSON_ARRAY_MT "geoservices.json.array" /* __name of the array mark */

/* Each file registers its functions/metatables into the module table at -1;
 * only core.c's luaopen calls these. */
void geoservices_open_request(lua_State *L);     /* net/request.c */
void geoservices_open_driver(lua_State *L);      /* net/driver.c */
void geoservices_open_drive(lua_State *L);       /* net/drive.c */
void geoservices_open_form(lua_State *L);        /* net/form.c */
void geoservices_open_json_decode(lua_State *L); /* json/lua_decode.c */
void geoservices_open_json_encode(lua_State *L); /* json/lua_encode.c */
void geoservices_open_sys(lua_State *L);         /* sys.c */
void geoservices_open_records(lua_State *L);     /* json/lua_records.c */
void geoservices_open_store(lua_State *L);       /* store/lua_store.c */

/* Appends the JSON text of the value at idx to b (exact integers, 17-digit
 * doubles, arrays marked by the JSON array metatable); raises on values JSON
 * cannot hold. The caller owns b and frees it if this raises.
 * (json/lua_encode.c) */
struct geoservices_buf;
void geoservices_json_encode_into(lua_State *L, int idx, struct geoservices_buf *b);

/* Pushes the JSON array metatable ({__jsontype = "array"}, exported as
 * core.json_array_mt): decoded arrays carry it and the encoder writes a table
 * that has it as an array, even an empty one. One per state, kept in the
 * registry under a lua_rawsetp key and created on first use (luaopen).
 * (json/lua_encode.c) */
void geoservices_push_json_array_mt(lua_State *L);

#endif
