/* Push JSON parser. One state machine over bytes; strings, numbers and
 * literals are sub-machines whose state survives chunk boundaries. A string
 * that opens and closes inside one chunk without escapes is handed to the
 * handler straight from the chunk (no copy); anything else spills into buf.
 *
 * One file, kept whole (about 830 lines): it is one state machine, and its
 * token scanners (strings and their escapes, numbers, literals) are forced
 * inline into the byte loop (TOKEN_INLINE: measured, the calls alone were a
 * quarter of the parse time), which they could not be from another
 * translation unit without link-time optimization. What is a concept of its
 * own is apart already: exact numbers (jsonnum.c), the record extractor on
 * top (records*.c), the Lua bindings (lua_decode.c, lua_encode.c). */
#include "json/jsonstream.h"

#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json/jsonnum.h"

#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#endif

/* The helpers that scan one token are forced inline into the byte loop:
 * measured, the calls alone were a quarter of the parse time. */
#if defined(__GNUC__)
#define TOKEN_INLINE static inline __attribute__((always_inline))
#else
#define TOKEN_INLINE static
#endif

enum { /* structural states */
  S_VALUE,        /* a value must follow: document start, after ':' or ',' in array */
  S_ARRAY_FIRST,  /* after '[': value or ']' */
  S_OBJECT_FIRST, /* after '{': key or '}' */
  S_KEY,          /* after ',' in object */
  S_COLON,
  S_AFTER,  /* after a value inside a container: ',' or close */
  S_DONE,   /* top-level value complete: only whitespace may follow */
  S_STRING, /* inside a string (key or value) */
  S_NUMBER,
  S_LITERAL,
  S_ERROR
};

enum { E_NONE, E_BACKSLASH, E_HEX, E_LOW_BACKSLASH, E_LOW_U }; /* escape sub-states */

enum { N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP }; /* number */

enum { K_OBJECT, K_ARRAY };

enum { L_TRUE, L_FALSE, L_NULL };

/* Byte classes inside strings. */
enum { C_PLAIN, C_QUOTE, C_BSLASH, C_CTRL, C_BAD, C_U2, C_E0, C_E1, C_ED, C_F0, C_F1, C_F4 };

static const unsigned char str_class[256] = {
  3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,
  0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
  0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,2,0,0,0,
  0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
  4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,
  4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,
  4,4,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,
  6,7,7,7,7,7,7,7,7,7,7,7,7,8,7,7,9,10,10,10,11,4,4,4,4,4,4,4,4,4,4,4,
};

struct geoservices_jsonstream {
  geoservices_json_handlers h;
  void *ctx;
  size_t max_depth, max_value;
  size_t base;    /* absolute offset of the current chunk's first byte */
  size_t err_off;
  int state, err;
  unsigned char *stack; /* K_OBJECT/K_ARRAY per open container */
  size_t depth, stack_cap;
  geoservices_buf buf; /* spilled string/number bytes */
  /* string */
  int in_key, spill, esc, hexn, u8need;
  unsigned cp, hi; /* \u accumulator, pending high surrogate */
  unsigned char u8lo, u8hi; /* allowed range of the next continuation byte */
  /* number */
  int nstate;
  /* literal */
  int lit, litpos;
  char msg[96];
};

static const char *const lit_text[] = {"true", "false", "null"};
static const int lit_len[] = {4, 5, 4};

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static int fail(geoservices_jsonstream *p, int code, size_t off, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->msg, sizeof p->msg, fmt, ap);
  va_end(ap);
  p->err = code;
  p->err_off = off;
  p->state = S_ERROR;
  return code;
}

static int fail_oom(geoservices_jsonstream *p, size_t off) {
  return fail(p, GEOSERVICES_JSON_ENOMEM, off, "out of memory");
}

static int fail_abort(geoservices_jsonstream *p, size_t off) {
  return fail(p, GEOSERVICES_JSON_EABORT, off, "aborted by handler");
}

static int fail_big(geoservices_jsonstream *p, size_t off) {
  return fail(p, GEOSERVICES_JSON_ELIMIT, off, "value too large");
}

