/* Exact conversion of JSON number tokens, for the push parser (jsonstream.c):
 * int64 integers, a one-pass scan of a token into significand and decimal
 * exponent (8 digits at a time), an extended-precision fast path for the
 * common doubles, and strtod for the rest. Every double equals strtod's for
 * the same text. Pure C99, no lua.h, unit-tested alone (tests/test_numbers.c). */
#ifndef GEOSERVICES_JSONNUM_H
#define GEOSERVICES_JSONNUM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The value of a number token: significant digits (at most 19, leading zeros
 * dropped) and a decimal exponent, gathered in one pass over the bytes. */
typedef struct geoservices_json_number {
  unsigned long long w;
  int digits, exp10, neg, is_float;
} geoservices_json_number;

/* The integer of a validated token d[0..n) of an optional '-' and digits; 0
 * when it does not fit in a long long (the caller makes it a double). */
int geoservices_json_parse_int(const char *d, size_t n, long long *out);

/* The double of scanned parts, or 0 when only strtod can give it exactly. */
int geoservices_json_parts_double(const geoservices_json_number *np, double *out);

/* The double of a whole, validated number token z[0..n) (no terminator
 * needed), or 0 when only strtod can give it exactly. */
int geoservices_json_fast_double(const char *z, size_t n, double *out);

/* strtod of z[0..n), which is NUL-terminated and already validated. strtod is
 * exact in glibc; it is retried with the locale's decimal point in case a
 * host called setlocale. 0, or -1 when out of memory. */
int geoservices_json_parse_double(const char *z, size_t n, double *out);

/* The scan of a token is forced inline, so it lives here rather than in
 * jsonnum.c: the parser runs it from its byte loop once per number, and as a
 * call it cost 6-7% of the C-only parse of an array of 3 million doubles
 * (0.065 s against 0.061 s). The two macros are undefined again below. */
#if defined(__GNUC__)
#define JSONNUM_INLINE static inline __attribute__((always_inline))
#else
#define JSONNUM_INLINE static inline
#endif
#define JSONNUM_BYTES(c) (0x0101010101010101ULL * (uint64_t)(c))

/* Adds the run of digits at s[*pi..end) to the significand, eight at a time
 * where it can (little-endian SWAR: check that all eight are digits, then
 * combine pairs, quads and halves). Leading zeros of a fraction are not
 * significant. Returns 0 when the significand would pass 19 digits.
 * Locals, not np's fields, in the loops: s may alias them. */
JSONNUM_INLINE int geoservices_json_digit_run(const unsigned char *s, size_t *pi, size_t end,
                                              geoservices_json_number *np, int fraction) {
  size_t i = *pi, start;
  unsigned long long w = np->w;
  int digits = np->digits;
  if (fraction && w == 0) {
    for (start = i; i < end && s[i] == '0'; i++) {}
    np->exp10 -= (int)(i - start);
  }
  start = i;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  while (i + 8 <= end && digits <= 11) {
    uint64_t v;
    memcpy(&v, s + i, 8);
    if ((v & JSONNUM_BYTES(0xF0)) != JSONNUM_BYTES(0x30) ||
        ((v + JSONNUM_BYTES(0x06)) & JSONNUM_BYTES(0xF0)) != JSONNUM_BYTES(0x30))
      break;
    v -= JSONNUM_BYTES('0');
    v = v * 10 + (v >> 8);
    v = (((v & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32))) +
         (((v >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >> 32;
    w = w * 100000000ULL + v;
    digits += 8;
    i += 8;
  }
#endif
  for (; i < end && (unsigned)(s[i] - '0') < 10u; i++) {
    if (++digits > 19) return 0;
    w = w * 10 + (unsigned)(s[i] - '0');
  }
  if (fraction) np->exp10 -= (int)(i - start);
  np->w = w;
  np->digits = digits;
  *pi = i;
  return 1;
}

/* Scans a number token from s[*pi..end) into np, stopping at the first byte
 * that cannot continue it (*pi is then that byte). Returns 0 when the token
 * is not valid JSON or does not fit geoservices_json_number (more than 19
 * significant digits); *pi is then meaningless. */
JSONNUM_INLINE int geoservices_json_scan_number(const unsigned char *s, size_t *pi, size_t end,
                                                geoservices_json_number *np) {
  size_t i = *pi, start;
  int e = 0, eneg = 0;
  np->w = 0;
  np->digits = np->exp10 = np->neg = np->is_float = 0;
  if (i < end && s[i] == '-') {
    np->neg = 1;
    i++;
  }
  if (i < end && s[i] == '0') {
    i++;
  } else {
    start = i;
    if (!geoservices_json_digit_run(s, &i, end, np, 0) || i == start) return 0;
  }
  if (i < end && s[i] == '.') {
    np->is_float = 1;
    start = ++i;
    if (!geoservices_json_digit_run(s, &i, end, np, 1) || i == start) return 0;
  }
  if (i < end && (s[i] | 0x20) == 'e') {
    np->is_float = 1;
    i++;
    if (i < end && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
    for (start = i; i < end && (unsigned)(s[i] - '0') < 10u; i++) {
      if (e > 10000) return 0;
      e = e * 10 + (s[i] - '0');
    }
    if (i == start) return 0;
    np->exp10 += eneg ? -e : e;
  }
  *pi = i;
  return 1;
}

#undef JSONNUM_INLINE
#undef JSONNUM_BYTES

#endif
