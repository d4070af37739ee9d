/* Esri dates (epoch milliseconds, UTC) <-> GeoPackage DATETIME text
 * ("YYYY-MM-DDTHH:MM:SS.SSSZ", ISO 8601 in UTC, as 12-128r18 1.1.1.1.1
 * asks). Pure C, no time zone database: proleptic Gregorian arithmetic. */
#ifndef GEOSERVICES_STORE_ISOTIME_H
#define GEOSERVICES_STORE_ISOTIME_H

#include <stddef.h>
#include <stdint.h>

#define GEOSERVICES_ISO_LEN 24 /* "YYYY-MM-DDTHH:MM:SS.SSSZ" */

/* Writes the text of ms into out (NUL-terminated); returns its length, or 0
 * when the year is outside 0000..9999 (the caller keeps the integer). */
size_t geoservices_iso_from_ms(int64_t ms, char out[GEOSERVICES_ISO_LEN + 1]);

/* Reads "YYYY-MM-DD", optionally followed by 'T' or ' ' and "HH:MM",
 * ":SS", ".fraction", and 'Z' or an offset "+HH:MM"/"-HH:MM" (UTC when
 * absent). 0 with *ms set, or -1 when the text is not such a date. */
int geoservices_ms_from_iso(const char *s, size_t len, int64_t *ms);

#endif
