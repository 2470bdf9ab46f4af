/*
 * api_time.c: the two clocks of the providers' APIs (api.h): YouTube's
 * runtimes as ISO 8601 durations, and the midnight in America/Los_Angeles
 * at which YouTube's daily quota starts again.
 *
 * Durations: P[nW][nD][T[nH][nM][nS]], each designator at most once and in
 * that order, digits only (no sign, no space), at least one component,
 * and a fraction ("." or ",", ISO 8601's two decimal signs) only on the
 * last one.  Years and months are refused: their length depends on a
 * calendar, and YouTube writes days.  A value is summed exactly in
 * integers, then its fraction; anything that reaches
 * ENR_REPLY_DURATION_LIMIT is refused without overflowing.
 *
 * Midnight: computed from the US rules in force since 2007 (summer time
 * from the second Sunday of March, 02:00 PST, to the first Sunday of
 * November, 02:00 PDT), with no TZ variable and no tzfile: a worker's
 * environment and its chroot cannot change when a quota resets.  Those
 * rules are applied to every year.  Both switches happen at 02:00, so a
 * midnight is never inside one.
 *
 * Date-times: the ISO 8601 form a provider writes in a header
 * (2016-08-30T11:41:40+00:00), with its offset; a date-time without one
 * is local to somebody, and refused.
 */
#include "upstream/api.h"
#include "upstream/api_int.h"

#include <stdint.h>

#define DAY_S 86400
#define PST_S (8 * 3600) /* UTC - local, winter */
#define PDT_S (7 * 3600) /* UTC - local, summer */

/* ---- ISO 8601 durations ---- */

/* The designators in the only order allowed; seconds each. */
static const struct {
    char c;
    int time; /* after the T */
    uint32_t unit;
} units[] = {{'W', 0, 7 * DAY_S}, {'D', 0, DAY_S}, {'H', 1, 3600}, {'M', 1, 60}, {'S', 1, 1}};

#define NUNITS (sizeof units / sizeof units[0])

/* A fraction's digits beyond this change nothing a double can hold. */
#define FRAC_DIGITS 18

