/* libcurl's write and header callbacks of a request: the body kept,
 * counted, saved to a file or fed to the record extractor as it arrives; the
 * header block of the final response kept. They never call Lua. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "fdio.h"
#include "net/request_internal.h"

/* In records mode the tape may hold this much before the transfer pauses
 * until Lua drains it: memory stays flat however large the result. */
#define RECORDS_PAUSE_BYTES ((size_t)1 << 20)
/* ...and this much of the raw body is kept to describe an error page. */
#define RAW_PREFIX_BYTES ((size_t)64 << 10)

/* save_to: a successful body goes to its file as it arrives, so a result
 * of any size is kept without being held in memory. */
static int save_bytes(geoservices_request *req, const char *p, size_t n) {
  if (geoservices_write_all(req->save_fd, p, n) == 0) return 0;
  req->save_errno = errno;
  return -1;
}

static size_t on_records_body(geoservices_request *req, char *ptr, size_t n) {
  long status = 0;
  if (!req->records->records) return 0; /* its Records was closed: abort */
  /* Only a successful response is a result: an error page (a 502 from a
   * proxy, say) is kept for the error message and never reaches the
   * extractor, so a retried request continues the same parse. */
  curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300) {
    if (req->response_body.len < RAW_PREFIX_BYTES) {
      size_t keep = RAW_PREFIX_BYTES - req->response_body.len;
      if (geoservices_buf_append(&req->response_body, ptr, n < keep ? n : keep)) return 0;
    }
    req->received += n;
    return n;
  }
  if (!req->records->failed && geoservices_records_pending(req->records->records) > RECORDS_PAUSE_BYTES) {
    req->paused = 1;
    return CURL_WRITEFUNC_PAUSE; /* the same bytes come back after the unpause */
  }
  if (req->response_body.len < RAW_PREFIX_BYTES) {
    size_t keep = RAW_PREFIX_BYTES - req->response_body.len;
    if (geoservices_buf_append(&req->response_body, ptr, n < keep ? n : keep)) return 0;
  }
  req->received += n;
  if (req->save_fd >= 0 && save_bytes(req, ptr, n) != 0) return 0;
  /* a broken result (now or in an earlier request of the same document) is
   * not worth downloading further; the failure is kept in records->failed */
  if (geoservices_records_ud_feed(req->records, ptr, n) != 0) return 0;
  return n;
}

/* libcurl callbacks: they only append to C buffers or feed the extractor,
 * never touch Lua. */
static size_t on_body(geoservices_request *req, char *ptr, size_t n) {
  if (req->max_response_bytes && req->received + n > req->max_response_bytes) {
    req->too_large = 1;
    return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
  }
  if (req->records) return on_records_body(req, ptr, n);
  if (req->save_fd >= 0) {
    long status = 0;
    curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300) { /* an error page is kept for its message instead */
      req->received += n;
      return save_bytes(req, ptr, n) == 0 ? n : 0;
    }
  }
  if (!req->discard) {
    if (req->response_body.cap == 0) {
      /* room for the announced body at once (up to 1 MiB: a bigger or
       * unannounced one grows by doubling), not a realloc per doubling */
      curl_off_t announced = -1;
      size_t want = (size_t)16 << 10;
      curl_easy_getinfo(req->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &announced);
      if (announced > 0) want = announced < ((curl_off_t)1 << 20) ? (size_t)announced : (size_t)1 << 20;
      if (want > n && geoservices_buf_reserve(&req->response_body, want)) return 0;
    }
    if (geoservices_buf_append(&req->response_body, ptr, n)) return 0;
  }
  req->received += n;
  return n;
}

/* resume_from: a download resumed with a Range request that the server
 * answers 200 gets the whole file again; the bytes it already has are
 * dropped as they arrive, so the body, the saved file and the extractor
 * continue where they stopped (result().skipped tells it happened). A
 * paused chunk comes back whole: its dropped bytes are counted once. */
size_t geoservices_request_on_body(char *ptr, size_t size, size_t nmemb, void *userdata) {
  geoservices_request *req = (geoservices_request *)userdata;
  size_t n = size * nmemb, drop = 0, done;
  if (req->resume_from > req->skipped) {
    long status = 0;
    curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status == 200) drop = n < req->resume_from - req->skipped ? n : req->resume_from - req->skipped;
  }
  if (drop == n && n > 0) {
    req->skipped += drop;
    return n;
  }
  done = on_body(req, ptr + drop, n - drop);
  if (done != n - drop) return done; /* 0 (abort) or CURL_WRITEFUNC_PAUSE */
  req->skipped += drop;
  return n;
}

size_t geoservices_request_on_header(char *ptr, size_t size, size_t nmemb, void *userdata) {
  geoservices_request *req = (geoservices_request *)userdata;
  size_t n = size * nmemb;
  /* A new status line starts a new response (100 Continue, redirects):
   * keep only the final one's headers. */
  if (n >= 5 && memcmp(ptr, "HTTP/", 5) == 0) geoservices_buf_reset(&req->response_headers);
  if (req->response_headers.cap == 0 && geoservices_buf_reserve(&req->response_headers, 1024)) return 0;
  if (geoservices_buf_append(&req->response_headers, ptr, n)) return 0;
  return n;
}

