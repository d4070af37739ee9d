/* Unit tests of the push JSON parser. Every fixture is parsed in one feed,
 * then split at every byte boundary (and at every pair of boundaries for short
 * ones, and 1 byte at a time); all runs must give the same event log, result,
 * message and offset. Each chunk is a separate exact-size allocation so
 * valgrind/ASan catch any read past a chunk. */
#include <float.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "check.h"
#include "json/jsonstream.h"

/* ---- event log ---- */

typedef struct logger {
  geoservices_buf log;
  int abort_at; /* abort on the n-th event (1-based), 0 = never */
  int events;
  long long last_int;
  double last_double;
  char last_str[64];
  size_t last_len;
} logger;

static int add(logger *lg, const char *s) {
  if (lg->log.len) geoservices_buf_putc(&lg->log, ' ');
  geoservices_buf_append(&lg->log, s, strlen(s));
  return lg->abort_at && ++lg->events == lg->abort_at;
}

static int add_str(logger *lg, const char *tag, const char *s, size_t n) {
  char tmp[8];
  size_t i;
  if (lg->log.len) geoservices_buf_putc(&lg->log, ' ');
  geoservices_buf_append(&lg->log, tag, strlen(tag));
  for (i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c > 0x20 && c < 0x7f && c != '\\') {
      geoservices_buf_putc(&lg->log, (char)c);
    } else {
      snprintf(tmp, sizeof tmp, "\\x%02X", c);
      geoservices_buf_append(&lg->log, tmp, 4);
    }
  }
  lg->last_len = n;
  memcpy(lg->last_str, s, n < sizeof lg->last_str ? n : sizeof lg->last_str);
  return lg->abort_at && ++lg->events == lg->abort_at;
}

static int h_null(void *ctx) { return add(ctx, "n"); }
static int h_bool(void *ctx, int v) { return add(ctx, v ? "t" : "f"); }
static int h_int(void *ctx, long long v) {
  char tmp[32];
  ((logger *)ctx)->last_int = v;
  snprintf(tmp, sizeof tmp, "i:%lld", v);
  return add(ctx, tmp);
}
static int h_double(void *ctx, double v) {
  char tmp[40];
  ((logger *)ctx)->last_double = v;
  snprintf(tmp, sizeof tmp, "d:%.17g", v);
  return add(ctx, tmp);
}
static int h_string(void *ctx, const char *s, size_t n) { return add_str(ctx, "s:", s, n); }
static int h_key(void *ctx, const char *s, size_t n) { return add_str(ctx, "k:", s, n); }
static int h_sobj(void *ctx) { return add(ctx, "{"); }
static int h_eobj(void *ctx) { return add(ctx, "}"); }
static int h_sarr(void *ctx) { return add(ctx, "["); }
static int h_earr(void *ctx) { return add(ctx, "]"); }

static const geoservices_json_handlers handlers = {h_null, h_bool,  h_int,  h_double, h_string,
                                                   h_key,  h_sobj, h_eobj, h_sarr,   h_earr};

/* Result of one parse: log + "=> code msg @offset". */
typedef struct result {
  char *text;
} result;

typedef struct fixture {
  const char *json;
  size_t len; /* 0 = strlen */
  size_t max_depth, max_value;
  const char *expect; /* full expected result text, or NULL to only compare splits */
} fixture;

static size_t fx_len(const fixture *f) { return f->len ? f->len : strlen(f->json); }

