/*
 * budget.c: the day's quota budget of each source, host-wide, paced,
 * kept in a file (budget.h).
 *
 * The host's state is one page, mapped MAP_SHARED by the master before
 * the first fork (every worker and the status process inherit it) from
 * budget_file, or anonymous memory when there is none.  Each of the
 * day's figures (units spent, units asked, calls deferred, the demand
 * of each 24th of the day) is ONE 64-bit word: the day's key in its top
 * 24 bits, the value in the low 40.  An update is one compare-and-swap
 * that starts the value at 0 when the key is an earlier day's, so a new
 * day needs no reset step, no lock, and no process that could die
 * holding one: a worker killed between load and CAS changed nothing,
 * one killed after it spent its units.  The limits (written by the
 * master from the configuration, on start and on each reload) sit in the
 * same page, so the status process shows what the workers enforce.
 *
 * Which day it is comes from the page, not from the wall clock alone,
 * which an NTP step or an operator can move a day either way: each
 * source's day in force is ONE more word (enr_budget_in_force: its key,
 * and when it ends on CLOCK_BOOTTIME, which no step moves), entered by
 * one CAS by the first take that finds its end passed.  A day ends when
 * boottime says so (the wall only within ENR_BUDGET_STEP_TOLERANCE_MS of
 * it), never an earlier day is entered again, and a figure of a later
 * key than the day in force counts for it.  After a reboot the ends are
 * forgotten (the page keeps the boot id) and the wall says them.
 * docs/providers.md, "Whose midnight", says why.
 *
 * Invariants:
 *   - spent never passes what enr_budget_allowed() gives at the moment
 *     of the take, which is never more than the day's limit: the host
 *     never spends more than its budget in a day, whatever the workers'
 *     interleaving (the CAS fails and retries when another took first);
 *   - within a boot, a day's units are spent at most once in the time
 *     CLOCK_BOOTTIME counts as its length (less the tolerance): no step
 *     of the wall clock, back or forward, gives units back;
 *   - the day in force only moves forward (its key is never replaced by
 *     an earlier one, a figure's key never goes back), so a process that
 *     read an older day an instant before adds to the newer one;
 *   - a refresh is held to half the burst, a new id gets all of it;
 *   - units are taken before the request is sent, whether or not it
 *     then succeeds (the provider counts a failed call too);
 *   - the file is found, trusted (owner, mode, links), locked and
 *     replaced by base/statefile.c, the rule every state file follows;
 *     its lock is held while any process of the host maps it, so a
 *     second daemon on the same file is refused, never counting into a
 *     copy of its own.  Its page is used only after its header checks
 *     (magic, version, byte order, layout, size, a checksum); a page of
 *     ours that fails them is replaced by an empty one, made whole
 *     before it takes the name, the log saying why.  A value in a valid
 *     page can at worst hold back its own day's calls: every value is
 *     bounded by its 40 bits, and a day's recorded end further than two
 *     days ahead is not believed, so a forged day in force lasts at most
 *     two days before the next;
 *   - the day records sit at the end of the file, where a file of an
 *     earlier build holds zeros: read as no day entered yet, an unknown
 *     boot, so an upgrade keeps the day's figures.
 *   - a machine that loses power loses what the kernel had not written
 *     back of the page (some seconds of spending), never the page.
 */
#include "upstream/budget.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/statefile.h"
#include "upstream/api.h"
#include "upstream/store_lease.h"

#define BUDGET_MAGIC "ENRBUDG1"
#define BUDGET_VERSION 1u
#define BUDGET_ORDER 0x01020304u /* the byte order that wrote the file */
#define BUDGET_FILE_SIZE 4096u   /* the file, exactly */
#define VAL_BITS 40
#define VAL_MASK ((UINT64_C(1) << VAL_BITS) - 1)
#define KEY_MASK ((UINT64_C(1) << (64 - VAL_BITS)) - 1)
#define HOUR_MS INT64_C(3600000)
#define DAY_MS INT64_C(86400000)
#define END_MASK VAL_MASK /* a day record: key | 1 + its end on CLOCK_BOOTTIME */
#define KEY_HALF (UINT64_C(1) << (64 - VAL_BITS - 1))
#define END_AHEAD_MAX (2 * DAY_MS) /* a recorded end further ahead: not this boot's */
#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

