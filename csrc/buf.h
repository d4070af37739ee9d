/* A growable byte buffer. Every operation that can fail returns -1 and leaves
 * the buffer valid; nothing here aborts, so callers can turn failures into
 * Lua errors or curl abort codes themselves. Pure C: no lua.h. */
#ifndef GEOSERVICES_BUF_H
#define GEOSERVICES_BUF_H

#include <stddef.h>

typedef struct geoservices_buf {
  char *data;
  size_t len;
  size_t cap;
  size_t limit; /* 0 = unlimited; appends beyond it fail */
} geoservices_buf;

void geoservices_buf_init(geoservices_buf *b, size_t limit);
void geoservices_buf_free(geoservices_buf *b);
void geoservices_buf_reset(geoservices_buf *b);
int geoservices_buf_reserve(geoservices_buf *b, size_t extra);
int geoservices_buf_append(geoservices_buf *b, const void *p, size_t n);
int geoservices_buf_putc(geoservices_buf *b, char c);

#endif
