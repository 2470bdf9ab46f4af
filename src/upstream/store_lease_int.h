/*
 * store_lease_int.h: the host's lease page (store_lease.h), shared by the
 * two files of the lease: store_lease.c (the page, what a call spends)
 * and store_ledger.c (the ledger in the store: taking and giving back).
 * Nothing else includes it.
 *
 * Each of the day's figures is one 64-bit word: the day's key (its end,
 * the low 24 bits) on top, the value in the low 40 bits; a word of
 * another day reads 0, so a new day needs no reset.
 */
#ifndef ENR_STORE_LEASE_INT_H
#define ENR_STORE_LEASE_INT_H

#include <stdint.h>

#include "base/scoreboard.h"

#define VAL_BITS 40
#define VAL_MASK ((UINT64_C(1) << VAL_BITS) - 1)
#define KEY_MASK ((UINT64_C(1) << (64 - VAL_BITS)) - 1)

typedef struct lsrc {
    enr_sb_u64 held, granted, local; /* day key | value */
    enr_sb_u64 claim_ms;             /* a refill in flight since (monotonic); 0 none */
} lsrc;

typedef struct lpage {
    enr_sb_u64 on, lease_cfg, seen_ms, host_id;
    enr_sb_u64 hold_until_ms; /* after a give-back: no lease taken before (monotonic) */
    lsrc src[ENR_UP_SOURCES];
} lpage;

/* The host's page; NULL before enr_lease_open. */
lpage *enr_lease_page(void);

static inline uint64_t lease_day_key(int64_t day_end_ms)
{
    return (uint64_t)day_end_ms & KEY_MASK;
}

static inline uint64_t lease_word_get(enr_sb_u64 *w, uint64_t key)
{
    uint64_t cur = ENR_SB_GET(*w);

    return cur >> VAL_BITS == key ? cur & VAL_MASK : 0;
}

/* Adds delta (negative: takes) to day key's value: only while the result
 * stays within [0, cap]; 1 when done. */
static inline int lease_word_move(enr_sb_u64 *w, uint64_t key, int64_t delta, uint64_t cap)
{
    uint64_t cur = ENR_SB_GET(*w), v, next;

    do {
        v = cur >> VAL_BITS == key ? cur & VAL_MASK : 0;
        if ((delta < 0 && v < (uint64_t)-delta) ||
            (delta > 0 && (v + (uint64_t)delta > cap || v + (uint64_t)delta > VAL_MASK)))
            return 0;
        next = key << VAL_BITS | (uint64_t)((int64_t)v + delta);
    } while (!atomic_compare_exchange_weak_explicit(w, &cur, next, memory_order_relaxed,
                                                    memory_order_relaxed));
    return 1;
}

#endif
