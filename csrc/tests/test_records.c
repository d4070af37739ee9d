/* Unit tests of the record extractor: the same tape for every split of a
 * document, records of every kind, structural errors, flat memory; each
 * once parsing in the caller's thread and once on a worker thread. */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "check.h"
#include "fill_source.h"
#include "json/records.h"

/* 0: parse in the caller's thread; else the worker takes over after this
 * many bytes (1: from the second feed on). */
static size_t worker_after;
/* 1: the bytes arrive through geoservices_records_fill instead of feed;
 * 2: the worker reads them itself (geoservices_records_source), or, when
 * no worker may run, fill() does */
static int use_fill;

/* Feeds doc in pieces of `step` bytes (0 = whole), consuming the tape after
 * each feed into `out`. Returns the feed/finish status. */
static int run(const char *doc, size_t step, geoservices_buf *out, size_t *max_pending) {
  geoservices_records *r = geoservices_records_new(NULL);
  size_t len = strlen(doc), pos = 0, tape_len;
  int rc = 0;
  const char *tape;
  if (!r) return -1;
  geoservices_records_set_worker_after(r, worker_after);
  if (step == 0) step = len ? len : 1;
  if (use_fill) {
    fill_source src;
    long n = 1;
    src.bytes = doc;
    src.len = len;
    src.pos = 0;
    src.step = step;
    if (use_fill == 2 && geoservices_records_source(r, fill_from, &src, 4096) == 0) {
      unsigned long seen = 0;
      geoservices_source_status st;
      do {
        rc = geoservices_records_await(r, &seen, &st);
        tape = geoservices_records_tape(r, &tape_len);
        geoservices_buf_append(out, tape, tape_len);
        if (max_pending && geoservices_records_pending(r) > *max_pending)
          *max_pending = geoservices_records_pending(r);
        geoservices_records_consume(r);
      } while (rc == 0 && st.state == GEOSERVICES_SOURCE_READING);
      geoservices_records_end_source(r);
      CHECK(rc != 0 || st.state == GEOSERVICES_SOURCE_ENDED);
      CHECK(rc != 0 || geoservices_records_fed(r) == len);
      n = 0;
    }
    while (n > 0 && rc == 0) {
      rc = geoservices_records_fill(r, fill_from, &src, 4096, &n);
      tape = geoservices_records_tape(r, &tape_len);
      geoservices_buf_append(out, tape, tape_len);
      if (max_pending && geoservices_records_pending(r) > *max_pending) *max_pending = geoservices_records_pending(r);
      geoservices_records_consume(r);
    }
    pos = len;
  }
  while (pos < len && rc == 0) {
    size_t n = len - pos < step ? len - pos : step;
    char *piece = malloc(n); /* exact-size copy: reads past a chunk are caught by valgrind */
    memcpy(piece, doc + pos, n);
    rc = geoservices_records_feed(r, piece, n);
    free(piece);
    pos += n;
    tape = geoservices_records_tape(r, &tape_len);
    geoservices_buf_append(out, tape, tape_len);
    if (max_pending && geoservices_records_pending(r) > *max_pending) *max_pending = geoservices_records_pending(r);
    geoservices_records_consume(r);
  }
  if (rc == 0) rc = geoservices_records_finish(r);
  tape = geoservices_records_tape(r, &tape_len);
  geoservices_buf_append(out, tape, tape_len);
  geoservices_records_free(r);
  return rc;
}

/* Walks one value of the tape; returns the position after it. */
static size_t skip_value(const geoservices_buf *t, size_t p) {
  int op = (unsigned char)t->data[p++];
  uint32_t n, i, len;
  switch (op) {
    case TAPE_OBJECT:
    case TAPE_ARRAY:
      memcpy(&n, t->data + p, 4);
      p += 4;
      for (i = 0; i < n; i++) {
        if (op == TAPE_OBJECT) { /* TAPE_KEY (or TAPE_KEY_ID, id), length, bytes */
          const char *at = t->data + p;
          geoservices_tape_key(&at, &len);
          p = (size_t)(at - t->data);
        }
        p = skip_value(t, p);
      }
      return p;
    case TAPE_STRING:
      memcpy(&len, t->data + p, 4);
      return p + 4 + len;
    case TAPE_STRING_ID:
      memcpy(&len, t->data + p + 2, 4);
      return p + 6 + len;
    case TAPE_INTEGER:
    case TAPE_DOUBLE:
      return p + 8;
    default:
      return p;
  }
}

