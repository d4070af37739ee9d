/* Number conversion for the JSON parser (see jsonnum.h), moved out of
 * jsonstream.c unchanged; the scan of a token is inline in jsonnum.h. */
#include "json/jsonnum.h"

#include <limits.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>

int geoservices_json_parse_int(const char *d, size_t n, long long *out) {
  unsigned long long v = 0;
  size_t i = 0;
  int neg = d[0] == '-';
  if (n - (size_t)neg <= 18) { /* 18 digits cannot overflow: no check per digit */
    for (i = (size_t)neg; i < n; i++) v = v * 10 + (unsigned)(d[i] - '0');
  } else {
    for (i = (size_t)neg; i < n; i++) {
      unsigned dig = (unsigned)(d[i] - '0');
      if (v > (ULLONG_MAX - dig) / 10) return 0;
      v = v * 10 + dig;
    }
  }
  if (neg) {
    if (v > (unsigned long long)LLONG_MAX + 1) return 0;
    *out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
  } else {
    if (v > (unsigned long long)LLONG_MAX) return 0;
    *out = (long long)v;
  }
  return 1;
}

/* A fast and still exact conversion for the common case (at most 19
 * significant digits, decimal exponent within +-27): the significand and the
 * power of ten are exact in x87 extended precision (64-bit mantissa), so one
 * multiplication or division rounds once to 64 bits. Rounding that to a
 * double can only go wrong when the result lies within one extended ulp of a
 * halfway point between two doubles, which is checked; those rare cases, and
 * everything else, go to strtod. Returns 1 when *out is set. */
#if defined(__x86_64__) || defined(__i386__)
#include <float.h>
#endif
#if defined(LDBL_MANT_DIG) && LDBL_MANT_DIG == 64
static const long double exact_pow10[28] = {
  1e0L, 1e1L, 1e2L, 1e3L, 1e4L, 1e5L, 1e6L, 1e7L, 1e8L, 1e9L, 1e10L, 1e11L, 1e12L, 1e13L,
  1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L, 1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L,
};

/* The arithmetic must really carry 64 mantissa bits: a host may have set
 * the x87 precision to 53 bits, and valgrind emulates x87 with doubles. */
static int extended_precision_works(void) {
  static int checked = 0, works = 0;
  if (!checked) {
    volatile long double one = 1.0L, tiny = 1.0L / 9223372036854775808.0L; /* 2^-63 */
    volatile long double sum = one + tiny;
    works = sum != one;
    checked = 1;
  }
  return works;
}

/* w * 10^exp10 (w != 0), negated when neg, exactly rounded, or 0 when the
 * fast path cannot promise that. */
static int exact_double(unsigned long long w, int exp10, int neg, double *out) {
  long double r;
  union { long double ld; struct { unsigned long long mant; unsigned short se; } parts; } u;
  unsigned low;
  if (exp10 < -27 || exp10 > 27 || !extended_precision_works()) return 0;
  r = exp10 >= 0 ? (long double)w * exact_pow10[exp10] : (long double)w / exact_pow10[-exp10];
  u.ld = r;
  low = (unsigned)(u.parts.mant & 0x7FF); /* the 11 bits a double drops */
  if (low >= 0x3FF && low <= 0x401) return 0; /* near a halfway point: let strtod decide */
  if (r < (long double)DBL_MIN || r > (long double)DBL_MAX) return 0; /* subnormal or overflow */
  *out = neg ? -(double)r : (double)r;
  return 1;
}
#else
static int exact_double(unsigned long long w, int exp10, int neg, double *out) {
  (void)w;
  (void)exp10;
  (void)neg;
  (void)out;
  return 0;
}
#endif

int geoservices_json_parts_double(const geoservices_json_number *np, double *out) {
  if (np->w == 0) {
    *out = np->neg ? -0.0 : 0.0;
    return 1;
  }
  return exact_double(np->w, np->exp10, np->neg, out);
}

int geoservices_json_fast_double(const char *z, size_t n, double *out) {
  geoservices_json_number np;
  size_t stop = 0;
  return geoservices_json_scan_number((const unsigned char *)z, &stop, n, &np) && stop == n &&
         geoservices_json_parts_double(&np, out);
}

int geoservices_json_parse_double(const char *z, size_t n, double *out) {
  char *e;
  const char *dp;
  char *tmp, *w;
  size_t dl, i;
  *out = strtod(z, &e);
  if ((size_t)(e - z) == n) return 0;
  dp = localeconv()->decimal_point;
  dl = strlen(dp);
  tmp = malloc(n + dl + 1);
  if (!tmp) return -1;
  for (w = tmp, i = 0; i < n; i++) {
    if (z[i] == '.') {
      memcpy(w, dp, dl);
      w += dl;
    } else {
      *w++ = z[i];
    }
  }
  *w = '\0';
  *out = strtod(tmp, &e);
  free(tmp);
  return 0;
}

