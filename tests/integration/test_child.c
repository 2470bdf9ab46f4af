/*
 * test_child.c: the escalation table of child.c, walked on real child
 * processes with real signals: the step each reason enters at, when the
 * next one is due, what the master sends, and how the exit is classified.
 */
#include "pool/child.h"
#include "base/scoreboard.h"
#include "t.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* A child that ignores TERM (a worker stuck in a request), or ends with
 * exit code 0 on USR2 (a worker that drains and stops); it says on a
 * pipe that its handlers are in place. */
static void on_usr2(int sig)
{
    (void)sig;
    _exit(0);
}

static pid_t start(void)
{
    int p[2];
    char c;
    pid_t pid;

    if (pipe(p) != 0)
        abort();
    pid = fork();
    if (pid == 0) {
        signal(SIGTERM, SIG_IGN);
        signal(SIGUSR2, on_usr2);
        if (write(p[1], "r", 1) != 1)
            _exit(3);
        for (;;)
            pause();
    }
    close(p[1]);
    if (pid < 0 || read(p[0], &c, 1) != 1)
        abort();
    close(p[0]);
    return pid;
}

/* A child the step just taken must end: it has REAP_MS to do it, else
 * the check fails (in the caller's test) and the child is killed. */
#define REAP_MS 3000
#define reap(pid) reap_in(__func__, pid)

static int reap_in(const char *func, pid_t pid)
{
    int status = 0;

    T_CHECK_IN(func, t_wait_child(pid, REAP_MS, &status) == 0,
               "child %ld still running %d ms after the step that must end it: killed", (long)pid,
               REAP_MS);
    return status;
}

static enr_config cfg(void)
{
    enr_config c;
    memset(&c, 0, sizeof c);
    c.kill_grace_ms = 50;
    c.drain_timeout_ms = 700;
    return c;
}

/* A stuck worker: TERM, ignored; KILL exactly kill_grace_ms later; the
 * exit is the reason it was asked for, not a crash. */
static void test_term_then_kill(void)
{
    enr_config c = cfg();
    enr_child ch = {.pid = start()};
    char detail[64];
    uint64_t at;

    T_CHECK(enr_child_due(&ch, &c) == 0, "not asked: nothing due");
    enr_child_ask(&ch, ENR_EXIT_TIMEOUT, ENR_STEP_TERM);
    at = ch.step_at;
    T_CHECK(ch.asked == ENR_EXIT_TIMEOUT && ch.step == ENR_STEP_TERM, "asked: TERM step");
    T_CHECK(enr_child_due(&ch, &c) == at + 50, "KILL due kill_grace_ms after TERM");
    T_CHECK(enr_child_escalate(&ch, &c, at + 49) == ENR_STEP_NONE, "not before it is due");
    T_CHECK(kill(ch.pid, 0) == 0, "TERM ignored: still alive");
    enr_child_ask(&ch, ENR_EXIT_RELOAD, ENR_STEP_TERM);
    T_CHECK(ch.asked == ENR_EXIT_TIMEOUT && ch.step_at == at, "asked again: reason and clock kept");
    T_CHECK(enr_child_escalate(&ch, &c, at + 50) == ENR_STEP_KILL, "KILL when due");
    T_CHECK(enr_child_due(&ch, &c) == 0, "nothing after KILL");
    T_CHECK(enr_child_classify(&ch, reap(ch.pid), detail, sizeof detail) == ENR_EXIT_TIMEOUT,
            "killed by the master: the reason asked for");
    T_STREQ(detail, "signal=KILL");
}

/* A SIGKILL the master did not send (OOM killer, kill -9) is a crash,
 * even for a child that was asked to end. */
