/*
 * master.c: the master process's cycle: start-up (signals, systemd, the
 * scoreboard, the sockets), the single fork site, the supervising loop
 * (reap, signals, fill the pool, readiness, escalation), drain and stop.
 * Child exits and the crash-loop guard are children.c's, the periodic
 * jobs (sampling, hard limits, STATUS=, the watchdog) and the health
 * verdict master_jobs.c's, the configuration generations (reload)
 * reload.c's, how a child is asked and made to end child.c's; the state
 * they share is master_state.h.
 *
 * Invariants:
 *  - Signal handlers only set flags.  The signals are blocked except
 *    inside ppoll(), so a flag is always seen by the next loop turn and
 *    a handler never runs in the middle of the loop's work.
 *  - spawn_with() is the only fork() of the daemon, for workers (also
 *    the probes reload.c asks for: it returns them, reload_start() forks
 *    them) and for the status process; the child never returns into this
 *    file's loop.
 *  - Every child exit goes through enr_children_reap() (children.c),
 *    from the loop and from stop() alike.
 *  - Slot i of the scoreboard belongs to pool position i: a replacement
 *    reuses the slot of the worker it replaces, so the slot's counters
 *    are cumulative over everything that ever ran in that position.
 *  - The pool is refilled in the same loop turn that reaps a worker,
 *    except while the crash-loop back-off holds forks.
 *  - stop() is the one way out of the loop: what is left of the children
 *    is killed and reaped, the socket files removed.
 */
#include "pool/master.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pool/child.h"
#include "pool/children.h"
#include "ops/health.h"
#include "fcgi/listen.h"
#include "base/proctitle.h"
#include "base/log.h"
#include "pool/master_jobs.h"
#include "pool/master_state.h"
#include "pool/notify.h"
#include "base/procstat.h"
#include "pool/reload.h"
#include "base/scoreboard.h"
#include "base/signals.h"
#include "ops/status.h"
#include "pool/testhooks.h"
#include "pool/worker.h"
#include "base/clock.h"
#include "upstream/budget.h"

enum child_kind { CHILD_WORKER, CHILD_STATUS };

/* How often a cold hold (cold_hold()) looks whether the first answer went. */
#define ENR_COLD_POLL_MS 2

typedef enr_master master;
typedef enr_child child;

static volatile sig_atomic_t sig_hup, sig_term, sig_quit, sig_chld;

/* The master's signals; every other one has its kind's default
 * (signals.h), and enrichd(8) says what each does. */
static const enr_sig_rule master_signals[] = {
    {SIGHUP, ENR_SIG_FLAG, &sig_hup, NULL},
    {SIGTERM, ENR_SIG_FLAG, &sig_term, NULL},
    {SIGINT, ENR_SIG_FLAG, &sig_term, NULL},
    {SIGQUIT, ENR_SIG_FLAG, &sig_quit, NULL},
    {SIGCHLD, ENR_SIG_FLAG, &sig_chld, NULL},
    {SIGPIPE, ENR_SIG_IGNORE, NULL, NULL},
    {SIGUSR1, ENR_SIG_NOTE, NULL, "logs go to stderr or the journal: nothing to reopen"},
    {SIGUSR2, ENR_SIG_NOTE, NULL, "no binary upgrade: restart the service"},
    {SIGXFSZ, ENR_SIG_NOTE, NULL, "a write past RLIMIT_FSIZE fails with EFBIG instead"},
    {SIGTSTP, ENR_SIG_NOTE, NULL, "the pool is not stopped from a terminal"},
    {SIGTTIN, ENR_SIG_NOTE, NULL, "the pool is not stopped from a terminal"},
    {SIGTTOU, ENR_SIG_NOTE, NULL, "the pool is not stopped from a terminal"},
};
#define N_MASTER_SIGNALS (sizeof master_signals / sizeof master_signals[0])

/* ---- the fork site ------------------------------------------------------ */

/* The only fork() of the daemon, for the status process (slot unused)
 * or a worker of configuration cfg, generation gen, in slot. */
