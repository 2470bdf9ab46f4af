/*
 * numfmt.h: numbers as the contract sees them (docs/contract.md §2.6, 9, 13.1).
 *
 * Conversions are exact: text to double is correctly rounded (ties to
 * even) for any number of digits, double to text is the shortest
 * round-trip form printed as ECMAScript Number::toString does.
 */
#ifndef ENR_NUMFMT_H
#define ENR_NUMFMT_H

#include <stddef.h>

#define ENR_NUM_MAX 32 /* longest output of enr_num_format, NUL included */

/* Rule 9.  -0 prints "0", NaN "NaN", infinities "Infinity"/"-Infinity".
 * Writes a NUL-terminated string to out and returns its length. */
size_t enr_num_format(double v, char out[ENR_NUM_MAX]);

/* A JSON number token already validated as strict RFC 8259 syntax
 * (s[0..len) only).  Overflow gives +/-Infinity, underflow +/-0. */
double enr_num_parse_json(const char *s, size_t len);

/* Rule 13.1 string-to-number (ECMAScript StringToNumber) on WTF-8 text:
 * trims the 25 white-space code points of rule 8; empty gives 0;
 * 0x/0o/0b literals; signed decimal or Infinity; anything else NaN. */
double enr_num_from_text(const char *s, size_t len);

#endif
