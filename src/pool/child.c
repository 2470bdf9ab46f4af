/*
 * child.c: how the master ends a child process, as data.
 *
 * Ending a child is a walk down a table of steps, each a signal, how long
 * the child has to obey it, and the step that follows if it does not
 * (nginx signals its workers then kills what is left after a timer;
 * Gunicorn's graceful_timeout and php-fpm's process_control_timeout are
 * the same idea).  Every reason to end a child (a stuck request, a hard
 * limit, a reload, a stop) enters the walk at a step; one function takes
 * the steps (enr_child_escalate), and one predicate says when the next is
 * due (enr_child_due), for acting and for sleeping alike.
 *
 * Whether a busy worker's request has outlived its deadlines, the
 * reason the master asks it to end, is decided here too
 * (enr_child_request_stuck).
 *
 * Invariants:
 *  - This file sends every signal the master sends to a child, and only
 *    to a pid the master has not reaped (pid > 0), so never to a reused
 *    pid.
 *  - KILL is the last step: after it nothing is sent, and only a SIGKILL
 *    the master sent is the reason it was sent for (any other is a crash:
 *    the OOM killer, an operator's kill -9).
 *  - The draining step waits drain_timeout_ms from the stop, the same
 *    instant the pool's own drain deadline ends the master (master.c),
 *    which comes first in the loop: it logs why and kills what is left.
 */
#include "pool/child.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "base/log.h"
#include "base/scoreboard.h"
#include "pool/worker.h"
#include "base/clock.h"

/* Where a step's delay comes from. */
enum wait_for { WAIT_NONE, WAIT_KILL_GRACE, WAIT_DRAIN };

static const struct step {
    int sig;
    enum wait_for delay; /* before the next step */
    enum enr_step next;  /* ENR_STEP_NONE: the last */
} steps[] = {
    [ENR_STEP_NONE] = {0, WAIT_NONE, ENR_STEP_NONE},
    [ENR_STEP_TERM] = {SIGTERM, WAIT_KILL_GRACE, ENR_STEP_KILL},
    [ENR_STEP_DRAIN] = {SIGUSR2, WAIT_DRAIN, ENR_STEP_KILL},
    [ENR_STEP_KILL] = {SIGKILL, WAIT_NONE, ENR_STEP_NONE},
};
#define N_STEPS (sizeof steps / sizeof steps[0])

static uint64_t delay_ms(enum wait_for w, const enr_config *c)
{
    switch (w) {
    case WAIT_KILL_GRACE:
        return c->kill_grace_ms;
    case WAIT_DRAIN:
        return c->drain_timeout_ms;
    default:
        return 0;
    }
}

static void take(enr_child *ch, int step)
{
    int sig = steps[step].sig;

    ch->step = step;
    ch->step_at = enr_mono_ms();
    if (kill(ch->pid, sig) != 0 && errno != ESRCH)
        enr_log(ENR_LOG_ERROR, "kill failed", "child_pid=%ld signal=%s error=%s", (long)ch->pid,
                sigabbrev_np(sig) ? sigabbrev_np(sig) : "?", enr_log_errno(errno));
}

void enr_child_ask(enr_child *ch, int reason, int step)
{
    if (ch->pid <= 0)
        return;
    if (ch->asked != ENR_EXIT_NONE && reason != ENR_EXIT_STOP)
        return; /* on its way out already, on its own clock */
    ch->asked = reason;
    if (ch->step != ENR_STEP_KILL)
        take(ch, step);
}

void enr_child_kill(enr_child *ch)
{
    if (ch->pid <= 0)
        return;
    if (ch->asked == ENR_EXIT_NONE)
        ch->asked = ENR_EXIT_STOP;
    if (ch->step != ENR_STEP_KILL)
        take(ch, ENR_STEP_KILL);
}

uint64_t enr_child_due(const enr_child *ch, const enr_config *cfg)
{
    const struct step *s = &steps[ch->step];

    if (ch->pid <= 0 || s->next == ENR_STEP_NONE)
        return 0;
    return ch->step_at + delay_ms(s->delay, cfg);
}

int enr_child_escalate(enr_child *ch, const enr_config *cfg, uint64_t now)
{
    uint64_t due = enr_child_due(ch, cfg);

    if (due == 0 || now < due)
        return ENR_STEP_NONE;
    take(ch, steps[ch->step].next);
    return ch->step;
}

/* Whether sig is one the master sent ch: any step's signal up to the one
 * ch is at (TERM before a drain, say), KILL only once that step is taken. */
static int sent(const enr_child *ch, int sig)
{
    for (size_t i = ENR_STEP_TERM; i < N_STEPS; i++)
        if (steps[i].sig == sig && (i != ENR_STEP_KILL || ch->step == ENR_STEP_KILL))
            return ch->asked != ENR_EXIT_NONE;
    return 0;
}

int enr_child_classify(const enr_child *ch, int status, char *detail, size_t len)
{
    if (WIFEXITED(status)) {
        int code = WEXITSTATUS(status);
        snprintf(detail, len, "exit_code=%d", code);
        if (code == ENR_WORKER_EXIT_STOPPED)
            /* Unasked: someone else's TERM, QUIT or USR2, obeyed. */
            return ch->asked != ENR_EXIT_NONE ? ch->asked : ENR_EXIT_SIGNAL;
        if (code > ENR_WORKER_EXIT_RECYCLE && code < ENR_WORKER_EXIT_RECYCLE + ENR_EXIT_REASONS)
            return code - ENR_WORKER_EXIT_RECYCLE;
        return ENR_EXIT_ERROR;
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        snprintf(detail, len, "signal=%s", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
        /* Dying of the signal we sent is the reason we sent it for; any
         * other signal (SIGABRT from libfcgi's CVE-2025-23016 assert,
         * SIGSEGV, an outside kill -9) is a crash. */
        return sent(ch, sig) ? ch->asked : ENR_EXIT_CRASH;
    }
    snprintf(detail, len, "status=%d", status);
    return ENR_EXIT_ERROR;
}

uint64_t enr_backoff_next(uint64_t cur, uint64_t first)
{
    if (cur == 0)
        return first;
    return cur * 2 > ENR_BACKOFF_MAX_MS ? ENR_BACKOFF_MAX_MS : cur * 2;
}

/* A busy worker is stuck past request_timeout_ms of work, or past twice
 * write_timeout_ms of writing its answer.  A write waits on nginx (a slow
 * client with nginx's buffers full), not on the worker, so it is not held
 * to the request's deadline; the worker itself resets a write not done
 * within about write_timeout_ms (fcgi_stream.c), and this catches a worker
 * that cannot even do that.
 * Both clocks are monotonic: an NTP step must not age (or hide) a request. */
int enr_child_request_stuck(const enr_config *c, const enr_sb_slot *s, uint64_t mono_now)
{
    uint64_t ws = ENR_SB_GET(s->write_start_mono_ms);
    uint64_t work = ENR_SB_GET(s->work_start_mono_ms);

    if (ws != 0)
        return mono_now > ws && mono_now - ws > 2 * (uint64_t)c->write_timeout_ms;
    if (work != 0)
        return mono_now > work && mono_now - work > c->request_timeout_ms;
    /* Still reading its body, which has its own deadline (body_timeout_ms)
     * and then an answer to give. */
    return enr_sb_request_age_ms(s, mono_now) >
           (uint64_t)c->body_timeout_ms + c->request_timeout_ms;
}
