/*
 * statusdoc.c: builds the /status and /healthz documents (their text
 * rendering is statustext.c's).
 *
 * The top-level keys of /status begin with php-fpm's status fields, with
 * their exact names ("accepted conn", "listen queue", ...), so tools that
 * read php-fpm's page read this one; what php-fpm lacks follows in
 * snake_case.  Invariants: the document is built from one pass over the
 * scoreboard with relaxed reads (a recent view, not a consistent
 * snapshot); numbers that cannot be measured are absent, never 0.
 */
#include "ops/statusdoc.h"
#include "upstream/api.h"
#include "upstream/breaker.h"
#include "upstream/budget.h"
#include "base/upfail.h"
#include "base/storeaddr.h"
#include "upstream/store_lease.h"
#include "base/clock.h"
#include "engine/contract.h"
#include "ops/statusmodel.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The keys the views read are the model's tables (statusmodel.h): the
 * document and its readers spell each one once. */
#define POOL(f) enr_sm_pool_keys[ENR_SM_P_##f]
#define PROC(f) enr_sm_proc_keys[ENR_SM_W_##f]
#define EXIT(f) enr_sm_exit_keys[ENR_SM_X_##f]
#define LAST(f) enr_sm_last_keys[ENR_SM_LR_##f]

static void add_u(json_object *o, const char *k, uint64_t v)
{
    json_object_object_add(o, k, json_object_new_uint64(v));
}

static void add_s(json_object *o, const char *k, const char *v)
{
    json_object_object_add(o, k, json_object_new_string(v));
}

static void add_b(json_object *o, const char *k, int v)
{
    json_object_object_add(o, k, json_object_new_boolean(v != 0));
}

/* json-c prints doubles with 17 digits; operators want 0.05, not
 * 0.050000000000000003. */
static void add_d(json_object *o, const char *k, double v)
{
    char s[32];
    snprintf(s, sizeof s, "%.4g", v);
    if (strchr(s, 'e') || strchr(s, 'n') || strchr(s, 'i')) /* exponent, nan, inf */
        snprintf(s, sizeof s, "%.4f", v == v ? v : 0.0);
    json_object_object_add(o, k, json_object_new_double_s(v, s));
}

/* Copies a string the writer may be changing: bounded, terminated, and
 * printable ASCII only, since a request id comes from a client header and
 * raw bytes would make the JSON invalid UTF-8. */
static void copy_text(char *dst, const char *src, size_t n)
{
    size_t i;
    for (i = 0; i + 1 < n && src[i] != '\0'; i++)
        dst[i] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
    dst[i] = '\0';
}

/* When the provider's pause ends, on the wall clock (UTC, to the
 * second), or null when there is none: an operator reads "until 14:05"
 * and decides whether to end it (a HUP: quota.h). */
static void pause_end(json_object *o, uint64_t left_ms)
{
    time_t end = (time_t)((enr_wall_ms() + left_ms + 999) / 1000);
    struct tm tm;
    char s[32];

    if (left_ms == 0 || gmtime_r(&end, &tm) == NULL ||
        strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        json_object_object_add(o, ENR_SM_NAME(pause_until), NULL);
        return;
    }
    add_s(o, ENR_SM_NAME(pause_until), s);
}

/* A worker's breaker as one word: the worst of its sources' (open, then
 * half_open); each source's are in upstream.sources. */
static uint64_t worst_breaker(const enr_sb_slot *s)
{
    uint64_t w = ENR_BREAKER_CLOSED;

    for (unsigned k = 0; k < ENR_UP_SOURCES; k++) {
        uint64_t st = ENR_SB_GET(s->up_breaker_state[k]);
        if (st == ENR_BREAKER_OPEN)
            return st;
        if (st == ENR_BREAKER_HALF_OPEN)
            w = st;
    }
    return w;
}

static const char *source_name(unsigned src)
{
    return src < ENR_SOURCE_COUNT ? enr_config_source_names[src] : "unknown";
}

