/*
 * scan.c: wide scanning of JSON string bytes (see scan.h).
 *
 * Skipped strings (descriptions, tags: most of a batch's bytes) are only
 * searched for the quote, backslash and control bytes, so this search is
 * the engine's memory-speed part: 32 bytes per step with AVX2 (compiled
 * with a target attribute and chosen at run time with
 * __builtin_cpu_supports, so the binary still runs on any x86-64), 16
 * with SSE2 (the x86-64 baseline), one byte at a time elsewhere.  Valid
 * escapes are stepped over here, so a description with a "\n" every
 * line does not return to the reader per escape.  Strings nobody reads
 * (enr_skip_string) go 64 bytes a step with their escapes resolved by
 * bit masks, simdjson's way: more instructions than stepping, but no
 * branch per escape, and that branch, mispredicted about half of the
 * time, was where the stepping scanner's time went (perf, bench batch:
 * the scanners' share of the engine's time fell from ~31% to ~22%).
 *
 * Invariant: every implementation returns the same pointer, *high and
 * *escaped as the portable one for every input (tests/fuzz/fuzz_scan.c).
 */
#include "engine/scan.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SCAN_X86 1
#include <immintrin.h>
#endif

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* The first quote, backslash or control byte in [p, end), or end. */
static ALWAYS_INLINE const unsigned char *plain_bytes(const unsigned char *p,
                                                      const unsigned char *end, unsigned *high)
{
    unsigned h = 0;

    while (p < end && *p != '"' && *p != '\\' && *p >= 0x20) {
        h |= *p;
        p++;
    }
    *high |= h & 0x80;
    return p;
}

static const unsigned char *portable(const unsigned char *p, const unsigned char *end,
                                     unsigned *high, int *escaped)
{
    for (;;) {
        long n;

        p = plain_bytes(p, end, high);
        if (p >= end || *p != '\\' || (n = enr_escape_len(p, end)) == 0)
            return p;
        *escaped = 1;
        p += n;
    }
}

#ifdef SCAN_X86
/* The high bits of the bytes before index idx of a block. */
static ALWAYS_INLINE unsigned below(unsigned mask, unsigned idx)
{
    return mask & ((1u << idx) - 1); /* idx < 32: a stop was found */
}

static ALWAYS_INLINE const unsigned char *plain_sse2(const unsigned char *p,
                                                     const unsigned char *end, unsigned *high)
{
    const __m128i q = _mm_set1_epi8('"'), b = _mm_set1_epi8('\\'), c = _mm_set1_epi8(0x1f);
    unsigned hs = 0;

    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i ctl = _mm_cmpeq_epi8(_mm_min_epu8(v, c), v);
        unsigned m = (unsigned)_mm_movemask_epi8(
            _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, b)), ctl));
        unsigned h = (unsigned)_mm_movemask_epi8(v);

        if (m != 0) {
            unsigned i = (unsigned)__builtin_ctz(m);
            if ((hs | below(h, i)) != 0)
                *high |= 0x80;
            return p + i;
        }
        hs |= h;
        p += 16;
    }
    if (hs != 0)
        *high |= 0x80;
    return plain_bytes(p, end, high);
}

static const unsigned char *sse2(const unsigned char *p, const unsigned char *end, unsigned *high,
                                 int *escaped)
{
    for (;;) {
        long n;

        p = plain_sse2(p, end, high);
        if (p >= end || *p != '\\' || (n = enr_escape_len(p, end)) == 0)
            return p;
        *escaped = 1;
        p += n;
    }
}

__attribute__((target("avx2"))) static const unsigned char *
avx2(const unsigned char *p, const unsigned char *end, unsigned *high, int *escaped)
{
    const __m256i q = _mm256_set1_epi8('"'), b = _mm256_set1_epi8('\\'), c = _mm256_set1_epi8(0x1f);
    unsigned hs = 0;

    for (;;) {
        long n;

        while (end - p >= 32) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p);
            __m256i ctl = _mm256_cmpeq_epi8(_mm256_min_epu8(v, c), v);
            unsigned m = (unsigned)_mm256_movemask_epi8(_mm256_or_si256(
                _mm256_or_si256(_mm256_cmpeq_epi8(v, q), _mm256_cmpeq_epi8(v, b)), ctl));
            unsigned h = (unsigned)_mm256_movemask_epi8(v);

            if (m != 0) {
                unsigned i = (unsigned)__builtin_ctz(m);
                hs |= below(h, i);
                p += i;
                goto stop;
            }
            hs |= h;
            p += 32;
        }
        p = plain_sse2(p, end, high);
    stop:
        if (p >= end || *p != '\\' || (n = enr_escape_len(p, end)) == 0)
            break;
        *escaped = 1;
        p += n;
    }
    if (hs != 0)
        *high |= 0x80;
    return p;
}

