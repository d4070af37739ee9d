/* libFuzzer target: the Lua bindings of the decoder and of the record
 * extractor (json/lua_decode.c, json/lua_records.c, json/strcache.c), inside
 * a real Lua state kept across inputs so that the per-state string cache
 * carries strings from one input to the next. For every input:
 * core.json_decode twice (the second time its short strings come from the
 * cache) and a JsonStream fed in two pieces at an input-chosen cut must agree
 * exactly (value, array marks, or error message and offset); the records of
 * a core.records() fed whole and fed in two pieces (drained between) must
 * agree, and so must whether they succeed, also with the second piece parsed
 * on a worker thread (worker_after = 1). Any disagreement or Lua error aborts. Not
 * in FUZZ_TARGETS (it links the Lua library); build and run it by hand:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Icsrc -I/usr/include/lua5.4 \
 *     -D_POSIX_C_SOURCE=200809L -o build/fuzz/fuzz_lua_decode csrc/fuzz/fuzz_lua_decode.c \
 *     csrc/json/lua_decode.c csrc/json/lua_encode.c csrc/json/lua_records.c csrc/json/lua_replay.c \
 *     csrc/json/records.c csrc/json/records_parse.c csrc/json/strcache.c csrc/json/jsonstream.c \
 *     csrc/json/jsonnum.c csrc/json/parse_worker.c csrc/buf.c \
 *     csrc/class.c -pthread \
 *     /usr/lib/x86_64-linux-gnu/liblua5.4.a -lm -ldl
 *   build/fuzz/fuzz_lua_decode -max_total_time=120 -max_len=65536 build/fuzz/corpus_lua_decode \
 *     csrc/fuzz/corpus/jsonstream csrc/fuzz/corpus/records */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include "common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char checker[] =
  "local core = ...\n"
  "local mt = core.json_array_mt\n"
  "local function same(a, b)\n"
  "  if type(a) ~= type(b) then return false end\n"
  "  if type(a) ~= 'table' then\n"
  "    if type(a) == 'number' then return a == b and math.type(a) == math.type(b) end\n"
  "    return a == b\n"
  "  end\n"
  "  if getmetatable(a) ~= getmetatable(b) then return false end\n"
  "  for k, v in pairs(a) do if not same(v, b[k]) then return false end end\n"
  "  for k in pairs(b) do if a[k] == nil then return false end end\n"
  "  return true\n"
  "end\n"
  "local function marks(v)\n" /* arrays carry the mark, objects none */
  "  if type(v) ~= 'table' then return true end\n"
  "  local m = getmetatable(v)\n"
  "  if m ~= nil and m ~= mt then return false end\n"
  "  for _, x in pairs(v) do if not marks(x) then return false end end\n"
  "  return true\n"
  "end\n"
  "local function records(s, cut, opts)\n"
  "  local r = core.records(opts)\n"
  "  local out = {}\n"
  "  local function fn(kind, layer, value, key) out[#out + 1] = { kind, layer or false, value, key or false } end\n"
  "  local st, ok, e, o = pcall(function()\n"
  "    local ok, e, o = r:feed(s:sub(1, cut))\n"
  "    if ok then r:drain(fn); ok, e, o = r:feed(s:sub(cut + 1)) end\n"
  "    if ok then r:drain(fn); ok, e, o = r:finish() end\n"
  "    if ok then r:drain(fn) end\n"
  "    return ok, e, o\n"
  "  end)\n"
  "  r:close()\n"
  "  if not st then ok = tostring(ok):gsub('^.-:%d+: ', '') end\n" /* where drain was called */
  "  return out, st, ok, e, o\n"
  "end\n"
  "return function(s, cut)\n"
  "  local v1, e1, o1 = core.json_decode(s)\n"
  "  local v2, e2, o2 = core.json_decode(s)\n"
  "  assert(same(v1, v2) and e1 == e2 and o1 == o2, 'second decode differs')\n"
  "  assert(v1 == nil or marks(v1), 'array marks')\n"
  "  local js = core.jsonstream()\n"
  "  local ok, e, o = js:feed(s:sub(1, cut))\n"
  "  if ok then ok, e, o = js:feed(s:sub(cut + 1)) end\n"
  "  local v3\n"
  "  if ok then v3, e, o = js:finish() end\n"
  "  js:close()\n"
  "  if v1 ~= nil then assert(same(v1, v3), 'stream differs')\n"
  "  else assert(v3 == nil and e == e1 and o == o1, 'stream error differs') end\n"
  "  local a, s1, p1, x1, y1 = records(s, #s)\n"
  "  local b, s2, p2, x2, y2 = records(s, cut)\n"
  "  local c, s3, p3, x3, y3 = records(s, cut, { worker_after = 1 })\n"
  /* a document can fail two ways (bad JSON in feed, a layer entry with records but no id in
   * drain); which is seen first depends on where it was cut, so only success must agree */
  "  local ok1, ok2 = (s1 and p1) or false, (s2 and p2) or false\n"
  "  assert(ok1 == ok2, 'records verdict differs')\n"
  "  if ok1 then assert(same(a, b) and x1 == x2 and y1 == y2, 'records differ') end\n"
  /* the second piece parsed on a worker thread: the same verdict and records as in this thread */
  "  assert(((s3 and p3) or false) == ok2, 'worker verdict differs')\n"
  "  if ok2 then assert(same(b, c) and x2 == x3 and y2 == y3, 'worker records differ') end\n"
  "end\n";

static lua_State *state;
static int check_ref;

static void setup(void) {
  state = luaL_newstate();
  if (!state) abort();
  luaL_openlibs(state);
  lua_newtable(state);
  geoservices_open_json_encode(state);
  geoservices_open_json_decode(state);
  geoservices_open_records(state);
  if (luaL_loadstring(state, checker) != LUA_OK) abort();
  lua_pushvalue(state, -2); /* the module table is the chunk's argument */
  if (lua_pcall(state, 1, 1, 0) != LUA_OK) {
    fprintf(stderr, "checker: %s\n", lua_tostring(state, -1));
    abort();
  }
  check_ref = luaL_ref(state, LUA_REGISTRYINDEX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static unsigned runs;
  if (!state) setup();
  lua_rawgeti(state, LUA_REGISTRYINDEX, check_ref);
  lua_pushlstring(state, (const char *)data, size);
  lua_pushinteger(state, size ? (lua_Integer)(data[0] % (size + 1)) : 0);
  if (lua_pcall(state, 2, 0, 0) != LUA_OK) {
    fprintf(stderr, "check failed: %s\n", lua_tostring(state, -1));
    abort();
  }
  if (++runs % 64 == 0) lua_gc(state, LUA_GCCOLLECT); /* cached strings survive collections */
  return 0;
}