/* The source whose numbers are also at the top of "upstream" (api.h:
 * the aggregator's, where they were before there were sources). */
static unsigned top_source(void)
{
    unsigned src = 0;

    while (src + 1 < ENR_UP_SOURCES && !enr_api_get((int)src)->unlabelled)
        src++;
    return src;
}

/* A source's counters, generated from the table (base/upcounters.h):
 * each row its key, a failure kind under "failures"; its breakers. */
static void counters_doc(json_object *x, const enr_scoreboard *sb, const enr_pool_snap *t,
                         unsigned src)
{
    json_object *b = json_object_new_object(), *f = json_object_new_object();

    for (unsigned s = 0; s < ENR_BREAKER_STATES; s++)
        add_u(b, enr_breaker_state_name(s), t->breaker[src][s]);
    json_object_object_add(x, ENR_SM_NAME(breakers), b);
    for (unsigned r = 0; r < ENR_UP_NCOUNTERS; r++) {
        const enr_up_counter_row *row = &enr_up_counter_rows[r];
        add_u(row->kind[0] ? f : x, row->kind[0] ? row->kind : row->field,
              enr_sb_up_total(sb, src, r));
    }
    json_object_object_add(x, ENR_SM_NAME(failures), f);
    add_d(x, "cache_hit_ratio", t->hit_ratio[src]);
}

/* The source's day's budget (budget.h), from the host's page: its table's
 * rows, and when the day starts again; NULL when it has none. */
static json_object *budget_doc(unsigned src)
{
    json_object *o;
    enr_budget_state st;
    time_t reset;
    struct tm tm;
    char when[32] = "";

    if (!enr_budget_view((int)src, enr_budget_clocks(), &st))
        return NULL;
    o = json_object_new_object();
    for (unsigned r = 0; r < ENR_BUDGET_NFIELDS; r++) {
        if (r == ENR_BUDGET_ROW_pace)
            add_d(o, enr_budget_rows[r].field, st.v[r]);
        else
            add_u(o, enr_budget_rows[r].field, (uint64_t)st.v[r]);
    }
    add_u(o, "burst", st.burst);
    add_u(o, "asked", st.asked);
    add_b(o, enr_sm_budget_keys[ENR_SM_B_runs_out],
          st.v[ENR_BUDGET_ROW_forecast] > st.v[ENR_BUDGET_ROW_limit]);
    reset = (time_t)(st.reset_ms / 1000);
    if (gmtime_r(&reset, &tm) != NULL)
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    add_s(o, enr_sm_budget_keys[ENR_SM_B_resets], when);
    add_s(o, "file", enr_budget_path()[0] ? enr_budget_path() : "(memory only)");
    return o;
}

json_object *enr_pause_doc(const enr_scoreboard *sb, unsigned src, uint64_t now)
{
    json_object *o = json_object_new_object();
    const enr_sb_quota *q = &sb->quota[src < ENR_UP_SOURCES ? src : 0];
    uint64_t until = ENR_SB_GET(q->pause_until_ms);
    time_t wall = (time_t)ENR_SB_GET(q->until_wall_s);
    char reason[sizeof q->reason], when[32] = "";
    struct tm tm;

    add_b(o, enr_sm_pause_keys[ENR_SM_PA_paused], until > now);
    if (until <= now)
        return o;
    copy_text(reason, q->reason, sizeof reason);
    add_s(o, enr_sm_pause_keys[ENR_SM_PA_why], enr_up_pause_name(ENR_SB_GET(q->why)));
    if (reason[0])
        add_s(o, enr_sm_pause_keys[ENR_SM_PA_reason], reason);
    if (wall > 0 && gmtime_r(&wall, &tm) != NULL)
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (when[0])
        add_s(o, enr_sm_pause_keys[ENR_SM_PA_until], when);
    add_u(o, "ms_left", until - now);
    return o;
}

