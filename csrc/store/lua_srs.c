/* core.srs_definition(wkid): the binding of store/srs.c.
 *
 * Returns wkt, name, organization ("EPSG" or "ESRI") when PROJ's database
 * defines the code, or nil, message, code where code is "unknown" (no such
 * code, or no WKT 1 form of it), "no_database" (proj.db cannot be opened)
 * or "nomem". A wkid that is not an integer raises. */
#include <lauxlib.h>
#include <lua.h>

#include "common.h"
#include "store/srs.h"

static int push_found(lua_State *L) {
  const geoservices_srs *srs = lua_touserdata(L, 1);
  lua_pushstring(L, srs->wkt);
  lua_pushstring(L, srs->name);
  lua_pushstring(L, srs->authority);
  return 3;
}

static int l_srs_definition(lua_State *L) {
  static const char *const codes[] = {"found", "unknown", "no_database", "nomem"};
  lua_Integer wkid = luaL_checkinteger(L, 1);
  geoservices_srs srs;
  char err[160];
  int rc = geoservices_srs_lookup((int64_t)wkid, &srs, err, sizeof err);
  if (rc != GEOSERVICES_SRS_FOUND) {
    lua_pushnil(L);
    lua_pushstring(L, err);
    lua_pushstring(L, codes[rc]);
    return 3;
  }
  /* pushing can raise (memory): push under lua_pcall, so the C strings
   * are freed either way before an error goes on */
  lua_pushcfunction(L, push_found);
  lua_pushlightuserdata(L, &srs);
  rc = lua_pcall(L, 1, 3, 0);
  geoservices_srs_free(&srs);
  if (rc != LUA_OK) return lua_error(L);
  return 3;
}

void geoservices_open_srs(lua_State *L) {
  lua_pushcfunction(L, l_srs_definition);
  lua_setfield(L, -2, "srs_definition");
}
