/*
 * unicode.c: the Unicode steps of the contract (rules 4.2, 7.2, 8, 10, 12)
 * on WTF-8 text, with ICU's data (rule 17).
 *
 * ICU works on UTF-16, where an unpaired surrogate is simply a lone code
 * unit: ICU treats it as a code point with no decomposition, combining
 * class 0, no case mapping, neither Cased nor Case_Ignorable, which is
 * exactly what rules 10 and 12 ask (tests/unit/test_unicode.c checks
 * it).  So WTF-8 is converted here, by hand, to UTF-16 with lone
 * surrogates kept as lone units, and back.
 *
 * Fast paths, because nearly every id and most titles are ASCII: ASCII
 * never reaches ICU (NFKC of ASCII is the identity, lower-casing ASCII is
 * tolower); non-ASCII titles already in NFKC skip the normalizer and are
 * folded on their original bytes.
 *
 * Invariants: an enr_uni owns two UTF-16 scratch buffers that only grow,
 * so a worker's steady state does not allocate; outputs are appended to
 * the caller's enr_buf and never overlap the input.
 */
#include "unicode.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/uversion.h>

#include "text.h"

#define ENR_UNI_MIN_CAP 256 /* UTF-16 units: most titles fit at once */

struct enr_uni {
    const UNormalizer2 *nfkc; /* owned by ICU, never freed */
    UChar *src;               /* the input as UTF-16 */
    UChar *dst;               /* ICU's output */
    int32_t src_cap, dst_cap;
};

/* Ensures *buf holds at least need units; 0 or -1. */
static int grow16(UChar **buf, int32_t *cap, size_t need)
{
    size_t c = *cap ? (size_t)*cap : ENR_UNI_MIN_CAP;
    UChar *p;

    if (need <= (size_t)*cap)
        return 0;
    if (need > INT32_MAX / 2)
        return -1;
    while (c < need)
        c *= 2;
    p = realloc(*buf, c * sizeof(UChar));
    if (p == NULL)
        return -1;
    *buf = p;
    *cap = (int32_t)c;
    return 0;
}

enr_uni *enr_uni_new(void)
{
    UErrorCode err = U_ZERO_ERROR;
    enr_uni *u = calloc(1, sizeof(*u));
    UChar probe[4];

    if (u == NULL)
        return NULL;
    u->nfkc = unorm2_getNFKCInstance(&err);
    if (U_FAILURE(err) || u->nfkc == NULL)
        goto fail;
    /* Loads the case-mapping data now rather than on the first request. */
    u_strToLower(probe, 4, (const UChar[]){0x41, 0}, 1, "", &err);
    if (U_FAILURE(err))
        goto fail;
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
    free(u);
}

static int is_ascii(const unsigned char *s, size_t len)
{
    size_t i = 0;
    uint64_t acc = 0;

    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        acc |= w;
    }
    for (; i < len; i++)
        acc |= s[i];
    return (acc & 0x8080808080808080ULL) == 0;
}

static int is_cont(unsigned char c)
{
    return (c & 0xc0) == 0x80;
}

/*
 * WTF-8 to UTF-16; dst has room for len units (never more are needed).
 * A byte that does not start a well-formed sequence (the reader never
 * produces one) becomes U+FFFD rather than being trusted.
 */
