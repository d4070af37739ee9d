/* The replica store's fast path: records of a synchronization result go
 * from the record extractor's tape (json/records.h) straight into prepared
 * SQLite statements of a GeoPackage, without any Lua value per record.
 *
 *   add, update              an upsert of the layer's columns, as the server
 *                            sent them, into the row of that GlobalID (its
 *                            fid kept; a column the user added keeps its value)
 *   delete                   DELETE by GlobalID (by OBJECTID for an integer)
 *   add/update_attachment    INSERT OR REPLACE into geoservices_attachments
 *   delete_attachment        DELETE from geoservices_attachments
 *   anything else            handed to a callback (top-level fields, layer
 *                            fields, edit results, and the start of a layer
 *                            entry as kind GEOSERVICES_STORE_LAYER)
 *
 * The caller owns the transaction (BEGIN IMMEDIATE ... COMMIT): a failure
 * returns -1 with a message and leaves the rollback to it. Memory stays flat:
 * one geometry and one blob buffer are reused for every record, and text is
 * bound straight from the tape (SQLITE_STATIC; each statement is stepped
 * before the tape moves).
 *
 * Column values follow the column's type (see geoservices_store_col_type):
 * dates are epoch milliseconds in Esri JSON and DATETIME text in the file;
 * GlobalIDs and GUIDs are written as "{UPPERCASE}" whatever their spelling.
 * A curve geometry (geom.h) in a layer whose column is MULTILINESTRING or
 * MULTIPOLYGON turns the column into MULTICURVE or MULTISURFACE, in the same
 * transaction: the straight blobs already there stay valid in it (a
 * subtype, 12-128r18 Annex G), and gpkg_extensions gets the gpkg_geom_<TYPE>
 * rows of every curve type its blobs may hold, as the standard requires.
 * A layer that never receives a curve keeps a core type every reader knows.
 *
 * Also registers the SQL functions the GeoPackage R-tree triggers call
 * (ST_MinX, ST_MaxX, ST_MinY, ST_MaxY, ST_IsEmpty). The R-tree: outside
 * apply the standard triggers keep it (local edits, other tools); inside
 * apply the store writes each entry itself from the envelope it has just
 * computed, and its ST_IsEmpty answers 1 so that the insert trigger stays
 * out of the way (the delete trigger still removes what REPLACE deletes).
 * When a layer's R-tree is empty when an apply first writes to it (a
 * store's first download, a snapshot's replacement data), nothing is
 * written to it during the apply: at the flush it is packed in bulk from
 * the table's rows (store/rtree.h); a commit hook refuses a COMMIT that
 * would skip that flush. The connection keeps statement journals in memory
 * (PRAGMA temp_store = MEMORY). No lua.h. */
#ifndef GEOSERVICES_STORE_APPLY_H
#define GEOSERVICES_STORE_APPLY_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "json/records.h"
#include "store/geom.h"
#include "store/spool.h"

/* How a column's values are converted on their way in (and out). */
typedef enum {
  STORE_COL_INTEGER = 0, /* esriFieldTypeOID, Integer, SmallInteger, BigInteger */
  STORE_COL_REAL,        /* Double, Single */
  STORE_COL_TEXT,        /* String and anything else */
  STORE_COL_DATE,        /* Date: epoch ms <-> DATETIME "YYYY-MM-DDTHH:MM:SS.SSSZ" */
  STORE_COL_GUID,        /* GUID, GlobalID: "{UPPERCASE}" */
  STORE_COL_BLOB         /* Blob */
} geoservices_store_col_type;

#define GEOSERVICES_STORE_LAYER (-1) /* kind handed to the callback when a layer entry starts */
#define GEOSERVICES_STORE_NONE ((size_t)-1)
#define GEOSERVICES_STORE_SCRATCH 48 /* bytes of formatting room per column */

typedef struct geoservices_store_column {
  char *name;
  size_t len;
  int type; /* geoservices_store_col_type */
} geoservices_store_column;

#define GEOSERVICES_STORE_UNKNOWN 512

