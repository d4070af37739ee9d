/* The parse worker (parse_worker.h): a ring buffer between one writer and
 * one parsing thread. head and tail count bytes since the start (never
 * wrapped), so head - tail is what waits; only the writer moves head and
 * only the worker moves tail, and each copies or parses outside the lock. */
#include "json/parse_worker.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* At most this much is parsed between two publishes, so the caller gets
 * records while a large write is still being parsed. */
#define SPAN_MAX ((size_t)64 * 1024)
/* Reading a source, the worker runs at most this many published spans ahead
 * of the caller (its await()s): the caller's backlog stays flat, whatever
 * the speed of either side. */
#define SOURCE_AHEAD 8
#define FIRST_READ ((size_t)16 * 1024)
/* The parser keeps its own explicit stack: the thread needs little. */
#define STACK_BYTES ((size_t)256 * 1024)

struct geoservices_parse_worker {
  pthread_mutex_t mu;
  pthread_cond_t has_bytes; /* the worker waits here for bytes (or stop) */
  pthread_cond_t progress;  /* the writer waits here for room, or for the worker to be idle */
  char *ring;
  size_t capacity;
  size_t head, tail;
  int parsing;              /* a span is being parsed outside the lock */
  int worker_waiting, writer_waiting;
  int stop;
  int error;
  /* a source the worker reads from itself (geoservices_parse_worker_source) */
  geoservices_fill_fn source;
  void *source_ctx;
  size_t source_chunk;
  int source_state;      /* GEOSERVICES_SOURCE_* */
  int source_errno;      /* errno of the read that failed */
  int in_source;         /* fill is running, outside the lock */
  size_t source_bytes;   /* read from the source so far */
  unsigned long publishes; /* spans published, so a caller can wait for the next */
  unsigned long acked;     /* publishes the caller had seen at its last await */
  geoservices_parse_fn parse;
  geoservices_publish_fn publish;
  void *ctx;
  pthread_t thread;
};

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* Under the lock: every byte in the ring was parsed and published. */
static int all_published(const geoservices_parse_worker *w) { return w->head == w->tail && !w->parsing; }

/* Under the lock, with the ring empty: one read of the source into the ring
 * (the lock is let go while fill runs, so the caller can read what was
 * published meanwhile). */
static void read_source(geoservices_parse_worker *w) {
  /* a small first read: the caller gets its first records sooner */
  size_t at = w->head % w->capacity,
         k = min_size(min_size(w->capacity - at, w->source_chunk), w->source_bytes ? SIZE_MAX : FIRST_READ);
  long n;
  int e;
  w->in_source = 1;
  pthread_mutex_unlock(&w->mu);
  errno = 0;
  n = w->source(w->source_ctx, w->ring + at, k);
  e = errno; /* this thread's: the caller's errno never sees it */
  pthread_mutex_lock(&w->mu);
  w->in_source = 0;
  if (w->writer_waiting) pthread_cond_broadcast(&w->progress); /* end_source may be waiting */
  if (n > 0) {
    w->head += (size_t)n;
    w->source_bytes += (size_t)n;
    return;
  }
  w->source_state = n == 0 ? GEOSERVICES_SOURCE_ENDED : GEOSERVICES_SOURCE_FAILED;
  w->source_errno = n == 0 ? 0 : e;
}

