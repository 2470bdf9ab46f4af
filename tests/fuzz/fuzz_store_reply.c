/*
 * fuzz_store_reply.c: libFuzzer target on a batch's MGET reply from the
 * fleet's shared store, from raw bytes to the answers served: hiredis's
 * reader bound as the store binds it (enr_store_reader_bound, the bytes
 * by enr_store_bound_feed to enr_store_mget_cap), then the reply taken
 * apart as a batch takes it (enr_store_mget_take, each value through
 * enr_store_value_decode).  A store that is wrong, or not Redis, can
 * send anything: a reply larger than asked, wrong types, nested arrays,
 * array headers of two billion elements.
 *
 * Input: two bytes for the ids asked (1..ENR_STORE_MGET_MAX), one for
 * the size of the reads the bytes arrive in (1..256), then the bytes.
 * Beyond "no crash, no leak, no sanitizer report" it checks on every
 * input: the reader never holds more than was asked for (the feeding
 * stops there, as the store loses the connection); every reply built
 * has at most ENR_STORE_ARRAY_MAX elements an array and, in all, no more
 * than the bytes could carry; the first reply taken gives -1 unless it
 * is an array of exactly the ids asked, else hits for distinct ids in
 * order, each passing enr_answer_check and equal to its element decoded
 * again, with hits, refusals and nils adding up to the ids asked.
 * scripts/fuzz.sh's -malloc_limit_mb catches a header that makes the
 * library allocate what the bytes never carried.
 */
#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "upstream/answer.h"
#include "upstream/store.h"
#include "upstream/store_cache.h"

#define NOW 1700000000000ull /* any wall clock, ms */

typedef struct seen {
    const redisReply *r;
    size_t n, hits, last;
} seen;

static void hit(void *ud, size_t k, const enr_cache_val *v)
{
    seen *sn = ud;
    const redisReply *e;
    enr_cache_val again;

    if (k >= sn->n || (sn->hits > 0 && k <= sn->last) || enr_answer_check(v) != NULL)
        abort();
    e = sn->r->element[k];
    if (e->type != REDIS_REPLY_STRING || enr_store_value_decode(e->str, e->len, NOW, &again) != 0 ||
        again.expires_ms != v->expires_ms || again.poster_len != v->poster_len ||
        again.negative != v->negative)
        abort();
    sn->hits++;
    sn->last = k;
}

/* Elements in r's arrays, all levels; abort on an array over the bound. */
static size_t elements(const redisReply *r)
{
    size_t n = 0;

    if (r->type != REDIS_REPLY_ARRAY)
        return 0;
    if (r->elements > ENR_STORE_ARRAY_MAX)
        abort();
    for (size_t i = 0; i < r->elements; i++)
        n += 1 + elements(r->element[i]);
    return n;
}

static void take(const redisReply *r, size_t n, const enr_store_bound *b)
{
    enr_store_stats st = {0};
    seen sn = {.r = r, .n = n};
    size_t nils = 0;
    long hits;

    if (elements(r) > b->allowed / ENR_STORE_WIRE_PER_ELEMENT)
        abort();
    hits = enr_store_mget_take(r, n, NOW, hit, &sn, &st);
    if (hits < 0) {
        if (r->type == REDIS_REPLY_ARRAY && r->elements == n)
            abort();
        if (sn.hits != 0 || st.hits != 0 || st.refused != 0)
            abort();
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
        abort();
    for (size_t i = 0; i < n; i++)
        nils += r->element[i]->type == REDIS_REPLY_NIL;
    if ((size_t)hits != sn.hits || st.hits != sn.hits || sn.hits + st.refused + nils != n)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enr_store_bound b = {0};
    redisReader *rd;
    size_t n, chunk;

    if (size < 3)
        return 0;
    n = 1 + ((size_t)data[0] | (size_t)data[1] << 8) % ENR_STORE_MGET_MAX;
    chunk = 1 + (size_t)data[2];
    data += 3;
    size -= 3;
    b.allowed = enr_store_mget_cap(n);
    if ((rd = redisReaderCreate()) == NULL)
        abort();
    enr_store_reader_bound(rd, &b);
    for (size_t at = 0; at < size;) {
        size_t len = size - at < chunk ? size - at : chunk;
        void *r = NULL;
        if (enr_store_bound_feed(&b, len) != 0)
            break; /* more than asked for: the store loses the connection */
        if (redisReaderFeed(rd, (const char *)data + at, len) != REDIS_OK)
            break;
        at += len;
        if (redisReaderGetReply(rd, &r) != REDIS_OK)
            break; /* malformed, or refused by the bound */
        if (r != NULL) {
            take(r, n, &b);
            freeReplyObject(r);
            break; /* anything after it no command asked for */
        }
    }
    redisReaderFree(rd);
    return 0;
}
