/* Packing a GeoPackage R-tree in bulk (SQLite's rtree module format).
 *
 * SQLite's R-tree inserts one entry at a time for about 8 microseconds at a
 * million entries: most of an initial download's time. When a layer's
 * R-tree is empty at the start of an apply, the store writes nothing to it
 * during the apply, and at commit packs the table's rows, sorted by the
 * Hilbert index of their envelopes' centres (SQLite's sorter, on temporary
 * files: memory stays flat), into full nodes, streaming level by level,
 * written straight into the module's shadow
 * tables (<rtree>_node, _rowid, _parent): one pass, a node at a time per
 * level in memory. The tree is one SQLite's own code reads and keeps
 * updating afterwards (checked with rtreecheck() in the tests).
 *
 * Node format (sqlite3 ext/rtree): iNodeSize bytes (the root's length);
 * big-endian 16-bit depth (root only) and cell count, then cells of a
 * big-endian 64-bit id and four big-endian float32 (minx maxx miny maxy,
 * rounded outwards as the module rounds them). No lua.h. */
#ifndef GEOSERVICES_STORE_RTREE_H
#define GEOSERVICES_STORE_RTREE_H

#include <sqlite3.h>
#include <stdint.h>

/* Registers geoservices_hilbert(geom, ext_minx, ext_maxx, ext_miny,
 * ext_maxy): the Hilbert index of the centre of a GeoPackage geometry's
 * envelope in the extent, on a 65536 x 65536 grid (0 for no envelope). */
int geoservices_rtree_register(sqlite3 *db);

/* The 32-bit Hilbert index of cell (x, y) on a 65536 x 65536 grid. */
uint32_t geoservices_hilbert(uint32_t x, uint32_t y);

/* Float rounding of the rtree module: down for minima, up for maxima. */
float geoservices_rtree_down(double d);
float geoservices_rtree_up(double d);

/* Packs the rows of `select` (id, minx, maxx, miny, maxy, in the order to
 * pack them; rows with a NULL minx are skipped) into the empty R-tree
 * `rtree` (its name, unquoted). 0, or an SQLite error code (message in db). */
int geoservices_rtree_pack(sqlite3 *db, const char *rtree, sqlite3_stmt *select);

#endif
