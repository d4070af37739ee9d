/* The record extractor (records.h): its life, the feeding, parsing on a
 * worker thread once the document is large, and the tape handed to the
 * reader. The parser's callbacks, which write the tape, are records_parse.c. */
#include "json/records_internal.h"

#include <stdlib.h>
#include <string.h>

const char *const geoservices_record_kind_names[RECORD_KIND_COUNT] = {
  "field", "layer_field",
  "add", "update", "delete",
  "add_result", "update_result", "delete_result",
  "add_attachment", "update_attachment", "delete_attachment",
  "add_attachment_result", "update_attachment_result", "delete_attachment_result",
};

const char *geoservices_tape_skip(const char *p) {
  /* containers are walked with a count of values still to skip, no recursion */
  uint64_t left = 1;
  while (left > 0) {
    int op = (unsigned char)*p++;
    left--;
    switch (op) {
      case TAPE_OBJECT: {
        uint32_t n = geoservices_tape_u32(&p);
        left += 2 * (uint64_t)n; /* keys and values */
        break;
      }
      case TAPE_ARRAY: left += geoservices_tape_u32(&p); break;
      case TAPE_KEY_ID:
      case TAPE_STRING_ID: p += 2; /* its id, then as TAPE_KEY */ /* fall through */
      case TAPE_KEY:
      case TAPE_STRING: p += geoservices_tape_u32(&p); break;
      case TAPE_INTEGER:
      case TAPE_DOUBLE: p += 8; break;
      default: break; /* true, false, null */
    }
  }
  return p;
}

/* ---- public API ----------------------------------------------------------- */

geoservices_records *geoservices_records_new(const geoservices_json_limits *limits) {
  geoservices_records *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->max_depth = limits && limits->max_depth ? limits->max_depth : GEOSERVICES_JSON_DEFAULT_DEPTH;
  r->parser = geoservices_jsonstream_new(&geoservices_records_handlers, r, limits);
  geoservices_buf_init(&r->tape, 0);
  geoservices_buf_init(&r->ready, 0);
  geoservices_buf_init(&r->out, 0);
  geoservices_buf_init(&r->scratch, 0);
  r->entry = -1;
  r->worker_after = GEOSERVICES_RECORDS_WORKER_AFTER;
  if (!r->parser) {
    geoservices_records_free(r);
    return NULL;
  }
  return r;
}

void geoservices_records_set_worker_after(geoservices_records *r, size_t bytes) {
  r->worker_after = bytes;
}

void geoservices_records_free(geoservices_records *r) {
  if (!r) return;
  geoservices_parse_worker_stop(r->worker);
  if (r->parser) geoservices_jsonstream_free(r->parser);
  free(r->count_at);
  free(r->counts);
  free(r->is_array);
  geoservices_buf_free(&r->tape);
  geoservices_buf_free(&r->ready);
  geoservices_buf_free(&r->out);
  geoservices_buf_free(&r->scratch);
  free(r);
}

/* Drops the complete part of the extractor's own tape (the partial record
 * moves to its start). */
static void consume_tape(geoservices_records *r) {
  size_t rest = r->tape.len - r->complete, i;
  if (r->complete == 0) return;
  if (rest) memmove(r->tape.data, r->tape.data + r->complete, rest);
  /* the partial record's open containers moved with it */
  if (r->mode == MODE_CAPTURE)
    for (i = 0; i < r->sub_depth; i++) r->count_at[i] -= r->complete;
  r->tape.len = rest;
  r->complete = 0;
}

/* ---- parsing on the worker thread ----------------------------------------- */

static int worker_parse(void *ctx, const char *bytes, size_t n) {
  geoservices_records *r = ctx;
  if (r->publish_failed) return GEOSERVICES_JSON_ENOMEM;
  return geoservices_jsonstream_feed(r->parser, bytes, n);
}

/* Under the worker's lock: the span's complete records go to `ready`. */
static void worker_publish(void *ctx) {
  geoservices_records *r = ctx;
  if (r->complete > 0) {
    if (geoservices_buf_append(&r->ready, r->tape.data, r->complete) != 0) {
      /* the next span fails with ENOMEM, or finish() does */
      r->error = "out of memory";
      r->publish_failed = 1;
      return;
    }
    consume_tape(r);
  }
  r->published_partial = r->tape.len;
}

static void start_worker(geoservices_records *r) {
  if (!r->threaded) {
    /* what was parsed here and not consumed yet is read from `out` from now on */
    if (geoservices_buf_append(&r->out, r->tape.data, r->complete) != 0) {
      r->worker_after = 0; /* no memory to hand over: parse here, as before */
      return;
    }
    consume_tape(r);
    r->threaded = 1;
  }
  r->worker = geoservices_parse_worker_start(GEOSERVICES_RECORDS_WORKER_RING, worker_parse, worker_publish, r);
  if (!r->worker) r->worker_after = 0; /* no thread to be had: parse here, publishing as the worker would */
}

