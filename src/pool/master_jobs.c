/*
 * master_jobs.c: the master's periodic work, one row a job of jobs[]
 * (Redis' serverCron and run_with_period, as a table): the tick (each
 * worker's RSS and descriptors sampled, hard limits, the idle exit), the
 * STATUS= line and the watchdog; and the pool's one health verdict,
 * judged on every pass of the loop.  master.c's loop runs the jobs that
 * are due and sleeps until the next (enr_master_jobs_next()).
 *
 * Invariants:
 *  - A job runs when it is on and its time has come, then waits its
 *    period; job_next[j] is when job j runs next.
 *  - Nothing here forks, reaps or drains: a worker over a hard limit is
 *    asked to end (child.c), and an idle pool is only noted
 *    (idle_exit): the loop begins the drain.
 *  - The watchdog is fed only after READY=1 and while the last liveness
 *    verdict says live.
 */
#include "pool/master_jobs.h"

#include <inttypes.h>
#include <stdio.h>

#include "base/log.h"
#include "base/procstat.h"
#include "base/scoreboard.h"
#include "ops/health.h"
#include "pool/child.h"
#include "pool/children.h"
#include "pool/notify.h"
#include "pool/reload.h"

typedef enr_master master;
typedef enr_child child;

static void sample_workers(master *m, uint64_t now)
{
    const enr_config *c = &m->cfg;
    uint64_t busy = 0;

    for (unsigned i = 0; i < ENR_SB_MAX_WORKERS; i++) {
        child *ch = &m->w[i];
        enr_sb_slot *s = &m->sb->slot[i];
        long rss, fds;
        uint64_t st;

        if (ch->pid <= 0)
            continue;
        rss = enr_proc_rss_kb(ch->pid);
        fds = enr_proc_fd_count(ch->pid);
        if (rss >= 0)
            ENR_SB_SET(s->rss_kb, (uint64_t)rss);
        if (fds >= 0)
            ENR_SB_SET(s->fds, (uint64_t)fds);
        st = ENR_SB_GET(s->state);
        if (st == ENR_WS_BUSY)
            busy++;
        if (ch->asked != ENR_EXIT_NONE)
            continue;
        if (c->rss_hard_mb && rss > (long)c->rss_hard_mb * 1024)
            enr_child_ask(ch, ENR_EXIT_RSS, ENR_STEP_TERM);
        else if (c->fd_hard && fds > (long)c->fd_hard)
            enr_child_ask(ch, ENR_EXIT_FD, ENR_STEP_TERM);
        else if (st == ENR_WS_BUSY && enr_child_request_stuck(c, s, now))
            enr_child_ask(ch, ENR_EXIT_TIMEOUT, ENR_STEP_TERM);
        else
            continue;
        enr_log(ENR_LOG_WARN, "worker over a hard limit",
                "worker_pid=%ld slot=%u reason=%s rss_kb=%ld fds=%ld", (long)ch->pid, i,
                enr_exit_reason_name(ch->asked), rss, fds);
    }
    if (busy > ENR_SB_GET(m->sb->pool.max_active))
        ENR_SB_SET(m->sb->pool.max_active, busy);
    enr_children_crashloop_end(m, now);
}

/* idle_exit_s: a socket-activated pool with nothing to do for that long
 * drains and exits 0.  systemd keeps the sockets, queues what arrives
 * meanwhile and starts enrichd again on the next connection, so a pool
 * that serves a cron job a few times an hour holds no memory in between.
 * Without socket activation nothing would start it again: never. */
static void check_idle(master *m, uint64_t now)
{
    uint64_t accepted;

    if (m->cfg.idle_exit_s == 0 || !m->activated || m->draining || !m->ready_sent || m->pending)
        return;
    accepted = ENR_SB_TOTAL(m->sb, accepted);
    if (accepted != m->last_accepted || accepted != ENR_SB_TOTAL(m->sb, completed) ||
        ENR_SB_GET(m->sb->pool.listen_queue) != 0) {
        m->last_accepted = accepted;
        m->idle_since = now;
        return;
    }
    if (now - m->idle_since >= (uint64_t)m->cfg.idle_exit_s * 1000) {
        enr_log(ENR_LOG_INFO, "idle exit", "idle_s=%u served=%" PRIu64, m->cfg.idle_exit_s,
                accepted);
        m->idle_exit = 1; /* the loop drains: the drain is its business */
    }
}

