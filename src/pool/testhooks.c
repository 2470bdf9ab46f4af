/*
 * testhooks.c: the test build's hooks (testhooks.h), built only with
 * -DENR_TEST_HOOKS; in any other build this file defines nothing.
 *
 * Such a build says so wherever an operator looks: `enrichd -V`'s first
 * line and a warning in the master's log at start.
 *
 * Driven by the worker's environment (read once, at its start) and by
 * request headers (each request):
 *  - ENRICHD_TEST_LEAK="fd:N mem:K": every request leaves N descriptors
 *    and K KB of touched memory behind (the recycling tests);
 *  - ENRICHD_TEST_CRASH_FILE=PATH: the worker aborts at start while PATH
 *    exists (the crash-loop guard);
 *  - ENRICHD_TEST_START_DELAY_MS: the worker is slow to start, so a test
 *    can kill the master before the worker's PR_SET_PDEATHSIG;
 *  - ENRICHD_TEST_PLANT=odd: an answer of odd length gets the first digit
 *    of its first hash changed (the canary test counts the differences);
 *  - X-Test-Hang-Ms: a stuck request before the engine (the master's
 *    kill); X-Test-Sleep-Ms: slow work after it (the worker's deadline).
 *
 * Invariant: a worker is one process serving one request at a time, so
 * the hooks' state is this file's own statics.
 */
#include "pool/testhooks.h"

#ifdef ENR_TEST_HOOKS

#include <errno.h>
#include <fcgiapp.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "upstream/budget.h"

static unsigned leak_fds, leak_kb;

static void sleep_ms(unsigned long ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void sleep_param(char **envp, const char *param)
{
    const char *v = FCGX_GetParam(param, envp);

    if (v != NULL)
        sleep_ms(strtoul(v, NULL, 10));
}

void enr_hook_start_delay(void)
{
    const char *v = getenv("ENRICHD_TEST_START_DELAY_MS");

    if (v != NULL)
        sleep_ms(strtoul(v, NULL, 10));
}

void enr_hook_init(void)
{
    const char *leak = getenv("ENRICHD_TEST_LEAK");
    const char *crash = getenv("ENRICHD_TEST_CRASH_FILE");

    if (leak != NULL) {
        const char *p = strstr(leak, "fd:");
        const char *m = strstr(leak, "mem:");
        if (p)
            leak_fds = (unsigned)strtoul(p + 3, NULL, 10);
        if (m)
            leak_kb = (unsigned)strtoul(m + 4, NULL, 10);
    }
    if (crash != NULL && access(crash, F_OK) == 0)
        abort();
}

void enr_hook_hang(char **envp)
{
    sleep_param(envp, "HTTP_X_TEST_HANG_MS");
}

void enr_hook_slow(char **envp)
{
    sleep_param(envp, "HTTP_X_TEST_SLEEP_MS");
}

void enr_hook_plant(enr_buf *out)
{
    const char *plant = getenv("ENRICHD_TEST_PLANT");

    if (plant != NULL && strcmp(plant, "odd") == 0 && out->len > 10 && (out->len & 1))
        out->data[9] = out->data[9] == 'x' ? 'y' : 'x';
}

void enr_hook_leak(void)
{
    for (unsigned i = 0; i < leak_fds; i++)
        if (open("/dev/null", O_RDONLY | O_CLOEXEC) < 0)
            break;
    if (leak_kb) {
        static void *volatile leaked; /* a chain the compiler cannot elide */
        char *p = malloc((size_t)leak_kb * 1024);
        if (p != NULL) {
            memset(p, 0x5a, (size_t)leak_kb * 1024); /* touched, so resident */
            memcpy(p, (const void *)&leaked, sizeof(void *));
            leaked = p;
        }
    }
}

void enr_hook_announce(void)
{
    enr_log(ENR_LOG_WARN, "TEST HOOKS compiled in: a test build, never for production", NULL);
}

const char *enr_hook_version_note(void)
{
    return " TEST HOOKS: a test build, never for production (a request header can stall or "
           "crash a worker)";
}

/* ENRICHD_TEST_BUDGET_DAY_MS and ENRICHD_TEST_BUDGET_ORIGIN_MS: a
 * compressed day for the budget's tests and benchmark. */
void enr_hook_budget_day(void)
{
    const char *v = getenv("ENRICHD_TEST_BUDGET_DAY_MS");
    const char *o = getenv("ENRICHD_TEST_BUDGET_ORIGIN_MS");

    if (v != NULL)
        enr_budget_compress_days(strtoull(v, NULL, 10), o ? strtoull(o, NULL, 10) : 0);
}

#endif
