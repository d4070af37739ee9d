/* libFuzzer target: form encoding must produce only unreserved characters
 * and %XX, have the predicted size, and decode back to the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "net/urlencode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  geoservices_buf enc, dec;
  size_t i;
  geoservices_buf_init(&enc, 0);
  geoservices_buf_init(&dec, 0);
  if (geoservices_urlencode_append(&enc, (const char *)data, size)) abort();
  if (enc.len != geoservices_urlencoded_size((const char *)data, size)) abort();
  for (i = 0; i < enc.len; i++) {
    unsigned char c = (unsigned char)enc.data[i];
    int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
             c == '.' || c == '_' || c == '~' || c == '%';
    if (!ok) abort();
  }
  if (geoservices_urldecode_append(&dec, enc.data ? enc.data : "", enc.len)) abort();
  if (dec.len != size || (size && memcmp(dec.data, data, size) != 0)) abort();
  /* the decoder must also survive arbitrary input */
  geoservices_buf_reset(&dec);
  (void)geoservices_urldecode_append(&dec, (const char *)data, size);
  geoservices_buf_free(&enc);
  geoservices_buf_free(&dec);
  return 0;
}
