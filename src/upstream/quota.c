/*
 * quota.c: Retry-After, the host-wide pause and the host-wide token
 * bucket (quota.h).
 *
 * The bucket is GCRA: one 64-bit "theoretical arrival time" (tat) in
 * shared memory.  A call at now is allowed when max(tat, now) is at most
 * burst_us ahead of now, and books interval_us more; one compare-and-swap
 * per call, no lock, so a worker killed between load and CAS changed
 * nothing and one killed after it spent one token.  Over any t seconds
 * the host makes at most rate * t + burst calls.  The pause is a maximum
 * kept the same way.  Neither is ever held across a wait: a call the
 * quota refuses is not made (the records keep their local values), so a
 * batch never waits for a token past its deadline, or at all.
 *
 * Retry-After is hostile input (the provider's header): parsed without
 * the C library's locale-dependent time functions, every field range
 * checked, and the result bounded by ENR_RETRY_AFTER_MAX_S.  Bounded is
 * not harmless: one answer may stop enrichment for an hour, so the
 * operator can end a pause with a HUP (enr_quota_resume).
 */
#include "upstream/quota.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"

/* ---- Retry-After ---- */

static const char *const day_names[7] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
static const char *const day_names_l[7] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                           "Friday", "Saturday", "Sunday"};
static const char *const months[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

typedef struct rd {
    const char *p, *end;
} rd;

static int lit(rd *c, const char *s)
{
    size_t n = strlen(s);

    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0)
        return -1;
    c->p += n;
    return 0;
}

/* Exactly n digits (n <= 4). */
static int digits(rd *c, unsigned n, unsigned *v)
{
    *v = 0;
    if ((size_t)(c->end - c->p) < n)
        return -1;
    for (unsigned i = 0; i < n; i++) {
        if (c->p[i] < '0' || c->p[i] > '9')
            return -1;
        *v = *v * 10 + (unsigned)(c->p[i] - '0');
    }
    c->p += n;
    return 0;
}

static int one_of(rd *c, const char *const *names, unsigned count, unsigned *idx)
{
    for (unsigned i = 0; i < count; i++)
        if (lit(c, names[i]) == 0) {
            *idx = i;
            return 0;
        }
    return -1;
}