static int32_t wtf8_to_utf16(const unsigned char *s, size_t len, UChar *dst)
{
    const unsigned char *end = s + len;
    int32_t n = 0;

    while (s < end) {
        unsigned c = *s;
        size_t left = (size_t)(end - s);

        if (c < 0x80) {
            dst[n++] = (UChar)c;
            s++;
        } else if (c >= 0xc2 && c <= 0xdf && left >= 2 && is_cont(s[1])) {
            dst[n++] = (UChar)(((c & 0x1f) << 6) | (s[1] & 0x3f));
            s += 2;
        } else if (c >= 0xe0 && c <= 0xef && left >= 3 && is_cont(s[1]) && is_cont(s[2]) &&
                   (c != 0xe0 || s[1] >= 0xa0)) {
            /* ED A0..BF is a lone surrogate: it becomes a lone unit */
            dst[n++] = (UChar)(((c & 0x0f) << 12) | ((s[1] & 0x3fu) << 6) | (s[2] & 0x3f));
            s += 3;
        } else if (c >= 0xf0 && c <= 0xf4 && left >= 4 && is_cont(s[1]) && is_cont(s[2]) &&
                   is_cont(s[3]) && (c != 0xf0 || s[1] >= 0x90) && (c != 0xf4 || s[1] < 0x90)) {
            uint32_t cp = ((c & 0x07u) << 18) | ((s[1] & 0x3fu) << 12) | ((s[2] & 0x3fu) << 6) |
                          (s[3] & 0x3fu);
            cp -= 0x10000;
            dst[n++] = (UChar)(0xd800 | (cp >> 10));
            dst[n++] = (UChar)(0xdc00 | (cp & 0x3ff));
            s += 4;
        } else {
            dst[n++] = 0xfffd;
            s++;
        }
    }
    return n;
}

/* Rule 8 on one UTF-16 unit: all 25 white-space code points are BMP. */
static int is_ws16(UChar c)
{
    if (c <= 0x20)
        return c == 0x20 || (c >= 0x09 && c <= 0x0d);
    if (c < 0xa0)
        return 0;
    return c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000 || c == 0xfeff;
}

/*
 * UTF-16 back to WTF-8 (a pair gives 4 bytes, a lone surrogate its ED
 * form), appended to out.  With fold, every run of white space becomes
 * one space and the ends are trimmed (rule 7.2 steps 2 and 3).
 */
static int utf16_to_wtf8(const UChar *s, int32_t n, enr_buf *out, int fold)
{
    int pending = 0;
    size_t start;
    unsigned char *o;

    if (n == 0) /* out->data may still be NULL */
        return 0;
    if (enr_buf_reserve(out, (size_t)n * 3) != 0)
        return -1;
    start = out->len;
    o = (unsigned char *)out->data + out->len;
    for (int32_t i = 0; i < n; i++) {
        uint32_t c = s[i];

        if (fold && is_ws16((UChar)c)) {
            pending = 1;
            continue;
        }
        if (pending) {
            if (o != (unsigned char *)out->data + start)
                *o++ = ' ';
            pending = 0;
        }
        if (c < 0x80) {
            *o++ = (unsigned char)c;
        } else if (c < 0x800) {
            *o++ = (unsigned char)(0xc0 | (c >> 6));
            *o++ = (unsigned char)(0x80 | (c & 0x3f));
        } else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n && s[i + 1] >= 0xdc00 &&
                   s[i + 1] <= 0xdfff) {
            c = 0x10000 + ((c - 0xd800) << 10) + (s[i + 1] - 0xdc00u);
            i++;
            *o++ = (unsigned char)(0xf0 | (c >> 18));
            *o++ = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
            *o++ = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
            *o++ = (unsigned char)(0x80 | (c & 0x3f));
        } else { /* BMP, including a lone surrogate */
            *o++ = (unsigned char)(0xe0 | (c >> 12));
            *o++ = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
            *o++ = (unsigned char)(0x80 | (c & 0x3f));
        }
    }
    out->len = (size_t)(o - (unsigned char *)out->data);
    return 0;
}

/* Rule 7.2 steps 2 and 3 on WTF-8 bytes already in NFKC.  A white-space
 * lead byte never occurs as a continuation byte, so a byte walk is safe. */
