/* application/x-www-form-urlencoded percent-encoding through a lookup table.
 * Written here rather than using curl_easy_escape, whose int length limit
 * fails on values above ~24 MB. Pure C: no lua.h, unit-tested alone. */
#ifndef GEOSERVICES_URLENCODE_H
#define GEOSERVICES_URLENCODE_H

#include <stddef.h>

#include "buf.h"

/* Bytes the encoding of s[0..n) takes. */
size_t geoservices_urlencoded_size(const char *s, size_t n);
/* Appends the encoding of s[0..n) to b; -1 when the buffer cannot grow. */
int geoservices_urlencode_append(geoservices_buf *b, const char *s, size_t n);
/* Appends the decoding ('+' is a space); -1 on a malformed escape or no memory. */
int geoservices_urldecode_append(geoservices_buf *b, const char *s, size_t n);

#endif
