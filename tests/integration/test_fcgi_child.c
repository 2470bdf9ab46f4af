/*
 * test_fcgi_child.c: the start-up every FastCGI child shares, on real
 * processes: it ties the child to its master (a master gone before it
 * started is seen; a master that dies later takes the child with it, by
 * KILL, whatever the child's own signals) and leaves the child's handled
 * signals blocked.
 */
#include "fcgi/fcgi_child.h"
#include "t.h"

#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

/* As a worker's and the status process's: TERM only sets a flag. */
static const enr_sig_rule rules[] = {
    {SIGTERM, ENR_SIG_FLAG, &stop, NULL},
    {SIGPIPE, ENR_SIG_IGNORE, NULL, NULL},
};

static enr_fcgi_child spec(pid_t master)
{
    enr_fcgi_child c = {"test", "test child", "master gone before the test child started",
                        master, rules,        sizeof rules / sizeof rules[0]};
    return c;
}

/* Runs the start-up in a child of this process; its exit code says:
 * 0 started with TERM blocked and KILL as the parent-death signal, 1 the
 * start-up refused, 2 started but not so. */
static int started(pid_t master)
{
    pid_t pid = fork();
    int st;

    if (pid == 0) {
        enr_fcgi_child c = spec(master == 0 ? getppid() : master);
        sigset_t wait_mask, now;
        int sig = 0;
        if (enr_fcgi_child_start(&c, &wait_mask) != 0)
            _exit(1);
        if (prctl(PR_GET_PDEATHSIG, &sig) != 0 || sig != SIGKILL ||
            sigprocmask(SIG_SETMASK, NULL, &now) != 0 || !sigismember(&now, SIGTERM) ||
            sigismember(&wait_mask, SIGTERM))
            _exit(2);
        _exit(0);
    }
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

static void test_start(void)
{
    T_CHECK(started(0) == 0, "the child starts: TERM blocked, KILL on the master's death");
    T_CHECK(started(getpid() + 100000) == 1, "a master that is not our parent: refused");
}

/* A master that dies after the start-up: its child, waiting with TERM
 * handled as a flag, is killed (this process adopts it to see how). */
static void test_dies_with_master(void)
{
    int p[2], st = 0;
    pid_t master, child = 0;

    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0 || pipe(p) != 0)
        abort();
    master = fork();
    if (master == 0) {
        int q[2];
        char r;
        pid_t c;
        if (pipe(q) != 0)
            _exit(3);
        c = fork();
        if (c == 0) {
            enr_fcgi_child s = spec(getppid());
            sigset_t wait_mask;
            if (enr_fcgi_child_start(&s, &wait_mask) != 0 || write(q[1], "r", 1) != 1)
                _exit(1);
            for (int i = 0; i < 100 && !stop; i++) /* bounded: 100 signals */
                sigsuspend(&wait_mask);
            _exit(0);
        }
        /* Dies once its child has started, not before. */
        close(q[1]);
        if (c < 0 || read(q[0], &r, 1) != 1 || write(p[1], &c, sizeof c) != (ssize_t)sizeof c)
            _exit(3);
        _exit(0);
    }
    close(p[1]);
    T_CHECK(read(p[0], &child, sizeof child) == (ssize_t)sizeof child && child > 0,
            "the master's child started");
    waitpid(master, NULL, 0);
    if (child > 0) {
        T_CHECK(waitpid(child, &st, 0) == child, "the orphan was reaped here");
        T_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
                "the child died with its master, by KILL: status %#x", (unsigned)st);
    }
    close(p[0]);
}

int main(void)
{
    test_start();
    test_dies_with_master();
    T_DONE();
}
