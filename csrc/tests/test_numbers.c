/* The parser's doubles must equal strtod's for every input: random numbers
 * of 1 to 20 significant digits and exponents around the fast path's range,
 * plus halfway and boundary cases. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json/jsonstream.h"

static double got;
static int got_double;

static int on_double(void *ctx, double v) {
  (void)ctx;
  got = v;
  got_double = 1;
  return 0;
}

static int on_integer(void *ctx, long long v) {
  (void)ctx;
  got = (double)v;
  got_double = 0;
  return 0;
}

static int parse(const char *text, double *out) {
  geoservices_json_handlers h;
  geoservices_jsonstream *p;
  int rc;
  memset(&h, 0, sizeof h);
  h.on_double = on_double;
  h.on_integer = on_integer;
  p = geoservices_jsonstream_new(&h, NULL, NULL);
  rc = geoservices_jsonstream_feed(p, text, strlen(text));
  if (rc == 0) rc = geoservices_jsonstream_finish(p);
  geoservices_jsonstream_free(p);
  *out = got;
  return rc;
}

static unsigned long long state = 88172645463325252ULL;
static unsigned long long next_random(void) { /* xorshift64: the same cases on every run */
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

/* Both ways a number is read: alone (it runs to the end of the input, so the
 * byte machine takes it) and inside an array (whole in the chunk, so it is
 * converted while it is scanned). */
static void check_one(const char *text) {
  char wrapped[96];
  double mine, ref = strtod(text, NULL);
  int rc = parse(text, &mine);
  CHECK_MSG(rc == 0 && got_double && memcmp(&mine, &ref, sizeof ref) == 0, "%s: parser %.17g, strtod %.17g", text,
            mine, ref);
  if (strlen(text) + 3 > sizeof wrapped) return;
  snprintf(wrapped, sizeof wrapped, "[%s]", text);
  rc = parse(wrapped, &mine);
  CHECK_MSG(rc == 0 && got_double && memcmp(&mine, &ref, sizeof ref) == 0, "%s: parser %.17g, strtod %.17g",
            wrapped, mine, ref);
}

int main(void) {
  static const char *const fixed[] = {
    "0.1", "0.2", "0.3", "-117.19584274291992", "34.056789012345678", "1e23", "8.98846567431158e307",
    "2.2250738585072014e-308", "4.9e-324", "9007199254740993.0", "9007199254740992.5", "1.7976931348623157e308",
    "123456789012345678.0", "0.1000000000000000055511151231257827", "7.3177701707893310e+15",
    "2.4703282292062327e-324", "1.00000000000000011102230246251565404236316680908203125", "5e-324",
    "0.000000000000000000000000000123", "1.5e27", "1.5e-27", "-0.0", "0.0e5",
  };
  char buf[64];
  size_t i;
  for (i = 0; i < sizeof fixed / sizeof fixed[0]; i++) check_one(fixed[i]);
  for (i = 0; i < 300000; i++) {
    unsigned long long w = next_random();
    int digits = 1 + (int)(next_random() % 20), exp10 = (int)(next_random() % 70) - 35;
    unsigned long long mod = 1;
    int d;
    for (d = 0; d < digits && d < 19; d++) mod *= 10;
    w %= mod;
    switch (next_random() % 3) {
      case 0: snprintf(buf, sizeof buf, "%llu.%llue%d", w / 1000, w % 1000, exp10); break;
      case 1: snprintf(buf, sizeof buf, "-%llue%d", w, exp10); break;
      default: snprintf(buf, sizeof buf, "%.17g", (double)w * 1e-10 * (double)(next_random() % 1000)); break;
    }
    if (strchr(buf, 'e') || strchr(buf, '.') || strchr(buf, 'E')) check_one(buf);
  }
  return CHECK_DONE("test_numbers");
}