static int spawn_with(master *m, int kind, unsigned slot, const enr_config *cfg, unsigned gen)
{
    child *ch = kind == CHILD_WORKER ? &m->w[slot] : &m->status;
    enr_sb_slot *s = kind == CHILD_WORKER ? &m->sb->slot[slot] : NULL;
    pid_t pid, parent = getpid(); /* the child checks it still has this parent */

    if (s != NULL) {
        /* Before fork: the child overwrites these as soon as it runs, and
         * the master must never clobber what the child already wrote. */
        ENR_SB_SET(s->pid, 0);
        ENR_SB_SET(s->state, ENR_WS_STARTING);
    }
    pid = fork();

    if (pid < 0) {
        enr_log(ENR_LOG_ERROR, "fork failed", "error=%s kind=%s", enr_log_errno(errno),
                kind == CHILD_WORKER ? "worker" : "status");
        return -1;
    }
    if (pid == 0) {
        int code;

        /* The child keeps the master's handlers and mask (the signals
         * stay blocked) until it installs its own table. */
        enr_notify_forget();
        /* A worker keeps its configuration's secrets, the status process none. */
        enr_config_secrets_child(&m->cfg, &m->next_cfg, kind == CHILD_WORKER ? cfg : NULL);
        close(m->ready_r);
        if (kind == CHILD_WORKER) {
            enr_worker_args a = {
                cfg,        m->sb, slot,   m->listen_fd,
                m->ready_w, gen,   parent, gen == m->generation ? m->cache : m->next_cache};
            close(m->status_fd);
            /* The worker sets its own mask before it unblocks anything. */
            code = enr_worker_main(&a);
        } else {
            close(m->ready_w);
            enr_log_role("status");
            code = enr_status_main(&m->cfg, m->sb, m->cache, m->status_fd, m->listen_fd, parent);
        }
        _exit(code);
    }
    memset(ch, 0, sizeof *ch);
    ch->pid = pid;
    ch->generation = gen;
    ch->started = enr_mono_ms();
    if (s != NULL) {
        int64_t zero = 0;
        /* Shows the process before it runs; the worker writes the same. */
        atomic_compare_exchange_strong(&s->pid, &zero, (int64_t)pid);
        enr_log(ENR_LOG_INFO, "worker start", "worker_pid=%ld slot=%u generation=%u", (long)pid,
                slot, gen);
    } else {
        enr_log(ENR_LOG_INFO, "status process start", "child_pid=%ld", (long)pid);
    }
    return 0;
}

static int spawn(master *m, int kind, unsigned slot)
{
    return spawn_with(m, kind, slot, &m->cfg, m->generation);
}

/* A worker the reload asked for (a probe of the pending configuration),
 * forked here and the outcome handed back. */
static void reload_start(master *m, enr_reload_start st, uint64_t now)
{
    if (st.start)
        enr_reload_started(m, &st, spawn_with(m, CHILD_WORKER, st.slot, st.cfg, st.gen) == 0, now);
}

/* ---- the pool ------------------------------------------------------------ */

/* Cold start: the first worker gets the CPU to itself until it has
 * answered the request that woke the service (socket activation), so
 * that answer is not queued behind the other forks and their start-up.
 * A connection seen waiting before that answer (at start-up, when the
 * activating one is in the backlog) holds the rest until the first
 * worker has answered once, never past ENR_READY_WAIT_MS: the worker
 * accepts it and reads it before it shows busy, so neither the backlog
 * nor its state alone would say it is still being served.  Nothing
 * waiting: the pool fills as soon as the first worker is ready. */
static int cold_hold(master *m, uint64_t now)
{
    const enr_sb_slot *s = &m->sb->slot[0];
    struct pollfd p = {.fd = m->listen_fd, .events = POLLIN};

    if (now >= m->start_ms + ENR_READY_WAIT_MS)
        return 0;
    if (!m->cold_conn && poll(&p, 1, 0) > 0)
        m->cold_conn = 1;
    if (!m->first_ready)
        return 1;
    if (m->w[0].pid <= 0 || ENR_SB_GET(s->completed) > 0)
        return 0;
    return m->cold_conn || ENR_SB_GET(s->state) == ENR_WS_BUSY;
}

static void fill_workers(master *m, uint64_t now, int hold)
{
    int holding = ENR_SB_GET(m->sb->pool.crashloop) != 0;

    if (holding && now < m->hold_until)
        return;
    for (unsigned i = 0; i < m->cfg.workers; i++) {
        if (m->w[i].pid > 0)
            continue;
        if (hold && i > 0)
            return;
        /* In a crash loop one probe at a time, not the whole pool: its
         * early death doubles the back-off (crashloop_note), its survival
         * ends the loop (sample_workers). */
        if (holding && enr_children_live(m, 0) > 0)
            return;
        if (spawn(m, CHILD_WORKER, i) != 0 || holding)
            return;
    }
}

