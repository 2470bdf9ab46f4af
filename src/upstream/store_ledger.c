/*
 * store_ledger.c: the fleet's ledger of the day's quota in the shared
 * store (store_lease.h): a lease taken in a worker's idle time by one
 * Lua script, and what the host holds given back when it stops.  The
 * host's page is store_lease.c's (store_lease_int.h).
 *
 * Invariants: a grant is believed only up to what was asked (a reply is
 * hostile input); a reply lost is a grant not added (the ledger counts
 * more than the host holds, never less); one take at a time per source
 * (claim_ms); none on a batch's path.
 */
#include "upstream/store_lease.h"
#include "upstream/store_lease_int.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"

/* Takes min(ask, allowed - taken) for the host ARGV[1] (see the top of
 * store_lease.h): KEYS[1] the day's ledger; ARGV host, known, ask,
 * allowed, ttl.  Returns {grant, taken after}. */
static const char take_lua[] =
    "local h=ARGV[1] local known=tonumber(ARGV[2]) "
    "local mine=tonumber(redis.call('HGET',KEYS[1],h) or '0') "
    "if known>mine then redis.call('HSET',KEYS[1],h,known) end "
    "local taken=0 for _,v in ipairs(redis.call('HVALS',KEYS[1])) do taken=taken+tonumber(v) end "
    "local g=tonumber(ARGV[4])-taken if g>tonumber(ARGV[3]) then g=tonumber(ARGV[3]) end "
    "if g<0 then g=0 end if g>0 then redis.call('HINCRBY',KEYS[1],h,g) end "
    "redis.call('EXPIRE',KEYS[1],ARGV[5]) return {g,taken+g}";
/* Gives back min(n, the host's count): ARGV host, n.  Returns it. */
static const char give_lua[] =
    "local m=tonumber(redis.call('HGET',KEYS[1],ARGV[1]) or '0') local n=tonumber(ARGV[2]) "
    "if n>m then n=m end if n>0 then redis.call('HINCRBY',KEYS[1],ARGV[1],-n) end return n";

int enr_lease_key(enr_buf *out, const char *prefix, int src, int64_t day_end_ms)
{
    char tail[48];

    if (src < 0 || src >= ENR_SOURCE_COUNT)
        return -1;
    enr_buf_reset(out);
    enr_buf_append(out, prefix, strlen(prefix));
    snprintf(tail, sizeof tail, "q:%s:%" PRId64, enr_config_source_names[src], day_end_ms);
    enr_buf_append(out, tail, strlen(tail));
    return out->oom ? -1 : 0;
}

/* arg: the source (4 bits), the day's key (24) and the units asked (32). */
static uint64_t pack(int src, uint64_t key, uint64_t ask)
{
    return (uint64_t)src | key << 4 | ask << 28;
}

static void took(void *ud, const redisReply *r, uint64_t arg)
{
    lpage *pg = enr_lease_page();
    enr_store *s = ud;
    int src = (int)(arg & 15);
    uint64_t key = arg >> 4 & KEY_MASK, ask = arg >> 28;
    lsrc *l = &pg->src[src];
    long long grant;

    ENR_SB_SET(l->claim_ms, 0);
    if (r == NULL)
        return; /* lost: the ledger may count it, the host does not (see the top) */
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || (grant = r->element[0]->integer) < 0 ||
        (uint64_t)grant > ask) {
        enr_store_stats_of(s)->errors++;
        return;
    }
    enr_store_stats_of(s)->lease_takes++;
    enr_store_stats_of(s)->lease_units += (uint64_t)grant;
    (void)lease_word_move(&l->held, key, grant, VAL_MASK);
    (void)lease_word_move(&l->granted, key, grant, VAL_MASK);
}

