/* geoservices.httpd: a small HTTP server over libmicrohttpd for the local
 * emulator. MHD runs in external-select mode (no threads) and never calls Lua:
 * a request whose body has fully arrived is suspended and queued in C, step()
 * turns queued requests into Exchange userdata, and respond() resumes the
 * connection so the next access-handler call queues the prepared response.
 *
 * Ownership: C structs (struct req) belong to the MHD request and are freed in
 * the NOTIFY_COMPLETED callback or when the server closes. An Exchange only
 * points at its req; both sides clear the link, so either GC order is safe.
 * The server does not anchor exchanges: an Exchange the program drops is
 * collected and behaves like ex:close() (the connection is reset).
 *
 * Request bodies: a body up to spool_threshold bytes (no limit unless one is
 * given) is kept in memory and handed to Lua as ex.body; a larger one is
 * written, while it arrives, to a
 * temporary file (mkstemp in tmpdir, mode 0600, close-on-exec) and handed
 * over as ex.body_path; either way ex.body_size is its length. The file is
 * unlinked when the request ends (response sent, connection dropped, server
 * closed), as are the files ex:tmpfile() made for it. A body larger than
 * max_body is refused with 413 (before "100 Continue" when its
 * Content-Length says so); a body that cannot be stored gets 500.
 *
 * Lua API (raises on misuse, returns nil, message, code on runtime failure):
 *   httpd.listen{host="127.0.0.1", port=0, max_body=1 GiB (0 = no limit),
 *                spool_threshold=nil (bytes; nil = keep every body in memory),
 *                tmpdir=$TMPDIR or "/tmp",
 *                tls_cert=PEM, tls_key=PEM (both: serve HTTPS; libmicrohttpd's GnuTLS)}
 *       -> server | nil, msg, "address_in_use"|"listen_failed"
 *   srv:port() -> integer;  srv:close() (idempotent, also __gc/__close)
 *   srv:step([timeout_ms=0]) -> array of Exchanges (negative = wait for MHD)
 *   ex.method/.path/.query/.version/.headers, ex.body (small) or ex.body_path
 *       (spooled), ex.body_size; ex:request() -> that table
 *   ex:tmpfile() -> path of a new empty file (0600) unlinked when the request
 *       ends | nil, msg, "file"
 *   ex:respond{status=200, headers={}, body="" | file="/path", fault=nil|
 *       "reset"|"reset_mid_body"|"truncate"} -> true | nil, msg, "file"
 *   ex:close(), ex:peer() -> "127.0.0.1:port"
 *   httpd.catch_terminate(): from now on SIGTERM makes the next srv:step()
 *       raise "terminated" (the emulator command stops as on Ctrl-C); a
 *       program that embeds the server keeps its own SIGTERM handling
 *   httpd.decode_form_file(path [, block]): a spooled form body decoded from
 *       its file (emulator/form_file.c).
 * respond() or tmpfile() on an exchange whose server closed raises
 * "attempt to use a closed exchange"; after respond() they raise
 * "exchange already answered".
 *
 * One file, kept whole (about 950 lines): its parts are one life, a
 * request's, in the states of enum req_state. MHD's callbacks receive it
 * and spool its body, step() hands it to Lua as an Exchange, respond()
 * resumes it, the completion callback or the server's close frees it; the
 * ownership rule above (either side clears the link) holds only where
 * every transition is in sight. Split across files, struct req, struct
 * server and the queue would become an internal header that every part
 * writes to. What has a concept of its own left: the form decoder of a
 * spooled body (form_file.c). */
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <microhttpd.h>

#include "buf.h"
#include "fdio.h"
#include "class.h"
#include "common.h"
#include "emulator/form_file.h"

#define SERVER_MT "geoservices.HttpServer"
#define EXCHANGE_MT "geoservices.HttpExchange"
#define DEFAULT_MAX_BODY ((size_t)1024 * 1024 * 1024)
#define CONNECTION_TIMEOUT_S 60u

GEOSERVICES_API int luaopen_geoservices_httpd(lua_State *L);

typedef struct server server;
typedef struct exchange exchange;
typedef struct req req;

enum req_state {
  RQ_RECEIVING, /* headers seen, body arriving */
  RQ_QUEUED,    /* suspended, waiting for step() to hand it to Lua */
  RQ_HANDED,    /* suspended, owned by an Exchange */
  RQ_ANSWERED,  /* resumed with a response ready to queue */
  RQ_DROPPED,   /* resumed; the handler closes the connection */
  RQ_SENT       /* response queued; waiting for MHD to finish */
};