static void fill_pool(master *m, uint64_t now)
{
    int hold;

    if (m->draining)
        return;
    hold = !m->ready_sent && cold_hold(m, now);
    fill_workers(m, now, hold);
    /* The status process waits for the first worker (cold start) but
     * never for a crash loop: that is when operators need it most. */
    if (m->status.pid == 0 && now >= m->status_hold_until &&
        (!hold || ENR_SB_GET(m->sb->pool.crashloop)))
        spawn(m, CHILD_STATUS, 0);
}

static void read_readiness(master *m)
{
    char buf[64];

    while (read(m->ready_r, buf, sizeof buf) > 0)
        ;
    for (unsigned i = 0; i < ENR_SB_MAX_WORKERS; i++) {
        uint64_t st;
        if (m->w[i].pid <= 0 || m->w[i].ready)
            continue;
        st = ENR_SB_GET(m->sb->slot[i].state);
        if (st == ENR_WS_IDLE || st == ENR_WS_BUSY)
            m->w[i].ready = m->first_ready = 1;
    }
}

static void check_ready(master *m, uint64_t now)
{
    int ready = enr_children_live(m, 1);
    int enough = ready >= (int)m->cfg.workers ||
                 (ready >= (int)(m->cfg.min_ready_workers ? m->cfg.min_ready_workers : 1) &&
                  now >= m->start_ms + ENR_READY_WAIT_MS);

    if (!m->ready_sent && enough) {
        m->ready_sent = 1;
        ENR_SB_SET(m->sb->pool.state, ENR_POOL_RUNNING);
        enr_notify_ready();
        enr_log(ENR_LOG_INFO, "ready", "workers=%d startup_ms=%" PRIu64, ready, now - m->start_ms);
    }
    enr_reload_done_check(m, ready, now);
}

/* ---- drain, escalation, quit ------------------------------------------- */

static void begin_drain(master *m, uint64_t now)
{
    m->draining = 1;
    enr_reload_drop(m);
    m->drain_deadline = now + m->cfg.drain_timeout_ms;
    ENR_SB_SET(m->sb->pool.state, ENR_POOL_DRAINING);
    enr_notify_stopping();
    enr_log(ENR_LOG_INFO, "draining", "workers=%d drain_timeout_ms=%u", enr_children_live(m, 0),
            m->cfg.drain_timeout_ms);
    /* New connections fail fast at nginx instead of waiting in a backlog
     * nobody will serve; the ones already queued are drained (USR2). */
    if (m->listen_path[0] && unlink(m->listen_path) == 0)
        m->listen_path[0] = '\0';
    for (unsigned i = 0; i < ENR_SB_MAX_WORKERS; i++)
        if (m->w[i].pid > 0)
            enr_child_ask(&m->w[i], ENR_EXIT_STOP, ENR_STEP_DRAIN);
}

/* Takes the escalation steps that are due (child.c's table); a worker
 * killed is logged, with the reason it was asked to end for. */
static void escalate(master *m, uint64_t now)
{
    for (unsigned i = 0; i < ENR_SB_MAX_WORKERS; i++) {
        child *ch = &m->w[i];
        if (enr_child_escalate(ch, &m->cfg, now) == ENR_STEP_KILL)
            enr_log(ENR_LOG_WARN, "worker did not stop in time: SIGKILL",
                    "worker_pid=%ld slot=%u reason=%s", (long)ch->pid, i,
                    enr_exit_reason_name(ch->asked));
    }
    enr_child_escalate(&m->status, &m->cfg, now);
}

static uint64_t earliest(uint64_t t, uint64_t at)
{
    return at != 0 && at < t ? at : t;
}

/* How long the loop may sleep: until the first job, hold, deadline or
 * escalation step that is due. */
static uint64_t next_wakeup(const master *m, uint64_t now)
{
    uint64_t t = enr_reload_next(m, now);

    t = enr_master_jobs_next(m, t);
    if (ENR_SB_GET(m->sb->pool.crashloop) && m->hold_until > now)
        t = earliest(t, m->hold_until);
    if (m->status.pid == 0 && m->status_hold_until > now)
        t = earliest(t, m->status_hold_until);
    if (m->draining)
        t = earliest(t, m->drain_deadline);
    for (unsigned i = 0; i < ENR_SB_MAX_WORKERS; i++)
        t = earliest(t, enr_child_due(&m->w[i], &m->cfg));
    t = earliest(t, enr_child_due(&m->status, &m->cfg));
    return t > now ? t - now : 0;
}

static void cleanup(master *m)
{
    enr_config_secrets_free(&m->next_cfg, &m->cfg);
    enr_config_secrets_free(&m->cfg, NULL);
    if (m->listen_path[0])
        unlink(m->listen_path);
    if (m->status_path[0])
        unlink(m->status_path);
}

