/*
 * emit.c: the NDJSON printer (docs/contract.md §11, 16): one line per
 * accepted record of a batch, and the JSON body of an error.
 *
 * The hash is computed without a copy.  A line that cannot reach the
 * limit is written in place into room reserved once for its worst case
 * (emit_line_fast); the careful printer, which finds where a line stops,
 * does the others and is the reference of the fast one (slow mode).
 * Once the output passes max_output nothing more is built: the batch is
 * refused (enr_engine_output_fail) and the cut output is never sent.
 */
/* SHA-1 through OpenSSL's direct interface: the EVP path initialises the
 * provider machinery on first use, 2-7 ms measured here, which alone
 * would break the CLI's cold start, and EVP costs 17 us per 200 keys
 * against 10 us this way.  The function is deprecated in OpenSSL 3 (in
 * favour of EVP), not removed; this file is its only user. */
#define OPENSSL_SUPPRESS_DEPRECATED

#include "engine/engine.h"
#include "engine/engine_int.h"

#include <math.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "engine/numfmt.h"

static const char *const provider_names[] = {"", "yt", "vm", "dm"};
#define BASE_YT "https://i.ytimg.com/vi"
#define BASE_VM "https://i.vimeocdn.com/video"
#define BASE_DM "https://s2.dmcdn.net/v"
static const char *const provider_bases[] = {"", BASE_YT, BASE_VM, BASE_DM};
/* their lengths, so that the line printer copies them without strlen */
static const unsigned char provider_base_len[] = {0, sizeof(BASE_YT) - 1, sizeof(BASE_VM) - 1,
                                                  sizeof(BASE_DM) - 1};
static const char availability_keys[ENR_REGIONS][24] = {",\"availability\":{\"US\":",
                                                        ",\"GB\":",
                                                        ",\"JP\":",
                                                        ",\"KR\":",
                                                        ",\"TW\":",
                                                        ",\"SG\":",
                                                        ",\"VN\":",
                                                        ",\"TH\":"};

const char *enr_provider_name(int provider)
{
    return provider > 0 && provider <= ENR_PROV_DM ? provider_names[provider] : "";
}

/* JSON string body (no quotes) of WTF-8 text, escaped per rule 11.
 * Stops once out->len passes stop: the caller then has its answer (the
 * output limit is crossed) and nothing more is built. */
static void put_escaped(enr_buf *out, const char *str, size_t n, size_t stop)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str, *end = s + n;
    size_t want = n + 16;

    if (out->len > stop)
        return;
    if (stop - out->len < n)
        want = stop - out->len + 16;
    if (enr_buf_reserve(out, want) != 0)
        return;
    while (s < end) {
        const unsigned char *run = s;
        unsigned c;

        if (out->len > stop)
            return;
        while (s < end && *s >= 0x20 && *s != '"' && *s != '\\' && *s != 0xed)
            s++;
        if ((size_t)(s - run) > stop - out->len) { /* one byte past the limit is enough */
            enr_buf_append(out, run, stop - out->len + 1);
            return;
        }
        enr_buf_append(out, run, (size_t)(s - run));
        if (s >= end)
            break;
        c = *s;
        if (c == 0xed) {
            if (end - s >= 3 && s[1] >= 0xa0) { /* lone surrogate (text.h) */
                unsigned cp = 0xd000u | ((s[1] & 0x3fu) << 6) | (s[2] & 0x3fu);
                char u[6] = {
                    '\\',        'u', hex[cp >> 12], hex[(cp >> 8) & 15], hex[(cp >> 4) & 15],
                    hex[cp & 15]};

                enr_buf_append(out, u, 6);
                s += 3;
            } else {
                enr_buf_putc(out, (char)c);
                s++;
            }
            continue;
        }
        s++;
        switch (c) {
        case '"':
            enr_buf_lit(out, "\\\"");
            break;
        case '\\':
            enr_buf_lit(out, "\\\\");
            break;
        case '\b':
            enr_buf_lit(out, "\\b");
            break;
        case '\t':
            enr_buf_lit(out, "\\t");
            break;
        case '\n':
            enr_buf_lit(out, "\\n");
            break;
        case '\f':
            enr_buf_lit(out, "\\f");
            break;
        case '\r':
            enr_buf_lit(out, "\\r");
            break;
        default: {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};

            enr_buf_append(out, u, 6);
            break;
        }
        }
    }
}