static json_object *fds_doc(const enr_fd_kinds *k)
{
    json_object *o = json_object_new_object(), *tcp = json_object_new_object();
    json_object *peers = json_object_new_array();
    char line[256];

    add_u(o, "total", k->total);
    add_u(o, "files", k->files);
    add_u(o, "pipes", k->pipes);
    add_u(o, "unix", k->unix_socks);
    add_u(o, "tcp", k->tcp_socks);
    add_u(o, "tcp_close_wait", k->close_wait);
    add_u(o, "other_sockets", k->other_socks);
    add_u(o, "other", k->other);
    for (unsigned s = 1; s < ENR_TCP_STATE_COUNT; s++)
        if (k->tcp_state[s])
            add_u(tcp, enr_tcp_state_name(s), k->tcp_state[s]);
    json_object_object_add(o, "tcp_by_state", tcp);
    for (unsigned i = 0; i < k->n_top_close_wait; i++) {
        json_object *p = json_object_new_object();
        add_s(p, "peer", k->top_close_wait[i].addr);
        add_u(p, "count", k->top_close_wait[i].n);
        json_object_array_add(peers, p);
    }
    json_object_object_add(o, "close_wait_peers", peers);
    enr_fd_kinds_describe(k, line, sizeof line);
    add_s(o, ENR_SM_NAME(summary), line);
    return o;
}

/* How the slot's last worker ended (reason "none": none has yet). */
static json_object *last_exit_doc(const enr_sb_slot *s)
{
    json_object *last = json_object_new_object();
    char id[ENR_SB_REQID_MAX];

    add_s(last, EXIT(reason), enr_exit_reason_name(ENR_SB_GET(s->last_exit_reason)));
    json_object_object_add(last, EXIT(pid), json_object_new_int64(ENR_SB_GET(s->last_exit_pid)));
    copy_text(id, s->last_exit_req_id, sizeof id);
    add_s(last, EXIT(request_id), id);
    add_u(last, EXIT(request_age_ms), ENR_SB_GET(s->last_exit_req_age_ms));
    return last;
}

/* A slot no process occupies (between a crash and its replacement, or
 * above a reload's smaller pool): its history, and no pid to signal. */
static json_object *empty_slot_doc(const enr_sb_slot *s, uint32_t i)
{
    json_object *o = json_object_new_object();

    add_u(o, PROC(slot), i);
    add_u(o, "requests_total", ENR_SB_GET(s->completed));
    add_u(o, "restarts", ENR_SB_GET(s->restarts));
    json_object_object_add(o, ENR_SM_NAME(last_exit), last_exit_doc(s));
    return o;
}

/* The last request the slot's worker finished (php-fpm's "last request
 * cpu", "last request memory", duration and size). */
static json_object *last_request_doc(const enr_sb_slot *s)
{
    json_object *o = json_object_new_object();
    char id[ENR_SB_REQID_MAX];

    add_u(o, "end time", ENR_SB_GET(s->last_end_ms) / 1000u);
    json_object_object_add(o, LAST(pid), json_object_new_int64(ENR_SB_GET(s->last_pid)));
    add_u(o, LAST(status), ENR_SB_GET(s->last_status));
    add_d(o, LAST(duration_ms), (double)ENR_SB_GET(s->last_duration_us) / 1000.0);
    add_d(o, LAST(cpu_ms), (double)ENR_SB_GET(s->last_cpu_us) / 1000.0);
    add_u(o, LAST(rss_kb), ENR_SB_GET(s->last_rss_kb));
    add_u(o, LAST(records_in), ENR_SB_GET(s->last_records_in));
    add_u(o, LAST(records_out), ENR_SB_GET(s->last_records_out));
    copy_text(id, s->last_req_id, sizeof id);
    add_s(o, LAST(request_id), id);
    return o;
}

/* mono: CLOCK_MONOTONIC now, for every age; the wall-clock stamps are
 * only shown as they are. */