static void *run(void *arg) {
  geoservices_parse_worker *w = arg;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    size_t at, span;
    int rc = 0;
    while (w->head == w->tail && !w->stop) {
      if (w->source && w->source_state == GEOSERVICES_SOURCE_READING && !w->error &&
          w->publishes - w->acked < SOURCE_AHEAD) {
        read_source(w);
        continue;
      }
      w->worker_waiting = 1;
      pthread_cond_wait(&w->has_bytes, &w->mu);
      w->worker_waiting = 0;
    }
    if (w->stop) break;
    at = w->tail % w->capacity;
    span = min_size(min_size(w->head - w->tail, w->capacity - at), SPAN_MAX);
    w->parsing = 1;
    if (!w->error) {
      pthread_mutex_unlock(&w->mu);
      rc = w->parse(w->ctx, w->ring + at, span);
      pthread_mutex_lock(&w->mu);
      if (rc) w->error = rc;
      w->publish(w->ctx);
      w->publishes++;
    }
    w->tail += span;
    w->parsing = 0;
    if (w->writer_waiting) pthread_cond_broadcast(&w->progress);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

geoservices_parse_worker *geoservices_parse_worker_start(size_t capacity, geoservices_parse_fn parse,
                                                         geoservices_publish_fn publish, void *ctx) {
  geoservices_parse_worker *w;
  pthread_attr_t attr;
  sigset_t all, old;
  int started;
  if (capacity == 0) return NULL;
  w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->ring = malloc(capacity);
  if (!w->ring) {
    free(w);
    return NULL;
  }
  w->capacity = capacity;
  w->parse = parse;
  w->publish = publish;
  w->ctx = ctx;
  if (pthread_mutex_init(&w->mu, NULL) != 0) goto no_mutex;
  if (pthread_cond_init(&w->has_bytes, NULL) != 0) goto no_has_bytes;
  if (pthread_cond_init(&w->progress, NULL) != 0) goto no_progress;
  if (pthread_attr_init(&attr) != 0) goto no_thread;
  pthread_attr_setstacksize(&attr, STACK_BYTES); /* a hint: the default stack serves too */
  /* the thread starts with every signal blocked: Ctrl-C and the like stay
   * with the caller's thread, whose poll() they must interrupt */
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  started = pthread_create(&w->thread, &attr, run, w) == 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (started) return w;
no_thread:
  pthread_cond_destroy(&w->progress);
no_progress:
  pthread_cond_destroy(&w->has_bytes);
no_has_bytes:
  pthread_mutex_destroy(&w->mu);
no_mutex:
  free(w->ring);
  free(w);
  return NULL;
}

int geoservices_parse_worker_write(geoservices_parse_worker *w, const char *bytes, size_t n) {
  int rc;
  pthread_mutex_lock(&w->mu);
  while (n > 0 && !w->error) {
    size_t room = w->capacity - (w->head - w->tail), at, k;
    if (room == 0) {
      w->writer_waiting = 1;
      pthread_cond_wait(&w->progress, &w->mu);
      w->writer_waiting = 0;
      continue;
    }
    at = w->head % w->capacity;
    k = min_size(min_size(n, room), w->capacity - at);
    /* [head, head + k) is room the worker does not read: copy unlocked */
    pthread_mutex_unlock(&w->mu);
    memcpy(w->ring + at, bytes, k);
    pthread_mutex_lock(&w->mu);
    w->head += k;
    bytes += k;
    n -= k;
    if (w->worker_waiting) pthread_cond_signal(&w->has_bytes);
  }
  rc = w->error;
  pthread_mutex_unlock(&w->mu);
  return rc;
}

int geoservices_parse_worker_fill(geoservices_parse_worker *w, geoservices_fill_fn fill, void *ctx, size_t max,
                                  long *n) {
  size_t room, at, k;
  int rc;
  *n = 0;
  pthread_mutex_lock(&w->mu);
  while (!w->error && w->head - w->tail == w->capacity) {
    w->writer_waiting = 1;
    pthread_cond_wait(&w->progress, &w->mu);
    w->writer_waiting = 0;
  }
  if (w->error || max == 0) {
    rc = w->error;
    pthread_mutex_unlock(&w->mu);
    return rc;
  }
  room = w->capacity - (w->head - w->tail);
  at = w->head % w->capacity;
  k = min_size(min_size(max, room), w->capacity - at);
  /* [head, head + k) is room the worker does not read: fill it unlocked */
  pthread_mutex_unlock(&w->mu);
  *n = fill(ctx, w->ring + at, k);
  pthread_mutex_lock(&w->mu);
  if (*n > 0) {
    w->head += (size_t)*n;
    if (w->worker_waiting) pthread_cond_signal(&w->has_bytes);
  }
  rc = w->error;
  pthread_mutex_unlock(&w->mu);
  return rc;
}

int geoservices_parse_worker_wait(geoservices_parse_worker *w) {
  int rc;
  pthread_mutex_lock(&w->mu);
  while (!all_published(w)) {
    w->writer_waiting = 1;
    pthread_cond_wait(&w->progress, &w->mu);
    w->writer_waiting = 0;
  }
  rc = w->error;
  pthread_mutex_unlock(&w->mu);
  return rc;
}

void geoservices_parse_worker_source(geoservices_parse_worker *w, geoservices_fill_fn fill, void *ctx, size_t chunk) {
  pthread_mutex_lock(&w->mu);
  w->source = fill;
  w->source_ctx = ctx;
  w->source_chunk = chunk ? chunk : 1;
  w->source_state = GEOSERVICES_SOURCE_READING;
  w->source_errno = 0;
  w->source_bytes = 0;
  w->acked = w->publishes;
  if (w->worker_waiting) pthread_cond_signal(&w->has_bytes);
  pthread_mutex_unlock(&w->mu);
}

int geoservices_parse_worker_await(geoservices_parse_worker *w, unsigned long *seen, geoservices_source_status *st) {
  int rc;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    if (w->error || w->publishes != *seen || (w->source_state != GEOSERVICES_SOURCE_READING && all_published(w)))
      break;
    w->writer_waiting = 1;
    pthread_cond_wait(&w->progress, &w->mu);
    w->writer_waiting = 0;
  }
  *seen = w->acked = w->publishes;
  if (w->worker_waiting) pthread_cond_signal(&w->has_bytes); /* it may wait for the caller to catch up */
  rc = w->error;
  st->state = w->source_state;
  /* ended or failed counts only once what was read before is published */
  if (st->state != GEOSERVICES_SOURCE_READING && !all_published(w))
    st->state = GEOSERVICES_SOURCE_READING;
  st->read_errno = w->source_errno;
  st->bytes = w->source_bytes;
  pthread_mutex_unlock(&w->mu);
  return rc;
}

size_t geoservices_parse_worker_end_source(geoservices_parse_worker *w) {
  size_t bytes;
  pthread_mutex_lock(&w->mu);
  while (w->in_source) {
    w->writer_waiting = 1;
    pthread_cond_wait(&w->progress, &w->mu);
    w->writer_waiting = 0;
  }
  w->source = NULL;
  w->source_ctx = NULL;
  if (w->source_state == GEOSERVICES_SOURCE_READING) w->source_state = GEOSERVICES_SOURCE_NONE;
  bytes = w->source_bytes;
  pthread_mutex_unlock(&w->mu);
  return bytes;
}

void geoservices_parse_worker_lock(geoservices_parse_worker *w) { pthread_mutex_lock(&w->mu); }

void geoservices_parse_worker_unlock(geoservices_parse_worker *w) { pthread_mutex_unlock(&w->mu); }

void geoservices_parse_worker_stop(geoservices_parse_worker *w) {
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->stop = 1;
  pthread_cond_signal(&w->has_bytes);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->progress);
  pthread_cond_destroy(&w->has_bytes);
  pthread_mutex_destroy(&w->mu);
  free(w->ring);
  free(w);
}
