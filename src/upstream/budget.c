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
 * that starts the value at 0 when the key is another day's, so a new
 * day needs no reset step, no lock, and no process that could die
 * holding one: a worker killed between load and CAS changed nothing,
 * one killed after it spent its units.  The limits (written by the
 * master from the configuration, on start and on each reload) sit in the
 * same page, so the status process shows what the workers enforce.
 *
 * Invariants:
 *   - spent never passes what enr_budget_allowed() gives at the moment
 *     of the take, which is never more than the day's limit: the host
 *     never spends more than its budget in a day, whatever the workers'
 *     interleaving (the CAS fails and retries when another took first);
 *   - a refresh is held to half the burst, a new id gets all of it;
 *   - units are taken before the request is sent, whether or not it
 *     then succeeds (the provider counts a failed call too);
 *   - the file is trusted only after its header checks (magic, version,
 *     byte order, layout, size, a checksum) and its owner and mode
 *     (ours, one link, no one else may write); anything else is replaced
 *     by an empty page, the log saying why.  The magic is written last,
 *     so a crash while making one leaves a file that is refused, not
 *     half-read.  A value in a valid page can at worst hold back its
 *     own day's calls: every value is bounded by its 40 bits.
 *   - a machine that loses power loses what the kernel had not written
 *     back of the page (some seconds of spending), never the page.
 */
#include "upstream/budget.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/safedir.h"
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

_Static_assert(sizeof(page) <= BUDGET_FILE_SIZE, "the budget page fits its file");

static page *g_page;              /* the host's, inherited across fork */
static char g_path[ENR_PATH_MAX]; /* "" memory only */

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

/* ---- the day's words ---- */

static uint64_t word_get(const enr_sb_u64 *w, uint64_t key)
{
    uint64_t cur = atomic_load_explicit(w, memory_order_relaxed);

    return cur >> VAL_BITS == key ? cur & VAL_MASK : 0;
}

/* Adds n to the value of day key; with cap, only while it stays at most
 * cap.  1 when added. */
static int word_add(enr_sb_u64 *w, uint64_t key, uint64_t n, int capped, uint64_t cap)
{
    uint64_t cur = atomic_load_explicit(w, memory_order_relaxed), v, next;

    do {
        v = cur >> VAL_BITS == key ? cur & VAL_MASK : 0;
        if (capped && v + n > cap)
            return 0;
        if (v + n > VAL_MASK)
            return 0;
        next = key << VAL_BITS | (v + n);
    } while (!atomic_compare_exchange_weak_explicit(w, &cur, next, memory_order_relaxed,
                                                    memory_order_relaxed));
    return 1;
}

typedef struct when {
    int64_t start, end;
    uint64_t len, elapsed, key;
    unsigned bucket;
} when;

static void day_of(const bsrc *s, int64_t now_ms, when *w)
{
    uint64_t day_ms = ENR_SB_GET(s->day_ms);

    enr_budget_day((int)ENR_SB_GET(s->clock), day_ms, (int64_t)ENR_SB_GET(s->day_origin), now_ms,
                   &w->start, &w->end);
    w->len = (uint64_t)(w->end - w->start);
    w->elapsed = (uint64_t)(now_ms - w->start);
    /* Unique to the day within 2^24 of them (a real day's start is a
     * whole hour). */
    w->key =
        (uint64_t)(day_ms ? floor_div(w->start, (int64_t)day_ms) : floor_div(w->start, HOUR_MS)) &
        KEY_MASK;
    w->bucket = (unsigned)(w->elapsed * ENR_BUDGET_BUCKETS / w->len);
}

static uint64_t bucket_key(const when *w, unsigned b)
{
    return (w->key * ENR_BUDGET_BUCKETS + b) & KEY_MASK;
}

/* ---- taking ---- */

unsigned enr_budget_cost(int src, size_t n)
{
    (void)src;
    (void)n;
    return 1; /* every API counts a call, whatever its ids (budget.h) */
}