/* Rule 6: SHA-1 of provider ":" id, lone surrogates hashed as U+FFFD;
 * fed in runs between them, so an id of any length needs no copy. */
static void put_hash(enr_buf *out, const char *prov, const char *id, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)id, *run = p, *end = p + n;
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA_CTX ctx;
    int ok;
    char h[40];
    const char head[3] = {prov[0], prov[1], ':'};

    ok = SHA1_Init(&ctx) == 1 && SHA1_Update(&ctx, head, 3) == 1;
    while (ok && p + 2 < end) {
        if (p[0] == 0xed && p[1] >= 0xa0) { /* a lone surrogate (text.h) */
            ok = SHA1_Update(&ctx, run, (size_t)(p - run)) == 1 &&
                 SHA1_Update(&ctx, "\xef\xbf\xbd", 3) == 1;
            p += 3;
            run = p;
        } else {
            p++;
        }
    }
    if (!ok || SHA1_Update(&ctx, run, (size_t)(end - run)) != 1 || SHA1_Final(md, &ctx) != 1) {
        out->oom = 1; /* cannot fail for SHA-1; never print a wrong hash */
        return;
    }
    for (unsigned i = 0; i < 20; i++) {
        h[2 * i] = hex[md[i] >> 4];
        h[2 * i + 1] = hex[md[i] & 15];
    }
    enr_buf_append(out, h, 40);
}

/*
 * put_hash for the line printer, when provider ":" id fits in one SHA-1
 * block with its padding (55 bytes) and the id holds no 0xED byte (so no
 * lone surrogate): the block is padded here and given to SHA1_Transform
 * once, without the Update/Final bookkeeping and the context's cleansing
 * (an id is not a secret).  Otherwise, and under enr_engine_set_slow,
 * put_hash decides; the fast fuzz target compares the two.
 */
#define HASH_BLOCK 64
#define HASH_ONE_BLOCK (HASH_BLOCK - 9) /* the 0x80 byte and the bit length */

static void put_hash_fast(enr_buf *out, const char *prov, const char *id, size_t n, int clean)
{
    unsigned char block[HASH_BLOCK] = {0};
    uint64_t bits = (uint64_t)(n + 3) * 8;
    unsigned ed = 0;
    SHA_CTX ctx;
    char *h;

    if (n > HASH_ONE_BLOCK - 3) {
        put_hash(out, prov, id, n);
        return;
    }
    block[0] = (unsigned char)prov[0];
    block[1] = (unsigned char)prov[1];
    block[2] = ':';
    if (clean) { /* no 0xED byte either */
        memcpy(block + 3, id, n);
    } else {
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)id[i];

            block[3 + i] = c;
            ed |= c == 0xed;
        }
    }
    if (ed || SHA1_Init(&ctx) != 1) {
        put_hash(out, prov, id, n);
        return;
    }
    block[3 + n] = 0x80;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    bits = __builtin_bswap64(bits); /* big-endian, as SHA-1 counts */