struct req {
  server *srv;
  struct MHD_Connection *conn;
  req *prev, *next;   /* every live req of srv */
  req *qprev, *qnext; /* srv's ready queue */
  int queued;
  exchange *ex; /* back-pointer, cleared by either side */
  enum req_state state;
  int started, too_large, oom, io_failed;
  char *uri; /* raw request target, split at '?' into path and query */
  const char *query;
  char *method, *version;
  geoservices_buf hdrs; /* "name\0value\0" pairs, names lowercased */
  geoservices_buf body; /* the body while it is small enough to keep */
  uint64_t body_size;   /* bytes received */
  int spool_fd;         /* >= 0 while the body is being written to spool_path */
  char *spool_path;     /* the spooled body, unlinked in req_free */
  char **owned;         /* ex:tmpfile() paths, unlinked in req_free */
  size_t n_owned, cap_owned;
  struct MHD_Response *resp;
  unsigned status;
  char peer[64];
};

struct server {
  struct MHD_Daemon *daemon; /* NULL = closed */
  char *tls_cert, *tls_key;  /* PEM copies while serving HTTPS, else NULL */
  size_t max_body;
  size_t spool_threshold; /* SIZE_MAX = never spool */
  char *tmpdir;
  req *all;
  req *qhead, *qtail;
};

struct exchange {
  req *r; /* NULL once answered, closed, or its server closed */
  int answered;
  char peer[64];
};

/* ---- C side: requests ---------------------------------------------------- */

static void queue_push(server *s, req *r) {
  r->qprev = s->qtail;
  r->qnext = NULL;
  if (s->qtail) s->qtail->qnext = r;
  else s->qhead = r;
  s->qtail = r;
  r->queued = 1;
}

static void queue_remove(server *s, req *r) {
  if (!r->queued) return;
  if (r->qprev) r->qprev->qnext = r->qnext;
  else s->qhead = r->qnext;
  if (r->qnext) r->qnext->qprev = r->qprev;
  else s->qtail = r->qprev;
  r->qprev = r->qnext = NULL;
  r->queued = 0;
}

/* Closes and removes the spooled body, if any. */
static void spool_discard(req *r) {
  if (r->spool_fd >= 0) close(r->spool_fd);
  r->spool_fd = -1;
  if (r->spool_path) {
    unlink(r->spool_path);
    free(r->spool_path);
    r->spool_path = NULL;
  }
}

static void req_free(req *r) {
  server *s = r->srv;
  size_t i;
  queue_remove(s, r);
  spool_discard(r);
  for (i = 0; i < r->n_owned; i++) {
    unlink(r->owned[i]);
    free(r->owned[i]);
  }
  free(r->owned);
  if (r->prev) r->prev->next = r->next;
  else s->all = r->next;
  if (r->next) r->next->prev = r->prev;
  if (r->ex) r->ex->r = NULL;
  if (r->resp) MHD_destroy_response(r->resp);
  geoservices_buf_free(&r->hdrs);
  geoservices_buf_free(&r->body);
  free(r->uri);
  free(r->method);
  free(r->version);
  free(r);
}

static void format_peer(struct MHD_Connection *conn, char *out, size_t n) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  char ip[INET6_ADDRSTRLEN];
  out[0] = '\0';
  if (!ci || !ci->client_addr) return;
  if (ci->client_addr->sa_family == AF_INET) {
    struct sockaddr_in sin;
    memcpy(&sin, ci->client_addr, sizeof sin); /* avoid an aligned cast */
    if (inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof ip))
      snprintf(out, n, "%s:%u", ip, (unsigned)ntohs(sin.sin_port));
  }
}

/* URI log callback: the only place MHD shows the raw request target (the url
 * given to the access handler is already percent-decoded and cut at '?'). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
  server *s = cls;
  char *q;
  req *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->uri = strdup(uri ? uri : "");
  if (!r->uri) {
    free(r);
    return NULL;
  }
  q = strchr(r->uri, '?');
  if (q) {
    *q = '\0';
    r->query = q + 1;
  } else {
    r->query = "";
  }
  r->srv = s;
  r->conn = conn;
  r->state = RQ_RECEIVING;
  r->spool_fd = -1;
  geoservices_buf_init(&r->hdrs, 0);
  geoservices_buf_init(&r->body, 0); /* limits are checked by body_append */
  format_peer(conn, r->peer, sizeof r->peer);
  r->next = s->all;
  if (s->all) s->all->prev = r;
  s->all = r;
  return r;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  (void)cls;
  (void)conn;
  (void)toe;
  if (*con_cls) req_free(*con_cls);
  *con_cls = NULL;
}

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value) {
  req *r = cls;
  size_t i, start = r->hdrs.len, klen = strlen(key);
  (void)kind;
  if (!value) value = "";
  if (geoservices_buf_append(&r->hdrs, key, klen + 1) ||
      geoservices_buf_append(&r->hdrs, value, strlen(value) + 1)) {
    r->oom = 1;
    return MHD_NO;
  }
  for (i = start; i < start + klen; i++)
    r->hdrs.data[i] = (char)tolower((unsigned char)r->hdrs.data[i]);
  return MHD_YES;
}

