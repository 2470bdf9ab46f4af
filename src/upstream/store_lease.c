/*
 * store_lease.c: the fleet's day's quota, leased from a ledger in the
 * shared store (store_lease.h).
 *
 * Invariants:
 *   - a unit is spent only out of what the host holds (held), or out of
 *     the local share while the store is lost (local, at most one lease
 *     a day); both come out of one CAS on a day-keyed word, so no two
 *     workers spend the same unit;
 *   - granted counts every unit the host had of the day (leases and
 *     local share, less what it gave back): the script raises the host's
 *     field to it first, so the ledger never counts less than the host
 *     spent, whatever the store lost;
 *   - the ledger's side (taking, giving back) is store_ledger.c's; this
 *     file holds no connection, so the budget that calls it needs none.
 */
#include "upstream/store_lease.h"
#include "upstream/store_lease_int.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/random.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/scoreboard.h"

static lpage *g_lease; /* the host's, inherited across fork */

/* ---- the pure parts ---- */

uint64_t enr_lease_grant(uint64_t taken, uint64_t allowed, uint64_t ask)
{
    if (taken >= allowed)
        return 0;
    return allowed - taken < ask ? allowed - taken : ask;
}

uint64_t enr_lease_units(unsigned configured, uint64_t limit)
{
    if (configured > 0)
        return configured;
    return limit / ENR_LEASE_SHARE > 0 ? limit / ENR_LEASE_SHARE : 1;
}

/* ---- the host's page ---- */

lpage *enr_lease_page(void)
{
    return g_lease;
}

void enr_lease_configure(const enr_config *c)
{
    if (g_lease == NULL)
        return;
    ENR_SB_SET(g_lease->on, c->shared_store[0] != '\0');
    ENR_SB_SET(g_lease->lease_cfg, c->budget_lease_units);
}

int enr_lease_open(const enr_config *c)
{
    uint64_t id;

    if (g_lease == NULL) {
        void *m =
            mmap(NULL, sizeof(lpage), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            enr_log(ENR_LOG_ERROR, "lease page mmap failed", "error=%s", enr_log_errno(errno));
            return -1;
        }
        g_lease = m;
        if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
            id = enr_mono_us() * UINT64_C(0x9e3779b97f4a7c15);
        ENR_SB_SET(g_lease->host_id, id);
        /* A grace period from the start: not lost before a worker could connect. */
        ENR_SB_SET(g_lease->seen_ms, enr_mono_ms());
    }
    enr_lease_configure(c);
    return 0;
}

static int lost(void)
{
    return enr_mono_ms() - ENR_SB_GET(g_lease->seen_ms) > ENR_LEASE_LOST_MS;
}

int enr_lease_spend(int src, unsigned units, uint64_t limit, int64_t day_end_ms)
{
    lsrc *l;
    uint64_t key = lease_day_key(day_end_ms);

    if (g_lease == NULL || !ENR_SB_GET(g_lease->on) || src < 0 || src >= ENR_UP_SOURCES)
        return 1;
    l = &g_lease->src[src];
    if (lease_word_move(&l->held, key, -(int64_t)units, 0))
        return 1;
    if (!lost())
        return 0; /* a lease comes in a worker's idle time */
    /* Lost: one lease a day of the host's own, reported when it is back. */
    if (!lease_word_move(&l->local, key, (int64_t)units,
                         enr_lease_units((unsigned)ENR_SB_GET(g_lease->lease_cfg), limit)))
        return 0;
    (void)lease_word_move(&l->granted, key, (int64_t)units, VAL_MASK);
    return 1;
}

void enr_lease_refund(int src, unsigned units, int64_t day_end_ms)
{
    if (g_lease == NULL || !ENR_SB_GET(g_lease->on) || src < 0 || src >= ENR_UP_SOURCES)
        return;
    (void)lease_word_move(&g_lease->src[src].held, lease_day_key(day_end_ms), (int64_t)units,
                          VAL_MASK);
}

uint64_t enr_lease_held(int src, int64_t day_end_ms)
{
    if (g_lease == NULL || !ENR_SB_GET(g_lease->on) || src < 0 || src >= ENR_UP_SOURCES)
        return 0;
    return lease_word_get(&g_lease->src[src].held, lease_day_key(day_end_ms));
}

void enr_lease_seen(void)
{
    if (g_lease != NULL)
        ENR_SB_SET(g_lease->seen_ms, enr_mono_ms());
}
