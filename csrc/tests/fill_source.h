/* A fill() source (json/parse_worker.h) over a buffer, handing out at most
 * `step` bytes a call: shared by the record extractor's C tests and its
 * fuzz target, so both feed fill() and the worker's own reads alike. */
#ifndef GEOSERVICES_TESTS_FILL_SOURCE_H
#define GEOSERVICES_TESTS_FILL_SOURCE_H

#include <stddef.h>
#include <string.h>

typedef struct fill_source {
  const char *bytes;
  size_t len, pos, step;
} fill_source;

static long fill_from(void *ctx, char *room, size_t k) {
  fill_source *s = ctx;
  size_t n = s->len - s->pos;
  if (n > k) n = k;
  if (n > s->step) n = s->step;
  memcpy(room, s->bytes + s->pos, n);
  s->pos += n;
  return (long)n;
}

#endif