/* Counts the records of a kind by walking the whole tape exactly. */
static size_t count_records(const geoservices_buf *t, int kind) {
  size_t p = 0, n = 0;
  uint32_t key_len;
  while (p < t->len) {
    int op = (unsigned char)t->data[p++];
    if (op == TAPE_RECORD) {
      int k = (unsigned char)t->data[p++];
      p += 8;
      memcpy(&key_len, t->data + p, 4);
      p += 4 + key_len;
      p = skip_value(t, p);
      if (k == kind) n++;
    } else if (op == TAPE_LAYER_ID) {
      p += 16;
    } else if (op == TAPE_ENTRY_END) {
      p += 8;
    } else {
      return (size_t)-1; /* corrupt */
    }
  }
  return n;
}

/* Counts the layer entries (TAPE_LAYER_ID) of a tape. */
static size_t count_layer_ids(const geoservices_buf *t) {
  size_t p = 0, n = 0;
  uint32_t key_len;
  while (p < t->len) {
    int op = (unsigned char)t->data[p++];
    if (op == TAPE_RECORD) {
      p += 9;
      memcpy(&key_len, t->data + p, 4);
      p = skip_value(t, p + 4 + key_len);
    } else if (op == TAPE_LAYER_ID) {
      p += 16;
      n++;
    } else {
      p += 8; /* TAPE_ENTRY_END */
    }
  }
  return n;
}

static const char *const fixtures[] = {
  "{\"transportType\":\"svcTransportTypeEmbedded\",\"replicaServerGen\":12,"
  "\"layerServerGens\":[{\"id\":0,\"serverGen\":3}],\"edits\":[{\"id\":0,\"features\":{"
  "\"adds\":[{\"attributes\":{\"OBJECTID\":1,\"GlobalID\":\"{A}\",\"N\":\"Z\\u00fcrich \\uD83D\\uDE00\"},"
  "\"geometry\":{\"x\":-117.19584274291992,\"y\":2}}],\"updates\":[],\"deleteIds\":[\"{B}\",\"{C}\"],"
  "\"addResults\":[{\"globalId\":\"{A}\",\"success\":true,\"objectId\":7}],\"other\":{\"x\":[1,[2]]}},"
  "\"attachments\":{\"adds\":[{\"globalId\":\"{AT}\",\"parentGlobalId\":\"{A}\"}],"
  "\"deleteResults\":[{\"globalId\":\"{D}\",\"success\":false,\"error\":{\"code\":-2147217395}}]}},"
  "{\"features\":{\"updates\":[{\"attributes\":{\"OBJECTID\":2}}]},\"id\":5,\"extra\":null}],\"tail\":[]}",
  "{}",
  "{\"edits\":[]}",
  " { \"statusUrl\" : \"http://x/jobs/1\" } ",
  "{\"error\":{\"code\":498,\"message\":\"Invalid token.\",\"details\":[]}}",
  /* 5: a createReplica result (dataFormat json): "layers" whose entries hold their rows in arrays */
  "{\"replicaName\":\"crew-1\",\"replicaID\":\"{R}\",\"replicaServerGen\":1700000000123,"
  "\"transportType\":\"svcTransportTypeEmbedded\",\"responseType\":\"svcReplicaResponseTypeData\","
  "\"layers\":[{\"id\":0,\"name\":\"Parcels\",\"features\":[{\"attributes\":{\"OBJECTID\":1,\"GlobalID\":\"{A}\"},"
  "\"geometry\":{\"x\":1.5,\"y\":2}},{\"attributes\":{\"OBJECTID\":2},\"geometry\":{\"paths\":[[[0,0],[1,1]]]}}],"
  "\"attachments\":[{\"globalId\":\"{AT}\",\"parentGlobalId\":\"{A}\",\"name\":\"a.jpg\",\"size\":12}]},"
  "{\"features\":[],\"attachments\":[],\"id\":1},{\"id\":2,\"features\":{\"adds\":[{}]}}]}",
  /* 6: a "layers" list that is not made of layer entries: those elements are skipped */
  "{\"layers\":[0,\"1\",[2,{\"x\":[3]}],null,{\"id\":4,\"features\":[{\"a\":1}]}],\"n\":1}",
  /* 7: an edits entry keeps its 2.1 shape: a features array there is a layer field, not rows */
  "{\"edits\":[{\"id\":0,\"features\":[{\"a\":1}]}],\"layers\":{\"x\":1}}",
};

