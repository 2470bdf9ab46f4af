/*
 * ucd.c: lower-casing and NFKC from the contract's Unicode data (rules 10,
 * 12, 17), read from the generated tables of ucd_tables.inc.
 *
 * Each code point has one record (its properties), found through a
 * two-stage index; decompositions are the full compatibility
 * decompositions, applied recursively by the generator, so NFKC here is
 * UAX #15's three steps on a buffer of code points: decompose (Hangul by
 * algorithm), put each run of marks in canonical order (a stable sort by
 * class: insertion for short runs, counting for long ones, so no input
 * makes it quadratic), compose.  The lower-casing is the root locale's:
 * simple mappings, the one unconditional multi-code-point mapping
 * (U+0130), and final sigma as CONTRACT rule 10 states it.
 *
 * Invariants: the tables are constant; a lone surrogate has the record of
 * no properties (the generator gives every surrogate that one), and is
 * decoded as a code point of its own, so it blocks what the contract says
 * it blocks without any test of its own here.
 */
#include "engine/ucd.h"

#include <stdlib.h>
#include <string.h>

#include "engine/wtf8.h"

typedef struct enr_ucd_rec {
    int32_t lower;   /* delta to the simple lower case, or an offset in enr_ucd_seq */
    uint16_t decomp; /* offset in enr_ucd_seq of the full decomposition, 0: none */
    uint16_t comp;   /* offset in enr_ucd_comp of the compositions it starts, 0: none */
    uint8_t ccc;
    uint8_t flags;
} enr_ucd_rec;

#define F_QC_NO 1
#define F_QC_MAYBE 2
#define F_CASED 4
#define F_IGNORABLE 8
#define F_LOWER_SEQ 16
#define F_NO_BOUNDARY 32

#include "engine/ucd_tables.inc"

/* Hangul (UAX #15, "Hangul Syllable Composition") */
#define SBASE 0xac00u
#define LBASE 0x1100u
#define VBASE 0x1161u
#define TBASE 0x11a7u
#define LCOUNT 19u
#define VCOUNT 21u
#define TCOUNT 28u
#define NCOUNT (VCOUNT * TCOUNT)
#define SCOUNT (LCOUNT * NCOUNT)

#define SIGMA 0x3a3u
/* Runs of marks up to this long are sorted by insertion. */
#define SORT_INSERTION_MAX 32
#define SCRATCH_MIN 256 /* code points */

_Static_assert(ENR_UCD_NFKD_MAX == ENR_UCD_NFKC_MAX, "the data's longest decomposition");

static inline const enr_ucd_rec *rec(uint32_t c)
{
    size_t block = enr_ucd_stage1[c >> ENR_UCD_SHIFT];

    return &enr_ucd_recs[enr_ucd_stage2[block << ENR_UCD_SHIFT |
                                        (c & ((1u << ENR_UCD_SHIFT) - 1))]];
}

unsigned enr_ucd_ccc(uint32_t c)
{
    return rec(c)->ccc;
}

int enr_ucd_nfkc_yes(uint32_t c)
{
    return (rec(c)->flags & (F_QC_NO | F_QC_MAYBE)) == 0;
}

int enr_ucd_stable(uint32_t c)
{
    const enr_ucd_rec *r = rec(c);

    return (r->flags & (F_QC_NO | F_QC_MAYBE)) == 0 && r->ccc == 0;
}

int enr_ucd_boundary_before(uint32_t c)
{
    return (rec(c)->flags & F_NO_BOUNDARY) == 0;
}

int enr_ucd_case_ignorable(uint32_t c)
{
    return (rec(c)->flags & F_IGNORABLE) != 0;
}

const char *enr_ucd_version(void)
{
    return ENR_UCD_VERSION;
}

/* Writes c at dst[k] when it fits cap; the length with it. */
static inline int32_t put16(uint16_t *dst, int32_t k, int32_t cap, uint32_t c)
{
    if (c <= 0xffff) {
        if (k < cap)
            dst[k] = (uint16_t)c;
        return k + 1;
    }
    if (k + 1 < cap) {
        dst[k] = (uint16_t)(0xd800 | ((c - 0x10000) >> 10));
        dst[k + 1] = (uint16_t)(0xdc00 | (c & 0x3ff));
    }
    return k + 2;
}