#endif
    memcpy(block + HASH_BLOCK - 8, &bits, 8);
    SHA1_Transform(&ctx, block);
    h = out->data + out->len;
    {
        const SHA_LONG w[5] = {ctx.h0, ctx.h1, ctx.h2, ctx.h3, ctx.h4};

        for (int i = 0; i < 5; i++) {
            /* the 8 nibbles of a word into 8 bytes, most significant
             * first, then to '0'..'9' 'a'..'f' all at once */
            uint64_t x = w[i], letters;

            x = (x | x << 16) & 0x0000ffff0000ffffull;
            x = (x | x << 8) & 0x00ff00ff00ff00ffull;
            x = (x | x << 4) & 0x0f0f0f0f0f0f0f0full;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            x = __builtin_bswap64(x);
#endif
            letters = ((x + 0x0606060606060606ull) >> 4) & 0x0101010101010101ull;
            x += 0x3030303030303030ull + letters * ('a' - '0' - 10);
            memcpy(h + 8 * i, &x, 8);
        }
    }
    out->len += 40;
}

static void put_u64(enr_buf *out, uint64_t v)
{
    char d[24];
    int i = 24;

    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    enr_buf_append(out, d + i, (size_t)(24 - i));
}

/* Bytes rule 11 escapes (and 0xED, a lone surrogate's lead, text.h). */
static const uint8_t escape_byte[256] = {
    [0x00] = 1, [0x01] = 1, [0x02] = 1, [0x03] = 1, [0x04] = 1, [0x05] = 1, [0x06] = 1,
    [0x07] = 1, [0x08] = 1, [0x09] = 1, [0x0a] = 1, [0x0b] = 1, [0x0c] = 1, [0x0d] = 1,
    [0x0e] = 1, [0x0f] = 1, [0x10] = 1, [0x11] = 1, [0x12] = 1, [0x13] = 1, [0x14] = 1,
    [0x15] = 1, [0x16] = 1, [0x17] = 1, [0x18] = 1, [0x19] = 1, [0x1a] = 1, [0x1b] = 1,
    [0x1c] = 1, [0x1d] = 1, [0x1e] = 1, [0x1f] = 1, ['"'] = 1,  ['\\'] = 1, [0xed] = 1,
};

/* The second byte of the two-byte escapes of rule 11. */
static const char escape_short[256] = {
    ['"'] = '"',  ['\\'] = '\\', ['\b'] = 'b', ['\t'] = 't',
    ['\n'] = 'n', ['\f'] = 'f',  ['\r'] = 'r',
};

/* put_escaped's bytes for text from its first byte to escape on, written
 * in place into room already reserved (ESCAPED_MAX), without a call per
 * piece: the fast fuzz target compares the two. */
static void put_escaped_at(enr_buf *out, const unsigned char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *end = s + n;
    char *o = out->data + out->len;

    while (s < end) {
        unsigned c = *s;

        if (!escape_byte[c]) {
            *o++ = (char)c;
            s++;
        } else if (c == 0xed) {
            if (end - s >= 3 && s[1] >= 0xa0) { /* lone surrogate (text.h) */
                unsigned cp = 0xd000u | ((s[1] & 0x3fu) << 6) | (s[2] & 0x3fu);

                o[0] = '\\';
                o[1] = 'u';
                o[2] = hex[cp >> 12];
                o[3] = hex[(cp >> 8) & 15];
                o[4] = hex[(cp >> 4) & 15];
                o[5] = hex[cp & 15];
                o += 6;
                s += 3;
            } else {
                *o++ = (char)c;
                s++;
            }
        } else if (escape_short[c]) {
            o[0] = '\\';
            o[1] = escape_short[c];
            o += 2;
            s++;
        } else {
            o[0] = '\\';
            o[1] = 'u';
            o[2] = '0';
            o[3] = '0';
            o[4] = hex[c >> 4];
            o[5] = hex[c & 15];
            o += 6;
            s++;
        }
    }
    out->len = (size_t)(o - out->data);
}

/* The longest escaped form of n bytes: a control byte gives 6. */
#define ESCAPED_MAX(n) (6 * (n))
/* A line but its id (three times: id, poster, hash input), title and
 * poster: keys, hash, base, duration, availability, fetched_at. */
#define LINE_FIXED 512

