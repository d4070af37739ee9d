/* The record extractor's parser callbacks (records.h): the walk of a
 * synchronization or createReplica result's structure, and the tape they
 * write. The tape writers stay in this file with the handlers that call
 * them on every JSON event, so that the compiler can inline them. */
#include "json/records_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- tape writing ------------------------------------------------------- */

/* Room for n more tape bytes: the fast path is a compare, the buffer grows
 * rarely (it is reused across records). NULL when it cannot grow. */
static char *tape_room(geoservices_records *r, size_t n) {
  char *p;
  if (r->tape.len + n >= r->tape.cap && geoservices_buf_reserve(&r->tape, n)) return NULL;
  p = r->tape.data + r->tape.len;
  r->tape.len += n;
  return p;
}

static int put_u8(geoservices_records *r, int v) {
  char *p = tape_room(r, 1);
  if (!p) return -1;
  *p = (char)v;
  return 0;
}

static int put_u32(geoservices_records *r, uint32_t v) {
  char *p = tape_room(r, sizeof v);
  if (!p) return -1;
  memcpy(p, &v, sizeof v);
  return 0;
}

static int put_i64(geoservices_records *r, int64_t v) {
  char *p = tape_room(r, sizeof v);
  if (!p) return -1;
  memcpy(p, &v, sizeof v);
  return 0;
}

/* op followed by an 8-byte payload (integers, doubles). */
static int put_op8(geoservices_records *r, int op, const void *payload) {
  char *p = tape_room(r, 9);
  if (!p) return -1;
  *p = (char)op;
  memcpy(p + 1, payload, 8);
  return 0;
}

/* The id of a key or short string value (numbering it if there is room), or -1. */
static int string_id(geoservices_records *r, const char *s, size_t len) {
  const unsigned char *u = (const unsigned char *)s;
  unsigned h, mask = 2 * GEOSERVICES_TAPE_STRING_IDS - 1;
  size_t i;
  if (len == 0 || len > GEOSERVICES_TAPE_KEY_ID_MAXLEN) return -1;
  h = (unsigned)len * 2654435761u;
  for (i = 0; i < len; i++) h = (h ^ u[i]) * 16777619u;
  for (h &= mask;; h = (h + 1) & mask) {
    unsigned slot = r->id_index[h];
    if (slot == 0) break;
    slot--;
    if (r->id_len[slot] == len && memcmp(r->id_text[slot], s, len) == 0) return (int)slot;
  }
  if (r->id_count == GEOSERVICES_TAPE_STRING_IDS) return -1; /* full: the index always keeps empty slots */
  memcpy(r->id_text[r->id_count], s, len);
  r->id_len[r->id_count] = (uint8_t)len;
  r->id_index[h] = (uint16_t)(r->id_count + 1);
  return (int)r->id_count++;
}

/* A member's key or a string value, in one reservation (strings and keys
 * are most of the tape): TAPE_KEY_ID / TAPE_STRING_ID and its u16 id when
 * it has one (a key of up to KEY_ID_MAXLEN bytes, a value of up to
 * STRING_ID_MAXLEN), else TAPE_KEY / TAPE_STRING; then u32 length, bytes. */
static int put_string(geoservices_records *r, int is_key, const char *s, size_t len) {
  int id = is_key || len <= GEOSERVICES_TAPE_STRING_ID_MAXLEN ? string_id(r, s, len) : -1;
  uint16_t id16 = (uint16_t)(id < 0 ? 0 : id);
  size_t id_bytes = id < 0 ? 0 : sizeof id16;
  uint32_t n32 = (uint32_t)len;
  char *p;
  if (len > UINT32_MAX) return -1;
  p = tape_room(r, 1 + id_bytes + sizeof n32 + len);
  if (!p) return -1;
  if (is_key) *p++ = (char)(id < 0 ? TAPE_KEY : TAPE_KEY_ID);
  else *p++ = (char)(id < 0 ? TAPE_STRING : TAPE_STRING_ID);
  if (id_bytes) memcpy(p, &id16, sizeof id16);
  memcpy(p + id_bytes, &n32, sizeof n32);
  if (len) memcpy(p + id_bytes + sizeof n32, s, len);
  return 0;
}