static void test_outside_kill_is_crash(void)
{
    enr_config c = cfg();
    enr_child ch = {.pid = start()};
    char detail[64];

    enr_child_ask(&ch, ENR_EXIT_RSS, ENR_STEP_TERM);
    kill(ch.pid, SIGKILL);
    T_CHECK(enr_child_classify(&ch, reap(ch.pid), detail, sizeof detail) == ENR_EXIT_CRASH,
            "an outside SIGKILL is a crash");
    T_CHECK(enr_child_due(&ch, &c) != 0, "(the master had not taken the KILL step)");
}

/* A stop overrides any reason: the child drains (USR2) with
 * drain_timeout_ms before KILL, and exits 0 as asked. */
static void test_drain(void)
{
    enr_config c = cfg();
    enr_child ch = {.pid = start()};
    char detail[64];

    enr_child_ask(&ch, ENR_EXIT_RELOAD, ENR_STEP_TERM);
    enr_child_ask(&ch, ENR_EXIT_STOP, ENR_STEP_DRAIN);
    T_CHECK(ch.asked == ENR_EXIT_STOP && ch.step == ENR_STEP_DRAIN, "stop overrides reload");
    T_CHECK(enr_child_due(&ch, &c) == ch.step_at + 700, "KILL due drain_timeout_ms after USR2");
    T_CHECK(enr_child_classify(&ch, reap(ch.pid), detail, sizeof detail) == ENR_EXIT_STOP,
            "drained and exited 0: stop");
    T_STREQ(detail, "exit_code=0");
}

/* A worker that obeys a TERM, QUIT or USR2 someone else sent (kill -USR2
 * of one worker) exits 0 unasked: a stop on a signal, not an error. */
static void test_outside_stop(void)
{
    enr_child ch = {.pid = start()};
    char detail[64];

    kill(ch.pid, SIGUSR2);
    T_CHECK(enr_child_classify(&ch, reap(ch.pid), detail, sizeof detail) == ENR_EXIT_SIGNAL,
            "unasked exit 0: reason signal");
    T_STREQ(enr_exit_reason_name(ENR_EXIT_SIGNAL), "signal");
    T_STREQ(detail, "exit_code=0");
}

/* The master's way out: KILL at once, STOP unless a reason was asked;
 * a stop after KILL changes the reason but sends nothing more. */
static void test_kill_now(void)
{
    enr_child a = {.pid = start()}, b = {.pid = start()}, none = {0};
    char detail[64];

    enr_child_kill(&a);
    T_CHECK(a.asked == ENR_EXIT_STOP && a.step == ENR_STEP_KILL, "unasked: STOP, KILL");
    T_CHECK(enr_child_classify(&a, reap(a.pid), detail, sizeof detail) == ENR_EXIT_STOP, "stop");
    enr_child_ask(&b, ENR_EXIT_FD, ENR_STEP_KILL);
    enr_child_ask(&b, ENR_EXIT_STOP, ENR_STEP_DRAIN);
    T_CHECK(b.asked == ENR_EXIT_STOP && b.step == ENR_STEP_KILL, "no step back from KILL");
    reap(b.pid);
    enr_child_ask(&none, ENR_EXIT_STOP, ENR_STEP_TERM);
    T_CHECK(none.asked == ENR_EXIT_NONE && none.step == ENR_STEP_NONE, "no process: nothing");
}

static void test_backoff(void)
{
    uint64_t d = 0;

    d = enr_backoff_next(d, ENR_BACKOFF_MIN_MS);
    T_CHECK(d == ENR_BACKOFF_MIN_MS, "first delay");
    d = enr_backoff_next(d, ENR_BACKOFF_MIN_MS);
    T_CHECK(d == 2 * ENR_BACKOFF_MIN_MS, "doubles");
    for (int i = 0; i < 20; i++)
        d = enr_backoff_next(d, ENR_BACKOFF_MIN_MS);
    T_CHECK(d == ENR_BACKOFF_MAX_MS, "capped at ENR_BACKOFF_MAX_MS");
}

int main(void)
{
    test_term_then_kill();
    test_outside_kill_is_crash();
    test_drain();
    test_outside_stop();
    test_kill_now();
    test_backoff();
    T_DONE();
}
