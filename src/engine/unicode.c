/*
 * unicode.c: the Unicode steps of the contract (rules 4.2, 7.2, 8, 10, 12)
 * on WTF-8 text, with the Unicode data of ucd.c (rule 17).
 *
 * The lower-casing and the normalizer (ucd.c) work on UTF-16, where an
 * unpaired surrogate is simply a lone code unit: a code point with no
 * decomposition, combining class 0, no case mapping, neither Cased nor
 * Case_Ignorable, which is exactly what rules 10 and 12 ask
 * (tests/unit/test_unicode.c checks it).  So WTF-8 is converted here to
 * UTF-16 with lone surrogates kept as lone units, and back.
 *
 * Fast paths, because nearly every id and most titles are ASCII: ASCII
 * never reaches the normalizer (NFKC of ASCII is the identity,
 * lower-casing ASCII is tolower); non-ASCII titles already in NFKC skip the normalizer and are
 * folded on their original bytes, and most are known to be in NFKC from
 * their UTF-8 bytes alone (title_one_pass), without the UTF-16 copy,
 * with the code points whose NFKC is a few stable code points (fullwidth
 * forms, ligatures, Roman numerals, ...) replaced on the way.
 * With enr_uni_set_slow() the UTF-16 quick check and the first fold decide:
 * the reference the fast fuzz target holds the fast paths to.
 *
 * Invariants: an enr_uni owns two UTF-16 scratch buffers and the
 * normalizer's code points that grow as needed and shrink only through
 * enr_uni_shrink() between requests, so a worker's steady state does not
 * allocate; outputs are appended to the caller's enr_buf and never
 * overlap the input.  An id is lower-cased in pieces (ENR_UNI_ID_PIECE),
 * a title normalized in pieces and refused once its result passes the
 * caller's max: no scratch buffer grows with what the input could
 * inflate to.
 */
#include "engine/unicode.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <string.h>

#include "base/text.h"
#include "engine/ucd.h"
#include "engine/wtf8.h"

#define ENR_UNI_MIN_CAP 256 /* UTF-16 units: most titles fit at once */

/* An id is lower-cased in pieces of about this many bytes, cut where no
 * final-sigma context can cross (cut_ok), so the scratch stays this
 * small whatever the id's length (a joined "[object Object]" id, or one
 * of invalid bytes, can be MBs). */
#define ENR_UNI_ID_PIECE 4096
/* A title is normalized in pieces of about this many UTF-16 units, and
 * NFKC makes at most 18 code points of one (U+FDFA, UAX #15): the
 * output for a piece always fits ENR_UNI_NFKC_MAX times it. */
#define ENR_UNI_NFKC_PIECE 4096
#define ENR_UNI_NFKC_MAX ENR_UCD_NFKC_MAX
/* title_one_pass gives the normalizer the few code points around one it
 * cannot decide, from stable code point to stable code point, up to this
 * many bytes; past it the title goes to the normalizer whole, in
 * pieces. */
#define ENR_UNI_SEGMENT_MAX 256

/* The code points in pages of 256 for the NFKC check on UTF-8 bytes
 * (title_one_pass): a page's classes are worked out the first time a
 * title uses it, so start-up pays nothing and a worker only the few
 * scripts its titles are written in (about 1.3 KB each). */
#define ENR_UNI_PAGES (0x110000 >> 8)
#define ENR_UNI_NOT_YES 255 /* no combining class is 255 */
#define ENR_UNI_MAPPED 254  /* nor 254: see nfkc_class */
#define ENR_UNI_WS 253      /* nor 253: white space (rule 8) */
/* NFKC makes at most 18 code points of one (U+FDFA, UAX #15), each at
 * most 4 bytes: a replacement's UTF-8 fits this. */
#define ENR_UNI_MAP_MAX (ENR_UNI_NFKC_MAX * 4)

typedef struct uni_page {
    uint8_t cls[256];  /* nfkc_class of each code point */
    uint32_t map[256]; /* ... and for ENR_UNI_MAPPED, where u->maps holds its NFKC */
} uni_page;