int enr_iso8601_duration(const char *s, size_t n, double *seconds)
{
    const uint64_t limit = (uint64_t)ENR_REPLY_DURATION_LIMIT;
    uint64_t whole = 0;
    double frac = 0;
    size_t i = 1, next = 0; /* next: the first designator still allowed */
    int in_time = 0, parts = 0, time_parts = 0, fraction_seen = 0;

    if (n < 3 || s[0] != 'P')
        return -1;
    while (i < n) {
        uint64_t v = 0, fnum = 0, fden = 1;
        size_t k, d0;
        if (s[i] == 'T') {
            if (in_time)
                return -1;
            in_time = 1;
            i++;
            continue;
        }
        if (fraction_seen)
            return -1; /* a fraction was not on the last component */
        for (d0 = i; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            if (v <= limit)
                v = v * 10 + (uint64_t)(s[i] - '0');
        if (i == d0 || i >= n)
            return -1;
        if (s[i] == '.' || s[i] == ',') {
            size_t f0 = ++i;
            for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
                if (i - f0 < FRAC_DIGITS) {
                    fnum = fnum * 10 + (uint64_t)(s[i] - '0');
                    fden *= 10;
                }
            if (i == f0 || i >= n)
                return -1;
            fraction_seen = 1;
        }
        for (k = next; k < NUNITS && units[k].c != s[i]; k++)
            ;
        if (k == NUNITS || units[k].time != in_time)
            return -1; /* unknown, out of order, repeated, or on the wrong side of T */
        if (v >= limit || v * units[k].unit >= limit)
            return -1;
        whole += v * units[k].unit;
        if (whole >= limit)
            return -1;
        frac = (double)fnum / (double)fden * units[k].unit;
        next = k + 1;
        parts++;
        time_parts += in_time;
        i++;
    }
    if (parts == 0 || (in_time && time_parts == 0))
        return -1; /* "P", "PT", "P1DT" */
    *seconds = (double)whole + frac;
    if (*seconds >= ENR_REPLY_DURATION_LIMIT)
        return -1;
    return 0;
}

/* ---- the Pacific midnight ---- */

static int64_t floor_div(int64_t a, int64_t b)
{
    return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    int64_t era;
    unsigned yoe, doy, doe;

    y -= m <= 2;
    era = floor_div(y, 400);
    yoe = (unsigned)(y - era * 400);
    doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static int64_t year_of_day(int64_t z)
{
    int64_t era, y;
    unsigned doe, yoe, doy, mp;

    z += 719468;
    era = floor_div(z, 146097);
    doe = (unsigned)(z - era * 146097);
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    y = (int64_t)yoe + era * 400;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    return y + (mp >= 10); /* January and February belong to the next year */
}

/* The first Sunday on or after day d (1970-01-01 was a Thursday). */
static int64_t sunday_from(int64_t d)
{
    int64_t wd = (d + 4) - floor_div(d + 4, 7) * 7; /* 0 = Sunday */

    return d + (7 - wd) % 7;
}

/* The local dates of year y's switches: summer time from start's 02:00
 * PST to end's 02:00 PDT. */
static void switches(int64_t y, int64_t *start, int64_t *end)
{
    *start = sunday_from(days_from_civil(y, 3, 1)) + 7;
    *end = sunday_from(days_from_civil(y, 11, 1));
}

int64_t enr_pacific_next_midnight(int64_t now)
{
    const int64_t bound = INT64_C(1) << 52; /* some 142 million years: no overflow below */
    int64_t start, end, off, day;

    if (now > bound)
        now = bound;
    if (now < -bound)
        now = -bound;
    /* The offset at now: the year is the same in either offset but on the
     * night of December 31st, and then summer time does not apply. */
    day = floor_div(now - PST_S, DAY_S);
    switches(year_of_day(day), &start, &end);
    off = (now >= start * DAY_S + 2 * 3600 + PST_S && now < end * DAY_S + 2 * 3600 + PDT_S) ? PDT_S
                                                                                            : PST_S;
    /* The next local date, and its midnight in summer or winter time:
     * the start Sunday's midnight is still winter, the end Sunday's still
     * summer. */
    day = floor_div(now - off, DAY_S) + 1;
    switches(year_of_day(day), &start, &end);
    return day * DAY_S + (day > start && day <= end ? PDT_S : PST_S);
}

/* ---- ISO 8601 date-times ---- */

/* The n digits at s: their value, or -1. */
static int fixed(const char *s, size_t n)
{
    int v = 0;

    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* The offset at s[0..n) ("Z", "+HH:MM", "+HHMM", "-..."): seconds east
 * of UTC; 0, or -1. */
static int zone(const char *s, size_t n, int64_t *east)
{
    int h, m;

    if (n == 1 && (s[0] == 'Z' || s[0] == 'z')) {
        *east = 0;
        return 0;
    }
    if ((n != 6 || s[3] != ':') && n != 5)
        return -1;
    if (s[0] != '+' && s[0] != '-')
        return -1;
    h = fixed(s + 1, 2);
    m = fixed(s + n - 2, 2);
    if (h < 0 || h > 23 || m < 0 || m > 59)
        return -1;
    *east = (s[0] == '-' ? -1 : 1) * (int64_t)(h * 3600 + m * 60);
    return 0;
}

int enr_api_iso_datetime(const char *s, size_t n, int64_t *t)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, mo, d, h, mi, se;
    size_t i = 19;
    int64_t east;

    if (n < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' ||
        s[16] != ':')
        return -1;
    y = fixed(s, 4);
    mo = fixed(s + 5, 2);
    d = fixed(s + 8, 2);
    h = fixed(s + 11, 2);
    mi = fixed(s + 14, 2);
    se = fixed(s + 17, 2);
    if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h < 0 || h > 23 || mi < 0 ||
        mi > 59 || se < 0 || se > 60)
        return -1;
    if (mo == 2 && d == 29 && (y % 4 != 0 || (y % 100 == 0 && y % 400 != 0)))
        return -1;
    if (s[i] == '.' || s[i] == ',') {
        size_t f0 = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == f0)
            return -1;
    }
    if (zone(s + i, n - i, &east) != 0)
        return -1;
    *t = days_from_civil(y, (unsigned)mo, (unsigned)d) * DAY_S + h * 3600 + mi * 60 +
         (se > 59 ? 59 : se) - east;
    return 0;
}