/* Parses f->json cut at the given sorted points. */
static char *run(const fixture *f, const size_t *cuts, size_t ncuts, int abort_at) {
  geoservices_json_limits lim;
  geoservices_jsonstream *p;
  logger lg;
  size_t n = fx_len(f), start = 0, k;
  int rc = 0;
  char tail[160];
  memset(&lg, 0, sizeof lg);
  geoservices_buf_init(&lg.log, 0);
  lg.abort_at = abort_at;
  lim.max_depth = f->max_depth;
  lim.max_value_bytes = f->max_value;
  p = geoservices_jsonstream_new(&handlers, &lg, &lim);
  if (!p) abort();
  for (k = 0; k <= ncuts && !rc; k++) {
    size_t stop = k < ncuts ? cuts[k] : n;
    char *chunk = malloc(stop - start ? stop - start : 1);
    if (!chunk) abort();
    memcpy(chunk, f->json + start, stop - start);
    rc = geoservices_jsonstream_feed(p, chunk, stop - start);
    free(chunk);
    start = stop;
  }
  if (!rc) rc = geoservices_jsonstream_finish(p);
  snprintf(tail, sizeof tail, "%s=> %d %s @%zu", lg.log.len ? " " : "", rc,
           geoservices_jsonstream_error(p), geoservices_jsonstream_offset(p));
  geoservices_buf_append(&lg.log, tail, strlen(tail));
  geoservices_jsonstream_free(p);
  return lg.log.data;
}

static int split_mismatches = 0;

static void check_fixture(const fixture *f) {
  size_t n = fx_len(f), a, b, cuts[2];
  size_t *all;
  char *whole = run(f, NULL, 0, 0), *other;
  int bad = 0;
  if (f->expect) CHECK_MSG(strcmp(whole, f->expect) == 0, "%s\n  got:    %s\n  wanted: %s", f->json, whole, f->expect);
  for (a = 0; a <= n; a++) { /* every single split */
    cuts[0] = a;
    other = run(f, cuts, 1, 0);
    if (strcmp(other, whole) != 0 && bad++ < 3)
      fprintf(stderr, "split at %zu of %s:\n  %s\n  %s\n", a, f->json, other, whole);
    free(other);
  }
  if (n <= 64) { /* every pair of splits */
    for (a = 0; a <= n; a++)
      for (b = a; b <= n; b++) {
        cuts[0] = a;
        cuts[1] = b;
        other = run(f, cuts, 2, 0);
        if (strcmp(other, whole) != 0 && bad++ < 3)
          fprintf(stderr, "splits at %zu,%zu of %s:\n  %s\n  %s\n", a, b, f->json, other, whole);
        free(other);
      }
  }
  all = malloc((n + 1) * sizeof *all); /* 1-byte feeds, plus empty feeds at both ends */
  if (!all) abort();
  all[0] = 0;
  for (a = 0; a < n; a++) all[a + 1] = a + 1;
  other = run(f, all, n + 1, 0);
  if (strcmp(other, whole) != 0 && bad++ < 3)
    fprintf(stderr, "1-byte feeds of %s:\n  %s\n  %s\n", f->json, other, whole);
  free(other);
  free(all);
  CHECK_MSG(bad == 0, "%d split runs of %s differ", bad, f->json);
  split_mismatches += bad;
  free(whole);
}

#define FX(j, e) {j, sizeof(j) - 1, 0, 0, e}
#define FXL(j, d, v, e) {j, sizeof(j) - 1, d, v, e}

