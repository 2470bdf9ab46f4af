/*
 * test_budget.c: the day's budget (budget.c): the pacing arithmetic
 * (the allowance at every moment of a day, its bounds, no overflow);
 * the provider's day (Pacific midnight, 23- and 25-hour days, UTC, a
 * compressed day); the forecast; a whole day of takes never past the
 * pace nor the budget, refreshes held to half the burst; the page kept
 * in its file by one process and found by the next; and files that are
 * not budget pages (wrong magic, truncated, zeroed, a symlink) refused.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"
#include "t_config.h"
#include "base/log.h"
#include "upstream/api.h"
#include "upstream/budget.h"

#define H (3600 * INT64_C(1000))
#define DAY (24 * H)

static void test_allowed(void)
{
    /* 10,000 a day, a burst of 208 (half an hour's share). */
    T_CHECK(enr_budget_allowed(10000, 208, 0, DAY) == 208, "midnight: the burst alone");
    T_CHECK(enr_budget_allowed(10000, 208, DAY / 2, DAY) == 5208, "noon: half plus the burst");
    T_CHECK(enr_budget_allowed(10000, 208, DAY / 4, DAY) == 2708, "06:00: a quarter plus it");
    T_CHECK(enr_budget_allowed(10000, 208, DAY - 1, DAY) == 10000, "capped at the budget");
    T_CHECK(enr_budget_allowed(10000, 208, DAY, DAY) == 10000, "the day's end: all of it");
    T_CHECK(enr_budget_allowed(10000, 0, 0, DAY) == 0, "no burst: nothing at midnight");
    T_CHECK(enr_budget_allowed(10000, 0, 1, 0) == 10000, "a day of no length: all");
    /* The largest budget over a 25-hour day: no overflow, monotone. */
    {
        uint64_t prev = 0, lim = 1000000000u, day = 25 * (uint64_t)H;
        int mono = 1, exact = 1;
        for (uint64_t t = 0; t <= day; t += day / 1000) {
            uint64_t a = enr_budget_allowed(lim, 0, t, day);
            mono &= a >= prev;
            exact &= a == (uint64_t)((unsigned __int128)lim * t / day);
            prev = a;
        }
        T_CHECK(mono && exact && prev == lim, "1e9 units over 25 h: exact and monotone");
    }
}

static void test_days(void)
{
    int64_t s, e;
    /* 2026-07-01 12:00 UTC: summer, the Pacific day 07:00 to 07:00 UTC. */
    enr_budget_day(ENR_BUDGET_PACIFIC, 0, 0, INT64_C(1782907200000), &s, &e);
    T_CHECK(s == INT64_C(1782889200000) && e == s + DAY, "a summer day: %lld %lld", (long long)s,
            (long long)e);
    /* 2026-03-08, summer time begins: 23 hours. */
    enr_budget_day(ENR_BUDGET_PACIFIC, 0, 0, INT64_C(1772985600000) + 12 * H, &s, &e);
    T_CHECK(e - s == 23 * H && s == INT64_C(1772956800000), "the spring day lasts 23 h: %lld",
            (long long)((e - s) / H));
    /* 2026-11-01, summer time ends: 25 hours. */
    enr_budget_day(ENR_BUDGET_PACIFIC, 0, 0, INT64_C(1793534400000) + 12 * H, &s, &e);
    T_CHECK(e - s == 25 * H, "the autumn day lasts 25 h: %lld", (long long)((e - s) / H));
    /* The instant of midnight belongs to the day it starts. */
    enr_budget_day(ENR_BUDGET_PACIFIC, 0, 0, INT64_C(1782889200000), &s, &e);
    T_CHECK(s == INT64_C(1782889200000), "midnight starts its day");
    enr_budget_day(ENR_BUDGET_UTC, 0, 0, INT64_C(1782907200000), &s, &e);
    T_CHECK(s == INT64_C(1782864000000) && e - s == DAY, "a UTC day");
    enr_budget_day(ENR_BUDGET_UTC, 60000, 0, INT64_C(1782907212345), &s, &e);
    T_CHECK(s == INT64_C(1782907200000) && e - s == 60000, "a compressed day of a minute");
    enr_budget_day(ENR_BUDGET_UTC, 60000, 5000, INT64_C(1782907212345), &s, &e);
    T_CHECK(s == INT64_C(1782907205000), "from its origin");
    enr_budget_day(ENR_BUDGET_UTC, 60000, 5000, 4999, &s, &e);
    T_CHECK(s == -55000 && e == 5000, "before its origin");
}