static int leap(unsigned y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static unsigned days_in(unsigned y, unsigned m) /* m 0..11 */
{
    static const unsigned char d[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return d[m] + (m == 1 && leap(y));
}

/* Days from 1970-01-01 to y-m-d (m 0..11, d 1..31), y >= 1900
 * (the civil-from-days inverse, Gregorian calendar). */
static int64_t days_from_civil(unsigned y, unsigned m, unsigned d)
{
    int64_t yy = (int64_t)y - (m < 2);
    int64_t era = yy / 400;
    int64_t yoe = yy - era * 400;
    int64_t mp = (m + 10) % 12; /* March is 0 */
    int64_t doy = (153 * mp + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int time_of_day(rd *c, unsigned *h, unsigned *mi, unsigned *s)
{
    if (digits(c, 2, h) || lit(c, ":") || digits(c, 2, mi) || lit(c, ":") || digits(c, 2, s))
        return -1;
    return (*h > 23 || *mi > 59 || *s > 60) ? -1 : 0; /* 60: a leap second */
}

/* An HTTP-date at c (RFC 9110 5.6.7); Unix seconds in *t. */
static int http_date(rd *c, int64_t *t)
{
    unsigned wd, d = 0, m = 0, y = 0, h, mi, s;
    rd save = *c;

    if (one_of(c, day_names_l, 7, &wd) == 0 && lit(c, ", ") == 0) {
        /* rfc850-date: Sunday, 06-Nov-94 08:49:37 GMT */
        if (digits(c, 2, &d) || lit(c, "-") || one_of(c, months, 12, &m) || lit(c, "-") ||
            digits(c, 2, &y) || lit(c, " ") || time_of_day(c, &h, &mi, &s) || lit(c, " GMT"))
            return -1;
        y += y < 69 ? 2000 : 1900; /* as POSIX strptime %y reads it */
    } else {
        *c = save;
        if (one_of(c, day_names, 7, &wd) != 0)
            return -1;
        if (lit(c, ", ") == 0) {
            /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
            if (digits(c, 2, &d) || lit(c, " ") || one_of(c, months, 12, &m) || lit(c, " ") ||
                digits(c, 4, &y) || lit(c, " ") || time_of_day(c, &h, &mi, &s) || lit(c, " GMT"))
                return -1;
        } else {
            /* asctime-date: Sun Nov  6 08:49:37 1994 */
            if (lit(c, " ") || one_of(c, months, 12, &m) || lit(c, " "))
                return -1;
            if (lit(c, " ") == 0) {
                if (digits(c, 1, &d))
                    return -1;
            } else if (digits(c, 2, &d)) {
                return -1;
            }
            if (lit(c, " ") || time_of_day(c, &h, &mi, &s) || lit(c, " ") || digits(c, 4, &y))
                return -1;
        }
    }
    if (y < 1900 || d < 1 || d > days_in(y, m))
        return -1;
    *t = days_from_civil(y, m, d) * 86400 + h * 3600 + mi * 60 + s;
    return 0;
}

int enr_retry_after_parse(const char *p, size_t n, int64_t now_wall_s, unsigned *delay_s)
{
    rd c = {p, p + n};
    int64_t t;

    while (c.p < c.end && (*c.p == ' ' || *c.p == '\t'))
        c.p++;
    while (c.end > c.p &&
           (c.end[-1] == ' ' || c.end[-1] == '\t' || c.end[-1] == '\r' || c.end[-1] == '\n'))
        c.end--;
    if (c.p == c.end)
        return -1;
    if (*c.p >= '0' && *c.p <= '9') {
        uint64_t v = 0;
        for (; c.p < c.end; c.p++) {
            if (*c.p < '0' || *c.p > '9')
                return -1;
            if (v <= ENR_RETRY_AFTER_MAX_S) /* past it the value no longer matters */
                v = v * 10 + (uint64_t)(*c.p - '0');
        }
        *delay_s = v > ENR_RETRY_AFTER_MAX_S ? ENR_RETRY_AFTER_MAX_S : (unsigned)v;
        return 0;
    }
    if (http_date(&c, &t) != 0 || c.p != c.end)
        return -1;
    if (t <= now_wall_s)
        *delay_s = 0;
    else
        *delay_s = t - now_wall_s > ENR_RETRY_AFTER_MAX_S ? ENR_RETRY_AFTER_MAX_S
                                                          : (unsigned)(t - now_wall_s);
    return 0;
}

/* ---- the shared pause and bucket ---- */

void enr_quota_init(enr_quota *q, enr_sb_quota *shared, unsigned max_calls_per_s)
{
    memset(q, 0, sizeof *q);
    q->sh = shared ? shared : &q->own;
    if (max_calls_per_s > 0) {
        uint64_t burst = max_calls_per_s / ENR_QUOTA_BURST_DIV;
        q->interval_us = 1000000u / max_calls_per_s;
        if (q->interval_us == 0)
            q->interval_us = 1;
        /* A call is allowed while the bucket is booked at most this far
         * ahead: burst calls at once, then one per interval. */
        q->burst_us = (burst > 1 ? burst - 1 : 0) * q->interval_us;
    }
}

uint64_t enr_quota_paused_until(const enr_quota *q)
{
    return ENR_SB_GET(q->sh->pause_until_ms);
}

int enr_quota_take(enr_quota *q, uint64_t now_ms)
{
    return enr_quota_take_at(q, now_ms, enr_mono_us());
}

int enr_quota_take_at(enr_quota *q, uint64_t now_ms, uint64_t now_us)
{
    uint64_t tat, next;

    if (ENR_SB_GET(q->sh->pause_until_ms) > now_ms)
        return ENR_QUOTA_PAUSED;
    if (q->interval_us == 0)
        return ENR_QUOTA_OK;
    tat = atomic_load_explicit(&q->sh->tat_us, memory_order_relaxed);
    do {
        uint64_t base = tat > now_us ? tat : now_us;
        if (base - now_us > q->burst_us)
            return ENR_QUOTA_RATE;
        next = base + q->interval_us;
    } while (!atomic_compare_exchange_weak_explicit(&q->sh->tat_us, &tat, next,
                                                    memory_order_relaxed, memory_order_relaxed));
    return ENR_QUOTA_OK;
}

uint64_t enr_quota_resume(enr_sb_quota *sh, uint64_t now_ms)
{
    /* One exchange: a worker's pause racing it is either ended here or
     * set after it, never half of each. */
    uint64_t was = atomic_exchange_explicit(&sh->pause_until_ms, 0, memory_order_relaxed);

    return was > now_ms ? was - now_ms : 0;
}

void enr_quota_pause(enr_quota *q, uint64_t now_ms, unsigned delay_s, long status, int why)
{
    uint64_t until, cur;
    char msg[96];

    if (delay_s < ENR_THROTTLE_DEFAULT_S)
        delay_s = ENR_THROTTLE_DEFAULT_S;
    if (delay_s > ENR_RETRY_AFTER_MAX_S)
        delay_s = ENR_RETRY_AFTER_MAX_S;
    until = now_ms + (uint64_t)delay_s * 1000u;
    cur = atomic_load_explicit(&q->sh->pause_until_ms, memory_order_relaxed);
    do {
        /* A pause as long (within a second: the other answers to calls
         * in flight when the first 429 came) is set: its setter logged it. */
        if (cur > now_ms && cur + 1000u >= until)
            return;
    } while (!atomic_compare_exchange_weak_explicit(&q->sh->pause_until_ms, &cur, until,
                                                    memory_order_relaxed, memory_order_relaxed));
    ENR_SB_ADD(q->sh->pauses, 1);
    ENR_SB_SET(q->sh->why, why >= 0 && why < ENR_UP_NFAILS ? enr_up_fail_rows[why].pause : 0);
    ENR_SB_SET(q->sh->until_wall_s, (uint64_t)time(NULL) + delay_s);
    q->sh->reason[0] = '\0';
    /* Once per pause: calls that meet it are counted (by its kind), not logged. */
    snprintf(msg, sizeof msg, "upstream %s: %s", enr_up_fail_name(why),
             cur <= now_ms ? "no calls until the provider's quota allows" : "pause lengthened");
    enr_log(ENR_LOG_WARN, msg, "status=%ld pause_s=%u", status, delay_s);
}

int enr_quota_hold(enr_quota *q, uint64_t now_ms, uint64_t delay_ms, int why, int64_t until_wall_s,
                   const char *reason)
{
    uint64_t until = now_ms + (delay_ms ? delay_ms : 1), cur, rank;
    size_t i = 0;

    if (why < 0 || why >= ENR_UP_NFAILS || enr_up_fail_rows[why].pause == 0)
        return 0; /* not a reason a pause holds for */
    rank = enr_up_fail_rows[why].pause;

    cur = atomic_load_explicit(&q->sh->pause_until_ms, memory_order_relaxed);
    do {
        /* As long already (within a second: the other answers to calls in
         * flight when the first came), and for a reason as strong. */
        if (cur > now_ms && cur + 1000u >= until && ENR_SB_GET(q->sh->why) >= rank)
            return 0;
    } while (!atomic_compare_exchange_weak_explicit(&q->sh->pause_until_ms, &cur, until,
                                                    memory_order_relaxed, memory_order_relaxed));
    ENR_SB_ADD(q->sh->pauses, 1);
    ENR_SB_SET(q->sh->why, rank);
    ENR_SB_SET(q->sh->until_wall_s, (uint64_t)(until_wall_s > 0 ? until_wall_s : 0));
    for (; reason != NULL && reason[i] != '\0' && i + 1 < sizeof q->sh->reason; i++)
        q->sh->reason[i] = reason[i] > 0x20 && reason[i] < 0x7f ? reason[i] : '?';
    q->sh->reason[i] = '\0';
    return 1;
}

int enr_quota_why(const enr_quota *q, uint64_t now_ms)
{
    if (ENR_SB_GET(q->sh->pause_until_ms) <= now_ms)
        return -1;
    return enr_up_fail_of_pause(ENR_SB_GET(q->sh->why));
}

void enr_quota_clear_auth(enr_sb_quota q[ENR_UP_SOURCES])
{
    for (unsigned i = 0; i < ENR_UP_SOURCES; i++) {
        uint64_t cur = ENR_SB_GET(q[i].pause_until_ms);
        if (enr_up_fail_of_pause(ENR_SB_GET(q[i].why)) == ENR_UP_F_AUTH &&
            atomic_compare_exchange_strong_explicit(&q[i].pause_until_ms, &cur, 0,
                                                    memory_order_relaxed, memory_order_relaxed))
            enr_log(ENR_LOG_INFO, "reload: the pause for a refused key ends", "source=%u", i);
    }
}