static const fixture fixtures[] = {
  /* every event kind */
  FX("null", "n => 0  @4"),
  FX("true", "t => 0  @4"),
  FX("false", "f => 0  @5"),
  FX("0", "i:0 => 0  @1"),
  FX("-0", "i:0 => 0  @2"),
  FX("123", "i:123 => 0  @3"),
  FX(" \t\r\n42 \n", "i:42 => 0  @8"),
  FX("-2147217395", "i:-2147217395 => 0  @11"),
  FX("1700000000123", "i:1700000000123 => 0  @13"),
  FX("9223372036854775807", "i:9223372036854775807 => 0  @19"),
  FX("-9223372036854775808", "i:-9223372036854775808 => 0  @20"),
  FX("9223372036854775808", "d:9.2233720368547758e+18 => 0  @19"),
  FX("-9223372036854775809", "d:-9.2233720368547758e+18 => 0  @20"),
  FX("18446744073709551616", "d:1.8446744073709552e+19 => 0  @20"),
  FX("-117.19584274291992", "d:-117.19584274291992 => 0  @19"),
  FX("0.1", "d:0.10000000000000001 => 0  @3"),
  FX("1e-300", "d:1e-300 => 0  @6"),
  FX("5e-324", "d:4.9406564584124654e-324 => 0  @6"),
  FX("1E+2", "d:100 => 0  @4"),
  FX("1e2", "d:100 => 0  @3"),
  FX("-0.0", "d:-0 => 0  @4"),
  FX("2.5e-3", "d:0.0025000000000000001 => 0  @6"),
  FX("\"abc\"", "s:abc => 0  @5"),
  FX("\"\"", "s: => 0  @2"),
  FX("\"\\uD83D\\uDE00\"", "s:\\xF0\\x9F\\x98\\x80 => 0  @14"),
  FX("\"\\ud83d\\ude00x\"", "s:\\xF0\\x9F\\x98\\x80x => 0  @15"),
  FX("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"",
     "s:a\"b\\x5Cc/d\\x08\\x0C\\x0A\\x0D\\x09 => 0  @22"),
  FX("\"\\u0000x\\u00e9\\u20AC\"", "s:\\x00x\\xC3\\xA9\\xE2\\x82\\xAC => 0  @21"),
  FX("\"h\xC3\xA9llo \xE2\x82\xAC \xF0\x9D\x84\x9E \xF4\x8F\xBF\xBF\"",
     "s:h\\xC3\\xA9llo\\x20\\xE2\\x82\\xAC\\x20\\xF0\\x9D\\x84\\x9E\\x20\\xF4\\x8F\\xBF\\xBF => 0  @22"),
  FX("\"a\\u0000b\"", "s:a\\x00b => 0  @10"),
  FX("\"\xEF\xBF\xBF\xED\x9F\xBF\"", "s:\\xEF\\xBF\\xBF\\xED\\x9F\\xBF => 0  @8"),
  FX("[]", "[ ] => 0  @2"),
  FX("{}", "{ } => 0  @2"),
  FX(" [ ] ", "[ ] => 0  @5"),
  FX("[1,[2,[3,{}]],{\"a\":[]}]", "[ i:1 [ i:2 [ i:3 { } ] ] { k:a [ ] } ] => 0  @23"),
  FX("{\"a\":1,\"a\":2}", "{ k:a i:1 k:a i:2 } => 0  @13"),
  FX("[null,true,false,-1,2.5,\"x\"]", "[ n t f i:-1 d:2.5 s:x ] => 0  @28"),
  FX("{ \"k\" : [ 1 , 2 ] , \"e\\u00e9\" : { \"n\" : null } }",
     "{ k:k [ i:1 i:2 ] k:e\\xC3\\xA9 { k:n n } } => 0  @48"),
  FX("{\"objectIdFieldName\":\"OBJECTID\",\"geometryType\":\"esriGeometryPoint\","
     "\"spatialReference\":{\"wkid\":4326},\"features\":[{\"attributes\":{\"OBJECTID\":-2147217395,"
     "\"NAME\":\"Caf\\u00e9 \\\"Z\\\"\",\"DATE\":1700000000123,\"V\":null},\"geometry\":"
     "{\"x\":-117.19584274291992,\"y\":34.056,\"z\":1e-300}}],\"exceededTransferLimit\":false}",
     NULL),
  /* syntax errors, with offsets */
  FX("", "=> 2 empty input @0"),
  FX("   ", "=> 2 empty input @3"),
  FX("[1,2", "[ i:1 i:2 => 2 unexpected end of input @4"),
  FX("{\"a\":", "{ k:a => 2 unexpected end of input @5"),
  FX("\"abc", "=> 2 unexpected end of input @4"),
  FX("\"ab\\", "=> 2 unexpected end of input @4"),
  FX("\"\\uD83D", "=> 2 unexpected end of input @7"),
  FX("\"\xE2\x82", "=> 2 unexpected end of input @3"),
  FX("tru", "=> 2 unexpected end of input @3"),
  FX("-", "=> 2 unexpected end of input @1"),
  FX("1.", "=> 2 unexpected end of input @2"),
  FX("1e", "=> 2 unexpected end of input @2"),
  FX("1e+", "=> 2 unexpected end of input @3"),
  FX("\"a\\qb\"", "=> 1 invalid escape \\q @3"),
  FX("\"a\\\x01\"", "=> 1 invalid escape byte 0x01 @3"),
  FX("\"\\u12G4\"", "=> 1 invalid \\u escape @5"),
  FX("\"\\uD83D\"", "=> 1 lone surrogate @7"),
  FX("\"\\uDE00\"", "=> 1 lone surrogate @6"),
  FX("\"\\uD83Dx\"", "=> 1 lone surrogate @7"),
  FX("\"\\uD83D\\n\"", "=> 1 lone surrogate @8"),
  FX("\"\\uD83D\\u0041\"", "=> 1 lone surrogate @12"),
  FX("\"\\uD83D\\uD83D\"", "=> 1 lone surrogate @12"),
  FX("\"\xC0\xAF\"", "=> 1 invalid UTF-8 @1"),
  FX("\"\xC1\xBF\"", "=> 1 invalid UTF-8 @1"),
  FX("\"\xE0\x9F\xBF\"", "=> 1 invalid UTF-8 @2"),
  FX("\"\xF0\x8F\xBF\xBF\"", "=> 1 invalid UTF-8 @2"),
  FX("\"\xED\xA0\x80\"", "=> 1 invalid UTF-8 @2"),
  FX("\"\xF4\x90\x80\x80\"", "=> 1 invalid UTF-8 @2"),
  FX("\"\xF5\x80\x80\x80\"", "=> 1 invalid UTF-8 @1"),
  FX("\"\xE2\x82\"", "=> 1 invalid UTF-8 @3"),
  FX("\"\xE2\x82x\"", "=> 1 invalid UTF-8 @3"),
  FX("\"\x80\"", "=> 1 invalid UTF-8 @1"),
  FX("\"\xFF\"", "=> 1 invalid UTF-8 @1"),
  FX("[\"ok\",\"a\nb\"]", "[ s:ok => 1 unescaped control character 0x0A in string @8"),
  FX("\"\x00\"", "=> 1 unescaped control character 0x00 in string @1"),
  FX("01", "=> 1 invalid number @1"),
  FX("-01", "=> 1 invalid number @2"),
  FX("+1", "=> 1 expected value, found '+' @0"),
  FX(".5", "=> 1 expected value, found '.' @0"),
  FX("1.e5", "=> 1 invalid number @2"),
  FX("-a", "=> 1 invalid number @1"),
  FX("1e+x", "=> 1 invalid number @3"),
  FX("NaN", "=> 1 expected value, found 'N' @0"),
  FX("[-Infinity]", "[ => 1 invalid number @2"),
  FX("[1,2}", "[ i:1 i:2 => 1 expected ',' or ']', found '}' @4"),
  FX("{\"a\":1]", "{ k:a i:1 => 1 expected ',' or '}', found ']' @6"),
  FX("{\"a\" 1}", "{ k:a => 1 expected ':', found '1' @5"),
  FX("[1,]", "[ i:1 => 1 expected value, found ']' @3"),
  FX("{\"a\":1,}", "{ k:a i:1 => 1 expected string key, found '}' @7"),
  FX("{,}", "{ => 1 expected string key or '}', found ',' @1"),
  FX("{1:2}", "{ => 1 expected string key or '}', found '1' @1"),
  FX("[1 2]", "[ i:1 => 1 expected ',' or ']', found '2' @3"),
  FX("]", "=> 1 expected value, found ']' @0"),
  FX("[1] x", "[ i:1 ] => 1 trailing garbage after JSON value @4"),
  FX("1 2", "i:1 => 1 trailing garbage after JSON value @2"),
  FX("truex", "t => 1 trailing garbage after JSON value @4"),
  FX("nulx", "=> 1 invalid literal @3"),
  FX("[tRue]", "[ => 1 invalid literal @2"),
  FX("1-2", "i:1 => 1 trailing garbage after JSON value @1"),
  FX("\xEF\xBB\xBF{}", "=> 1 expected value, found byte 0xEF @0"),
  FX("[\x01]", "[ => 1 expected value or ']', found byte 0x01 @1"),
  /* limits */
  FXL("[[[1]]]", 3, 0, "[ [ [ i:1 ] ] ] => 0  @7"),
  FXL("[[[[1]]]]", 3, 0, "[ [ [ => 3 maximum depth exceeded @3"),
  FXL("{\"a\":{\"b\":{\"c\":{}}}}", 3, 0, "{ k:a { k:b { k:c => 3 maximum depth exceeded @15"),
  FXL("\"abcd\"", 0, 4, "s:abcd => 0  @6"),
  FXL("\"abcde\"", 0, 4, "=> 3 value too large @5"),
  FXL("[\"abcdefgh\"]", 0, 4, "[ => 3 value too large @6"),
  FXL("\"abc\xC3\xA9\"", 0, 4, "=> 3 value too large @5"),
  FXL("\"abcd\xC3\"", 0, 4, "=> 3 value too large @5"),
  FXL("\"abcd\x01\"", 0, 4, "=> 1 unescaped control character 0x01 in string @5"),
  FXL("\"abc\x01\"", 0, 4, "=> 1 unescaped control character 0x01 in string @4"),
  FXL("\"ab\\n\\u00e9\"", 0, 4, "=> 3 value too large @10"),
  FXL("\"ab\\n\\u00e\"", 0, 4, "=> 1 invalid \\u escape @10"),
  FXL("\"a\\u00e9b\"", 0, 4, "s:a\\xC3\\xA9b => 0  @10"),
  FXL("\"\\uD83D\\uDE00\"", 0, 4, "s:\\xF0\\x9F\\x98\\x80 => 0  @14"),
  FXL("\"a\\uD83D\\uDE00\"", 0, 4, "=> 3 value too large @13"),
  FXL("[1234,12345]", 0, 4, "[ i:1234 => 3 value too large @10"),
  FXL("1.25", 0, 4, "d:1.25 => 0  @4"),
  FXL("1.255", 0, 4, "=> 3 value too large @4"),
};

