/* What the Lua layer needs from the system and Lua's io/os cannot give:
 * write_file_atomic, append_durable (a journal's record), make_temp +
 * commit_file (downloads saved while they arrive), remove_temps (what a
 * killed download left) and random_bytes.
 *
 * Atomic file replacement for replica state and downloaded results: write a
 * temporary file in the same directory, fsync it, rename it over the target,
 * fsync the directory. A crash at any point leaves either the old or the new
 * file, never a torn one. Lua's io library cannot fsync, hence C. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "class.h"
#include "common.h"
#include "fdio.h"

static int push_errno(lua_State *L, const char *what, const char *path) {
  int e = errno;
  luaL_pushfail(L);
  lua_pushfstring(L, "%s %s: %s", what, path, strerror(e));
  return 2;
}

/* The process's umask. Linux tells it in /proc without changing it;
 * elsewhere it is set and put back (no thread of ours creates files). */
static mode_t current_umask(void) {
  char line[128];
  unsigned int mask;
  mode_t old;
  FILE *f = fopen("/proc/self/status", "r");
  if (f) {
    while (fgets(line, sizeof line, f)) {
      if (sscanf(line, "Umask: %o", &mask) == 1) {
        fclose(f);
        return (mode_t)mask;
      }
    }
    fclose(f);
  }
  old = umask(022);
  umask(old);
  return old;
}

/* The mode a file written over `path` gets: `wanted` when given (>= 0: a
 * file that may hold a token is 0600 whatever it was), else the mode the
 * file has (a save never changes it), else what open() gives a new file
 * (0666 less the umask: 0644 under the usual 022). mkstemp's temporary
 * file is 0600, which the first save used to leave on a 0644 file. */
static int set_mode_for(int fd, const char *path, lua_Integer wanted) {
  struct stat st;
  mode_t mode;
  if (wanted >= 0) mode = (mode_t)(wanted & 07777);
  else if (stat(path, &st) == 0) mode = st.st_mode & 07777;
  else mode = 0666 & ~current_umask();
  return fchmod(fd, mode);
}

/* write_file_atomic(path, data [, mode]) -> true, or nil, message. The file
 * keeps its mode, or gets `mode` when given, or is made as the umask says. */
static int l_write_file_atomic(lua_State *L) {
  size_t len, dir_len;
  const char *path = luaL_checkstring(L, 1);
  const char *data = luaL_checklstring(L, 2, &len);
  lua_Integer wanted = luaL_optinteger(L, 3, -1);
  const char *slash = strrchr(path, '/');
  size_t path_len = strlen(path);
  char *tmp_path;
  int fd, dir_fd;

  /* mkstemp edits its template in place: use scratch memory owned by Lua
   * (a userdata), never the bytes of a Lua string. */
  tmp_path = (char *)lua_newuserdatauv(L, path_len + sizeof ".tmpXXXXXX", 0);
  memcpy(tmp_path, path, path_len);
  memcpy(tmp_path + path_len, ".tmpXXXXXX", sizeof ".tmpXXXXXX");
  fd = mkstemp(tmp_path);
  if (fd < 0) return push_errno(L, "cannot create a temporary file next to", path);
  if (set_mode_for(fd, path, wanted) != 0 || geoservices_write_all(fd, data, len) != 0 || fsync(fd) != 0) {
    int e = errno;
    close(fd);
    unlink(tmp_path);
    errno = e;
    return push_errno(L, "cannot write", tmp_path);
  }
  if (close(fd) != 0 || rename(tmp_path, path) != 0) {
    int e = errno;
    unlink(tmp_path);
    errno = e;
    return push_errno(L, "cannot replace", path);
  }
  /* The rename is durable only once the directory entry is on disk. */
  dir_len = slash ? (size_t)(slash - path) : 0;
  lua_pushlstring(L, slash ? path : ".", slash ? (dir_len ? dir_len : 1) : 1);
  dir_fd = open(lua_tostring(L, -1), O_RDONLY);
  if (dir_fd >= 0) {
    fsync(dir_fd);
    close(dir_fd);
  }
  lua_pushboolean(L, 1);
  return 1;
}

