/*
 * poolsnap.c: reads the scoreboard once for every surface (poolsnap.h).
 *
 * Order of reading: accepted, then the workers' states, then completed.
 * A worker marks itself busy before it counts a request accepted, and
 * counts it completed before it is idle again, so a request that starts
 * or ends meanwhile can only make lost = accepted - completed - in flight
 * too small for one reading, never too large; the reader's floor keeps
 * the largest lost it has shown.
 */
#include "ops/poolsnap.h"

#include <stdatomic.h>
#include <string.h>

const enr_pool_counter_def enr_pool_counter_defs[ENR_PC_COUNT] = {
#define ENR_PC_DEF(field, metric, help) {metric, help, offsetof(enr_sb_slot, field)},
    ENR_POOL_COUNTERS(ENR_PC_DEF)
#undef ENR_PC_DEF
};

void enr_pool_snap_take(enr_pool_snap *out, const enr_scoreboard *sb, enr_pool_seen *seen)
{
    const enr_sb_pool *p = &sb->pool;
    const enr_sb_slot *s;

    memset(out, 0, sizeof *out);
    out->n[ENR_PC_accepted] = ENR_SB_TOTAL(sb, accepted);
    atomic_thread_fence(memory_order_acquire);
    for (ENR_SB_EACH_SLOT(sb, i, s)) {
        uint64_t st = ENR_SB_GET(s->state);
        if (!enr_sb_slot_live(s))
            continue;
        if (st < ENR_WS_STATES)
            out->states[st]++;
        for (unsigned k = 0; k < ENR_UP_SOURCES; k++) {
            uint64_t b = ENR_SB_GET(s->up_breaker_state[k]);
            if (b < ENR_BREAKER_STATES)
                out->breaker[k][b]++;
        }
    }
    atomic_thread_fence(memory_order_acquire);
    for (unsigned i = 0; i < ENR_PC_COUNT; i++)
        if (i != ENR_PC_accepted)
            out->n[i] = enr_sb_total(sb, enr_pool_counter_defs[i].off);
    out->s2xx = ENR_SB_TOTAL(sb, status_2xx);
    out->s4xx = ENR_SB_TOTAL(sb, status_4xx);
    out->s5xx = ENR_SB_TOTAL(sb, status_5xx);
    out->up_fds = ENR_SB_TOTAL(sb, up_fds);
    for (unsigned k = 0; k < ENR_UP_SOURCES; k++) {
        uint64_t hits = enr_sb_up_total(sb, k, ENR_UP_ROW_cache_hits);
        uint64_t misses = enr_sb_up_total(sb, k, ENR_UP_ROW_cache_misses);
        out->hit_ratio[k] = hits + misses ? (double)hits / (double)(hits + misses) : 0.0;
    }

    /* In flight is what live workers serve now; what a dead worker was
     * serving never completes and is lost: accepted = completed + in
     * flight + lost. */
    out->in_flight = out->states[ENR_WS_BUSY];
    if (out->n[ENR_PC_accepted] > out->n[ENR_PC_completed] + out->in_flight)
        out->lost = out->n[ENR_PC_accepted] - out->n[ENR_PC_completed] - out->in_flight;

    /* The master samples once a second; a burst shorter than that is
     * still seen when this reader looked during it. */
    out->max_active = ENR_SB_GET(p->max_active);
    out->listen_queue = ENR_SB_GET(p->listen_queue);
    out->listen_queue_max = ENR_SB_GET(p->listen_queue_max);
    if (seen == NULL)
        return;
    if (seen->max_active > out->max_active)
        out->max_active = seen->max_active;
    if (seen->have_queue) {
        out->have_queue = 1;
        out->listen_queue = seen->listen_queue;
        out->listen_queue_limit = seen->listen_queue_limit;
        if (seen->listen_queue > out->listen_queue_max)
            out->listen_queue_max = seen->listen_queue;
    }
    if (seen->listen_queue_max > out->listen_queue_max)
        out->listen_queue_max = seen->listen_queue_max;
    if (out->lost < seen->lost_shown)
        out->lost = seen->lost_shown;
    seen->lost_shown = out->lost;
}
