/*
 * t.h: the unit-test harness.  Each test binary prints one line per
 * failed check and ends with "N passed, M failed"; tests/run.py sums
 * these lines.  A check is one assertion, so a count means something;
 * the functions that made checks are the tests, counted apart
 * ("tests: N run, M failed").
 */
#ifndef ENR_T_H
#define ENR_T_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

static int t_pass, t_fail;

/* The functions that made checks, and whether each had a failure. */
#define T_MAX_FUNCS 512
static const char *t_funcs[T_MAX_FUNCS];
static char t_func_failed[T_MAX_FUNCS];
static int t_nfuncs;

static inline int t_func(const char *f)
{
    for (int i = 0; i < t_nfuncs; i++)
        if (t_funcs[i] == f)
            return i;
    if (t_nfuncs == T_MAX_FUNCS)
        return T_MAX_FUNCS - 1;
    t_funcs[t_nfuncs] = f;
    return t_nfuncs++;
}

static inline int t_funcs_failed(void)
{
    int n = 0;
    for (int i = 0; i < t_nfuncs; i++)
        n += t_func_failed[i];
    return n;
}

#define T_CHECK(cond, ...) T_CHECK_IN(__func__, cond, __VA_ARGS__)

/* A time goal, no deadline the product enforces: printed, met or missed,
 * with its value against its bound, and never counted (make bench-goals
 * reads the line, as it reads the Python suites' Results.goal). */
#define T_GOAL(value, bound, what)                                                                 \
    printf("goal %s: %s [value=%g bound=%g]\n", (value) <= (bound) ? "met" : "missed", what,       \
           (double)(value), (double)(bound))

/* A check counted for the test func (a helper passes its caller's
 * __func__). */
#define T_CHECK_IN(func, cond, ...)                                                                \
    do {                                                                                           \
        int t_i_ = t_func(func);                                                                   \
        if (cond) {                                                                                \
            t_pass++;                                                                              \
        } else {                                                                                   \
            t_fail++;                                                                              \
            t_func_failed[t_i_] = 1;                                                               \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            fflush(stdout);                                                                        \
        }                                                                                          \
    } while (0)

/* Waits at most ms for child pid to end; 0 with its wait status in
 * *status, or -1 when it did not: it is then killed and reaped, never
 * left running after the test. */
static inline int t_wait_child(pid_t pid, unsigned ms, int *status)
{
    struct timespec tick = {0, 1000000L};

    for (unsigned waited = 0;; waited++) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
        if (waited >= ms)
            break;
        nanosleep(&tick, NULL);
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
    return -1;
}

#define T_STREQ(got, want)                                                                         \
    T_CHECK(strcmp((got), (want)) == 0, "got \"%s\", want \"%s\"", (got), (want))

#define T_DONE()                                                                                   \
    do {                                                                                           \
        printf("tests: %d run, %d failed\n", t_nfuncs, t_funcs_failed());                          \
        printf("%d passed, %d failed\n", t_pass, t_fail);                                          \
        return t_fail ? 1 : 0;                                                                     \
    } while (0)

#endif