/* The one way out of the loop: whatever is left of the children is
 * killed and reaped (each exit logged and counted), the socket files
 * removed; returns the exit code to give. */
static int stop(master *m, int code)
{
    for (unsigned i = 0; i < ENR_SB_MAX_WORKERS; i++)
        enr_child_kill(&m->w[i]);
    enr_child_kill(&m->status);
    enr_children_reap(m, 0); /* after SIGKILL the children go at once: reaped for the log */
    cleanup(m);
    return code;
}

/* ---- main loop ------------------------------------------------------------ */
/* Time comparisons are written as `now >= t + delay`, never `now - t`:
 * a timestamp set during this loop turn (ask(), spawn()) can be later
 * than the turn's `now`, and an unsigned difference would wrap. */

static int setup_signals(sigset_t *wait_mask)
{
    sigset_t handled;

    if (enr_signals_install(master_signals, N_MASTER_SIGNALS, &handled) != 0)
        return -1;
    if (sigprocmask(SIG_BLOCK, &handled, wait_mask) != 0)
        return -1;
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(&handled, sig) == 1)
            sigdelset(wait_mask, sig);
    return 0;
}

/* Everything before the loop: signals, systemd, the scoreboard and the
 * cache (before the first fork: every child shares them), the sockets,
 * the readiness pipe, the shared libraries.  0, or -1 (logged). */
static int start_up(master *m, sigset_t *wait_mask)
{
    char err[512], q[600], served[ENR_PATH_MAX + 160], status_served[ENR_PATH_MAX + 160];
    int pipefd[2];

    m->start_ms = enr_mono_ms();
    m->listen_fd = m->status_fd = m->ready_r = m->ready_w = -1;
    enr_log_role("master");
    enr_proctitle_set("master");
    if (setup_signals(wait_mask) != 0) {
        enr_log(ENR_LOG_ERROR, "signal setup failed", "error=%s", enr_log_errno(errno));
        return -1;
    }
    m->watchdog_ms = enr_notify_init();
    m->sb = enr_sb_create();
    if (m->sb == NULL) {
        enr_log(ENR_LOG_ERROR, "scoreboard mmap failed", "error=%s", enr_log_errno(errno));
        return -1;
    }
    /* Before the first fork, like the scoreboard: every worker shares it. */
    if (enr_reload_cache_new(&m->cfg, &m->cache) != 0)
        return -1;
    m->next_cache = m->cache;
    enr_hook_budget_day();
    if (enr_budget_open(&m->cfg) != 0) /* before the first fork too */
        return -1;
    ENR_SB_SET(m->sb->pool.start_ms, enr_wall_ms());
    ENR_SB_SET(m->sb->pool.start_mono_ms, m->start_ms);
    ENR_SB_SET(m->sb->pool.workers, m->cfg.workers);
    m->sb->nslots = m->cfg.workers;
    m->activated = enr_listen_activated();
    if (m->cfg.idle_exit_s && !m->activated)
        enr_log(ENR_LOG_WARN,
                "idle_exit_s ignored: not socket-activated, nothing would start "
                "enrichd again",
                NULL);
    if (enr_listen_open(&m->cfg, &m->listen_fd, &m->status_fd, m->listen_path, m->status_path, err,
                        sizeof err) != 0) {
        enr_log(ENR_LOG_ERROR, "cannot open sockets", "error=%s", enr_log_quote(q, sizeof q, err));
        cleanup(m);
        return -1;
    }
    if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) != 0) {
        enr_log(ENR_LOG_ERROR, "pipe failed", "error=%s", enr_log_errno(errno));
        cleanup(m);
        return -1;
    }
    m->ready_r = pipefd[0];
    m->ready_w = pipefd[1];
    /* Before the first fork: shared libraries loaded once (worker.h). */
    if (enr_worker_preload(&m->cfg, err, sizeof err) != 0) {
        enr_log(ENR_LOG_ERROR, "upstream_url is set but libcurl cannot be loaded", "error=%s",
                enr_log_quote(q, sizeof q, err));
        cleanup(m);
        return -1;
    }
    enr_hook_announce();
    /* What is served, as the kernel says: under socket activation not
     * necessarily what the file says (enr_listen_open warned). */
    enr_log(
        ENR_LOG_INFO, "starting", "config=%s workers=%u activated=%d %s %s",
        enr_log_quote(q, sizeof q, m->cfg.source), m->cfg.workers, m->activated,
        enr_listen_describe(m->listen_fd, "listen", served, sizeof served),
        enr_listen_describe(m->status_fd, "status_listen", status_served, sizeof status_served));
    enr_master_jobs_start(m);
    m->last_completed_at = m->start_ms;
    m->health.healthy = 1;
    m->was_healthy = 1;
    m->health.liveness.live = 1;
    m->was_live = 1;
    return 0;
}

