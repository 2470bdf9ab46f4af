/*
 * children.c: the master's bookkeeping of its children once they run:
 * how many are live, each exit reaped, classified, logged and counted,
 * and the crash-loop guard that exits feed (its onset here, on an early
 * death; its end here too, once a worker outlives the window).  The
 * fork is master.c's; how a child is asked to end is child.c's.
 *
 * Invariants:
 *  - Every child exit is classified once, in child_exited(): the reason
 *    the master asked for (recycle, timeout, reload, stop), the reason
 *    the worker gave in its exit code (soft limits), a crash (a signal
 *    the master did not send, e.g. SIGABRT from libfcgi) or a failure.
 *    It is logged and counted in the scoreboard before the slot is
 *    reused; the loop's reaping and stop() both come through
 *    enr_children_reap().
 *  - Slot i of the scoreboard belongs to pool position i: an exit clears
 *    what the process can no longer write and keeps the slot's counters,
 *    cumulative over everything that ever ran in that position.
 *  - A probe's death is its configuration's failure (reload.c), never
 *    the running pool's crash loop.
 */
#include "pool/children.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/wait.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/scoreboard.h"
#include "pool/reload.h"

typedef enr_master master;
typedef enr_child child;

int enr_children_live(const master *m, int ready_only)
{
    int n = 0;
    for (unsigned i = 0; i < ENR_SB_MAX_WORKERS; i++)
        if (m->w[i].pid > 0 && (!ready_only || m->w[i].ready))
            n++;
    return n;
}

static void crashloop_note(master *m, int reason, uint64_t lifetime, uint64_t now)
{
    if ((reason != ENR_EXIT_CRASH && reason != ENR_EXIT_ERROR) || lifetime >= ENR_EARLY_DEATH_MS) {
        if (lifetime >= ENR_EARLY_DEATH_MS)
            m->early_deaths = 0;
        return;
    }
    m->early_deaths++;
    if (!ENR_SB_GET(m->sb->pool.crashloop)) {
        if (m->early_deaths < ENR_CRASHLOOP_THRESHOLD)
            return;
        m->backoff_ms = ENR_BACKOFF_MIN_MS;
        ENR_SB_SET(m->sb->pool.crashloop, 1);
    } else if (now >= m->hold_until) {
        /* A probe started after the last hold died early too. */
        m->backoff_ms = enr_backoff_next(m->backoff_ms, ENR_BACKOFF_MIN_MS);
    } else {
        return; /* more deaths of the same wave: one hold is enough */
    }
    m->hold_until = now + m->backoff_ms;
    ENR_SB_SET(m->sb->pool.backoff_ms, m->backoff_ms);
    enr_log(ENR_LOG_ERROR, "crash loop: holding forks", "early_deaths=%u backoff_ms=%" PRIu64,
            m->early_deaths, m->backoff_ms);
}

