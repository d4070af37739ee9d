/* Record extraction from a synchronization result (2.3, 2.1) as it streams
 * in, or from a createReplica result (its top-level "layers", whose entries
 * hold their features and attachments in arrays: records "add" and
 * "add_attachment"). Fed any split of the document, it writes each record
 * (a feature, an attachment, a deleted GlobalID, an edit result, or a small
 * top-level field)
 * as a compact "tape" of events into a buffer, so the Lua binding can build
 * one table per record later, outside libcurl's callbacks. Containers on the
 * tape carry their element count, so tables can be created at their final
 * size. Pure C: no lua.h, unit-tested and fuzzed alone. */
#ifndef GEOSERVICES_RECORDS_H
#define GEOSERVICES_RECORDS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "json/jsonstream.h"
#include "json/parse_worker.h"

/* Kinds of records, in the order of geoservices_record_kind_names. */
typedef enum {
  RECORD_FIELD = 0,         /* a top-level member other than edits (key given) */
  RECORD_LAYER_FIELD,       /* a member of a layer entry other than id/features/attachments */
  RECORD_ADD, RECORD_UPDATE, RECORD_DELETE,
  RECORD_ADD_RESULT, RECORD_UPDATE_RESULT, RECORD_DELETE_RESULT,
  RECORD_ADD_ATTACHMENT, RECORD_UPDATE_ATTACHMENT, RECORD_DELETE_ATTACHMENT,
  RECORD_ADD_ATTACHMENT_RESULT, RECORD_UPDATE_ATTACHMENT_RESULT, RECORD_DELETE_ATTACHMENT_RESULT,
  RECORD_KIND_COUNT
} geoservices_record_kind;

extern const char *const geoservices_record_kind_names[RECORD_KIND_COUNT];

/* Tape operations. Integers on the tape are native-endian (the tape never
 * leaves the process). */
enum {
  TAPE_RECORD = 1, /* u8 kind, i64 entry (-1 top level), u32 key length, key; then one value */
  TAPE_LAYER_ID,   /* i64 entry, i64 layer id */
  TAPE_ENTRY_END,  /* i64 entry: the layer entry's object closed */
  TAPE_OBJECT,     /* u32 member count, then count x (key, value) */
  TAPE_ARRAY,      /* u32 element count, then the elements */
  TAPE_KEY,        /* u32 length, bytes */
  TAPE_STRING,     /* u32 length, bytes */
  TAPE_INTEGER,    /* i64 */
  TAPE_DOUBLE,     /* double */
  TAPE_TRUE,
  TAPE_FALSE,
  TAPE_NULL,
  TAPE_KEY_ID,     /* u16 id, u32 length, bytes: a key the extractor numbered (the
                    * same bytes, the same id, for the life of the extractor) */
  TAPE_STRING_ID   /* u16 id, u32 length, bytes: a short string value numbered so
                    * (keys and values share the numbers) */
};

/* Strings are numbered up to this many distinct ones (later ones are
 * TAPE_KEY or TAPE_STRING): keys of at most KEY_ID_MAXLEN bytes, string
 * values of at most STRING_ID_MAXLEN (longer values are mostly ids seen
 * once). A record's replay finds the Lua string by its id instead of
 * looking its bytes up. */
#define GEOSERVICES_TAPE_STRING_IDS 512
#define GEOSERVICES_TAPE_KEY_ID_MAXLEN 40
#define GEOSERVICES_TAPE_STRING_ID_MAXLEN 16

/* Readers of the tape's native-endian integers and doubles: each moves *p
 * past what it read (the binding and the store's apply path share them). */
static inline uint32_t geoservices_tape_u32(const char **p) {
  uint32_t v;
  memcpy(&v, *p, sizeof v);
  *p += sizeof v;
  return v;
}

static inline int64_t geoservices_tape_i64(const char **p) {
  int64_t v;
  memcpy(&v, *p, sizeof v);
  *p += sizeof v;
  return v;
}

static inline double geoservices_tape_f64(const char **p) {
  double v;
  memcpy(&v, *p, sizeof v);
  *p += sizeof v;
  return v;
}

/* A member's key at *p (TAPE_KEY or TAPE_KEY_ID; or a string value, which
 * has the same layout): returns its bytes and sets *len (and *id: its id,
 * or -1) and moves *p past it. */
static inline const char *geoservices_tape_key_id(const char **p, uint32_t *len, int *id) {
  const char *key;
  int op = (unsigned char)*(*p)++;
  if (op == TAPE_KEY_ID || op == TAPE_STRING_ID) {
    uint16_t v;
    memcpy(&v, *p, sizeof v);
    *p += sizeof v;
    *id = v;
  } else {
    *id = -1;
  }
  *len = geoservices_tape_u32(p);
  key = *p;
  *p += *len;
  return key;
}