/* "'x'" for printable bytes, "byte 0xNN" otherwise. */
static void describe(char *out, size_t n, unsigned c) {
  if (c > 0x20 && c < 0x7f)
    snprintf(out, n, "'%c'", (int)c);
  else
    snprintf(out, n, "byte 0x%02X", c);
}

static int fail_unexpected(geoservices_jsonstream *p, unsigned c, size_t off) {
  char what[16];
  const char *expected = "value";
  if (p->state == S_DONE) return fail(p, GEOSERVICES_JSON_ESYNTAX, off, "trailing garbage after JSON value");
  describe(what, sizeof what, c);
  switch (p->state) {
  case S_ARRAY_FIRST: expected = "value or ']'"; break;
  case S_OBJECT_FIRST: expected = "string key or '}'"; break;
  case S_KEY: expected = "string key"; break;
  case S_COLON: expected = "':'"; break;
  case S_AFTER: expected = p->stack[p->depth - 1] == K_ARRAY ? "',' or ']'" : "',' or '}'"; break;
  default: break;
  }
  return fail(p, GEOSERVICES_JSON_ESYNTAX, off, "expected %s, found %s", expected, what);
}

static void after_value(geoservices_jsonstream *p) {
  p->state = p->depth ? S_AFTER : S_DONE;
}

geoservices_jsonstream *geoservices_jsonstream_new(const geoservices_json_handlers *h, void *ctx,
                                                   const geoservices_json_limits *limits) {
  geoservices_jsonstream *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  if (h) p->h = *h;
  p->ctx = ctx;
  p->max_depth = limits && limits->max_depth ? limits->max_depth : GEOSERVICES_JSON_DEFAULT_DEPTH;
  p->max_value = limits && limits->max_value_bytes ? limits->max_value_bytes
                                                   : GEOSERVICES_JSON_DEFAULT_VALUE_BYTES;
  geoservices_buf_init(&p->buf, 0); /* the value limit is enforced here, with offsets */
  geoservices_jsonstream_reset(p);
  return p;
}

void geoservices_jsonstream_reset(geoservices_jsonstream *p) {
  p->base = p->err_off = 0;
  p->state = S_VALUE;
  p->err = 0;
  p->depth = 0;
  geoservices_buf_reset(&p->buf);
  p->in_key = p->spill = p->esc = p->hexn = p->u8need = 0;
  p->cp = p->hi = 0;
  p->nstate = N_START;
  p->lit = p->litpos = 0;
  p->msg[0] = '\0';
}

void geoservices_jsonstream_free(geoservices_jsonstream *p) {
  if (!p) return;
  geoservices_buf_free(&p->buf);
  free(p->stack);
  free(p);
}

const char *geoservices_jsonstream_error(const geoservices_jsonstream *p) { return p->msg; }

size_t geoservices_jsonstream_offset(const geoservices_jsonstream *p) {
  return p->err ? p->err_off : p->base;
}

static int push(geoservices_jsonstream *p, int kind, size_t off) {
  if (p->depth >= p->max_depth)
    return fail(p, GEOSERVICES_JSON_ELIMIT, off, "maximum depth exceeded");
  if (p->depth == p->stack_cap) {
    size_t cap = p->stack_cap ? p->stack_cap * 2 : 32;
    unsigned char *st;
    if (cap > p->max_depth) cap = p->max_depth;
    st = realloc(p->stack, cap);
    if (!st) return fail_oom(p, off);
    p->stack = st;
    p->stack_cap = cap;
  }
  p->stack[p->depth++] = (unsigned char)kind;
  return 0;
}

static int hexval(unsigned c) {
  if (c - '0' < 10u) return (int)(c - '0');
  c |= 0x20;
  if (c - 'a' < 6u) return (int)(c - 'a' + 10);
  return -1;
}

