/*
 * ucd.h: the Unicode Character Database of the contract's Unicode version
 * (rule 17), from the generated tables of ucd_tables.inc, and the two
 * operations built on it: full lower-casing with final sigma (rule 10)
 * and NFKC (rule 12), on UTF-16.
 *
 * A lone surrogate in the UTF-16 is a code point of its own with no
 * properties: no case mapping, no decomposition, combining class 0,
 * neither Cased nor Case_Ignorable, composing with nothing (it blocks
 * composition and reordering, it stops the final-sigma scans), as rules
 * 10 and 12 ask.  Nothing here allocates except the scratch of an
 * enr_ucd_scratch.
 */
#ifndef ENR_UCD_H
#define ENR_UCD_H

#include <stddef.h>
#include <stdint.h>

/* NFKC makes at most this many code points of one (U+FDFA, UAX #15);
 * the generator checks it against the data. */
#define ENR_UCD_NFKC_MAX 18

/* Canonical combining class of c (< 0x110000). */
unsigned enr_ucd_ccc(uint32_t c);

/* NFKC_Quick_Check of c is Yes. */
int enr_ucd_nfkc_yes(uint32_t c);

/* Quick check Yes and class 0: normalization has a boundary before c. */
int enr_ucd_stable(uint32_t c);

/* NFKC has a boundary before c: its decomposition starts with a starter
 * that composes with nothing before it (U+FDFA, Hangul, a lone
 * surrogate; not a mark, U+0F73 or a Hangul vowel), so text cut before c
 * normalizes piece by piece.  A run of code points without one makes at
 * most one code point per UTF-8 byte when decomposed (the generator
 * checks it). */
int enr_ucd_boundary_before(uint32_t c);

/* Case_Ignorable (DerivedCoreProperties). */
int enr_ucd_case_ignorable(uint32_t c);

/* The code points of NFKC's work on one text, and the room to sort a
 * long run of marks: grown as needed, kept between calls, freed by
 * enr_ucd_scratch_free. */
typedef struct enr_ucd_scratch {
    uint32_t *cp, *tmp;
    size_t cap, tmp_cap;
} enr_ucd_scratch;

void enr_ucd_scratch_free(enr_ucd_scratch *s);

/* Full lower-casing of src[0, n) (root locale: the simple mappings,
 * U+0130, final sigma) into dst, which has room for cap units.  Returns
 * the length of the whole result; when it is more than cap, dst holds
 * only part of it.  The result is at most 2 * n units. */
int32_t enr_ucd_lower16(uint16_t *dst, int32_t cap, const uint16_t *src, int32_t n);

/* NFKC of src[0, n) into dst (room for cap units).  Returns the length
 * of the whole result (dst holds part of it when that is more than cap),
 * or -1 when the scratch cannot grow. */
int32_t enr_ucd_nfkc16(enr_ucd_scratch *s, const uint16_t *src, int32_t n, uint16_t *dst,
                       int32_t cap);

/* Is src[0, n) in NFKC by UAX #15's quick check (quick check Yes for
 * every code point and classes never decreasing between marks)?  A yes
 * is never wrong; a no means only "normalize to know". */
int enr_ucd_nfkc_quick_yes16(const uint16_t *src, int32_t n);

/* "17.0": the version of the tables. */
const char *enr_ucd_version(void);

#endif
