/* Esri geometry tables read into a geoservices_geom (Store:put), and
 * core.gpkg_geometry / core.esri_geometry, the conversions on their own. */
#include "store/lua_store_internal.h"

#include <math.h>
#include <string.h>

#include "class.h"

/* ---- geometries from and to Lua --------------------------------------------- */

static int lua_number_at(lua_State *L, int t, lua_Integer i, double *d) {
  int ok;
  lua_rawgeti(L, t, i);
  ok = lua_type(L, -1) == LUA_TNUMBER;
  if (ok) *d = (double)lua_tonumber(L, -1);
  lua_pop(L, 1);
  return ok;
}

/* {x, y, ...} at the top into the geometry's current part; a third and
 * fourth number as they come (NaN for anything else: nil, the JSON null),
 * for geoservices_geom_ordinates_as to place. */
static void lua_coordinate(lua_State *L, geoservices_geom *g) {
  double x = 0, y = 0, third = NAN, fourth = NAN;
  int t = lua_gettop(L);
  if (lua_type(L, t) != LUA_TTABLE) luaL_error(L, "store: a coordinate must be an array {x, y}");
  if (!lua_number_at(L, t, 1, &x) || !lua_number_at(L, t, 2, &y))
    luaL_error(L, "store: a coordinate must be an array {x, y}");
  if (!lua_number_at(L, t, 3, &third)) third = NAN;
  if (!lua_number_at(L, t, 4, &fourth)) fourth = NAN;
  if (geoservices_geom_point_zm(g, x, y, third, fourth)) luaL_error(L, "store: not enough memory");
}