static json_object *process_doc(const enr_status_view *v, uint32_t i, uint64_t mono)
{
    const enr_sb_slot *s = &v->sb->slot[i];
    json_object *o = json_object_new_object();
    uint64_t st = ENR_SB_GET(s->state), started = ENR_SB_GET(s->started_ms);
    uint64_t started_mono = ENR_SB_GET(s->started_mono_ms);
    int live = enr_sb_slot_live(s);
    char id[ENR_SB_REQID_MAX];

    add_u(o, PROC(slot), i);
    json_object_object_add(o, PROC(pid), json_object_new_int64(ENR_SB_GET(s->pid)));
    add_s(o, PROC(state), live ? enr_worker_state_name(st) : "empty");
    if (live && started) {
        add_u(o, "start time", started / 1000u);
        add_u(o, "start since",
              started_mono && mono > started_mono ? (mono - started_mono) / 1000u : 0);
    }
    add_u(o, PROC(requests), live ? ENR_SB_GET(s->served) : 0);
    add_u(o, "requests_total", ENR_SB_GET(s->completed));
    if (live && st == ENR_WS_BUSY && ENR_SB_GET(s->req_start_mono_ms)) {
        copy_text(id, s->req_id, sizeof id);
        add_s(o, PROC(request_id), id);
        add_u(o, PROC(request_age_ms), enr_sb_request_age_ms(s, mono));
    }
    if (live) {
        add_u(o, PROC(rss_kb), ENR_SB_GET(s->rss_kb));
        add_u(o, PROC(fds), ENR_SB_GET(s->fds));
        add_s(o, "breaker", enr_breaker_state_name(worst_breaker(s)));
        add_u(o, "upstream_fds", ENR_SB_GET(s->up_fds));
    }
    if (live && v->fds && (v->fds_ok == NULL || v->fds_ok[i]))
        json_object_object_add(o, ENR_SM_NAME(fds_by_kind), fds_doc(&v->fds[i]));
    add_u(o, "restarts", ENR_SB_GET(s->restarts));
    json_object_object_add(o, ENR_SM_NAME(last_exit), last_exit_doc(s));
    if (ENR_SB_GET(s->last_end_ms))
        json_object_object_add(o, ENR_SM_NAME(last_request), last_request_doc(s));
    return o;
}

/* The bucket bound (ms) under which the fraction q of the requests since
 * start took their time, from the histogram; 0: none yet or past the
 * last bound (then the bound is unknown and the key is left out). */
static unsigned quantile_ms(const uint64_t *n, uint64_t total, double q)
{
    uint64_t seen = 0;

    for (unsigned i = 0; i + 1 < ENR_SB_LAT_BUCKETS; i++) {
        seen += n[i];
        if ((double)seen >= q * (double)total)
            return enr_sb_lat_bounds_ms[i];
    }
    return 0;
}

/* Latency since start (histogram bounds, as /metrics has them) and the
 * health window's p99, the one the verdict judges. */
static json_object *latency_doc(const enr_status_view *v)
{
    json_object *x = json_object_new_object();
    uint64_t n[ENR_SB_LAT_BUCKETS], total = 0;
    const struct {
        const char *key;
        double q;
    } qs[] = {{enr_sm_lat_keys[ENR_SM_L_p50_ms], 0.50},
              {"p90_ms", 0.90},
              {enr_sm_lat_keys[ENR_SM_L_p99_ms], 0.99}};

    for (unsigned i = 0; i < ENR_SB_LAT_BUCKETS; i++) {
        n[i] = enr_sb_total(v->sb, offsetof(enr_sb_slot, latency) + i * sizeof(enr_sb_u64));
        total += n[i];
    }
    add_u(x, "requests", total);
    if (total) {
        add_d(x, enr_sm_lat_keys[ENR_SM_L_mean_ms],
              (double)ENR_SB_TOTAL(v->sb, latency_us_sum) / 1000.0 / (double)total);
        for (unsigned i = 0; i < sizeof qs / sizeof qs[0]; i++) {
            unsigned b = quantile_ms(n, total, qs[i].q);
            if (b)
                add_u(x, qs[i].key, b);
        }
    }
    if (v->health)
        add_d(x, enr_sm_lat_keys[ENR_SM_L_window_p99_ms], v->health->win.p99_ms);
    return x;
}