/* Stops the worker once the document ended or failed: its state is final. */
static int end_worker(geoservices_records *r, int rc) {
  geoservices_parse_worker_stop(r->worker);
  r->worker = NULL;
  r->worker_after = 0;
  return rc;
}

int geoservices_records_feed(geoservices_records *r, const char *chunk, size_t len) {
  int rc;
  if (r->publish_failed) return GEOSERVICES_JSON_ENOMEM;
  if (!r->worker && r->worker_after && r->fed >= r->worker_after && !r->error) start_worker(r);
  r->fed += len;
  if (r->worker) {
    rc = geoservices_parse_worker_write(r->worker, chunk, len);
    return rc != 0 ? end_worker(r, rc) : 0;
  }
  rc = geoservices_jsonstream_feed(r->parser, chunk, len);
  if (r->threaded) worker_publish(r);
  return r->publish_failed ? GEOSERVICES_JSON_ENOMEM : rc;
}

#define FILL_SCRATCH ((size_t)64 * 1024)

int geoservices_records_fill(geoservices_records *r, geoservices_fill_fn fill, void *ctx, size_t max, long *n) {
  int rc;
  *n = 0;
  if (r->publish_failed) return GEOSERVICES_JSON_ENOMEM;
  if (!r->worker && r->worker_after && r->fed >= r->worker_after && !r->error) start_worker(r);
  if (r->worker) {
    rc = geoservices_parse_worker_fill(r->worker, fill, ctx, max, n);
    if (*n > 0) r->fed += (size_t)*n;
    return rc != 0 ? end_worker(r, rc) : 0;
  }
  if (max > FILL_SCRATCH) max = FILL_SCRATCH;
  if (r->scratch.cap < max && geoservices_buf_reserve(&r->scratch, max)) return GEOSERVICES_JSON_ENOMEM;
  *n = fill(ctx, r->scratch.data, max);
  return *n > 0 ? geoservices_records_feed(r, r->scratch.data, (size_t)*n) : 0;
}

int geoservices_records_source(geoservices_records *r, geoservices_fill_fn fill, void *ctx, size_t chunk) {
  if (r->publish_failed) return GEOSERVICES_JSON_ENOMEM;
  if (r->error) return GEOSERVICES_JSON_EABORT;
  if (!r->worker && r->worker_after) start_worker(r);
  if (!r->worker) return -1;
  geoservices_parse_worker_source(r->worker, fill, ctx, chunk);
  r->source_fed = r->fed;
  return 0;
}

int geoservices_records_await(geoservices_records *r, unsigned long *seen, geoservices_source_status *st) {
  int rc = geoservices_parse_worker_await(r->worker, seen, st);
  r->fed = r->source_fed + st->bytes;
  if (rc != 0) {
    geoservices_records_end_source(r);
    end_worker(r, rc); /* as a failed feed: the error is final, its message readable */
  }
  return rc;
}

void geoservices_records_end_source(geoservices_records *r) {
  if (r->worker) r->fed = r->source_fed + geoservices_parse_worker_end_source(r->worker);
}

size_t geoservices_records_fed(const geoservices_records *r) { return r->fed; }

int geoservices_records_finish(geoservices_records *r) {
  int rc;
  if (r->worker) {
    rc = geoservices_parse_worker_wait(r->worker);
    end_worker(r, rc);
    if (rc != 0) return rc;
  }
  if (r->publish_failed) return GEOSERVICES_JSON_ENOMEM;
  rc = geoservices_jsonstream_finish(r->parser);
  if (r->threaded) worker_publish(r);
  return r->publish_failed ? GEOSERVICES_JSON_ENOMEM : rc;
}

const char *geoservices_records_error(const geoservices_records *r) {
  return r->error ? r->error : geoservices_jsonstream_error(r->parser);
}

size_t geoservices_records_offset(const geoservices_records *r) {
  return geoservices_jsonstream_offset(r->parser);
}

const char *geoservices_records_tape(geoservices_records *r, size_t *len) {
  if (!r->threaded) {
    *len = r->complete;
    return r->tape.data;
  }
  if (r->out.len == 0) {
    geoservices_buf swap;
    if (r->worker) geoservices_parse_worker_lock(r->worker);
    swap = r->out;
    r->out = r->ready;
    r->ready = swap;
    if (r->worker) geoservices_parse_worker_unlock(r->worker);
  }
  *len = r->out.len;
  return r->out.data;
}

void geoservices_records_consume(geoservices_records *r) {
  if (r->threaded) r->out.len = 0;
  else consume_tape(r);
}

size_t geoservices_records_pending(geoservices_records *r) {
  size_t n;
  if (!r->threaded) return r->tape.len;
  n = r->out.len;
  if (r->worker) {
    geoservices_parse_worker_lock(r->worker);
    n += r->ready.len + r->published_partial;
    geoservices_parse_worker_unlock(r->worker);
  } else {
    n += r->ready.len + r->tape.len;
  }
  return n;
}