/* Whole-document checks that are awkward as log strings. */
static void test_values(void) {
  static const struct { const char *json; double value; } dbl[] = {
    {"-117.19584274291992", -117.19584274291992},
    {"0.1", 0.1},
    {"1e-300", 1e-300},
    {"5e-324", 5e-324},
    {"1.7976931348623157e308", DBL_MAX},
    {"2.2250738585072014e-308", DBL_MIN},
    {"34.056", 34.056},
    {"123456789012345678901234567890", 123456789012345678901234567890.0},
    {"0.30000000000000004", 0.30000000000000004},
  };
  size_t i;
  for (i = 0; i < sizeof dbl / sizeof dbl[0]; i++) {
    logger lg;
    geoservices_jsonstream *p;
    memset(&lg, 0, sizeof lg);
    p = geoservices_jsonstream_new(&handlers, &lg, NULL);
    CHECK(p != NULL);
    if (!p) continue;
    CHECK(geoservices_jsonstream_feed(p, dbl[i].json, strlen(dbl[i].json)) == 0);
    CHECK(geoservices_jsonstream_finish(p) == 0);
    if (strchr(dbl[i].json, '.') || strchr(dbl[i].json, 'e') || strlen(dbl[i].json) > 19)
      CHECK_MSG(lg.last_double == dbl[i].value, "%s -> %.17g", dbl[i].json, lg.last_double);
    else
      CHECK_MSG(lg.last_int == (long long)dbl[i].value, "%s -> %lld", dbl[i].json, lg.last_int);
    geoservices_buf_free(&lg.log);
    geoservices_jsonstream_free(p);
  }
  { /* integer extremes and the surrogate pair, via the capture fields */
    logger lg;
    geoservices_jsonstream *p;
    memset(&lg, 0, sizeof lg);
    p = geoservices_jsonstream_new(&handlers, &lg, NULL);
    CHECK(geoservices_jsonstream_feed(p, "-9223372036854775808", 20) == 0);
    CHECK(geoservices_jsonstream_finish(p) == 0);
    CHECK(lg.last_int == LLONG_MIN);
    geoservices_jsonstream_reset(p);
    CHECK(geoservices_jsonstream_feed(p, "9007199254740993", 16) == 0);
    CHECK(geoservices_jsonstream_finish(p) == 0);
    CHECK(lg.last_int == 9007199254740993LL); /* not rounded through a double */
    geoservices_jsonstream_reset(p);
    CHECK(geoservices_jsonstream_feed(p, "9223372036854775807 ", 20) == 0);
    CHECK(lg.last_int == LLONG_MAX); /* emitted at the delimiter, before finish */
    CHECK(geoservices_jsonstream_finish(p) == 0);
    geoservices_jsonstream_reset(p);
    CHECK(geoservices_jsonstream_feed(p, "9223372036854775808", 19) == 0);
    CHECK(geoservices_jsonstream_finish(p) == 0);
    CHECK(lg.last_double == 9223372036854775808.0);
    geoservices_jsonstream_reset(p);
    CHECK(geoservices_jsonstream_feed(p, "\"\\uD83D", 7) == 0);
    CHECK(geoservices_jsonstream_feed(p, "\\uDE00\"", 7) == 0);
    CHECK(geoservices_jsonstream_finish(p) == 0);
    CHECK(lg.last_len == 4 && memcmp(lg.last_str, "\xF0\x9F\x98\x80", 4) == 0);
    geoservices_buf_free(&lg.log);
    geoservices_jsonstream_free(p);
  }
}

