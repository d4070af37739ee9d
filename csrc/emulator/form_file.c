/* httpd.decode_form_file(path [, block=64 KiB]) -> fields (name -> value) |
 * nil, "malformed percent-escape in form field" | nil, msg, "file": an
 * application/x-www-form-urlencoded body read from a file in blocks (a body
 * the server spooled to disk, emulator/httpd.c), each value decoded into
 * one buffer and pushed once (a large value costs twice its size at the
 * moment it becomes a Lua string, not a copy per step); the same rules as
 * the emulator's decoder of strings (lua/geoservices/emulator/forms.lua).
 * A decoder of bytes, apart from the server: it knows no request. */
#include "emulator/form_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "buf.h"
#include "class.h"

#define FORM_MT "geoservices.HttpFormDecoder"

static int file_failure(lua_State *L, const char *path, int err) {
  lua_pushnil(L);
  lua_pushfstring(L, "%s: %s", path, strerror(err));
  lua_pushliteral(L, "file");
  return 3;
}

typedef struct form_decoder {
  FILE *f;
  char *block;
  geoservices_buf name, value;
} form_decoder;

static void form_decoder_release(form_decoder *d) {
  if (d->f) fclose(d->f);
  d->f = NULL;
  free(d->block);
  d->block = NULL;
  geoservices_buf_free(&d->name);
  geoservices_buf_free(&d->value);
}

static int l_form_decoder_gc(lua_State *L) {
  form_decoder_release(luaL_checkudata(L, 1, FORM_MT));
  return 0;
}

static int hex_value(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Sets fields[name] = value (table at index t) and empties both buffers; a
 * large value buffer is freed rather than kept for the next pair. */
static void form_pair_done(lua_State *L, int t, form_decoder *d) {
  lua_pushlstring(L, d->name.data ? d->name.data : "", d->name.len);
  lua_pushlstring(L, d->value.data ? d->value.data : "", d->value.len);
  lua_rawset(L, t);
  geoservices_buf_reset(&d->name);
  if (d->value.cap > 1024 * 1024) geoservices_buf_free(&d->value);
  else geoservices_buf_reset(&d->value);
}

static int l_decode_form_file(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lua_Integer block = luaL_optinteger(L, 2, 64 * 1024);
  form_decoder *d;
  geoservices_buf *cur;
  size_t n;
  int t, esc = 0, hi = 0, any = 0, in_value = 0, bad = 0, oom = 0;
  luaL_argcheck(L, block > 0 && block <= 16 * 1024 * 1024, 2, "block size out of range");
  d = lua_newuserdatauv(L, sizeof *d, 0);
  memset(d, 0, sizeof *d); /* nothing held until the metatable is set */
  geoservices_buf_init(&d->name, 0);
  geoservices_buf_init(&d->value, 0);
  luaL_setmetatable(L, FORM_MT);
  d->block = malloc((size_t)block);
  if (!d->block) return luaL_error(L, "decode_form_file: not enough memory");
  d->f = fopen(path, "rb");
  if (!d->f) return file_failure(L, path, errno);
  lua_newtable(L);
  t = lua_gettop(L);
  cur = &d->name;
  while (!bad && !oom && (n = fread(d->block, 1, (size_t)block, d->f)) > 0) {
    const unsigned char *in = (const unsigned char *)d->block;
    size_t i = 0;
    while (i < n) {
      unsigned char c = in[i];
      if (esc) {
        int v = hex_value(c);
        if (v < 0) {
          bad = 1;
          break;
        }
        if (esc == 1) {
          hi = v;
          esc = 2;
        } else {
          esc = 0;
          if (geoservices_buf_putc(cur, (char)(hi * 16 + v))) oom = 1;
        }
        i++;
      } else if (c == '&') {
        if (any) form_pair_done(L, t, d);
        any = in_value = 0;
        cur = &d->name;
        i++;
      } else if (c == '=' && !in_value) {
        any = in_value = 1;
        cur = &d->value;
        i++;
      } else if (c == '%') {
        any = esc = 1;
        i++;
      } else if (c == '+') {
        any = 1;
        if (geoservices_buf_putc(cur, ' ')) oom = 1;
        i++;
      } else { /* a run of plain bytes, appended at once */
        size_t j = i + 1;
        while (j < n && in[j] != '&' && in[j] != '%' && in[j] != '+' && (in_value || in[j] != '='))
          j++;
        any = 1;
        if (geoservices_buf_append(cur, in + i, j - i)) oom = 1;
        i = j;
      }
      if (oom) break;
    }
  }
  if (!bad && !oom && ferror(d->f)) {
    int err = errno;
    form_decoder_release(d);
    return file_failure(L, path, err ? err : EIO);
  }
  if (esc) bad = 1; /* an escape cut by the end of the body */
  if (oom) {
    form_decoder_release(d);
    return luaL_error(L, "decode_form_file: not enough memory");
  }
  if (bad) {
    form_decoder_release(d);
    lua_pushnil(L);
    lua_pushliteral(L, "malformed percent-escape in form field");
    return 2;
  }
  if (any) form_pair_done(L, t, d);
  form_decoder_release(d);
  return 1;
}

static const luaL_Reg form_meta[] = {{"__gc", l_form_decoder_gc}, {"__close", l_form_decoder_gc}, {NULL, NULL}};

void geoservices_open_form_file(lua_State *L) {
  geoservices_new_class(L, FORM_MT, NULL, form_meta);
  lua_pushcfunction(L, l_decode_form_file);
  lua_setfield(L, -2, "decode_form_file");
}