/* Rule 10's scan from a sigma: the first code point that is not
 * Case_Ignorable, backwards from before i (dir < 0) or forwards from i,
 * is Cased. */
static int cased_next(const uint16_t *s, int32_t i, int32_t n, int dir)
{
    while (dir < 0 ? i > 0 : i < n) {
        uint32_t c = dir < 0 ? enr_utf16_prev(s, &i) : enr_utf16_next(s, &i, n);
        unsigned f = rec(c)->flags;

        if (f & F_IGNORABLE)
            continue;
        return (f & F_CASED) != 0;
    }
    return 0;
}

int32_t enr_ucd_lower16(uint16_t *dst, int32_t cap, const uint16_t *src, int32_t n)
{
    int32_t i = 0, k = 0;

    while (i < n) {
        int32_t at = i;
        uint32_t c = enr_utf16_next(src, &i, n);
        const enr_ucd_rec *r = rec(c);

        if (c == SIGMA) {
            int final = cased_next(src, at, n, -1) && !cased_next(src, i, n, 1);
            k = put16(dst, k, cap, final ? 0x3c2 : 0x3c3);
        } else if (r->flags & F_LOWER_SEQ) {
            const uint32_t *q = enr_ucd_seq + r->lower;

            for (uint32_t j = 1; j <= q[0]; j++)
                k = put16(dst, k, cap, q[j]);
        } else {
            k = put16(dst, k, cap, (uint32_t)((int32_t)c + r->lower));
        }
    }
    return k;
}

int enr_ucd_nfkc_quick_yes16(const uint16_t *src, int32_t n)
{
    int32_t i = 0;
    unsigned last = 0;

    while (i < n) {
        const enr_ucd_rec *r = rec(enr_utf16_next(src, &i, n));

        if ((r->flags & (F_QC_NO | F_QC_MAYBE)) != 0 || (r->ccc != 0 && last > r->ccc))
            return 0;
        last = r->ccc;
    }
    return 1;
}

void enr_ucd_scratch_free(enr_ucd_scratch *s)
{
    free(s->cp);
    free(s->tmp);
    s->cp = s->tmp = NULL;
    s->cap = s->tmp_cap = 0;
}

/* Room for need code points in *buf, doubling (exact: just need); 0 or
 * -1. */
static int reserve(uint32_t **buf, size_t *cap, size_t need, int exact)
{
    size_t c = *cap ? *cap : SCRATCH_MIN;
    uint32_t *p;

    if (need <= *cap)
        return 0;
    while (c < need)
        c *= 2;
    if (exact)
        c = need;
    if (c > SIZE_MAX / sizeof(uint32_t))
        return -1;
    p = realloc(*buf, c * sizeof(uint32_t));
    if (p == NULL)
        return -1;
    *buf = p;
    *cap = c;
    return 0;
}

/* The full decomposition of src into s->cp; the count, or -1. */
static int64_t decompose(enr_ucd_scratch *s, const uint16_t *src, int32_t n)
{
    size_t m = 0;
    int32_t i = 0;

    while (i < n) {
        uint32_t c = enr_utf16_next(src, &i, n);
        const enr_ucd_rec *r;

        if (m + ENR_UCD_NFKC_MAX > s->cap &&
            reserve(&s->cp, &s->cap, m + ENR_UCD_NFKC_MAX + (size_t)(n - i), 0) != 0)
            return -1;
        if (c - SBASE < SCOUNT) {
            uint32_t si = c - SBASE;

            s->cp[m++] = LBASE + si / NCOUNT;
            s->cp[m++] = VBASE + si % NCOUNT / TCOUNT;
            if (si % TCOUNT != 0)
                s->cp[m++] = TBASE + si % TCOUNT;
            continue;
        }
        r = rec(c);
        if (r->decomp == 0) {
            s->cp[m++] = c;
        } else {
            const uint32_t *q = enr_ucd_seq + r->decomp;

            for (uint32_t j = 1; j <= q[0]; j++)
                s->cp[m++] = q[j];
        }
    }
    return (int64_t)m;
}

