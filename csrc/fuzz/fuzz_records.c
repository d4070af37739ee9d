/* libFuzzer target: the record extractor, fed in two pieces with consumes in
 * between, must produce a well-formed tape (walked here) or an error, never a
 * crash, and the same verdict as a single feed; with the second piece
 * parsed on a worker thread, the same tape and verdict too, whether it is
 * fed or comes through fill() a few bytes at a time. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json/records.h"
#include "tests/fill_source.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* the bytes each key id stood for so far in this run */
static uint32_t seen_len[GEOSERVICES_TAPE_STRING_IDS];
static char seen_text[GEOSERVICES_TAPE_STRING_IDS][GEOSERVICES_TAPE_KEY_ID_MAXLEN];

/* An id (2 bytes at at) must name the same bytes every time it comes. */
static void check_id(const char *at, uint32_t len, const char *bytes) {
  uint16_t id;
  memcpy(&id, at, 2);
  if (id >= GEOSERVICES_TAPE_STRING_IDS || len == 0 || len > GEOSERVICES_TAPE_KEY_ID_MAXLEN) abort();
  if (seen_len[id] && (seen_len[id] != len || memcmp(seen_text[id], bytes, len) != 0)) abort();
  seen_len[id] = len;
  memcpy(seen_text[id], bytes, len);
}

static size_t walk_value(const char *t, size_t p, size_t end) {
  int op;
  uint32_t n, i, len;
  if (p >= end) abort();
  op = (unsigned char)t[p++];
  switch (op) {
    case TAPE_OBJECT:
    case TAPE_ARRAY:
      if (p + 4 > end) abort();
      memcpy(&n, t + p, 4);
      p += 4;
      for (i = 0; i < n; i++) {
        if (op == TAPE_OBJECT) {
          size_t id_bytes = p < end && t[p] == TAPE_KEY_ID ? 2 : 0;
          if (p + 5 + id_bytes > end || (t[p] != TAPE_KEY && !id_bytes)) abort();
          memcpy(&len, t + p + 1 + id_bytes, 4);
          if (p + 5 + id_bytes + len > end) abort();
          if (id_bytes) check_id(t + p + 1, len, t + p + 7);
          p += 5 + id_bytes + len;
        }
        p = walk_value(t, p, end);
      }
      return p;
    case TAPE_STRING_ID: /* an id names the same bytes every time, as a key's */
      if (p + 6 > end) abort();
      memcpy(&len, t + p + 2, 4);
      if (p + 6 + len > end) abort();
      check_id(t + p, len, t + p + 6);
      return p + 6 + len;
    case TAPE_STRING:
      if (p + 4 > end) abort();
      memcpy(&len, t + p, 4);
      if (p + 4 + len > end) abort();
      return p + 4 + len;
    case TAPE_INTEGER:
    case TAPE_DOUBLE:
      if (p + 8 > end) abort();
      return p + 8;
    case TAPE_TRUE:
    case TAPE_FALSE:
    case TAPE_NULL:
      return p;
    default:
      abort();
  }
}

static void walk(const char *t, size_t len) {
  size_t p = 0;
  uint32_t key_len;
  while (p < len) {
    int op = (unsigned char)t[p++];
    if (op == TAPE_RECORD) {
      if ((unsigned char)t[p] >= RECORD_KIND_COUNT) abort();
      p += 9;
      memcpy(&key_len, t + p, 4);
      p = walk_value(t, p + 4 + key_len, len);
    } else if (op == TAPE_LAYER_ID) {
      p += 16;
    } else if (op == TAPE_ENTRY_END) {
      p += 8;
    } else {
      abort();
    }
  }
  if (p != len) abort();
}

/* worker_after 0: this thread; 1: the second piece on a worker. fill_step
 * 0: the second piece is fed; else it comes through fill() that many bytes
 * at a time (from_source: called by the worker itself). The tape of a
 * successful run is appended to out. */