static char too_large_msg[] = "request body too large\n";
static char spool_failed_msg[] = "cannot store the request body\n";

/* Answers at once with a fixed text and closes; MHD then skips (or drains)
 * the rest of the body. */
static enum MHD_Result reply_static(req *r, unsigned status, char *msg, size_t len) {
  enum MHD_Result ret;
  struct MHD_Response *resp;
  spool_discard(r);
  geoservices_buf_free(&r->body);
  resp = MHD_create_response_from_buffer(len, msg, MHD_RESPMEM_PERSISTENT);
  if (!resp) return MHD_NO;
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
  ret = MHD_queue_response(r->conn, status, resp);
  MHD_destroy_response(resp);
  r->state = RQ_SENT;
  return ret;
}

static enum MHD_Result reply_too_large(req *r) {
  return reply_static(r, MHD_HTTP_CONTENT_TOO_LARGE, too_large_msg, sizeof too_large_msg - 1);
}

static enum MHD_Result reply_spool_failed(req *r) {
  return reply_static(r, MHD_HTTP_INTERNAL_SERVER_ERROR, spool_failed_msg, sizeof spool_failed_msg - 1);
}

/* Creates an empty private file "<tmpdir>/geoservices-<kind>-XXXXXX"; returns
 * its descriptor (close-on-exec) and sets *path (malloc'd), or -1 with errno. */
static int make_temp(server *s, const char *kind, char **path) {
  size_t n = strlen(s->tmpdir) + strlen(kind) + sizeof "/geoservices--XXXXXX";
  char *p = malloc(n);
  int fd, err;
  *path = NULL;
  if (!p) {
    errno = ENOMEM;
    return -1;
  }
  snprintf(p, n, "%s/geoservices-%s-XXXXXX", s->tmpdir, kind);
  fd = mkstemp(p); /* mode 0600 */
  if (fd < 0) {
    err = errno;
    free(p);
    errno = err;
    return -1;
  }
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  *path = p;
  return fd;
}

/* Moves the body to a spool file: what arrived so far, then the rest. */
static int spool_start(req *r) {
  r->spool_fd = make_temp(r->srv, "body", &r->spool_path);
  if (r->spool_fd < 0) return -1;
  if (r->body.len && geoservices_write_all(r->spool_fd, r->body.data, r->body.len)) return -1;
  geoservices_buf_free(&r->body);
  return 0;
}

/* Adds received bytes to the body: in memory up to the spool threshold, then
 * in the spool file. Sets too_large past max_body, io_failed when the bytes
 * cannot be kept; either way the rest of the body is dropped. */