static void test_forecast(void)
{
    uint64_t b = DAY / ENR_BUDGET_BUCKETS; /* an hour */
    /* The first hour: 100 units in 30 min, 23.5 h left at 200 an hour. */
    T_CHECK(enr_budget_forecast(100, 100, b / 2, 0, 0, b / 2, DAY) == 100 + 4700,
            "the first hour's rate: %llu",
            (unsigned long long)enr_budget_forecast(100, 100, b / 2, 0, 0, b / 2, DAY));
    /* Noon, 6,000 asked, the last 1.5 h asked 900: 600 an hour for 12 h. */
    T_CHECK(enr_budget_forecast(6000, 300, b / 2, 600, 1, DAY / 2, DAY) == 6000 + 7200,
            "the last hours' rate, not the day's");
    T_CHECK(enr_budget_forecast(5, 0, 0, 0, 0, 0, DAY) == 5, "no time: what was asked");
    T_CHECK(enr_budget_forecast(7, 1, 1, 0, 0, DAY, DAY) == 7, "the day's end: what was asked");
}

static void config_for(enr_config *c, const char *file, unsigned quota, unsigned burst_s)
{
    t_default_config(c);
    snprintf(c->budget_file, sizeof c->budget_file, "%s", file);
    c->youtube_daily_quota = quota;
    c->budget_burst_s = burst_s;
}

/* In a child (the page is the process's, inherited, never remapped): a
 * whole summer day of takes every minute, each as many calls as the
 * pace lets through.  Exit 0 when every check held. */
static int day_of_takes(const char *file)
{
    enr_config c;
    enr_budget_state st;
    int64_t s, e, now;
    uint64_t spent = 0;
    int bad = 0;

    config_for(&c, file, 1440, 3600); /* a unit a minute, an hour's burst: 60 */
    if (enr_budget_open(&c) != 0)
        return 10;
    enr_budget_day(ENR_BUDGET_PACIFIC, 0, 0, INT64_C(1782907200000), &s, &e);
    for (now = s; now < e; now += 60000) {
        uint64_t allowed = enr_budget_allowed(1440, 60, (uint64_t)(now - s), (uint64_t)(e - s));
        while (spent <= 1440 && enr_budget_take(ENR_API_YOUTUBE, 1, 0, now))
            spent++;             /* bounded: a budget that refused nothing would pass 1440 */
        bad |= spent != allowed; /* exactly the pace: no more, and nothing it allowed refused */
        bad |= enr_budget_take(ENR_API_YOUTUBE, 1, 1, now); /* a refresh: none past it */
    }
    enr_budget_view(ENR_API_YOUTUBE, e - 1, &st);
    bad |= spent != 1440 || st.v[ENR_BUDGET_ROW_spent] != 1440 || st.v[ENR_BUDGET_ROW_left] != 0;
    /* The next day starts from nothing. */
    bad |= !enr_budget_take(ENR_API_YOUTUBE, 1, 0, e);
    enr_budget_view(ENR_API_YOUTUBE, e, &st);
    bad |= st.v[ENR_BUDGET_ROW_spent] != 1;
    return bad ? 1 : 0;
}

