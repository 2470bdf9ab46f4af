/*
 * health.c: the windowed judgement of whether the pool is healthy, and
 * apart from it whether it is live (can make progress at all).
 *
 * The old worker answered 200 while failing because its probe asked only
 * "is the process there?".  Here the verdict comes from what the pool did
 * over the last health_window_s: the 5xx ratio, the share of degraded
 * records, the p99 latency from the histogram, whether requests wait or
 * run without any completing, whether every breaker is open, whether any
 * worker lives at all.  Liveness asks less: does waiting work move?  It
 * alone gates the watchdog (docs/operations.md, which reason gates what).
 *
 * Invariants: the ring holds at most one sample per ENR_HEALTH_STEP_MS
 * (a faster caller is judged but not recorded), so
 * ENR_HEALTH_SAMPLES covers about a minute whoever calls; the judgement
 * reads only the scoreboard; only enr_health_sample() writes it (in the
 * master, the one process that judges), and only the pool's health and
 * listen_queue(_max) fields; every other process and surface reads that
 * verdict back with enr_health_read(), the one read path (the scoreboard
 * keeps no second copy of it).
 */
#include "ops/health.h"

#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "upstream/api.h"
#include "upstream/breaker.h"
#include "base/upfail.h"
#include "base/sockdiag.h"
#include "base/clock.h"

#define ENR_HEALTH_STEP_MS 900    /* minimum distance between ring samples */
#define ENR_HEALTH_MIN_REQUESTS 5 /* fewer completions: ratios and p99 mean nothing */
#define ENR_HEALTH_MIN_RECORDS 10 /* fewer records out: degraded ratio means nothing */
#define ENR_HEALTH_P99_RANK 0.99

const char *enr_health_reason_name(unsigned bit)
{
    static const char *const names[ENR_HR_COUNT] = {
        "5xx_ratio",    "degraded_ratio", "p99_latency", "stalled",
        "breaker_open", "no_live_worker", "crash_loop",  "key_rejected",
    };
    for (unsigned i = 0; i < ENR_HR_COUNT; i++)
        if (bit == 1u << i)
            return names[i];
    return "unknown";
}

static uint64_t delta(uint64_t now, uint64_t then)
{
    /* Slot counters never go back; if one did (a slot re-mapped), count
     * nothing rather than an absurd wrap-around. */
    return now >= then ? now - then : 0;
}

static void take(enr_health_point *s, const enr_scoreboard *sb, uint64_t queue, uint64_t now_ms)
{
    memset(s, 0, sizeof *s);
    s->t_ms = now_ms;
    s->listen_queue = queue;
    s->accepted = ENR_SB_TOTAL(sb, accepted);
    s->completed = ENR_SB_TOTAL(sb, completed);
    s->s5xx = ENR_SB_TOTAL(sb, status_5xx);
    s->rec_out = ENR_SB_TOTAL(sb, records_out);
    s->rec_degraded = ENR_SB_TOTAL(sb, records_degraded);
    for (unsigned b = 0; b < ENR_SB_LAT_BUCKETS; b++)
        s->latency[b] = ENR_SB_TOTAL(sb, latency[b]);
}

/* Quantile of a bucket histogram by linear interpolation inside the
 * bucket, as Prometheus' histogram_quantile does; the +Inf bucket
 * answers the last finite bound. */
static double quantile_ms(const uint64_t *counts, double q)
{
    uint64_t total = 0, cum = 0;
    double rank;

    for (unsigned b = 0; b < ENR_SB_LAT_BUCKETS; b++)
        total += counts[b];
    if (total == 0)
        return 0;
    rank = q * (double)total;
    for (unsigned b = 0; b < ENR_SB_LAT_BUCKETS; b++) {
        double lo = b == 0 ? 0 : enr_sb_lat_bounds_ms[b - 1];
        if (b == ENR_SB_LAT_BUCKETS - 1)
            return lo;
        if ((double)(cum + counts[b]) >= rank && counts[b] > 0) {
            double hi = enr_sb_lat_bounds_ms[b];
            return lo + (hi - lo) * (rank - (double)cum) / (double)counts[b];
        }
        cum += counts[b];
    }
    return enr_sb_lat_bounds_ms[ENR_SB_LAT_BUCKETS - 2];
}