static size_t utf8_encode(unsigned cp, char *o) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* The byte a one-character escape stands for (after the backslash), or -1. */
static int simple_escape(unsigned c) {
  switch (c) {
  case '"': return '"';
  case '\\': return '\\';
  case '/': return '/';
  case 'b': return '\b';
  case 'f': return '\f';
  case 'n': return '\n';
  case 'r': return '\r';
  case 't': return '\t';
  default: return -1;
  }
}

/* Four hex digits at s, or -1. */
static long hex4(const unsigned char *s) {
  int a = hexval(s[0]), b = hexval(s[1]), c = hexval(s[2]), d = hexval(s[3]);
  if ((a | b | c | d) < 0) return -1;
  return (long)a << 12 | (long)b << 8 | (long)c << 4 | (long)d;
}

/* A whole, valid escape at s[i..end) (s[i] is the backslash), decoded into
 * out (*outn bytes). Returns the bytes it spans, or 0 when it is incomplete
 * in this chunk or invalid: escape_byte then takes it byte by byte and
 * reports any error at its own offset. */
static size_t escape_sequence(const unsigned char *s, size_t i, size_t end, char *out, size_t *outn) {
  long cp, lo;
  int v;
  if (end - i < 2) return 0;
  if (s[i + 1] != 'u') {
    v = simple_escape(s[i + 1]);
    if (v < 0) return 0;
    out[0] = (char)v;
    *outn = 1;
    return 2;
  }
  if (end - i < 6 || (cp = hex4(s + i + 2)) < 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) return 0;
  if (cp < 0xD800 || cp > 0xDBFF) {
    *outn = utf8_encode((unsigned)cp, out);
    return 6;
  }
  if (end - i < 12 || s[i + 6] != '\\' || s[i + 7] != 'u' || (lo = hex4(s + i + 8)) < 0xDC00 || lo > 0xDFFF)
    return 0;
  *outn = utf8_encode((unsigned)(0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)), out);
  return 12;
}

/* One byte of an escape sequence (after the backslash). */
static int escape_byte(geoservices_jsonstream *p, unsigned c, size_t off) {
  char out[4];
  size_t n = 1;
  int v;
  switch (p->esc) {
  case E_BACKSLASH:
    if (c == 'u') {
      p->esc = E_HEX;
      p->hexn = 0;
      p->cp = 0;
      return 0;
    }
    v = simple_escape(c);
    if (v < 0) {
      if (c > 0x20 && c < 0x7f)
        return fail(p, GEOSERVICES_JSON_ESYNTAX, off, "invalid escape \\%c", (int)c);
      return fail(p, GEOSERVICES_JSON_ESYNTAX, off, "invalid escape byte 0x%02X", c);
    }
    out[0] = (char)v;
    break;
  case E_HEX:
    v = hexval(c);
    if (v < 0) return fail(p, GEOSERVICES_JSON_ESYNTAX, off, "invalid \\u escape");
    p->cp = p->cp << 4 | (unsigned)v;
    if (++p->hexn < 4) return 0;
    if (p->hi) {
      if (p->cp < 0xDC00 || p->cp > 0xDFFF)
        return fail(p, GEOSERVICES_JSON_ESYNTAX, off, "lone surrogate");
      p->cp = 0x10000 + ((p->hi - 0xD800) << 10) + (p->cp - 0xDC00);
      p->hi = 0;
    } else if (p->cp >= 0xD800 && p->cp <= 0xDBFF) {
      p->hi = p->cp;
      p->esc = E_LOW_BACKSLASH;
      return 0;
    } else if (p->cp >= 0xDC00 && p->cp <= 0xDFFF) {
      return fail(p, GEOSERVICES_JSON_ESYNTAX, off, "lone surrogate");
    }
    n = utf8_encode(p->cp, out);
    break;
  case E_LOW_BACKSLASH:
    if (c != '\\') return fail(p, GEOSERVICES_JSON_ESYNTAX, off, "lone surrogate");
    p->esc = E_LOW_U;
    return 0;
  default: /* E_LOW_U */
    if (c != 'u') return fail(p, GEOSERVICES_JSON_ESYNTAX, off, "lone surrogate");
    p->esc = E_HEX;
    p->hexn = 0;
    p->cp = 0;
    return 0;
  }
  p->esc = E_NONE;
  if (n > p->max_value - p->buf.len) return fail_big(p, off);
  if (geoservices_buf_append(&p->buf, out, n)) return fail_oom(p, off);
  return 0;
}

