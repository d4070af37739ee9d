/* The parse worker (parse_worker.h): a ring buffer between one writer and
 * one parsing thread. head and tail count bytes since the start (never
 * wrapped), so head - tail is what waits; only the writer moves head and
 * only the worker moves tail, and each copies or parses outside the lock. */
#include "json/parse_worker.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* At most this much is parsed between two publishes, so the caller gets
 * records while a large write is still being parsed. */
#define SPAN_MAX ((size_t)64 * 1024)
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
  geoservices_parse_fn parse;
  geoservices_publish_fn publish;
  void *ctx;
  pthread_t thread;
};

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

static void *run(void *arg) {
  geoservices_parse_worker *w = arg;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    size_t at, span;
    int rc = 0;
    while (w->head == w->tail && !w->stop) {
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
  while (w->head != w->tail || w->parsing) {
    w->writer_waiting = 1;
    pthread_cond_wait(&w->progress, &w->mu);
    w->writer_waiting = 0;
  }
  rc = w->error;
  pthread_mutex_unlock(&w->mu);
  return rc;
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