void enr_lease_tend(enr_store *s, const enr_lease_day *d, int fresh)
{
    lpage *pg = enr_lease_page();
    lsrc *l;
    uint64_t key = lease_day_key(d->end_ms), lease, held, claim, now = enr_mono_ms();
    char host[24], known[24], ask[24], allowed[24], ttl[16];
    const char *argv[9];
    size_t lens[9];
    enr_buf k = {0};

    if (pg == NULL || !ENR_SB_GET(pg->on) || !enr_store_ready(s) || d->limit == 0 ||
        now < ENR_SB_GET(pg->hold_until_ms))
        return;
    l = &pg->src[d->src];
    lease = enr_lease_units((unsigned)ENR_SB_GET(pg->lease_cfg), d->limit);
    held = lease_word_get(&l->held, key);
    claim = ENR_SB_GET(l->claim_ms);
    if (held >= (lease + 1) / 2 || (claim != 0 && now - claim < ENR_LEASE_CLAIM_MS) ||
        !atomic_compare_exchange_strong_explicit(&l->claim_ms, &claim, now, memory_order_relaxed,
                                                 memory_order_relaxed))
        return;
    if (enr_lease_key(&k, enr_store_prefix(s), d->src, d->end_ms) != 0)
        goto fail;
    snprintf(host, sizeof host, "%016" PRIx64, (uint64_t)ENR_SB_GET(pg->host_id));
    /* What the host holds, told on a connection's first take only: a
     * store started again learns it; told on every take, it would undo
     * a give-back racing with the take. */
    snprintf(known, sizeof known, "%" PRIu64, fresh ? lease_word_get(&l->granted, key) : 0);
    snprintf(ask, sizeof ask, "%" PRIu64, lease - held);
    snprintf(allowed, sizeof allowed, "%" PRIu64, d->allowed);
    snprintf(ttl, sizeof ttl, "%u", ENR_LEASE_TTL_S);
    argv[0] = "EVAL", argv[1] = take_lua, argv[2] = "1", argv[3] = k.data, argv[4] = host;
    argv[5] = known, argv[6] = ask, argv[7] = allowed, argv[8] = ttl;
    for (int i = 0; i < 9; i++)
        lens[i] = i == 3 ? k.len : strlen(argv[i]);
    if (enr_store_send(s, 9, argv, lens, ENR_STORE_REPLY_SMALL, took, s,
                       pack(d->src, key, lease - held)) != 0)
        goto fail;
    enr_store_flush(s);
    enr_buf_free(&k);
    return;
fail:
    ENR_SB_SET(l->claim_ms, 0);
    enr_buf_free(&k);
}

void enr_lease_give_back(enr_store *s, const enr_lease_day *d)
{
    lpage *pg = enr_lease_page();
    lsrc *l;
    uint64_t key = lease_day_key(d->end_ms), cur, n;
    char host[24], num[24];
    const char *argv[6];
    size_t lens[6];
    enr_buf k = {0};
    redisReply *r;

    if (pg == NULL || !ENR_SB_GET(pg->on) || !enr_store_ready(s))
        return;
    l = &pg->src[d->src];
    /* The pool stops: the other workers take no lease meanwhile. */
    ENR_SB_SET(pg->hold_until_ms, enr_mono_ms() + ENR_LEASE_CLAIM_MS);
    /* All of it at once: of several workers stopping, one gives it back. */
    cur = ENR_SB_GET(l->held);
    do {
        n = cur >> VAL_BITS == key ? cur & VAL_MASK : 0;
        if (n == 0)
            return;
    } while (!atomic_compare_exchange_weak_explicit(&l->held, &cur, key << VAL_BITS,
                                                    memory_order_relaxed, memory_order_relaxed));
    if (enr_lease_key(&k, enr_store_prefix(s), d->src, d->end_ms) != 0) {
        enr_buf_free(&k);
        return;
    }
    snprintf(host, sizeof host, "%016" PRIx64, (uint64_t)ENR_SB_GET(pg->host_id));
    snprintf(num, sizeof num, "%" PRIu64, n);
    argv[0] = "EVAL", argv[1] = give_lua, argv[2] = "1", argv[3] = k.data, argv[4] = host;
    argv[5] = num;
    for (int i = 0; i < 6; i++)
        lens[i] = i == 3 ? k.len : strlen(argv[i]);
    r = enr_store_call(s, 6, argv, lens, ENR_STORE_REPLY_SMALL,
                       enr_mono_ms() + ENR_LEASE_GIVE_BACK_MS);
    if (r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer >= 0 &&
        (uint64_t)r->integer <= n) {
        (void)lease_word_move(&l->granted, key, -r->integer, 0);
        enr_store_stats_of(s)->lease_returned += (uint64_t)r->integer;
        enr_log(ENR_LOG_INFO, "lease given back", "source=%s units=%lld",
                enr_config_source_names[d->src], r->integer);
    }
    enr_store_reply_free(r);
    enr_buf_free(&k);
}
