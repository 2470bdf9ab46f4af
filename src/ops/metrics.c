/*
 * metrics.c: renders the scoreboard as Prometheus text exposition 0.0.4.
 *
 * Invariants: every family is written once, HELP and TYPE first, then
 * all its samples, so the output parses whatever the pool looks like;
 * names are enrichd_<what>_<unit>[_total]; pool counters are sums of the
 * slots' cumulative counters, so they never go down while the master
 * lives (the upstream client's counters are per process and restart at
 * zero with each worker: Prometheus treats the drop as a reset).
 * Labels carry only bounded values (slot numbers, states, reasons).
 */
#include "ops/metrics.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fcgi/fcgi_guard.h"
#include "engine/contract.h"
#include "upstream/api.h"
#include "upstream/breaker.h"
#include "upstream/budget.h"
#include "base/upfail.h"
#include "upstream/store_lease.h"
#include "upstream/quota.h"
#include "base/clock.h"

static void family(enr_buf *b, const char *name, const char *type, const char *help)
{
    enr_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample_u(enr_buf *b, const char *name, const char *labels, uint64_t v)
{
    enr_buf_printf(b, "%s%s %" PRIu64 "\n", name, labels ? labels : "", v);
}

static void sample_d(enr_buf *b, const char *name, const char *labels, double v)
{
    if (isnan(v))
        enr_buf_printf(b, "%s%s NaN\n", name, labels ? labels : "");
    else
        enr_buf_printf(b, "%s%s %.15g\n", name, labels ? labels : "", v);
}

static void one_u(enr_buf *b, const char *name, const char *type, const char *help, uint64_t v)
{
    family(b, name, type, help);
    sample_u(b, name, NULL, v);
}

static void one_d(enr_buf *b, const char *name, const char *type, const char *help, double v)
{
    family(b, name, type, help);
    sample_d(b, name, NULL, v);
}

static void render_pool(enr_buf *b, const enr_scoreboard *sb, const enr_pool_snap *ps)
{
    const enr_sb_pool *p = &sb->pool;
    uint64_t pstate = ENR_SB_GET(p->state);
    char l[64];

    /* The version serving, for rollouts: count by (version). */
    family(b, "enrichd_build_info", "gauge", "Always 1; the labels say what is running.");
    sample_u(b, "enrichd_build_info", "{version=\"" ENR_VERSION "\"}", 1);
    one_d(b, "enrichd_start_time_seconds", "gauge",
          "When the master started, seconds since the epoch.",
          (double)ENR_SB_GET(p->start_ms) / 1000.0);
    one_u(b, "enrichd_config_generation", "gauge",
          "Configuration generation, bumped by each reload.", ENR_SB_GET(p->generation));
    family(b, "enrichd_pool_state", "gauge", "1 for the pool's current state.");
    for (unsigned i = 0; i < ENR_POOL_STATES; i++) {
        snprintf(l, sizeof l, "{state=\"%s\"}", enr_pool_state_name(i));
        sample_u(b, "enrichd_pool_state", l, pstate == i);
    }
    one_u(b, "enrichd_workers_configured", "gauge", "Configured number of workers.",
          ENR_SB_GET(p->workers));
    family(b, "enrichd_workers", "gauge", "Worker processes by state.");
    for (unsigned i = ENR_WS_EMPTY + 1; i < ENR_WS_STATES; i++) {
        snprintf(l, sizeof l, "{state=\"%s\"}", enr_worker_state_name(i));
        sample_u(b, "enrichd_workers", l, ps->states[i]);
    }
    one_u(b, "enrichd_workers_max_active", "gauge", "Most workers busy at once since start.",
          ps->max_active);
    one_u(b, "enrichd_listen_queue_connections", "gauge",
          "Connections waiting in the workers' listen queue.", ps->listen_queue);
    one_u(b, "enrichd_listen_queue_max_connections", "gauge",
          "Deepest listen queue seen since start.", ps->listen_queue_max);
    if (ps->have_queue)
        one_u(b, "enrichd_listen_queue_limit_connections", "gauge",
              "Backlog limit of the workers' listening socket.", ps->listen_queue_limit);

    for (unsigned i = 0; i < ENR_PC_COUNT; i++)
        one_u(b, enr_pool_counter_defs[i].metric, "counter", enr_pool_counter_defs[i].help,
              ps->n[i]);
    family(b, "enrichd_fastcgi_rejected_reason_total", "counter",
           "FastCGI connections closed unserved, by why (the peer is cut off).");
    for (int i = 0; i < ENR_FCGI_REJECT_REASONS; i++) {
        snprintf(l, sizeof l, "{reason=\"%s\"}", enr_fcgi_reject_name(i));
        sample_u(b, "enrichd_fastcgi_rejected_reason_total", l,
                 enr_sb_total(sb, offsetof(enr_sb_slot, fcgi_rejected_by) +
                                      (size_t)i * sizeof(enr_sb_u64)));
    }
    one_u(b, "enrichd_requests_in_flight", "gauge", "Requests being served by live workers.",
          ps->in_flight);
    one_u(b, "enrichd_requests_lost_total", "counter",
          "Requests accepted by workers that died before answering them.", ps->lost);

    family(b, "enrichd_responses_total", "counter", "Responses by status class.");
    sample_u(b, "enrichd_responses_total", "{code=\"2xx\"}", ps->s2xx);
    sample_u(b, "enrichd_responses_total", "{code=\"4xx\"}", ps->s4xx);
    sample_u(b, "enrichd_responses_total", "{code=\"5xx\"}", ps->s5xx);

    family(b, "enrichd_worker_exits_total", "counter", "Worker processes that ended, by reason.");
    for (unsigned r = 1; r < ENR_EXIT_REASONS; r++) {
        snprintf(l, sizeof l, "{reason=\"%s\"}", enr_exit_reason_name(r));
        sample_u(b, "enrichd_worker_exits_total", l, ENR_SB_GET(p->exits[r]));
    }
    one_u(b, "enrichd_crash_loop", "gauge", "1 while the crash-loop back-off holds forks.",
          ENR_SB_GET(p->crashloop) != 0);
    one_d(b, "enrichd_crash_loop_backoff_seconds", "gauge", "Current crash-loop back-off delay.",
          (double)ENR_SB_GET(p->backoff_ms) / 1000.0);
    one_u(b, "enrichd_reload_pending", "gauge",
          "1 while a new configuration waits for a worker of it to start (the old one serves).",
          ENR_SB_GET(p->reload_pending) != 0);
    one_u(b, "enrichd_reload_failures_total", "counter",
          "Reloads refused (invalid file) or whose new workers did not start (the old "
          "configuration kept serving).",
          ENR_SB_GET(p->reload_failures));
}

static void render_latency(enr_buf *b, const enr_scoreboard *sb)
{
    uint64_t cum = 0;
    char l[64];
    const char *n = "enrichd_request_duration_seconds";

    family(b, n, "histogram",
           "Time from nginx's hand-off (ENRICHD_QUEUED_AT, else the accept) to the end of the "
           "response; callers gone are not in it.");
    for (unsigned k = 0; k < ENR_SB_LAT_BUCKETS; k++) {
        cum += enr_sb_total(sb, offsetof(enr_sb_slot, latency) + k * sizeof(enr_sb_u64));
        if (k == ENR_SB_LAT_BUCKETS - 1)
            snprintf(l, sizeof l, "{le=\"+Inf\"}");
        else
            snprintf(l, sizeof l, "{le=\"%g\"}", enr_sb_lat_bounds_ms[k] / 1000.0);
        sample_u(b, "enrichd_request_duration_seconds_bucket", l, cum);
    }
    sample_d(b, "enrichd_request_duration_seconds_sum", NULL,
             (double)enr_sb_total(sb, offsetof(enr_sb_slot, latency_us_sum)) / 1e6);
    sample_u(b, "enrichd_request_duration_seconds_count", NULL, cum);
}

/* The cache is one per host (cache.h): its gauges are the host's, not
 * sums over the slots. */
static void render_cache(enr_buf *b, const enr_status_view *x)
{
    enr_cache_stats st;

    enr_cache_stats_of(x ? x->cache : NULL, &st);
#define ENR_CS_METRIC(f, metric, type, help) one_u(b, metric, type, help, st.f);
    ENR_CACHE_STATS(ENR_CS_METRIC)
#undef ENR_CS_METRIC
}

/* A source whose series carry no source label (api.h: the aggregator's,
 * the names dashboards knew before there were sources). */
static int unlabelled(unsigned src)
{
    return enr_api_get((int)src)->unlabelled;
}

/* The API sources in use (the unlabelled samples are always there). */
static int source_shown(const enr_config *c, unsigned src)
{
    if (unlabelled(src))
        return 1;
    for (int p = ENR_PROV_YT; c != NULL && p < ENR_SOURCE_PROVIDERS; p++)
        if (c->sources[p] == (int)src)
            return 1;
    return c == NULL;
}

/* One sample of counter row r for every source shown: the aggregator's
 * without a source label (unlabelled), the others with source="youtube",
 * ... */
static void counter_samples(enr_buf *b, const enr_scoreboard *sb, const enr_config *c, unsigned r)
{
    const enr_up_counter_row *row = &enr_up_counter_rows[r];
    char l[96];

    for (unsigned src = 0; src < ENR_UP_SOURCES; src++) {
        if (!source_shown(c, src))
            continue;
        if (row->kind[0] && unlabelled(src))
            snprintf(l, sizeof l, "{kind=\"%s\"}", row->kind);
        else if (row->kind[0])
            snprintf(l, sizeof l, "{kind=\"%s\",source=\"%s\"}", row->kind,
                     enr_config_source_names[src]);
        else if (!unlabelled(src))
            snprintf(l, sizeof l, "{source=\"%s\"}", enr_config_source_names[src]);
        else
            l[0] = '\0';
        sample_u(b, row->metric, l, enr_sb_up_total(sb, src, r));
    }
}

/* The counters of the table (base/upcounters.h), a family each, the
 * failure kinds one family with a kind label. */
static void render_up_counters(enr_buf *b, const enr_scoreboard *sb, const enr_config *c)
{
    int fails_done = 0;

    for (unsigned r = 0; r < ENR_UP_NCOUNTERS; r++) {
        const enr_up_counter_row *row = &enr_up_counter_rows[r];
        if (row->kind[0]) {
            if (fails_done)
                continue;
            fails_done = 1;
            family(b, ENR_UP_FAIL_METRIC, "counter", ENR_UP_FAIL_HELP);
            for (unsigned k = r; k < ENR_UP_NCOUNTERS; k++)
                if (enr_up_counter_rows[k].kind[0])
                    counter_samples(b, sb, c, k);
            continue;
        }
        family(b, row->metric, "counter", row->help);
        counter_samples(b, sb, c, r);
    }
}

static void render_upstream(enr_buf *b, const enr_scoreboard *sb, const enr_config *c,
                            const enr_pool_snap *ps)
{
    uint64_t now = enr_mono_ms();
    char l[96], words[64], help[160];

    render_up_counters(b, sb, c);
    family(b, "enrichd_upstream_breakers", "gauge",
           "Live workers whose upstream breaker is in each state.");
    for (unsigned src = 0; src < ENR_UP_SOURCES; src++)
        for (unsigned k = 0; source_shown(c, src) && k < ENR_BREAKER_STATES; k++) {
            if (unlabelled(src))
                snprintf(l, sizeof l, "{state=\"%s\"}", enr_breaker_state_name(k));
            else
                snprintf(l, sizeof l, "{state=\"%s\",source=\"%s\"}", enr_breaker_state_name(k),
                         enr_config_source_names[src]);
            sample_u(b, "enrichd_upstream_breakers", l, ps->breaker[src][k]);
        }
    for (unsigned src = 0; src < ENR_UP_SOURCES; src++)
        if (unlabelled(src)) /* the one gauge, as before the sources */
            one_d(b, "enrichd_upstream_cache_hit_ratio", "gauge",
                  "Cache hits over lookups (current workers).", ps->hit_ratio[src]);
    one_u(b, "enrichd_upstream_open_fds", "gauge", "Descriptors held by the upstream clients.",
          ps->up_fds);
    family(b, "enrichd_upstream_pause_seconds", "gauge",
           "Time left of the provider's pause (Retry-After, a spent quota, a refused key): no "
           "call before it ends.");
    for (unsigned src = 0; src < ENR_UP_SOURCES; src++) {
        uint64_t until = ENR_SB_GET(sb->quota[src].pause_until_ms);
        if (!source_shown(c, src))
            continue;
        snprintf(l, sizeof l, "{source=\"%s\"}", enr_config_source_names[src]);
        sample_d(b, "enrichd_upstream_pause_seconds", unlabelled(src) ? NULL : l,
                 until > now ? (double)(until - now) / 1000.0 : 0.0);
    }
    enr_up_pause_words(words, sizeof words);
    snprintf(help, sizeof help, "1 while the source's pause holds, labelled with why (%s).", words);
    family(b, "enrichd_upstream_paused", "gauge", help);
    for (unsigned src = 0; src < ENR_UP_SOURCES; src++) {
        uint64_t until = ENR_SB_GET(sb->quota[src].pause_until_ms);
        if (!source_shown(c, src))
            continue;
        snprintf(l, sizeof l, "{source=\"%s\",why=\"%s\"}", enr_config_source_names[src],
                 enr_up_pause_name(until > now ? ENR_SB_GET(sb->quota[src].why) : 0));
        sample_u(b, "enrichd_upstream_paused", l, until > now);
    }
    family(b, "enrichd_upstream_pauses_total", "counter",
           "Pauses the provider asked for (429 or 503 with Retry-After, a spent quota, a "
           "refused key), begun or lengthened.");
    for (unsigned src = 0; src < ENR_UP_SOURCES; src++) {
        if (!source_shown(c, src))
            continue;
        snprintf(l, sizeof l, "{source=\"%s\"}", enr_config_source_names[src]);
        sample_u(b, "enrichd_upstream_pauses_total", unlabelled(src) ? NULL : l,
                 ENR_SB_GET(sb->quota[src].pauses));
    }
}

/* The day's budget of each source that has one (budget.h): a gauge per
 * row of its table, from the host's page. */
static void render_budget(enr_buf *b, const enr_config *c)
{
    enr_budget_state st[ENR_UP_SOURCES];
    enr_budget_now now = enr_budget_clocks();
    char l[64];

    /* The families always (names a rule reads stay known), samples for
     * the sources that have a budget. */
    for (unsigned src = 0; src < ENR_UP_SOURCES; src++)
        if (!source_shown(c, src) || !enr_budget_view((int)src, now, &st[src]))
            st[src].on = 0;
    for (unsigned r = 0; r < ENR_BUDGET_NFIELDS; r++) {
        family(b, enr_budget_rows[r].metric, "gauge", enr_budget_rows[r].help);
        for (unsigned src = 0; src < ENR_UP_SOURCES; src++) {
            if (!source_shown(c, src) || !st[src].on)
                continue;
            snprintf(l, sizeof l, "{source=\"%s\"}", enr_config_source_names[src]);
            sample_d(b, enr_budget_rows[r].metric, l, st[src].v[r]);
        }
    }
}

/* The shared store's rows (storestats.h), as the scoreboard totals them
 * (enr_sb_store_totals). */
static void render_store(enr_buf *b, const enr_scoreboard *sb)
{
    uint64_t v[ENR_STORE_NSTATS];

    enr_sb_store_totals(sb, v);
    for (unsigned r = 0; r < ENR_STORE_NSTATS; r++) {
        const enr_store_stat_row *row = &enr_store_stat_rows[r];
        if (r == ENR_STORE_ROW_rtt_us) /* kept in µs, shown in the base unit */
            one_d(b, row->metric, row->type, row->help, (double)v[r] / 1e6);
        else
            one_u(b, row->metric, row->type, row->help, v[r]);
    }
    family(b, "enrichd_store_lease_held_units", "gauge",
           "Units of the fleet's day the host holds in its lease, not spent yet.");
    for (unsigned src = 0; src < ENR_UP_SOURCES; src++) {
        enr_budget_state st;
        char l[64];
        if (!enr_budget_view((int)src, enr_budget_clocks(), &st))
            continue;
        snprintf(l, sizeof l, "{source=\"%s\"}", enr_config_source_names[src]);
        sample_u(b, "enrichd_store_lease_held_units", l, enr_lease_held((int)src, st.day_end_ms));
    }
}

static void render_health(enr_buf *b, const enr_scoreboard *sb, const enr_status_view *x)
{
    const enr_health *h = x ? x->health : NULL;
    enr_health read;
    char l[64];

    if (h == NULL) /* the caller read none: the verdict alone, read the one way */
        enr_health_read(&read, sb);
    one_u(b, "enrichd_healthy", "gauge", "1 when the windowed health judgement passes.",
          (uint64_t)((h ? h : &read)->healthy != 0));
    if (h == NULL)
        return;
    one_u(b, "enrichd_live", "gauge",
          "1 while the pool can make progress: the systemd watchdog is fed on it alone.",
          h->liveness.live != 0);
    one_d(b, "enrichd_stuck_seconds", "gauge",
          "How long work has waited with no request taken or finished.",
          (double)h->liveness.stuck_ms / 1000.0);
    family(b, "enrichd_unhealthy", "gauge", "1 for each reason the health judgement fails.");
    for (unsigned i = 0; i < ENR_HR_COUNT; i++) {
        snprintf(l, sizeof l, "{reason=\"%s\"}", enr_health_reason_name(1u << i));
        sample_u(b, "enrichd_unhealthy", l, (h->reasons & (1u << i)) != 0);
    }
    one_d(b, "enrichd_health_window_5xx_ratio", "gauge",
          "5xx responses over responses in the health window.", h->win.ratio_5xx);
    one_d(b, "enrichd_health_window_degraded_ratio", "gauge",
          "Degraded records over records out in the health window.", h->win.ratio_degraded);
    one_d(b, "enrichd_health_window_p99_seconds", "gauge",
          "p99 request duration in the health window.", h->win.p99_ms / 1000.0);
}

static void render_workers(enr_buf *b, const enr_scoreboard *sb, const enr_status_view *x)
{
    static const struct {
        const char *kind;
        size_t off;
    } kinds[] = {
        {"file", offsetof(enr_fd_kinds, files)},
        {"pipe", offsetof(enr_fd_kinds, pipes)},
        {"unix", offsetof(enr_fd_kinds, unix_socks)},
        {"tcp_close_wait", offsetof(enr_fd_kinds, close_wait)},
        {"other_socket", offsetof(enr_fd_kinds, other_socks)},
        {"other", offsetof(enr_fd_kinds, other)},
    };
    uint64_t now = enr_mono_ms();
    char l[96];
    uint32_t n = enr_sb_nslots(sb);

#define PER_SLOT(name, type, help, expr)                                                           \
    do {                                                                                           \
        family(b, name, type, help);                                                               \
        for (uint32_t i = 0; i < n; i++) {                                                         \
            const enr_sb_slot *sl = &sb->slot[i];                                                  \
            (void)sl;                                                                              \
            snprintf(l, sizeof l, "{slot=\"%u\"}", (unsigned)i);                                   \
            sample_u(b, name, l, (expr));                                                          \
        }                                                                                          \
    } while (0)

    PER_SLOT("enrichd_worker_up", "gauge", "1 while a worker process occupies the slot.",
             enr_sb_slot_live(sl) ? 1u : 0u);
    PER_SLOT("enrichd_worker_busy", "gauge", "1 while the slot's worker serves a request.",
             enr_sb_slot_live(sl) && ENR_SB_GET(sl->state) == ENR_WS_BUSY);
    PER_SLOT("enrichd_worker_requests_total", "counter",
             "Requests completed by the slot's workers.", ENR_SB_GET(sl->completed));
    PER_SLOT("enrichd_worker_restarts_total", "counter",
             "Worker processes started again in the slot.", ENR_SB_GET(sl->restarts));
    PER_SLOT("enrichd_worker_resident_memory_bytes", "gauge", "RSS of the slot's worker.",
             enr_sb_slot_live(sl) ? ENR_SB_GET(sl->rss_kb) * 1024u : 0u);
    PER_SLOT("enrichd_worker_open_fds", "gauge", "Open descriptors of the slot's worker.",
             enr_sb_slot_live(sl) ? ENR_SB_GET(sl->fds) : 0u);
    family(b, "enrichd_worker_current_request_age_seconds", "gauge",
           "Age of the request the slot's worker is serving, 0 when idle.");
    for (uint32_t i = 0; i < n; i++) {
        uint64_t age = enr_sb_request_age_ms(&sb->slot[i], now);
        snprintf(l, sizeof l, "{slot=\"%u\"}", (unsigned)i);
        sample_d(b, "enrichd_worker_current_request_age_seconds", l,
                 enr_sb_slot_live(&sb->slot[i]) ? (double)age / 1000.0 : 0.0);
    }
#undef PER_SLOT
    if (x == NULL || x->fds == NULL)
        return;
    family(b, "enrichd_worker_fds", "gauge", "Descriptors of the slot's worker by kind.");
    for (uint32_t i = 0; i < n; i++) {
        const enr_fd_kinds *k = &x->fds[i];
        if (x->fds_ok && !x->fds_ok[i])
            continue;
        for (size_t j = 0; j < sizeof kinds / sizeof kinds[0]; j++) {
            snprintf(l, sizeof l, "{slot=\"%u\",kind=\"%s\"}", (unsigned)i, kinds[j].kind);
            sample_u(b, "enrichd_worker_fds", l,
                     *(const unsigned *)((const char *)k + kinds[j].off));
        }
        /* TCP other than CLOSE_WAIT, so the kinds add up to the total. */
        snprintf(l, sizeof l, "{slot=\"%u\",kind=\"tcp\"}", (unsigned)i);
        sample_u(b, "enrichd_worker_fds", l, k->tcp_socks - k->close_wait);
    }
}

void enr_metrics_render(enr_buf *out, const enr_status_view *v)
{
    enr_pool_snap own;
    const enr_pool_snap *ps = v->pool;

    if (ps == NULL) {
        enr_pool_snap_take(&own, v->sb, NULL);
        ps = &own;
    }
    render_pool(out, v->sb, ps);
    render_latency(out, v->sb);
    render_upstream(out, v->sb, v->c, ps);
    render_budget(out, v->c);
    render_store(out, v->sb);
    render_cache(out, v);
    render_health(out, v->sb, v);
    render_workers(out, v->sb, v);
}