static int run_child(int (*fn)(const char *, void *), const char *file, void *arg)
{
    pid_t pid = fork();
    int status = 0;

    if (pid == 0)
        _exit(fn(file, arg));
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

static int whole_day(const char *file, void *arg)
{
    (void)arg;
    return day_of_takes(file);
}

/* Takes n units at noon (arg: n), or with n 0 only reports what noon
 * shows as spent (exit code: spent, at most 250). */
static int noon(const char *file, void *arg)
{
    enr_config c;
    enr_budget_state st;
    int64_t s, e, t;
    unsigned n = *(unsigned *)arg;

    config_for(&c, file, 10000, 1800);
    if (enr_budget_open(&c) != 0)
        return 255;
    enr_budget_day(ENR_BUDGET_PACIFIC, 0, 0, INT64_C(1782907200000), &s, &e);
    t = s + 12 * H;
    for (unsigned i = 0; i < n; i++)
        if (!enr_budget_take(ENR_API_YOUTUBE, 1, 0, t))
            return 254;
    enr_budget_view(ENR_API_YOUTUBE, t, &st);
    return (int)st.v[ENR_BUDGET_ROW_spent];
}

/* Refreshes keep half the burst for new ids. */
static int refresh_reserve(const char *file, void *arg)
{
    enr_config c;
    int64_t s, e, t;
    int bad = 0;
    unsigned got = 0;

    (void)arg;
    config_for(&c, file, 86400, 100); /* a unit a second, a burst of 100 */
    if (enr_budget_open(&c) != 0)
        return 10;
    enr_budget_day(ENR_BUDGET_PACIFIC, 0, 0, INT64_C(1782907200000), &s, &e);
    t = s + 1000 * 1000; /* 1,000 s in: 1,000 units of pace */
    while (got <= 2000 && enr_budget_take(ENR_API_YOUTUBE, 1, 1, t))
        got++;
    bad |= got != 1050; /* the pace and half the burst */
    got = 0;
    while (got <= 2000 && enr_budget_take(ENR_API_YOUTUBE, 1, 0, t))
        got++;
    bad |= got != 50; /* new ids: the other half */
    {
        enr_budget_state st;
        enr_budget_view(ENR_API_YOUTUBE, t, &st);
        bad |= st.v[ENR_BUDGET_ROW_deferred_refresh] != 1 || st.v[ENR_BUDGET_ROW_deferred_new] != 1;
    }
    return bad;
}

static void test_day_of_takes(const char *dir)
{
    char f[512];

    snprintf(f, sizeof f, "%s/day", dir);
    T_CHECK(run_child(whole_day, f, NULL) == 0,
            "a day of takes: exactly the pace, never past it, the budget at the end");
    snprintf(f, sizeof f, "%s/reserve", dir);
    T_CHECK(run_child(refresh_reserve, f, NULL) == 0, "refreshes get half the burst, new ids all");
}

static void test_file_kept(const char *dir)
{
    char f[512];
    unsigned n = 120, zero = 0;

    snprintf(f, sizeof f, "%s/kept", dir);
    T_CHECK(run_child(noon, f, &n) == 120, "the first process spends 120");
    T_CHECK(run_child(noon, f, &zero) == 120, "the next finds them spent (the file kept them)");
    n = 5;
    T_CHECK(run_child(noon, f, &n) == 125, "and adds to them");
}

static void corrupt(const char *f, off_t at, const char *bytes, size_t n, off_t size)
{
    int fd = open(f, O_WRONLY);

    if (bytes)
        T_CHECK(pwrite(fd, bytes, n, at) == (ssize_t)n, "corrupting %s", f);
    if (size >= 0)
        T_CHECK(ftruncate(fd, size) == 0, "truncating %s", f);
    close(fd);
}

static void test_file_refused(const char *dir)
{
    char f[512], l[520];
    unsigned n = 40, zero = 0;
    static const char zeros[4096];

    snprintf(f, sizeof f, "%s/bad", dir);
    T_CHECK(run_child(noon, f, &n) == 40, "a budget file made");
    corrupt(f, 0, "ENRBUDGX", 8, -1);
    T_CHECK(run_child(noon, f, &zero) == 0, "a wrong magic: refused, an empty page instead");
    T_CHECK(run_child(noon, f, &n) == 40, "and the new one works");
    corrupt(f, 8, "\x02", 1, -1); /* the version's first byte */
    T_CHECK(run_child(noon, f, &zero) == 0, "another version: refused");
    T_CHECK(run_child(noon, f, &n) == 40, "refilled");
    corrupt(f, 0, NULL, 0, 100);
    T_CHECK(run_child(noon, f, &zero) == 0, "truncated: refused");
    T_CHECK(run_child(noon, f, &n) == 40, "refilled");
    corrupt(f, 0, zeros, sizeof zeros, -1);
    T_CHECK(run_child(noon, f, &zero) == 0, "zeroed: refused");
    T_CHECK(run_child(noon, f, &n) == 40, "refilled");
    corrupt(f, 28, "\xff", 1, -1); /* inside the header checksum */
    T_CHECK(run_child(noon, f, &zero) == 0, "a header that does not add up: refused");
    T_CHECK(run_child(noon, f, &n) == 40, "refilled");
    chmod(f, 0666);
    T_CHECK(run_child(noon, f, &zero) == 255, "writable by others: refused, the start too");
    {
        struct stat st;
        T_CHECK(stat(f, &st) == 0 && (st.st_mode & 0777) == 0666 && st.st_size == 4096,
                "and never touched (test_statefile: the rule every state file follows)");
    }
    snprintf(l, sizeof l, "%s/link", dir);
    T_CHECK(symlink(f, l) == 0, "a symlink to it");
    T_CHECK(run_child(noon, l, &zero) == 255, "a symlink: never followed, the start refused");
}

int main(void)
{
    char dir[] = "/tmp/enr-budget-XXXXXX";

    enr_log_set_level(ENR_LOG_ERROR); /* the refusals' warnings are expected here */
    if (mkdtemp(dir) == NULL)
        return 2;
    test_allowed();
    test_days();
    test_forecast();
    test_day_of_takes(dir);
    test_file_kept(dir);
    test_file_refused(dir);
    {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        T_CHECK(system(cmd) == 0, "cleaned up");
    }
    T_DONE();
}
