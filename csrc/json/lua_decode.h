/* Decoding JSON into Lua values from C (json/lua_decode.c): for a caller
 * whose bytes are in a C buffer already (a response body, net/request.c),
 * so that they need not become a Lua string first. */
#ifndef GEOSERVICES_LUA_DECODE_H
#define GEOSERVICES_LUA_DECODE_H

#include "buf.h"
#include "common.h"

/* Decodes the whole of b as one JSON document, exactly as core.json_decode
 * does (the same parser: UTF-8, numbers, depth and size limits), and pushes
 * the value, or nil, "invalid JSON at byte N: why", N; returns the number of
 * values pushed (1 or 3). max_depth 0: the default depth. The bytes are
 * taken from b for the time of the decode and given back to b before it
 * returns; if a Lua error is raised (out of memory) they are freed and b
 * stays empty. Raises only for memory. */
int geoservices_json_decode_buf(lua_State *L, geoservices_buf *b, size_t max_depth);

#endif
