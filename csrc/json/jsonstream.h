/* A push (yajl-style) JSON parser: feed() any split of the input and the same
 * events come out. Pure C99, no lua.h, so it can be unit-tested and fuzzed
 * alone. Exactly one top-level value per document (RFC 8259). */
#ifndef GEOSERVICES_JSONSTREAM_H
#define GEOSERVICES_JSONSTREAM_H

#include <stddef.h>

/* Any handler may be NULL; a nonzero return aborts parsing. Strings passed to
 * on_string/on_key are unescaped, valid UTF-8, may contain NUL, and are only
 * valid during the call. */
typedef struct geoservices_json_handlers {
  int (*on_null)(void *ctx);
  int (*on_boolean)(void *ctx, int value);
  int (*on_integer)(void *ctx, long long value); /* no '.', 'e', 'E' and fits int64 */
  int (*on_double)(void *ctx, double value);     /* everything else, incl. int64 overflow */
  int (*on_string)(void *ctx, const char *s, size_t len);
  int (*on_key)(void *ctx, const char *s, size_t len);
  int (*on_start_object)(void *ctx);
  int (*on_end_object)(void *ctx);
  int (*on_start_array)(void *ctx);
  int (*on_end_array)(void *ctx);
} geoservices_json_handlers;

/* 0 = defaults: depth 1000 (cjson's), 64 MiB per string or number. */
typedef struct geoservices_json_limits {
  size_t max_depth;
  size_t max_value_bytes;
} geoservices_json_limits;

#define GEOSERVICES_JSON_DEFAULT_DEPTH 1000
#define GEOSERVICES_JSON_DEFAULT_VALUE_BYTES ((size_t)64 * 1024 * 1024)

/* Return codes of feed() and finish(). */
enum {
  GEOSERVICES_JSON_OK = 0,
  GEOSERVICES_JSON_ESYNTAX = 1,     /* malformed JSON, including bad UTF-8 */
  GEOSERVICES_JSON_EINCOMPLETE = 2, /* finish(): truncated or empty document */
  GEOSERVICES_JSON_ELIMIT = 3,      /* max_depth or max_value_bytes exceeded */
  GEOSERVICES_JSON_EABORT = 4,      /* a handler returned nonzero */
  GEOSERVICES_JSON_ENOMEM = 5
};

typedef struct geoservices_jsonstream geoservices_jsonstream;

/* NULL on OOM. h and limits are copied; limits may be NULL. */
geoservices_jsonstream *geoservices_jsonstream_new(const geoservices_json_handlers *h, void *ctx,
                                                   const geoservices_json_limits *limits);
/* 0 or an error code; after an error every call returns that same code. */
int geoservices_jsonstream_feed(geoservices_jsonstream *p, const char *chunk, size_t len);
/* Ends the document: error if it is empty or incomplete. Trailing garbage is
 * already reported by feed(). */
int geoservices_jsonstream_finish(geoservices_jsonstream *p);
/* Human text of the last error ("" if none). */
const char *geoservices_jsonstream_error(const geoservices_jsonstream *p);
/* 0-based absolute byte offset of the error, or the bytes consumed so far. */
size_t geoservices_jsonstream_offset(const geoservices_jsonstream *p);
/* Back to the initial state (keeps handlers, limits and allocations). */
void geoservices_jsonstream_reset(geoservices_jsonstream *p);
void geoservices_jsonstream_free(geoservices_jsonstream *p);

#endif
