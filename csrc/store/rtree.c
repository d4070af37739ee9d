#include "store/rtree.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store/geom.h"

#define MAX_LEVELS 40   /* RTREE_MAX_DEPTH of the module */
#define CELL_SIZE 24    /* 8-byte id, four 4-byte floats */

uint32_t geoservices_hilbert(uint32_t x, uint32_t y) {
  uint32_t d = 0, s;
  for (s = 1u << 15; s > 0; s >>= 1) {
    uint32_t rx = (x & s) > 0, ry = (y & s) > 0;
    d += s * s * ((3 * rx) ^ ry);
    if (ry == 0) { /* rotate the quadrant */
      if (rx == 1) {
        x = 0xffff - x;
        y = 0xffff - y;
      }
      {
        uint32_t t = x;
        x = y;
        y = t;
      }
    }
  }
  return d;
}

/* The grid cell of v in [lo, hi]. */
static uint32_t cell(double v, double lo, double hi) {
  double f;
  if (!(hi > lo)) return 0;
  f = (v - lo) / (hi - lo) * 65535.0;
  if (!(f > 0)) return 0; /* also NaN */
  if (f > 65535.0) return 65535;
  return (uint32_t)f;
}

/* geoservices_hilbert(geom, ext_minx, ext_maxx, ext_miny, ext_maxy): the
 * envelope from the blob's header (one parse), else the first cell. */
static void hilbert_function(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  double e[4], env[4] = {0, 0, 0, 0};
  int i, r = -1;
  (void)argc;
  for (i = 0; i < 4; i++) e[i] = sqlite3_value_double(argv[i + 1]);
  if (sqlite3_value_type(argv[0]) == SQLITE_BLOB) {
    const unsigned char *blob = sqlite3_value_blob(argv[0]);
    size_t len = (size_t)sqlite3_value_bytes(argv[0]);
    r = geoservices_gpkg_envelope(NULL, blob, len, env);
    if (r == -2) { /* no envelope in the header: from the points */
      geoservices_geom g;
      geoservices_geom_init(&g);
      r = geoservices_gpkg_envelope(&g, blob, len, env);
      geoservices_geom_free(&g);
    }
  }
  if (r != 1) {
    sqlite3_result_int64(ctx, 0);
    return;
  }
  sqlite3_result_int64(ctx, geoservices_hilbert(cell((env[0] + env[1]) / 2, e[0], e[1]),
                                                cell((env[2] + env[3]) / 2, e[2], e[3])));
}

int geoservices_rtree_register(sqlite3 *db) {
  return sqlite3_create_function_v2(db, "geoservices_hilbert", 5, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
                                    NULL, hilbert_function, NULL, NULL, NULL);
}

/* As ext/rtree's rtreeValueDown/rtreeValueUp. */
#define RNDTOWARDS (1.0 - 1.0 / 8388608.0)
#define RNDAWAY (1.0 + 1.0 / 8388608.0)

float geoservices_rtree_down(double d) {
  float f = (float)d;
  if (f > d) f = (float)(d * (d < 0 ? RNDAWAY : RNDTOWARDS));
  return f;
}

float geoservices_rtree_up(double d) {
  float f = (float)d;
  if (f < d) f = (float)(d * (d < 0 ? RNDTOWARDS : RNDAWAY));
  return f;
}

static void put_i16(unsigned char *p, unsigned v) {
  p[0] = (unsigned char)(v >> 8);
  p[1] = (unsigned char)v;
}

static void put_i64(unsigned char *p, int64_t v) {
  uint64_t u = (uint64_t)v;
  int i;
  for (i = 7; i >= 0; i--) {
    p[i] = (unsigned char)u;
    u >>= 8;
  }
}

static void put_f32(unsigned char *p, float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  p[0] = (unsigned char)(u >> 24);
  p[1] = (unsigned char)(u >> 16);
  p[2] = (unsigned char)(u >> 8);
  p[3] = (unsigned char)u;
}

