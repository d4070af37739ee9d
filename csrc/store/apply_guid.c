/* GlobalIDs and GUIDs in any of their spellings, written as "{UPPERCASE}"
 * (apply.h). */
#include "store/apply.h"

/* ---- GUIDs ----------------------------------------------------------------- */

static int is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

size_t geoservices_store_normalize_guid(const char *s, size_t len, char out[40]) {
  size_t i;
  if (len == 38 && s[0] == '{' && s[37] == '}') {
    s++;
    len = 36;
  }
  if (len != 36) return 0;
  for (i = 0; i < 36; i++) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-') return 0;
    } else if (!is_hex(s[i])) {
      return 0;
    }
  }
  out[0] = '{';
  for (i = 0; i < 36; i++) out[i + 1] = (char)(s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 'A' : s[i]);
  out[37] = '}';
  out[38] = '\0';
  return 38;
}