static int fail(geoservices_records *r, const char *message) {
  r->error = message;
  return 1; /* aborts the parser */
}

/* Counts one more value in the innermost captured array (objects count keys). */
static void count_element(geoservices_records *r) {
  if (r->sub_depth > 0 && r->is_array[r->sub_depth - 1]) r->counts[r->sub_depth - 1]++;
}

static int begin_record(geoservices_records *r, geoservices_record_kind kind, int64_t entry, int with_key) {
  r->mode = MODE_CAPTURE;
  r->sub_depth = 0;
  if (put_u8(r, TAPE_RECORD) || put_u8(r, (int)kind) || put_i64(r, entry)) return fail(r, "out of memory");
  if (with_key) {
    if (put_u32(r, (uint32_t)r->key_len) || geoservices_buf_append(&r->tape, r->key, r->key_len))
      return fail(r, "out of memory");
  } else if (put_u32(r, 0)) {
    return fail(r, "out of memory");
  }
  return 0;
}

/* After a value ended inside a capture: close the record at depth 0. */
static void value_done(geoservices_records *r) {
  if (r->sub_depth == 0) {
    r->mode = MODE_STRUCT;
    r->complete = r->tape.len;
  }
}

/* Room for the open container at index sub_depth (the arrays grow with the
 * nesting actually met, not to max_depth up front: most records are shallow,
 * and a Records is made per request). 0, or -1 when they cannot grow. */
static int depth_room(geoservices_records *r) {
  size_t cap;
  size_t *count_at;
  uint32_t *counts;
  unsigned char *is_array;
  if (r->sub_depth < r->depth_cap) return 0;
  cap = r->depth_cap ? r->depth_cap * 2 : 16;
  if (cap > r->max_depth) cap = r->max_depth;
  count_at = realloc(r->count_at, cap * sizeof *count_at);
  if (count_at) r->count_at = count_at;
  counts = realloc(r->counts, cap * sizeof *counts);
  if (counts) r->counts = counts;
  is_array = realloc(r->is_array, cap);
  if (is_array) r->is_array = is_array;
  if (!count_at || !counts || !is_array) return -1;
  r->depth_cap = cap;
  return 0;
}

static int open_container(geoservices_records *r, int op) {
  count_element(r);
  if (r->sub_depth >= r->max_depth) return fail(r, "maximum depth exceeded");
  if (depth_room(r)) return fail(r, "out of memory");
  if (put_u8(r, op)) return fail(r, "out of memory");
  r->count_at[r->sub_depth] = r->tape.len;
  r->counts[r->sub_depth] = 0;
  r->is_array[r->sub_depth] = op == TAPE_ARRAY;
  r->sub_depth++;
  if (put_u32(r, 0)) return fail(r, "out of memory");
  return 0;
}

static void close_container(geoservices_records *r) {
  r->sub_depth--;
  memcpy(r->tape.data + r->count_at[r->sub_depth], &r->counts[r->sub_depth], sizeof(uint32_t));
  value_done(r);
}

/* ---- structure ------------------------------------------------------------ */

static int key_is(const geoservices_records *r, const char *s) {
  return r->full_key_len == strlen(s) && memcmp(r->key, s, r->full_key_len) == 0;
}

static const struct { const char *name; geoservices_record_kind features, attachments; } lists[] = {
  {"adds", RECORD_ADD, RECORD_ADD_ATTACHMENT},
  {"updates", RECORD_UPDATE, RECORD_UPDATE_ATTACHMENT},
  {"deleteIds", RECORD_DELETE, RECORD_DELETE_ATTACHMENT},
  {"addResults", RECORD_ADD_RESULT, RECORD_ADD_ATTACHMENT_RESULT},
  {"updateResults", RECORD_UPDATE_RESULT, RECORD_UPDATE_ATTACHMENT_RESULT},
  {"deleteResults", RECORD_DELETE_RESULT, RECORD_DELETE_ATTACHMENT_RESULT},
};