typedef struct level {
  unsigned char *node; /* the open node of this level */
  int ncell;
  float box[4];
  int64_t written;     /* nodes of this level written so far */
} level;

typedef struct packer {
  sqlite3 *db;
  int node_size, max_cells;
  level levels[MAX_LEVELS];
  int64_t next_nodeno;
  sqlite3_stmt *node, *rowid, *parent;
} packer;

static int step(sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int64_t cell_id(const unsigned char *c) {
  uint64_t u = 0;
  int i;
  for (i = 0; i < 8; i++) u = (u << 8) | c[i];
  return (int64_t)u;
}

/* Writes the open node of level k as nodeno (depth: for the root), with the
 * rows that point at it (rowid for leaf cells, parent for inner cells). */
static int write_node(packer *p, int k, int64_t nodeno, int depth) {
  level *l = &p->levels[k];
  int i, rc;
  put_i16(l->node, depth > 0 ? (unsigned)depth : 0);
  put_i16(l->node + 2, (unsigned)l->ncell);
  sqlite3_bind_int64(p->node, 1, nodeno);
  sqlite3_bind_blob(p->node, 2, l->node, p->node_size, SQLITE_STATIC);
  if ((rc = step(p->node)) != SQLITE_OK) return rc;
  for (i = 0; i < l->ncell; i++) {
    sqlite3_stmt *st = k == 0 ? p->rowid : p->parent;
    sqlite3_bind_int64(st, 1, cell_id(l->node + 4 + i * CELL_SIZE));
    sqlite3_bind_int64(st, 2, nodeno);
    if ((rc = step(st)) != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

static void union_box(float *box, const float *b, int first) {
  if (first) {
    memcpy(box, b, 4 * sizeof *box);
    return;
  }
  if (b[0] < box[0]) box[0] = b[0];
  if (b[1] > box[1]) box[1] = b[1];
  if (b[2] < box[2]) box[2] = b[2];
  if (b[3] > box[3]) box[3] = b[3];
}

static int add_cell(packer *p, int k, int64_t id, const float *box);

/* The open node of level k is full (or final but not the root): written
 * with the next node number, and entered into level k + 1. */
static int flush_level(packer *p, int k) {
  level *l = &p->levels[k];
  int64_t nodeno = p->next_nodeno++;
  int rc = write_node(p, k, nodeno, 0);
  if (rc != SQLITE_OK) return rc;
  l->written++;
  l->ncell = 0;
  memset(l->node, 0, (size_t)p->node_size);
  return add_cell(p, k + 1, nodeno, l->box);
}

static int add_cell(packer *p, int k, int64_t id, const float *box) {
  level *l;
  unsigned char *c;
  int i;
  if (k >= MAX_LEVELS) return SQLITE_FULL;
  l = &p->levels[k];
  if (!l->node) {
    l->node = calloc(1, (size_t)p->node_size);
    if (!l->node) return SQLITE_NOMEM;
  }
  if (l->ncell == p->max_cells) {
    int rc = flush_level(p, k);
    if (rc != SQLITE_OK) return rc;
  }
  c = l->node + 4 + l->ncell * CELL_SIZE;
  put_i64(c, id);
  for (i = 0; i < 4; i++) put_f32(c + 8 + 4 * i, box[i]);
  union_box(l->box, box, l->ncell == 0);
  l->ncell++;
  return SQLITE_OK;
}

static int prepare(sqlite3 *db, const char *fmt, const char *rtree, sqlite3_stmt **st) {
  char *sql = sqlite3_mprintf(fmt, rtree);
  int rc;
  if (!sql) return SQLITE_NOMEM;
  rc = sqlite3_prepare_v2(db, sql, -1, st, NULL);
  sqlite3_free(sql);
  return rc;
}

int geoservices_rtree_pack(sqlite3 *db, const char *rtree, sqlite3_stmt *select) {
  packer p;
  sqlite3_stmt *size = NULL;
  int rc, k, top = -1;
  memset(&p, 0, sizeof p);
  p.db = db;
  p.next_nodeno = 2; /* the root is 1 */
  rc = prepare(db, "SELECT length(data) FROM \"%w_node\" WHERE nodeno = 1", rtree, &size);
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(size);
    if (rc == SQLITE_ROW) {
      p.node_size = sqlite3_column_int(size, 0);
      rc = SQLITE_OK;
    } else {
      rc = rc == SQLITE_DONE ? SQLITE_CORRUPT : rc;
    }
  }
  sqlite3_finalize(size);
  if (rc != SQLITE_OK) return rc;
  p.max_cells = (p.node_size - 4) / CELL_SIZE;
  if (p.max_cells < 3) return SQLITE_CORRUPT;
  /* a leaf's rows go to the rowid table in rowid order at the end: written
   * leaf by leaf (Hilbert order) they were random inserts into a table of a
   * row per feature, which at 1M rows missed SQLite's page cache on most */
  rc = sqlite3_exec(db, "CREATE TEMP TABLE geoservices_rtree_leaves (id INTEGER, nodeno INTEGER)", NULL, NULL, NULL);
  if (rc != SQLITE_OK) return rc;
  if ((rc = prepare(db, "INSERT OR REPLACE INTO \"%w_node\" (nodeno, data) VALUES (?1, ?2)", rtree, &p.node)) ||
      (rc = prepare(db, "INSERT INTO temp.geoservices_rtree_leaves (id, nodeno) VALUES (?1, ?2)", rtree, &p.rowid)) ||
      (rc = prepare(db, "INSERT OR REPLACE INTO \"%w_parent\" (nodeno, parentnode) VALUES (?1, ?2)", rtree,
                    &p.parent)))
    goto done;
  while ((rc = sqlite3_step(select)) == SQLITE_ROW) {
    float box[4];
    if (sqlite3_column_type(select, 1) == SQLITE_NULL) continue; /* an empty geometry: no entry */
    box[0] = geoservices_rtree_down(sqlite3_column_double(select, 1));
    box[1] = geoservices_rtree_up(sqlite3_column_double(select, 2));
    box[2] = geoservices_rtree_down(sqlite3_column_double(select, 3));
    box[3] = geoservices_rtree_up(sqlite3_column_double(select, 4));
    if ((rc = add_cell(&p, 0, sqlite3_column_int64(select, 0), box)) != SQLITE_OK) goto done;
  }
  if (rc != SQLITE_DONE) goto done;
  rc = SQLITE_OK;
  /* the levels bottom up: each open node is written and entered above,
   * until one level holds the only node left, the root */
  for (k = 0; k < MAX_LEVELS && p.levels[k].node; k++) {
    int higher = k + 1 < MAX_LEVELS && p.levels[k + 1].node && p.levels[k + 1].ncell > 0;
    if (!higher && p.levels[k].written == 0) {
      top = k;
      break;
    }
    if (p.levels[k].ncell > 0 && (rc = flush_level(&p, k)) != SQLITE_OK) goto done;
  }
  if (top >= 0) rc = write_node(&p, top, 1, top);
  if (rc == SQLITE_OK) {
    char *sql = sqlite3_mprintf("INSERT OR REPLACE INTO \"%w_rowid\" (rowid, nodeno) "
                                "SELECT id, nodeno FROM temp.geoservices_rtree_leaves ORDER BY id", rtree);
    rc = sql ? sqlite3_exec(db, sql, NULL, NULL, NULL) : SQLITE_NOMEM;
    sqlite3_free(sql);
  }
done:
  for (k = 0; k < MAX_LEVELS; k++) free(p.levels[k].node);
  sqlite3_finalize(p.node);
  sqlite3_finalize(p.rowid);
  sqlite3_finalize(p.parent);
  sqlite3_reset(select);
  sqlite3_exec(db, "DROP TABLE IF EXISTS temp.geoservices_rtree_leaves", NULL, NULL, NULL);
  return rc;
}
