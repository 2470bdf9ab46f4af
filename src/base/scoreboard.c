/*
 * scoreboard.c: the shared-memory scoreboard (scoreboard.h): creation
 * and the per-request bookkeeping a worker does in its own slot.
 *
 * Invariants: the mapping is created once by the master before the
 * first fork and never unmapped while children live; a worker only
 * writes its own slot's live and cumulative fields; every update is a
 * relaxed atomic, so a reader (master, status process) never blocks a
 * worker and a crashed worker cannot leave a lock held.  Ages are
 * CLOCK_MONOTONIC differences; wall-clock stamps are for display only.
 */
#include "base/scoreboard.h"

#include <string.h>
#include <sys/mman.h>

const unsigned enr_sb_lat_bounds_ms[ENR_SB_LAT_BUCKETS - 1] = {
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000};

enr_scoreboard *enr_sb_create(void)
{
    void *p = mmap(NULL, sizeof(enr_scoreboard), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);

    if (p == MAP_FAILED)
        return NULL;
    /* Anonymous pages are zero: every counter starts at 0, every slot EMPTY. */
    return p;
}

static const char *const worker_state_names[ENR_WS_STATES] = {"empty", "starting", "idle", "busy",
                                                              "exiting"};
static const char *const pool_state_names[ENR_POOL_STATES] = {"starting", "running", "reloading",
                                                              "draining"};
static const char *const exit_reason_names[ENR_EXIT_REASONS] = {
    "none", "max_requests", "rss", "fd", "timeout", "crash", "reload", "stop", "error", "signal",
};

const char *enr_worker_state_name(uint64_t state)
{
    return state < ENR_WS_STATES ? worker_state_names[state] : "unknown";
}

const char *enr_pool_state_name(uint64_t state)
{
    return state < ENR_POOL_STATES ? pool_state_names[state] : "unknown";
}

const char *enr_exit_reason_name(uint64_t reason)
{
    return reason < ENR_EXIT_REASONS ? exit_reason_names[reason] : "unknown";
}

uint32_t enr_sb_nslots(const enr_scoreboard *sb)
{
    return sb->nslots <= ENR_SB_MAX_WORKERS ? sb->nslots : ENR_SB_MAX_WORKERS;
}

uint64_t enr_sb_total(const enr_scoreboard *sb, size_t field_offset)
{
    const enr_sb_slot *s;
    uint64_t sum = 0;

    for (ENR_SB_EACH_SLOT(sb, i, s))
        sum += ENR_SB_GET(*(const enr_sb_u64 *)((const char *)s + field_offset));
    return sum;
}

void enr_sb_store_totals(const enr_scoreboard *sb, uint64_t out[ENR_STORE_NSTATS])
{
    const enr_sb_slot *s;

    for (unsigned r = 0; r < ENR_STORE_NSTATS; r++) {
        int gauge = enr_store_stat_rows[r].type[0] == 'g', largest = r == ENR_STORE_ROW_rtt_us;
        uint64_t v = 0;
        for (ENR_SB_EACH_SLOT(sb, i, s)) {
            uint64_t x = ENR_SB_GET(s->store[r]);
            if (gauge && !enr_sb_slot_live(s))
                continue;
            v = largest ? (x > v ? x : v) : v + x;
        }
        out[r] = v;
    }
}

uint64_t enr_sb_up_total(const enr_scoreboard *sb, unsigned src, unsigned row)
{
    const enr_sb_slot *s;
    uint64_t sum = 0;

    if (src >= ENR_UP_SOURCES || row >= ENR_UP_NCOUNTERS)
        return 0;
    for (ENR_SB_EACH_SLOT(sb, i, s))
        sum += ENR_SB_GET(s->up[src][row]);
    return sum;
}

int enr_sb_slot_live(const enr_sb_slot *s)
{
    return ENR_SB_GET(s->pid) > 0 && ENR_SB_GET(s->state) != ENR_WS_EMPTY;
}

int enr_sb_slot_serving(const enr_sb_slot *s)
{
    uint64_t st = ENR_SB_GET(s->state);
    return ENR_SB_GET(s->pid) > 0 && (st == ENR_WS_IDLE || st == ENR_WS_BUSY);
}

unsigned enr_sb_lat_bucket(uint64_t latency_us)
{
    unsigned i;

    for (i = 0; i < ENR_SB_LAT_BUCKETS - 1; i++)
        if (latency_us <= (uint64_t)enr_sb_lat_bounds_ms[i] * 1000)
            return i;
    return ENR_SB_LAT_BUCKETS - 1;
}