typedef struct bsrc {
    /* the master's, from the configuration */
    enr_sb_u64 limit, burst, clock, day_ms, day_origin; /* the last two: test builds only */
    /* the day's figures: key | value (see the top) */
    enr_sb_u64 spent, asked, deferred_new, deferred_refresh;
    enr_sb_u64 demand[ENR_BUDGET_BUCKETS];
    enr_sb_u64 logged; /* the key of the last day the pace was said to hold */
} bsrc;

typedef struct page {
    char magic[8];
    uint32_t version, size, nsrc, order;
    uint64_t check; /* FNV-1a of the fields above */
    bsrc src[ENR_UP_SOURCES];
} page;

/* The day in force of each source, at the end of the file: a file of an
 * earlier build holds zeros there, read as "no day entered yet, its
 * boot unknown", so an upgrade keeps the day's figures. */
typedef struct dayrecs {
    enr_sb_u64 boot;                /* hash of the boot the ends count on */
    enr_sb_u64 day[ENR_UP_SOURCES]; /* enr_budget_in_force's record */
} dayrecs;

#define DAYRECS_AT (BUDGET_FILE_SIZE - sizeof(dayrecs))
_Static_assert(sizeof(page) <= DAYRECS_AT, "the budget page and its day records fit its file");

static page *g_page;                      /* the host's, inherited across fork */
static dayrecs *g_days;                   /* in the same mapping */
static char g_path[ENR_PATH_MAX];         /* "" memory only */
static char g_why[ENR_STATEFILE_WHY_MAX]; /* why the file could not be had */
static const char *g_boot_id;             /* a test's; NULL: the kernel's */

/* ---- the arithmetic ---- */

