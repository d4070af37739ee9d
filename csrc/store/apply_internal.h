/* Shared between the files of the store's apply path (apply.c and
 * apply_*.c), which apply.h describes as one piece. Not part of its
 * interface: nothing here leaves core.so (-fvisibility=hidden). No lua.h. */
#ifndef GEOSERVICES_STORE_APPLY_INTERNAL_H
#define GEOSERVICES_STORE_APPLY_INTERNAL_H

#include "store/apply.h"

/* apply.c: every file reports a failure the same way, into s->message and s->rc; -1. */
int geoservices_store_fail(geoservices_store *s, int rc, const char *fmt, ...);
/* apply.c: a failure with SQLite's message for what; -1. */
int geoservices_store_fail_sqlite(geoservices_store *s, int rc, const char *what);
/* apply.c: a tape key is name (exactly; _ci: ASCII case-insensitive, as the server's field names). */
int geoservices_store_key_is(const char *key, uint32_t len, const char *name);
int geoservices_store_key_is_ci(const char *key, uint32_t len, const char *name);

/* apply_bind.c: steps a delete statement bound by the caller (GlobalID or OBJECTID, apply.c's deletes too). */
int geoservices_store_remove_with(geoservices_store *s, geoservices_store_layer *l, sqlite3_stmt *st);

/* apply_geometry.c: the Esri geometry object at *p into s->geom, for apply.c's features. */
int geoservices_store_tape_geometry(geoservices_store *s, const geoservices_store_layer *l, const char **p);

/* apply_curves.c: widens the layer's column to take a curve of kind, when binding its blob. */
int geoservices_store_promote_to_curves(geoservices_store *s, geoservices_store_layer *l, int kind);

/* apply_rtree.c: at a layer's first upsert in a transaction, whether its R-tree is packed at the flush. */
int geoservices_store_decide_rtree(geoservices_store *s, geoservices_store_layer *l);

/* apply_originals.c: the value at *p as JSON text, the server's geometry apply.c keeps. */
int geoservices_store_tape_json(const char **p, geoservices_buf *out);
/* apply_originals.c: whether layer l has kept geometries, read at registration and after a transaction. */
void geoservices_store_read_originals(geoservices_store *s, geoservices_store_layer *l);

/* apply_attachments.c: an attachment record of apply.c's tape, written or deleted. */
int geoservices_store_apply_attachment(geoservices_store *s, int64_t layer, const char **p);
int geoservices_store_apply_attachment_delete(geoservices_store *s, int64_t layer, const char **p);

/* apply_layers.c: frees a layer and its statements (the connection's teardown too). */
void geoservices_store_free_layer(geoservices_store_layer *l);
/* apply_layers.c: the geometry column's Z/M and curve flags, read again once a transaction ends. */
void geoservices_store_read_dims(geoservices_store *s, geoservices_store_layer *l);

#endif