/* Whether any of the 8 bytes in v needs a look in a string: a quote, a
 * backslash, a byte below 0x20 or one from 0x80 (UTF-8, validated byte by
 * byte). Exact SWAR tests: no byte is missed; a set high bit can be a false
 * alarm only in a byte above a real one, so the lowest set bit is exact. */
#define BYTES(c) (0x0101010101010101ULL * (uint64_t)(c))
static uint64_t special_bytes(uint64_t v) {
  uint64_t quote = v ^ BYTES('"'), backslash = v ^ BYTES('\\');
  uint64_t zero_quote = (quote - BYTES(1)) & ~quote;
  uint64_t zero_backslash = (backslash - BYTES(1)) & ~backslash;
  uint64_t below_space = (v - BYTES(0x20)) & ~v;
  return (zero_quote | zero_backslash | below_space | v) & BYTES(0x80);
}

/* The index of the first byte in s[i..lim) that is not plain ASCII string
 * content (lim when there is none): sixteen bytes at a time with SSE2, then
 * eight at a time, then byte by byte. */
TOKEN_INLINE size_t plain_run(const unsigned char *s, size_t i, size_t lim) {
#if defined(__SSE2__) && defined(__GNUC__)
  /* sixteen at a time where SSE2 is (every x86-64): a byte below 0x20 or
   * from 0x80 is below 0x20 as a signed byte */
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
  while (i + 16 <= lim) {
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
    __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                   _mm_cmplt_epi8(v, space));
    unsigned mask = (unsigned)_mm_movemask_epi8(special);
    if (mask) return i + (size_t)__builtin_ctz(mask);
    i += 16;
  }
#endif
  while (i + 8 <= lim) {
    uint64_t v, special;
    memcpy(&v, s + i, 8);
    special = special_bytes(v);
    if (special) {
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
      return i + (size_t)(__builtin_ctzll(special) >> 3);
#else
      break;
#endif
    }
    i += 8;
  }
  while (i < lim && str_class[s[i]] == C_PLAIN) i++;
  return i;
}

/* A string ended at off: a key is followed by ':', a value by ',' or a close. */
static int end_string(geoservices_jsonstream *p, int key, const char *str, size_t n, size_t off) {
  if (key) {
    p->state = S_COLON;
    return p->h.on_key && p->h.on_key(p->ctx, str, n) ? fail_abort(p, off) : 0;
  }
  after_value(p);
  return p->h.on_string && p->h.on_string(p->ctx, str, n) ? fail_abort(p, off) : 0;
}

/* Continuation bytes a UTF-8 lead byte needs, and the range allowed for
 * the first of them (which excludes overlongs, surrogates and > U+10FFFF);
 * indexed by str_class - C_U2. */
typedef struct { unsigned char need, lo, hi; } utf8_lead;
static const utf8_lead utf8_leads[] = {
  {1, 0x80, 0xBF}, /* C_U2 */
  {2, 0xA0, 0xBF}, /* C_E0 */
  {2, 0x80, 0xBF}, /* C_E1 */
  {2, 0x80, 0x9F}, /* C_ED */
  {3, 0x90, 0xBF}, /* C_F0 */
  {3, 0x80, 0xBF}, /* C_F1 */
  {3, 0x80, 0x8F}, /* C_F4 */
};

/* The length of the valid UTF-8 sequence starting at lead byte s[i] when it
 * lies whole in s[..end), else 0 (the byte machine then decides). */
static size_t utf8_sequence(const unsigned char *s, size_t i, size_t end) {
  const utf8_lead *lead = &utf8_leads[str_class[s[i]] - C_U2];
  size_t k;
  if (end - i <= lead->need || s[i + 1] < lead->lo || s[i + 1] > lead->hi) return 0;
  for (k = 2; k <= lead->need; k++)
    if ((s[i + k] & 0xC0) != 0x80) return 0;
  return (size_t)lead->need + 1;
}

