/* What request:result() gives: the transfer's failure in words and a code,
 * or the answer (status, headers parsed on first use, the body or its JSON
 * decoded where it lies, the records' offsets). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "class.h"
#include "json/lua_decode.h"
#include "net/request_internal.h"

/* ---- results ----------------------------------------------------------- */

static const char *error_code(const geoservices_request *req) {
  switch (req->result) {
    case CURLE_COULDNT_CONNECT: return "couldnt_connect";
    case CURLE_OPERATION_TIMEDOUT: return "timeout";
    case CURLE_COULDNT_RESOLVE_HOST: return "resolve";
    case CURLE_COULDNT_RESOLVE_PROXY: return "resolve_proxy";
    case CURLE_GOT_NOTHING: return "empty_reply";
    case CURLE_SEND_ERROR: return "send";
    case CURLE_RECV_ERROR: return "recv";
    case CURLE_PARTIAL_FILE: return "partial";
    case CURLE_PEER_FAILED_VERIFICATION: return "tls_verify";
    case CURLE_SSL_CONNECT_ERROR: return "tls";
    case CURLE_SSL_CACERT_BADFILE: return "tls_ca_file";
    case CURLE_UNSUPPORTED_PROTOCOL: return "unsupported_protocol";
    case CURLE_URL_MALFORMAT: return "bad_url";
    case CURLE_FILE_COULDNT_READ_FILE:
    case CURLE_READ_ERROR: return "read";
    case CURLE_ABORTED_BY_CALLBACK: return "aborted";
    case CURLE_BAD_CONTENT_ENCODING: return "bad_encoding";
    case CURLE_WRITE_ERROR: return req->too_large ? "too_large" : "write";
    default: return NULL;
  }
}

static void push_headers(lua_State *L, const char *data, size_t len) {
  const char *p = data, *end = data + len, *q;
  int lines = 0;
  for (q = p; q && q < end && (q = memchr(q, '\n', (size_t)(end - q))) != NULL; q++) lines++;
  lua_createtable(L, 0, lines > 1 ? lines - 1 : 0); /* less the status line */
  while (p && p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    const char *line_end = eol ? eol : end, *colon;
    const char *value, *value_end = line_end;
    colon = memchr(p, ':', (size_t)(line_end - p));
    if (colon && colon > p) {
      char name[64];
      size_t i, n = (size_t)(colon - p);
      if (n <= sizeof name) { /* lower-cased on the stack: no Lua buffer for a usual name */
        for (i = 0; i < n; i++) name[i] = (char)tolower((unsigned char)p[i]);
        lua_pushlstring(L, name, n);
      } else {
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        for (i = 0; i < n; i++) luaL_addchar(&b, (char)tolower((unsigned char)p[i]));
        luaL_pushresult(&b);
      }
      value = colon + 1;
      while (value < value_end && (*value == ' ' || *value == '\t')) value++;
      while (value_end > value && (value_end[-1] == '\r' || value_end[-1] == ' ')) value_end--;
      lua_pushvalue(L, -1);
      if (lua_rawget(L, -3) == LUA_TSTRING) { /* repeated header: join as HTTP allows */
        lua_pushliteral(L, ", ");
        lua_pushlstring(L, value, (size_t)(value_end - value));
        lua_concat(L, 3);
      } else {
        lua_pop(L, 1);
        lua_pushlstring(L, value, (size_t)(value_end - value));
      }
      lua_rawset(L, -3);
    }
    p = line_end + 1;
  }
}

/* The lean result of the json option keeps the response's header block as
 * a string under this private key; its metatable (under lean_mt_key in the
 * registry) makes it the `headers` table on first use. */
static const char header_block_key = 0;
static const char lean_mt_key = 0;

/* __index of a lean result: `headers`, parsed from the kept block once. */
static int l_lean_index(lua_State *L) {
  size_t len;
  const char *block;
  if (lua_type(L, 2) != LUA_TSTRING || strcmp(lua_tostring(L, 2), "headers") != 0) return 0;
  if (lua_rawgetp(L, 1, &header_block_key) != LUA_TSTRING) return 0;
  block = lua_tolstring(L, -1, &len);
  push_headers(L, block, len);
  lua_pushvalue(L, -1);
  lua_setfield(L, 1, "headers"); /* no __newindex: a plain rawset, so the next look finds it */
  return 1;
}

void geoservices_request_open_result(lua_State *L) {
  lua_createtable(L, 0, 2);
  lua_pushcfunction(L, l_lean_index);
  lua_setfield(L, -2, "__index");
  lua_pushliteral(L, "geoservices.Response");
  lua_setfield(L, -2, "__name");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &lean_mt_key);
}