static int64_t floor_div(int64_t a, int64_t b)
{
    return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

void enr_budget_day(int clock, uint64_t day_ms, int64_t origin_ms, int64_t now_ms,
                    int64_t *start_ms, int64_t *end_ms)
{
    if (day_ms > 0) {
        *start_ms = origin_ms + floor_div(now_ms - origin_ms, (int64_t)day_ms) * (int64_t)day_ms;
        *end_ms = *start_ms + (int64_t)day_ms;
    } else if (clock == ENR_BUDGET_PACIFIC) {
        /* A Pacific day lasts 23 to 25 hours: 26 hours before the next
         * midnight is inside the day before this one. */
        int64_t end = enr_pacific_next_midnight(floor_div(now_ms, 1000));
        *end_ms = end * 1000;
        *start_ms = enr_pacific_next_midnight(end - 26 * 3600) * 1000;
    } else {
        *start_ms = floor_div(now_ms, DAY_MS) * DAY_MS;
        *end_ms = *start_ms + DAY_MS;
    }
}

uint64_t enr_budget_allowed(uint64_t limit, uint64_t burst, uint64_t elapsed_ms, uint64_t day_ms)
{
    uint64_t share;

    if (day_ms == 0 || elapsed_ms >= day_ms)
        return limit;
    /* limit * elapsed / day without overflow: the remainder's product is
     * below day_ms squared. */
    share = limit / day_ms * elapsed_ms + limit % day_ms * elapsed_ms / day_ms;
    return share + burst < limit ? share + burst : limit;
}

uint64_t enr_budget_forecast(uint64_t asked, uint64_t cur, uint64_t elapsed_in_cur_ms,
                             uint64_t prev, int prev_valid, uint64_t elapsed_ms, uint64_t day_ms)
{
    double units = (double)cur, span = (double)elapsed_in_cur_ms, f;

    if (prev_valid) {
        units += (double)prev;
        span += (double)day_ms / ENR_BUDGET_BUCKETS;
    }
    if (span <= 0 || elapsed_ms >= day_ms)
        return asked;
    f = (double)asked + units / span * (double)(day_ms - elapsed_ms);
    return f < (double)VAL_MASK ? (uint64_t)f : VAL_MASK;
}

/* ---- the day in force ---- */

/* 1 when day key a comes after b (keys wrap at 24 bits, as serial
 * numbers do: a day is never 2^23 days after another). */
static int later(uint64_t a, uint64_t b)
{
    uint64_t d = (a - b) & KEY_MASK;

    return d != 0 && d < KEY_HALF;
}

static uint64_t key_of(const enr_budget_calendar *cal, int64_t start)
{
    if (cal->day_ms > 0)
        return (uint64_t)floor_div(start - cal->origin_ms, (int64_t)cal->day_ms) & KEY_MASK;
    return (uint64_t)floor_div(start, HOUR_MS) & KEY_MASK; /* a real day starts on the hour */
}

/* The day of key: [*start, *end) on the wall clock. */
static void key_span(const enr_budget_calendar *cal, uint64_t key, int64_t *start, int64_t *end)
{
    int64_t k = (int64_t)(key ^ KEY_HALF) - (int64_t)KEY_HALF; /* 24 bits, signed */

    if (cal->day_ms > 0)
        k = cal->origin_ms + k * (int64_t)cal->day_ms;
    else
        k *= HOUR_MS;
    enr_budget_day(cal->clock, cal->day_ms, cal->origin_ms, k, start, end);
}

static uint64_t record(uint64_t key, int64_t end_boot)
{
    if (end_boot < 0)
        end_boot = 0;
    if ((uint64_t)end_boot >= END_MASK)
        end_boot = (int64_t)END_MASK - 1;
    return key << VAL_BITS | ((uint64_t)end_boot + 1);
}

uint64_t enr_budget_in_force(const enr_budget_calendar *cal, uint64_t rec, enr_budget_now now,
                             enr_budget_when *w)
{
    uint64_t key = rec >> VAL_BITS, end1 = rec & END_MASK;
    int64_t ks, ke, t = now.wall_ms, eb, left;
    int known = rec != 0 && end1 != 0 &&
                (int64_t)(end1 - 1) - now.boot_ms <= END_AHEAD_MAX; /* else another boot's */

    if (rec == 0) { /* no day entered yet: the wall's */
        enr_budget_day(cal->clock, cal->day_ms, cal->origin_ms, t, &ks, &ke);
        key = key_of(cal, ks);
        eb = now.boot_ms + (ke - t);
    } else {
        key_span(cal, key, &ks, &ke);
        if (known) {
            /* The wall time CLOCK_BOOTTIME says it is: the day's end less
             * what is left of it.  A wall further from it than the
             * tolerance was stepped, and is not believed. */
            int64_t tb = ke - ((int64_t)(end1 - 1) - now.boot_ms);
            if (t - tb > ENR_BUDGET_STEP_TOLERANCE_MS || tb - t > ENR_BUDGET_STEP_TOLERANCE_MS)
                t = tb;
        }
        if (t < ke) {
            /* The day in force goes on: never an earlier one (its figures
             * stay spent).  Its end unknown (a reboot), the wall says it,
             * but a wall far behind holds it at most one day more. */
            eb = known ? (int64_t)(end1 - 1) : now.boot_ms + (ke - t < ke - ks ? ke - t : ke - ks);
        } else {
            /* Its end came: the day of t, which may skip days nobody used. */
            enr_budget_day(cal->clock, cal->day_ms, cal->origin_ms, t, &ks, &ke);
            key = key_of(cal, ks);
            eb = now.boot_ms + (ke - t);
        }
    }
    w->start = ks;
    w->end = ke;
    w->len = (uint64_t)(ke - ks);
    w->key = key;
    left = eb - now.boot_ms;
    w->left_ms = left < 0 ? 0 : left;
    w->elapsed = (uint64_t)w->left_ms >= w->len ? 0 : w->len - (uint64_t)w->left_ms;
    w->bucket = (unsigned)(w->elapsed * ENR_BUDGET_BUCKETS / w->len);
    if (w->bucket >= ENR_BUDGET_BUCKETS)
        w->bucket = ENR_BUDGET_BUCKETS - 1;
    return rec != 0 && known && key == rec >> VAL_BITS ? rec : record(key, eb);
}

enr_budget_now enr_budget_clocks(void)
{
    enr_budget_now n = {(int64_t)enr_wall_ms(), (int64_t)enr_boot_ms()};

    return n;
}

static void calendar_of(const bsrc *s, enr_budget_calendar *cal)
{
    cal->clock = (int)ENR_SB_GET(s->clock);
    cal->day_ms = ENR_SB_GET(s->day_ms);
    cal->origin_ms = (int64_t)ENR_SB_GET(s->day_origin);
}

/* The day in force of source src for a take: entered in the page (one
 * compare-and-swap; a process that lost the race reads the winner's). */
static void day_enter(int src, const bsrc *s, enr_budget_now now, enr_budget_when *w)
{
    enr_budget_calendar cal;
    uint64_t cur = atomic_load_explicit(&g_days->day[src], memory_order_relaxed), next;

    calendar_of(s, &cal);
    for (;;) {
        next = enr_budget_in_force(&cal, cur, now, w);
        if (next == cur ||
            atomic_compare_exchange_weak_explicit(&g_days->day[src], &cur, next,
                                                  memory_order_relaxed, memory_order_relaxed))
            return;
    }
}

/* The same for a view, which writes nothing. */
static void day_read(int src, const bsrc *s, enr_budget_now now, enr_budget_when *w)
{
    enr_budget_calendar cal;

    calendar_of(s, &cal);
    (void)enr_budget_in_force(&cal, atomic_load_explicit(&g_days->day[src], memory_order_relaxed),
                              now, w);
}

/* ---- the day's words ---- */

/* A figure of an earlier day is 0 today; one of the day in force or of
 * a later one (a process that entered the next day an instant before,
 * or an earlier build whose clock was stepped) counts for the day in
 * force: units are never given back. */
static uint64_t figure(uint64_t word, uint64_t key)
{
    return later(key, word >> VAL_BITS) ? 0 : word & VAL_MASK;
}

static uint64_t word_get(const enr_sb_u64 *w, uint64_t key)
{
    return figure(atomic_load_explicit(w, memory_order_relaxed), key);
}

/* Adds n to the value of day key (or of the later day the word holds,
 * whose key it keeps: a word's day never goes back); with cap, only
 * while it stays at most cap.  1 when added. */
static int word_add(enr_sb_u64 *w, uint64_t key, uint64_t n, int capped, uint64_t cap)
{
    uint64_t cur = atomic_load_explicit(w, memory_order_relaxed), v, next, k;

    do {
        v = figure(cur, key);
        k = v == 0 ? key : cur >> VAL_BITS; /* an empty word takes the day's key */
        if (capped && v + n > cap)
            return 0;
        if (v + n > VAL_MASK)
            return 0;
        next = k << VAL_BITS | (v + n);
    } while (!atomic_compare_exchange_weak_explicit(w, &cur, next, memory_order_relaxed,
                                                    memory_order_relaxed));
    return 1;
}

static uint64_t bucket_key(const enr_budget_when *w, unsigned b)
{
    return (w->key * ENR_BUDGET_BUCKETS + b) & KEY_MASK;
}

/* ---- taking ---- */

unsigned enr_budget_cost(int src, size_t n)
{
    const enr_api *api = enr_api_get(src);

    (void)n;
    return api != NULL ? api->units_per_call : 1; /* its descriptor's (api.h) */
}

int enr_budget_take(int src, unsigned units, int refresh, enr_budget_now now)
{
    bsrc *s;
    uint64_t limit, burst, allowed;
    enr_budget_when w;

    if (g_page == NULL || src < 0 || src >= ENR_UP_SOURCES)
        return 1;
    s = &g_page->src[src];
    limit = ENR_SB_GET(s->limit);
    if (limit == 0)
        return 1;
    day_enter(src, s, now, &w);
    burst = ENR_SB_GET(s->burst);
    allowed = enr_budget_allowed(limit, refresh ? burst / 2 : burst, w.elapsed, w.len);
    (void)word_add(&s->asked, w.key, units, 0, 0);
    (void)word_add(&s->demand[w.bucket], bucket_key(&w, w.bucket), units, 0, 0);
    /* With a shared store, only units the host holds (store_lease.h). */
    if (enr_lease_spend(src, units, limit, w.end)) {
        if (word_add(&s->spent, w.key, units, 1, allowed))
            return 1;
        enr_lease_refund(src, units, w.end);
    }
    (void)word_add(refresh ? &s->deferred_refresh : &s->deferred_new, w.key, 1, 0, 0);
    {
        /* Said once a day per source, by the worker that first met it. */
        uint64_t seen = ENR_SB_GET(s->logged);
        if (seen != w.key &&
            atomic_compare_exchange_strong_explicit(&s->logged, &seen, w.key, memory_order_relaxed,
                                                    memory_order_relaxed))
            enr_log(ENR_LOG_WARN, "daily budget: the pace holds calls back until it allows more",
                    "source=%s spent=%llu allowed=%llu limit=%llu", enr_api_get(src)->name,
                    (unsigned long long)word_get(&s->spent, w.key), (unsigned long long)allowed,
                    (unsigned long long)limit);
    }
    return 0;
}

uint64_t enr_budget_day_key(int src, enr_budget_now now)
{
    enr_budget_when w;

    if (g_page == NULL || src < 0 || src >= ENR_UP_SOURCES)
        return 0;
    day_read(src, &g_page->src[src], now, &w);
    return w.key;
}

void enr_budget_refund(int src, unsigned units, uint64_t key, enr_budget_now now)
{
    uint64_t cur, v, next;
    enr_budget_when w;
    bsrc *s;

    if (g_page == NULL || src < 0 || src >= ENR_UP_SOURCES || units == 0)
        return;
    s = &g_page->src[src];
    /* Only to the day they were taken from while it is in force, and
     * never below 0: a day that has ended keeps what it spent. */
    day_read(src, s, now, &w);
    if (w.key != key)
        return;
    cur = atomic_load_explicit(&s->spent, memory_order_relaxed);
    do {
        if (cur >> VAL_BITS != key)
            return;
        v = cur & VAL_MASK;
        next = key << VAL_BITS | (v > units ? v - units : 0);
    } while (!atomic_compare_exchange_weak_explicit(&s->spent, &cur, next, memory_order_relaxed,
                                                    memory_order_relaxed));
    /* ... and to the host's lease of the fleet's day, which it came from. */
    enr_lease_refund(src, (unsigned)(v > units ? units : v), w.end);
}

const enr_budget_row enr_budget_rows[ENR_BUDGET_NFIELDS] = {
#define ENR_BUDGET_DATA(field, metric, help) {#field, metric, help},
    ENR_BUDGET_FIELDS(ENR_BUDGET_DATA)
#undef ENR_BUDGET_DATA
};

int enr_budget_view(int src, enr_budget_now now, enr_budget_state *st)
{
    const bsrc *s;
    enr_budget_when w;
    uint64_t limit, spent, share;
    double *v;

    memset(st, 0, sizeof *st);
    v = st->v;
    if (g_page == NULL || src < 0 || src >= ENR_UP_SOURCES)
        return 0;
    s = &g_page->src[src];
    limit = ENR_SB_GET(s->limit);
    if (limit == 0)
        return 0;
    st->on = 1;
    day_read(src, s, now, &w);
    st->burst = ENR_SB_GET(s->burst);
    st->asked = word_get(&s->asked, w.key);
    st->reset_ms = now.wall_ms + w.left_ms;
    st->day_end_ms = w.end;
    st->day_ms = w.len;
    spent = word_get(&s->spent, w.key);
    share = enr_budget_allowed(limit, 0, w.elapsed, w.len);
    v[ENR_BUDGET_ROW_limit] = (double)limit;
    v[ENR_BUDGET_ROW_spent] = (double)spent;
    v[ENR_BUDGET_ROW_left] = spent < limit ? (double)(limit - spent) : 0;
    v[ENR_BUDGET_ROW_allowed] = (double)enr_budget_allowed(limit, st->burst, w.elapsed, w.len);
    v[ENR_BUDGET_ROW_pace] = share ? (double)spent / (double)share : 0;
    v[ENR_BUDGET_ROW_forecast] = (double)enr_budget_forecast(
        st->asked, word_get(&s->demand[w.bucket], bucket_key(&w, w.bucket)),
        w.elapsed - (uint64_t)w.bucket * w.len / ENR_BUDGET_BUCKETS,
        w.bucket ? word_get(&s->demand[w.bucket - 1], bucket_key(&w, w.bucket - 1)) : 0,
        w.bucket > 0, w.elapsed, w.len);
    v[ENR_BUDGET_ROW_deferred_new] = (double)word_get(&s->deferred_new, w.key);
    v[ENR_BUDGET_ROW_deferred_refresh] = (double)word_get(&s->deferred_refresh, w.key);
    v[ENR_BUDGET_ROW_reset_s] = (double)((w.left_ms + 999) / 1000);
    return 1;
}

const char *enr_budget_path(void)
{
    return g_path;
}

/* ---- the page and its file ---- */

/* A day's length and first day (Unix ms) when the test build compresses
 * days (enr_budget_compress_days); 0: real days. */
static uint64_t g_day_ms, g_day_origin;

static uint64_t header_check(const page *p)
{
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = UINT64_C(1469598103934665603);

    for (size_t i = 0; i < offsetof(page, check); i++)
        h = (h ^ b[i]) * UINT64_C(1099511628211);
    return h;
}

void enr_budget_compress_days(uint64_t day_ms, uint64_t origin_ms)
{
    g_day_ms = day_ms;
    g_day_origin = origin_ms;
}

void enr_budget_configure(const enr_config *c)
{
    uint64_t day_ms = g_day_ms, origin = g_day_origin;

    enr_lease_configure(c);
    if (g_page == NULL)
        return;
    for (int i = 0; i < ENR_UP_SOURCES; i++) {
        bsrc *s = &g_page->src[i];
        /* A source paced by its rate has no day's budget (api.h). */
        unsigned limit = enr_api_get(i)->rate_paced ? 0 : c->api[i].daily_quota;
        ENR_SB_SET(s->limit, limit);
        /* The burst as a share of the day, so that it keeps its meaning
         * in a day of any length. */
        ENR_SB_SET(s->burst, (uint64_t)limit * c->budget_burst_s / 86400u);
        ENR_SB_SET(s->clock,
                   enr_api_get(i) != NULL && enr_api_get(i)->day_clock == ENR_API_DAY_PACIFIC
                       ? ENR_BUDGET_PACIFIC
                       : ENR_BUDGET_UTC);
        ENR_SB_SET(s->day_ms, day_ms);
        ENR_SB_SET(s->day_origin, origin);
    }
}

/* Why the budget file open at fd is not a budget page, or NULL.  Its
 * owner, mode and links were checked when it was opened (statefile.h). */
static const char *refuse(int fd)
{
    struct stat st;
    page h;

    if (fstat(fd, &st) != 0)
        return "unreadable";
    if (st.st_size == 0)
        return "empty (new)";
    if (st.st_size != BUDGET_FILE_SIZE)
        return "not the size of a budget page";
    if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
        return "unreadable";
    if (memcmp(h.magic, BUDGET_MAGIC, sizeof h.magic) != 0)
        return "not a budget file (magic)";
    if (h.version != BUDGET_VERSION)
        return "another version";
    if (h.order != BUDGET_ORDER || h.size != sizeof(page) || h.nsrc != ENR_UP_SOURCES)
        return "another layout";
    if (h.check != header_check(&h))
        return "header checksum";
    return NULL;
}

/* An empty page at path, made whole before it takes the name (over the
 * file there when replace): its descriptor, locked, or -1 (errno, g_why). */
static int make_empty(const char *path, int replace)
{
    enr_statefile_new nf;
    const char *step = NULL;
    page h;

    memset(&h, 0, sizeof h);
    memcpy(h.magic, BUDGET_MAGIC, sizeof h.magic);
    h.version = BUDGET_VERSION;
    h.size = sizeof(page);
    h.nsrc = ENR_UP_SOURCES;
    h.order = BUDGET_ORDER;
    h.check = header_check(&h);
    if (enr_statefile_create(path, BUDGET_FILE_SIZE, &nf, &step) == 0) {
        if (pwrite(nf.fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
            enr_statefile_publish(&nf, path, replace, &step) == 0)
            return nf.fd;
        if (nf.fd >= 0) {
            step = "cannot write it";
            enr_statefile_discard(&nf);
        }
    }
    snprintf(g_why, sizeof g_why, "%s", step);
    if (errno == EEXIST)
        errno = EBUSY; /* another daemon made it meanwhile: it is that one's */
    return -1;
}

/* The page of the file at path, mapped; its descriptor (and lock) kept
 * for as long as the host runs.  NULL with errno and g_why. */
static page *map_file(const char *path)
{
    char q[ENR_PATH_MAX + 8], qr[ENR_STATEFILE_WHY_MAX + 8];
    const char *bad = NULL;
    int fd = -1, nfd, found = enr_statefile_open(path, &fd, g_why, sizeof g_why);
    void *m;

    if (found == ENR_SF_OURS) { /* budget_file is this daemon's cache_file */
        enr_statefile_close(fd);
        snprintf(g_why, sizeof g_why, "in use by this daemon as another state file");
        errno = EBUSY;
        return NULL;
    }
    if (found != ENR_SF_OPENED && found != ENR_SF_ABSENT)
        return NULL;
    if (found == ENR_SF_OPENED) {
        bad = refuse(fd);
        if (bad == NULL)
            goto map;
        if (strcmp(bad, "empty (new)") != 0)
            enr_log(ENR_LOG_WARN, "budget file refused: an empty one replaces it",
                    "path=%s reason=%s", enr_log_quote(q, sizeof q, path),
                    enr_log_quote(qr, sizeof qr, bad));
    }
    nfd = make_empty(path, found == ENR_SF_OPENED);
    enr_statefile_close(fd); /* the old file's lock, once the new one has the name */
    fd = nfd;
    if (fd < 0)
        return NULL;
map:
    m = mmap(NULL, BUDGET_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        int e = errno;
        snprintf(g_why, sizeof g_why, "cannot map it");
        enr_statefile_close(fd);
        errno = e;
        return NULL;
    }
    /* The descriptor stays open, inherited by every child: the lock says
     * the file is in use until the last of them is gone. */
    return m;
}

void enr_budget_boot_id(const char *id)
{
    g_boot_id = id;
}

/* FNV-1a of this boot's id (the kernel's, or a test's); 0 when unknown. */
static uint64_t boot_hash(void)
{
    char id[64];
    const char *p = g_boot_id;
    uint64_t h = UINT64_C(1469598103934665603);

    if (p == NULL) {
        int fd = open(BOOT_ID_PATH, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, id, sizeof id - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (n <= 0)
            return 0;
        id[n] = '\0';
        p = id;
    }
    for (; *p != '\0' && *p != '\n'; p++)
        h = (h ^ (unsigned char)*p) * UINT64_C(1099511628211);
    return h;
}

/* The days' ends on CLOCK_BOOTTIME mean nothing after a reboot (it starts
 * again from 0): another boot's are forgotten, the days kept.  Unknown
 * boots (no boot id) forget them at every start, the wall clock then
 * saying when the day ends, under the rule that never goes back a day. */
static void adopt_boot(void)
{
    uint64_t mine = boot_hash();

    if (mine != 0 && ENR_SB_GET(g_days->boot) == mine)
        return;
    for (int i = 0; i < ENR_UP_SOURCES; i++) {
        uint64_t cur = ENR_SB_GET(g_days->day[i]);
        while (cur != 0 &&
               !atomic_compare_exchange_weak_explicit(&g_days->day[i], &cur, cur & ~END_MASK,
                                                      memory_order_relaxed, memory_order_relaxed))
            ;
    }
    ENR_SB_SET(g_days->boot, mine);
}

int enr_budget_open(const enr_config *c)
{
    char q[ENR_PATH_MAX + 8], qr[ENR_STATEFILE_WHY_MAX + 8];
    int explicit = c->budget_file[0] != '\0', fatal;

    if (g_page != NULL) {
        enr_budget_configure(c);
        return 0;
    }
    if (enr_lease_open(c) != 0) /* the shared store's leases, beside the page */
        return -1;
    g_path[0] = '\0';
    if (explicit)
        snprintf(g_path, sizeof g_path, "%s", c->budget_file);
    else if (enr_statefile_default("budget", g_path, sizeof g_path) != 0)
        g_path[0] = '\0';
    if (g_path[0] != '\0') {
        g_page = map_file(g_path);
        if (g_page == NULL) {
            /* Another daemon counting in the file would spend the day twice. */
            fatal = explicit || errno == EBUSY;
            enr_log(fatal ? ENR_LOG_ERROR : ENR_LOG_WARN,
                    fatal ? "cannot open budget_file"
                          : "cannot open the budget file: the day's spending is kept in "
                            "memory only",
                    "path=%s reason=%s error=%s", enr_log_quote(q, sizeof q, g_path),
                    enr_log_quote(qr, sizeof qr, g_why), enr_log_errno(errno));
            if (fatal)
                return -1;
            g_path[0] = '\0';
        }
    }
    if (g_page == NULL) {
        void *m =
            mmap(NULL, BUDGET_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            enr_log(ENR_LOG_ERROR, "budget mmap failed", "error=%s", enr_log_errno(errno));
            return -1;
        }
        g_page = m;
    }
    g_days = (dayrecs *)(void *)((char *)g_page + DAYRECS_AT);
    adopt_boot();
    enr_budget_configure(c);
    return 0;
}
