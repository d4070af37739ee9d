/* The base of the store's apply path (apply_internal.h): the errors, the key
 * comparisons and the column lookup every apply_*.c shares. It calls none of
 * them; the record dispatcher that does is apply_records.c. */
#include "store/apply_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ---------------------------------------------------------------- */

int geoservices_store_fail(geoservices_store *s, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->message, sizeof s->message, fmt, ap);
  va_end(ap);
  s->rc = rc;
  return -1;
}

int geoservices_store_fail_sqlite(geoservices_store *s, int rc, const char *what) {
  return geoservices_store_fail(s, rc, "%s: %s", what, sqlite3_errmsg(s->db));
}

/* ---- the tape -------------------------------------------------------------- */

int geoservices_store_key_is(const char *key, uint32_t len, const char *name) {
  return len == strlen(name) && memcmp(key, name, len) == 0;
}

int geoservices_store_key_is_ci(const char *key, uint32_t len, const char *name) {
  uint32_t i;
  if (len != strlen(name)) return 0;
  for (i = 0; i < len; i++) {
    char a = key[i], b = name[i];
    if (a >= 'A' && a <= 'Z') a = (char)(a - 'A' + 'a');
    if (b >= 'A' && b <= 'Z') b = (char)(b - 'A' + 'a');
    if (a != b) return 0;
  }
  return 1;
}

/* ---- a layer's columns ------------------------------------------------------ */

/* The column of `name` (the guess of the record's attribute `position` first:
 * records list their attributes in the same order), or GEOSERVICES_STORE_NONE. */
size_t geoservices_store_find_column(geoservices_store_layer *l, const char *name, size_t len, size_t position) {
  size_t i, g;
  if (position < l->guess_cap) { /* records list their attributes in the same order */
    g = l->guess[position];
    if (g < l->ncols && l->cols[g].len == len && memcmp(l->cols[g].name, name, len) == 0) return g;
  }
  for (i = 0; i < l->ncols; i++)
    if (l->cols[i].len == len && memcmp(l->cols[i].name, name, len) == 0) break;
  if (i == l->ncols) /* field names are case-insensitive on the server */
    for (i = 0; i < l->ncols; i++)
      if (geoservices_store_key_is_ci(name, (uint32_t)len, l->cols[i].name)) break;
  if (i == l->ncols) return GEOSERVICES_STORE_NONE;
  if (position == GEOSERVICES_STORE_NONE || position > (1u << 20)) return i; /* no order to learn */
  if (position >= l->guess_cap) {
    size_t cap = l->guess_cap ? l->guess_cap : 32, k;
    size_t *q;
    while (cap <= position) cap *= 2;
    q = realloc(l->guess, cap * sizeof *q);
    if (!q) return i; /* the guess is only a shortcut */
    for (k = l->guess_cap; k < cap; k++) q[k] = GEOSERVICES_STORE_NONE;
    l->guess = q;
    l->guess_cap = cap;
  }
  l->guess[position] = i;
  return i;
}