/*
 * For strings nobody reads (enr_skip_string): the escapes of a block are
 * resolved with bit masks (simdjson's odd-backslash-run method) instead
 * of one stop each, so a description with an escape every line is
 * crossed without a branch per escape, mispredicted half of the time.
 * A \u escape whose four hex digits are in the same 64-byte block is
 * resolved with masks too (u_escapes); any other escaped byte (a \u cut
 * by the block's end, or an invalid escape) hands over to the stepping
 * loop at its backslash; so does a backslash run reaching the last 32
 * bytes of the body.  A block without quote, control byte or backslash
 * (most of a long description) is told by one test before any mask is
 * built, and after two such blocks in a row the test covers 128 bytes
 * (not at once: a string with an escape every line would pay for the
 * wider test without passing it).
 */
/* The constants of the block masks, set once per call rather than per
 * block. */
typedef struct skip_consts {
    __m256i nib, hi_tab, lo_tab, two, sp, bsl, zero;
} skip_consts;

/* A 32-byte block's backslashes, its quotes and control bytes, and the
 * bytes that may not follow a backslash without a \u (all but
 * " / \ b f n r t). */
typedef struct skip_masks {
    uint32_t bs, qc, bad;
} skip_masks;

__attribute__((target("avx2"))) static inline skip_consts skip_init(void)
{
    skip_consts k;

    k.nib = _mm256_set1_epi8(0x0f);
    /* a bit per high nibble (2, 5, 6, 7), set in the low-nibble table for
     * the bytes of that row that are escapes */
    k.hi_tab = _mm256_setr_epi8(0, 0, 1, 0, 0, 2, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 2, 4,
                                8, 0, 0, 0, 0, 0, 0, 0, 0);
    k.lo_tab = _mm256_setr_epi8(0, 0, 0x0d, 0, 8, 0, 4, 0, 0, 0, 0, 0, 2, 0, 4, 1, 0, 0, 0x0d, 0, 8,
                                0, 4, 0, 0, 0, 0, 0, 2, 0, 4, 1);
    k.two = _mm256_set1_epi8(2);
    k.sp = _mm256_set1_epi8(0x20);
    k.bsl = _mm256_set1_epi8('\\');
    k.zero = _mm256_setzero_si256();
    /* opaque to the compiler, so that it keeps them in registers instead
     * of rebuilding them inside the loop */
    __asm__(""
            : "+x"(k.nib), "+x"(k.hi_tab), "+x"(k.lo_tab), "+x"(k.two), "+x"(k.sp), "+x"(k.bsl),
              "+x"(k.zero));
    return k;
}

/* Quotes and control bytes at once: v ^ 2 maps '"' to 0x20 and the
 * control bytes onto themselves, and nothing else to 0x20 or below. */
__attribute__((target("avx2"))) static inline uint32_t quote_ctl(const skip_consts *k, __m256i v)
{
    __m256i x = _mm256_xor_si256(v, k->two);

    return (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(x, k->sp), x));
}

/* The bytes that may not follow a backslash without a \u. */
__attribute__((target("avx2"))) static inline uint32_t bad_bytes(const skip_consts *k, __m256i v)
{
    __m256i cls = _mm256_and_si256(
        _mm256_shuffle_epi8(k->hi_tab, _mm256_and_si256(_mm256_srli_epi16(v, 4), k->nib)),
        _mm256_shuffle_epi8(k->lo_tab, _mm256_and_si256(v, k->nib)));

    return (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(cls, k->zero));
}

