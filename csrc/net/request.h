/* The request and driver structures, shared by request*.c, driver.c and drive.c only. */
#ifndef GEOSERVICES_REQUEST_H
#define GEOSERVICES_REQUEST_H

#include <curl/curl.h>

#include "buf.h"
#include "common.h"
#include "json/lua_records.h"

typedef struct geoservices_driver geoservices_driver;

typedef enum {
  REQUEST_CLOSED = 0, /* no easy handle: created closed, or closed */
  REQUEST_READY,      /* configured, not yet added to a driver */
  REQUEST_RUNNING,    /* attached to a driver's multi handle */
  REQUEST_DONE        /* finished; result() is available */
} geoservices_request_state;

typedef struct geoservices_request {
  CURL *easy;
  geoservices_request_state state;
  geoservices_driver *driver; /* set while RUNNING */
  struct geoservices_request *prev, *next; /* the driver's list of attached requests */
  int ref;                    /* registry anchor while RUNNING */
  int by_sockets;             /* added to be driven through the socket API (driver:add(req, true)) */
  CURLcode result;
  int too_large;              /* the write callback refused a body over the limit */
  size_t max_response_bytes;  /* 0 = unlimited */
  geoservices_buf request_body;
  geoservices_buf response_body;
  geoservices_buf response_headers; /* raw header block of the final response */
  curl_mime *mime;
  struct curl_slist *header_list;
  char errbuf[CURL_ERROR_SIZE];
  /* records mode: the body streams into the extractor as it arrives */
  geoservices_records_ud *records; /* a Records userdata, anchored in user value 1 */
  int paused;                 /* the write callback paused the transfer: the tape is full */
  size_t received;            /* body bytes so far */
  int discard;                /* count the body, keep none of it (benchmarks, probes) */
  int save_fd;                /* save_to: a successful body is appended here as it arrives; -1 = none */
  int save_errno;             /* the write to save_fd failed with this errno (the transfer aborted) */
  size_t resume_from;         /* a resumed download (a Range request from this byte): a 200 answer... */
  size_t skipped;             /* ...is the whole file again: its first resume_from bytes are dropped */
  int preset;                 /* its easy handle came from the pool not reset (see pool_give) */
  int reset_handle;           /* it set options a plain request never sets: reset the handle after it */
} geoservices_request;

/* A socket libcurl wants watched (host-loop mode, CURLMOPT_SOCKETFUNCTION). */
typedef struct {
  curl_socket_t fd;
  int what; /* CURL_POLL_IN, CURL_POLL_OUT or CURL_POLL_INOUT */
  lua_Integer id; /* unique per registration, so a reused fd number is noticed */
} geoservices_watch;

struct geoservices_driver {
  CURLM *multi;
  geoservices_request *attached; /* head of the list of RUNNING requests */
  int running;
  geoservices_watch *watch;      /* sockets to watch, kept by the socket callback */
  size_t nwatch, capwatch;
  lua_Integer watch_gen;         /* bumped whenever the watch list changes */
  lua_Integer watch_serial;      /* last id given to a watched socket */
  int watch_oom;                 /* the socket callback could not grow the list */
  unsigned long finished;        /* transfers finished so far (a nested wait's are noticed) */
  int socket_transfers;          /* attached requests added by_sockets: see driver:socket_driven() */
};

geoservices_request *geoservices_check_request(lua_State *L, int idx);
/* driver.c: hands each transfer the multi handle finished to its request; how many. */
int geoservices_driver_finish_transfers(lua_State *L, geoservices_driver *drv);
/* Removes a RUNNING request from its driver and drops the anchor; leaves it
 * in `next_state`. Safe in either GC order. */
void geoservices_request_detach(lua_State *L, geoservices_request *req,
                                geoservices_request_state next_state);
/* Pushes a new request userdata, closed (core.request's, before its setup). */
geoservices_request *geoservices_request_push_closed(lua_State *L);
/* Makes the closed request `req` (the userdata at index ud) ready to be
 * added, from the options table at index spec (those of core.request);
 * raises on bad options, leaving it to be closed. */
void geoservices_request_setup(lua_State *L, geoservices_request *req, int ud, int spec);
/* Pushes what request:result() returns for the finished request `req` (the
 * userdata at index ud); returns the number of values. */
int geoservices_request_push_result(lua_State *L, geoservices_request *req, int ud);
/* Detaches and releases a request, as request:close() does. */
void geoservices_request_close(lua_State *L, geoservices_request *req);
/* Called by the driver when libcurl reports the transfer finished. */
void geoservices_request_finished(lua_State *L, geoservices_request *req, CURLcode result);

/* Form encoding of a Lua table into b: an array of {name, value} pairs, a
 * flat array {name1, value1, name2, value2, ...} (its first element is a
 * string), or a map (its fields in the order of their sorted names). */
void geoservices_form_encode_table(lua_State *L, int idx, geoservices_buf *b);

#endif