/* A reload whose new workers could not start.  Shown, never a health
 * verdict: the old configuration serves, and a watchdog restart would
 * start the daemon on the very file that does not work. */
static json_object *reload_doc(const enr_sb_pool *p)
{
    json_object *x = json_object_new_object();
    char err[sizeof p->reload_error];

    copy_text(err, p->reload_error, sizeof err);
    add_b(x, "pending", ENR_SB_GET(p->reload_pending) != 0);
    add_u(x, "failures", ENR_SB_GET(p->reload_failures));
    add_u(x, "retry_ms", ENR_SB_GET(p->reload_retry_ms));
    add_s(x, "last_error", err);
    return x;
}

/* php-fpm's fields, with php-fpm's names. */
static void fpm_doc(json_object *o, const enr_status_view *v, const enr_pool_snap *ps, uint64_t now)
{
    const enr_sb_pool *p = &v->sb->pool;
    const uint64_t *pc = ps->n, *st = ps->states;
    uint64_t start = ENR_SB_GET(p->start_ms), workers = ENR_SB_GET(p->workers);
    uint64_t start_mono = ENR_SB_GET(p->start_mono_ms);

    add_s(o, POOL(pool), "enrichd");
    add_s(o, "process manager", "static");
    add_u(o, "start time", start / 1000u);
    add_u(o, POOL(start_since), start_mono && now > start_mono ? (now - start_mono) / 1000u : 0);
    add_u(o, POOL(accepted), pc[ENR_PC_accepted]);
    add_u(o, POOL(listen_queue), ps->listen_queue);
    add_u(o, POOL(max_listen_queue), ps->listen_queue_max);
    if (ps->have_queue)
        add_u(o, "listen queue len", ps->listen_queue_limit);
    add_u(o, POOL(idle), st[ENR_WS_IDLE]);
    add_u(o, POOL(active), st[ENR_WS_BUSY]);
    add_u(o, POOL(total),
          st[ENR_WS_IDLE] + st[ENR_WS_BUSY] + st[ENR_WS_STARTING] + st[ENR_WS_EXITING]);
    add_u(o, "max active processes", ps->max_active);
    /* php-fpm counts how often it wanted more children than allowed; a
     * static pool cannot grow, so this says whether every worker has been
     * busy at once. */
    add_u(o, "max children reached", workers && ps->max_active >= workers);
    add_u(o, POOL(slow), pc[ENR_PC_slow_requests]);
}

/* Responses by status class, records by fate. */
static void traffic_doc(json_object *o, const enr_pool_snap *ps)
{
    const uint64_t *pc = ps->n;
    json_object *x;

    x = json_object_new_object();
    add_u(x, enr_sm_resp_keys[ENR_SM_R_s2xx], ps->s2xx);
    add_u(x, enr_sm_resp_keys[ENR_SM_R_s4xx], ps->s4xx);
    add_u(x, enr_sm_resp_keys[ENR_SM_R_s5xx], ps->s5xx);
    json_object_object_add(o, ENR_SM_NAME(responses), x);
    x = json_object_new_object();
    add_u(x, "in", pc[ENR_PC_records_in]);
    add_u(x, "out", pc[ENR_PC_records_out]);
    add_u(x, "rejected", pc[ENR_PC_records_rejected]);
    add_u(x, "degraded", pc[ENR_PC_records_degraded]);
    json_object_object_add(o, "records", x);
}