__attribute__((target("avx2"))) static inline skip_masks skip_block(const skip_consts *k,
                                                                    const unsigned char *p)
{
    __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p);
    __m256i cls = _mm256_and_si256(
        _mm256_shuffle_epi8(k->hi_tab, _mm256_and_si256(_mm256_srli_epi16(v, 4), k->nib)),
        _mm256_shuffle_epi8(k->lo_tab, _mm256_and_si256(v, k->nib)));
    skip_masks m;

    m.bs = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, k->bsl));
    m.qc = quote_ctl(k, v);
    m.bad = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(cls, k->zero));
    return m;
}

/* The first stop of a block of 64 bytes (bit masks): an unescaped quote
 * or control byte, or an escaped byte the masks do not resolve; *carry
 * in and out: the block's first byte / the next block's is escaped. */
#define SKIP_STOP(T, bs, qc, bad, carry, escaped)                                                  \
    do {                                                                                           \
        const T even_ = (T)0x5555555555555555ull;                                                  \
        T follows_, odd_, seq_;                                                                    \
        bs &= ~carry;                                                                              \
        follows_ = (T)(bs << 1) | carry;                                                           \
        odd_ = bs & ~even_ & ~follows_;                                                            \
        carry = (T)__builtin_add_overflow(odd_, bs, &seq_);                                        \
        escaped = (even_ ^ (T)(seq_ << 1)) & follows_;                                             \
        qc = (qc & ~escaped) | (escaped & bad);                                                    \
    } while (0)

/* The escaped 'u' of a 64-byte block whose four next bytes are hex
 * digits in the same block: valid \u escapes, which are no stop.  Only
 * computed for a block where an escaped byte stops the masks: text sent
 * as \u escapes (a description in CJK has one every 6 bytes) then costs
 * one pass over its block instead of a stop per escape.  A \u whose
 * digits reach the next block stays a stop, for the stepping loop. */
__attribute__((target("avx2"))) static inline uint64_t u_escapes(const unsigned char *p,
                                                                 uint64_t escaped)
{
    const __m256i zero = _mm256_set1_epi8('0'), nine = _mm256_set1_epi8(9),
                  lower = _mm256_set1_epi8(0x20), a = _mm256_set1_epi8('a'),
                  five = _mm256_set1_epi8(5), u = _mm256_set1_epi8('u');
    uint64_t hex = 0, us = 0;

    for (int h = 0; h < 2; h++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32 * h));
        __m256i d = _mm256_sub_epi8(v, zero);
        __m256i l = _mm256_sub_epi8(_mm256_or_si256(v, lower), a);
        __m256i x = _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_min_epu8(d, nine), d),
                                    _mm256_cmpeq_epi8(_mm256_min_epu8(l, five), l));

        hex |= (uint64_t)(uint32_t)_mm256_movemask_epi8(x) << (32 * h);
        us |= (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, u)) << (32 * h);
    }
    return escaped & us & hex >> 1 & hex >> 2 & hex >> 3 & hex >> 4;
}

#define AVX2_INLINE __attribute__((target("avx2"), always_inline)) static inline

/* Most strings skipped are short: a quote or a control byte within the
 * 64 bytes at p with no backslash before it, told without the escape
 * masks, and before their constants are set.  NULL: not told so. */
AVX2_INLINE const unsigned char *short_end(const unsigned char *p)
{
    const __m256i two = _mm256_set1_epi8(2), sp = _mm256_set1_epi8(0x20),
                  bsl = _mm256_set1_epi8('\\');
    __m256i v0 = _mm256_loadu_si256((const __m256i *)(const void *)p),
            v1 = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32));
    __m256i x0 = _mm256_xor_si256(v0, two), x1 = _mm256_xor_si256(v1, two);
    uint64_t qc =
        (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(x0, sp), x0)) |
        (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(x1, sp), x1))
            << 32;
    uint64_t bs = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v0, bsl)) |
                  (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v1, bsl)) << 32;

    if (qc != 0 && (bs & ((qc & (0 - qc)) - 1)) == 0)
        return p + __builtin_ctzll(qc);
    return NULL;
}

/* The rest of a long string after two clean blocks, two blocks at a
 * time: p at the first 128 bytes holding a quote, a control byte or a
 * backslash, or fewer than 128 left. */