static void test_lifecycle(void) {
  logger lg;
  geoservices_jsonstream *p;
  memset(&lg, 0, sizeof lg);
  p = geoservices_jsonstream_new(NULL, NULL, NULL); /* no handlers at all */
  CHECK(p != NULL);
  CHECK(geoservices_jsonstream_feed(p, "[1,\"a\",{\"b\":null}]", 18) == 0);
  CHECK(geoservices_jsonstream_finish(p) == 0);
  CHECK(geoservices_jsonstream_offset(p) == 18);
  CHECK_STREQ(geoservices_jsonstream_error(p), "");
  CHECK(geoservices_jsonstream_feed(p, "  \n", 3) == 0); /* whitespace after the value is fine */
  CHECK(geoservices_jsonstream_finish(p) == 0);
  CHECK(geoservices_jsonstream_offset(p) == 21);
  geoservices_jsonstream_free(p);

  /* after an error every feed returns the same error, offset unchanged */
  p = geoservices_jsonstream_new(&handlers, &lg, NULL);
  CHECK(geoservices_jsonstream_feed(p, "[1,", 3) == 0);
  CHECK(geoservices_jsonstream_feed(p, "x", 1) == GEOSERVICES_JSON_ESYNTAX);
  CHECK(geoservices_jsonstream_offset(p) == 3);
  CHECK(geoservices_jsonstream_feed(p, "2]", 2) == GEOSERVICES_JSON_ESYNTAX);
  CHECK(geoservices_jsonstream_finish(p) == GEOSERVICES_JSON_ESYNTAX);
  CHECK(geoservices_jsonstream_offset(p) == 3);
  CHECK_STREQ(geoservices_jsonstream_error(p), "expected value, found 'x'");
  /* reset makes it usable again */
  geoservices_jsonstream_reset(p);
  CHECK_STREQ(geoservices_jsonstream_error(p), "");
  CHECK(geoservices_jsonstream_offset(p) == 0);
  CHECK(geoservices_jsonstream_feed(p, "{\"a\":[]}", 8) == 0);
  CHECK(geoservices_jsonstream_finish(p) == 0);
  geoservices_buf_free(&lg.log);
  geoservices_jsonstream_free(p);
  geoservices_jsonstream_free(NULL);

  /* NULL feeds of length 0 are harmless */
  memset(&lg, 0, sizeof lg);
  p = geoservices_jsonstream_new(&handlers, &lg, NULL);
  CHECK(geoservices_jsonstream_feed(p, NULL, 0) == 0);
  CHECK(geoservices_jsonstream_feed(p, "7", 1) == 0);
  CHECK(geoservices_jsonstream_feed(p, NULL, 0) == 0);
  CHECK(geoservices_jsonstream_finish(p) == 0);
  CHECK(lg.last_int == 7);
  geoservices_buf_free(&lg.log);
  geoservices_jsonstream_free(p);
}