static void body_append(req *r, const char *data, size_t n) {
  server *s = r->srv;
  if (r->too_large || r->io_failed) return;
  if (s->max_body && r->body_size + n > s->max_body) {
    r->too_large = 1;
    spool_discard(r);
    geoservices_buf_free(&r->body);
    return;
  }
  if (r->spool_fd < 0 && !r->spool_path && n > s->spool_threshold - r->body.len && spool_start(r))
    r->io_failed = 1;
  else if (r->spool_fd >= 0 ? geoservices_write_all(r->spool_fd, data, n)
                            : geoservices_buf_append(&r->body, data, n))
    r->io_failed = 1;
  if (r->io_failed) {
    spool_discard(r);
    geoservices_buf_free(&r->body);
    return;
  }
  r->body_size += n;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
  server *s = cls;
  req *r = *con_cls;
  enum MHD_Result ret;
  (void)url;
  if (!r) return MHD_NO; /* on_uri ran out of memory */
  if (!r->started) {
    const char *cl;
    r->started = 1;
    r->conn = conn;
    r->method = strdup(method);
    r->version = strdup(version);
    if (!r->method || !r->version) return MHD_NO;
    MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_header, r);
    if (r->oom) return MHD_NO;
    cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
      char *end;
      unsigned long long n;
      errno = 0;
      n = strtoull(cl, &end, 10);
      /* Refuse before "100 Continue" so the client never sends the body. */
      if (errno || (s->max_body && n > s->max_body)) return reply_too_large(r);
      if (n > s->spool_threshold) {
        if (spool_start(r)) return reply_spool_failed(r);
      } else if (n) {
        geoservices_buf_reserve(&r->body, (size_t)n); /* one allocation */
      }
    }
    return MHD_YES;
  }
  switch (r->state) {
  case RQ_RECEIVING:
    if (*upload_data_size) {
      /* Past the limit (chunked bodies) or not storable: the rest is
       * dropped and the answer (413, 500) given at the end. */
      body_append(r, upload_data, *upload_data_size);
      *upload_data_size = 0;
      return MHD_YES;
    }
    if (r->too_large) return reply_too_large(r);
    if (r->io_failed) return reply_spool_failed(r);
    if (r->spool_fd >= 0) { /* the whole body is in the file */
      int failed = close(r->spool_fd) != 0;
      r->spool_fd = -1;
      if (failed) return reply_spool_failed(r);
    }
    r->state = RQ_QUEUED;
    queue_push(s, r);
    MHD_suspend_connection(conn);
    return MHD_YES;
  case RQ_ANSWERED:
    ret = MHD_queue_response(conn, r->status, r->resp);
    MHD_destroy_response(r->resp);
    r->resp = NULL;
    r->state = RQ_SENT;
    return ret;
  case RQ_SENT:
    *upload_data_size = 0;
    return MHD_YES;
  case RQ_QUEUED:
  case RQ_HANDED:
  case RQ_DROPPED:
  default:
    return MHD_NO; /* "reset": close without a response byte */
  }
}

/* ---- faulty bodies ------------------------------------------------------- */

/* Serves the first `send` bytes of a response declared with its full length,
 * then reports an error so MHD aborts the connection mid-body. */
typedef struct partial {
  char *data; /* memory source, or NULL when reading fd */
  int fd;
  uint64_t send;
} partial;

static ssize_t partial_read(void *cls, uint64_t pos, char *buf, size_t max) {
  partial *p = cls;
  size_t n;
  if (pos >= p->send) return MHD_CONTENT_READER_END_WITH_ERROR;
  n = p->send - pos < max ? (size_t)(p->send - pos) : max;
  if (p->data) {
    memcpy(buf, p->data + pos, n);
    return (ssize_t)n;
  } else {
    ssize_t got = pread(p->fd, buf, n, (off_t)pos);
    return got > 0 ? got : MHD_CONTENT_READER_END_WITH_ERROR;
  }
}

static void partial_free(void *cls) {
  partial *p = cls;
  if (p->fd >= 0) close(p->fd);
  free(p->data);
  free(p);
}

static struct MHD_Response *partial_response(uint64_t size, const char *data, int fd) {
  struct MHD_Response *resp;
  partial *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->fd = fd;
  p->send = size / 2;
  if (data) {
    p->data = malloc(p->send ? (size_t)p->send : 1);
    if (!p->data) {
      free(p);
      return NULL;
    }
    memcpy(p->data, data, (size_t)p->send);
  }
  resp = MHD_create_response_from_callback(size, 64 * 1024, partial_read, p, partial_free);
  if (!resp) {
    free(p->data);
    free(p);
  }
  return resp;
}

/* ---- helpers ------------------------------------------------------------- */

static void ignore_sigpipe(void) {
  static int done = 0;
  struct sigaction sa;
  if (done) return;
  done = 1;
  /* Only replace the default action: a host-installed handler wins. */
  if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, NULL);
  }
}

/* ---- Server -------------------------------------------------------------- */

static server *check_server(lua_State *L, int idx) {
  server *s = luaL_checkudata(L, idx, SERVER_MT);
  if (!s->daemon) luaL_error(L, "attempt to use a closed server");
  return s;
}

static void free_tls(server *s) {
  free(s->tls_cert);
  free(s->tls_key);
  s->tls_cert = s->tls_key = NULL;
}

static char *copy_string(const char *text) {
  size_t n = strlen(text) + 1;
  char *copy = malloc(n);
  if (copy) memcpy(copy, text, n);
  return copy;
}

static void server_shutdown(server *s) {
  req *r;
  if (!s->daemon) {
    free(s->tmpdir);
    s->tmpdir = NULL;
    return;
  }
  /* MHD_stop_daemon must not see suspended connections: resume them as
   * dropped, and unhook every Exchange so it becomes closed. */
  for (r = s->all; r; r = r->next) {
    if (r->ex) {
      r->ex->r = NULL;
      r->ex = NULL;
    }
    if (r->state == RQ_QUEUED || r->state == RQ_HANDED) {
      r->state = RQ_DROPPED;
      MHD_resume_connection(r->conn);
    }
  }
  MHD_stop_daemon(s->daemon); /* calls on_completed for live requests */
  s->daemon = NULL;
  while (s->all) req_free(s->all); /* any MHD did not report */
  free_tls(s);
  free(s->tmpdir);
  s->tmpdir = NULL;
}