AVX2_INLINE const unsigned char *skip_clean(const skip_consts *k, const unsigned char *p,
                                            const unsigned char *end)
{
    for (; end - p >= 128; p += 128) {
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(const void *)p),
                w1 = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32)),
                w2 = _mm256_loadu_si256((const __m256i *)(const void *)(p + 64)),
                w3 = _mm256_loadu_si256((const __m256i *)(const void *)(p + 96));
        __m256i y0 = _mm256_xor_si256(w0, k->two), y1 = _mm256_xor_si256(w1, k->two),
                y2 = _mm256_xor_si256(w2, k->two), y3 = _mm256_xor_si256(w3, k->two);
        __m256i m =
            _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(_mm256_min_epu8(y0, k->sp), y0),
                                            _mm256_cmpeq_epi8(_mm256_min_epu8(y1, k->sp), y1)),
                            _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_min_epu8(y2, k->sp), y2),
                                            _mm256_cmpeq_epi8(_mm256_min_epu8(y3, k->sp), y3)));

        m = _mm256_or_si256(
            m, _mm256_or_si256(
                   _mm256_or_si256(_mm256_cmpeq_epi8(w0, k->bsl), _mm256_cmpeq_epi8(w1, k->bsl)),
                   _mm256_or_si256(_mm256_cmpeq_epi8(w2, k->bsl), _mm256_cmpeq_epi8(w3, k->bsl))));
        if (!_mm256_testz_si256(m, m))
            break;
    }
    return p;
}

/* A 64-byte block's stops: its quotes and control bytes not escaped, and
 * the escaped bytes the masks do not resolve (bad); *escaped: the bytes
 * a backslash escapes; *carry in and out: the block's first byte / the
 * next block's is escaped. */
AVX2_INLINE uint64_t block_stops(const skip_consts *k, __m256i v0, __m256i v1, __m256i q0,
                                 __m256i q1, __m256i b0, __m256i b1, uint64_t *carry,
                                 uint64_t *escaped)
{
    uint64_t bs = (uint32_t)_mm256_movemask_epi8(b0) | (uint64_t)(uint32_t)_mm256_movemask_epi8(b1)
                                                           << 32;
    uint64_t stop =
        (uint32_t)_mm256_movemask_epi8(q0) | (uint64_t)(uint32_t)_mm256_movemask_epi8(q1) << 32;
    uint64_t bad = bad_bytes(k, v0) | (uint64_t)bad_bytes(k, v1) << 32;
    uint64_t c = *carry, e;

    if ((bs & (bs << 1 | c)) == 0) {
        /* no backslash escaped (nearly always): each escapes the byte
         * after it, the last one the next block's first */
        e = bs << 1 | c;
        c = bs >> 63;
        stop = (stop & ~e) | (e & bad);
    } else {
        SKIP_STOP(uint64_t, bs, stop, bad, c, e);
    }
    *carry = c;
    *escaped = e;
    return stop;
}

