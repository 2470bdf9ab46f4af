/*
 * fuzz_store_value.c: libFuzzer target on the decoder of a value read
 * back from the fleet's shared store (enr_store_value_decode,
 * src/upstream/store_cache.c): hostile input, whoever can write to the
 * Redis can write it.
 *
 * Input: the value's bytes, exactly (the decoder is given their length,
 * no NUL after them: ASan sees a read past the end).  Beyond "no crash,
 * no sanitizer report" it checks on every input: a value accepted passes
 * enr_answer_check, the check of a provider's answer; its lifetime ends
 * after "now" and within ENR_STORE_TTL_MAX_S; its poster points inside
 * the input; a negative answer carries neither field, a positive one at
 * least one.  And the round trip: what is accepted, encoded again
 * (enr_store_value_encode) and decoded, is the same answer field for
 * field, and encoding that gives the same bytes (the encoder's form is
 * its own fixed point).  A value over ENR_STORE_VALUE_MAX is refused.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "upstream/answer.h"
#include "upstream/store_cache.h"

#define NOW 1700000000000ull /* any wall clock, ms: the lifetimes are relative to it */

static int same(const enr_cache_val *a, const enr_cache_val *b)
{
    if (a->negative != b->negative || a->has_duration != b->has_duration ||
        a->expires_ms != b->expires_ms || (a->poster == NULL) != (b->poster == NULL))
        return 0;
    if (a->has_duration && memcmp(&a->duration, &b->duration, sizeof a->duration) != 0)
        return 0;
    return a->poster == NULL ||
           (a->poster_len == b->poster_len && memcmp(a->poster, b->poster, a->poster_len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    char enc[ENR_STORE_VALUE_MAX + 1], enc2[ENR_STORE_VALUE_MAX + 1];
    enr_cache_val v, back;
    size_t n, n2;

    if (enr_store_value_decode(s, size, NOW, &v) != 0)
        return 0;
    if (size > ENR_STORE_VALUE_MAX || enr_answer_check(&v) != NULL || v.expires_ms <= NOW ||
        v.expires_ms - NOW > (uint64_t)ENR_STORE_TTL_MAX_S * 1000u)
        abort();
    if (v.negative ? (v.poster != NULL || v.has_duration) : (v.poster == NULL && !v.has_duration))
        abort();
    if (v.poster != NULL && (v.poster < s || v.poster + v.poster_len > s + size))
        abort();
    /* The round trip. */
    n = enr_store_value_encode(enc, sizeof enc, &v, v.expires_ms);
    if (n == 0 || enr_store_value_decode(enc, n, NOW, &back) != 0 || !same(&v, &back))
        abort();
    n2 = enr_store_value_encode(enc2, sizeof enc2, &back, back.expires_ms);
    if (n2 != n || memcmp(enc, enc2, n) != 0)
        abort();
    return 0;
}
