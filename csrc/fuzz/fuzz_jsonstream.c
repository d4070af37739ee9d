/* libFuzzer target: the push parser must give the same events and verdict
 * for the whole input and for the input split at a point chosen by the data,
 * and never crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json/jsonstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct { uint64_t hash; size_t events; double last_double; size_t doubles; } trace;

static void mix(trace *t, uint64_t v) {
  t->hash = (t->hash ^ v) * 1099511628211ULL;
  t->events++;
}
static void mix_bytes(trace *t, const char *s, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) mix(t, (unsigned char)s[i]);
}
static int on_null(void *c) { mix(c, 1); return 0; }
static int on_boolean(void *c, int v) { mix(c, 2 + (uint64_t)v); return 0; }
static int on_integer(void *c, long long v) { mix(c, 4); mix(c, (uint64_t)v); return 0; }
static int on_double(void *c, double v) {
  uint64_t b;
  trace *t = c;
  memcpy(&b, &v, sizeof b);
  mix(c, 5);
  mix(c, b);
  t->last_double = v;
  t->doubles++;
  return 0;
}
static int on_string(void *c, const char *s, size_t n) { mix(c, 6); mix_bytes(c, s, n); return 0; }
static int on_key(void *c, const char *s, size_t n) { mix(c, 7); mix_bytes(c, s, n); return 0; }
static int on_so(void *c) { mix(c, 8); return 0; }
static int on_eo(void *c) { mix(c, 9); return 0; }
static int on_sa(void *c) { mix(c, 10); return 0; }
static int on_ea(void *c) { mix(c, 11); return 0; }

static const geoservices_json_handlers handlers = {
  on_null, on_boolean, on_integer, on_double, on_string, on_key, on_so, on_eo, on_sa, on_ea,
};

static int parse(const uint8_t *data, size_t size, size_t split, trace *t, size_t *offset) {
  geoservices_json_limits lim = {64, 1 << 16};
  geoservices_jsonstream *p = geoservices_jsonstream_new(&handlers, t, &lim);
  int rc;
  char *a, *b;
  if (!p) abort();
  /* exact-size copies so that a read past a chunk is caught by ASan */
  a = malloc(split ? split : 1);
  b = malloc(size - split ? size - split : 1);
  memcpy(a, data, split);
  memcpy(b, data + split, size - split);
  rc = geoservices_jsonstream_feed(p, a, split);
  if (rc == 0) rc = geoservices_jsonstream_feed(p, b, size - split);
  if (rc == 0) rc = geoservices_jsonstream_finish(p);
  *offset = geoservices_jsonstream_offset(p);
  free(a);
  free(b);
  geoservices_jsonstream_free(p);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  trace whole = {14695981039346656037ULL, 0, 0, 0}, split = {14695981039346656037ULL, 0, 0, 0};
  size_t at = size ? data[0] % (size + 1) : 0, off1, off2;
  int rc1 = parse(data, size, size, &whole, &off1);
  int rc2 = parse(data, size, at, &split, &off2);
  if (rc1 != rc2 || off1 != off2) abort();
  if (rc1 == 0 && (whole.hash != split.hash || whole.events != split.events)) abort();
  /* a lone number must convert exactly as strtod does, both alone (the byte
   * machine) and inside an array (converted while scanned in the chunk) */
  if (rc1 == 0 && whole.events == 2 && whole.doubles == 1 && size < 64) {
    char text[64], wrapped[66];
    double ref;
    trace in_array = {14695981039346656037ULL, 0, 0, 0};
    size_t off3;
    memcpy(text, data, size);
    text[size] = '\0';
    ref = strtod(text, NULL);
    if (memcmp(&ref, &whole.last_double, sizeof ref) != 0) abort();
    wrapped[0] = '[';
    memcpy(wrapped + 1, data, size);
    wrapped[size + 1] = ']';
    if (parse((const uint8_t *)wrapped, size + 2, size + 2, &in_array, &off3) != 0) abort();
    if (in_array.doubles != 1 || memcmp(&ref, &in_array.last_double, sizeof ref) != 0) abort();
  }
  return 0;
}
