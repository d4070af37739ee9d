/* Esri dates (epoch milliseconds, UTC) <-> GeoPackage DATETIME text
 * ("YYYY-MM-DDTHH:MM:SS.SSSZ", ISO 8601 in UTC, as 12-128r18 1.1.1.1.1
 * asks). Pure C, no time zone database: proleptic Gregorian arithmetic.
 *
 * Years outside 0000..9999 have no form in the standard's four digits. They
 * are written in the same text with the year as long as it needs ("10000-
 * 01-01T00:00:00.000Z") or with a minus sign ("-0001-..."), never as the
 * integer: GDAL reads that text as the same instant (for five digits and
 * more with a "non-conformant content, successfully parsed" warning), where
 * an INTEGER in a DATETIME column is an "unexpected data type" it cannot
 * read, and refusing the value would stop a whole download for one date
 * the server holds. store:get gives the milliseconds back exactly. */
#ifndef GEOSERVICES_STORE_ISOTIME_H
#define GEOSERVICES_STORE_ISOTIME_H

#include <stddef.h>
#include <stdint.h>

#define GEOSERVICES_ISO_LEN 24 /* "YYYY-MM-DDTHH:MM:SS.SSSZ" */
#define GEOSERVICES_ISO_MAX 32 /* any 64-bit milliseconds: a sign and nine year digits */

/* Writes the text of ms into out (NUL-terminated); returns its length (24
 * for the years 0000..9999, more beyond them). */
size_t geoservices_iso_from_ms(int64_t ms, char out[GEOSERVICES_ISO_MAX + 1]);

/* Reads "YYYY-MM-DD" (a year of four digits or more, a minus sign before
 * it for years before 0000), optionally followed by 'T' or ' ' and
 * "HH:MM", ":SS", ".fraction", and 'Z' or an offset "+HH:MM"/"-HH:MM" (UTC
 * when absent). 0 with *ms set, or -1 when the text is not such a date. */
int geoservices_ms_from_iso(const char *s, size_t len, int64_t *ms);

#endif