static int fold_wtf8(const unsigned char *s, size_t len, enr_buf *out)
{
    const unsigned char *end = s + len;
    int pending = 0;
    size_t start;
    char *o;

    if (len == 0) /* out->data may still be NULL */
        return 0;
    if (enr_buf_reserve(out, len) != 0)
        return -1;
    start = out->len;
    o = out->data + out->len;
    while (s < end) {
        size_t w = enr_ws_len(s, end);
        if (w > 0) {
            pending = 1;
            s += w;
            continue;
        }
        if (pending) {
            if (o != out->data + start)
                *o++ = ' ';
            pending = 0;
        }
        *o++ = (char)*s++;
    }
    out->len = (size_t)(o - out->data);
    return 0;
}

/* Converts s into u->src; the unit count, or -1. */
static int32_t load_src(enr_uni *u, const unsigned char *s, size_t len)
{
    if (grow16(&u->src, &u->src_cap, len + 1) != 0)
        return -1;
    return wtf8_to_utf16(s, len, u->src);
}

int enr_uni_id(enr_uni *u, const char *str, size_t len, enr_buf *out)
{
    const unsigned char *s = (const unsigned char *)str, *end = s + len;
    size_t w;
    int32_t n, m;
    UErrorCode err = U_ZERO_ERROR;

    while (s < end && (w = enr_ws_len(s, end)) > 0)
        s += w;
    while (end > s && (w = enr_ws_len_back(s, end)) > 0)
        end -= w;
    len = (size_t)(end - s);

    if (len == 0)
        return 0;
    if (is_ascii(s, len)) {
        if (enr_buf_reserve(out, len) != 0)
            return -1;
        char *o = out->data + out->len;
        for (size_t i = 0; i < len; i++)
            o[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
        out->len += len;
        return 0;
    }

    if ((n = load_src(u, s, len)) < 0)
        return -1;
    m = u_strToLower(u->dst, u->dst_cap, u->src, n, "", &err);
    if (err == U_BUFFER_OVERFLOW_ERROR) {
        if (grow16(&u->dst, &u->dst_cap, (size_t)m + 1) != 0)
            return -1;
        err = U_ZERO_ERROR;
        m = u_strToLower(u->dst, u->dst_cap, u->src, n, "", &err);
    }
    if (U_FAILURE(err))
        return -1;
    return utf16_to_wtf8(u->dst, m, out, 0);
}

int enr_uni_title(enr_uni *u, const char *str, size_t len, enr_buf *out)
{
    const unsigned char *s = (const unsigned char *)str;
    int32_t n, m, span;
    UErrorCode err = U_ZERO_ERROR;

    if (is_ascii(s, len))
        return fold_wtf8(s, len, out);

    if ((n = load_src(u, s, len)) < 0)
        return -1;
    span = unorm2_spanQuickCheckYes(u->nfkc, u->src, n, &err);
    if (U_FAILURE(err))
        return -1;
    if (span == n) /* already NFKC: the original bytes are the text */
        return fold_wtf8(s, len, out);

    m = unorm2_normalize(u->nfkc, u->src, n, u->dst, u->dst_cap, &err);
    if (err == U_BUFFER_OVERFLOW_ERROR) {
        if (grow16(&u->dst, &u->dst_cap, (size_t)m + 1) != 0)
            return -1;
        err = U_ZERO_ERROR;
        m = unorm2_normalize(u->nfkc, u->src, n, u->dst, u->dst_cap, &err);
    }
    if (U_FAILURE(err))
        return -1;
    return utf16_to_wtf8(u->dst, m, out, 1);
}

const char *enr_uni_version(void)
{
    static char text[64];
    UVersionInfo icu, uni;
    char icu_s[U_MAX_VERSION_STRING_LENGTH], uni_s[U_MAX_VERSION_STRING_LENGTH];

    if (text[0] == '\0') {
        u_getVersion(icu);
        u_getUnicodeVersion(uni);
        u_versionToString(icu, icu_s);
        u_versionToString(uni, uni_s);
        snprintf(text, sizeof text, "ICU %s, Unicode %s", icu_s, uni_s);
    }
    return text;
}