/* Consumes string bytes from s[*pi..end); s[seg..*pi) are plain bytes of
 * the string already looked at. Invariant between steps: the bytes decoded
 * so far (buf.len + i - seg) never exceed max_value, so the first byte over
 * the limit is reported at the same offset for any chunking. */
static int string_part(geoservices_jsonstream *p, const unsigned char *s, size_t seg, size_t *pi,
                       size_t end) {
  size_t i = *pi, count, lim;
  const char *str;
  size_t n, off;
  unsigned c;
  int r;
  for (;;) {
    if (p->esc) {
      if (i == end) break;
      r = escape_byte(p, s[i], p->base + i);
      if (r) return r;
      seg = ++i;
      continue;
    }
    count = p->buf.len + (i - seg);
    if (count > p->max_value) return fail_big(p, p->base + seg + (p->max_value - p->buf.len));
    if (!p->u8need) {
      size_t budget = p->max_value - count;
      lim = end - i > budget ? i + budget + 1 : end;
      i = plain_run(s, i, lim);
      count = p->buf.len + (i - seg);
      if (count > p->max_value) return fail_big(p, p->base + seg + (p->max_value - p->buf.len));
    }
    if (i == end) break;
    c = s[i];
    if (p->u8need) {
      if (c < p->u8lo || c > p->u8hi)
        return fail(p, GEOSERVICES_JSON_ESYNTAX, p->base + i, "invalid UTF-8");
      p->u8lo = 0x80;
      p->u8hi = 0xBF;
      p->u8need--;
      i++;
      continue;
    }
    switch (str_class[c]) {
    case C_QUOTE:
      off = p->base + i;
      if (p->spill) {
        if (i > seg && geoservices_buf_append(&p->buf, s + seg, i - seg)) return fail_oom(p, off);
        str = p->buf.data ? p->buf.data : "";
        n = p->buf.len;
      } else {
        str = (const char *)s + seg;
        n = i - seg;
      }
      *pi = i + 1;
      return end_string(p, p->in_key, str, n, off);
    case C_BSLASH: {
      char out[4];
      size_t outn = 0, span;
      if (i > seg && geoservices_buf_append(&p->buf, s + seg, i - seg))
        return fail_oom(p, p->base + i);
      p->spill = 1;
      span = escape_sequence(s, i, end, out, &outn);
      if (span && outn <= p->max_value - p->buf.len) { /* whole escape here: no byte-wise states */
        if (geoservices_buf_append(&p->buf, out, outn)) return fail_oom(p, p->base + i);
        seg = i += span;
        continue;
      }
      p->esc = E_BACKSLASH;
      seg = ++i;
      continue;
    }
    case C_CTRL:
      return fail(p, GEOSERVICES_JSON_ESYNTAX, p->base + i,
                  "unescaped control character 0x%02X in string", c);
    case C_BAD: return fail(p, GEOSERVICES_JSON_ESYNTAX, p->base + i, "invalid UTF-8");
    default: { /* a lead byte: the whole sequence at once when it is here and valid */
      const utf8_lead *lead = &utf8_leads[str_class[c] - C_U2];
      size_t span = utf8_sequence(s, i, end);
      if (span) {
        i += span;
        continue;
      }
      p->u8need = lead->need;
      p->u8lo = lead->lo;
      p->u8hi = lead->hi;
      break;
    }
    }
    i++;
  }
  /* chunk ended inside the string: keep what we have */
  if (i > seg && geoservices_buf_append(&p->buf, s + seg, i - seg)) return fail_oom(p, p->base + i);
  p->spill = 1;
  *pi = i;
  return 0;
}

static int deliver_integer(geoservices_jsonstream *p, long long v, size_t off) {
  return p->h.on_integer && p->h.on_integer(p->ctx, v) ? fail_abort(p, off) : 0;
}