#ifdef __SSE2__
/* The bytes of v that rule 11 escapes (and 0xED), as a movemask. */
static inline int escape_mask16(__m128i v)
{
    __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v),
                                          _mm_cmpeq_epi8(v, _mm_set1_epi8('"'))),
                             _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\\')),
                                          _mm_cmpeq_epi8(v, _mm_set1_epi8((char)0xed))));

    return _mm_movemask_epi8(m);
}
#endif

/* Does the word hold a byte rule 11 escapes (or 0xED)?  Each term is
 * the classic "has a zero (or smaller) byte" test, exact as a yes/no. */
static inline uint64_t escape_word(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\'), e = x ^ (ones * 0xed);

    return (((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b) | ((e - ones) & ~e)) &
           high;
}

/* Is there nothing to escape in s (rule 11, and no 0xED)?  Words at a
 * time, the last one overlapping the one before. */
static int text_clean(const unsigned char *s, size_t n)
{
    size_t i = 0;
    uint64_t w, w2;

#ifdef __SSE2__
    if (n >= 16) {
        for (; i + 16 <= n; i += 16)
            if (escape_mask16(_mm_loadu_si128((const __m128i *)(const void *)(s + i))) != 0)
                return 0;
        return i == n ||
               escape_mask16(_mm_loadu_si128((const __m128i *)(const void *)(s + n - 16))) == 0;
    }
#endif
    if (n >= 8) {
        for (; i + 8 <= n; i += 8) {
            memcpy(&w, s + i, 8);
            if (escape_word(w))
                return 0;
        }
        memcpy(&w2, s + n - 8, 8);
        return i == n || !escape_word(w2);
    }
    for (; i < n; i++)
        if (escape_byte[s[i]])
            return 0;
    return 1;
}

/* put_escaped for a line that has its room reserved and cannot reach
 * the output limit; clean: text_clean said so. */
static void put_text(enr_buf *out, const char *str, size_t n, int clean)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;

    if (!clean)
        while (i < n && !escape_byte[s[i]])
            i++;
    else
        i = n;
    memcpy(out->data + out->len, str, i);
    out->len += i;
    if (i < n)
        put_escaped_at(out, s + i, n - i);
}

/* put_text for text seen once: copied 16 bytes at a time as it is
 * checked, rather than checked (text_clean) and then copied. */
static void put_text_once(enr_buf *out, const char *str, size_t n)
{
#ifdef __SSE2__
    const unsigned char *s = (const unsigned char *)str;
    unsigned char *o = (unsigned char *)out->data + out->len;
    size_t i = 0, at = n;
    int m;

    if (n < 16) {
        put_text(out, str, n, 0);
        return;
    }
    for (; i + 16 <= n; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));

        m = escape_mask16(v);
        _mm_storeu_si128((__m128i *)(void *)(o + i), v); /* in the room reserved */
        if (m != 0) {
            at = i + (size_t)__builtin_ctz((unsigned)m);
            break;
        }
    }
    if (at == n && i < n) { /* the last 16, overlapping what is checked */
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + n - 16));

        m = escape_mask16(v);
        _mm_storeu_si128((__m128i *)(void *)(o + n - 16), v);
        if (m != 0)
            at = n - 16 + (size_t)__builtin_ctz((unsigned)m);
    }
    out->len += at;
    if (at < n)
        put_escaped_at(out, s + at, n - at);
#else
    put_text(out, str, n, 0);
#endif
}

#define PUT_LIT(o, s) (memcpy((o)->data + (o)->len, (s), sizeof(s) - 1), (o)->len += sizeof(s) - 1)

/* What the line before printed, reused while it is the same: the
 * availability object of its regions, and fetched_at's digits (the
 * clock is read for every line, the documented behaviour, but moves
 * once a millisecond). */
#define AVAIL_TEXT_MAX 96 /* ENR_REGIONS times "\"XX\":false," */