/* A value starts while walking the structure. `container` is the op it
 * opens (TAPE_OBJECT/TAPE_ARRAY) or 0 for a scalar. Returns 1 when the event
 * was consumed structurally, 0 when it starts a capture (the caller then
 * records it), or -1 on error. */
static int structural_value(geoservices_records *r, int container) {
  size_t i;
  switch (r->at) {
    case AT_START:
      if (container != TAPE_OBJECT) return fail(r, "a synchronization result must be a JSON object"), -1;
      r->at = AT_ROOT;
      return 1;
    case AT_ROOT:
      /* "edits" (2.1) of a synchronization, or the "layers" of a createReplica
       * result (dataFormat json), whose entries hold their rows in arrays */
      if ((key_is(r, "edits") || key_is(r, "layers")) && container == TAPE_ARRAY) {
        r->in_layers = key_is(r, "layers");
        r->at = AT_EDITS;
        return 1;
      }
      return begin_record(r, RECORD_FIELD, -1, 1) ? -1 : 0;
    case AT_EDITS:
      if (container != TAPE_OBJECT && r->in_layers) { /* not a layer entry ([0, 1]): skipped whole */
        if (container) {
          r->mode = MODE_SKIP;
          r->sub_depth = 1;
        }
        return 1;
      }
      if (container != TAPE_OBJECT) return fail(r, "each element of edits must be an object"), -1;
      r->entry++;
      r->at = AT_ENTRY;
      return 1;
    case AT_ENTRY:
      if (r->in_layers && (key_is(r, "features") || key_is(r, "attachments")) && container == TAPE_ARRAY) {
        r->list_kind = key_is(r, "attachments") ? RECORD_ADD_ATTACHMENT : RECORD_ADD; /* the replica's rows */
        r->list_in_entry = 1;
        r->at = AT_LIST;
        return 1;
      }
      if ((key_is(r, "features") || key_is(r, "attachments")) && container == TAPE_OBJECT) {
        r->part_is_attachments = key_is(r, "attachments");
        r->at = AT_PART;
        return 1;
      }
      return begin_record(r, RECORD_LAYER_FIELD, r->entry, 1) ? -1 : 0;
    case AT_PART:
      for (i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        if (key_is(r, lists[i].name) && container == TAPE_ARRAY) {
          r->list_kind = r->part_is_attachments ? lists[i].attachments : lists[i].features;
          r->at = AT_LIST;
          return 1;
        }
      }
      if (container) { /* unknown member: skip it whole */
        r->mode = MODE_SKIP;
        r->sub_depth = 1;
      }
      return 1;
    case AT_LIST:
      return begin_record(r, r->list_kind, r->entry, 0) ? -1 : 0;
    case AT_DONE:
      break;
  }
  return fail(r, "unexpected value"), -1;
}

/* ---- parser handlers ----------------------------------------------------- */

#define SCALAR_PROLOGUE(r)                          \
  if ((r)->mode == MODE_SKIP) return 0;             \
  if ((r)->mode == MODE_STRUCT) {                   \
    int s_ = structural_value((r), 0);              \
    if (s_ < 0) return 1;                           \
    if (s_ > 0) return 0;                           \
  }                                                 \
  count_element(r)

static int on_null(void *ctx) {
  geoservices_records *r = ctx;
  SCALAR_PROLOGUE(r);
  if (put_u8(r, TAPE_NULL)) return fail(r, "out of memory");
  value_done(r);
  return 0;
}

static int on_boolean(void *ctx, int value) {
  geoservices_records *r = ctx;
  SCALAR_PROLOGUE(r);
  if (put_u8(r, value ? TAPE_TRUE : TAPE_FALSE)) return fail(r, "out of memory");
  value_done(r);
  return 0;
}

static int on_integer(void *ctx, long long value) {
  geoservices_records *r = ctx;
  if (r->mode == MODE_STRUCT && r->at == AT_ENTRY && key_is(r, "id")) {
    if (put_u8(r, TAPE_LAYER_ID) || put_i64(r, r->entry) || put_i64(r, (int64_t)value))
      return fail(r, "out of memory");
    r->complete = r->tape.len;
    return 0;
  }
  SCALAR_PROLOGUE(r);
  {
    int64_t v = (int64_t)value;
    if (put_op8(r, TAPE_INTEGER, &v)) return fail(r, "out of memory");
  }
  value_done(r);
  return 0;
}