static void fsync_dir_of(lua_State *L, const char *path) {
  const char *slash = strrchr(path, '/');
  size_t dir_len = slash ? (size_t)(slash - path) : 0;
  int dir_fd;
  lua_pushlstring(L, slash ? path : ".", slash ? (dir_len ? dir_len : 1) : 1);
  dir_fd = open(lua_tostring(L, -1), O_RDONLY);
  if (dir_fd >= 0) {
    fsync(dir_fd);
    close(dir_fd);
  }
  lua_pop(L, 1);
}

/* append_durable(path, data, mode) -> true, or nil, message: appends data
 * to path (made with `mode` when missing, and given it when it has
 * another) and fsyncs it before returning, so an acknowledged record is on
 * disk; a crash in the middle leaves a torn last record, which the reader
 * of the journal knows by its length (emulator.state_file). */
static int l_append_durable(lua_State *L) {
  size_t len;
  const char *path = luaL_checkstring(L, 1);
  const char *data = luaL_checklstring(L, 2, &len);
  mode_t mode = (mode_t)(luaL_checkinteger(L, 3) & 07777);
  struct stat st;
  int created, fd;
  created = stat(path, &st) != 0;
  fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, mode);
  if (fd < 0) return push_errno(L, "cannot open", path);
  if (fchmod(fd, mode) != 0 || geoservices_write_all(fd, data, len) != 0 || fsync(fd) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return push_errno(L, "cannot append to", path);
  }
  if (close(fd) != 0) return push_errno(L, "cannot append to", path);
  if (created) fsync_dir_of(L, path);
  lua_pushboolean(L, 1);
  return 1;
}

/* make_temp(path) -> the path of a new empty file next to path, or nil,
 * message: where a download is saved before commit_file; it has the mode
 * path has, or the mode the umask gives a new file (see set_mode_for). */
static int l_make_temp(lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  char *tmp = (char *)lua_newuserdatauv(L, len + sizeof ".partXXXXXX", 0);
  int fd;
  memcpy(tmp, path, len);
  memcpy(tmp + len, ".partXXXXXX", sizeof ".partXXXXXX");
  fd = mkstemp(tmp);
  if (fd < 0) return push_errno(L, "cannot create a temporary file next to", path);
  if (set_mode_for(fd, path, -1) != 0) {
    int e = errno;
    close(fd);
    unlink(tmp);
    errno = e;
    return push_errno(L, "cannot set the mode of", tmp);
  }
  close(fd);
  lua_pushstring(L, tmp);
  return 1;
}

/* remove_temps(path) -> the number of files removed, or nil, message: the
 * temporary files make_temp(path) made (path.partXXXXXX) that a killed
 * process left behind; nothing else is touched. */
static int l_remove_temps(lua_State *L) {
  size_t len, base_len;
  const char *path = luaL_checklstring(L, 1, &len);
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  char *dir = (char *)lua_newuserdatauv(L, len + 2, 0);
  char *full = (char *)lua_newuserdatauv(L, len + sizeof ".partXXXXXX", 0);
  DIR *d;
  struct dirent *ent;
  lua_Integer removed = 0;
  if (slash) {
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    if (slash == path) strcpy(dir, "/");
  } else {
    strcpy(dir, ".");
  }
  base_len = strlen(base);
  d = opendir(dir);
  if (!d) return push_errno(L, "cannot list", dir);
  while ((ent = readdir(d)) != NULL) {
    const char *name = ent->d_name;
    if (strlen(name) != base_len + sizeof ".partXXXXXX" - 1) continue;
    if (memcmp(name, base, base_len) != 0 || memcmp(name + base_len, ".part", 5) != 0) continue;
    memcpy(full, path, len - base_len);
    strcpy(full + (len - base_len), name);
    if (unlink(full) == 0) removed++;
  }
  closedir(d);
  lua_pushinteger(L, removed);
  return 1;
}

/* commit_file(tmp, path) -> true, or nil, message: fsyncs tmp, renames it
 * over path and fsyncs the directory, so path is either the old file or the
 * whole new one, whatever crashes. */