__attribute__((target("avx2"))) static const unsigned char *skip_avx2(const unsigned char *p,
                                                                      const unsigned char *end)
{
    skip_consts k;
    uint64_t carry = 0; /* the block's first byte is escaped */
    unsigned clean = 0; /* the blocks before were clean */
    const unsigned char *q;
    long n;

    if (end - p >= 64 && (q = short_end(p)) != NULL)
        return q;
    k = skip_init();
    for (;;) {
        uint64_t escaped, stop;
        unsigned i;

        while (end - p >= 64) {
            __m256i v0 = _mm256_loadu_si256((const __m256i *)(const void *)p),
                    v1 = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32));
            __m256i x0 = _mm256_xor_si256(v0, k.two), x1 = _mm256_xor_si256(v1, k.two);
            __m256i q0 = _mm256_cmpeq_epi8(_mm256_min_epu8(x0, k.sp), x0),
                    q1 = _mm256_cmpeq_epi8(_mm256_min_epu8(x1, k.sp), x1);
            __m256i b0 = _mm256_cmpeq_epi8(v0, k.bsl), b1 = _mm256_cmpeq_epi8(v1, k.bsl);
            __m256i any = _mm256_or_si256(_mm256_or_si256(q0, q1), _mm256_or_si256(b0, b1));

            /* most blocks of a long string: no quote, control byte or
             * backslash, nothing escaped from the block before */
            if (_mm256_testz_si256(any, any) && carry == 0) {
                p += 64;
                if (!clean++)
                    continue;
                /* the second clean block in a row: the rest of a long
                 * string, two blocks at a time */
                p = skip_clean(&k, p, end);
                continue;
            }
            clean = 0;
            stop = block_stops(&k, v0, v1, q0, q1, b0, b1, &carry, &escaped);
            if (stop != 0) {
                /* \u escapes: resolved for the whole block at once */
                if ((stop & escaped) == 0 || (stop &= ~u_escapes(p, stop & escaped)) != 0)
                    goto found;
            }
            p += 64;
        }
        if (end - p >= 32) {
            skip_masks a = skip_block(&k, p);
            uint32_t bs = a.bs, c32 = (uint32_t)carry, e32, s32 = a.qc;

            SKIP_STOP(uint32_t, bs, s32, a.bad, c32, e32);
            carry = c32;
            escaped = e32;
            stop = s32;
            if (stop != 0)
                goto found;
            p += 32;
        }
        /* the last bytes; a backslash run left open: from its last one */
        return portable(p - carry, end, &(unsigned){0}, &(int){0});
    found:
        i = (unsigned)__builtin_ctzll(stop);
        if (!(escaped >> i & 1))
            return p + i; /* a quote or a control byte */
        p += (long)i - 1; /* the backslash, maybe the block before's */
        if ((n = enr_escape_len(p, end)) == 0)
            return p;
        p += n;
        carry = 0;
    }
}
#endif

static const unsigned char *resolve(const unsigned char *p, const unsigned char *end,
                                    unsigned *high, int *escaped);

/* One process, one CPU: set once, at the first call. */
static enr_scan_fn impl = resolve;

static const unsigned char *resolve(const unsigned char *p, const unsigned char *end,
                                    unsigned *high, int *escaped)
{
    impl = enr_scan_impl("avx2");
    if (impl == NULL)
        impl = enr_scan_impl("sse2");
    if (impl == NULL)
        impl = portable;
    return impl(p, end, high, escaped);
}

const unsigned char *enr_scan_string(const unsigned char *p, const unsigned char *end,
                                     unsigned *high, int *escaped)
{
    return impl(p, end, high, escaped);
}

static const unsigned char *skip_portable(const unsigned char *p, const unsigned char *end)
{
    return portable(p, end, &(unsigned){0}, &(int){0});
}

static const unsigned char *skip_resolve(const unsigned char *p, const unsigned char *end);

static enr_skip_fn skip_impl = skip_resolve;

static const unsigned char *skip_resolve(const unsigned char *p, const unsigned char *end)
{
    skip_impl = enr_skip_impl("avx2");
    if (skip_impl == NULL)
        skip_impl = enr_skip_impl("sse2");
    if (skip_impl == NULL)
        skip_impl = skip_portable;
    return skip_impl(p, end);
}

const unsigned char *enr_skip_string(const unsigned char *p, const unsigned char *end)
{
    return skip_impl(p, end);
}

#ifdef SCAN_X86
static const unsigned char *skip_sse2(const unsigned char *p, const unsigned char *end)
{
    return sse2(p, end, &(unsigned){0}, &(int){0});
}
#endif

enr_skip_fn enr_skip_impl(const char *name)
{
    if (strcmp(name, "portable") == 0)
        return skip_portable;
#ifdef SCAN_X86
    if (strcmp(name, "sse2") == 0)
        return skip_sse2;
    if (strcmp(name, "avx2") == 0) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") ? skip_avx2 : NULL;
    }
#endif
    return NULL;
}

enr_scan_fn enr_scan_impl(const char *name)
{
    if (strcmp(name, "portable") == 0)
        return portable;
#ifdef SCAN_X86
    if (strcmp(name, "sse2") == 0)
        return sse2;
    if (strcmp(name, "avx2") == 0) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") ? avx2 : NULL;
    }
#endif
    return NULL;
}