static void worker_exited(master *m, unsigned slot, int status, uint64_t now)
{
    child *ch = &m->w[slot];
    enr_sb_slot *s = &m->sb->slot[slot];
    enr_sb_pool *p = &m->sb->pool;
    char detail[64], rid[ENR_SB_REQID_MAX], qrid[96];
    int reason = enr_child_classify(ch, status, detail, sizeof detail);
    uint64_t lifetime = now > ch->started ? now - ch->started : 0;
    uint64_t age = enr_sb_request_age_ms(s, now);

    memcpy(rid, s->req_id, sizeof rid);
    rid[sizeof rid - 1] = '\0';
    if (ENR_SB_GET(s->req_start_mono_ms) == 0 || ENR_SB_GET(s->state) != ENR_WS_BUSY)
        rid[0] = '\0';
    ENR_SB_ADD(p->exits[reason], 1);
    ENR_SB_ADD(s->restarts, 1);
    ENR_SB_SET(s->last_exit_reason, (uint64_t)reason);
    ENR_SB_SET(s->last_exit_pid, (int64_t)ch->pid);
    ENR_SB_SET(s->last_exit_req_age_ms, age);
    memcpy(s->last_exit_req_id, rid, sizeof rid);
    if (reason != ENR_EXIT_STOP)
        m->restarts++; /* a stop is an end, not a restart */
    enr_log(reason == ENR_EXIT_CRASH || reason == ENR_EXIT_ERROR ? ENR_LOG_ERROR : ENR_LOG_INFO,
            "worker exit",
            "worker_pid=%ld slot=%u reason=%s %s served=%" PRIu64 " rss_kb=%" PRIu64 " fds=%" PRIu64
            " lifetime_ms=%" PRIu64 "%s%s",
            (long)ch->pid, slot, enr_exit_reason_name(reason), detail, ENR_SB_GET(s->served),
            ENR_SB_GET(s->rss_kb), ENR_SB_GET(s->fds), lifetime, rid[0] ? " req_id=" : "",
            rid[0] ? enr_log_quote(qrid, sizeof qrid, rid) : "");
    if (age)
        enr_log(ENR_LOG_WARN, "request lost with its worker", "req_id=%s req_age_ms=%" PRIu64,
                enr_log_quote(qrid, sizeof qrid, rid), age);
    /* The process is gone: the master clears what it can no longer write. */
    ENR_SB_SET(s->pid, 0);
    ENR_SB_SET(s->state, ENR_WS_EMPTY);
    ENR_SB_SET(s->req_start_ms, 0);
    ENR_SB_SET(s->write_start_mono_ms, 0);
    ENR_SB_SET(s->work_start_mono_ms, 0);
    ENR_SB_SET(s->req_start_mono_ms, 0);
    /* A probe's death is its configuration's failure, not the running
     * pool's crash loop: the old generation is fine. */
    if (!enr_reload_probe_exited(m, slot, enr_exit_reason_name(reason), detail, now))
        crashloop_note(m, reason, lifetime, now);
    memset(ch, 0, sizeof *ch);
}

static void status_exited(master *m, int status, uint64_t now)
{
    child *ch = &m->status;
    char detail[64];
    int reason = enr_child_classify(ch, status, detail, sizeof detail);
    uint64_t lifetime = now > ch->started ? now - ch->started : 0;

    enr_log(reason == ENR_EXIT_CRASH || reason == ENR_EXIT_ERROR ? ENR_LOG_ERROR : ENR_LOG_INFO,
            "status process exit", "child_pid=%ld reason=%s %s lifetime_ms=%" PRIu64, (long)ch->pid,
            enr_exit_reason_name(reason), detail, lifetime);
    if ((reason == ENR_EXIT_CRASH || reason == ENR_EXIT_ERROR) && lifetime < ENR_EARLY_DEATH_MS) {
        m->status_backoff = enr_backoff_next(m->status_backoff, ENR_BACKOFF_MIN_MS);
        m->status_hold_until = now + m->status_backoff;
    } else {
        m->status_backoff = 0;
    }
    memset(ch, 0, sizeof *ch);
}

/* The one child-exit handler: the loop's reaping (running) and stop()
 * (stopping) both come here, so an exit is classified, logged and counted alike. */
static void child_exited(master *m, pid_t pid, int status)
{
    uint64_t now = enr_mono_ms();

    if (pid == m->status.pid) {
        status_exited(m, status, now);
        return;
    }
    for (unsigned i = 0; i < ENR_SB_MAX_WORKERS; i++)
        if (m->w[i].pid == pid) {
            worker_exited(m, i, status, now);
            return;
        }
}

/* Reaps every child that has ended (flags: WNOHANG, or 0 to wait for
 * them all); returns when none is left to reap. */
void enr_children_reap(master *m, int flags)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, flags);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid <= 0)
            return;
        child_exited(m, pid, status);
    }
}

/* A crash loop is over once some worker has lived past the window. */
void enr_children_crashloop_end(master *m, uint64_t now)
{
    if (!ENR_SB_GET(m->sb->pool.crashloop))
        return;
    for (unsigned i = 0; i < ENR_SB_MAX_WORKERS; i++) {
        if (m->w[i].pid > 0 && m->w[i].ready && now >= m->w[i].started + ENR_EARLY_DEATH_MS) {
            ENR_SB_SET(m->sb->pool.crashloop, 0);
            ENR_SB_SET(m->sb->pool.backoff_ms, 0);
            m->early_deaths = 0;
            m->backoff_ms = 0;
            enr_log(ENR_LOG_INFO, "crash loop over", "worker_pid=%ld", (long)m->w[i].pid);
            break;
        }
    }
}