static int deliver_double(geoservices_jsonstream *p, double v, size_t off) {
  return p->h.on_double && p->h.on_double(p->ctx, v) ? fail_abort(p, off) : 0;
}

static int emit_number(geoservices_jsonstream *p, const char *d, size_t n, size_t off) {
  int isfloat = p->nstate == N_FRAC || p->nstate == N_EXP;
  long long iv;
  double dv;
  char tmp[64];
  int r;
  after_value(p);
  if (!isfloat && geoservices_json_parse_int(d, n, &iv)) return deliver_integer(p, iv, off);
  if (geoservices_json_fast_double(d, n, &dv)) return deliver_double(p, dv, off); /* needs no terminator: no copy */
  if (!p->spill) { /* strtod needs a terminator */
    if (n < sizeof tmp) {
      memcpy(tmp, d, n);
      tmp[n] = '\0';
      d = tmp;
    } else {
      if (geoservices_buf_append(&p->buf, d, n)) return fail_oom(p, off);
      d = p->buf.data;
    }
  }
  r = geoservices_json_parse_double(d, n, &dv);
  if (r) return fail_oom(p, off);
  return deliver_double(p, dv, off);
}

static int number_part(geoservices_jsonstream *p, const unsigned char *s, size_t *pi, size_t end) {
  size_t i = *pi, seg = i;
  int ns = p->nstate;
  for (; i < end; i++) {
    unsigned c = s[i];
    int digit = c - '0' < 10u;
    switch (ns) {
    case N_START: ns = c == '-' ? N_MINUS : c == '0' ? N_ZERO : N_INT; break;
    case N_MINUS:
      if (c == '0') ns = N_ZERO;
      else if (digit) ns = N_INT;
      else goto bad;
      break;
    case N_ZERO:
      if (c == '.') ns = N_DOT;
      else if (c == 'e' || c == 'E') ns = N_E;
      else if (digit) goto bad; /* leading zero */
      else goto done;
      break;
    case N_INT:
      if (digit) {
        while (i + 1 < end && (unsigned)(s[i + 1] - '0') < 10u) i++; /* the rest of the run at once */
        break;
      }
      if (c == '.') ns = N_DOT;
      else if (c == 'e' || c == 'E') ns = N_E;
      else goto done;
      break;
    case N_DOT:
      if (!digit) goto bad;
      ns = N_FRAC;
      break;
    case N_FRAC:
      if (digit) {
        while (i + 1 < end && (unsigned)(s[i + 1] - '0') < 10u) i++;
        break;
      }
      if (c == 'e' || c == 'E') ns = N_E;
      else goto done;
      break;
    case N_E:
      if (c == '+' || c == '-') ns = N_ESIGN;
      else if (digit) ns = N_EXP;
      else goto bad;
      break;
    case N_ESIGN:
      if (!digit) goto bad;
      ns = N_EXP;
      break;
    default: /* N_EXP */
      if (!digit) goto done;
      break;
    }
    if (p->buf.len + (i - seg) >= p->max_value) return fail_big(p, p->base + i);
  }
  if (i > seg && geoservices_buf_append(&p->buf, s + seg, i - seg)) return fail_oom(p, p->base + i);
  p->spill = 1;
  p->nstate = ns;
  *pi = i;
  return 0;
bad:
  return fail(p, GEOSERVICES_JSON_ESYNTAX, p->base + i, "invalid number");
done:
  p->nstate = ns;
  *pi = i;
  if (p->spill) {
    if (i > seg && geoservices_buf_append(&p->buf, s + seg, i - seg)) return fail_oom(p, p->base + i);
    return emit_number(p, p->buf.data, p->buf.len, p->base + i);
  }
  return emit_number(p, (const char *)s + seg, i - seg, p->base + i);
}

static int emit_literal(geoservices_jsonstream *p, size_t off) {
  int r = 0;
  after_value(p);
  switch (p->lit) {
  case L_TRUE: r = p->h.on_boolean ? p->h.on_boolean(p->ctx, 1) : 0; break;
  case L_FALSE: r = p->h.on_boolean ? p->h.on_boolean(p->ctx, 0) : 0; break;
  default: r = p->h.on_null ? p->h.on_null(p->ctx) : 0; break;
  }
  return r ? fail_abort(p, off) : 0;
}