typedef struct geoservices_store_layer {
  int64_t id;
  char *table;
  char *geom_col;       /* NULL for a table without geometry */
  int geom_kind;        /* the layer's geoservices_geom_kind */
  int has_z, has_m;     /* its geometry column's z / m flags (gpkg_geometry_columns): Z/M blobs */
  int32_t srs_id;
  geoservices_store_column *cols; /* bound as ?1..?ncols; the geometry is ?ncols+1 */
  size_t ncols;
  size_t gid_col;       /* the GlobalID column */
  size_t oid_col;       /* the OBJECTID column, or GEOSERVICES_STORE_NONE */
  size_t *guess;        /* per attribute position: the column found there last time */
  size_t guess_cap;
  char *scratch;        /* GEOSERVICES_STORE_SCRATCH bytes per column */
  sqlite3_value **defaults; /* per column: the table's DEFAULT, evaluated once (NULL: none) */
  unsigned char *given; /* per column: the feature bound by hand gave it (a null too) */
  /* upsert: what a record binds to: replace (INSERT ... ON CONFLICT(fid) DO
   * UPDATE of the layer's columns RETURNING fid, into the local fid of the
   * row of its GlobalID), or while the store fills empty
   * tables (geoservices_store_set_filling) insert_new, a plain INSERT */
  sqlite3_stmt *upsert, *replace, *insert_new, *remove, *remove_oid;
  sqlite3_stmt *rtree;  /* INSERT OR REPLACE into rtree_<table>_<geom>, NULL without one */
  char *rtree_name;     /* rtree_<table>_<geom> */
  int rtree_state;      /* this transaction: 0 not decided, 1 packed in bulk at the flush, -1 inserted */
  int curves;           /* the geometry column is of a curve type (or wider): curve blobs fit it */
  int promoted;         /* ... since this transaction began (a rollback undoes it) */
  int originals;        /* gpkgext_geoservices_original_geometries may hold rows of this layer */
  const char *gid_text; /* the GlobalID bound (its bytes live until the upsert is stepped) */
  size_t gid_len;
  int gid_bound;        /* the record being bound has its GlobalID */
  int geom_bound;       /* ... and a non-empty geometry, of envelope geom_env */
  double geom_env[4];
  double env[4];        /* extent of what was written since the last flush (NaN: none) */
  int touched;          /* written since the last flush */
  uint64_t adds, attachment_adds; /* records applied since the store was opened: add, add_attachment */
  /* the attribute names a record carried that the table has no column for
   * (a field added on the server since the store was made, or one the user
   * renamed), each once, '\n'-separated, as many as fit */
  char unknown[GEOSERVICES_STORE_UNKNOWN];
  size_t unknown_len;
} geoservices_store_layer;

/* Where the record extractor is: which layer entry has which id. Kept by
 * the caller per extractor (its values match lua_records.h's replay state). */
typedef struct geoservices_store_cursor {
  int has_id;
  int64_t id_entry;
  int64_t layer_id;
} geoservices_store_cursor;

/* Records the store does not apply: kind (geoservices_record_kind, or
 * GEOSERVICES_STORE_LAYER with value NULL), the layer id when has_layer, the
 * tape value, the record's key. Nonzero stops the apply and is returned. */
typedef int (*geoservices_store_other_fn)(void *ctx, int kind, int has_layer, int64_t layer, const char *value,
                                          const char *key, size_t key_len);

typedef struct geoservices_store {
  sqlite3 *db;
  geoservices_store_layer **layers;
  size_t nlayers, layer_cap;
  sqlite3_stmt *att_upsert, *att_remove;
  sqlite3_stmt *original_put, *original_forget, *original_get;
  geoservices_buf json;     /* the JSON text of a geometry kept beside its blob */
  geoservices_geom geom;
  geoservices_buf blob;     /* the geometry being bound */
  geoservices_spool waiting; /* records of a layer entry whose id has not come yet (store/spool.h) */
  geoservices_buf bytes;    /* decoded base64 of an attachment */
  uint64_t applied[RECORD_KIND_COUNT];
  int bulk;                 /* inside apply: the R-tree is filled here, not by the triggers */
  int filling;              /* this transaction fills empty tables (geoservices_store_set_filling) */
  int rc;                   /* the SQLite result code of the last failure (0: not SQLite's) */
  char message[256];
} geoservices_store;

/* Binds the store to an open connection: registers the ST_* functions and
 * turns on recursive triggers (REPLACE's deletes then keep the R-tree right).
 * 0, or -1 with the message set. */
int geoservices_store_init(geoservices_store *s, sqlite3 *db);
/* Finalizes every statement and frees the layers; the connection stays. */
void geoservices_store_clear(geoservices_store *s);
/* Forgets the records waiting for their layer's id (a new transaction, a
 * rollback, an abandoned document). */
void geoservices_store_drop_waiting(geoservices_store *s);

/* Registers (or replaces) the layer `id`: its table, geometry column (NULL
 * for none), kind and SRS, and its columns in order. Whether its geometries
 * carry Z and M comes from the file: the column's z and m flags in
 * gpkg_geometry_columns (none without that table or row). names/types have ncols
 * entries; gid_col must be a column; oid_col may be GEOSERVICES_STORE_NONE.
 * Prepares its statements. The layer, or NULL with the message set. */
