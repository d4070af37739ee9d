/* Writing to a file descriptor (fdio.h). */
#include "fdio.h"

#include <errno.h>
#include <unistd.h>

int geoservices_write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}