static int literal_part(geoservices_jsonstream *p, const unsigned char *s, size_t *pi, size_t end) {
  size_t i = *pi;
  const char *t = lit_text[p->lit];
  int n = lit_len[p->lit];
  while (p->litpos < n) {
    if (i == end) {
      *pi = i;
      return 0;
    }
    if (s[i] != (unsigned char)t[p->litpos])
      return fail(p, GEOSERVICES_JSON_ESYNTAX, p->base + i, "invalid literal");
    i++;
    p->litpos++;
  }
  *pi = i;
  return emit_literal(p, p->base + i - 1);
}

static int close_container(geoservices_jsonstream *p, size_t off) {
  int kind = p->stack[--p->depth];
  after_value(p);
  if (kind == K_ARRAY)
    return p->h.on_end_array && p->h.on_end_array(p->ctx) ? fail_abort(p, off) : 0;
  return p->h.on_end_object && p->h.on_end_object(p->ctx) ? fail_abort(p, off) : 0;
}

static void start_string(geoservices_jsonstream *p, int key) {
  p->state = S_STRING;
  p->in_key = key;
  p->spill = p->esc = p->u8need = 0;
  p->hi = 0;
  geoservices_buf_reset(&p->buf);
}

/* Takes the ',' or ':' that directly follows a token in the same step: a
 * shortcut through the structural machine for compact JSON. */
TOKEN_INLINE void take_separator(geoservices_jsonstream *p, const unsigned char *s, size_t *pi, size_t end) {
  size_t i = *pi;
  if (i == end) return;
  if (s[i] == ',' && p->state == S_AFTER) {
    p->state = p->stack[p->depth - 1] == K_ARRAY ? S_VALUE : S_KEY;
    *pi = i + 1;
  } else if (s[i] == ':' && p->state == S_COLON) {
    p->state = S_VALUE;
    *pi = i + 1;
  }
}

/* A string that closes inside this chunk with only plain ASCII in it goes to
 * its handler straight away; anything else continues in string_part from
 * the first byte that needs a look, without scanning the plain part twice. */
TOKEN_INLINE int string_token(geoservices_jsonstream *p, const unsigned char *s, size_t *pi, size_t end, int key) {
  size_t start = *pi + 1, i = plain_run(s, start, end);
  size_t off = p->base + i, n = i - start;
  if (i < end && s[i] == '"' && n <= p->max_value) {
    int r = end_string(p, key, (const char *)s + start, n, off);
    *pi = i + 1;
    if (!r) take_separator(p, s, pi, end);
    return r;
  }
  start_string(p, key);
  *pi = i;
  return string_part(p, s, start, pi, end);
}

/* A number whose end lies inside this chunk is converted while it is
 * scanned. Returns 1 when it was handled (result in *rc), 0 when the byte
 * machine (number_part, emit_number) must take it: a number running to the
 * chunk's end, more than 19 significant digits, or an invalid token, whose
 * error that machine reports with its offset. */
TOKEN_INLINE int number_token(geoservices_jsonstream *p, const unsigned char *s, size_t *pi, size_t end, int *rc) {
  geoservices_json_number np;
  size_t i = *pi, off;
  double dv = 0;
  if (!geoservices_json_scan_number(s, &i, end, &np) || i == end || (unsigned)(s[i] - '0') < 10u || i - *pi > p->max_value)
    return 0;
  if (np.is_float ? !geoservices_json_parts_double(&np, &dv) : np.digits > 18) return 0; /* > 18 digits: parse_int decides */
  off = p->base + i;
  *pi = i;
  after_value(p);
  *rc = np.is_float ? deliver_double(p, dv, off)
                    : deliver_integer(p, np.neg ? -(long long)np.w : (long long)np.w, off);
  if (!*rc) take_separator(p, s, pi, end);
  return 1;
}