/* Worker exits (each but a stop replaced), the crash-loop back-off. */
static void lifecycle_doc(json_object *o, const enr_sb_pool *p)
{
    json_object *x;
    uint64_t restarts = 0;

    x = json_object_new_object();
    /* Every worker exit but a stop is followed by a replacement. */
    for (unsigned r = 1; r < ENR_EXIT_REASONS; r++) {
        uint64_t n = ENR_SB_GET(p->exits[r]);
        if (r == ENR_EXIT_STOP)
            continue;
        add_u(x, enr_exit_reason_name(r), n);
        restarts += n;
    }
    json_object_object_add(o, "restarts", x);
    add_u(o, POOL(restarts_total), restarts);
    x = json_object_new_object();
    add_b(x, "active", ENR_SB_GET(p->crashloop) != 0);
    add_u(x, "backoff_ms", ENR_SB_GET(p->backoff_ms));
    json_object_object_add(o, "crash_loop", x);
}

/* Live workers only: an empty slot has no pid to show (a pid 0 in a
 * script's kill loop signals its own process group). */
static void processes_doc(json_object *o, const enr_status_view *v, uint64_t now)
{
    json_object *a = json_object_new_array(), *e = json_object_new_array();
    for (uint32_t i = 0; i < enr_sb_nslots(v->sb); i++) {
        if (enr_sb_slot_live(&v->sb->slot[i]))
            json_object_array_add(a, process_doc(v, i, now));
        else
            json_object_array_add(e, empty_slot_doc(&v->sb->slot[i], i));
    }
    json_object_object_add(o, ENR_SM_NAME(processes), a);
    json_object_object_add(o, ENR_SM_NAME(empty_slots), e);
}

/* Where the store is, written back from its parsed address (storeaddr.h
 * has no user, password or query in it): never a secret, whatever the
 * setting's text. */
static void store_address(json_object *o, const char *setting)
{
    enr_store_addr a;
    char s[ENR_STORE_HOST_MAX + ENR_STORE_PATH_MAX + 32], why[128];

    if (enr_store_addr_parse(setting, &a, why, sizeof why) != 0)
        snprintf(s, sizeof s, "(invalid)");
    else if (a.is_unix)
        snprintf(s, sizeof s, "unix:%s", a.path);
    else
        snprintf(s, sizeof s, strchr(a.host, ':') ? "redis://[%s]:%d/%d" : "redis://%s:%d/%d",
                 a.host, a.port, a.db);
    add_s(o, enr_sm_store_keys[ENR_SM_S_address], s);
}

/* The fleet's shared store, only while shared_store is set: a host
 * without one keeps the document it had.  Its rows (storestats.h) as
 * /metrics totals them, connected while a live worker is (/healthz's
 * degraded verdict is its unreachable), and the units each source's
 * lease holds. */
static void store_doc(json_object *o, const enr_status_view *v)
{
    json_object *x, *held;
    uint64_t t[ENR_STORE_NSTATS];

    if (v->c == NULL || v->c->shared_store[0] == '\0')
        return;
    x = json_object_new_object();
    held = json_object_new_object();
    enr_sb_store_totals(v->sb, t);
    add_s(x, enr_sm_store_keys[ENR_SM_S_state],
          enr_sm_store_states[t[ENR_STORE_ROW_up] ? ENR_SM_SS_connected : ENR_SM_SS_unreachable]);
    store_address(x, v->c->shared_store);
    for (unsigned r = 0; r < ENR_STORE_NSTATS; r++)
        add_u(x, enr_store_stat_rows[r].field, t[r]);
    for (unsigned src = 0; src < ENR_UP_SOURCES; src++) {
        enr_budget_state st;
        if (enr_budget_view((int)src, enr_budget_clocks(), &st))
            add_u(held, source_name(src), enr_lease_held((int)src, st.day_end_ms));
    }
    json_object_object_add(x, ENR_SM_NAME(lease_held), held);
    json_object_object_add(o, ENR_SM_NAME(store), x);
}

