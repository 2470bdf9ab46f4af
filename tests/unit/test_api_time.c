/*
 * test_api_time.c: the clocks of the providers' APIs (api_time.c):
 * YouTube's ISO 8601 durations, valid and not; the next midnight in
 * America/Los_Angeles across both summer-time switches and year ends,
 * against fixed instants and, where the machine has the zone's tzfile,
 * against the C library's reading of it hour by hour over 2020-2030; and
 * the date-times a rate limit's reset is written in.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "t.h"
#include "upstream/api.h"
#include "upstream/api_int.h"

static int dur(const char *s, double *d)
{
    return enr_iso8601_duration(s, strlen(s), d);
}

static void test_durations_valid(void)
{
    static const struct {
        const char *s;
        double want;
    } ok[] = {
        {"PT4M13S", 253},
        {"PT1H2M3S", 3723},
        {"P1DT2H3M4S", 93784},
        {"P0D", 0},
        {"PT0S", 0},
        {"PT1S", 1},
        {"PT59M", 3540},
        {"P1W", 604800},
        {"P1W2D", 777600},
        {"P2DT0S", 172800},
        {"PT36H", 129600},
        {"PT1.5S", 1.5},
        {"PT1,25S", 1.25},
        {"PT0.5M", 30},
        {"PT1H0.5M", 3630},
        {"P0.5D", 43200},
        {"PT007S", 7},
        {"PT9999999S", 9999999},
        {"PT2777H46M39S", 9999999},
        {"P115DT17H46M39S", 9999999},
        {"PT1.000000000000000000000001S", 1},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        double d = -1;
        int rc = dur(ok[i].s, &d);
        T_CHECK(rc == 0 && d == ok[i].want, "%s: rc %d, %.17g, want %.17g", ok[i].s, rc, d,
                ok[i].want);
    }
}

static void test_durations_invalid(void)
{
    static const char *const bad[] = {
        "",
        "P",
        "PT",
        "T1S",
        "1S",
        "pt1s",
        "P1DT",
        "PT1H2H",
        "PT1M1H",
        "PT1S1S",
        "P1D1W",
        "PT-1S",
        "PT+1S",
        "P-1D",
        "PT1 S",
        " PT1S",
        "PT1S ",
        "PTS",
        "PT.5S",
        "PT1.S",
        "PT1.5M2S",
        "PT1.5H1S",
        "P1Y",
        "P1M",
        "P1Y2M3D",
        "PT1D",
        "P1H",
        "P1DT1D",
        "PTT1S",
        "PT1X",
        "PT1",
        "P1",
        "PT10000000S",
        "PT2777H46M40S",
        "P116D",
        "P17W",
        "PT99999999999999999999999999999S",
        "PT18446744073709551617S",
        "P99999999999999999999W",
        "PT1e3S",
        "PT0x10S",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double d = -7;
        int rc = dur(bad[i], &d);
        T_CHECK(rc == -1 && d == -7, "\"%s\" refused (rc %d)", bad[i], rc);
    }
    /* only the n bytes given are read: a valid prefix is not the value */
    {
        double d;
        T_CHECK(enr_iso8601_duration("PT1H2M", 4, &d) == 0 && d == 3600, "PT1H of PT1H2M");
        T_CHECK(enr_iso8601_duration("PT1H2M", 5, &d) == -1, "PT1H2 of PT1H2M");
        T_CHECK(enr_iso8601_duration("PT1S\0junk", 9, &d) == -1, "an embedded NUL refused");
    }
}

/* 2024: summer time from Sunday March 10 (10:00 UTC) to Sunday November
 * 3 (09:00 UTC). */
