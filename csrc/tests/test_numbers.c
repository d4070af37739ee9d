/* The parser's doubles must equal strtod's for every input: random numbers
 * of 1 to 20 significant digits and exponents around the fast path's range,
 * plus halfway and boundary cases. Each number goes through the parser
 * (jsonstream) and through jsonnum's functions alone; jsonnum's integer
 * bounds and token scan are checked directly too. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json/jsonnum.h"
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

/* jsonnum alone, the way the parser uses it: the fast path when it can
 * promise the exact double, else strtod (parse_double). */
static void check_jsonnum(const char *text, double ref) {
  size_t n = strlen(text);
  double v = 0;
  int ok = geoservices_json_fast_double(text, n, &v) || geoservices_json_parse_double(text, n, &v) == 0;
  CHECK_MSG(ok && memcmp(&v, &ref, sizeof ref) == 0, "%s: jsonnum %.17g, strtod %.17g", text, v, ref);
}

/* Both ways a number is read: alone (it runs to the end of the input, so the
 * byte machine takes it) and inside an array (whole in the chunk, so it is
 * converted while it is scanned); and by jsonnum alone. */
static void check_one(const char *text) {
  char wrapped[96];
  double mine, ref = strtod(text, NULL);
  int rc;
  check_jsonnum(text, ref);
  rc = parse(text, &mine);
  CHECK_MSG(rc == 0 && got_double && memcmp(&mine, &ref, sizeof ref) == 0, "%s: parser %.17g, strtod %.17g", text,
            mine, ref);
  if (strlen(text) + 3 > sizeof wrapped) return;
  snprintf(wrapped, sizeof wrapped, "[%s]", text);
  rc = parse(wrapped, &mine);
  CHECK_MSG(rc == 0 && got_double && memcmp(&mine, &ref, sizeof ref) == 0, "%s: parser %.17g, strtod %.17g",
            wrapped, mine, ref);
}

static void check_int(const char *text, int fits, long long want) {
  long long v = 0;
  int r = geoservices_json_parse_int(text, strlen(text), &v);
  CHECK_MSG(r == fits && (!fits || v == want), "parse_int(%s): %d, %lld", text, r, v);
}

/* scan_number: where it stops, what it gathers, what it refuses. */
static void check_scan(const char *text, int ok, size_t stop, unsigned long long w, int exp10, int is_float) {
  geoservices_json_number np;
  size_t i = 0;
  int r = geoservices_json_scan_number((const unsigned char *)text, &i, strlen(text), &np);
  CHECK_MSG(r == ok, "scan_number(%s) returned %d", text, r);
  if (r && ok)
    CHECK_MSG(i == stop && np.w == w && np.exp10 == exp10 && np.is_float == is_float,
              "scan_number(%s): stop %zu, w %llu, exp10 %d, float %d", text, i, np.w, np.exp10, np.is_float);
}

static void check_jsonnum_parts(void) {
  double v = 1;
  check_int("0", 1, 0);
  check_int("-0", 1, 0);
  check_int("123456789012345678", 1, 123456789012345678LL);
  check_int("9223372036854775807", 1, LLONG_MAX);
  check_int("9223372036854775808", 0, 0);
  check_int("-9223372036854775808", 1, LLONG_MIN);
  check_int("-9223372036854775809", 0, 0);
  check_int("99999999999999999999", 0, 0);
  check_scan("12.5e3,", 1, 6, 125, 2, 1);
  check_scan("-0.000125]", 1, 9, 125, -6, 1);
  check_scan("1234567890123456789}", 1, 19, 1234567890123456789ULL, 0, 0);
  check_scan("01", 1, 1, 0, 0, 0); /* stops after the 0: the parser rejects the 1 */
  check_scan("12345678901234567890", 0, 0, 0, 0, 0); /* 20 significant digits */
  check_scan("1.", 0, 0, 0, 0, 0);
  check_scan("1e+", 0, 0, 0, 0, 0);
  check_scan("-", 0, 0, 0, 0, 0);
  CHECK(geoservices_json_fast_double("-0.0", 4, &v) && v == 0 && 1 / v < 0);
  CHECK(!geoservices_json_fast_double("1e400", 5, &v)); /* overflow: strtod decides */
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
  check_jsonnum_parts();
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
