/* A layer's straight geometry column made a curve type when the first curve
 * comes (apply.h), in the file's schema and gpkg_extensions. */
#include "store/apply_internal.h"

#include <stdio.h>
#include <string.h>

/* ---- curve columns (apply.h) ---------------------------------------------- */

static const char *const CURVE_LINE_TYPES[] = {"CIRCULARSTRING", "COMPOUNDCURVE", "MULTICURVE", NULL};
static const char *const CURVE_AREA_TYPES[] = {"CIRCULARSTRING", "COMPOUNDCURVE", "CURVEPOLYGON", "MULTISURFACE",
                                               NULL};

/* The column's declared type in the table's CREATE statement (12-128r18
 * requirement 31: the same as gpkg_geometry_columns'). SQLite has no ALTER
 * for a column's type; its documented writable_schema procedure edits the
 * CREATE text in sqlite_schema inside the transaction and bumps
 * schema_version, so that every connection (QGIS, GDAL) reads the schema
 * again, and a rollback undoes it with the rest. Sound here because nothing
 * stored changes meaning: MULTILINESTRING, MULTIPOLYGON, MULTICURVE and
 * MULTISURFACE all have NUMERIC affinity (and blobs are never converted).
 * Only the declaration the store itself wrote ("geom" MULTILINESTRING) is
 * replaced; a table declared otherwise is left as it is. */
static int declare_column(geoservices_store *s, geoservices_store_layer *l, const char *from, const char *to) {
  sqlite3_stmt *st = NULL;
  char *old_decl = sqlite3_mprintf("\"%w\" %s", l->geom_col, from);
  char *new_decl = sqlite3_mprintf("\"%w\" %s", l->geom_col, to);
  char *sql = NULL, *bump = NULL;
  int rc = SQLITE_NOMEM, version = -1, found = 0;
  if (!old_decl || !new_decl) goto done;
  rc = sqlite3_prepare_v2(s->db, "SELECT instr(sql, ?1) > 0, replace(sql, ?1, ?2), "
                          "(SELECT schema_version FROM pragma_schema_version) FROM sqlite_master "
                          "WHERE type = 'table' AND name = ?3", -1, &st, NULL);
  if (rc != SQLITE_OK) goto done;
  sqlite3_bind_text(st, 1, old_decl, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, new_decl, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, l->table, -1, SQLITE_STATIC);
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW && sqlite3_column_int(st, 0)) {
    found = 1;
    sql = sqlite3_mprintf("%s", (const char *)sqlite3_column_text(st, 1));
    version = sqlite3_column_int(st, 2);
  }
  rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
  sqlite3_finalize(st);
  st = NULL;
  if (rc != SQLITE_OK || !found) goto done;
  bump = sqlite3_mprintf("PRAGMA schema_version = %d", version + 1);
  if (!sql || !bump) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  if (sqlite3_exec(s->db, "PRAGMA writable_schema = ON", NULL, NULL, NULL) != SQLITE_OK) goto done; /* refused */
  rc = sqlite3_prepare_v2(s->db, "UPDATE sqlite_master SET sql = ?1 WHERE type = 'table' AND name = ?2", -1, &st,
                          NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(st, 1, sql, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, l->table, -1, SQLITE_STATIC);
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(s->db);
    sqlite3_finalize(st);
  }
  if (rc == SQLITE_OK) rc = sqlite3_exec(s->db, bump, NULL, NULL, NULL);
  sqlite3_exec(s->db, "PRAGMA writable_schema = OFF", NULL, NULL, NULL);
done:
  sqlite3_free(old_decl);
  sqlite3_free(new_decl);
  sqlite3_free(sql);
  sqlite3_free(bump);
  if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, l->table);
  return 0;
}

/* The layer's column becomes MULTICURVE (lines) or MULTISURFACE (polygons),
 * with the extension rows of the curve types its blobs hold. A store
 * without the GeoPackage tables (the C tests') just takes the blobs. */
int geoservices_store_promote_to_curves(geoservices_store *s, geoservices_store_layer *l, int kind) {
  const char *const *types = kind == GEOM_POLYGON ? CURVE_AREA_TYPES : CURVE_LINE_TYPES;
  const char *to = kind == GEOM_POLYGON ? "MULTISURFACE" : "MULTICURVE";
  sqlite3_stmt *st = NULL;
  char from[32] = "";
  int rc, i;
  l->curves = l->promoted = 1;
  rc = sqlite3_prepare_v2(s->db, "SELECT upper(geometry_type_name) FROM gpkg_geometry_columns WHERE table_name = ?1 "
                          "AND column_name = ?2", -1, &st, NULL);
  if (rc != SQLITE_OK) return 0; /* no such table */
  sqlite3_bind_text(st, 1, l->table, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, l->geom_col, -1, SQLITE_STATIC);
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
    snprintf(from, sizeof from, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  if (strcmp(from, "MULTILINESTRING") && strcmp(from, "MULTIPOLYGON") && strcmp(from, "LINESTRING") &&
      strcmp(from, "POLYGON"))
    return 0; /* a wider type already (or none): the blobs fit */
  if (declare_column(s, l, from, to)) return -1;
  rc = sqlite3_prepare_v2(s->db, "UPDATE gpkg_geometry_columns SET geometry_type_name = ?1 WHERE table_name = ?2 "
                          "AND column_name = ?3", -1, &st, NULL);
  if (rc != SQLITE_OK) return geoservices_store_fail_sqlite(s, rc, "gpkg_geometry_columns");
  sqlite3_bind_text(st, 1, to, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, l->table, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, l->geom_col, -1, SQLITE_STATIC);
  rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return geoservices_store_fail_sqlite(s, rc, "gpkg_geometry_columns");
  rc = sqlite3_prepare_v2(s->db, "INSERT OR IGNORE INTO gpkg_extensions (table_name, column_name, extension_name, "
                          "definition, scope) VALUES (?1, ?2, 'gpkg_geom_' || ?3, "
                          "'http://www.geopackage.org/spec120/#extension_geometry_types', 'read-write')",
                          -1, &st, NULL);
  if (rc != SQLITE_OK) return 0;
  for (i = 0; types[i] && rc != -1; i++) {
    sqlite3_bind_text(st, 1, l->table, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, l->geom_col, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, types[i], -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    rc = rc == SQLITE_DONE ? 0 : geoservices_store_fail_sqlite(s, rc, "gpkg_extensions");
  }
  sqlite3_finalize(st);
  return rc;
}
