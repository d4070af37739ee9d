/* Opening a replica store only to read it, where it may not be writable: a
 * read-only medium (a CD, a read-only mount) or a full disk. A store is in
 * WAL mode, and SQLite's plain read-only open needs the -shm file beside
 * the store (made on the first read when missing): on a medium that cannot
 * be written it fails ("unable to open database file"), on a full disk
 * too ("disk I/O error"). There the store is opened immutable
 * (file:PATH?immutable=1), which reads the main file alone and takes no
 * lock; that is right only when nothing waits in PATH-wal (an immutable
 * open never reads it) and nobody writes while it is read: a folder that
 * cannot be written has no writer, and on a full disk no writer can start
 * (it needs the -shm this open could not make). When PATH-wal holds
 * commits and PATH-shm is beside it, SQLite reads both in place (its
 * read-only -shm path); without the -shm they cannot be read where they
 * are, and the open fails with GEOSERVICES_OPEN_READ_WAL: the caller reads
 * a copy of the two files in a writable folder (geoservices.store.file.wal_copy). */
#ifndef GEOSERVICES_STORE_OPEN_READ_H
#define GEOSERVICES_STORE_OPEN_READ_H

#include <sqlite3.h>

/* The result when PATH-wal holds commits that cannot be read in place
 * (an extended code of SQLITE_CANTOPEN that SQLite does not use). */
#define GEOSERVICES_OPEN_READ_WAL (SQLITE_CANTOPEN | (99 << 8))

/* Opens path read-only with flags (SQLITE_OPEN_READONLY is added) and reads
 * its schema once, so that a failure shows here; *immutable says how it was
 * opened. Returns SQLITE_OK, or SQLite's result (or
 * GEOSERVICES_OPEN_READ_WAL) with *db left open for its message (NULL
 * after an out-of-memory or for GEOSERVICES_OPEN_READ_WAL): the caller
 * closes it. */
int geoservices_store_open_read(const char *path, int flags, sqlite3 **db, int *immutable);

#endif