static int l_commit_file(lua_State *L) {
  const char *tmp = luaL_checkstring(L, 1);
  const char *path = luaL_checkstring(L, 2);
  int fd = open(tmp, O_RDONLY);
  if (fd < 0) return push_errno(L, "cannot open", tmp);
  if (fsync(fd) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return push_errno(L, "cannot flush", tmp);
  }
  close(fd);
  if (rename(tmp, path) != 0) return push_errno(L, "cannot replace", path);
  fsync_dir_of(L, path);
  lua_pushboolean(L, 1);
  return 1;
}

/* random_bytes(n) -> string of n bytes from the kernel's CSPRNG. */
static int l_random_bytes(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  luaL_Buffer b;
  char *p;
  FILE *f;
  luaL_argcheck(L, n >= 0 && n <= 4096, 1, "between 0 and 4096");
  f = fopen("/dev/urandom", "rb");
  if (!f) return push_errno(L, "cannot open", "/dev/urandom");
  p = luaL_buffinitsize(L, &b, (size_t)n);
  if (fread(p, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    return luaL_error(L, "short read from /dev/urandom");
  }
  fclose(f);
  luaL_pushresultsize(&b, (size_t)n);
  return 1;
}

/* ---- Lock: an exclusive flock on a file, held until close ---------------
 * One synchronization of a replica at a time, across processes: the lock
 * belongs to the open file description, so a second try fails even in the
 * same process, and the kernel lets go when the process dies. */
#define LOCK_MT "geoservices.Lock"

typedef struct {
  int fd; /* -1 once closed */
} lock_ud;

static int l_lock_close(lua_State *L) {
  lock_ud *u = (lock_ud *)luaL_checkudata(L, 1, LOCK_MT);
  if (u->fd >= 0) {
    flock(u->fd, LOCK_UN);
    close(u->fd);
    u->fd = -1;
  }
  return 0;
}

static int l_lock_tostring(lua_State *L) {
  lock_ud *u = (lock_ud *)luaL_checkudata(L, 1, LOCK_MT);
  lua_pushfstring(L, LOCK_MT " (%p)%s", (void *)u, u->fd < 0 ? " closed" : "");
  return 1;
}

/* try_lock(path) -> lock, or nil, message, "busy" (another holder), or nil,
 * message, "io". The lock file is created (mode 0600) and never removed:
 * removing it would let two holders lock two different files. */
static int l_try_lock(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lock_ud *u = (lock_ud *)lua_newuserdatauv(L, sizeof(lock_ud), 0);
  u->fd = -1;
  luaL_setmetatable(L, LOCK_MT); /* created closed: __gc is safe from here on */
  u->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (u->fd < 0) {
    push_errno(L, "cannot open the lock file", path);
    lua_pushliteral(L, "io");
    return 3;
  }
  if (flock(u->fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    close(u->fd);
    u->fd = -1;
    luaL_pushfail(L);
    lua_pushfstring(L, "%s is locked by another synchronization", path);
    lua_pushstring(L, (e == EWOULDBLOCK || e == EAGAIN) ? "busy" : "io");
    return 3;
  }
  return 1;
}

void geoservices_open_sys(lua_State *L) {
  static const luaL_Reg lock_methods[] = { {"close", l_lock_close}, {NULL, NULL} };
  static const luaL_Reg lock_meta[] = {
    {"__gc", l_lock_close}, {"__close", l_lock_close}, {"__tostring", l_lock_tostring}, {NULL, NULL},
  };
  static const luaL_Reg functions[] = {
    {"try_lock", l_try_lock},
    {"write_file_atomic", l_write_file_atomic},
    {"append_durable", l_append_durable},
    {"random_bytes", l_random_bytes},
    {"make_temp", l_make_temp},
    {"remove_temps", l_remove_temps},
    {"commit_file", l_commit_file},
    {NULL, NULL},
  };
  geoservices_new_class(L, LOCK_MT, lock_methods, lock_meta);
  luaL_setfuncs(L, functions, 0);
}
