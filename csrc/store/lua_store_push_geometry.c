/* A geoservices_geom pushed as an Esri geometry table (Store:get,
 * core.esri_geometry), Z and M as the server writes them. */
#include "store/lua_store_internal.h"

#include <math.h>

#include "common.h"

static void push_array(lua_State *L, int n, int array_mt) {
  lua_createtable(L, n, 0);
  lua_pushvalue(L, array_mt);
  lua_setmetatable(L, -2);
}

/* Whether some point of g has a value of ordinate `which` (0 z, 1 m). */
static int has_values(const geoservices_geom *g, int which) {
  size_t k;
  if (!(which == 0 ? g->has_z : g->has_m)) return 0;
  for (k = 0; k < g->npoints; k++)
    if (!isnan(g->zm[2 * k + (size_t)which])) return 1;
  return 0;
}

/* An ordinate of an Esri coordinate array: the number, or the JSON null for
 * a point without one (NaN is no JSON). */
static void push_ordinate(lua_State *L, double v) {
  if (isnan(v)) lua_pushlightuserdata(L, NULL);
  else lua_pushnumber(L, v);
}

/* [x, y], [x, y, z], [x, y, m] or [x, y, z, m] of point k. */
static void push_coordinate(lua_State *L, const geoservices_geom *g, size_t k, int with_z, int with_m,
                            int array_mt) {
  lua_Integer n = 2;
  push_array(L, 2 + with_z + with_m, array_mt);
  lua_pushnumber(L, g->xy[2 * k]);
  lua_rawseti(L, -2, 1);
  lua_pushnumber(L, g->xy[2 * k + 1]);
  lua_rawseti(L, -2, 2);
  if (with_z) {
    push_ordinate(L, g->zm[2 * k]);
    lua_rawseti(L, -2, ++n);
  }
  if (with_m) {
    push_ordinate(L, g->zm[2 * k + 1]);
    lua_rawseti(L, -2, ++n);
  }
}

/* Pushes the Esri table of g: {x =, y =}, {points =}, {paths =} or {rings =}.
 * Z and M as the server writes them: a point's z and m members (absent when
 * it has none), the others' coordinate arrays with hasZ / hasM set (an
 * ordinate no point of the geometry has is left out: the geometry it came
 * from had none). */
void geoservices_store_push_geometry(lua_State *L, const geoservices_geom *g) {
  static const char *const member[] = {NULL, NULL, "points", "paths", "rings"};
  size_t i, k;
  int array_mt, with_z = has_values(g, 0), with_m = has_values(g, 1);
  luaL_checkstack(L, 6, "store: geometry");
  geoservices_push_json_array_mt(L);
  array_mt = lua_gettop(L);
  lua_createtable(L, 0, 4);
  if (g->kind == GEOM_POINT) {
    if (g->npoints) {
      lua_pushnumber(L, g->xy[0]);
      lua_setfield(L, -2, "x");
      lua_pushnumber(L, g->xy[1]);
      lua_setfield(L, -2, "y");
      if (with_z) {
        lua_pushnumber(L, g->zm[0]);
        lua_setfield(L, -2, "z");
      }
      if (with_m) {
        lua_pushnumber(L, g->zm[1]);
        lua_setfield(L, -2, "m");
      }
    } else {
      lua_pushlightuserdata(L, NULL); /* an empty point: {"x": null} */
      lua_setfield(L, -2, "x");
    }
  } else if (g->kind == GEOM_MULTIPOINT) {
    push_array(L, (int)g->npoints, array_mt);
    for (k = 0; k < g->npoints; k++) {
      push_coordinate(L, g, k, with_z, with_m, array_mt);
      lua_rawseti(L, -2, (lua_Integer)k + 1);
    }
    lua_setfield(L, -2, member[GEOM_MULTIPOINT]);
  } else if ((g->kind == GEOM_POLYLINE || g->kind == GEOM_POLYGON) && g->has_arcs) {
    /* curvePaths / curveRings: an arc as {"c": [its end, its middle]} */
    push_array(L, (int)g->nparts, array_mt);
    for (i = 0; i < g->nparts; i++) {
      size_t first = g->parts[i], end = geoservices_geom_part_end(g, i);
      lua_Integer n = 0;
      push_array(L, 0, array_mt);
      for (k = first; k < end; k++) {
        if (geoservices_geom_is_arc_middle(g, i, k)) {
          lua_createtable(L, 0, 1);
          push_array(L, 2, array_mt);
          push_coordinate(L, g, k + 1, with_z, with_m, array_mt);
          lua_rawseti(L, -2, 1);
          push_array(L, 2, array_mt);
          lua_pushnumber(L, g->xy[2 * k]);
          lua_rawseti(L, -2, 1);
          lua_pushnumber(L, g->xy[2 * k + 1]);
          lua_rawseti(L, -2, 2);
          lua_rawseti(L, -2, 2);
          lua_setfield(L, -2, "c");
          k++; /* its end is in the curve object */
        } else {
          push_coordinate(L, g, k, with_z, with_m, array_mt);
        }
        lua_rawseti(L, -2, ++n);
      }
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, g->kind == GEOM_POLYLINE ? "curvePaths" : "curveRings");
  } else if (g->kind == GEOM_POLYLINE || g->kind == GEOM_POLYGON) {
    push_array(L, (int)g->nparts, array_mt);
    for (i = 0; i < g->nparts; i++) {
      size_t first = g->parts[i], end = geoservices_geom_part_end(g, i);
      push_array(L, (int)(end - first), array_mt);
      for (k = first; k < end; k++) {
        push_coordinate(L, g, k, with_z, with_m, array_mt);
        lua_rawseti(L, -2, (lua_Integer)(k - first) + 1);
      }
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, member[g->kind]);
  }
  if (g->kind != GEOM_POINT && with_z) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "hasZ");
  }
  if (g->kind != GEOM_POINT && with_m) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "hasM");
  }
  lua_remove(L, array_mt);
}