struct enr_uni {
    uint16_t *src; /* the input as UTF-16 */
    uint16_t *dst; /* the normalizer's or the lower-casing's output */
    int32_t src_cap, dst_cap;
    enr_ucd_scratch nfkc;           /* the normalizer's code points */
    int slow;                       /* fast paths off: the fuzz target's reference */
    uint8_t ascii_ignorable[128];   /* Case_Ignorable */
    uni_page *pages[ENR_UNI_PAGES]; /* NULL until a title uses the page */
    /* The NFKC of each ENR_UNI_MAPPED code point met so far: a length
     * byte, a byte that says whether it holds white space, its UTF-8.
     * Grows with the pages, never shrinks (a few KB at most). */
    enr_buf maps;
};

/* The state lives in its own mapping (enr_uni_new says why), which
 * LeakSanitizer does not scan: on a sanitizer build it is told to, or
 * every buffer the state points to would read as leaked at exit. */
#if defined(__SANITIZE_ADDRESS__)
#define ENR_UNI_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ENR_UNI_LSAN 1
#endif
#endif
#ifdef ENR_UNI_LSAN
#include <sanitizer/lsan_interface.h>
#define UNI_ROOT_ADD(p, n) __lsan_register_root_region((p), (n))
#define UNI_ROOT_DEL(p, n) __lsan_unregister_root_region((p), (n))
#else
#define UNI_ROOT_ADD(p, n) ((void)0)
#define UNI_ROOT_DEL(p, n) ((void)0)
#endif

/* Ensures *buf holds at least need units; 0 or -1. */
static int grow16(uint16_t **buf, int32_t *cap, size_t need)
{
    size_t c = *cap ? (size_t)*cap : ENR_UNI_MIN_CAP;
    uint16_t *p;

    if (need <= (size_t)*cap)
        return 0;
    if (need > INT32_MAX / 2)
        return -1;
    while (c < need)
        c *= 2;
    p = realloc(*buf, c * sizeof(uint16_t));
    if (p == NULL)
        return -1;
    *buf = p;
    *cap = (int32_t)c;
    return 0;
}