geoservices_store_layer *geoservices_store_add_layer(geoservices_store *s, int64_t id, const char *table,
                                                     const char *geom_col, int geom_kind, int32_t srs_id,
                                                     const char *const *names, const int *types, size_t ncols,
                                                     size_t gid_col, size_t oid_col);
geoservices_store_layer *geoservices_store_layer_of(const geoservices_store *s, int64_t id);

/* Applies the records of tape[0, len). 0, -1 with the message set, or what
 * `other` returned. */
int geoservices_store_apply(geoservices_store *s, geoservices_store_cursor *cursor, const char *tape, size_t len,
                            geoservices_store_other_fn other, void *ctx);

/* Binding one feature by hand (the Lua layer's local edits): begin, bind
 * values by column (marking each column the feature names, a null too),
 * bind the defaults of the others, fill s->geom and bind it, then upsert. */
void geoservices_store_bind_begin(geoservices_store_layer *l);
/* Until the transaction ends, records are plain INSERTs, without looking
 * their GlobalID up (store.create_from: every table starts empty, its
 * GlobalID index is built once it is filled, and the caller removes a
 * GlobalID written twice before the commit). */
void geoservices_store_set_filling(geoservices_store *s, int on);
void geoservices_store_given(geoservices_store_layer *l, size_t col);
/* Each column the feature did not name gets the table's DEFAULT, as the
 * server gives an add the layer's defaults (downloads never: the server's
 * row is whole). 0, or -1 with the message set. */
int geoservices_store_bind_defaults(geoservices_store *s, geoservices_store_layer *l);
size_t geoservices_store_find_column(geoservices_store_layer *l, const char *name, size_t len, size_t position);
int geoservices_store_bind_integer(geoservices_store *s, geoservices_store_layer *l, size_t col, int64_t v);
int geoservices_store_bind_double(geoservices_store *s, geoservices_store_layer *l, size_t col, double v);
int geoservices_store_bind_text(geoservices_store *s, geoservices_store_layer *l, size_t col, const char *v,
                                size_t len);
/* Encodes s->geom (geoservices_geom_reset/point/part) and binds it. */
int geoservices_store_bind_geometry(geoservices_store *s, geoservices_store_layer *l);
/* Steps the bound upsert; 0, or -1 with the message set. */
int geoservices_store_upsert(geoservices_store *s, geoservices_store_layer *l);
/* Deletes the row of a GlobalID; the number of rows deleted, or -1. */
int geoservices_store_remove(geoservices_store *s, geoservices_store_layer *l, const char *gid, size_t len);

/* Geometries the blob holds only approximately (geom.h: `inexact`, Bézier
 * and elliptic segments cut into points) keep the server's JSON in
 * gpkgext_geoservices_original_geometries (made when first needed), with the blob
 * written from it: as long as the row's blob is that one, the feature reads
 * back (st:get, and so every upload) as the server's JSON, never degraded;
 * once the blob changed (an edit in QGIS, GDAL, the library) the blob is
 * what the user drew and reads back as such.
 * After an upsert (its GlobalID still bound): keeps json (len bytes) for the
 * row's GlobalID with the blob just bound, or with json NULL forgets what
 * was kept for it. 0, or -1 with the message set. */
int geoservices_store_keep_original(geoservices_store *s, geoservices_store_layer *l, const char *json, size_t len);
/* The JSON kept for a GlobalID whose blob is still `blob`: 1 with it in
 * s->json, 0 when there is none (or the blob changed since), -1 on error. */
int geoservices_store_original_of(geoservices_store *s, geoservices_store_layer *l, const char *gid, size_t gid_len,
                                  const void *blob, size_t blob_len);

/* Before COMMIT, inside the caller's transaction: packs the deferred
 * R-trees, writes the extents and last_change of the layers written since
 * the last flush into gpkg_contents. 0 or -1. */
int geoservices_store_flush_extents(geoservices_store *s);
/* Forgets what was written since the last flush (after a rollback). */
void geoservices_store_forget_extents(geoservices_store *s);

/* "{UPPERCASE}" of a GUID in any of its spellings into out; 0 when the text
 * is not a GUID (keep it as it is). */
/* Appends the SQL condition "the layer's GlobalID is ?param" (the value
 * bound in the store's one spelling, above): a plain equality on the column,
 * which SQLite answers with a seek in the layer's GlobalID index on the
 * whole GlobalID (geoservices.store.file.schema.gid_index_sql; its Lua twin is
 * schema.gid_match). Every statement of the C core that finds a row by
 * GlobalID is written with it. 0, or nonzero out of memory. */
int geoservices_store_put_gid_match(geoservices_buf *b, const geoservices_store_layer *l, size_t param);
size_t geoservices_store_normalize_guid(const char *s, size_t len, char out[40]);

#endif