/* Handler aborts: the error names the handler and stops; same for every split. */
static void test_abort(void) {
  static const fixture f = FX("[1,\"two\",{\"k\":null},3.5,[true]]", NULL);
  static const char *const want[] = {
    NULL,
    "[ => 4 aborted by handler @0",
    "[ i:1 => 4 aborted by handler @2",
    "[ i:1 s:two => 4 aborted by handler @7",
    "[ i:1 s:two { => 4 aborted by handler @9",
    "[ i:1 s:two { k:k => 4 aborted by handler @12",
    "[ i:1 s:two { k:k n => 4 aborted by handler @17",
    "[ i:1 s:two { k:k n } => 4 aborted by handler @18",
    "[ i:1 s:two { k:k n } d:3.5 => 4 aborted by handler @23",
    "[ i:1 s:two { k:k n } d:3.5 [ => 4 aborted by handler @24",
    "[ i:1 s:two { k:k n } d:3.5 [ t => 4 aborted by handler @28",
    "[ i:1 s:two { k:k n } d:3.5 [ t ] => 4 aborted by handler @29",
    "[ i:1 s:two { k:k n } d:3.5 [ t ] ] => 4 aborted by handler @30",
  };
  size_t n = fx_len(&f), a, cuts[1];
  int k;
  for (k = 1; k <= 12; k++) {
    char *whole = run(&f, NULL, 0, k);
    int bad = 0;
    CHECK_MSG(strcmp(whole, want[k]) == 0, "abort at %d: %s", k, whole);
    for (a = 0; a <= n; a++) {
      char *other;
      cuts[0] = a;
      other = run(&f, cuts, 1, k);
      bad += strcmp(other, whole) != 0;
      free(other);
    }
    CHECK_MSG(bad == 0, "abort at %d differs for %d splits", k, bad);
    free(whole);
  }
  { /* top-level number: emitted (and aborted) in finish */
    static const fixture g = FX("42", "i:42 => 4 aborted by handler @2");
    char *r = run(&g, NULL, 0, 1);
    CHECK_STREQ(r, g.expect);
    free(r);
  }
}