enr_uni *enr_uni_new(void)
{
    /* Zero pages from the kernel, not calloc: the page table is 34 KB of
     * NULLs of which a title touches a page or two, and calloc would clear
     * it all, 9 page faults per process start (40-60 us each on a VM). */
    enr_uni *u = mmap(NULL, sizeof(*u), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (u == MAP_FAILED)
        return NULL;
    UNI_ROOT_ADD(u, sizeof(*u));
    for (uint32_t c = 0; c < 128; c++)
        u->ascii_ignorable[c] = (uint8_t)enr_ucd_case_ignorable(c);
    if (grow16(&u->src, &u->src_cap, ENR_UNI_MIN_CAP) != 0 ||
        grow16(&u->dst, &u->dst_cap, ENR_UNI_MIN_CAP) != 0)
        goto fail;
    return u;
fail:
    enr_uni_free(u);
    return NULL;
}

void enr_uni_free(enr_uni *u)
{
    if (u == NULL)
        return;
    free(u->src);
    free(u->dst);
    enr_ucd_scratch_free(&u->nfkc);
    for (int i = 0; i < ENR_UNI_PAGES; i++)
        free(u->pages[i]);
    enr_buf_free(&u->maps);
    UNI_ROOT_DEL(u, sizeof(*u));
    munmap(u, sizeof(*u));
}

void enr_uni_set_slow(enr_uni *u, int slow)
{
    u->slow = slow;
}

void enr_uni_shrink(enr_uni *u, size_t keep)
{
    /* back to the start-up size: the next request grows them again */
    if ((u->nfkc.cap + u->nfkc.tmp_cap) * sizeof(uint32_t) > keep)
        enr_ucd_scratch_free(&u->nfkc); /* the next title grows it again */
    if ((size_t)u->src_cap * sizeof(uint16_t) > keep) {
        free(u->src);
        u->src = NULL;
        u->src_cap = 0;
        if (grow16(&u->src, &u->src_cap, ENR_UNI_MIN_CAP) != 0)
            u->src_cap = 0;
    }
    if ((size_t)u->dst_cap * sizeof(uint16_t) > keep) {
        free(u->dst);
        u->dst = NULL;
        u->dst_cap = 0;
        if (grow16(&u->dst, &u->dst_cap, ENR_UNI_MIN_CAP) != 0)
            u->dst_cap = 0;
    }
}

static int is_surrogate(uint32_t c)
{
    return (c & 0xfffff800u) == 0xd800;
}

/* NFKC quick check Yes and combining class 0, and not a lone surrogate
 * (title_one_pass leaves those to the checked paths). */
static int stable(uint32_t c)
{
    return !is_surrogate(c) && enr_ucd_stable(c);
}

/* c (not a surrogate) as UTF-8 at w; its length. */
static size_t utf8_put(unsigned char *w, uint32_t c)
{
    if (c < 0x80) {
        w[0] = (unsigned char)c;
        return 1;
    }
    if (c < 0x800) {
        w[0] = (unsigned char)(0xc0 | (c >> 6));
        w[1] = (unsigned char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        w[0] = (unsigned char)(0xe0 | (c >> 12));
        w[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
        w[2] = (unsigned char)(0x80 | (c & 0x3f));
        return 3;
    }
    w[0] = (unsigned char)(0xf0 | (c >> 18));
    w[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
    w[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
    w[3] = (unsigned char)(0x80 | (c & 0x3f));
    return 4;
}

/*
 * The NFKC class of code point c for title_one_pass: its combining
 * class when its NFKC quick check is Yes; ENR_UNI_MAPPED when c is a
 * starter whose NFKC alone is a sequence of stable code points (quick
 * check Yes, class 0: fullwidth forms, circled digits, ligatures, Roman
 * numerals, CJK compatibility, U+FDFA), which *map then locates in
 * u->maps.  Such a code point is replaced by that sequence: both have
 * the same NFKD, and a stable code point never composes with a
 * neighbour (only a Maybe can be the second of a composition), so a text
 * whose replacement passes the quick check is the NFKC of the original.
 * The replacement may hold white space (U+FDFA does): rule 7.2 folds it
 * with its neighbours.  ENR_UNI_WS: white space (rule 8) that is stable
 * or that NFKC maps to U+0020 (U+00A0, U+3000, ...): it counts as U+0020
 * and is not even replaced, since rule 7.2 folds both the same way.
 * ENR_UNI_NOT_YES otherwise: the normalizer decides.
 */
/* Is BMP code point c white space (enr_ws_len, the one definition of
 * rule 8, asked on its UTF-8 form)? */
static int ws_bmp(unsigned c)
{
    unsigned char w[4];
    size_t n = utf8_put(w, c);

    return enr_ws_len(w, w + n) > 0;
}

static unsigned nfkc_class(enr_uni *u, uint32_t c, uint32_t *map)
{
    uint16_t in[2], o[2 * ENR_UNI_NFKC_MAX];
    unsigned char m[2 + ENR_UNI_MAP_MAX];
    int32_t n, nin = 0, i = 0;
    size_t len = 0;
    int ws = 0;

    if (is_surrogate(c))
        return ENR_UNI_NOT_YES;
    if (enr_ucd_nfkc_yes(c)) {
        unsigned cc = enr_ucd_ccc(c);

        if (cc == 0 && c <= 0xffff && ws_bmp((unsigned)c))
            return ENR_UNI_WS;
        return cc < ENR_UNI_WS ? cc : ENR_UNI_NOT_YES;
    }
    if (c < 0x80 || enr_ucd_ccc(c) != 0)
        return ENR_UNI_NOT_YES;
    if (c <= 0xffff) {
        in[nin++] = (uint16_t)c;
    } else {
        in[nin++] = (uint16_t)(0xd800 | ((c - 0x10000) >> 10));
        in[nin++] = (uint16_t)(0xdc00 | (c & 0x3ff));
    }
    n = enr_ucd_nfkc16(&u->nfkc, in, nin, o, (int32_t)(sizeof o / sizeof o[0]));
    if (n < 1 || n > (int32_t)(sizeof o / sizeof o[0]))
        return ENR_UNI_NOT_YES;
    if (c <= 0xffff && ws_bmp((unsigned)c))
        return n == 1 && o[0] == 0x20 ? ENR_UNI_WS : ENR_UNI_NOT_YES;
    while (i < n) {
        uint32_t d = enr_utf16_next(o, &i, n);

        if (!stable(d) || len + 4 > ENR_UNI_MAP_MAX)
            return ENR_UNI_NOT_YES;
        if (d <= 0xffff && ws_bmp((unsigned)d))
            ws = 1;
        len += utf8_put(m + 2 + len, d);
    }
    m[0] = (unsigned char)len;
    m[1] = (unsigned char)ws;
    *map = (uint32_t)u->maps.len;
    enr_buf_append(&u->maps, m, len + 2);
    return u->maps.oom || u->maps.len > UINT32_MAX ? ENR_UNI_NOT_YES : ENR_UNI_MAPPED;
}

static unsigned class_load(enr_uni *u, unsigned c)
{
    unsigned page = c >> 8;
    uni_page *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return ENR_UNI_NOT_YES; /* the UTF-16 check decides */
    for (unsigned i = 0; i < 256; i++)
        t->cls[i] = (uint8_t)nfkc_class(u, page << 8 | i, &t->map[i]);
    u->pages[page] = t;
    return t->cls[c & 255];
}

/* c < 0x110000 */
static inline unsigned class_of(enr_uni *u, unsigned c)
{
    const uni_page *t = u->pages[c >> 8];

    return t != NULL ? t->cls[c & 255] : class_load(u, c);
}

/* Converts s into u->src; the unit count, or -1. */
static int32_t load_src(enr_uni *u, const unsigned char *s, size_t len)
{
    if (grow16(&u->src, &u->src_cap, len + 1) != 0)
        return -1;
    return enr_wtf8_to_utf16(s, len, u->src);
}

static void lower_ascii(const unsigned char *s, size_t len, char *o)
{
    for (size_t i = 0; i < len; i++)
        o[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
}

/* lower_ascii 8 bytes at a time, when every byte of s is ASCII: 1, or 0
 * (o holds part of the text) when one is not. */
static int lower_ascii_words(const unsigned char *s, size_t len, char *o)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    size_t i = 0;

    for (; i + 8 <= len; i += 8) {
        uint64_t w, up;

        memcpy(&w, s + i, 8);
        if (w & high)
            return 0;
        /* bytes 'A'..'Z': at least 'A' and not above 'Z', each byte's
         * sum staying below 0x100 since it is ASCII */
        up = (w + ones * (0x80 - 'A')) & ~(w + ones * (0x7f - 'Z')) & high;
        w |= up >> 2;
        memcpy(o + i, &w, 8);
    }
    for (; i < len; i++) {
        if (s[i] >= 0x80)
            return 0;
        o[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
    }
    return 1;
}

/* Full lower-casing of one piece (at most twice its units); appends to
 * out. */
static int lower_piece(enr_uni *u, const unsigned char *s, size_t len, enr_buf *out)
{
    int32_t n, m;

    if ((n = load_src(u, s, len)) < 0)
        return -1;
    if (grow16(&u->dst, &u->dst_cap, 2 * (size_t)n + 1) != 0)
        return -1;
    m = enr_ucd_lower16(u->dst, u->dst_cap, u->src, n);
    {
        enr_text_out t = {out->len, 0};
        return enr_utf16_to_wtf8(u->dst, m, out, 0, &t, ENR_UNI_NO_MAX);
    }
}

/* Is the code point ending at (before) / starting at p "plain": ASCII
 * and not Case_Ignorable, or U+FFFD (neither Cased nor Case_Ignorable;
 * the reader makes one of each invalid byte, so it can be most of a
 * long id)? */
static int plain_before(const enr_uni *u, const unsigned char *s, const unsigned char *p)
{
    if (p[-1] < 0x80)
        return !u->ascii_ignorable[p[-1]];
    return p - s >= 3 && p[-3] == 0xef && p[-2] == 0xbf && p[-1] == 0xbd;
}

static int plain_at(const enr_uni *u, const unsigned char *p, const unsigned char *end)
{
    if (p[0] < 0x80)
        return !u->ascii_ignorable[p[0]];
    return end - p >= 3 && p[0] == 0xef && p[1] == 0xbf && p[2] == 0xbd;
}

/* A cut between two plain code points cannot change the lower-casing:
 * the only contextual mapping of the root locale is final sigma (rule
 * 10), whose scans skip Case_Ignorable code points only, so every scan
 * stops at one of the two, and neither is a sigma.  (Two complete code
 * points meet at p: a plain one ends before it.) */
static int cut_ok(const enr_uni *u, const unsigned char *s, const unsigned char *p,
                  const unsigned char *end)
{
    return plain_before(u, s, p) && plain_at(u, p, end);
}

int enr_uni_id(enr_uni *u, const char *str, size_t len, size_t max, enr_buf *out)
{
    const unsigned char *s = (const unsigned char *)str, *end = s + len;
    size_t w, start = out->len;

    while (s < end && (w = enr_ws_len(s, end)) > 0)
        s += w;
    while (end > s && (w = enr_ws_len_back(s, end)) > 0)
        end -= w;
    len = (size_t)(end - s);

    if (len == 0)
        return 0;
    if (!u->slow && len <= max) { /* most ids: ASCII, lower-cased in one pass */
        if (enr_buf_reserve(out, len) != 0)
            return -1;
        if (lower_ascii_words(s, len, out->data + out->len)) {
            out->len += len;
            return 0;
        }
    }
    if (enr_wtf8_is_ascii(s, len)) {
        if (len > max)
            return ENR_UNI_TOO_LONG;
        if (enr_buf_reserve(out, len) != 0)
            return -1;
        lower_ascii(s, len, out->data + out->len);
        out->len += len;
        return 0;
    }
    while (s < end) {
        size_t n = (size_t)(end - s) <= ENR_UNI_ID_PIECE ? (size_t)(end - s) : ENR_UNI_ID_PIECE;

        /* a piece ends at the first safe cut past ENR_UNI_ID_PIECE bytes;
         * text without one (no two adjacent ASCII letters, digits,
         * punctuation or U+FFFD) stays whole: it comes from the body as
         * it is, it is not what a join or a replacement inflated */
        while (s + n < end && !cut_ok(u, s, s + n, end))
            n++;
        if (enr_wtf8_is_ascii(s, n)) {
            if (enr_buf_reserve(out, n) != 0)
                return -1;
            lower_ascii(s, n, out->data + out->len);
            out->len += n;
        } else if (lower_piece(u, s, n, out) < 0) {
            out->len = start;
            return -1;
        }
        if (out->len - start > max) {
            out->len = start;
            return ENR_UNI_TOO_LONG;
        }
        s += n;
    }
    return 0;
}

/* Normalizes src[0, n) into u->dst (grown as needed unless the result
 * cannot fit in max bytes); the unit count, -1, or ENR_UNI_TOO_LONG. */
static int32_t nfkc_piece(enr_uni *u, const uint16_t *src, int32_t n, size_t max)
{
    int32_t m = enr_ucd_nfkc16(&u->nfkc, src, n, u->dst, u->dst_cap);

    if (m > u->dst_cap) {
        /* Only a piece without a boundary (a run of combining marks,
         * which barely expand) gets here: dst already holds
         * ENR_UNI_NFKC_MAX times a normal piece.  Every unit out is a
         * byte at least, except white space that folds, and no code
         * point makes two white-space units in a row: past max + n units
         * the result cannot fit. */
        if ((size_t)m > max + (size_t)n)
            return ENR_UNI_TOO_LONG;
        if (grow16(&u->dst, &u->dst_cap, (size_t)m + 1) != 0)
            return -1;
        m = enr_ucd_nfkc16(&u->nfkc, src, n, u->dst, u->dst_cap);
    }
    return m;
}

/* Makes room for need more bytes at *o in out, whose text started at
 * *first: moves both if the buffer moves.  0, -1 (memory), or
 * ENR_UNI_TOO_LONG when what is written already passes max (written
 * bytes are final: white space waits until a non-space follows), so
 * the room never grows much past max. */
static int room_for(enr_buf *out, unsigned char **first, unsigned char **o, unsigned char **lim,
                    size_t need, size_t left, size_t max)
{
    size_t at = (size_t)(*first - (unsigned char *)out->data), done = (size_t)(*o - *first);

    if (done > max)
        return ENR_UNI_TOO_LONG;
    if (enr_buf_reserve(out, done + need + left + 8) != 0)
        return -1;
    *first = (unsigned char *)out->data + at;
    *o = *first + done;
    *lim = (unsigned char *)out->data + out->cap;
    return 0;
}

static inline unsigned decode_at(const unsigned char *s, const unsigned char *end, unsigned *cp)
{
    unsigned c = *s;

    if (c >= 0xc2 && c <= 0xdf && end - s >= 2 && (s[1] & 0xc0) == 0x80) {
        *cp = (c & 0x1fu) << 6 | (s[1] & 0x3fu);
        return 2;
    }
    if (c >= 0xe0 && c <= 0xef && end - s >= 3 && s[1] >= (c == 0xe0 ? 0xa0 : 0x80) &&
        s[1] <= (c == 0xed ? 0x9f : 0xbf) && (s[2] & 0xc0) == 0x80) {
        *cp = (c & 0x0fu) << 12 | (s[1] & 0x3fu) << 6 | (s[2] & 0x3fu);
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4 && end - s >= 4 && s[1] >= (c == 0xf0 ? 0x90 : 0x80) &&
        s[1] <= (c == 0xf4 ? 0x8f : 0xbf) && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80) {
        *cp = (c & 0x07u) << 18 | (s[1] & 0x3fu) << 12 | (s[2] & 0x3fu) << 6 | (s[3] & 0x3fu);
        return 4;
    }
    return 0;
}

/* The next stable code point (ASCII, or class 0: normalization has a
 * boundary before it) from s on, or end; NULL when what comes first is
 * a lone surrogate (the whole title then goes to the UTF-16 path). */
static const unsigned char *segment_end(enr_uni *u, const unsigned char *s,
                                        const unsigned char *end)
{
    while (s < end && *s >= 0x80) {
        unsigned cp, n = decode_at(s, end, &cp);

        if (n == 0)
            return NULL;
        if (class_of(u, cp) == 0)
            break;
        s += n;
    }
    return s;
}

/*
 * NFKC, the quick check on the UTF-8 bytes, and rule 7.2's fold in one
 * pass over a non-ASCII title, written straight into out.  UAX #15's
 * quick check: every code point's class is known (nfkc_class) and
 * combining classes never decrease within a run of marks; a Yes is never
 * wrong.  ENR_UNI_MAPPED code points are replaced by their NFKC as it
 * goes.  Where the check says Maybe or No (a combining mark that may
 * compose, U+00A8, marks out of order), only the segment from the last
 * stable code point to the next one goes through the normalizer: normalization has
 * a boundary before a stable code point, so the NFKC of the title is
 * that of its segments put together.  1 (nothing appended) says only
 * "not known": a lone surrogate or ill-formed UTF-8 (decode_at is
 * strict, so the body's bytes can be read as they are: a title that
 * passes is its decoded text), or a segment longer than
 * ENR_UNI_SEGMENT_MAX, sends the whole title to the UTF-16 path, which alone
 * decides, and so does a title longer than max; otherwise the result is
 * the normalizer's (the fast fuzz target compares it with the slow path).  0, -1, or
 * ENR_UNI_TOO_LONG (nothing appended) when the folded text passes max.
 */
#define TITLE_INLINE static inline __attribute__((always_inline))

/* The one space that folded white space becomes, before the next
 * visible code point: none at the title's start. */
TITLE_INLINE unsigned char *put_space(unsigned char *o, const unsigned char *first, int *pending)
{
    if (*pending) {
        if (o != first)
            *o++ = ' ';
        *pending = 0;
    }
    return o;
}

/* The rest of an ASCII word from s (its first letter already written),
 * 8 bytes at a time while they fit (the room ahead of *o holds them):
 * returns s past it, *o past its copy. */
TITLE_INLINE const unsigned char *copy_ascii_word(const unsigned char *s, const unsigned char *end,
                                                  unsigned char **o)
{
    unsigned char *d = *o;

    while (end - s >= 8) {
        uint64_t w, m;

        memcpy(&w, s, 8);
        memcpy(d, &w, 8);
        /* bytes <= ' ' or >= 0x80; the lowest flagged is exact */
        m = (((w - 0x2121212121212121ull) & ~w) | w) & 0x8080808080808080ull;
        if (m != 0) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            size_t k = (size_t)__builtin_ctzll(m) / 8;
#else
            size_t k = (size_t)__builtin_clzll(m) / 8;
#endif
            *o = d + k;
            return s + k;
        }
        s += 8;
        d += 8;
    }
    while (s<end && * s> ' ' && *s < 0x80)
        *d++ = *s++;
    *o = d;
    return s;
}

/* The title's writer: where its text starts in the output, where it has
 * got to, the room's end, and a space owed. */
typedef struct title_out {
    unsigned char *first, *o, *lim;
    int pending;
} title_out;

/* Code point cp's NFKC mapping (ENR_UNI_MAPPED), written with its white
 * space folded; left bytes of input follow.  0, or room_for's error. */
TITLE_INLINE int put_mapped(enr_uni *u, unsigned cp, size_t left, enr_buf *out, title_out *t,
                            size_t max)
{
    const unsigned char *m = (const unsigned char *)u->maps.data + u->pages[cp >> 8]->map[cp & 255];
    const unsigned char *mp = m + 2, *me = mp + m[0];
    int rc;

    if ((size_t)(t->lim - t->o) < 8 + (size_t)m[0] + left &&
        (rc = room_for(out, &t->first, &t->o, &t->lim, 8 + (size_t)m[0], left, max)) != 0)
        return rc;
    if (!m[1]) {
        t->o = put_space(t->o, t->first, &t->pending);
        memcpy(t->o, mp, m[0]);
        t->o += m[0];
        return 0;
    }
    while (mp < me) { /* white space within: folded with the rest */
        size_t w = enr_ws_len(mp, me);

        if (w > 0) {
            t->pending = 1;
            mp += w;
            continue;
        }
        t->o = put_space(t->o, t->first, &t->pending);
        do
            *t->o++ = *mp++;
        while (mp < me && (*mp & 0xc0) == 0x80);
    }
    return 0;
}

/* The normalizer's part: from the last stable code point (seg, written
 * from seg_o on, with seg_pending owed before it) to the next stable one
 * after s, which it returns in *stop; the rest goes on in title_one_pass.
 * 0, 1 (the UTF-16 path decides), -1 or ENR_UNI_TOO_LONG. */
static int title_segment(enr_uni *u, const unsigned char *seg, size_t seg_o, int seg_pending,
                         const unsigned char *s, const unsigned char *end, size_t max, enr_buf *out,
                         title_out *w, const unsigned char **stop)
{
    enr_text_out t = {out->len, seg_pending};
    size_t keep = out->len;
    int32_t n16, m;
    int rc;

    *stop = segment_end(u, s, end);
    if (*stop == NULL || (size_t)(*stop - seg) > ENR_UNI_SEGMENT_MAX)
        return 1;
    if (seg_o > max)
        return ENR_UNI_TOO_LONG;
    if ((n16 = load_src(u, seg, (size_t)(*stop - seg))) < 0)
        return -1;
    if ((m = nfkc_piece(u, u->src, n16, max - seg_o)) < 0)
        return m;
    out->len = keep + seg_o;
    rc = enr_utf16_to_wtf8(u->dst, m, out, 1, &t, max);
    w->first = (unsigned char *)out->data + keep;
    w->o = (unsigned char *)out->data + out->len;
    w->lim = (unsigned char *)out->data + out->cap;
    out->len = keep;
    if (rc != 0)
        return rc;
    if ((size_t)(w->lim - w->o) < 8 + (size_t)(end - *stop) &&
        (rc = room_for(out, &w->first, &w->o, &w->lim, 8, (size_t)(end - *stop), max)) != 0)
        return rc;
    w->pending = t.pending;
    return 0;
}

static int title_one_pass(enr_uni *u, const unsigned char *s, size_t len, size_t max, enr_buf *out)
{
    const unsigned char *end = s + len;
    const unsigned char *seg = s; /* where the last stable code point starts */
    size_t seg_o = 0;             /* ... what was written before it */
    title_out t;
    unsigned last = 0, cc;
    int seg_pending = 0, rc;

    /* Room for the input and 8 more is kept ahead of t.o: a code point
     * written as it is takes the room of its own bytes, a space that of
     * the white space before it; only replacements and the normalizer's segments
     * take more, and make the room again (room_for).  A title longer
     * than max (rare: white space must fold for it to fit) is left to
     * the checked paths rather than given that much room. */
    if (len > max)
        return 1;
    if (enr_buf_reserve(out, len + 8) != 0)
        return -1;
    t.first = t.o = (unsigned char *)out->data + out->len;
    t.lim = (unsigned char *)out->data + out->cap;
    t.pending = 0;
    while (s < end) {
        unsigned c = *s, cp, n;
        const unsigned char *at = s;

        if (c < 0x80) {
            s++;
            last = 0;
            if (c == ' ' || (c >= 0x09 && c <= 0x0d)) {
                seg = at;
                seg_o = (size_t)(t.o - t.first);
                seg_pending = t.pending;
                t.pending = 1;
                continue;
            }
            t.o = put_space(t.o, t.first, &t.pending);
            *t.o++ = (unsigned char)c;
            s = copy_ascii_word(s, end, &t.o);
            seg = s - 1; /* its last letter, written as it is */
            seg_o = (size_t)(t.o - 1 - t.first);
            seg_pending = 0;
            continue;
        }
        if ((n = decode_at(s, end, &cp)) == 0)
            return 1; /* a lone surrogate: the UTF-16 path decides */
        cc = class_of(u, cp);
        s += n;
        if (cc == 0) { /* a stable starter, as it is: most of CJK, Hangul, Thai */
            seg = at;
            seg_o = (size_t)(t.o - t.first);
            seg_pending = t.pending;
        } else if (cc == ENR_UNI_WS) {
            t.pending = 1;
            last = 0;
            continue;
        } else if (cc == ENR_UNI_MAPPED) {
            if ((rc = put_mapped(u, cp, (size_t)(end - s), out, &t, max)) != 0)
                return rc;
            last = 0; /* starters take its place */
            continue;
        } else if (cc == ENR_UNI_NOT_YES || last > cc) {
            if ((rc = title_segment(u, seg, seg_o, seg_pending, s, end, max, out, &t, &s)) != 0)
                return rc;
            last = 0;
            continue;
        }
        last = cc;
        t.o = put_space(t.o, t.first, &t.pending);
        t.o[0] = at[0];
        t.o[1] = at[1];
        t.o[2] = at[2];
        if (n > 3)
            t.o[3] = at[3];
        t.o += n;
    }
    if ((size_t)(t.o - t.first) > max)
        return ENR_UNI_TOO_LONG;
    out->len = (size_t)(t.o - (unsigned char *)out->data);
    return 0;
}

int enr_uni_title_raw(enr_uni *u, const char *str, size_t len, size_t max, enr_buf *out)
{
    return u->slow ? 1 : title_one_pass(u, (const unsigned char *)str, len, max, out);
}

int enr_uni_title(enr_uni *u, const char *str, size_t len, size_t max, enr_buf *out)
{
    const unsigned char *s = (const unsigned char *)str;
    int32_t n, at = 0;
    enr_text_out t = {out->len, 0};

    /* most titles: already NFKC, or once fullwidth forms and the like are
     * replaced, known without the normalizer and the UTF-16 copy (ASCII too: the
     * one pass is then enr_wtf8_fold) */
    if (!u->slow) {
        int rc = title_one_pass(u, s, len, max, out);

        if (rc != 1)
            return rc;
    }
    if (enr_wtf8_is_ascii(s, len))
        return u->slow ? enr_wtf8_fold(s, len, out, max) : enr_wtf8_fold_fast(s, len, out, max);

    if ((n = load_src(u, s, len)) < 0)
        return -1;
    if (enr_ucd_nfkc_quick_yes16(u->src, n)) /* already NFKC: the original bytes are the text */
        return u->slow ? enr_wtf8_fold(s, len, out, max) : enr_wtf8_fold_fast(s, len, out, max);

    /* In pieces cut where normalization cannot interact across (a
     * boundary before the next code point), so the
     * normalizer never builds more than ENR_UNI_NFKC_MAX times a piece: normalizing the whole of a
     * 4 MB title of U+FDFA would have it hold 100 MB, even just to say
     * how long the result is. */
    if (grow16(&u->dst, &u->dst_cap, (size_t)ENR_UNI_NFKC_PIECE * ENR_UNI_NFKC_MAX + 1) != 0)
        return -1;
    while (at < n) {
        int32_t end = at, m, rc;

        if (n - at <= ENR_UNI_NFKC_PIECE) {
            end = n;
        } else {
            end = at + ENR_UNI_NFKC_PIECE;
            if ((u->src[end] & 0xfc00) == 0xdc00 && (u->src[end - 1] & 0xfc00) == 0xd800)
                end++; /* never between the units of a pair */
            while (end < n) {
                int32_t next = end;
                if (enr_ucd_boundary_before(enr_utf16_next(u->src, &next, n)))
                    break;
                end = next;
            }
        }
        m = nfkc_piece(u, u->src + at, end - at, max - (out->len - t.start));
        if (m < 0) {
            out->len = t.start;
            return m;
        }
        rc = enr_utf16_to_wtf8(u->dst, m, out, 1, &t, max);
        if (rc != 0) {
            out->len = t.start; /* nothing of this title is kept */
            return rc;
        }
        at = end;
    }
    return 0;
}

const char *enr_uni_version(void)
{
    static char text[32];

    if (text[0] == '\0')
        snprintf(text, sizeof text, "Unicode %s", enr_ucd_version());
    return text;
}
