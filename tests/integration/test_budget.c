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
#define BOOTED INT64_C(1780000000000) /* the wall time at which the tests' machine booted */

/* Now on both clocks, the wall never stepped. */
static enr_budget_now at(int64_t wall)
{
    enr_budget_now n = {wall, wall - BOOTED};
    return n;
}

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
    c->api[ENR_SOURCE_YOUTUBE].daily_quota = quota;
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
        while (spent <= 1440 && enr_budget_take(ENR_API_YOUTUBE, 1, 0, at(now)))
            spent++;             /* bounded: a budget that refused nothing would pass 1440 */
        bad |= spent != allowed; /* exactly the pace: no more, and nothing it allowed refused */
        bad |= enr_budget_take(ENR_API_YOUTUBE, 1, 1, at(now)); /* a refresh: none past it */
    }
    enr_budget_view(ENR_API_YOUTUBE, at(e - 1), &st);
    bad |= spent != 1440 || st.v[ENR_BUDGET_ROW_spent] != 1440 || st.v[ENR_BUDGET_ROW_left] != 0;
    /* The next day starts from nothing. */
    bad |= !enr_budget_take(ENR_API_YOUTUBE, 1, 0, at(e));
    enr_budget_view(ENR_API_YOUTUBE, at(e), &st);
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
        if (!enr_budget_take(ENR_API_YOUTUBE, 1, 0, at(t)))
            return 254;
    enr_budget_view(ENR_API_YOUTUBE, at(t), &st);
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
    while (got <= 2000 && enr_budget_take(ENR_API_YOUTUBE, 1, 1, at(t)))
        got++;
    bad |= got != 1050; /* the pace and half the burst */
    got = 0;
    while (got <= 2000 && enr_budget_take(ENR_API_YOUTUBE, 1, 0, at(t)))
        got++;
    bad |= got != 50; /* new ids: the other half */
    {
        enr_budget_state st;
        enr_budget_view(ENR_API_YOUTUBE, at(t), &st);
        bad |= st.v[ENR_BUDGET_ROW_deferred_refresh] != 1 || st.v[ENR_BUDGET_ROW_deferred_new] != 1;
    }
    return bad;
}

/* Units given back for a request that never left: to the day they were
 * taken from, never below nothing, and not to a day that has ended. */
static int refunds(const char *file, void *arg)
{
    enr_config c;
    enr_budget_state st;
    int64_t s, e, t;
    uint64_t k;
    int bad = 0;

    (void)arg;
    config_for(&c, file, 10000, 1800);
    if (enr_budget_open(&c) != 0)
        return 10;
    enr_budget_day(ENR_BUDGET_PACIFIC, 0, 0, INT64_C(1782907200000), &s, &e);
    t = s + 12 * H;
    for (int i = 0; i < 5; i++)
        bad |= !enr_budget_take(ENR_API_YOUTUBE, 1, 0, at(t));
    k = enr_budget_day_key(ENR_API_YOUTUBE, at(t));
    enr_budget_refund(ENR_API_YOUTUBE, 2, k, at(t));
    enr_budget_view(ENR_API_YOUTUBE, at(t), &st);
    bad |= (st.v[ENR_BUDGET_ROW_spent] != 3) << 1;
    enr_budget_refund(ENR_API_YOUTUBE, 9, k, at(t + 1000));
    enr_budget_view(ENR_API_YOUTUBE, at(t), &st);
    bad |= (st.v[ENR_BUDGET_ROW_spent] != 0) << 2;
    /* Taken the day before: today's spending keeps what it spent. */
    bad |= !enr_budget_take(ENR_API_YOUTUBE, 1, 0, at(e)) << 3;
    enr_budget_refund(ENR_API_YOUTUBE, 1, k, at(e + 1000));
    enr_budget_view(ENR_API_YOUTUBE, at(e), &st);
    bad |= (st.v[ENR_BUDGET_ROW_spent] != 1) << 4;
    return bad;
}