/* The sample that starts the window: the newest one at least window_ms
 * old, else the oldest there is. */
static const enr_health_point *window_start(const enr_health *h, uint64_t now_ms,
                                            uint64_t window_ms)
{
    const enr_health_point *best = NULL;

    for (unsigned i = 0; i < h->count; i++) {
        unsigned idx = (h->head + ENR_HEALTH_SAMPLES - 1 - i) % ENR_HEALTH_SAMPLES;
        const enr_health_point *s = &h->ring[idx];
        best = s;
        if (delta(now_ms, s->t_ms) >= window_ms)
            break;
    }
    return best;
}

void enr_health_restart(enr_health *h)
{
    h->count = 0;
}

static void push(enr_health *h, const enr_health_point *s)
{
    /* A sample keeps the numbers measured at its own time: a caller faster
     * than ENR_HEALTH_STEP_MS is judged (its fresh numbers against the
     * window's start) but not recorded, so "queued at both ends of the
     * window" means what it says. */
    if (h->count > 0) {
        unsigned last = (h->head + ENR_HEALTH_SAMPLES - 1) % ENR_HEALTH_SAMPLES;
        if (s->t_ms < h->ring[last].t_ms + ENR_HEALTH_STEP_MS)
            return;
    }
    h->ring[h->head] = *s;
    h->head = (h->head + 1) % ENR_HEALTH_SAMPLES;
    if (h->count < ENR_HEALTH_SAMPLES)
        h->count++;
}

/* Every source the worker in sl uses has its breaker open: it can
 * enrich nothing.  One provider's outage alone is not the pool's. */
static int breakers_open(const enr_config *c, const enr_sb_slot *sl)
{
    int any = 0;

    for (int p = 1; p < ENR_SOURCE_PROVIDERS; p++) {
        int s = c->sources[p];
        if (s < 0 || s >= ENR_UP_SOURCES)
            continue;
        if (ENR_SB_GET(sl->up_breaker_state[s]) != ENR_BREAKER_OPEN)
            return 0;
        any = 1;
    }
    return any;
}

static void workers(const enr_config *c, const enr_scoreboard *sb, enr_health_window *w,
                    uint64_t mono_ms)
{
    const enr_sb_slot *sl;

    for (ENR_SB_EACH_SLOT(sb, i, sl)) {
        if (!enr_sb_slot_serving(sl))
            continue;
        w->live_workers++;
        if (breakers_open(c, sl))
            w->breaker_open++;
        if (ENR_SB_GET(sl->state) == ENR_WS_BUSY) {
            uint64_t age = enr_sb_request_age_ms(sl, mono_ms);
            w->busy_workers++;
            if (age > w->oldest_request_ms)
                w->oldest_request_ms = age;
        }
    }
}

static void add_reason(char *out, size_t len, const char *text)
{
    size_t used = strlen(out);
    if (used + 1 >= len)
        return;
    snprintf(out + used, len - used, "%s%s", used ? "; " : "", text);
}

/* Live while the pool can make progress: a serving worker exists, and
 * work that waits (a connection in the listen queue, a request in hand)
 * moves (a worker takes one, or one finishes) within liveness_timeout_ms.
 * Nothing here looks at what the answers were: a provider down or slow
 * makes them degraded, late or 5xx, and the pool still moves. */
