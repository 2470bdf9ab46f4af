/*
 * test_quota.c: Retry-After (every form RFC 9110 allows, and what it does
 * not), the host-wide pause and the token bucket, the last two also
 * across processes sharing one mapping as the workers share the
 * scoreboard.  The bucket's counts are read on a clock the test
 * advances (enr_quota_take_at takes the time), so they are exact on any
 * machine; the processes racing on the real clock are held only to the
 * bound a busy machine cannot raise (never more than the rate allows).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "upstream/quota.h"
#include "t.h"

/* 1994-11-06 08:49:37 UTC, the RFC's example date */
#define RFC_T 784111777

static int ra(const char *s, int64_t now, unsigned *d)
{
    return enr_retry_after_parse(s, strlen(s), now, d);
}

static void test_retry_after(void)
{
    unsigned d = 99;

    T_CHECK(ra("120", 0, &d) == 0 && d == 120, "delta-seconds: %u", d);
    T_CHECK(ra(" 7\r\n", 0, &d) == 0 && d == 7, "white space and CRLF around it");
    T_CHECK(ra("0", 0, &d) == 0 && d == 0, "zero");
    T_CHECK(ra("3600", 0, &d) == 0 && d == 3600, "the bound itself");
    T_CHECK(ra("3601", 0, &d) == 0 && d == ENR_RETRY_AFTER_MAX_S, "clamped");
    T_CHECK(ra("99999999999999999999999999999", 0, &d) == 0 && d == ENR_RETRY_AFTER_MAX_S,
            "no overflow on a long number");
    T_CHECK(ra("Sun, 06 Nov 1994 08:49:37 GMT", RFC_T - 30, &d) == 0 && d == 30,
            "IMF-fixdate 30 s ahead: %u", d);
    T_CHECK(ra("Sunday, 06-Nov-94 08:49:37 GMT", RFC_T - 45, &d) == 0 && d == 45,
            "RFC 850 date: %u", d);
    T_CHECK(ra("Sun Nov  6 08:49:37 1994", RFC_T - 60, &d) == 0 && d == 60, "asctime: %u", d);
    T_CHECK(ra("Sun Nov 16 08:49:37 1994", RFC_T, &d) == 0 && d == ENR_RETRY_AFTER_MAX_S,
            "asctime two-digit day, 10 days ahead: clamped");
    T_CHECK(ra("Sun, 06 Nov 1994 08:49:37 GMT", RFC_T + 5, &d) == 0 && d == 0,
            "a date passed: no wait");
    T_CHECK(ra("Thu, 01 Jan 1970 00:00:00 GMT", 0, &d) == 0 && d == 0, "the epoch");
    T_CHECK(ra("Thu, 01 Jan 1970 00:01:00 GMT", 0, &d) == 0 && d == 60, "a minute after it");
    T_CHECK(ra("Tue, 29 Feb 2028 00:00:10 GMT", 1835395200, &d) == 0 && d == 10,
            "leap day 2028: %u", d);
    T_CHECK(ra("Sat, 31 Dec 2016 23:59:60 GMT", 1483228790, &d) == 0 && d == 10,
            "a leap second: %u", d);

    static const char *const bad[] = {
        "",
        "   ",
        "-1",
        "+5",
        "1.5",
        "12 s",
        "0x10",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 94 08:49:37 GMT",
        "Sun, 31 Feb 1994 08:49:37 GMT",
        "Sun, 29 Feb 1900 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 06 Nov 1994 08:49:61 GMT",
        "Sun, 00 Nov 1994 08:49:37 GMT",
        "Sun, 06 Foo 1994 08:49:37 GMT",
        "Xyz, 06 Nov 1994 08:49:37 GMT",
        "sun, 06 nov 1994 08:49:37 gmt",
        "Sun, 06 Nov 1994 08:49:37 GMT x",
        "Sun, 06 Nov 1994 08:49:37",
        "Sun, 06 Nov 1994",
        "Sunday, 06 Nov 1994 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994",
        "Sun Nov  6 08:49:37 94",
        "Sun, 06 Nov 1899 08:49:37 GMT",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        T_CHECK(ra(bad[i], RFC_T, &d) == -1, "refused: \"%s\"", bad[i]);
    /* not NUL-terminated: only n bytes are read */
    T_CHECK(enr_retry_after_parse("12345", 2, 0, &d) == 0 && d == 12, "reads n bytes only");
}

static void test_pause(void)
{
    enr_quota q;
    uint64_t now = enr_mono_ms();

    enr_quota_init(&q, NULL, 0);
    T_CHECK(enr_quota_take(&q, now) == ENR_QUOTA_OK, "no pause, no limit");
    enr_quota_pause(&q, now, 30, 429, ENR_UP_F_THROTTLED);
    T_CHECK(enr_quota_paused_until(&q) == now + 30000, "paused for 30 s");
    T_CHECK(enr_quota_take(&q, now + 29999) == ENR_QUOTA_PAUSED, "paused just before the end");
    T_CHECK(enr_quota_take(&q, now + 30000) == ENR_QUOTA_OK, "calls again at the end");
    enr_quota_pause(&q, now, 5, 429, ENR_UP_F_THROTTLED);
    T_CHECK(enr_quota_paused_until(&q) == now + 30000, "a shorter pause never shortens it");
    enr_quota_pause(&q, now, 60, 503, ENR_UP_F_THROTTLED);
    T_CHECK(enr_quota_paused_until(&q) == now + 60000, "a longer one lengthens it");
    enr_quota_pause(&q, now, 0, 429, ENR_UP_F_THROTTLED);
    T_CHECK(enr_quota_paused_until(&q) == now + 60000, "0 changes nothing while paused");
    enr_quota_init(&q, NULL, 0);
    enr_quota_pause(&q, now, 0, 429, ENR_UP_F_THROTTLED);
    T_CHECK(enr_quota_paused_until(&q) == now + ENR_THROTTLE_DEFAULT_S * 1000u,
            "Retry-After 0 (or none) pauses for the default");
    enr_quota_init(&q, NULL, 0);
    enr_quota_pause(&q, now, 1000000, 429, ENR_UP_F_THROTTLED);
    T_CHECK(enr_quota_paused_until(&q) == now + ENR_RETRY_AFTER_MAX_S * 1000u, "bounded");
}

/* The bucket, in one process: the burst at once, then one call per
 * interval, and never more than rate * t + burst. */
static void test_bucket(void)
{
    enr_quota q;
    unsigned ok = 0, rate = 200;
    uint64_t start;

    enr_quota_init(&q, NULL, rate);
    for (int i = 0; i < 100; i++)
        ok += enr_quota_take(&q, enr_mono_ms()) == ENR_QUOTA_OK;
    T_CHECK(ok >= rate / ENR_QUOTA_BURST_DIV && ok <= rate / ENR_QUOTA_BURST_DIV + 1,
            "a burst of rate/10 at once: %u", ok);
    T_CHECK(enr_quota_take(&q, enr_mono_ms()) == ENR_QUOTA_RATE, "then refused");
    /* 0.3 s at 200/s on the test's clock, a second on (the bucket full
     * again), ten tries a millisecond: the burst of 20, then one call
     * every 5 ms, 60, give or take the one booked at either edge */
    ok = 0;
    start = enr_mono_ms() + 1000;
    for (uint64_t t = start; t < start + 300; t++)
        for (int k = 0; k < 10; k++)
            ok += enr_quota_take_at(&q, t, t * 1000) == ENR_QUOTA_OK;
    T_CHECK(ok >= 79 && ok <= 81, "0.3 s at 200/s after a full bucket: %u calls", ok);

    enr_quota_init(&q, NULL, 1);
    T_CHECK(enr_quota_take(&q, enr_mono_ms()) == ENR_QUOTA_OK, "rate 1: one call");
    T_CHECK(enr_quota_take(&q, enr_mono_ms()) == ENR_QUOTA_RATE, "rate 1: then none");
    enr_quota_pause(&q, enr_mono_ms(), 10, 429, ENR_UP_F_THROTTLED);
    T_CHECK(enr_quota_take(&q, enr_mono_ms()) == ENR_QUOTA_PAUSED, "the pause wins");
}

/* The shared bucket's pace, exact: three processes one after the other
 * on the test's clock (each its third of 0.5 s, ten tries a
 * millisecond), each seeing what the one before took.  After the race
 * of test_shared (its calls up to the real clock's now), the test's
 * clock starts a second later, the bucket full again. */
static void test_shared_paced(enr_sb_quota *sh, unsigned *counts, unsigned rate)
{
    const unsigned nproc = 3, span_ms = 500;
    uint64_t t0 = enr_mono_ms() + 1000;
    unsigned total = 0;

    for (unsigned p = 0; p < nproc; p++) {
        pid_t pid = fork();
        if (pid == 0) {
            enr_quota q;
            unsigned ok = 0;
            enr_quota_init(&q, sh, rate);
            for (uint64_t t = t0 + p * span_ms / nproc; t < t0 + (p + 1) * span_ms / nproc; t++)
                for (int k = 0; k < 10; k++)
                    ok += enr_quota_take_at(&q, t, t * 1000) == ENR_QUOTA_OK;
            counts[p] = ok;
            _exit(0);
        }
        waitpid(pid, NULL, 0);
    }
    for (unsigned p = 0; p < nproc; p++)
        total += counts[p];
    T_CHECK(total >= 599 && total <= 601,
            "3 processes in turn, 0.5 s at 1000/s: the burst and the rate, %u calls", total);
}

/* Why a pause holds, by kind (base/upfail.h): the scoreboard keeps the
 * kind's pause rank (1, 2, 3 as it always did), a stronger reason is not
 * replaced by a weaker one as long, a kind that is no pause holds
 * nothing, and a reload ends only the refused key's. */
static void test_pause_reasons(void)
{
    enr_sb_quota sh[ENR_UP_SOURCES];
    enr_quota q;
    uint64_t now = 1000000;

    memset(sh, 0, sizeof sh);
    enr_quota_init(&q, &sh[1], 0);
    T_CHECK(enr_quota_why(&q, now) == -1, "no pause: no kind");
    T_CHECK(enr_quota_hold(&q, now, 5000, ENR_UP_F_TIMEOUT, 0, "x") == 0 &&
                ENR_SB_GET(sh[1].pause_until_ms) == 0,
            "a timeout is no reason to pause");
    T_CHECK(enr_quota_hold(&q, now, 5000, ENR_UP_NFAILS, 0, "x") == 0, "nor a kind out of range");
    T_CHECK(enr_quota_hold(&q, now, 5000, ENR_UP_F_QUOTA, 1800000000, "quotaExceeded") == 1 &&
                enr_quota_why(&q, now) == ENR_UP_F_QUOTA && ENR_SB_GET(sh[1].why) == 2,
            "a spent quota: rank 2 stored (%llu)", (unsigned long long)ENR_SB_GET(sh[1].why));
    T_STREQ(enr_up_pause_name(ENR_SB_GET(sh[1].why)), "quota");
    T_STREQ(sh[1].reason, "quotaExceeded");
    T_CHECK(enr_quota_hold(&q, now, 5000, ENR_UP_F_THROTTLED, 0, "slow") == 0 &&
                enr_quota_why(&q, now) == ENR_UP_F_QUOTA,
            "a weaker reason as long does not replace it");
    T_CHECK(enr_quota_hold(&q, now, 5000, ENR_UP_F_AUTH, 0, "keyInvalid") == 1 &&
                enr_quota_why(&q, now) == ENR_UP_F_AUTH && ENR_SB_GET(sh[1].why) == 3,
            "a stronger one does: rank 3");
    T_CHECK(enr_quota_why(&q, now + 5000) == -1, "over when it ends");
    enr_quota_clear_auth(sh);
    T_CHECK(ENR_SB_GET(sh[1].pause_until_ms) == 0, "a reload ends a refused key's pause");
    T_CHECK(enr_quota_hold(&q, now, 5000, ENR_UP_F_QUOTA, 0, NULL) == 1, "quota again");
    enr_quota_clear_auth(sh);
    T_CHECK(enr_quota_why(&q, now) == ENR_UP_F_QUOTA, "but not a spent quota's");
    enr_quota_init(&q, &sh[2], 0);
    enr_quota_pause(&q, now, 3, 429, ENR_UP_F_THROTTLED);
    T_CHECK(enr_quota_why(&q, now) == ENR_UP_F_THROTTLED && ENR_SB_GET(sh[2].why) == 1,
            "a Retry-After pause: the slow-down kind, rank 1");
}

/* Processes sharing one mapping (as workers share the scoreboard): one
 * pause stops all of them, and their calls together keep the rate. */
static void test_shared(void)
{
    enr_sb_quota *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    unsigned *counts;
    const unsigned rate = 1000, nproc = 3;
    const uint64_t span_us = 500000;
    uint64_t t0;
    unsigned total = 0;

    T_CHECK(sh != MAP_FAILED, "mapping");
    if (sh == MAP_FAILED)
        return;
    counts = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(sh, 0, sizeof *sh);
    t0 = enr_mono_us() + 20000; /* every child starts at the same instant */
    for (unsigned p = 0; p < nproc; p++) {
        pid_t pid = fork();
        if (pid == 0) {
            enr_quota q;
            unsigned ok = 0;
            enr_quota_init(&q, sh, rate);
            while (enr_mono_us() < t0)
                ;
            /* Each take at the time read for its loop test: one read
             * later could fall past the span's end on a loaded machine. */
            for (uint64_t t; (t = enr_mono_us()) < t0 + span_us;)
                ok += enr_quota_take_at(&q, t / 1000, t) == ENR_QUOTA_OK;
            counts[p] = ok;
            _exit(0);
        }
    }
    for (unsigned p = 0; p < nproc; p++)
        wait(NULL);
    for (unsigned p = 0; p < nproc; p++)
        total += counts[p];
    /* 0.5 s at 1000/s = 500, the burst 100, one at the edge: a busy
     * machine can only make it fewer */
    T_CHECK(total <= 601, "3 processes, 0.5 s at 1000/s: at most 601 calls, made %u", total);
    T_CHECK(total > 0, "and they made calls: %u", total);
    test_shared_paced(sh, counts, rate);

    {
        enr_quota a, b;
        uint64_t now = enr_mono_ms();
        enr_quota_init(&a, sh, 0);
        enr_quota_init(&b, sh, 0);
        enr_quota_pause(&a, now, 2, 429, ENR_UP_F_THROTTLED);
        T_CHECK(enr_quota_take(&b, now + 1) == ENR_QUOTA_PAUSED,
                "a pause one process heard of stops the other");
        T_CHECK(enr_quota_take(&b, now + 2000) == ENR_QUOTA_OK, "until it ends");
        T_CHECK(ENR_SB_GET(sh->pauses) == 1, "one pause counted");
    }
    munmap(counts, 4096);
    munmap(sh, sizeof *sh);
}

int main(void)
{
    enr_log_set_level(ENR_LOG_ERROR); /* the pause warnings are expected here */
    test_retry_after();
    test_pause();
    test_pause_reasons();
    test_bucket();
    test_shared();
    T_DONE();
}
