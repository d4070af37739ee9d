/* Shared by lua_records.c and request.c: replaying a record tape into Lua. */
#ifndef GEOSERVICES_LUA_RECORDS_H
#define GEOSERVICES_LUA_RECORDS_H

#include <stdint.h>

#include "common.h"
#include "json/records.h"

#define GEOSERVICES_RECORDS_MT "geoservices.Records"

/* Which layer id the records of the current layer entry belong to. (Keys
 * and short values come from the state's string cache, json/strcache.h.) */
typedef struct geoservices_replay_state {
  int has_id;
  int64_t id_entry;
  int64_t layer_id;
  int count_only; /* records{values = false}: an entry's records come without their value (nil) */
} geoservices_replay_state;

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

/* Calls the function at fn_idx as fn(kind, layer_id, value, key) for every
 * complete record of the tape, then drops them. pending_idx: a table where
 * records wait for their layer id; ids_idx: a table of the Lua strings of
 * the extractor's key ids (TAPE_KEY_ID), kept for its whole life. Returns
 * the number of records. */
lua_Integer geoservices_records_replay(lua_State *L, geoservices_records *r, geoservices_replay_state *st,
                                       int fn_idx, int pending_idx, int ids_idx);
/* Pushes the tape value at *p as Lua, as the replay does (tables at their
 * final size, arrays with the array metatable at array_mt, short strings
 * from the state's cache) and moves *p past it. */
void geoservices_records_push_tape_value(lua_State *L, const char **p, int array_mt);
/* Pushes nil, "invalid JSON at byte N: ...", N for the extractor's error. */
int geoservices_push_records_error(lua_State *L, geoservices_records *r);
/* Reads {max_depth=, max_value_bytes=} at idx (nil allowed). */
void geoservices_read_json_limits(lua_State *L, int idx, geoservices_json_limits *lim);

#endif