typedef struct line_cache {
    uint64_t ms;
    size_t n; /* 0: none yet */
    char d[24];
    unsigned avail;
    size_t avail_n; /* 0: none yet */
    char a[AVAIL_TEXT_MAX];
} line_cache;

/* One output line, its worst case reserved once: 0, or -1 when the
 * reservation failed or the line could reach stop (the caller then
 * prints it the careful way, which finds where it stops). */
static int emit_line_fast(const enr_batch *b, const enr_record *r, enr_clock_ms_fn now_ms,
                          enr_buf *out, size_t stop, line_cache *last)
{
    static const char avail_keys[ENR_REGIONS][8] = {
        "\"US\":", "\"GB\":", "\"JP\":", "\"KR\":", "\"TW\":", "\"SG\":", "\"VN\":", "\"TH\":"};
    const char *text = b->text.data, *prov = provider_names[r->provider];
    size_t bound = LINE_FIXED + ESCAPED_MAX(2 * r->id_len + r->title_len + r->poster_len);
    char num[ENR_NUM_MAX];
    uint64_t ms;
    int id_clean;

    if (bound < r->id_len || out->len > stop || stop - out->len <= bound ||
        enr_buf_reserve(out, bound) != 0)
        return -1;
    id_clean = text_clean((const unsigned char *)text + r->id_off, r->id_len);
    PUT_LIT(out, "{\"hash\":\"");
    put_hash_fast(out, prov, text + r->id_off, r->id_len, id_clean);
    PUT_LIT(out, "\",\"provider\":\"");
    memcpy(out->data + out->len, prov, 2);
    out->len += 2;
    PUT_LIT(out, "\",\"id\":\"");
    put_text(out, text + r->id_off, r->id_len, id_clean);
    PUT_LIT(out, "\",\"title\":\"");
    put_text_once(out, text + r->title_off, r->title_len);
    PUT_LIT(out, "\",\"poster\":\"");
    if (r->poster_len > 0) {
        put_text_once(out, text + r->poster_off, r->poster_len);
    } else {
        const char *base = provider_bases[r->provider];
        size_t n = provider_base_len[r->provider];

        memcpy(out->data + out->len, base, n);
        out->len += n;
        out->data[out->len++] = '/';
        put_text(out, text + r->id_off, r->id_len, id_clean);
        PUT_LIT(out, "/hqdefault.jpg");
    }
    PUT_LIT(out, "\",\"duration\":");
    if (!isfinite(r->duration)) { /* RFC 8259 has no NaN nor Infinity: null, whatever its source */
        PUT_LIT(out, "null");
    } else {
        size_t n = enr_num_format(r->duration, num);

        memcpy(out->data + out->len, num, n);
        out->len += n;
    }
    PUT_LIT(out, ",\"availability\":{");
    if (last->avail_n == 0 || r->avail != last->avail) {
        char *o = last->a;

        for (int k = 0; k < ENR_REGIONS; k++) {
            memcpy(o, avail_keys[k], 5);
            if (r->avail & (1u << k)) {
                memcpy(o + 5, "true,", 5);
                o += 10;
            } else {
                memcpy(o + 5, "false,", 6);
                o += 11;
            }
        }
        last->avail = r->avail;
        last->avail_n = (size_t)(o - last->a) - 1; /* the last comma */
    }
    memcpy(out->data + out->len, last->a, sizeof(last->a)); /* in the room reserved */
    out->len += last->avail_n;
    PUT_LIT(out, "},\"fetched_at\":");
    ms = now_ms();
    if (last->n == 0 || ms != last->ms) {
        char d[24];
        int i = 24;

        last->ms = ms;
        do {
            d[--i] = (char)('0' + ms % 10);
            ms /= 10;
        } while (ms);
        last->n = (size_t)(24 - i);
        memcpy(last->d, d + i, last->n);
    }
    memcpy(out->data + out->len, last->d, sizeof(last->d)); /* in the room reserved */
    out->len += last->n;
    PUT_LIT(out, "}\n");
    return 0;
}