static int run(const uint8_t *data, size_t size, size_t split, size_t worker_after, size_t fill_step,
               int from_source, geoservices_buf *out) {
  geoservices_json_limits lim = {64, 1 << 16};
  geoservices_records *r = geoservices_records_new(&lim);
  size_t len;
  const char *tape;
  int rc;
  if (!r) abort();
  memset(seen_len, 0, sizeof seen_len); /* ids are the extractor's own */
  geoservices_records_set_worker_after(r, worker_after);
  rc = geoservices_records_feed(r, (const char *)data, split);
  tape = geoservices_records_tape(r, &len);
  walk(tape, len);
  geoservices_buf_append(out, tape, len);
  geoservices_records_consume(r);
  if (rc == 0 && fill_step == 0) rc = geoservices_records_feed(r, (const char *)data + split, size - split);
  if (rc == 0 && fill_step > 0) {
    fill_source src = {(const char *)data + split, size - split, 0, fill_step};
    long n = 1;
    if (from_source && geoservices_records_source(r, fill_from, &src, 4096) == 0) {
      unsigned long seen = 0;
      geoservices_source_status st;
      do { /* the worker reads by itself */
        rc = geoservices_records_await(r, &seen, &st);
        tape = geoservices_records_tape(r, &len);
        walk(tape, len);
        geoservices_buf_append(out, tape, len);
        geoservices_records_consume(r);
      } while (rc == 0 && st.state == GEOSERVICES_SOURCE_READING);
      geoservices_records_end_source(r);
      if (rc == 0 && (st.state != GEOSERVICES_SOURCE_ENDED || src.pos != src.len)) abort();
      n = 0;
    }
    while (rc == 0 && n > 0) {
      rc = geoservices_records_fill(r, fill_from, &src, 4096, &n);
      tape = geoservices_records_tape(r, &len);
      walk(tape, len);
      geoservices_buf_append(out, tape, len);
      geoservices_records_consume(r);
    }
  }
  if (rc == 0) rc = geoservices_records_finish(r);
  tape = geoservices_records_tape(r, &len);
  if (rc == 0) walk(tape, len);
  geoservices_buf_append(out, tape, len);
  geoservices_records_free(r);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t at = size ? data[size - 1] % (size + 1) : 0;
  size_t fill_step = size ? (size_t)data[0] % 13 + 1 : 1;
  geoservices_buf whole, split, worker, filled, sourced;
  int rc_whole, rc_split, rc_worker, rc_filled, rc_sourced;
  geoservices_buf_init(&whole, 0);
  geoservices_buf_init(&split, 0);
  geoservices_buf_init(&worker, 0);
  geoservices_buf_init(&filled, 0);
  geoservices_buf_init(&sourced, 0);
  rc_whole = run(data, size, size, 0, 0, 0, &whole);
  rc_split = run(data, size, at, 0, 0, 0, &split);
  rc_worker = run(data, size, at, 1, 0, 0, &worker);
  rc_filled = run(data, size, at, 1, fill_step, 0, &filled);
  rc_sourced = run(data, size, at, 1, fill_step, 1, &sourced);
  if ((rc_whole == 0) != (rc_split == 0)) abort();
  if (rc_worker != rc_split || rc_filled != rc_split || rc_sourced != rc_split) abort();
  if (rc_split == 0 && (split.len != sourced.len || memcmp(split.data, sourced.data, split.len) != 0)) abort();
  if (rc_split == 0 && (split.len != worker.len || memcmp(split.data, worker.data, split.len) != 0)) abort();
  if (rc_split == 0 && (split.len != filled.len || memcmp(split.data, filled.data, split.len) != 0)) abort();
  geoservices_buf_free(&whole);
  geoservices_buf_free(&split);
  geoservices_buf_free(&worker);
  geoservices_buf_free(&filled);
  geoservices_buf_free(&sourced);
  return 0;
}