/* Deep nesting at the default limit, and a large string across chunks. */
static void test_big(void) {
  size_t n = 1001, i;
  char *s = malloc(2 * n + 2);
  geoservices_jsonstream *p;
  geoservices_json_limits lim = {0, 100};
  if (!s) abort();
  for (i = 0; i < n; i++) {
    s[i] = '[';
    s[2 * n - 1 - i] = ']';
  }
  p = geoservices_jsonstream_new(NULL, NULL, NULL);
  CHECK(geoservices_jsonstream_feed(p, s + 1, 2 * n - 2) == 0); /* 1000 levels */
  CHECK(geoservices_jsonstream_finish(p) == 0);
  geoservices_jsonstream_reset(p);
  CHECK(geoservices_jsonstream_feed(p, s, 2 * n) == GEOSERVICES_JSON_ELIMIT);
  CHECK(geoservices_jsonstream_offset(p) == 1000);
  CHECK_STREQ(geoservices_jsonstream_error(p), "maximum depth exceeded");
  geoservices_jsonstream_free(p);
  free(s);

  /* a long string fed in 7-byte chunks stops at the limit, not at the end */
  p = geoservices_jsonstream_new(NULL, NULL, &lim);
  CHECK(geoservices_jsonstream_feed(p, "\"", 1) == 0);
  for (i = 0; i < 14; i++) CHECK(geoservices_jsonstream_feed(p, "abcdefg", 7) == 0);
  CHECK(geoservices_jsonstream_feed(p, "abcdefg", 7) == GEOSERVICES_JSON_ELIMIT);
  CHECK(geoservices_jsonstream_offset(p) == 101);
  CHECK_STREQ(geoservices_jsonstream_error(p), "value too large");
  geoservices_jsonstream_free(p);
}

int main(void) {
  size_t i;
  for (i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) check_fixture(&fixtures[i]);
  test_values();
  test_lifecycle();
  test_abort();
  test_big();
  if (split_mismatches) fprintf(stderr, "%d split mismatches\n", split_mismatches);
  return CHECK_DONE("test_jsonstream");
}