static int l_listen(lua_State *L) {
  const char *host = "127.0.0.1";
  lua_Integer port = 0;
  lua_Number max_body = (lua_Number)DEFAULT_MAX_BODY;
  lua_Number spool_threshold = -1; /* never */
  const char *tmpdir = getenv("TMPDIR");
  const char *tls_cert = NULL, *tls_key = NULL;
  struct sockaddr_in sa;
  unsigned int flags;
  server *s;
  int err;
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
    if (lua_getfield(L, 1, "host") != LUA_TNIL) host = luaL_checkstring(L, -1);
    if (lua_getfield(L, 1, "port") != LUA_TNIL) port = luaL_checkinteger(L, -1);
    if (lua_getfield(L, 1, "max_body") != LUA_TNIL) max_body = luaL_checknumber(L, -1);
    if (lua_getfield(L, 1, "spool_threshold") != LUA_TNIL) {
      spool_threshold = luaL_checknumber(L, -1);
      if (spool_threshold < 0) return luaL_argerror(L, 1, "spool_threshold out of range");
    }
    if (lua_getfield(L, 1, "tmpdir") != LUA_TNIL) {
      luaL_checktype(L, -1, LUA_TSTRING);
      tmpdir = lua_tostring(L, -1);
    }
    if (lua_getfield(L, 1, "tls_cert") != LUA_TNIL) tls_cert = luaL_checkstring(L, -1);
    if (lua_getfield(L, 1, "tls_key") != LUA_TNIL) tls_key = luaL_checkstring(L, -1);
  }
  if ((tls_cert == NULL) != (tls_key == NULL))
    return luaL_argerror(L, 1, "tls_cert and tls_key go together");
  if (tls_cert && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
    return luaL_argerror(L, 1, "this libmicrohttpd was built without TLS");
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
    return luaL_argerror(L, 1, "host must be an IPv4 address");
  if (port < 0 || port > 65535) return luaL_argerror(L, 1, "port out of range");
  if (!(max_body >= 0) || max_body > (lua_Number)(SIZE_MAX / 2))
    return luaL_argerror(L, 1, "max_body out of range");
  if (spool_threshold != -1 && (!(spool_threshold >= 0) || spool_threshold > (lua_Number)(SIZE_MAX / 2)))
    return luaL_argerror(L, 1, "spool_threshold out of range");
  if (!tmpdir || !*tmpdir) tmpdir = "/tmp";
  sa.sin_port = htons((uint16_t)port);

  s = lua_newuserdatauv(L, sizeof *s, 0);
  memset(s, 0, sizeof *s); /* closed until the daemon starts */
  luaL_setmetatable(L, SERVER_MT);
  s->max_body = (size_t)max_body;
  s->spool_threshold = spool_threshold < 0 ? SIZE_MAX : (size_t)spool_threshold;
  s->tmpdir = copy_string(tmpdir);
  if (!s->tmpdir) return luaL_error(L, "httpd.listen: not enough memory");
  ignore_sigpipe();

  flags = MHD_ALLOW_SUSPEND_RESUME;
  if (getenv("GEOSERVICES_HTTPD_DEBUG")) flags |= MHD_USE_ERROR_LOG;
  if (tls_cert) {
    /* the server keeps its own copies for as long as the daemon runs */
    s->tls_cert = copy_string(tls_cert);
    s->tls_key = copy_string(tls_key);
    if (!s->tls_cert || !s->tls_key) {
      free_tls(s);
      return luaL_error(L, "httpd.listen: not enough memory");
    }
    flags |= MHD_USE_TLS;
  }
  errno = 0;
  if (s->tls_cert)
    s->daemon = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_TIMEOUT, CONNECTION_TIMEOUT_S,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_HTTPS_MEM_KEY, s->tls_key, MHD_OPTION_HTTPS_MEM_CERT, s->tls_cert, MHD_OPTION_END);
  else
    s->daemon = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_TIMEOUT, CONNECTION_TIMEOUT_S,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_END);
  err = errno;
  if (!s->daemon) {
    free_tls(s);
    free(s->tmpdir);
    s->tmpdir = NULL;
    lua_pushnil(L);
    lua_pushfstring(L, "cannot listen on %s:%d: %s", host, (int)port,
                    err ? strerror(err) : "MHD_start_daemon failed");
    lua_pushstring(L, err == EADDRINUSE ? "address_in_use" : "listen_failed");
    return 3;
  }
  return 1;
}

