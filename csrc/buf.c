#include "buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void geoservices_buf_init(geoservices_buf *b, size_t limit) {
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
  b->limit = limit;
}

void geoservices_buf_free(geoservices_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

void geoservices_buf_reset(geoservices_buf *b) { b->len = 0; }

int geoservices_buf_reserve(geoservices_buf *b, size_t extra) {
  size_t need, cap;
  char *p;
  if (extra > SIZE_MAX - b->len - 1) return -1;
  need = b->len + extra + 1; /* +1 keeps room for a NUL terminator */
  if (b->limit && need - 1 > b->limit) return -1;
  if (need <= b->cap) return 0;
  cap = b->cap ? b->cap : 64;
  while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  p = realloc(b->data, cap);
  if (!p) return -1;
  b->data = p;
  b->cap = cap;
  return 0;
}

int geoservices_buf_append(geoservices_buf *b, const void *p, size_t n) {
  if (geoservices_buf_reserve(b, n)) return -1;
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

int geoservices_buf_putc(geoservices_buf *b, char c) {
  return geoservices_buf_append(b, &c, 1);
}