/* The flags the handlers set: children to reap, a drain, a stop, a
 * reload.  -1 to go on, or the process exit code. */
static int take_signals(master *m, uint64_t now)
{
    if (sig_term) {
        sig_term = 0;
        if (!m->draining) {
            begin_drain(m, now);
        } else {
            /* Like nginx and Gunicorn: a second TERM does not wait for
             * the drain, it stops at once as QUIT does. */
            enr_log(ENR_LOG_WARN, "second TERM while draining: stopping at once", NULL);
            sig_quit = 1;
        }
    }
    if (sig_quit) {
        enr_log(ENR_LOG_WARN, "quit: stopping at once", NULL);
        enr_notify_stopping();
        return stop(m, 0);
    }
    if (sig_hup) {
        sig_hup = 0;
        if (!m->draining)
            reload_start(m, enr_reload(m, now), now);
    }
    return -1;
}

/* A drain ends when the workers are gone (then the status process), or
 * at its deadline.  -1 to go on, or the process exit code. */
static int drain_step(master *m, uint64_t now)
{
    if (enr_children_live(m, 0) == 0) {
        if (m->status.pid > 0 && m->status.asked == ENR_EXIT_NONE)
            enr_child_ask(&m->status, ENR_EXIT_STOP, ENR_STEP_TERM);
        if (m->status.pid == 0) {
            enr_log(ENR_LOG_INFO, "stopped", "restarts=%" PRIu64, m->restarts);
            return stop(m, 0);
        }
    }
    if (now >= m->drain_deadline) {
        enr_log(ENR_LOG_WARN, "drain timeout: killing what is left", "workers=%d",
                enr_children_live(m, 0));
        return stop(m, 0);
    }
    return -1;
}

int enr_master_run(const enr_config *cfg, const char *cfg_path)
{
    /* Large (per-slot state): not on the stack.  Zero from the exec and
     * not cleared again: a memset would touch all its 61 KB, 16 page
     * faults of the cold start (~50 us each on a VM), where most of it
     * (the reload's configuration, unused slots) may never be written. */
    static master m;
    static int ran;
    sigset_t wait_mask;

    if (ran++) {
        enr_log(ENR_LOG_ERROR, "the master runs once per process", NULL);
        return 1;
    }
    m.cfg = *cfg;
    m.cfg_path = cfg_path;
    if (start_up(&m, &wait_mask) != 0)
        return 1;
    for (;;) {
        struct pollfd pfd = {.fd = m.ready_r, .events = POLLIN};
        struct timespec ts;
        uint64_t now, wait;
        int rc;

        enr_signals_report();
        if (sig_chld) {
            sig_chld = 0;
            enr_children_reap(&m, WNOHANG);
        }
        now = enr_mono_ms();
        if ((rc = take_signals(&m, now)) >= 0)
            return rc;
        if (pfd.fd >= 0)
            read_readiness(&m);
        if (m.draining) {
            if ((rc = drain_step(&m, now)) >= 0)
                return rc;
        } else {
            fill_pool(&m, now);
            reload_start(&m, enr_reload_check(&m, now), now);
            check_ready(&m, now);
        }
        escalate(&m, now);
        enr_master_judge(&m, now);
        enr_master_jobs_run(&m, now);
        if (m.idle_exit) {
            m.idle_exit = 0;
            begin_drain(&m, now);
        }
        wait = next_wakeup(&m, enr_mono_ms());
        /* Before READY, look often: readiness is a byte on the pipe, but
         * min_ready_workers after ENR_READY_WAIT_MS is a timer. */
        if (!m.ready_sent && wait > 50)
            wait = 50;
        /* The first answer ends a cold hold; it sends no byte. */
        if (!m.ready_sent && m.first_ready && enr_children_live(&m, 0) < (int)m.cfg.workers &&
            now < m.start_ms + ENR_READY_WAIT_MS && wait > ENR_COLD_POLL_MS)
            wait = ENR_COLD_POLL_MS;
        ts.tv_sec = (time_t)(wait / 1000);
        ts.tv_nsec = (long)(wait % 1000) * 1000000L;
        if (ppoll(&pfd, 1, &ts, &wait_mask) < 0 && errno != EINTR) {
            enr_log(ENR_LOG_ERROR, "ppoll failed", "error=%s", enr_log_errno(errno));
            return stop(&m, 1);
        }
    }
}