static int l_server_port(lua_State *L) {
  server *s = check_server(L, 1);
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
  if (!di) return luaL_error(L, "cannot read the bound port");
  lua_pushinteger(L, di->port);
  return 1;
}

/* One MHD_run (sends responses to exchanges resumed since the last step),
 * then select() for at most min(timeout, MHD timeout), then process. */
static void pump(server *s, lua_Integer timeout_ms) {
  fd_set rs, ws, es;
  MHD_socket maxfd = -1;
  MHD_UNSIGNED_LONG_LONG mt;
  struct timeval tv, *tvp = NULL;
  long long wait = timeout_ms;
  MHD_run(s->daemon);
  FD_ZERO(&rs);
  FD_ZERO(&ws);
  FD_ZERO(&es);
  if (MHD_get_fdset2(s->daemon, &rs, &ws, &es, &maxfd, FD_SETSIZE) != MHD_YES) {
    MHD_run(s->daemon);
    return;
  }
  if (MHD_get_timeout(s->daemon, &mt) == MHD_YES && (wait < 0 || mt < (MHD_UNSIGNED_LONG_LONG)wait))
    wait = (long long)mt;
  if (s->qhead) wait = 0; /* something to return already */
  if (wait >= 0) {
    tv.tv_sec = (time_t)(wait / 1000);
    tv.tv_usec = (suseconds_t)((wait % 1000) * 1000);
    tvp = &tv;
  }
  if (select(maxfd + 1, &rs, &ws, &es, tvp) < 0) {
    MHD_run(s->daemon); /* EINTR: just make progress */
    return;
  }
  MHD_run_from_select(s->daemon, &rs, &ws, &es);
}

static void push_request_table(lua_State *L, req *r) {
  size_t i = 0;
  lua_createtable(L, 0, 7);
  lua_pushstring(L, r->method);
  lua_setfield(L, -2, "method");
  lua_pushstring(L, r->uri);
  lua_setfield(L, -2, "path");
  lua_pushstring(L, r->query);
  lua_setfield(L, -2, "query");
  lua_pushstring(L, r->version);
  lua_setfield(L, -2, "version");
  if (r->spool_path) {
    lua_pushstring(L, r->spool_path);
    lua_setfield(L, -2, "body_path");
  } else {
    lua_pushlstring(L, r->body.data ? r->body.data : "", r->body.len);
    lua_setfield(L, -2, "body");
  }
  lua_pushinteger(L, (lua_Integer)r->body_size);
  lua_setfield(L, -2, "body_size");
  lua_newtable(L);
  while (i < r->hdrs.len) {
    const char *k = r->hdrs.data + i, *v;
    i += strlen(k) + 1;
    v = r->hdrs.data + i;
    i += strlen(v) + 1;
    if (lua_getfield(L, -1, k) == LUA_TSTRING) { /* repeated header: join */
      lua_pushliteral(L, ", ");
      lua_pushstring(L, v);
      lua_concat(L, 3);
    } else {
      lua_pop(L, 1);
      lua_pushstring(L, v);
    }
    lua_setfield(L, -2, k);
  }
  lua_setfield(L, -2, "headers");
}

/* Set by the SIGTERM handler of httpd.catch_terminate(). */
static volatile sig_atomic_t terminate_requested;

static void on_terminate(int sig) {
  (void)sig;
  terminate_requested = 1;
}

static int l_catch_terminate(lua_State *L) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_terminate;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0; /* no SA_RESTART: a select() waiting in step() returns at once */
  if (sigaction(SIGTERM, &sa, NULL) != 0) return luaL_error(L, "catch_terminate: %s", strerror(errno));
  return 0;
}

static int l_server_step(lua_State *L) {
  server *s = check_server(L, 1);
  lua_Integer timeout = luaL_optinteger(L, 2, 0);
  lua_Integer n = 0;
  if (terminate_requested) return luaL_error(L, "terminated");
  lua_newtable(L);
  pump(s, timeout);
  if (terminate_requested) return luaL_error(L, "terminated");
  while (s->qhead) {
    req *r = s->qhead;
    exchange *e = lua_newuserdatauv(L, sizeof *e, 1);
    memset(e, 0, sizeof *e); /* closed until linked below */
    luaL_setmetatable(L, EXCHANGE_MT);
    push_request_table(L, r);
    lua_setiuservalue(L, -2, 1);
    /* Everything that can raise is done: link the two sides. */
    queue_remove(s, r);
    r->state = RQ_HANDED;
    r->ex = e;
    e->r = r;
    memcpy(e->peer, r->peer, sizeof e->peer);
    geoservices_buf_free(&r->body); /* Lua has its copy */
    geoservices_buf_free(&r->hdrs);
    lua_rawseti(L, -2, ++n);
  }
  return 1;
}

