/* Shared by lua_records.c (the Records class) and request.c: a Records userdata,
 * and replaying its tape into Lua (json/lua_replay.h). */
#ifndef GEOSERVICES_LUA_RECORDS_H
#define GEOSERVICES_LUA_RECORDS_H

#include <stdint.h>

#include "common.h"
#include "json/lua_replay.h"
#include "json/records.h"

#define GEOSERVICES_RECORDS_MT "geoservices.Records"

/* The Records userdata. Requests in records mode feed one (it may outlive
 * them: a download resumed with a Range request continues the same parse). */
typedef struct geoservices_records_ud {
  geoservices_records *records; /* NULL once closed */
  geoservices_replay_state replay;
  size_t fed;                   /* bytes fed so far: where a resumed download starts */
  int failed;                   /* feed or finish reported an error */
  int busy;                     /* inside read_all: fn may not use it */
} geoservices_records_ud;

/* The Records userdata at idx (raises if it is not one; may be closed). */
geoservices_records_ud *geoservices_check_records(lua_State *L, int idx);
/* Feeds bytes, counting them and remembering a failure; 0 or an error code. */
int geoservices_records_ud_feed(geoservices_records_ud *u, const char *s, size_t len);
/* Replays the tape of the Records userdata at ud_idx to the function at fn_idx. */
lua_Integer geoservices_records_drain(lua_State *L, int ud_idx, int fn_idx);

/* Pushes nil, "invalid JSON at byte N: ...", N for the extractor's error. */
int geoservices_push_records_error(lua_State *L, geoservices_records *r);
/* Reads {max_depth=, max_value_bytes=} at idx (nil allowed). */
void geoservices_read_json_limits(lua_State *L, int idx, geoservices_json_limits *lim);

#endif
