/* Shared by the record extractor's files: records.c (its life, feeding,
 * the worker thread) and records_parse.c (the parser's callbacks writing the
 * tape). Pure C, as records.h. */
#ifndef GEOSERVICES_RECORDS_INTERNAL_H
#define GEOSERVICES_RECORDS_INTERNAL_H

#include "json/records.h"

/* Where the structural walk is; records are captured below LIST and beside. */
typedef enum {
  AT_START, AT_ROOT, AT_EDITS, AT_ENTRY, AT_PART, AT_LIST, AT_DONE
} position;

typedef enum { MODE_STRUCT, MODE_CAPTURE, MODE_SKIP } mode;

#define KEY_MAX 64 /* structural keys we look at are short; longer ones are kept truncated */

struct geoservices_records {
  geoservices_jsonstream *parser;
  geoservices_buf tape;
  size_t complete;        /* tape bytes that form complete records */
  position at;
  mode mode;
  size_t sub_depth;       /* open containers inside the captured/skipped value */
  size_t *count_at;       /* tape offsets of the counts of open captured containers */
  uint32_t *counts;
  unsigned char *is_array; /* per open captured container: arrays count values, objects keys */
  size_t depth_cap;       /* entries of the three arrays above, grown as nesting needs */
  size_t max_depth;
  int64_t entry;          /* index of the current layer entry */
  int part_is_attachments;
  int in_layers;          /* the entries are a createReplica result's "layers", not "edits" */
  int list_in_entry;      /* the open list is a layer entry's own features/attachments array */
  geoservices_record_kind list_kind;
  char key[KEY_MAX + 1];
  size_t key_len;
  size_t full_key_len;
  const char *error;      /* structural error message (parser errors come from jsonstream) */
  /* Parsing on a worker thread (parse_worker.h), once more than
   * worker_after bytes were fed: the worker owns the parser and the tape
   * above and moves each span's complete records to `ready` (under its
   * lock); the caller replays `out`, swapped with `ready` when empty. */
  geoservices_parse_worker *worker;
  size_t worker_after;    /* 0: never */
  size_t fed;
  int threaded;           /* a worker ran: the caller reads `out`, not the tape */
  geoservices_buf ready, out;
  geoservices_buf scratch; /* fill() before the worker starts */
  size_t source_fed;      /* fed when the worker began reading a source */
  size_t published_partial; /* tape bytes of the record still open, as of the last publish */
  int publish_failed;     /* `ready` could not grow: parsing stops with ENOMEM */
  /* String ids (TAPE_KEY_ID, TAPE_STRING_ID), on the parsing thread: an
   * open-addressing index of slot + 1 (0: empty) into the strings numbered so far. */
  uint16_t id_index[2 * GEOSERVICES_TAPE_STRING_IDS];
  uint8_t id_len[GEOSERVICES_TAPE_STRING_IDS];
  char id_text[GEOSERVICES_TAPE_STRING_IDS][GEOSERVICES_TAPE_KEY_ID_MAXLEN];
  unsigned id_count;
};

/* records_parse.c: the callbacks geoservices_records_new gives its parser. */
extern const geoservices_json_handlers geoservices_records_handlers;

#endif