static int l_server_close(lua_State *L) {
  server_shutdown(luaL_checkudata(L, 1, SERVER_MT));
  return 0;
}

static int l_server_tostring(lua_State *L) {
  server *s = luaL_checkudata(L, 1, SERVER_MT);
  if (s->daemon) lua_pushfstring(L, SERVER_MT " (%p)", (void *)s);
  else lua_pushliteral(L, SERVER_MT " (closed)");
  return 1;
}

/* ---- Exchange ------------------------------------------------------------ */

static exchange *check_exchange(lua_State *L, int idx) {
  return luaL_checkudata(L, idx, EXCHANGE_MT);
}

static exchange *check_open_exchange(lua_State *L, int idx) {
  exchange *e = check_exchange(L, idx);
  if (e->answered) luaL_error(L, "exchange already answered");
  if (!e->r) luaL_error(L, "attempt to use a closed exchange");
  return e;
}

/* Detach from the req; a still-suspended req is resumed as dropped. */
static void exchange_release(exchange *e, struct MHD_Response *resp, unsigned status, int drop) {
  req *r = e->r;
  if (!r) return;
  r->ex = NULL;
  e->r = NULL;
  if (r->state != RQ_HANDED) return;
  r->resp = resp;
  r->status = status;
  r->state = drop ? RQ_DROPPED : RQ_ANSWERED;
  MHD_resume_connection(r->conn);
}

static int l_exchange_close(lua_State *L) {
  exchange_release(check_exchange(L, 1), NULL, 0, 1);
  return 0;
}

static int file_failure(lua_State *L, const char *path, int err) {
  lua_pushnil(L);
  lua_pushfstring(L, "%s: %s", path, strerror(err));
  lua_pushliteral(L, "file");
  return 3;
}

static int l_exchange_respond(lua_State *L) {
  exchange *e = check_open_exchange(L, 1);
  lua_Integer status = 200;
  const char *body = NULL, *file = NULL, *fault = NULL, *k, *v;
  size_t blen = 0;
  int mid = 0, hidx;
  struct MHD_Response *resp = NULL;

  /* Read and check every argument first: nothing below may raise while an
   * MHD response is held, except after destroying it. */
  luaL_checktype(L, 2, LUA_TTABLE);
  if (lua_getfield(L, 2, "status") != LUA_TNIL) status = luaL_checkinteger(L, -1);
  if (status < 100 || status > 999) return luaL_argerror(L, 2, "status out of range");
  if (lua_getfield(L, 2, "fault") != LUA_TNIL) fault = luaL_checkstring(L, -1);
  if (lua_getfield(L, 2, "body") != LUA_TNIL) body = luaL_checklstring(L, -1, &blen);
  if (lua_getfield(L, 2, "file") != LUA_TNIL) file = luaL_checkstring(L, -1);
  if (body && file) return luaL_argerror(L, 2, "give body or file, not both");
  if (fault) {
    if (!strcmp(fault, "reset_mid_body") || !strcmp(fault, "truncate")) mid = 1;
    else if (strcmp(fault, "reset")) return luaL_argerror(L, 2, "unknown fault");
  }
  lua_newtable(L); /* headers, normalised to string -> string */
  hidx = lua_gettop(L);
  if (lua_getfield(L, 2, "headers") != LUA_TNIL) {
    luaL_checktype(L, -1, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1))
        return luaL_argerror(L, 2, "headers must map strings to strings");
      lua_pushvalue(L, -2);
      lua_pushstring(L, lua_tostring(L, -2));
      lua_settable(L, hidx);
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);

  if (fault && !mid) {
    exchange_release(e, NULL, 0, 1);
    lua_pushboolean(L, 1);
    return 1;
  }
  if (file) {
    struct stat st;
    int fd = open(file, O_RDONLY);
    if (fd < 0) return file_failure(L, file, errno);
    errno = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      int err = errno;
      close(fd);
      return file_failure(L, file, err ? err : EISDIR);
    }
    resp = mid ? partial_response((uint64_t)st.st_size, NULL, fd)
               : MHD_create_response_from_fd64((uint64_t)st.st_size, fd);
    if (!resp) close(fd);
  } else if (mid) {
    resp = partial_response(blen, body ? body : "", -1);
  } else {
    /* The single copy of the body: MHD frees it with the response. */
    char *copy = malloc(blen ? blen : 1);
    if (copy) {
      if (blen) memcpy(copy, body, blen);
      resp = MHD_create_response_from_buffer(blen, copy, MHD_RESPMEM_MUST_FREE);
      if (!resp) free(copy);
    }
  }
  if (!resp) return luaL_error(L, "cannot create response (out of memory)");

  lua_pushnil(L);
  while (lua_next(L, hidx)) {
    k = lua_tostring(L, -2);
    v = lua_tostring(L, -1);
    lua_pop(L, 1);
    if (!strcasecmp(k, "content-length")) continue; /* MHD sets it from the body */
    if (MHD_add_response_header(resp, k, v) != MHD_YES) {
      MHD_destroy_response(resp);
      return luaL_error(L, "invalid response header '%s'", k);
    }
  }
  exchange_release(e, resp, (unsigned)status, 0);
  e->answered = 1;
  lua_pushboolean(L, 1);
  return 1;
}