/* The json option: sets `json` in the result table at the top to the
 * decoded body and returns 1; returns 0 (nothing set) for an empty body or
 * one that is not JSON (the caller then gives the body as it is, and the Lua
 * side tells why). The body is decoded where it lies, not copied into a Lua
 * string first. */
static int push_json(lua_State *L, geoservices_request *req, lua_Integer depth) {
  int n;
  if (req->response_body.len == 0) return 0;
  n = geoservices_json_decode_buf(L, &req->response_body, (size_t)depth);
  /* closed meanwhile (by a finalizer): the bytes came back to no owner */
  if (req->state == REQUEST_CLOSED) geoservices_buf_free(&req->response_body);
  if (n != 1) {
    lua_pop(L, n);
    return 0;
  }
  lua_setfield(L, -2, "json");
  return 1;
}

int geoservices_request_push_result(lua_State *L, geoservices_request *req, int ud) {
  long status = 0, connects = 0;
  double seconds = 0;
  char *url = NULL;
  if (req->result != CURLE_OK && !(req->records && req->records->failed && req->result == CURLE_WRITE_ERROR && !req->too_large)) {
    const char *code = error_code(req);
    char fallback[32];
    luaL_pushfail(L);
    if (req->save_errno) {
      lua_pushfstring(L, "cannot save the response: %s", strerror(req->save_errno));
      lua_pushliteral(L, "save_failed");
      return 3;
    }
    if (req->too_large)
      lua_pushfstring(L, "response larger than the limit of %I bytes", (lua_Integer)req->max_response_bytes);
    else if (req->errbuf[0])
      lua_pushstring(L, req->errbuf);
    else
      lua_pushstring(L, curl_easy_strerror(req->result));
    if (!code) {
      snprintf(fallback, sizeof fallback, "curl_%d", (int)req->result);
      code = fallback;
    }
    lua_pushstring(L, code);
    return 3;
  }
  curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
  if (lua_getiuservalue(L, ud, UV_JSON) == LUA_TNUMBER) { /* the json option: a lean result */
    lua_Integer depth = lua_tointeger(L, -1);
    lua_pop(L, 1);
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, status);
    lua_setfield(L, -2, "status");
    if (!push_json(L, req, depth)) {
      lua_pushlstring(L, req->response_body.data ? req->response_body.data : "", req->response_body.len);
      lua_setfield(L, -2, "body");
    }
    /* the headers as one string, made a table on first use (lean_index):
     * an answer that decodes fine never looks at them */
    lua_pushlstring(L, req->response_headers.data ? req->response_headers.data : "", req->response_headers.len);
    lua_rawsetp(L, -2, &header_block_key);
    lua_pushinteger(L, (lua_Integer)req->received);
    lua_setfield(L, -2, "bytes");
    lua_rawgetp(L, LUA_REGISTRYINDEX, &lean_mt_key);
    lua_setmetatable(L, -2);
    return 1;
  }
  lua_pop(L, 1);
  curl_easy_getinfo(req->easy, CURLINFO_NUM_CONNECTS, &connects);
  curl_easy_getinfo(req->easy, CURLINFO_TOTAL_TIME, &seconds);
  curl_easy_getinfo(req->easy, CURLINFO_EFFECTIVE_URL, &url);
  lua_createtable(L, 0, 8);
  lua_pushinteger(L, status);
  lua_setfield(L, -2, "status");
  lua_pushlstring(L, req->response_body.data ? req->response_body.data : "", req->response_body.len);
  lua_setfield(L, -2, "body");
  push_headers(L, req->response_headers.data, req->response_headers.len);
  lua_setfield(L, -2, "headers");
  lua_pushstring(L, url ? url : "");
  lua_setfield(L, -2, "url");
  lua_pushinteger(L, connects);
  lua_setfield(L, -2, "connects");
  lua_pushnumber(L, seconds);
  lua_setfield(L, -2, "seconds");
  lua_pushinteger(L, (lua_Integer)req->received);
  lua_setfield(L, -2, "bytes");
  if (req->skipped) { /* resume_from: the whole file came again, these bytes were dropped */
    lua_pushinteger(L, (lua_Integer)req->skipped);
    lua_setfield(L, -2, "skipped");
  }
  if (req->records && req->records->failed && req->records->records) {
    size_t offset = geoservices_records_offset(req->records->records) + 1;
    lua_pushfstring(L, "invalid JSON at byte %I: %s", (lua_Integer)offset,
                    geoservices_records_error(req->records->records));
    lua_setfield(L, -2, "json_error");
    lua_pushinteger(L, (lua_Integer)offset);
    lua_setfield(L, -2, "json_offset");
  }
  return 1;
}

