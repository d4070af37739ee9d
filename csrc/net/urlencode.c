#include "net/urlencode.h"

#include <string.h>

/* Unreserved characters of RFC 3986 pass through; everything else, space
 * included, becomes %XX. Both forms decode the same in every form parser. */
static const unsigned char is_unreserved[256] = {
  ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1,
  ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1,
  ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1,
  ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1,
  ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1,
  ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1,
  ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1,
  ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
  ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1,
  ['7'] = 1, ['8'] = 1, ['9'] = 1, ['-'] = 1, ['.'] = 1, ['_'] = 1, ['~'] = 1,
};

static const char hex_digits[] = "0123456789ABCDEF";

size_t geoservices_urlencoded_size(const char *s, size_t n) {
  size_t out = 0, i;
  for (i = 0; i < n; i++) out += is_unreserved[(unsigned char)s[i]] ? 1 : 3;
  return out;
}

int geoservices_urlencode_append(geoservices_buf *b, const char *s, size_t n) {
  size_t need = geoservices_urlencoded_size(s, n), i;
  char *out;
  if (geoservices_buf_reserve(b, need)) return -1;
  out = b->data + b->len;
  for (i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (is_unreserved[c]) {
      *out++ = (char)c;
    } else {
      *out++ = '%';
      *out++ = hex_digits[c >> 4];
      *out++ = hex_digits[c & 15];
    }
  }
  b->len += need;
  b->data[b->len] = '\0';
  return 0;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int geoservices_urldecode_append(geoservices_buf *b, const char *s, size_t n) {
  size_t i;
  char *out;
  if (geoservices_buf_reserve(b, n)) return -1; /* decoding never grows */
  out = b->data + b->len;
  for (i = 0; i < n; i++) {
    if (s[i] == '+') {
      *out++ = ' ';
    } else if (s[i] == '%') {
      int hi, lo;
      if (i + 2 >= n) return -1; /* needs two hex digits after '%' */
      hi = hex_value(s[i + 1]);
      lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return -1;
      *out++ = (char)(hi * 16 + lo);
      i += 2;
    } else {
      *out++ = s[i];
    }
  }
  b->len = (size_t)(out - b->data);
  b->data[b->len] = '\0';
  return 0;
}
