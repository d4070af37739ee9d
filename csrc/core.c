/* luaopen_geoservices_core: the module table, constants and the once-only
 * curl_global_init. Safe to run more than once per state (package.loaded
 * resets, busted insulation): metatables are reused, not recreated. Each
 * part registers itself through its geoservices_open_* (common.h): net/ for
 * requests, the driver and forms, json/ for the parser, encoder and records,
 * sys.c for files and random bytes. Nothing calls back into this file. */
#include <curl/curl.h>
#include <time.h>

#include "common.h"

static int curl_ready = 0;

static int l_curl_version(lua_State *L) {
  const curl_version_info_data *info = curl_version_info(CURLVERSION_NOW);
  lua_createtable(L, 0, 4);
  lua_pushstring(L, info->version);
  lua_setfield(L, -2, "version");
  lua_pushstring(L, info->ssl_version ? info->ssl_version : "");
  lua_setfield(L, -2, "ssl");
  lua_pushboolean(L, (info->features & CURL_VERSION_LIBZ) != 0);
  lua_setfield(L, -2, "gzip");
  lua_pushboolean(L, (info->features & CURL_VERSION_SSL) != 0);
  lua_setfield(L, -2, "tls");
  return 1;
}

/* monotonic() -> seconds since an arbitrary point, never going backwards:
 * deadlines must not move when the wall clock is adjusted. */
static int l_monotonic(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec / 1e9);
  return 1;
}

GEOSERVICES_API int luaopen_geoservices_core(lua_State *L);
GEOSERVICES_API int luaopen_geoservices_core(lua_State *L) {
  if (!curl_ready) {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
      return luaL_error(L, "geoservices.core: curl_global_init failed");
    curl_ready = 1; /* never cleaned up: other states in the process may use it */
  }
  lua_newtable(L);
  lua_pushliteral(L, GEOSERVICES_VERSION);
  lua_setfield(L, -2, "VERSION");
  lua_pushcfunction(L, l_curl_version);
  lua_setfield(L, -2, "curl_version");
  lua_pushcfunction(L, l_monotonic);
  lua_setfield(L, -2, "monotonic");
  geoservices_open_request(L);
  geoservices_open_driver(L);
  geoservices_open_drive(L);
  geoservices_open_form(L);
  geoservices_open_json_decode(L);
  geoservices_open_json_encode(L);
  geoservices_open_sys(L);
  geoservices_open_records(L);
  geoservices_open_store(L);
  return 1;
}
