/* Unit tests of the growable buffer: growth, limits, failure leaves it valid. */
#include <stdlib.h>

#include "buf.h"
#include "check.h"

int main(void) {
  geoservices_buf b;
  size_t i, failures;

  geoservices_buf_init(&b, 0);
  CHECK(b.len == 0 && b.data == NULL);
  CHECK(geoservices_buf_append(&b, "", 0) == 0);
  CHECK(b.data != NULL && b.data[0] == '\0'); /* always NUL-terminated once allocated */
  failures = 0;
  for (i = 0; i < 100000; i++) failures += geoservices_buf_putc(&b, (char)('a' + i % 26)) != 0;
  CHECK(failures == 0);
  CHECK(b.len == 100000);
  CHECK(b.data[25] == 'z' && b.data[26] == 'a' && b.data[100000] == '\0');
  geoservices_buf_reset(&b);
  CHECK(b.len == 0 && b.cap > 0);
  geoservices_buf_free(&b);
  CHECK(b.data == NULL && b.cap == 0);
  geoservices_buf_free(&b); /* double free is harmless */

  geoservices_buf_init(&b, 8); /* a limit: appends beyond it fail, the buffer stays valid */
  CHECK(geoservices_buf_append(&b, "12345678", 8) == 0);
  CHECK(geoservices_buf_putc(&b, '9') == -1);
  CHECK(b.len == 8 && memcmp(b.data, "12345678", 8) == 0);
  geoservices_buf_reset(&b);
  CHECK(geoservices_buf_append(&b, "123456789", 9) == -1);
  CHECK(b.len == 0);
  geoservices_buf_free(&b);

  geoservices_buf_init(&b, 0);
  CHECK(geoservices_buf_reserve(&b, (size_t)-1) == -1); /* overflow is refused, not wrapped */
  CHECK(geoservices_buf_append(&b, "ok", 2) == 0 && strcmp(b.data, "ok") == 0);
  geoservices_buf_free(&b);
  return CHECK_DONE("test_buf");
}
