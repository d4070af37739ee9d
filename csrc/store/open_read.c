/* Opening a replica store only to read it (open_read.h). */
#include "store/open_read.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What lies beside the store: whether PATH-wal holds any byte, whether
 * PATH-shm exists, whether its folder can be written. */
typedef struct beside {
  int wal_commits, shm, folder_writable;
} beside;

static char *with_suffix(const char *path, const char *suffix) {
  size_t n = strlen(path), m = strlen(suffix);
  char *s = malloc(n + m + 1);
  if (!s) return NULL;
  memcpy(s, path, n);
  memcpy(s + n, suffix, m + 1);
  return s;
}

static int look_beside(const char *path, beside *b) {
  struct stat st;
  char *wal = with_suffix(path, "-wal"), *shm = with_suffix(path, "-shm"), *dir = with_suffix(path, "..");
  char *slash;
  if (!wal || !shm || !dir) {
    free(wal), free(shm), free(dir);
    return SQLITE_NOMEM;
  }
  b->wal_commits = stat(wal, &st) == 0 && st.st_size > 0;
  b->shm = stat(shm, &st) == 0;
  dir[strlen(path)] = '\0'; /* room for "." when path has no folder */
  slash = strrchr(dir, '/');
  if (slash == dir) {
    slash[1] = '\0';
  } else if (slash) {
    *slash = '\0';
  } else {
    strcpy(dir, ".");
  }
  /* EROFS: a read-only medium, whoever we are; EACCES/EPERM: not ours to write */
  b->folder_writable = access(dir, W_OK) == 0 || (errno != EROFS && errno != EACCES && errno != EPERM);
  free(wal), free(shm), free(dir);
  return SQLITE_OK;
}

/* "file:" and path with every byte a URI could read otherwise escaped, then "?immutable=1". */
static char *immutable_uri(const char *path) {
  static const char hex[] = "0123456789ABCDEF";
  size_t n = strlen(path);
  char *uri = malloc(5 + 3 * n + sizeof "?immutable=1"), *o;
  const unsigned char *p;
  if (!uri) return NULL;
  o = uri;
  memcpy(o, "file:", 5);
  o += 5;
  for (p = (const unsigned char *)path; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("/._-~", *p)) {
      *o++ = (char)*p;
    } else {
      *o++ = '%';
      *o++ = hex[*p >> 4];
      *o++ = hex[*p & 15];
    }
  }
  memcpy(o, "?immutable=1", sizeof "?immutable=1");
  return uri;
}

static int open_probed(const char *name, int flags, sqlite3 **db) {
  int rc = sqlite3_open_v2(name, db, flags, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_exec(*db, "SELECT count(*) FROM sqlite_schema", NULL, NULL, NULL);
  if (rc != SQLITE_OK && *db) rc = sqlite3_extended_errcode(*db);
  return rc;
}

static int open_immutable(const char *path, int flags, sqlite3 **db, int *immutable) {
  char *uri = immutable_uri(path);
  int rc;
  if (!uri) return SQLITE_NOMEM;
  rc = open_probed(uri, flags | SQLITE_OPEN_URI, db);
  free(uri);
  *immutable = 1;
  return rc;
}

/* The failures of a first read for want of a writable -shm (or -wal). */
static int for_want_of_room(int rc) {
  switch (rc & 0xff) {
    case SQLITE_CANTOPEN:
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_READONLY:
      return 1;
    default:
      return 0;
  }
}

int geoservices_store_open_read(const char *path, int flags, sqlite3 **db, int *immutable) {
  beside b;
  int rc = look_beside(path, &b);
  *db = NULL;
  *immutable = 0;
  flags = (flags & ~(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | SQLITE_OPEN_READONLY;
  if (rc != SQLITE_OK) return rc;
  if (!b.folder_writable && !b.wal_commits) return open_immutable(path, flags, db, immutable);
  if (!b.folder_writable && !b.shm) return GEOSERVICES_OPEN_READ_WAL;
  rc = open_probed(path, flags, db);
  if (rc == SQLITE_OK || !for_want_of_room(rc)) return rc;
  /* a full disk (the folder is writable): the -shm could not be made */
  if (b.wal_commits) return b.shm ? rc : GEOSERVICES_OPEN_READ_WAL;
  sqlite3_close_v2(*db);
  *db = NULL;
  return open_immutable(path, flags, db, immutable);
}
