/* Replaying a record tape into Lua (lua_replay.c), for the Records class
 * (lua_records.h) and requests in records mode (request.c). */
#ifndef GEOSERVICES_LUA_REPLAY_H
#define GEOSERVICES_LUA_REPLAY_H

#include <stdint.h>

#include "common.h"
#include "json/records.h"

/* Where the strings of the ids table sit: the record kinds first (the
 * Records class fills them when it is made), then the extractor's string
 * ids (TAPE_KEY_ID, TAPE_STRING_ID); its replay reads them. */
#define GEOSERVICES_RECORDS_KIND_SLOT(kind) ((lua_Integer)(kind) + 1)
#define GEOSERVICES_RECORDS_ID_SLOT(id) ((lua_Integer)(id) + 1 + RECORD_KIND_COUNT)

/* Which layer id the records of the current layer entry belong to. (Keys
 * and short values come from the state's string cache, json/strcache.h.) */
typedef struct geoservices_replay_state {
  int has_id;
  int64_t id_entry;
  int64_t layer_id;
  int count_only; /* records{values = false}: an entry's records come without their value (nil) */
} geoservices_replay_state;

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

#endif