void enr_sb_request_start(enr_sb_slot *s, const char *req_id, uint64_t mono_ms, uint64_t wall_ms)
{
    size_t n = 0;

    /* The id is written before the start time: a reader that sees a
     * non-zero start then usually sees this request's id. */
    if (req_id != NULL) {
        n = strlen(req_id);
        if (n >= ENR_SB_REQID_MAX)
            n = ENR_SB_REQID_MAX - 1;
        memcpy(s->req_id, req_id, n);
    }
    s->req_id[n] = '\0';
    atomic_thread_fence(memory_order_release);
    ENR_SB_SET(s->write_start_mono_ms, 0);
    ENR_SB_SET(s->work_start_mono_ms, 0);
    ENR_SB_SET(s->req_start_ms, wall_ms);
    ENR_SB_SET(s->req_start_mono_ms, mono_ms);
    ENR_SB_SET(s->state, ENR_WS_BUSY);
    /* Busy before accepted: /metrics reads them in the other order. */
    atomic_thread_fence(memory_order_release);
    ENR_SB_ADD(s->accepted, 1);
}

void enr_sb_request_done(enr_sb_slot *s, int status, uint64_t rec_in, uint64_t rec_out,
                         uint64_t rec_degraded, uint64_t latency_us, int slow)
{
    if (status >= 200 && status < 300)
        ENR_SB_ADD(s->status_2xx, 1);
    else if (status >= 400 && status < 500)
        ENR_SB_ADD(s->status_4xx, 1);
    else if (status >= 500)
        ENR_SB_ADD(s->status_5xx, 1);
    if (rec_in) {
        ENR_SB_ADD(s->records_in, rec_in);
        ENR_SB_ADD(s->records_out, rec_out);
        ENR_SB_ADD(s->records_rejected, rec_in >= rec_out ? rec_in - rec_out : 0);
    }
    if (rec_degraded)
        ENR_SB_ADD(s->records_degraded, rec_degraded);
    if (status == ENR_SB_STATUS_CLIENT_GONE) {
        ENR_SB_ADD(s->client_gone, 1);
    } else {
        ENR_SB_ADD(s->latency_us_sum, latency_us);
        ENR_SB_ADD(s->latency[enr_sb_lat_bucket(latency_us)], 1);
    }
    if (slow)
        ENR_SB_ADD(s->slow_requests, 1);
    ENR_SB_ADD(s->served, 1);
    /* completed last: accepted - completed is the number in flight. */
    ENR_SB_SET(s->req_start_mono_ms, 0);
    ENR_SB_SET(s->req_start_ms, 0);
    ENR_SB_SET(s->write_start_mono_ms, 0);
    ENR_SB_SET(s->work_start_mono_ms, 0);
    ENR_SB_ADD(s->completed, 1);
}

uint64_t enr_sb_request_age_ms(const enr_sb_slot *s, uint64_t mono_now_ms)
{
    uint64_t start = ENR_SB_GET(s->req_start_mono_ms);

    /* A stamp taken after the reader's `now` is a request just begun. */
    if (start == 0 || ENR_SB_GET(s->state) != ENR_WS_BUSY || mono_now_ms <= start)
        return 0;
    return mono_now_ms - start;
}

void enr_sb_request_last(enr_sb_slot *s, const enr_sb_last_req *l)
{
    /* Stamp cleared first and set last: a reader that sees a stamp sees
     * this request's fields, or the next one's being written. */
    ENR_SB_SET(s->last_end_ms, 0);
    memcpy(s->last_req_id, s->req_id, sizeof s->last_req_id);
    s->last_req_id[ENR_SB_REQID_MAX - 1] = '\0';
    ENR_SB_SET(s->last_pid, l->pid);
    ENR_SB_SET(s->last_status, (uint64_t)l->status);
    ENR_SB_SET(s->last_duration_us, l->duration_us);
    ENR_SB_SET(s->last_cpu_us, l->cpu_us);
    ENR_SB_SET(s->last_rss_kb, l->rss_kb);
    ENR_SB_SET(s->last_records_in, l->records_in);
    ENR_SB_SET(s->last_records_out, l->records_out);
    atomic_thread_fence(memory_order_release);
    ENR_SB_SET(s->last_end_ms, l->end_wall_ms);
}