int enr_budget_take(int src, unsigned units, int refresh, int64_t now_ms)
{
    bsrc *s;
    uint64_t limit, burst, allowed;
    when w;

    if (g_page == NULL || src < 0 || src >= ENR_UP_SOURCES)
        return 1;
    s = &g_page->src[src];
    limit = ENR_SB_GET(s->limit);
    if (limit == 0)
        return 1;
    day_of(s, now_ms, &w);
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

const enr_budget_row enr_budget_rows[ENR_BUDGET_NFIELDS] = {
#define ENR_BUDGET_DATA(field, metric, help) {#field, metric, help},
    ENR_BUDGET_FIELDS(ENR_BUDGET_DATA)
#undef ENR_BUDGET_DATA
};

int enr_budget_view(int src, int64_t now_ms, enr_budget_state *st)
{
    const bsrc *s;
    when w;
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
    day_of(s, now_ms, &w);
    st->burst = ENR_SB_GET(s->burst);
    st->asked = word_get(&s->asked, w.key);
    st->reset_ms = w.end;
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
    v[ENR_BUDGET_ROW_reset_s] = (double)((w.end - now_ms + 999) / 1000);
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
    const unsigned limit[ENR_UP_SOURCES] = {0, c->youtube_daily_quota, c->vimeo_daily_quota,
                                            c->dailymotion_daily_quota};
    uint64_t day_ms = g_day_ms, origin = g_day_origin;

    enr_lease_configure(c);
    if (g_page == NULL)
        return;
    for (int i = 0; i < ENR_UP_SOURCES; i++) {
        bsrc *s = &g_page->src[i];
        ENR_SB_SET(s->limit, limit[i]);
        /* The burst as a share of the day, so that it keeps its meaning
         * in a day of any length. */
        ENR_SB_SET(s->burst, (uint64_t)limit[i] * c->budget_burst_s / 86400u);
        ENR_SB_SET(s->clock, i == ENR_API_YOUTUBE ? ENR_BUDGET_PACIFIC : ENR_BUDGET_UTC);
        ENR_SB_SET(s->day_ms, day_ms);
        ENR_SB_SET(s->day_origin, origin);
    }
}

/* Why the file open at fd is not a budget page, or NULL. */
static const char *refuse(int fd, const struct stat *st, char *why, size_t n)
{
    page h;

    if (enr_safedir_file_ok(st, why, n) != 0)
        return why;
    if ((st->st_mode & 022) != 0)
        return "others may write it";
    if (st->st_size == 0)
        return "empty (new)";
    if (st->st_size != BUDGET_FILE_SIZE)
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

/* An empty page in fd: everything but the magic, made durable, then the
 * magic (see the top). */
static int make_empty(int fd)
{
    page h;

    memset(&h, 0, sizeof h);
    memcpy(h.magic, BUDGET_MAGIC, sizeof h.magic);
    h.version = BUDGET_VERSION;
    h.size = sizeof(page);
    h.nsrc = ENR_UP_SOURCES;
    h.order = BUDGET_ORDER;
    h.check = header_check(&h);
    if (ftruncate(fd, 0) != 0 || ftruncate(fd, BUDGET_FILE_SIZE) != 0 || fchmod(fd, 0600) != 0)
        return -1;
    if (pwrite(fd, (const char *)&h + sizeof h.magic, sizeof h - sizeof h.magic, sizeof h.magic) !=
            (ssize_t)(sizeof h - sizeof h.magic) ||
        fdatasync(fd) != 0)
        return -1;
    if (pwrite(fd, h.magic, sizeof h.magic, 0) != (ssize_t)sizeof h.magic || fdatasync(fd) != 0)
        return -1;
    return 0;
}

static page *map_file(const char *path)
{
    char why[160], q[ENR_PATH_MAX + 8], qr[200];
    const char *bad;
    struct stat st;
    void *m;
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600), e;

    if (fd < 0)
        return NULL;
    /* Two masters on one file (a restart's overlap) make it one at a time. */
    if (flock(fd, LOCK_EX) != 0 || fstat(fd, &st) != 0)
        goto fail;
    bad = refuse(fd, &st, why, sizeof why);
    if (bad != NULL) {
        if (st.st_size != 0)
            enr_log(ENR_LOG_WARN, "budget file refused: an empty one replaces it",
                    "path=%s reason=%s", enr_log_quote(q, sizeof q, path),
                    enr_log_quote(qr, sizeof qr, bad));
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
            errno = EPERM; /* not ours to rewrite: never touched */
            goto fail;
        }
        if (make_empty(fd) != 0)
            goto fail;
    }
    m = mmap(NULL, BUDGET_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        goto fail;
    close(fd); /* the mapping holds the file; the lock goes with the descriptor */
    return m;
fail:
    e = errno;
    close(fd);
    errno = e;
    return NULL;
}

int enr_budget_open(const enr_config *c)
{
    const char *dir = getenv("STATE_DIRECTORY");
    char q[ENR_PATH_MAX + 8];
    int explicit = c->budget_file[0] != '\0';

    if (g_page != NULL) {
        enr_budget_configure(c);
        return 0;
    }
    if (enr_lease_open(c) != 0) /* the shared store's leases, beside the page */
        return -1;
    g_path[0] = '\0';
    if (explicit) {
        snprintf(g_path, sizeof g_path, "%s", c->budget_file);
    } else if (dir != NULL && dir[0] == '/') {
        /* systemd's StateDirectory=; of several (colon-separated), the first */
        size_t n = strcspn(dir, ":");
        if (n + sizeof "/budget" <= sizeof g_path)
            snprintf(g_path, sizeof g_path, "%.*s/budget", (int)n, dir);
    }
    if (g_path[0] != '\0') {
        g_page = map_file(g_path);
        if (g_page == NULL) {
            enr_log(explicit ? ENR_LOG_ERROR : ENR_LOG_WARN,
                    explicit ? "cannot open budget_file"
                             : "cannot open the budget file: the day's spending is kept in "
                               "memory only",
                    "path=%s error=%s", enr_log_quote(q, sizeof q, g_path), enr_log_errno(errno));
            if (explicit)
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
    enr_budget_configure(c);
    return 0;
}