static void judge_liveness(enr_liveness *l, const enr_config *c, const enr_health_point *cur,
                           const enr_health_window *w, uint64_t now_ms)
{
    uint64_t limit = c->liveness_timeout_ms;
    int waiting = cur->listen_queue > 0 || w->busy_workers > 0;

    if (!l->started) {
        l->started = 1;
        l->moved_at_ms = l->worker_at_ms = now_ms;
    } else if (cur->accepted != l->accepted || cur->completed != l->completed || !waiting) {
        l->moved_at_ms = now_ms;
    }
    l->accepted = cur->accepted;
    l->completed = cur->completed;
    if (w->live_workers > 0)
        l->worker_at_ms = now_ms;
    l->stuck_ms = delta(now_ms, l->moved_at_ms);
    l->live = 1;
    snprintf(l->reason, sizeof l->reason, "ok");
    if (delta(now_ms, l->worker_at_ms) >= limit) {
        l->live = 0;
        snprintf(l->reason, sizeof l->reason, "no live worker for %" PRIu64 " ms",
                 delta(now_ms, l->worker_at_ms));
    } else if (l->stuck_ms >= limit) {
        l->live = 0;
        snprintf(l->reason, sizeof l->reason,
                 "work waits unmoved for %" PRIu64 " ms (queue %" PRIu64 ", busy %u)", l->stuck_ms,
                 cur->listen_queue, w->busy_workers);
    }
}

/* A key or token an API rejected is the operator's to fix: unhealthy,
 * in the words of the log, until a reload ends the pause (quota.h). */
static void key_rejected(enr_health *h, const enr_scoreboard *sb, char *text, size_t len)
{
    uint64_t now = enr_mono_ms();

    for (unsigned i = 0; i < ENR_UP_SOURCES; i++) {
        const enr_sb_quota *q = &sb->quota[i];
        const enr_api *api = enr_api_get((int)i);
        char t[80], why[24];
        size_t k;
        if (enr_up_fail_of_pause(ENR_SB_GET(q->why)) != ENR_UP_F_AUTH ||
            ENR_SB_GET(q->pause_until_ms) <= now)
            continue;
        for (k = 0; k + 1 < sizeof why && q->reason[k] != '\0'; k++)
            why[k] = q->reason[k] > 0x20 && q->reason[k] < 0x7f ? q->reason[k] : '?';
        why[k] = '\0';
        snprintf(t, sizeof t, "%.12s rejected the %s: %s", api ? api->title : "the API",
                 enr_api_secret_noun((int)i), k ? why : "-");
        h->reasons |= ENR_HR_AUTH;
        add_reason(text, len, t);
    }
}