json_object *enr_status_doc(const enr_status_view *v, int full)
{
    const enr_sb_pool *p = &v->sb->pool;
    json_object *o = json_object_new_object(), *x;
    uint64_t now = enr_mono_ms(), workers = ENR_SB_GET(p->workers);
    uint64_t pstate = ENR_SB_GET(p->state);
    enr_pool_snap own;
    const enr_pool_snap *ps = v->pool;
    const uint64_t *pc, *st;

    if (ps == NULL) {
        enr_pool_snap_take(&own, v->sb, NULL);
        ps = &own;
    }
    pc = ps->n;
    st = ps->states;

    fpm_doc(o, v, ps, now);

    /* What php-fpm does not have. */
    add_s(o, POOL(state), enr_pool_state_name(pstate));
    add_u(o, POOL(generation), ENR_SB_GET(p->generation));
    add_u(o, POOL(workers_configured), workers);
    add_u(o, "starting processes", st[ENR_WS_STARTING]);
    add_u(o, "exiting processes", st[ENR_WS_EXITING]);
    add_u(o, POOL(completed), pc[ENR_PC_completed]);
    /* accepted = completed + in_flight + lost (poolsnap.c). */
    add_u(o, POOL(in_flight), ps->in_flight);
    add_u(o, POOL(lost), ps->lost);
    add_u(o, "listen_refused", pc[ENR_PC_listen_refused]);
    add_u(o, "fastcgi_rejected", pc[ENR_PC_fcgi_rejected]);
    traffic_doc(o, ps);
    json_object_object_add(o, ENR_SM_NAME(latency), latency_doc(v));

    lifecycle_doc(o, p);
    json_object_object_add(o, "reload", reload_doc(p));

    x = json_object_new_object();
    add_b(x, "enabled", enr_config_enriches(v->c));
    /* The aggregator's numbers where they always were, then every
     * source in use under "sources" (the aggregator's among them). */
    counters_doc(x, v->sb, ps, top_source());
    add_u(x, "fds", ps->up_fds);
    {
        /* one per host: the same for every worker */
        json_object *k = json_object_new_object();
        enr_cache_stats cs;
        enr_cache_stats_of(v->cache, &cs);
#define ENR_CS_DOC(f, metric, type, help) add_u(k, #f, cs.f);
        ENR_CACHE_STATS(ENR_CS_DOC)
#undef ENR_CS_DOC
        /* where it lives: the file only when it really is one */
        if (cs.persistent)
            add_s(k, "file", v->c->cache_file);
        json_object_object_add(x, "cache", k);
        /* the provider's pause (Retry-After), the host's: quota.h */
        uint64_t until = ENR_SB_GET(v->sb->quota[top_source()].pause_until_ms);
        add_u(x, ENR_SM_NAME(pause_ms_left), until > now ? until - now : 0);
        pause_end(x, until > now ? until - now : 0);
        add_u(x, "pauses", ENR_SB_GET(v->sb->quota[top_source()].pauses));
    }
    {
        json_object *srcs = json_object_new_object();
        int done[ENR_UP_SOURCES] = {0};
        for (int pv = ENR_PROV_YT; pv < ENR_SOURCE_PROVIDERS; pv++) {
            int a = v->c->sources[pv];
            json_object *one;
            if (a < 0 || a >= ENR_UP_SOURCES || done[a])
                continue;
            done[a] = 1;
            one = json_object_new_object();
            counters_doc(one, v->sb, ps, (unsigned)a);
            json_object_object_add(one, ENR_SM_NAME(pause), enr_pause_doc(v->sb, (unsigned)a, now));
            json_object *bd = budget_doc((unsigned)a);
            if (bd != NULL)
                json_object_object_add(one, ENR_SM_NAME(budget), bd);
            json_object_object_add(srcs, source_name((unsigned)a), one);
        }
        json_object_object_add(x, ENR_SM_NAME(sources), srcs);
    }
    json_object_object_add(o, ENR_SM_NAME(upstream), x);
    store_doc(o, v);

    if (v->health)
        json_object_object_add(o, ENR_SM_NAME(health), enr_health_doc(v->health, v->c, v->sb));

    if (full)
        processes_doc(o, v, now);
    return o;
}

