/* A parse worker: one thread that runs a parse function over the bytes a
 * caller writes into a ring buffer, so that parsing a large document
 * overlaps with the caller's use of what was parsed before (the record
 * extractor's tape: building Lua tables, applying rows). The bytes reach
 * the parse function in the order written, in any split, exactly once.
 * Pure C (POSIX threads), no lua.h: the worker never touches a Lua state. */
#ifndef GEOSERVICES_PARSE_WORKER_H
#define GEOSERVICES_PARSE_WORKER_H

#include <stddef.h>

/* Called on the worker thread, without the lock: 0, or an error code that
 * stops parsing (later bytes are dropped and every write returns it). */
typedef int (*geoservices_parse_fn)(void *ctx, const char *bytes, size_t n);
/* Called on the worker thread after each parsed span, with the lock held:
 * where the parser's output is handed over (see geoservices_parse_worker_lock). */
typedef void (*geoservices_publish_fn)(void *ctx);

typedef struct geoservices_parse_worker geoservices_parse_worker;

/* Starts the thread with a ring of `capacity` bytes; NULL when a thread or
 * the memory cannot be had (the caller then parses in its own thread). */
geoservices_parse_worker *geoservices_parse_worker_start(size_t capacity, geoservices_parse_fn parse,
                                                         geoservices_publish_fn publish, void *ctx);
/* Copies the bytes into the ring, waiting while it is full. Returns the
 * worker's error code (0 while parsing goes well): the error of earlier
 * bytes, which a write reports as soon as it is known. */
int geoservices_parse_worker_write(geoservices_parse_worker *w, const char *bytes, size_t n);
/* Fills the ring in place: waits for room, then (without the lock) calls
 * fill(ctx, room, k) for one contiguous stretch of at most `max` bytes,
 * which returns how many bytes it wrote there (0 at the end of its input,
 * -1 on its own error). *n: that count. Returns the worker's error code, as
 * write() does; the bytes filled are parsed like written ones. */
typedef long (*geoservices_fill_fn)(void *ctx, char *room, size_t k);
int geoservices_parse_worker_fill(geoservices_parse_worker *w, geoservices_fill_fn fill, void *ctx, size_t max,
                                  long *n);
/* A source the worker reads by itself, so that reading a file costs the
 * caller's thread nothing: once set, whenever the ring is empty the worker
 * calls fill(ctx, room, k) (k <= chunk) on its own thread and parses what
 * it wrote, until fill returns 0 (the end) or -1 (its error, with errno
 * set). The caller must not write or fill meanwhile; it waits for what the
 * worker publishes with await() and ends with end_source(). */
enum { GEOSERVICES_SOURCE_NONE, GEOSERVICES_SOURCE_READING, GEOSERVICES_SOURCE_ENDED, GEOSERVICES_SOURCE_FAILED };
typedef struct geoservices_source_status {
  int state;      /* GEOSERVICES_SOURCE_*: ENDED or FAILED once all that was read is published */
  int read_errno; /* of the failed read (FAILED) */
  size_t bytes;   /* read from the source so far */
} geoservices_source_status;
void geoservices_parse_worker_source(geoservices_parse_worker *w, geoservices_fill_fn fill, void *ctx, size_t chunk);
/* Waits until a span was published since *seen (then updated), or the
 * source ended or failed, or parsing failed; returns the worker's error
 * code (0 while parsing goes well) and fills *st. */
int geoservices_parse_worker_await(geoservices_parse_worker *w, unsigned long *seen, geoservices_source_status *st);
/* Waits until fill is not running, and has the worker never call it again
 * (bytes already read are still parsed). Returns the bytes it read. */
size_t geoservices_parse_worker_end_source(geoservices_parse_worker *w);
/* Waits until every byte written was parsed and published; returns the
 * worker's error code. Afterwards the worker waits for bytes and touches
 * nothing of the caller's until the next write. */
int geoservices_parse_worker_wait(geoservices_parse_worker *w);
/* The lock publish runs under: the caller takes it to read what was published. */
void geoservices_parse_worker_lock(geoservices_parse_worker *w);
void geoservices_parse_worker_unlock(geoservices_parse_worker *w);
/* Stops the thread (bytes not parsed yet are dropped), joins it and frees
 * everything. NULL is ignored. */
void geoservices_parse_worker_stop(geoservices_parse_worker *w);

#endif