static void lua_parts(lua_State *L, geoservices_geom *g, int nested) {
  int t = lua_gettop(L);
  lua_Integer i, j, n, m;
  luaL_checktype(L, t, LUA_TTABLE);
  n = (lua_Integer)lua_rawlen(L, t);
  for (i = 1; i <= n; i++) {
    lua_rawgeti(L, t, i);
    if (!nested) {
      lua_coordinate(L, g);
    } else {
      luaL_checktype(L, -1, LUA_TTABLE);
      if (geoservices_geom_part(g)) luaL_error(L, "store: not enough memory");
      m = (lua_Integer)lua_rawlen(L, -1);
      for (j = 1; j <= m; j++) {
        lua_rawgeti(L, -1, j);
        lua_coordinate(L, g);
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
}

/* {x, y, ...} at idx into v (a third and fourth number as they come, NaN
 * otherwise); 1 when x and y are numbers. */
static int lua_xyzm(lua_State *L, int idx, double v[4]) {
  int ok;
  v[0] = v[1] = v[2] = v[3] = NAN;
  if (lua_type(L, idx) != LUA_TTABLE) return 0;
  ok = lua_number_at(L, idx, 1, &v[0]) && lua_number_at(L, idx, 2, &v[1]);
  if (!lua_number_at(L, idx, 3, &v[2])) v[2] = NAN;
  if (!lua_number_at(L, idx, 4, &v[3])) v[3] = NAN;
  return ok;
}

/* A curve object at the top ({c = {end, point}}, {a = {end, centre, minor,
 * clockwise, ...}}, {b = {end, c1, c2}}, or another kind) as a segment. */
static void lua_curve_object(lua_State *L, geoservices_geom *g) {
  static const char *const kinds[] = {"c", "a", "b"};
  geoservices_segment sg;
  int t = lua_gettop(L), k, list = 0;
  lua_Integer j;
  memset(&sg, 0, sizeof sg);
  for (k = 0; k < 3 && !list; k++) {
    if (lua_getfield(L, t, kinds[k]) == LUA_TTABLE) {
      sg.kind = kinds[k][0];
      list = lua_gettop(L);
    } else {
      lua_pop(L, 1);
    }
  }
  if (!list) { /* another kind: a straight line to its end, the JSON kept */
    lua_pushnil(L);
    while (lua_next(L, t)) {
      if (lua_type(L, -1) == LUA_TTABLE) {
        lua_remove(L, -2);
        list = lua_gettop(L);
        break;
      }
      lua_pop(L, 1);
    }
  }
  if (list) {
    double v[4];
    lua_rawgeti(L, list, 1);
    sg.has_end = lua_xyzm(L, -1, sg.end);
    lua_rawgeti(L, list, 2);
    sg.has_p1 = lua_xyzm(L, -1, v);
    sg.p1[0] = v[0], sg.p1[1] = v[1];
    lua_rawgeti(L, list, 3);
    if (lua_type(L, -1) == LUA_TTABLE) {
      sg.has_p2 = lua_xyzm(L, -1, v);
      sg.p2[0] = v[0], sg.p2[1] = v[1];
    }
    lua_pop(L, 3);
    for (j = 3; j <= 7; j++) { /* minor, clockwise, rotation, axis, ratio */
      double *slot[] = {&sg.minor, &sg.clockwise, &sg.rotation, &sg.axis, &sg.ratio};
      int type = lua_rawgeti(L, list, j);
      if (type == LUA_TNUMBER) *slot[j - 3] = (double)lua_tonumber(L, -1);
      else if (type == LUA_TBOOLEAN) *slot[j - 3] = lua_toboolean(L, -1);
      lua_pop(L, 1);
      if (type != LUA_TNUMBER && type != LUA_TBOOLEAN) break;
      sg.numbers++;
    }
  }
  lua_settop(L, t);
  if (geoservices_geom_segment(g, &sg)) luaL_error(L, "store: not enough memory");
}

/* curvePaths or curveRings at the top: parts of coordinates and curve objects. */
static void lua_curve_parts(lua_State *L, geoservices_geom *g) {
  int t = lua_gettop(L);
  lua_Integer i, j, n, m;
  luaL_checktype(L, t, LUA_TTABLE);
  n = (lua_Integer)lua_rawlen(L, t);
  for (i = 1; i <= n; i++) {
    lua_rawgeti(L, t, i);
    luaL_checktype(L, -1, LUA_TTABLE);
    if (geoservices_geom_part(g)) luaL_error(L, "store: not enough memory");
    m = (lua_Integer)lua_rawlen(L, -1);
    for (j = 1; j <= m; j++) {
      int curve = 0;
      lua_rawgeti(L, -1, j);
      if (lua_type(L, -1) == LUA_TTABLE) { /* not an array: a curve object */
        curve = lua_rawgeti(L, -1, 1) == LUA_TNIL;
        lua_pop(L, 1);
      }
      if (curve) lua_curve_object(L, g);
      else lua_coordinate(L, g);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
}

/* A boolean member of a geometry table: 1 or 0; -1 when absent or not a boolean. */
static int lua_flag(lua_State *L, int idx, const char *name) {
  int t = lua_getfield(L, idx, name), v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return t == LUA_TBOOLEAN ? v : -1;
}

/* A number member of a geometry table, NaN otherwise. */
static double lua_ordinate(lua_State *L, int idx, const char *name) {
  double v = lua_getfield(L, idx, name) == LUA_TNUMBER ? (double)lua_tonumber(L, -1) : NAN;
  lua_pop(L, 1);
  return v;
}

/* An Esri geometry table at idx into g (kind from its members), carrying Z
 * and M as has_z / has_m say (the layer's). The coordinates' third and fourth
 * numbers mean what the table's own hasZ / hasM say, else what the layer's do. */
void geoservices_store_lua_geometry(lua_State *L, int idx, geoservices_geom *g, int has_z, int has_m) {
  int had_z, had_m;
  idx = lua_absindex(L, idx);
  geoservices_geom_reset(g, GEOM_NONE);
  geoservices_geom_dims(g, has_z, has_m);
  had_z = lua_flag(L, idx, "hasZ");
  had_m = lua_flag(L, idx, "hasM");
  if (had_z < 0) had_z = has_z;
  if (had_m < 0) had_m = has_m;
  if (lua_getfield(L, idx, "curveRings") != LUA_TNIL) { /* true curves first: paths beside them are densified */
    geoservices_geom_reset(g, GEOM_POLYGON);
    lua_curve_parts(L, g);
  } else if (lua_getfield(L, idx, "curvePaths") != LUA_TNIL) {
    geoservices_geom_reset(g, GEOM_POLYLINE);
    lua_curve_parts(L, g);
  } else if (lua_getfield(L, idx, "rings") != LUA_TNIL) {
    geoservices_geom_reset(g, GEOM_POLYGON);
    lua_parts(L, g, 1);
  } else if (lua_getfield(L, idx, "paths") != LUA_TNIL) {
    geoservices_geom_reset(g, GEOM_POLYLINE);
    lua_parts(L, g, 1);
  } else if (lua_getfield(L, idx, "points") != LUA_TNIL) {
    geoservices_geom_reset(g, GEOM_MULTIPOINT);
    lua_parts(L, g, 0);
  } else {
    int tx = lua_getfield(L, idx, "x"), ty = lua_getfield(L, idx, "y");
    if (tx != LUA_TNIL || ty != LUA_TNIL) { /* a point's z and m are named: no flags needed */
      geoservices_geom_reset(g, GEOM_POINT);
      if (tx == LUA_TNUMBER && ty == LUA_TNUMBER &&
          geoservices_geom_point_zm(g, (double)lua_tonumber(L, -2), (double)lua_tonumber(L, -1),
                                    lua_ordinate(L, idx, "z"), lua_ordinate(L, idx, "m")))
        luaL_error(L, "store: not enough memory");
    }
    lua_pop(L, 2);
  }
  if (g->kind != GEOM_POINT) geoservices_geom_ordinates_as(g, had_z, had_m);
  lua_settop(L, idx);
}

static int l_scratch_gc(lua_State *L) {
  scratch *sc = (scratch *)luaL_checkudata(L, 1, SCRATCH_MT);
  geoservices_geom_free(&sc->g);
  geoservices_buf_free(&sc->out);
  return 0;
}

scratch *geoservices_store_new_scratch(lua_State *L) {
  scratch *sc = (scratch *)lua_newuserdatauv(L, sizeof *sc, 0);
  geoservices_geom_init(&sc->g);
  geoservices_buf_init(&sc->out, 0);
  luaL_setmetatable(L, SCRATCH_MT);
  return sc;
}

/* gpkg_geometry(esri_geometry, srs_id) -> GeoPackage blob, envelope {minx, maxx, miny, maxy} or nil.
 * Z and M as the geometry says: its hasZ / hasM, a point's z / m. */
static int l_gpkg_geometry(lua_State *L) {
  double env[4];
  lua_Integer srs = luaL_optinteger(L, 2, 0);
  scratch *sc;
  int i, has_z, has_m;
  luaL_checktype(L, 1, LUA_TTABLE);
  has_z = lua_flag(L, 1, "hasZ") == 1 || !isnan(lua_ordinate(L, 1, "z"));
  has_m = lua_flag(L, 1, "hasM") == 1 || !isnan(lua_ordinate(L, 1, "m"));
  sc = geoservices_store_new_scratch(L);
  geoservices_store_lua_geometry(L, 1, &sc->g, has_z, has_m);
  if (sc->g.kind == GEOM_NONE) return luaL_argerror(L, 1, "not an Esri geometry (x/y, points, paths or rings)");
  if (geoservices_geom_encode(&sc->g, (int32_t)srs, &sc->out, env)) return luaL_error(L, "store: not enough memory");
  lua_pushlstring(L, sc->out.data, sc->out.len);
  if (isnan(env[0])) {
    lua_pushnil(L);
  } else {
    lua_createtable(L, 4, 0);
    for (i = 0; i < 4; i++) {
      lua_pushnumber(L, env[i]);
      lua_rawseti(L, -2, i + 1);
    }
  }
  return 2;
}

/* esri_geometry(blob) -> Esri geometry table, srs_id; or nil, message */
static int l_esri_geometry(lua_State *L) {
  size_t len;
  const char *blob = luaL_checklstring(L, 1, &len);
  int32_t srs = 0;
  const char *error = NULL;
  scratch *sc = geoservices_store_new_scratch(L);
  if (geoservices_geom_decode(&sc->g, (const unsigned char *)blob, len, &srs, &error) != 0) {
    luaL_pushfail(L);
    lua_pushstring(L, error);
    return 2;
  }
  geoservices_store_push_geometry(L, &sc->g);
  lua_pushinteger(L, srs);
  return 2;
}

void geoservices_open_store_geometry(lua_State *L) {
  static const luaL_Reg scratch_meta[] = {
    {"__gc", l_scratch_gc},
    {NULL, NULL},
  };
  geoservices_new_class(L, SCRATCH_MT, NULL, scratch_meta);
  lua_pushcfunction(L, l_gpkg_geometry);
  lua_setfield(L, -2, "gpkg_geometry");
  lua_pushcfunction(L, l_esri_geometry);
  lua_setfield(L, -2, "esri_geometry");
}