static void test_midnight_fixed(void)
{
    static const struct {
        int64_t now, want;
        const char *what;
    } cases[] = {
        {1700000000, 1700035200, "2023-11-14 14:13 PST -> Nov 15 00:00 PST"},
        {1710064799, 1710140400, "Mar 10 01:59:59 PST (last winter second) -> Mar 11 00:00 PDT"},
        {1710064800, 1710140400, "Mar 10 03:00 PDT (first summer second) -> Mar 11 00:00 PDT"},
        {1710057600, 1710140400, "Mar 10 00:00 PST exactly -> the next one, Mar 11 PDT"},
        {1710057599, 1710057600, "Mar 9 23:59:59 PST -> Mar 10 00:00 PST"},
        {1730624399, 1730707200, "Nov 3 01:59:59 PDT -> Nov 4 00:00 PST"},
        {1730624400, 1730707200, "Nov 3 01:00 PST (the hour again) -> Nov 4 00:00 PST"},
        {1730617200, 1730707200, "Nov 3 00:00 PDT exactly -> Nov 4 00:00 PST"},
        {1730617199, 1730617200, "Nov 2 23:59:59 PDT -> Nov 3 00:00 PDT"},
        {1735718399, 1735718400, "Dec 31 23:59:59 PST -> Jan 1 2025 00:00 PST"},
        {1735718400, 1735804800, "Jan 1 2025 00:00 PST -> Jan 2"},
        {1735689600, 1735718400, "Jan 1 2025 00:00 UTC (Dec 31 16:00 PST) -> Jan 1 PST"},
        {1719792000, 1719817200, "Jul 1 2024 00:00 UTC (Jun 30 17:00 PDT) -> Jul 1 PDT"},
        {951825600, 951897600, "Feb 29 2000 04:00 PST -> Mar 1 00:00 PST"},
        {0, 28800, "the epoch (Dec 31 1969 16:00 PST) -> Jan 1 1970 PST"},
        {4102444800, 4102444800 + 8 * 3600, "Jan 1 2100 00:00 UTC -> Jan 1 2100 PST"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t got = enr_pacific_next_midnight(cases[i].now);
        T_CHECK(got == cases[i].want, "%s: got %lld, want %lld", cases[i].what, (long long)got,
                (long long)cases[i].want);
    }
}

/* The C library's reading of the zone's tzfile: the first local midnight
 * after now, found with mktime. */
static int64_t oracle(int64_t now)
{
    time_t t = (time_t)now;
    struct tm tm;

    localtime_r(&t, &tm);
    tm.tm_mday += 1;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    tm.tm_isdst = -1;
    return (int64_t)mktime(&tm);
}

static void test_midnight_oracle(void)
{
    const char *zone = "/usr/share/zoneinfo/America/Los_Angeles";
    int64_t from = 1577836800, to = 1924992000; /* 2020-01-01 .. 2031-01-01 UTC */
    unsigned bad = 0, n = 0;

    if (access(zone, R_OK) != 0) {
        printf("note: %s absent: the fixed instants alone check the midnight\n", zone);
        return;
    }
    setenv("TZ", ":America/Los_Angeles", 1);
    tzset();
    for (int64_t now = from; now < to; now += 3600 - 1, n++) {
        int64_t want = oracle(now), got = enr_pacific_next_midnight(now);
        if (got != want && bad++ < 5)
            T_CHECK(0, "now %lld: got %lld, tzfile says %lld", (long long)now, (long long)got,
                    (long long)want);
    }
    T_CHECK(bad == 0 && n > 90000, "%u of %u hours differ from the tzfile", bad, n);
    unsetenv("TZ");
    tzset();
}

static void test_datetime(void)
{
    int64_t t;

    T_CHECK(enr_api_iso_datetime("2016-08-30T11:41:40+00:00", 25, &t) == 0 && t == 1472557300,
            "Vimeo's form");
    T_CHECK(enr_api_iso_datetime("2016-08-30T04:41:40-07:00", 25, &t) == 0 && t == 1472557300,
            "an offset west");
    T_CHECK(enr_api_iso_datetime("2016-08-30T11:41:40Z", 20, &t) == 0 && t == 1472557300, "Z");
    T_CHECK(enr_api_iso_datetime("2016-08-30T11:41:40.250Z", 24, &t) == 0 && t == 1472557300,
            "a fraction");
    T_CHECK(enr_api_iso_datetime("2016-08-30T13:41:40+0200", 24, &t) == 0 && t == 1472557300,
            "+HHMM");
    T_CHECK(enr_api_iso_datetime("2024-02-29T00:00:00Z", 20, &t) == 0 && t == 1709164800,
            "a leap day");
    T_CHECK(enr_api_iso_datetime("2023-02-29T00:00:00Z", 20, &t) == -1, "not a leap year");
    T_CHECK(enr_api_iso_datetime("2016-08-30T11:41:40", 19, &t) == -1, "no offset: refused");
    T_CHECK(enr_api_iso_datetime("2016-13-30T11:41:40Z", 20, &t) == -1, "month 13");
    T_CHECK(enr_api_iso_datetime("2016-08-30 11:41:40Z", 20, &t) == -1, "a space for T");
    T_CHECK(enr_api_iso_datetime("2016-08-30T24:00:00Z", 20, &t) == -1, "hour 24");
    T_CHECK(enr_api_iso_datetime("2016-08-30T11:41:40+00:0", 24, &t) == -1, "short offset");
    T_CHECK(enr_api_iso_datetime("2016-08-30T11:41:40Zjunk", 24, &t) == -1, "a tail");
}

int main(void)
{
    test_durations_valid();
    test_durations_invalid();
    test_midnight_fixed();
    test_midnight_oracle();
    test_datetime();
    T_DONE();
}