int enr_health_observe(enr_health *h, const enr_config *c, const enr_scoreboard *sb,
                       uint64_t listen_queue, uint64_t now_ms)
{
    enr_health_point cur, base;
    enr_health_window *w = &h->win;
    uint64_t window_ms = (uint64_t)(c->health_window_s ? c->health_window_s : 1) * 1000u;
    uint64_t lat[ENR_SB_LAT_BUCKETS];
    char text[96];

    take(&cur, sb, listen_queue, now_ms);
    push(h, &cur);
    base = *window_start(h, now_ms, window_ms);

    memset(w, 0, sizeof *w);
    w->span_ms = delta(now_ms, base.t_ms);
    w->requests = delta(cur.completed, base.completed);
    w->s5xx = delta(cur.s5xx, base.s5xx);
    w->records = delta(cur.rec_out, base.rec_out);
    w->degraded = delta(cur.rec_degraded, base.rec_degraded);
    w->listen_queue = listen_queue;
    for (unsigned b = 0; b < ENR_SB_LAT_BUCKETS; b++)
        lat[b] = delta(cur.latency[b], base.latency[b]);
    w->ratio_5xx = w->requests ? (double)w->s5xx / (double)w->requests : 0;
    w->ratio_degraded = w->records ? (double)w->degraded / (double)w->records : 0;
    w->p99_ms = quantile_ms(lat, ENR_HEALTH_P99_RANK);
    workers(c, sb, w, enr_mono_ms()); /* the workers' stamps are CLOCK_MONOTONIC */

    h->reasons = 0;
    text[0] = '\0';
    if (w->live_workers == 0) {
        h->reasons |= ENR_HR_NO_WORKER;
        add_reason(text, sizeof text, "no live worker");
    }
    if (ENR_SB_GET(sb->pool.crashloop)) {
        h->reasons |= ENR_HR_CRASHLOOP;
        add_reason(text, sizeof text, "crash-loop back-off");
    }
    if (w->requests >= ENR_HEALTH_MIN_REQUESTS && w->ratio_5xx > c->health_max_5xx_ratio) {
        char t[48];
        snprintf(t, sizeof t, "5xx ratio %.2f > %.2f", w->ratio_5xx, c->health_max_5xx_ratio);
        h->reasons |= ENR_HR_5XX;
        add_reason(text, sizeof text, t);
    }
    if (w->records >= ENR_HEALTH_MIN_RECORDS && w->ratio_degraded > c->health_max_degraded_ratio) {
        char t[48];
        snprintf(t, sizeof t, "degraded ratio %.2f > %.2f", w->ratio_degraded,
                 c->health_max_degraded_ratio);
        h->reasons |= ENR_HR_DEGRADED;
        add_reason(text, sizeof text, t);
    }
    if (w->requests >= ENR_HEALTH_MIN_REQUESTS && c->health_max_p99_ms > 0 &&
        w->p99_ms > (double)c->health_max_p99_ms) {
        char t[48];
        snprintf(t, sizeof t, "p99 %.0fms > %ums", w->p99_ms, c->health_max_p99_ms);
        h->reasons |= ENR_HR_P99;
        add_reason(text, sizeof text, t);
    }
    /* Work waiting for the whole window while nothing completes: either a
     * request has run that long, or the queue was non-empty at both ends. */
    if (w->requests == 0 && w->span_ms >= window_ms &&
        (w->oldest_request_ms >= window_ms || (listen_queue > 0 && base.listen_queue > 0))) {
        h->reasons |= ENR_HR_STALLED;
        add_reason(text, sizeof text, "requests queue without completing");
    }
    if (enr_config_enriches(c) && w->live_workers > 0 && w->breaker_open == w->live_workers) {
        h->reasons |= ENR_HR_BREAKER;
        add_reason(text, sizeof text, "upstream breaker open in all workers");
    }
    key_rejected(h, sb, text, sizeof text);
    h->healthy = h->reasons == 0;
    snprintf(h->reason, sizeof h->reason, "%s", h->healthy ? "ok" : text);
    judge_liveness(&h->liveness, c, &cur, w, now_ms);
    return h->healthy;
}

static uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double bitsd(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* Single writer (the master): bump seq to odd, write, bump to even. */
static void publish(const enr_health *h, enr_sb_health *p, uint64_t now_ms)
{
    const enr_health_window *w = &h->win;
    uint64_t seq = ENR_SB_GET(p->seq);

    ENR_SB_SET(p->seq, seq + 1);
    atomic_thread_fence(memory_order_release);
    ENR_SB_SET(p->at_mono_ms, now_ms);
    ENR_SB_SET(p->healthy, (uint64_t)h->healthy);
    ENR_SB_SET(p->reasons, h->reasons);
    ENR_SB_SET(p->span_ms, w->span_ms);
    ENR_SB_SET(p->requests, w->requests);
    ENR_SB_SET(p->s5xx, w->s5xx);
    ENR_SB_SET(p->records, w->records);
    ENR_SB_SET(p->degraded, w->degraded);
    ENR_SB_SET(p->ratio_5xx, dbits(w->ratio_5xx));
    ENR_SB_SET(p->ratio_degraded, dbits(w->ratio_degraded));
    ENR_SB_SET(p->p99_ms, dbits(w->p99_ms));
    ENR_SB_SET(p->live_workers, w->live_workers);
    ENR_SB_SET(p->busy_workers, w->busy_workers);
    ENR_SB_SET(p->breaker_open, w->breaker_open);
    ENR_SB_SET(p->listen_queue, w->listen_queue);
    ENR_SB_SET(p->oldest_request_ms, w->oldest_request_ms);
    snprintf(p->reason, sizeof p->reason, "%s", h->reason);
    ENR_SB_SET(p->live, (uint64_t)h->liveness.live);
    ENR_SB_SET(p->stuck_ms, h->liveness.stuck_ms);
    snprintf(p->live_reason, sizeof p->live_reason, "%s", h->liveness.reason);
    atomic_thread_fence(memory_order_release);
    ENR_SB_SET(p->seq, seq + 2);
}

/* A key refused since the master's last verdict: said at once (the
 * shared pause is set by the worker that heard it), not a tick later. */
static void key_rejected_now(enr_health *h, const enr_scoreboard *sb)
{
    char text[sizeof h->reason];
    unsigned before = h->reasons;

    if (h->reasons & ENR_HR_AUTH)
        return;
    snprintf(text, sizeof text, "%s", h->healthy ? "" : h->reason);
    key_rejected(h, sb, text, sizeof text);
    if (h->reasons == before)
        return;
    h->healthy = 0;
    memcpy(h->reason, text, sizeof h->reason);
}

int enr_health_read(enr_health *h, const enr_scoreboard *sb)
{
    const enr_sb_health *p = &sb->pool.health;
    enr_health_window *w = &h->win;

    memset(h, 0, sizeof *h);
    /* The master writes for microseconds once a tick: a few tries always
     * find a quiet moment; a reader never waits on it. */
    for (int tries = 0; tries < 100; tries++) {
        uint64_t s1 = atomic_load_explicit(&p->seq, memory_order_acquire), s2;
        if (s1 == 0)
            break;
        if (s1 & 1) {
            sched_yield();
            continue;
        }
        h->healthy = ENR_SB_GET(p->healthy) != 0;
        h->reasons = (unsigned)ENR_SB_GET(p->reasons);
        w->span_ms = ENR_SB_GET(p->span_ms);
        w->requests = ENR_SB_GET(p->requests);
        w->s5xx = ENR_SB_GET(p->s5xx);
        w->records = ENR_SB_GET(p->records);
        w->degraded = ENR_SB_GET(p->degraded);
        w->ratio_5xx = bitsd(ENR_SB_GET(p->ratio_5xx));
        w->ratio_degraded = bitsd(ENR_SB_GET(p->ratio_degraded));
        w->p99_ms = bitsd(ENR_SB_GET(p->p99_ms));
        w->live_workers = (unsigned)ENR_SB_GET(p->live_workers);
        w->busy_workers = (unsigned)ENR_SB_GET(p->busy_workers);
        w->breaker_open = (unsigned)ENR_SB_GET(p->breaker_open);
        w->listen_queue = ENR_SB_GET(p->listen_queue);
        w->oldest_request_ms = ENR_SB_GET(p->oldest_request_ms);
        memcpy(h->reason, p->reason, sizeof h->reason);
        h->reason[sizeof h->reason - 1] = '\0';
        h->liveness.live = ENR_SB_GET(p->live) != 0;
        h->liveness.stuck_ms = ENR_SB_GET(p->stuck_ms);
        memcpy(h->liveness.reason, p->live_reason, sizeof h->liveness.reason);
        h->liveness.reason[sizeof h->liveness.reason - 1] = '\0';
        atomic_thread_fence(memory_order_acquire);
        s2 = ENR_SB_GET(p->seq);
        if (s1 == s2) {
            h->published = 1;
            key_rejected_now(h, sb);
            return 0;
        }
        sched_yield();
    }
    memset(h, 0, sizeof *h);
    snprintf(h->reason, sizeof h->reason, "no verdict yet");
    return -1;
}

int enr_health_sample(enr_health *h, const enr_config *c, enr_scoreboard *sb, int listen_fd,
                      uint64_t now_ms)
{
    unsigned queued = 0, limit = 0;

    /* A failed measurement keeps the last depth: the queue is a gauge and
     * the verdict must not flap on a transient netlink error. */
    if (listen_fd >= 0 && enr_sockdiag_listen_queue(listen_fd, &queued, &limit) == 0) {
        ENR_SB_SET(sb->pool.listen_queue, queued);
        if (queued > ENR_SB_GET(sb->pool.listen_queue_max))
            ENR_SB_SET(sb->pool.listen_queue_max, queued);
    }
    enr_health_observe(h, c, sb, ENR_SB_GET(sb->pool.listen_queue), now_ms);
    h->published = 1;
    publish(h, &sb->pool.health, now_ms);
    return h->healthy;
}
