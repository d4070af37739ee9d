/* Records that wait for their layer entry's id. A server may write a layer
 * entry's "id" after its features (the vendor documents no key order, and
 * the emulator's encoder puts it last), and a record cannot go into a table
 * before the store knows which layer's table. The records keep their order
 * here: up to GEOSERVICES_SPOOL_MEMORY bytes in memory, the rest in a
 * temporary file beside the store (unlinked as soon as it is opened, so
 * nothing is left behind by a crash), then they are read back one at a time
 * when the id comes. Memory stays flat whatever the layer's size, and a
 * layer whose id comes first never touches the spool.
 *
 * Why a file of tape records rather than a staging table or the extractor
 * deferring the id: the records are already in their most compact form (the
 * extractor's tape), writing and reading them back is sequential I/O at disk
 * speed, a staging table in the GeoPackage would grow the file for good (a
 * deleted page is not given back) and a TEMP table lives in memory here
 * (temp_store = MEMORY, for the statement journals), and the extractor
 * cannot know a layer's id before it has read it.
 *
 * Pure C (no lua.h, no sqlite3.h): unit-tested alone. */
#ifndef GEOSERVICES_STORE_SPOOL_H
#define GEOSERVICES_STORE_SPOOL_H

#include <stdint.h>
#include <stdio.h>

#include "buf.h"

/* Bytes of waiting records held in memory before the file is used. */
#define GEOSERVICES_SPOOL_MEMORY ((size_t)1 << 20)

typedef struct geoservices_spool {
  geoservices_buf mem;  /* records not written to the file yet: u32 length, bytes; ... */
  geoservices_buf one;  /* the record being read back */
  FILE *file;           /* NULL until the memory filled once */
  char *dir;            /* where the file is made (NULL: the system's temporary directory) */
  uint64_t count;       /* records held */
  uint64_t file_bytes;  /* bytes written to the file since it was last emptied */
  int error;            /* errno of the last failure (0: out of memory or none) */
} geoservices_spool;

/* dir: the directory of the file (copied; NULL or "" for the system's). */
void geoservices_spool_init(geoservices_spool *sp, const char *dir);
void geoservices_spool_free(geoservices_spool *sp);
/* Sets the directory later (the store's, once its connection is known). 0 or -1. */
int geoservices_spool_set_dir(geoservices_spool *sp, const char *dir);
/* Appends one record (len bytes). 0, or -1 (sp->error: errno, 0 for out of memory). */
int geoservices_spool_put(geoservices_spool *sp, const char *bytes, size_t len);
/* Calls fn(ctx, record, len) for each record in order, then empties the
 * spool (also when fn fails). Returns 0, what fn returned when nonzero, or
 * -1 for an I/O failure (sp->error). */
int geoservices_spool_replay(geoservices_spool *sp, int (*fn)(void *ctx, const char *rec, size_t len), void *ctx);
/* Forgets every record held (the file is kept, emptied, for the next layer). */
void geoservices_spool_drop(geoservices_spool *sp);

#endif
