/* Writing to a file descriptor. Pure C (POSIX), no lua.h. */
#ifndef GEOSERVICES_FDIO_H
#define GEOSERVICES_FDIO_H

#include <stddef.h>

/* Writes all n bytes, again after a short write or EINTR: 0, or -1 with
 * errno set. */
int geoservices_write_all(int fd, const char *p, size_t n);

#endif
