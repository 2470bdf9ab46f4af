/*
 * scan.h: the wide scan of JSON string bytes (the reader's hot loop: lex.c, reader.c).
 *
 * enr_scan_string scans the body of a string token from p (just after
 * its opening quote, or after a complete escape) and returns the first
 * byte the reader must look at itself: the closing quote, a control byte
 * (< 0x20), a backslash that does not start a valid escape (\" \\ \/ \b
 * \f \n \r \t, or \u and four hex digits), or end.  Valid escapes on the
 * way are stepped over and set *escaped; a byte >= 0x80 before the
 * returned point sets *high (neither is ever cleared).
 *
 * The implementation is picked at the first call for the CPU it runs on
 * (AVX2, else SSE2, else a portable loop); all give the same answer,
 * which the scan fuzz target checks against the portable one.
 */
#ifndef ENR_SCAN_H
#define ENR_SCAN_H

/* Length of the valid JSON escape at p (on a backslash): 2, or 6 for \u
 * and four hex digits; 0 when it is not one or is cut by end (the
 * reader then reports it).  The one table of JSON's escapes. */
static inline __attribute__((always_inline)) long enr_escape_len(const unsigned char *p,
                                                                 const unsigned char *end)
{
#define ENR_HEX(c) (((c) >= '0' && (c) <= '9') || (((c) | 0x20) >= 'a' && ((c) | 0x20) <= 'f'))
    if (end - p < 2)
        return 0;
    switch (p[1]) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't':
        return 2;
    case 'u':
        return end - p >= 6 && ENR_HEX(p[2]) && ENR_HEX(p[3]) && ENR_HEX(p[4]) && ENR_HEX(p[5]) ? 6
                                                                                                : 0;
    default:
        return 0;
    }
#undef ENR_HEX
}

typedef const unsigned char *(*enr_scan_fn)(const unsigned char *p, const unsigned char *end,
                                            unsigned *high, int *escaped);

const unsigned char *enr_scan_string(const unsigned char *p, const unsigned char *end,
                                     unsigned *high, int *escaped);

/* Each implementation by name, for the fuzz target; NULL when this build
 * or this CPU has none.  Names: "portable", "sse2", "avx2". */
enr_scan_fn enr_scan_impl(const char *name);

/* The same stop for a string nobody reads (no *high, no *escaped): what
 * skips descriptions and tags, resolving a block's escapes at once. */
typedef const unsigned char *(*enr_skip_fn)(const unsigned char *p, const unsigned char *end);

const unsigned char *enr_skip_string(const unsigned char *p, const unsigned char *end);
enr_skip_fn enr_skip_impl(const char *name);

#endif