/* A sync result whose one layer entry holds the records. */
#define EDITS_HEAD "{\"edits\":[{\"id\":0,\"features\":{\"adds\":["
#define EDITS_TAIL "]}}]}"

/* head, n copies of one feature separated by commas, extra, tail; with a
 * NUL at the end (doc->data is a C string). */
static void many_records(geoservices_buf *doc, const char *head, size_t n, const char *extra, const char *tail) {
  static const char item[] = "{\"attributes\":{\"OBJECTID\":1,\"NAME\":\"abc\"},\"geometry\":{\"x\":1.5,\"y\":2.5}}";
  size_t i;
  geoservices_buf_append(doc, head, strlen(head));
  for (i = 0; i < n; i++) {
    if (i) geoservices_buf_putc(doc, ',');
    geoservices_buf_append(doc, item, strlen(item));
  }
  geoservices_buf_append(doc, extra, strlen(extra));
  geoservices_buf_append(doc, tail, strlen(tail) + 1);
}

/* What may wait between two consumes: one record's tape, and with a worker
 * the bytes in its ring and the spans parsed since. */
static size_t pending_bound(void) {
  return worker_after ? 3 * GEOSERVICES_RECORDS_WORKER_RING : 8192;
}

/* Enough records that a document is several times that bound. */
static size_t flat_items(void) {
  return worker_after ? 150000 : 20000;
}

