/*
 * signals.c: every signal's disposition from one table per process
 * (signals.h).
 *
 * Invariants: the handler reads only what enr_signals_install() wrote
 * before any signal was taken, writes only sig_atomic_t counters and the
 * owner's flags, and calls only async-signal-safe functions (sigaction,
 * raise) for a real fault, which goes to the action that was there before
 * (the default, or a sanitizer's handler, so its report is not lost).  A signal is counted in its
 * own slot, and a handler never runs inside itself for the same signal (no SA_NODEFER), so counting
 * needs no atomics.  The log lines are written by enr_signals_report(), from the process's loop,
 * never from the handler.
 */
#include "base/signals.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"

/* One line a second per signal at most: a flood of kill -USR1 must not
 * become a flood of log lines. */
#define REPORT_INTERVAL_MS 1000

static volatile sig_atomic_t *flags[NSIG];
static const char *whys[NSIG];
static volatile sig_atomic_t noted[NSIG];     /* counted by the handler */
static volatile sig_atomic_t noted_pid[NSIG]; /* the last sender */
static sig_atomic_t reported[NSIG];           /* the count as last logged */
static uint64_t reported_ms[NSIG];
/* A fault signal's action before ours (the default, or a sanitizer's):
 * what a real fault gets. */
static struct sigaction before[NSIG];

static int is_fault(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP ||
           sig == SIGSYS;
}

/* Left at the kernel's default unless a rule says otherwise (signals.h). */
static int keeps_default(int sig)
{
    return sig == SIGCHLD || sig == SIGCONT || sig == SIGWINCH || sig == SIGURG || sig == SIGABRT;
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (sig <= 0 || sig >= NSIG)
        return;
    /* si_code > 0: made by the kernel for this thread (a real fault):
     * the action before ours (the default: the process ends with its
     * core; a sanitizer's: its report) takes it as it would have.  The
     * faulting instruction runs again on return and faults again; a
     * SIGSYS or SIGTRAP does not, and is raised. */
    if (is_fault(sig) && si != NULL && si->si_code > 0) {
        sigaction(sig, &before[sig], NULL);
        if (sig == SIGSYS || sig == SIGTRAP)
            raise(sig); /* pending until we return, then delivered */
        return;
    }
    if (flags[sig] != NULL) {
        *flags[sig] = 1;
        return;
    }
    noted[sig]++;
    noted_pid[sig] = si != NULL ? (sig_atomic_t)si->si_pid : 0;
}

static const enr_sig_rule *rule_of(const enr_sig_rule *rules, size_t n, int sig)
{
    for (size_t i = 0; i < n; i++)
        if (rules[i].sig == sig)
            return &rules[i];
    return NULL;
}

int enr_signals_install(const enr_sig_rule *rules, size_t n, sigset_t *handled)
{
    sigemptyset(handled);
    for (int sig = 1; sig < NSIG; sig++) {
        const enr_sig_rule *r = rule_of(rules, n, sig);
        struct sigaction sa;
        int what = r != NULL ? r->what : ENR_SIG_NOTE;

        /* glibc keeps 32 and 33 for itself: they are not ours to set. */
        if (sig == SIGKILL || sig == SIGSTOP || (sig > 31 && sig < SIGRTMIN))
            continue;
        if (what == ENR_SIG_KEEP)
            continue;
        if (is_fault(sig) && r == NULL) {
            struct sigaction cur;
            if (sigaction(sig, NULL, &cur) != 0)
                return -1;
            if (!(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != on_signal)
                before[sig] = cur; /* not ours already (a forked child's) */
        }
        memset(&sa, 0, sizeof sa);
        sigemptyset(&sa.sa_mask);
        flags[sig] = r != NULL && what == ENR_SIG_FLAG ? r->flag : NULL;
        whys[sig] = r != NULL ? r->why : NULL;
        if (r == NULL && keeps_default(sig)) {
            /* Set, not left: a forked child must not keep its parent's. */
            sa.sa_handler = SIG_DFL;
        } else if (what == ENR_SIG_IGNORE) {
            sa.sa_handler = SIG_IGN;
        } else {
            /* No SA_RESTART: a wait the signal ends must return (EINTR). */
            sa.sa_flags = SA_SIGINFO;
            sa.sa_sigaction = on_signal;
            sigaddset(handled, sig);
        }
        if (sigaction(sig, &sa, NULL) != 0) {
            /* A real-time signal the environment keeps for itself (valgrind
             * takes one) is not ours to set either; any other refusal is. */
            if (errno == EINVAL && sig >= SIGRTMIN) {
                sigdelset(handled, sig);
                continue;
            }
            return -1;
        }
    }
    return 0;
}

const char *enr_signal_name(int sig, char *buf, size_t len)
{
    const char *abbrev = sig > 0 && sig < SIGRTMIN ? sigabbrev_np(sig) : NULL;

    if (abbrev != NULL)
        snprintf(buf, len, "%s", abbrev);
    else if (sig >= SIGRTMIN && sig <= SIGRTMAX)
        snprintf(buf, len, "RTMIN+%d", sig - SIGRTMIN);
    else
        snprintf(buf, len, "%d", sig);
    return buf;
}

void enr_signals_report(void)
{
    uint64_t now = 0;

    for (int sig = 1; sig < NSIG; sig++) {
        sig_atomic_t count = noted[sig];
        char name[16], q[160];

        if (count == reported[sig])
            continue;
        if (now == 0)
            now = enr_mono_ms();
        if (reported_ms[sig] != 0 && now < reported_ms[sig] + REPORT_INTERVAL_MS)
            continue;
        enr_log(ENR_LOG_WARN, "signal ignored", "signal=%s sender_pid=%ld count=%ld%s%s",
                enr_signal_name(sig, name, sizeof name), (long)noted_pid[sig],
                (long)(count - reported[sig]), whys[sig] ? " why=" : "",
                whys[sig] ? enr_log_quote(q, sizeof q, whys[sig]) : "");
        reported[sig] = count;
        reported_ms[sig] = now;
    }
}