/* Canonical ordering: each run of marks sorted by class, stably.  0 or
 * -1 (the counting sort's room). */
static int reorder(enr_ucd_scratch *s, size_t m)
{
    size_t i = 0;

    while (i < m) {
        size_t j = i, sorted = 1;
        unsigned last = 0;

        for (; j < m; j++) {
            unsigned cc = enr_ucd_ccc(s->cp[j]);

            if (cc == 0)
                break;
            sorted &= last <= cc;
            last = cc;
        }
        if (sorted) {
            /* nothing to do: most runs, and a title of one mark repeated */
        } else if (j - i > SORT_INSERTION_MAX) {
            size_t count[257] = {0}, len = j - i;
            uint32_t *run, *tmp;

            /* room for the run alone, no more: a title of marks is all
             * one run */
            if (reserve(&s->tmp, &s->tmp_cap, len, 1) != 0)
                return -1;
            run = s->cp + i;
            tmp = s->tmp;
            for (size_t k = 0; k < len; k++)
                count[enr_ucd_ccc(run[k]) + 1]++;
            for (int k = 1; k < 257; k++)
                count[k] += count[k - 1];
            for (size_t k = 0; k < len; k++)
                tmp[count[enr_ucd_ccc(run[k])]++] = run[k];
            memcpy(run, tmp, len * sizeof(uint32_t));
        } else {
            for (size_t k = i + 1; k < j; k++) {
                uint32_t c = s->cp[k];
                unsigned cc = enr_ucd_ccc(c);
                size_t p = k;

                for (; p > i && enr_ucd_ccc(s->cp[p - 1]) > cc; p--)
                    s->cp[p] = s->cp[p - 1];
                s->cp[p] = c;
            }
        }
        i = j + 1;
    }
    return 0;
}

/* The primary composite of a and b, or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
    const enr_ucd_rec *r;

    if (a - LBASE < LCOUNT && b - VBASE < VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a - SBASE < SCOUNT && (a - SBASE) % TCOUNT == 0 && b - TBASE - 1 < TCOUNT - 1)
        return a + (b - TBASE);
    r = rec(a);
    if (r->comp != 0) {
        const uint32_t *q = enr_ucd_comp + r->comp + 1;
        size_t lo = 0, hi = enr_ucd_comp[r->comp];

        while (lo < hi) { /* pairs in increasing order of their second */
            size_t mid = (lo + hi) / 2;

            if (q[2 * mid] == b)
                return q[2 * mid + 1];
            if (q[2 * mid] < b)
                lo = mid + 1;
            else
                hi = mid;
        }
    }
    return 0;
}

/* Canonical composition in place; the new count.  A mark is blocked
 * from the last starter by a code point between them of class 0 or of a
 * class not lower than its own; every class-0 code point that stays
 * becomes the starter, so "the last one kept" is all that must be
 * remembered. */
static size_t recompose(uint32_t *cp, size_t m)
{
    size_t out = 0, starter = 0;
    int have = 0;
    unsigned last = 0;

    for (size_t i = 0; i < m; i++) {
        uint32_t c = cp[i], p;
        unsigned cc = enr_ucd_ccc(c);

        if (have && (out == starter + 1 || last < cc) && (p = compose(cp[starter], c)) != 0) {
            cp[starter] = p;
            continue;
        }
        if (cc == 0) {
            starter = out;
            have = 1;
        }
        last = cc;
        cp[out++] = c;
    }
    return out;
}

int32_t enr_ucd_nfkc16(enr_ucd_scratch *s, const uint16_t *src, int32_t n, uint16_t *dst,
                       int32_t cap)
{
    int64_t m = decompose(s, src, n);
    int32_t k = 0;

    if (m < 0 || reorder(s, (size_t)m) != 0)
        return -1;
    m = (int64_t)recompose(s->cp, (size_t)m);
    for (int64_t i = 0; i < m; i++)
        k = put16(dst, k, cap, s->cp[i]);
    return k;
}