static void run_all(void) {
  size_t f, step;
  for (f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
    geoservices_buf whole;
    geoservices_buf_init(&whole, 0);
    CHECK(run(fixtures[f], 0, &whole, NULL) == 0);
    for (step = 1; step <= strlen(fixtures[f]); step++) {
      geoservices_buf pieces;
      geoservices_buf_init(&pieces, 0);
      CHECK_MSG(run(fixtures[f], step, &pieces, NULL) == 0, "fixture %zu step %zu", f, step);
      CHECK_MSG(pieces.len == whole.len && (whole.len == 0 || memcmp(pieces.data, whole.data, whole.len) == 0),
                "fixture %zu: split every %zu bytes gives another tape", f, step);
      geoservices_buf_free(&pieces);
    }
    if (f == 0) {
      CHECK(count_records(&whole, RECORD_FIELD) == 4);   /* transportType, replicaServerGen, layerServerGens, tail */
      CHECK(count_records(&whole, RECORD_ADD) == 1);
      CHECK(count_records(&whole, RECORD_DELETE) == 2);
      CHECK(count_records(&whole, RECORD_UPDATE) == 1);
      CHECK(count_records(&whole, RECORD_ADD_RESULT) == 1);
      CHECK(count_records(&whole, RECORD_ADD_ATTACHMENT) == 1);
      CHECK(count_records(&whole, RECORD_DELETE_ATTACHMENT_RESULT) == 1);
      CHECK(count_records(&whole, RECORD_LAYER_FIELD) == 1);
    }
    if (f == 5) {
      CHECK(count_records(&whole, RECORD_FIELD) == 5); /* replicaName, replicaID, gen, transport, response */
      CHECK(count_records(&whole, RECORD_ADD) == 3);   /* two in layer 0's array, one in layer 2's adds */
      CHECK(count_records(&whole, RECORD_ADD_ATTACHMENT) == 1);
      CHECK(count_records(&whole, RECORD_LAYER_FIELD) == 1); /* name */
      CHECK(count_layer_ids(&whole) == 3);
    }
    if (f == 6) {
      CHECK(count_records(&whole, RECORD_ADD) == 1);
      CHECK(count_records(&whole, RECORD_FIELD) == 1);
      CHECK(count_layer_ids(&whole) == 1);
    }
    if (f == 7) {
      CHECK(count_records(&whole, RECORD_ADD) == 0);
      CHECK(count_records(&whole, RECORD_LAYER_FIELD) == 1);
      CHECK(count_records(&whole, RECORD_FIELD) == 1); /* an object "layers" is a plain field */
    }
    geoservices_buf_free(&whole);
  }

  { /* structural errors */
    static const char *const bad[] = {
      "[1,2]", "\"x\"", "{\"edits\":[1]}", "{\"edits\":[{\"id\":1.5}]}", "{\"edits\":[{\"id\":0,\"features\":{\"adds\":[{]}}]}",
      "{\"a\":1", "{\"a\":1}}",
      "{\"layers\":[{\"id\":0,\"features\":[{]}]}", "{\"layers\":[{\"id\":0.5,\"features\":[]}]}",
      "{\"layers\":[{\"id\":0,\"attachments\":[1,]}]}",
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      geoservices_buf out;
      geoservices_buf_init(&out, 0);
      CHECK_MSG(run(bad[i], 1, &out, NULL) != 0, "bad fixture %zu accepted", i);
      geoservices_buf_free(&out);
    }
  }

  { /* memory stays flat: a document of many records never holds more than one record's tape,
     * for a sync result's edits and for a createReplica result's layers alike */
    static const char *const shapes[][2] = {
      {EDITS_HEAD, EDITS_TAIL},
      {"{\"replicaID\":\"{R}\",\"layers\":[{\"id\":3,\"features\":[", "],\"attachments\":[]}]}"},
    };
    size_t k;
    for (k = 0; k < 2; k++) {
      geoservices_buf doc, out;
      size_t max_pending = 0;
      geoservices_buf_init(&doc, 0);
      geoservices_buf_init(&out, 0);
      many_records(&doc, shapes[k][0], flat_items(), "", shapes[k][1]);
      CHECK(run(doc.data, 4096, &out, &max_pending) == 0);
      CHECK_MSG(max_pending < pending_bound(), "tape held %zu bytes between consumes", max_pending);
      CHECK(count_records(&out, RECORD_ADD) == flat_items());
      CHECK(count_layer_ids(&out) == 1);
      geoservices_buf_free(&doc);
      geoservices_buf_free(&out);
    }
  }
}

/* A document of `n` records, the last of them broken at its end when `broken`. */
static void big_doc(geoservices_buf *doc, size_t n, int broken) {
  many_records(doc, EDITS_HEAD, n, broken ? ",{\"attributes\":{\"A\":tru}}" : "", EDITS_TAIL);
}

/* Feeds doc in 4 KiB pieces, draining as it goes; returns the status and
 * the error's message and offset. */
static int run_error(const geoservices_buf *doc, size_t after, char *msg, size_t msg_len, size_t *offset,
                     size_t *adds) {
  geoservices_records *r = geoservices_records_new(NULL);
  geoservices_buf out;
  size_t pos = 0, len = strlen(doc->data), tape_len;
  const char *tape;
  int rc = 0;
  geoservices_buf_init(&out, 0);
  geoservices_records_set_worker_after(r, after);
  while (pos < len && rc == 0) {
    size_t n = len - pos < 4096 ? len - pos : 4096;
    rc = geoservices_records_feed(r, doc->data + pos, n);
    pos += n;
    tape = geoservices_records_tape(r, &tape_len);
    geoservices_buf_append(&out, tape, tape_len);
    geoservices_records_consume(r);
  }
  if (rc == 0) rc = geoservices_records_finish(r);
  tape = geoservices_records_tape(r, &tape_len);
  geoservices_buf_append(&out, tape, tape_len);
  snprintf(msg, msg_len, "%s", geoservices_records_error(r));
  *offset = geoservices_records_offset(r);
  *adds = count_records(&out, RECORD_ADD);
  geoservices_records_free(r);
  geoservices_buf_free(&out);
  return rc;
}