/* Handles the non-whitespace byte s[*pi] outside any token. */
static int structural(geoservices_jsonstream *p, const unsigned char *s, size_t *pi, size_t end) {
  size_t i = *pi, off = p->base + i;
  unsigned c = s[i];
  int r;
  switch (p->state) {
  case S_ARRAY_FIRST:
    if (c == ']') {
      *pi = i + 1;
      return close_container(p, off);
    }
    /* fallthrough */
  case S_VALUE:
    switch (c) {
    case '{':
      if ((r = push(p, K_OBJECT, off))) return r;
      p->state = S_OBJECT_FIRST;
      *pi = i + 1;
      return p->h.on_start_object && p->h.on_start_object(p->ctx) ? fail_abort(p, off) : 0;
    case '[':
      if ((r = push(p, K_ARRAY, off))) return r;
      p->state = S_ARRAY_FIRST;
      *pi = i + 1;
      return p->h.on_start_array && p->h.on_start_array(p->ctx) ? fail_abort(p, off) : 0;
    case '"': return string_token(p, s, pi, end, 0);
    case 't': case 'f': case 'n':
      p->state = S_LITERAL;
      p->lit = c == 't' ? L_TRUE : c == 'f' ? L_FALSE : L_NULL;
      p->litpos = 0;
      return 0; /* literal_part consumes it */
    case '-': case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
      if (number_token(p, s, pi, end, &r)) return r;
      p->state = S_NUMBER;
      p->nstate = N_START;
      p->spill = 0;
      geoservices_buf_reset(&p->buf);
      return 0; /* number_part consumes it */
    default: return fail_unexpected(p, c, off);
    }
  case S_OBJECT_FIRST:
    if (c == '}') {
      *pi = i + 1;
      return close_container(p, off);
    }
    /* fallthrough */
  case S_KEY:
    if (c != '"') return fail_unexpected(p, c, off);
    return string_token(p, s, pi, end, 1);
  case S_COLON:
    if (c != ':') return fail_unexpected(p, c, off);
    p->state = S_VALUE;
    *pi = i + 1;
    return 0;
  case S_AFTER: {
    int arr = p->stack[p->depth - 1] == K_ARRAY;
    if (c == ',') {
      p->state = arr ? S_VALUE : S_KEY;
      *pi = i + 1;
      return 0;
    }
    if (c == (arr ? ']' : '}')) {
      *pi = i + 1;
      return close_container(p, off);
    }
    return fail_unexpected(p, c, off);
  }
  default: /* S_DONE */
    return fail_unexpected(p, c, off);
  }
}

int geoservices_jsonstream_feed(geoservices_jsonstream *p, const char *chunk, size_t len) {
  const unsigned char *s = (const unsigned char *)chunk;
  size_t i = 0;
  int r;
  if (p->err) return p->err;
  while (i < len) {
    switch (p->state) {
    case S_STRING: r = string_part(p, s, i, &i, len); break;
    case S_NUMBER: r = number_part(p, s, &i, len); break;
    case S_LITERAL: r = literal_part(p, s, &i, len); break;
    default: {
      unsigned c = s[i];
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        i++;
        continue;
      }
      r = structural(p, s, &i, len);
      break;
    }
    }
    if (r) return r;
  }
  p->base += len;
  return 0;
}

int geoservices_jsonstream_finish(geoservices_jsonstream *p) {
  int r;
  if (p->err) return p->err;
  if (p->state == S_NUMBER) {
    switch (p->nstate) {
    case N_ZERO: case N_INT: case N_FRAC: case N_EXP:
      r = emit_number(p, p->buf.data, p->buf.len, p->base);
      if (r) return r;
      break;
    default: break;
    }
  }
  if (p->state == S_DONE) return 0;
  if (p->state == S_VALUE && p->depth == 0)
    return fail(p, GEOSERVICES_JSON_EINCOMPLETE, p->base, "empty input");
  return fail(p, GEOSERVICES_JSON_EINCOMPLETE, p->base, "unexpected end of input");
}
