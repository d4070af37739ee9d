/* Unit tests of the lookup-table form encoder and its decoder. */
#include <stdlib.h>

#include "buf.h"
#include "check.h"
#include "net/urlencode.h"

static void check_encodes(const char *in, size_t n, const char *expected) {
  geoservices_buf b;
  geoservices_buf_init(&b, 0);
  CHECK(geoservices_urlencode_append(&b, in, n) == 0);
  CHECK(geoservices_urlencoded_size(in, n) == strlen(expected));
  CHECK_STREQ(b.data ? b.data : "", expected);
  geoservices_buf_free(&b);
}

static void check_round_trip(const char *in, size_t n) {
  geoservices_buf enc, dec;
  geoservices_buf_init(&enc, 0);
  geoservices_buf_init(&dec, 0);
  CHECK(geoservices_urlencode_append(&enc, in, n) == 0);
  CHECK(geoservices_urldecode_append(&dec, enc.data ? enc.data : "", enc.len) == 0);
  CHECK(dec.len == n && (n == 0 || memcmp(dec.data, in, n) == 0));
  geoservices_buf_free(&enc);
  geoservices_buf_free(&dec);
}

int main(void) {
  geoservices_buf b;
  char all[256];
  size_t i, big = 30u * 1024 * 1024; /* above curl_easy_escape's int limit region */
  char *large;

  check_encodes("", 0, "");
  check_encodes("abcXYZ019-._~", 13, "abcXYZ019-._~");
  check_encodes("a b&c=d+e", 9, "a%20b%26c%3Dd%2Be");
  check_encodes(":/?#[]@!$'()*,;%", 16, "%3A%2F%3F%23%5B%5D%40%21%24%27%28%29%2A%2C%3B%25");
  check_encodes("\xc3\xa9\xe2\x82\xac", 5, "%C3%A9%E2%82%AC"); /* UTF-8 bytes one by one */
  check_encodes("a\0b", 3, "a%00b");
  check_encodes("{\"x\":1}", 7, "%7B%22x%22%3A1%7D");

  for (i = 0; i < 256; i++) all[i] = (char)i;
  check_round_trip(all, 256);
  check_round_trip("", 0);

  geoservices_buf_init(&b, 0);
  CHECK(geoservices_urldecode_append(&b, "a+b%20c", 7) == 0);
  CHECK_STREQ(b.data, "a b c");
  geoservices_buf_reset(&b);
  CHECK(geoservices_urldecode_append(&b, "%4", 2) == -1);  /* truncated escape */
  geoservices_buf_reset(&b);
  CHECK(geoservices_urldecode_append(&b, "%zz", 3) == -1); /* not hex */
  geoservices_buf_reset(&b);
  CHECK(geoservices_urldecode_append(&b, "ab%", 3) == -1);
  geoservices_buf_free(&b);

  large = malloc(big);
  CHECK(large != NULL);
  if (large) {
    for (i = 0; i < big; i++) large[i] = (i % 3 == 0) ? ' ' : 'x';
    geoservices_buf_init(&b, 0);
    CHECK(geoservices_urlencode_append(&b, large, big) == 0);
    CHECK(b.len == big / 3 * 3 + (big / 3) * 2);
    CHECK(memcmp(b.data, "%20xx%20xx", 10) == 0);
    geoservices_buf_free(&b);
    free(large);
  }
  return CHECK_DONE("test_urlencode");
}
