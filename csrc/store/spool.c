#include "store/spool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Each record: its length (u64, native order: the file never leaves the
 * process), then its bytes. */
#define LEN_BYTES sizeof(uint64_t)

void geoservices_spool_init(geoservices_spool *sp, const char *dir) {
  memset(sp, 0, sizeof *sp);
  geoservices_buf_init(&sp->mem, 0);
  geoservices_buf_init(&sp->one, 0);
  geoservices_spool_set_dir(sp, dir);
}

int geoservices_spool_set_dir(geoservices_spool *sp, const char *dir) {
  free(sp->dir);
  sp->dir = NULL;
  if (dir && *dir) {
    size_t n = strlen(dir) + 1;
    sp->dir = malloc(n);
    if (!sp->dir) return -1;
    memcpy(sp->dir, dir, n);
  }
  return 0;
}

void geoservices_spool_free(geoservices_spool *sp) {
  if (sp->file) fclose(sp->file);
  free(sp->dir);
  geoservices_buf_free(&sp->mem);
  geoservices_buf_free(&sp->one);
  memset(sp, 0, sizeof *sp);
}

/* The file, made now if needed: in the store's directory (the disk that
 * holds the store has room for its data), else the system's temporary one. */
static FILE *spool_file(geoservices_spool *sp) {
  static const char name[] = "/.geoservices-spool-XXXXXX";
  FILE *f = NULL;
  if (sp->file) return sp->file;
  if (sp->dir) {
    size_t n = strlen(sp->dir);
    char *path = malloc(n + sizeof name);
    int fd;
    if (!path) return NULL;
    memcpy(path, sp->dir, n);
    memcpy(path + n, name, sizeof name);
    fd = mkstemp(path);
    if (fd >= 0) {
      unlink(path); /* gone from the directory: nothing to clean up after a crash */
      f = fdopen(fd, "w+b");
      if (!f) close(fd);
    }
    free(path);
  }
  if (!f) f = tmpfile();
  if (!f) {
    sp->error = errno ? errno : EIO;
    return NULL;
  }
  setvbuf(f, NULL, _IOFBF, (size_t)1 << 18);
  sp->file = f;
  return f;
}

static int write_out(geoservices_spool *sp) {
  FILE *f = spool_file(sp);
  if (!f) return -1;
  if (sp->mem.len && fwrite(sp->mem.data, 1, sp->mem.len, f) != sp->mem.len) {
    sp->error = errno ? errno : EIO;
    return -1;
  }
  sp->file_bytes += sp->mem.len;
  geoservices_buf_reset(&sp->mem);
  return 0;
}

int geoservices_spool_put(geoservices_spool *sp, const char *bytes, size_t len) {
  uint64_t n = len;
  sp->error = 0;
  if (geoservices_buf_append(&sp->mem, (const char *)&n, LEN_BYTES) || geoservices_buf_append(&sp->mem, bytes, len))
    return -1;
  sp->count++;
  if (sp->mem.len >= GEOSERVICES_SPOOL_MEMORY) return write_out(sp);
  return 0;
}

/* Reads one record of the file into sp->one. 0 or -1. */
static int read_one(geoservices_spool *sp, FILE *f, uint64_t *left) {
  uint64_t n;
  if (*left < LEN_BYTES || fread(&n, 1, LEN_BYTES, f) != LEN_BYTES || n > *left - LEN_BYTES) goto short_read;
  geoservices_buf_reset(&sp->one);
  if (n > SIZE_MAX - 1 || geoservices_buf_reserve(&sp->one, (size_t)n)) return -1;
  if (fread(sp->one.data, 1, (size_t)n, f) != (size_t)n) goto short_read;
  sp->one.len = (size_t)n;
  *left -= LEN_BYTES + n;
  return 0;
short_read:
  sp->error = ferror(f) && errno ? errno : EIO;
  return -1;
}

int geoservices_spool_replay(geoservices_spool *sp, int (*fn)(void *ctx, const char *rec, size_t len), void *ctx) {
  int rc = 0;
  sp->error = 0;
  if (sp->file && sp->file_bytes) {
    uint64_t left = sp->file_bytes;
    if (fflush(sp->file) != 0 || fseek(sp->file, 0, SEEK_SET) != 0) {
      sp->error = errno ? errno : EIO;
      rc = -1;
    }
    while (rc == 0 && left > 0) {
      if (read_one(sp, sp->file, &left)) rc = -1;
      else rc = fn(ctx, sp->one.data, sp->one.len);
    }
  }
  if (rc == 0) { /* then the records still in memory */
    size_t pos = 0;
    while (rc == 0 && pos + LEN_BYTES <= sp->mem.len) {
      uint64_t n;
      memcpy(&n, sp->mem.data + pos, LEN_BYTES);
      pos += LEN_BYTES;
      rc = fn(ctx, sp->mem.data + pos, (size_t)n);
      pos += (size_t)n;
    }
  }
  geoservices_spool_drop(sp);
  return rc;
}

void geoservices_spool_drop(geoservices_spool *sp) {
  geoservices_buf_reset(&sp->mem);
  sp->count = 0;
  if (sp->file && sp->file_bytes) {
    /* emptied for the next layer: its blocks go back to the disk now */
    if (fflush(sp->file) != 0 || ftruncate(fileno(sp->file), 0) != 0) {
      fclose(sp->file); /* cannot be emptied: the next layer makes another */
      sp->file = NULL;
    } else {
      rewind(sp->file);
    }
  }
  sp->file_bytes = 0;
  if (sp->one.cap > GEOSERVICES_SPOOL_MEMORY) geoservices_buf_free(&sp->one); /* one huge record: not kept */
  if (sp->mem.cap > 2 * GEOSERVICES_SPOOL_MEMORY) geoservices_buf_free(&sp->mem);
}