int main(void) {
  worker_after = 0;
  run_all();
  worker_after = 1;
  run_all();
  use_fill = 1; /* the same through fill(), on this thread and on the worker */
  worker_after = 0;
  run_all();
  worker_after = 1;
  run_all();
  use_fill = 2; /* the worker reads by itself (with worker_after 0: fill() on this thread) */
  worker_after = 0;
  run_all();
  worker_after = 1;
  run_all();
  use_fill = 0;

  { /* a worker reports a parse error with the same code, message and offset,
     * and hands over every record before it */
    geoservices_buf doc;
    char msg_sync[256], msg_worker[256];
    size_t off_sync, off_worker, adds_sync, adds_worker;
    int rc_sync, rc_worker;
    geoservices_buf_init(&doc, 0);
    big_doc(&doc, 30000, 1);
    rc_sync = run_error(&doc, 0, msg_sync, sizeof msg_sync, &off_sync, &adds_sync);
    rc_worker = run_error(&doc, 1, msg_worker, sizeof msg_worker, &off_worker, &adds_worker);
    CHECK(rc_sync == GEOSERVICES_JSON_ESYNTAX);
    CHECK(rc_worker == rc_sync);
    CHECK_MSG(strcmp(msg_sync, msg_worker) == 0, "'%s' vs '%s'", msg_sync, msg_worker);
    CHECK_MSG(off_sync == off_worker && off_sync == (size_t)(strstr(doc.data, "tru}") + 3 - doc.data),
              "offsets %zu, %zu", off_sync, off_worker);
    CHECK_MSG(adds_sync == 30000 && adds_worker == 30000, "records before the error: %zu, %zu", adds_sync,
              adds_worker);
    geoservices_buf_free(&doc);
  }

  { /* freed while its worker is still parsing: no hang, nothing leaks (valgrind) */
    geoservices_buf doc;
    geoservices_records *r = geoservices_records_new(NULL);
    size_t pos = 0, len;
    geoservices_buf_init(&doc, 0);
    big_doc(&doc, 50000, 0);
    len = strlen(doc.data);
    geoservices_records_set_worker_after(r, 1);
    while (pos < len) {
      size_t n = len - pos < 65536 ? len - pos : 65536;
      CHECK(geoservices_records_feed(r, doc.data + pos, n) == 0);
      pos += n;
    }
    geoservices_records_free(r);
    geoservices_buf_free(&doc);
  }

  { /* the default: a small document never starts a worker, a large one does,
     * and both give the tape of a single feed */
    geoservices_buf doc, whole, pieces;
    size_t pending_seen = 0;
    geoservices_buf_init(&doc, 0);
    geoservices_buf_init(&whole, 0);
    geoservices_buf_init(&pieces, 0);
    big_doc(&doc, 20000, 0);
    worker_after = GEOSERVICES_RECORDS_WORKER_AFTER;
    CHECK(run(doc.data, 0, &whole, NULL) == 0);
    CHECK(run(doc.data, 65536, &pieces, &pending_seen) == 0);
    CHECK(pieces.len == whole.len && memcmp(pieces.data, whole.data, whole.len) == 0);
    CHECK(count_records(&whole, RECORD_ADD) == 20000);
    geoservices_buf_free(&doc);
    geoservices_buf_free(&whole);
    geoservices_buf_free(&pieces);
  }
  return CHECK_DONE("test_records");
}
