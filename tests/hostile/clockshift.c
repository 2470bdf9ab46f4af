/*
 * clockshift.c: an LD_PRELOAD shim that steps the wall clock of the
 * process it is loaded into, as an NTP step would, without touching the
 * machine's clock.  CLOCK_MONOTONIC is left alone: that is the point.
 *
 * ENR_CLOCKSHIFT_FILE names a file holding a signed number of seconds;
 * CLOCK_REALTIME (and its coarse variant), gettimeofday() and time() are
 * moved by that amount.  The file is read again at most every
 * RELOAD_MS of real time, so a test steps the clock by rewriting it.
 * A missing or unreadable file means no offset.
 *
 * Test-only: built by tests/hostile/test_clock.py with `cc -shared`.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define RELOAD_MS 5

static _Atomic long long offset_s;
static _Atomic long long next_read_ms;

static int real_clock_gettime(clockid_t id, struct timespec *ts)
{
    /* The vDSO entry point would be ours again: go to the kernel. */
    return (int)syscall(SYS_clock_gettime, id, ts);
}

static long long offset(void)
{
    struct timespec now;
    long long now_ms;
    const char *path = getenv("ENR_CLOCKSHIFT_FILE");

    if (path == NULL)
        return 0;
    real_clock_gettime(CLOCK_MONOTONIC, &now);
    now_ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    if (now_ms >= atomic_load(&next_read_ms)) {
        char buf[32];
        ssize_t n = -1;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            n = read(fd, buf, sizeof buf - 1);
            close(fd);
        }
        if (n > 0) {
            buf[n] = '\0';
            atomic_store(&offset_s, strtoll(buf, NULL, 10));
        } else {
            atomic_store(&offset_s, 0);
        }
        atomic_store(&next_read_ms, now_ms + RELOAD_MS);
    }
    return atomic_load(&offset_s);
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    int rc = real_clock_gettime(id, ts);

    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        ts->tv_sec += (time_t)offset();
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    struct timespec ts;

    (void)tz;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *t)
{
    struct timespec ts;
    time_t v = (time_t)-1;

    if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
        v = ts.tv_sec;
    if (t != NULL)
        *t = v;
    return v;
}