static int on_double(void *ctx, double value) {
  geoservices_records *r = ctx;
  if (r->mode == MODE_STRUCT && r->at == AT_ENTRY && key_is(r, "id"))
    return fail(r, "a layer id must be an integer");
  SCALAR_PROLOGUE(r);
  if (put_op8(r, TAPE_DOUBLE, &value)) return fail(r, "out of memory");
  value_done(r);
  return 0;
}

static int on_string(void *ctx, const char *s, size_t len) {
  geoservices_records *r = ctx;
  SCALAR_PROLOGUE(r);
  if (put_string(r, 0, s, len)) return fail(r, "out of memory");
  value_done(r);
  return 0;
}

static int on_key(void *ctx, const char *s, size_t len) {
  geoservices_records *r = ctx;
  if (r->mode == MODE_SKIP) return 0;
  if (r->mode == MODE_CAPTURE) {
    r->counts[r->sub_depth - 1]++; /* objects count their members */
    if (put_string(r, 1, s, len)) return fail(r, "out of memory");
    return 0;
  }
  r->full_key_len = len;
  r->key_len = len > KEY_MAX ? KEY_MAX : len;
  memcpy(r->key, s, r->key_len);
  r->key[r->key_len] = '\0';
  if (len > KEY_MAX) r->full_key_len = (size_t)-1; /* never equal to a structural name */
  return 0;
}

static int start_container(geoservices_records *r, int op) {
  if (r->mode == MODE_SKIP) {
    r->sub_depth++;
    return 0;
  }
  if (r->mode == MODE_STRUCT) {
    int s = structural_value(r, op);
    if (s < 0) return 1;
    if (s > 0) return 0;
    /* a capture starts with this container: it is the record's value, not an element */
    if (r->sub_depth >= r->max_depth) return fail(r, "maximum depth exceeded");
    if (depth_room(r)) return fail(r, "out of memory");
    if (put_u8(r, op)) return fail(r, "out of memory");
    r->count_at[0] = r->tape.len;
    r->counts[0] = 0;
    r->is_array[0] = op == TAPE_ARRAY;
    r->sub_depth = 1;
    return put_u32(r, 0) ? fail(r, "out of memory") : 0;
  }
  return open_container(r, op);
}

static int end_container(geoservices_records *r) {
  if (r->mode == MODE_SKIP) {
    if (--r->sub_depth == 0) r->mode = MODE_STRUCT;
    return 0;
  }
  if (r->mode == MODE_CAPTURE) {
    close_container(r);
    return 0;
  }
  switch (r->at) { /* closing a structural container moves one level up */
    case AT_ROOT: r->at = AT_DONE; break;
    case AT_EDITS: r->at = AT_ROOT; break;
    case AT_ENTRY:
      if (put_u8(r, TAPE_ENTRY_END) || put_i64(r, r->entry)) return fail(r, "out of memory");
      r->complete = r->tape.len;
      r->at = AT_EDITS;
      break;
    case AT_PART: r->at = AT_ENTRY; break;
    case AT_LIST:
      r->at = r->list_in_entry ? AT_ENTRY : AT_PART;
      r->list_in_entry = 0;
      break;
    default: return fail(r, "unbalanced structure");
  }
  return 0;
}

static int on_start_object(void *ctx) { return start_container(ctx, TAPE_OBJECT); }
static int on_start_array(void *ctx) { return start_container(ctx, TAPE_ARRAY); }
static int on_end_object(void *ctx) { return end_container(ctx); }
static int on_end_array(void *ctx) { return end_container(ctx); }

const geoservices_json_handlers geoservices_records_handlers = {
  on_null, on_boolean, on_integer, on_double, on_string, on_key,
  on_start_object, on_end_object, on_start_array, on_end_array,
};