static inline const char *geoservices_tape_key(const char **p, uint32_t *len) {
  int id;
  return geoservices_tape_key_id(p, len, &id);
}

static inline int geoservices_tape_is_string(int op) { return op == TAPE_STRING || op == TAPE_STRING_ID; }

/* A string value at *p (TAPE_STRING or TAPE_STRING_ID, which the caller
 * checked): returns its bytes, sets *len and moves *p past it. */
static inline const char *geoservices_tape_string(const char **p, uint32_t *len) {
  int id;
  return geoservices_tape_key_id(p, len, &id); /* the same layout as a key's */
}

/* The header of a TAPE_RECORD, *p just past the op; moves *p to its value. */
typedef struct geoservices_tape_record {
  int kind;        /* geoservices_record_kind, as written (a reader checks the range) */
  int64_t entry;   /* the layer entry, -1 at the top level */
  const char *key; /* the member name of a field record, key_len bytes (0: none) */
  uint32_t key_len;
} geoservices_tape_record;

static inline geoservices_tape_record geoservices_tape_record_header(const char **p) {
  geoservices_tape_record h;
  h.kind = (unsigned char)*(*p)++;
  h.entry = geoservices_tape_i64(p);
  h.key_len = geoservices_tape_u32(p);
  h.key = *p;
  *p += h.key_len;
  return h;
}

/* Moves past the value at p (any nesting): returns where the next starts. */
const char *geoservices_tape_skip(const char *p);

typedef struct geoservices_records geoservices_records;

/* NULL on OOM. limits may be NULL (defaults of jsonstream). */
geoservices_records *geoservices_records_new(const geoservices_json_limits *limits);
/* Once this many bytes were fed, later feeds are parsed on a worker thread
 * (json/parse_worker.h) while the caller replays the tape: feed() then
 * copies and returns at once, reporting a parse error by a later feed() or
 * by finish() (with the same message and offset). The tape is the same.
 * A document fed whole in one call is parsed in the caller's thread. */
#define GEOSERVICES_RECORDS_WORKER_AFTER ((size_t)128 * 1024)
/* The worker's ring: fed bytes wait there (at most this much) to be parsed. */
#define GEOSERVICES_RECORDS_WORKER_RING ((size_t)1024 * 1024)
/* Sets that threshold (0: never use a worker). Before the first feed. */
void geoservices_records_set_worker_after(geoservices_records *r, size_t bytes);
void geoservices_records_free(geoservices_records *r);
/* 0, or a jsonstream error code (GEOSERVICES_JSON_E*); with a worker, the
 * error of bytes fed before. */
int geoservices_records_feed(geoservices_records *r, const char *chunk, size_t len);
/* Feeds what fill() writes (parse_worker.h): with a worker, straight into
 * its ring; before, through a buffer of at most 64 KiB. *n: the bytes
 * filled (0 at the end of fill's input, -1 on fill's error). Returns 0 or
 * an error code, as feed() does. */
int geoservices_records_fill(geoservices_records *r, geoservices_fill_fn fill, void *ctx, size_t max, long *n);
/* Has the worker read the rest of the document from fill (at most chunk
 * bytes a time, parse_worker.h) while the caller replays what it publishes:
 * await() after each replay, end_source() when done (also after a Lua
 * error: then the worker no longer calls fill). Returns 0; -1 when no
 * worker can run (worker_after 0, no thread): the caller then fills
 * itself; or the error code of earlier bytes. */
int geoservices_records_source(geoservices_records *r, geoservices_fill_fn fill, void *ctx, size_t chunk);
/* Waits for more published records or the source's end (parse_worker.h);
 * returns 0, or the parse error code (the worker then stopped, as after a
 * failed feed). */
int geoservices_records_await(geoservices_records *r, unsigned long *seen, geoservices_source_status *st);
void geoservices_records_end_source(geoservices_records *r);
/* Bytes fed so far, a source's included. */
size_t geoservices_records_fed(const geoservices_records *r);
int geoservices_records_finish(geoservices_records *r);
/* The error's message and offset: read them once feed() or finish() failed
 * (or finish() succeeded), when no worker is parsing any more. */
const char *geoservices_records_error(const geoservices_records *r);
size_t geoservices_records_offset(const geoservices_records *r);
/* The complete part of the tape: [data, data + *len). */
const char *geoservices_records_tape(geoservices_records *r, size_t *len);
/* Drops the complete part of the tape once it was consumed. */
void geoservices_records_consume(geoservices_records *r);
/* Bytes currently held by the tape (complete and partial). With a worker,
 * fed bytes not parsed yet are not counted: its ring bounds them (a feed
 * waits while the ring is full). */
size_t geoservices_records_pending(geoservices_records *r);

#endif
