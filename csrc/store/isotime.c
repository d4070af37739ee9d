#include "store/isotime.h"

#define MS_PER_DAY INT64_C(86400000)

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  int64_t era;
  unsigned yoe, doy, doe;
  y -= m <= 2;
  era = (y >= 0 ? y : y - 399) / 400;
  yoe = (unsigned)(y - era * 400);
  doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
  int64_t era;
  unsigned doe, yoe, doy, mp;
  z += 719468;
  era = (z >= 0 ? z : z - 146096) / 146097;
  doe = (unsigned)(z - era * 146097);
  yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static char *put_digits(char *p, unsigned v, int n) {
  int i;
  for (i = n - 1; i >= 0; i--) {
    p[i] = (char)('0' + v % 10);
    v /= 10;
  }
  return p + n;
}

/* The digits of v, at least `min` of them. */
static char *put_number(char *p, uint64_t v, int min) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v || n < min);
  while (n) *p++ = tmp[--n];
  return p;
}

size_t geoservices_iso_from_ms(int64_t ms, char out[GEOSERVICES_ISO_MAX + 1]) {
  int64_t days, rest, y;
  unsigned m, d;
  char *p = out;
  days = ms / MS_PER_DAY;
  rest = ms % MS_PER_DAY;
  if (rest < 0) {
    rest += MS_PER_DAY;
    days--;
  }
  civil_from_days(days, &y, &m, &d);
  if (y < 0) *p++ = '-'; /* before 0000 (1 BC): "-0001" */
  p = put_number(p, y < 0 ? (uint64_t)-y : (uint64_t)y, 4);
  *p++ = '-';
  p = put_digits(p, m, 2);
  *p++ = '-';
  p = put_digits(p, d, 2);
  *p++ = 'T';
  p = put_digits(p, (unsigned)(rest / 3600000), 2);
  *p++ = ':';
  p = put_digits(p, (unsigned)(rest / 60000 % 60), 2);
  *p++ = ':';
  p = put_digits(p, (unsigned)(rest / 1000 % 60), 2);
  *p++ = '.';
  p = put_digits(p, (unsigned)(rest % 1000), 3);
  *p++ = 'Z';
  *p = '\0';
  return (size_t)(p - out);
}

/* n digits at s[*i]; -1 if they are not there. */
static int digits(const char *s, size_t len, size_t *i, int n, unsigned *v) {
  int k;
  *v = 0;
  if (*i + (size_t)n > len) return -1;
  for (k = 0; k < n; k++) {
    char c = s[*i + (size_t)k];
    if (c < '0' || c > '9') return -1;
    *v = *v * 10 + (unsigned)(c - '0');
  }
  *i += (size_t)n;
  return 0;
}

static int at(const char *s, size_t len, size_t i, char c) {
  return i < len && s[i] == c;
}

/* A year: an optional minus sign, then four to nine digits. */
static int year(const char *s, size_t len, size_t *i, int64_t *y) {
  int negative = at(s, len, *i, '-'), n = 0;
  if (negative) (*i)++;
  *y = 0;
  while (*i < len && s[*i] >= '0' && s[*i] <= '9') {
    if (++n > 9) return -1;
    *y = *y * 10 + (s[(*i)++] - '0');
  }
  if (n < 4) return -1;
  if (negative) *y = -*y;
  return 0;
}

static int leap(int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int geoservices_ms_from_iso(const char *s, size_t len, int64_t *ms) {
  static const unsigned mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  size_t i = 0;
  unsigned mo, d, h = 0, mi = 0, sec = 0, frac = 0, oh, om;
  int64_t y, days, base, t, offset = 0;
  if (year(s, len, &i, &y) || !at(s, len, i++, '-') || digits(s, len, &i, 2, &mo) ||
      !at(s, len, i++, '-') || digits(s, len, &i, 2, &d))
    return -1;
  if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || (mo == 2 && d == 29 && !leap(y))) return -1;
  if (i < len && (s[i] == 'T' || s[i] == ' ')) {
    i++;
    if (digits(s, len, &i, 2, &h) || !at(s, len, i++, ':') || digits(s, len, &i, 2, &mi)) return -1;
    if (at(s, len, i, ':')) {
      i++;
      if (digits(s, len, &i, 2, &sec)) return -1;
      if (at(s, len, i, '.')) {
        unsigned scale = 100, v;
        i++;
        if (i >= len || s[i] < '0' || s[i] > '9') return -1;
        while (i < len && s[i] >= '0' && s[i] <= '9') { /* milliseconds; further digits dropped */
          v = (unsigned)(s[i++] - '0');
          frac += v * scale;
          scale /= 10;
        }
      }
    }
    if (h > 23 || mi > 59 || sec > 60) return -1;
    if (at(s, len, i, 'Z')) {
      i++;
    } else if (at(s, len, i, '+') || at(s, len, i, '-')) {
      int sign = s[i++] == '-' ? -1 : 1;
      if (digits(s, len, &i, 2, &oh)) return -1;
      if (at(s, len, i, ':')) i++;
      if (digits(s, len, &i, 2, &om)) return -1;
      offset = sign * ((int64_t)oh * 3600000 + (int64_t)om * 60000);
    }
  }
  if (i != len) return -1;
  days = days_from_civil(y, mo, d);
  /* days * MS_PER_DAY + t, refused when 64-bit milliseconds cannot hold it
   * (a negative day counted from its end, so that INT64_MIN's day fits) */
  t = (int64_t)h * 3600000 + (int64_t)mi * 60000 + (int64_t)sec * 1000 + frac - offset;
  if (days < 0) {
    days++;
    t -= MS_PER_DAY;
  }
  if (days > INT64_MAX / MS_PER_DAY || days < INT64_MIN / MS_PER_DAY) return -1;
  base = days * MS_PER_DAY;
  if ((t > 0 && base > INT64_MAX - t) || (t < 0 && base < INT64_MIN - t)) return -1;
  *ms = base + t;
  return 0;
}
