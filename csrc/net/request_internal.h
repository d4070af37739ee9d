/* What the request's files share (request.c: the userdata's life and its
 * Lua methods; transfer.c: libcurl's callbacks; pool.c: idle handles and
 * buffers; request_setup.c: the options; request_result.c: what result()
 * gives). driver.c sees only net/request.h. */
#ifndef GEOSERVICES_REQUEST_INTERNAL_H
#define GEOSERVICES_REQUEST_INTERNAL_H

#include "net/request.h"

#define POOL_MAX 8

/* A closed request's buffers are kept the same way, emptied, for the next
 * request: its body, its answer and the answer's headers would otherwise
 * be a malloc and a free of a few KB each per request (libcurl's own 16 KB
 * buffer comes on top), and glibc pays for such sizes with consolidations. */
#define SPARE_MAX ((size_t)64 << 10) /* a larger buffer is freed, not kept */
enum { SPARE_REQUEST_BODY, SPARE_RESPONSE_BODY, SPARE_RESPONSE_HEADERS, SPARES };

typedef struct easy_pool {
  CURL *idle[POOL_MAX];
  int preset[POOL_MAX]; /* not reset: it keeps what every request sets alike (configure) */
  int n;
  int closed;      /* its __gc ran (the state is closing): handles are cleaned up */
  char agent[128]; /* the default User-Agent, formatted once */
  geoservices_buf spare[SPARES]; /* data NULL: none kept */
} easy_pool;

/* User values of a request: 1 the Records (records mode), 2 the depth limit
 * of the json option (0: the default), nil without it. */
#define UV_RECORDS 1
#define UV_JSON 2

/* The pool of the state (NULL while it closes), a handle from it (or a new
 * one; *preset tells it was not reset), a spare buffer from it. */
easy_pool *geoservices_pool_get(lua_State *L);
CURL *geoservices_pool_take(easy_pool *pool, int *preset);
void geoservices_pool_take_buf(easy_pool *pool, int which, geoservices_buf *b, size_t limit);
void geoservices_pool_give(easy_pool *pool, CURL *easy, int keep_options);
void geoservices_pool_give_buf(easy_pool *pool, int which, geoservices_buf *b);
/* Creates the state's pool (in the registry; its __gc cleans the handles up). */
void geoservices_pool_open(lua_State *L);
/* libcurl's write and header callbacks of every request (net/transfer.c). */
size_t geoservices_request_on_body(char *ptr, size_t size, size_t nmemb, void *userdata);
size_t geoservices_request_on_header(char *ptr, size_t size, size_t nmemb, void *userdata);
/* The metatable of the json option's lean results, in the registry. */
void geoservices_request_open_result(lua_State *L);

#endif