static void test_refund(const char *dir)
{
    char f[512];
    int rc;

    snprintf(f, sizeof f, "%s/refund", dir);
    rc = run_child(refunds, f, NULL);
    T_CHECK(rc == 0, "a refund gives back to its own day, down to 0 at most (failed: %#x)", rc);
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

/* ---- clock steps: the day in force (enr_budget_in_force, the page) ---- */

#define NOON_JULY INT64_C(1782907200000) /* 2026-07-01 12:00 UTC, 05:00 Pacific */
#define STEP_DAY DAY

/* The real day of the clock tests: a summer Pacific day, [*s, *e). */
static void real_day(int64_t *s, int64_t *e)
{
    enr_budget_day(ENR_BUDGET_PACIFIC, 0, 0, NOON_JULY, s, e);
}

/* Real time r, the wall stepped by off. */
static enr_budget_now stepped(int64_t r, int64_t off)
{
    enr_budget_now n = {r + off, r - BOOTED};
    return n;
}

static void test_in_force(void)
{
    enr_budget_calendar cal = {ENR_BUDGET_PACIFIC, 0, 0};
    enr_budget_when w, w2;
    int64_t s, e;
    uint64_t rec, r2;

    real_day(&s, &e);
    rec = enr_budget_in_force(&cal, 0, stepped(s + 12 * H, 0), &w);
    T_CHECK(w.start == s && w.end == e && w.elapsed == 12 * H && w.left_ms == 12 * H,
            "no day yet: the wall's, its end on boottime");
    T_CHECK(enr_budget_in_force(&cal, rec, stepped(s + 13 * H, 0), &w) == rec &&
                w.elapsed == 13 * H,
            "an hour on: the same record, an hour more elapsed");
    r2 = enr_budget_in_force(&cal, rec, stepped(s + 13 * H, -STEP_DAY), &w);
    T_CHECK(r2 == rec && w.start == s && w.elapsed == 13 * H,
            "the wall a day back: the same day, the elapsed time real");
    r2 = enr_budget_in_force(&cal, rec, stepped(s + 13 * H, STEP_DAY), &w);
    T_CHECK(r2 == rec && w.start == s && w.elapsed == 13 * H,
            "the wall a day ahead: the same day, not the next");
    r2 = enr_budget_in_force(&cal, rec, stepped(s + 13 * H, 11 * H + 1), &w);
    T_CHECK(r2 == rec && w.start == s, "the wall just past midnight, 11 h ahead: the same day");
    r2 = enr_budget_in_force(&cal, rec, stepped(e - 30000, 40000), &w);
    T_CHECK(r2 != rec && w.start == e,
            "30 s before midnight, the wall 40 s ahead (within the tolerance): the next day");
    r2 = enr_budget_in_force(&cal, rec, stepped(e - 120000, 120000), &w);
    T_CHECK(r2 == rec && w.start == s, "2 min before, the wall 2 min ahead: not yet");
    r2 = enr_budget_in_force(&cal, rec, stepped(e, -STEP_DAY), &w);
    T_CHECK(w.start == e && w.elapsed == 0,
            "real midnight, the wall a day back: the next day all the same (boottime)");
    T_CHECK(enr_budget_in_force(&cal, r2, stepped(e + H, 0), &w2) == r2 && w2.start == e &&
                w2.elapsed == H,
            "and it goes on from there");
    r2 = enr_budget_in_force(&cal, rec, stepped(e + 3 * DAY + H, 0), &w);
    T_CHECK(w.end - w.start == DAY && w.start == e + 3 * DAY && w.elapsed == H,
            "days nobody used are skipped");
    /* A reboot: the end unknown (the page forgot it). */
    r2 = rec & ~((UINT64_C(1) << 40) - 1);
    T_CHECK(enr_budget_in_force(&cal, r2, (enr_budget_now){s + 14 * H, 5000}, &w) != r2 &&
                w.start == s && w.left_ms == 10 * H && w.elapsed == 14 * H,
            "after a reboot: the wall says how much is left");
    enr_budget_in_force(&cal, r2, (enr_budget_now){s + 14 * H - STEP_DAY, 5000}, &w);
    T_CHECK(w.start == s && w.left_ms == DAY,
            "after a reboot with the wall a day back: the page's day, a day more at most");
    enr_budget_in_force(&cal, r2, (enr_budget_now){s + 14 * H + STEP_DAY, 5000}, &w);
    T_CHECK(w.start == e, "after a reboot with the wall a day ahead: only the wall to go by");
}

/* A child's budget of 20 units a day, no burst (the audit's). */
static int open_20(const char *file)
{
    enr_config c;

    config_for(&c, file, 20, 0);
    return enr_budget_open(&c);
}

/* Every unit the pace lets through at now. */
static unsigned take_all(enr_budget_now now)
{
    unsigned n = 0;

    while (n < 1000 && enr_budget_take(ENR_API_YOUTUBE, 1, 0, now))
        n++;
    return n;
}

static uint64_t spent_at(enr_budget_now now)
{
    enr_budget_state st;

    enr_budget_view(ENR_API_YOUTUBE, now, &st);
    return (uint64_t)st.v[ENR_BUDGET_ROW_spent];
}

/* arg: the wall's steps, one per real hour from 01:00 to 23:00 Pacific,
 * cycling; every unit the pace allows taken each time.  Exit 0 when the
 * real day spent at most 20, exactly the pace at 23:00, and the view
 * said the truth each time; then real midnight gives a new day. */
static int steps_day(const char *file, void *arg)
{
    const int64_t *offs = arg;
    int64_t s, e;
    uint64_t total = 0;
    int bad = 0, i = 0;

    if (open_20(file) != 0)
        return 10;
    real_day(&s, &e);
    for (int64_t r = s + H; r < e; r += H, i++) {
        int64_t off = offs[1 + i % offs[0]];
        total += take_all(stepped(r, off));
        bad |= spent_at(stepped(r, off)) != total; /* /status's spent: the truth */
        bad |= total > enr_budget_allowed(20, 0, (uint64_t)(r - s), DAY);
    }
    bad |= total != enr_budget_allowed(20, 0, 23 * H, DAY) ? 2 : 0;
    /* Real midnight (the wall stepped back a day, as the cycle may leave
     * it): a new day, its pace from nothing. */
    bad |= spent_at(stepped(e + 1, -STEP_DAY)) != 0 ? 4 : 0;
    bad |= take_all(stepped(e + 6 * H, -STEP_DAY)) != 5 ? 8 : 0;
    bad |= spent_at(stepped(e + 6 * H, STEP_DAY)) != 5 ? 16 : 0;
    return bad;
}

static void test_steps(const char *dir)
{
    static const int64_t back[] = {1, -STEP_DAY}, fwd[] = {1, STEP_DAY},
                         both[] = {3, -STEP_DAY, 0, STEP_DAY},
                         wild[] = {6, -2 * STEP_DAY, 7 * H, -3 * H, 30000, -30000, STEP_DAY - H};
    char f[512];
    int rc;

    snprintf(f, sizeof f, "%s/back", dir);
    T_CHECK((rc = run_child(steps_day, f, (void *)back)) == 0,
            "the wall a day back all day: the pace and no more (%d)", rc);
    snprintf(f, sizeof f, "%s/fwd", dir);
    T_CHECK((rc = run_child(steps_day, f, (void *)fwd)) == 0,
            "the wall a day ahead all day: the pace and no more (%d)", rc);
    snprintf(f, sizeof f, "%s/both", dir);
    T_CHECK((rc = run_child(steps_day, f, (void *)both)) == 0,
            "the wall back and forth a day, 23 steps: at most 20 in the real day (%d)", rc);
    snprintf(f, sizeof f, "%s/wild", dir);
    T_CHECK((rc = run_child(steps_day, f, (void *)wild)) == 0,
            "steps of days, hours and seconds either way: the same (%d)", rc);
}

/* arg: the phase: 0 spends at noon as boot A, 1 as boot B after a
 * reboot at 13:00, 2 as boot B at 14:00 with the wall a day back, 3 as
 * boot B the next real day.  Each takes every unit the pace allows.
 * Exit: 20 x what the take got + what the view then says is spent
 * (at most 20). */
static int reboot_phase(const char *file, void *arg)
{
    static const int64_t wall[] = {12 * H, 13 * H, 14 * H - STEP_DAY, DAY + 12 * H};
    static const int64_t boot[] = {12 * H, 5 * 60000, 65 * 60000, 23 * H + 5 * 60000};
    int phase = *(int *)arg;
    int64_t s, e;
    enr_budget_now n;
    unsigned got;

    enr_budget_boot_id(phase == 0 ? "boot-A" : "boot-B");
    if (open_20(file) != 0)
        return 250;
    real_day(&s, &e);
    n.wall_ms = s + wall[phase];
    n.boot_ms = boot[phase];
    got = take_all(n);
    return (int)(20 * got + spent_at(n));
}

static void test_reboot(const char *dir)
{
    char f[512];
    int p0 = 0, p1 = 1, p2 = 2, p3 = 3, rc;

    snprintf(f, sizeof f, "%s/reboot", dir);
    T_CHECK((rc = run_child(reboot_phase, f, &p0)) == 20 * 10 + 10, "boot A spends 10 by noon (%d)",
            rc);
    T_CHECK((rc = run_child(reboot_phase, f, &p1)) == 10,
            "after a reboot: the 10 still spent, none more by 13:00 (%d)", rc);
    T_CHECK((rc = run_child(reboot_phase, f, &p2)) == 20 * 1 + 11,
            "at 14:00 with the wall a day back: 10 kept and the pace's one more (%d)", rc);
    T_CHECK((rc = run_child(reboot_phase, f, &p3)) == 20 * 10 + 10,
            "the next real day: a new day, its pace (%d)", rc);
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
    test_refund(dir);
    test_file_kept(dir);
    test_file_refused(dir);
    test_in_force();
    test_steps(dir);
    test_reboot(dir);
    {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        T_CHECK(system(cmd) == 0, "cleaned up");
    }
    T_DONE();
}