int enr_emit(enr_engine *e, const enr_batch *b, enr_clock_ms_fn now_ms, enr_buf *out,
             enr_error *err)
{
    char num[ENR_NUM_MAX];
    size_t start = out->len;
    line_cache last = {0};
    /* out->len past stop: the output passed max_output (0: never) */
    size_t stop = e->max_output && e->max_output < (size_t)-1 - start ? start + e->max_output
                                                                      : (size_t)-1 - 1;

    if (b->n == 0) {
        enr_buf_putc(out, '\n');
        return out->len > stop ? enr_engine_output_fail(e, err, -1, 0, out->len - start) : 0;
    }
    for (size_t i = 0; i < b->n; i++) {
        const enr_record *r = &b->recs[i];
        const char *text = b->text.data;
        const char *prov = provider_names[r->provider];

        if (!e->slow && emit_line_fast(b, r, now_ms, out, stop, &last) == 0)
            continue;

        enr_buf_lit(out, "{\"hash\":\"");
        put_hash(out, prov, text + r->id_off, r->id_len);
        enr_buf_lit(out, "\",\"provider\":\"");
        enr_buf_append(out, prov, 2);
        enr_buf_lit(out, "\",\"id\":\"");
        put_escaped(out, text + r->id_off, r->id_len, stop);
        enr_buf_lit(out, "\",\"title\":\"");
        put_escaped(out, text + r->title_off, r->title_len, stop);
        enr_buf_lit(out, "\",\"poster\":\"");
        if (r->poster_len > 0) {
            put_escaped(out, text + r->poster_off, r->poster_len, stop);
        } else {
            const char *base = provider_bases[r->provider];

            enr_buf_append(out, base, strlen(base));
            enr_buf_putc(out, '/');
            put_escaped(out, text + r->id_off, r->id_len, stop);
            enr_buf_lit(out, "/hqdefault.jpg");
        }
        if (out->len > stop) /* a long string: no need to finish the line */
            return enr_engine_output_fail(e, err, (long)r->element, i, out->len - start);
        enr_buf_lit(out, "\",\"duration\":");
        if (!isfinite(r->duration))
            enr_buf_lit(out, "null");
        else
            enr_buf_append(out, num, enr_num_format(r->duration, num));
        for (int k = 0; k < ENR_REGIONS; k++) {
            enr_buf_append(out, availability_keys[k], strlen(availability_keys[k]));
            if (r->avail & (1u << k))
                enr_buf_lit(out, "true");
            else
                enr_buf_lit(out, "false");
        }
        enr_buf_lit(out, "},\"fetched_at\":");
        put_u64(out, now_ms());
        enr_buf_lit(out, "}\n");
        if (out->len > stop)
            return enr_engine_output_fail(e, err, (long)r->element, i, out->len - start);
    }
    return 0;
}

/* JSON string of plain ASCII text (error messages are ours, no escapes
 * beyond quotes and backslashes needed). */
void enr_error_json(const enr_error *err, enr_buf *out)
{
    enr_buf_lit(out, "{\"error\":\"");
    put_escaped(out, err->msg, strlen(err->msg), (size_t)-1 - 1);
    enr_buf_putc(out, '"');
    if (err->limit > 0) {
        enr_buf_lit(out, ",\"limit\":");
        put_u64(out, err->limit);
        enr_buf_lit(out, ",\"reached\":");
        put_u64(out, err->reached);
        enr_buf_lit(out, ",\"at_record\":");
        put_u64(out, (uint64_t)err->record);
    }
    if (err->offset >= 0) {
        enr_buf_lit(out, ",\"offset\":");
        put_u64(out, (uint64_t)err->offset);
    }
    if (err->element >= 0) {
        enr_buf_lit(out, ",\"element\":");
        put_u64(out, (uint64_t)err->element);
    }
    enr_buf_lit(out, "}\n");
}