static int l_exchange_tmpfile(lua_State *L) {
  exchange *e = check_open_exchange(L, 1);
  req *r = e->r;
  char *path;
  int fd;
  if (r->n_owned == r->cap_owned) {
    size_t cap = r->cap_owned ? r->cap_owned * 2 : 4;
    char **owned = realloc(r->owned, cap * sizeof *owned);
    if (!owned) return luaL_error(L, "tmpfile: not enough memory");
    r->owned = owned;
    r->cap_owned = cap;
  }
  fd = make_temp(r->srv, "part", &path);
  if (fd < 0) return file_failure(L, r->srv->tmpdir, errno);
  close(fd);
  r->owned[r->n_owned++] = path;
  lua_pushstring(L, path); /* may raise: the path is owned by r already */
  return 1;
}

static int l_exchange_request(lua_State *L) {
  check_exchange(L, 1);
  lua_getiuservalue(L, 1, 1);
  return 1;
}

static int l_exchange_peer(lua_State *L) {
  exchange *e = check_exchange(L, 1);
  lua_pushstring(L, e->peer);
  return 1;
}

static int l_exchange_gc(lua_State *L) {
  exchange_release(check_exchange(L, 1), NULL, 0, 1);
  return 0;
}

/* Methods first, then the request fields (ex.method, ex.body, ...). */
static int l_exchange_index(lua_State *L) {
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
  if (lua_getiuservalue(L, 1, 1) != LUA_TTABLE) return 0;
  lua_pushvalue(L, 2);
  lua_rawget(L, -2);
  return 1;
}

static int l_exchange_tostring(lua_State *L) {
  exchange *e = check_exchange(L, 1);
  if (e->r) lua_pushfstring(L, EXCHANGE_MT " (%p)", (void *)e);
  else lua_pushliteral(L, EXCHANGE_MT " (closed)");
  return 1;
}


static const luaL_Reg server_methods[] = {{"port", l_server_port},
                                          {"step", l_server_step},
                                          {"close", l_server_close},
                                          {NULL, NULL}};
static const luaL_Reg server_meta[] = {{"__gc", l_server_close},
                                       {"__close", l_server_close},
                                       {"__tostring", l_server_tostring},
                                       {NULL, NULL}};
static const luaL_Reg exchange_methods[] = {{"request", l_exchange_request},
                                            {"respond", l_exchange_respond},
                                            {"tmpfile", l_exchange_tmpfile},
                                            {"close", l_exchange_close},
                                            {"peer", l_exchange_peer},
                                            {NULL, NULL}};
static const luaL_Reg exchange_meta[] = {{"__gc", l_exchange_gc},
                                         {"__close", l_exchange_gc},
                                         {"__tostring", l_exchange_tostring},
                                         {NULL, NULL}};

GEOSERVICES_API int luaopen_geoservices_httpd(lua_State *L) {
  geoservices_new_class(L, SERVER_MT, server_methods, server_meta);
  geoservices_new_class(L, EXCHANGE_MT, NULL, exchange_meta);
  luaL_getmetatable(L, EXCHANGE_MT);
  luaL_newlib(L, exchange_methods);
  lua_pushcclosure(L, l_exchange_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushcfunction(L, l_listen);
  lua_setfield(L, -2, "listen");
  geoservices_open_form_file(L); /* httpd.decode_form_file (emulator/form_file.c) */
  lua_pushcfunction(L, l_catch_terminate);
  lua_setfield(L, -2, "catch_terminate");
  return 1;
}