static void send_status(master *m, uint64_t now)
{
    char text[320];
    uint64_t done = ENR_SB_TOTAL(m->sb, completed);

    if (now > m->last_completed_at)
        m->req_rate =
            (double)(done - m->last_completed) * 1000.0 / (double)(now - m->last_completed_at);
    m->last_completed = done;
    m->last_completed_at = now;
    if (enr_reload_failing(m)) {
        /* Loud until it is resolved: the file on disk is not what serves. */
        char why[240];
        enr_reload_failed_text(m, why, sizeof why);
        snprintf(text, sizeof text, "workers %d/%u, %.1f req/s, %s", enr_children_live(m, 1),
                 m->cfg.workers, m->req_rate, why);
    } else if (ENR_SB_GET(m->sb->pool.crashloop))
        snprintf(text, sizeof text,
                 "workers %d/%u, %.1f req/s, restarts %" PRIu64 ", CRASH LOOP: back-off %" PRIu64
                 " ms",
                 enr_children_live(m, 1), m->cfg.workers, m->req_rate, m->restarts, m->backoff_ms);
    else if (!m->draining && !m->health.liveness.live)
        snprintf(text, sizeof text,
                 "workers %d/%u, %.1f req/s, restarts %" PRIu64 ", NOT LIVE, watchdog stopped: %s",
                 enr_children_live(m, 1), m->cfg.workers, m->req_rate, m->restarts,
                 m->health.liveness.reason);
    else
        snprintf(text, sizeof text, "workers %d/%u, %.1f req/s, restarts %" PRIu64 ", %s%s%s",
                 enr_children_live(m, 1), m->cfg.workers, m->req_rate, m->restarts,
                 m->draining         ? "draining"
                 : m->health.healthy ? "healthy"
                                     : "unhealthy",
                 m->health.healthy ? "" : ": ", m->health.healthy ? "" : m->health.reason);
    enr_notify_status(text);
}

/* The pool's one health verdict, judged on every pass of the loop (each
 * tick, and each child event: a worker ready or gone changes it at once)
 * and published in the scoreboard for the status process, so /healthz,
 * STATUS= and the watchdog say the same thing. */
void enr_master_judge(master *m, uint64_t now)
{
    int healthy = enr_health_sample(&m->health, &m->cfg, m->sb, m->listen_fd, now);

    int live = m->health.liveness.live;

    /* Transitions only, and not while starting or stopping (workers leave
     * on purpose then): one line when it changes. */
    if (m->ready_sent && !m->draining && healthy != m->was_healthy) {
        char q[200];
        if (healthy)
            enr_log(ENR_LOG_INFO, "pool healthy again", NULL);
        else
            enr_log(ENR_LOG_WARN, "pool unhealthy", "reason=%s",
                    enr_log_quote(q, sizeof q, m->health.reason));
        m->was_healthy = healthy;
    }
    if (m->ready_sent && live != m->was_live) {
        char q[200];
        if (live)
            enr_log(ENR_LOG_INFO, "pool live again: watchdog fed", NULL);
        else
            enr_log(ENR_LOG_ERROR, "pool not live: watchdog not fed", "reason=%s",
                    enr_log_quote(q, sizeof q, m->health.liveness.reason));
        m->was_live = live;
    }
}

static void tick(master *m, uint64_t now)
{
    sample_workers(m, now);
    check_idle(m, now);
}

/* The watchdog is fed while the master runs this loop and the pool can
 * make progress (the last liveness verdict), whatever the answers are:
 * systemd's remedy is a restart, which mends a wedged master or pool but
 * never a provider down or slow, nor a client, and would empty the
 * caches and lose the answers in flight.  Health keeps those reasons for
 * /healthz, STATUS= and the alerts.  Never before READY=1. */
static void feed_watchdog(master *m, uint64_t now)
{
    (void)now;
    enr_notify_watchdog();
}

static int watchdog_wanted(const master *m)
{
    return m->watchdog_ms && m->ready_sent && m->health.liveness.live;
}

static int always(const master *m)
{
    (void)m;
    return 1;
}

static uint64_t tick_period(const master *m)
{
    (void)m;
    return ENR_MASTER_TICK_MS;
}

static uint64_t status_period(const master *m)
{
    (void)m;
    return ENR_MASTER_STATUS_MS;
}

static uint64_t watchdog_period(const master *m)
{
    return m->watchdog_ms;
}

/* The master's periodic work, one row a job (Redis' serverCron and
 * run_with_period, as a table): a job runs when it is on and its time has
 * come, then waits a period; next_wakeup() sleeps until the first one. */
static const struct job {
    const char *name;
    int (*on)(const master *m);
    uint64_t (*period)(const master *m);
    void (*run)(master *m, uint64_t now);
} jobs[] = {
    {"tick", always, tick_period, tick},            /* /proc samples, hard limits, idle exit */
    {"status", always, status_period, send_status}, /* systemd STATUS= */
    {"watchdog", watchdog_wanted, watchdog_period, feed_watchdog}, /* systemd WATCHDOG=1 */
};
#define N_JOBS (sizeof jobs / sizeof jobs[0])
_Static_assert(N_JOBS == ENR_MASTER_JOBS, "master_state.h's job_next[] has one entry per job");

void enr_master_jobs_run(master *m, uint64_t now)
{
    for (size_t j = 0; j < N_JOBS; j++)
        if (jobs[j].on(m) && now >= m->job_next[j]) {
            jobs[j].run(m, now);
            m->job_next[j] = now + jobs[j].period(m);
        }
}

void enr_master_jobs_start(master *m)
{
    for (size_t j = 0; j < N_JOBS; j++) /* the first samples after a tick of start-up */
        m->job_next[j] = m->start_ms + (jobs[j].run == feed_watchdog ? 0 : ENR_MASTER_TICK_MS);
}

uint64_t enr_master_jobs_next(const master *m, uint64_t t)
{
    for (size_t j = 0; j < N_JOBS; j++)
        if (jobs[j].on(m) && m->job_next[j] != 0 && m->job_next[j] < t)
            t = m->job_next[j];
    return t;
}