/* shared_store set, workers live, none of them connected to it. */
static int store_unreachable(const enr_config *c, const enr_scoreboard *sb)
{
    const enr_sb_slot *s;
    unsigned live = 0, up = 0;

    if (c == NULL || c->shared_store[0] == '\0')
        return 0;
    for (ENR_SB_EACH_SLOT(sb, i, s))
        if (enr_sb_slot_serving(s)) {
            live++;
            up += ENR_SB_GET(s->store[ENR_STORE_ROW_up]) != 0;
        }
    return live > 0 && up == 0;
}

json_object *enr_health_doc(const enr_health *h, const enr_config *c, const enr_scoreboard *sb)
{
    json_object *o = json_object_new_object(), *w = json_object_new_object();
    json_object *rs = json_object_new_array(), *m = json_object_new_object();
    const enr_health_window *x = &h->win;

    /* The fleet's store configured and no live worker connected: each
     * host serves on its own (docs/fleet.md), degraded, never failed. */
    if (h->healthy && store_unreachable(c, sb)) {
        add_s(o, enr_sm_health_keys[ENR_SM_H_status], "degraded");
        add_s(o, enr_sm_health_keys[ENR_SM_H_reason],
              "shared store unreachable: the host serves on its own");
    } else {
        add_s(o, enr_sm_health_keys[ENR_SM_H_status], h->healthy ? "ok" : "unhealthy");
        if (!h->healthy)
            add_s(o, enr_sm_health_keys[ENR_SM_H_reason], h->reason);
    }
    for (unsigned i = 0; i < ENR_HR_COUNT; i++)
        if (h->reasons & (1u << i))
            json_object_array_add(rs, json_object_new_string(enr_health_reason_name(1u << i)));
    json_object_object_add(o, "reasons", rs);
    {
        /* Why a source makes no call, and until when: a spent quota is
         * no fault of this host (every host shares the key), so it is
         * said here without making the pool unhealthy. */
        json_object *ps = json_object_new_object();
        uint64_t now = enr_mono_ms();
        for (unsigned i = 0; i < ENR_UP_SOURCES; i++)
            if (ENR_SB_GET(sb->quota[i].pause_until_ms) > now)
                json_object_object_add(ps, source_name(i), enr_pause_doc(sb, i, now));
        json_object_object_add(o, "paused_sources", ps);
    }
    /* Liveness, apart: it alone feeds the watchdog, so a provider's fault
     * makes the pool unhealthy here but never gets it restarted. */
    add_b(o, "live", h->liveness.live != 0);
    add_s(o, "live_reason", h->liveness.reason);
    add_u(o, "stuck_ms", h->liveness.stuck_ms);

    add_u(w, "window_s", c->health_window_s);
    add_u(w, "span_ms", x->span_ms);
    add_u(w, "requests", x->requests);
    add_u(w, "5xx", x->s5xx);
    add_d(w, "5xx_ratio", x->ratio_5xx);
    add_d(w, "max_5xx_ratio", c->health_max_5xx_ratio);
    add_u(w, "records", x->records);
    add_u(w, "degraded", x->degraded);
    add_d(w, "degraded_ratio", x->ratio_degraded);
    add_d(w, "max_degraded_ratio", c->health_max_degraded_ratio);
    add_d(w, "p99_ms", x->p99_ms);
    add_u(w, "max_p99_ms", c->health_max_p99_ms);
    add_u(w, "live_workers", x->live_workers);
    add_u(w, "busy_workers", x->busy_workers);
    add_u(w, "breaker_open", x->breaker_open);
    add_u(w, "listen_queue", x->listen_queue);
    add_u(w, "oldest_request_ms", x->oldest_request_ms);
    json_object_object_add(o, "window", w);

    /* The verdict above is the master's (liveness gates the watchdog);
     * this block is its summary, kept for old readers. */
    add_b(m, "healthy", h->healthy != 0);
    add_s(m, "reason", h->healthy ? "" : h->reason);
    json_object_object_add(o, "master", m);
    json_object_object_add(o, "reload", reload_doc(&sb->pool));
    return o;
}
