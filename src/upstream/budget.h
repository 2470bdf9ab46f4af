/*
 * budget.h: the day's quota budget of each source, host-wide and paced
 * (docs/providers.md, "The day's budget").
 *
 * A source with a daily budget (its NAME_daily_quota, base/sources.h)
 * may have spent, at any moment of its day, at most the day's elapsed
 * share of the budget plus a burst allowance (budget_burst_s of the
 * day's pace): the evening gets its share.  A
 * call past it is not made; its records keep their stale or local values
 * and are not negatively cached.  A refresh of a stale answer may use
 * only half the burst, so new ids go first.
 *
 * The state is one page shared by every process of the host (the master
 * maps it before the first fork), backed by a file in the state
 * directory (budget_file) so that a restart, an upgrade or a master
 * killed does not forget what the day has spent.  The pure functions
 * (enr_budget_day, enr_budget_allowed, enr_budget_forecast) hold the
 * arithmetic and are what the unit tests drive.
 */
#ifndef ENR_BUDGET_H
#define ENR_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "base/scoreboard.h"

#define ENR_BUDGET_BUCKETS 24 /* the day's demand, per 24th of it, for the forecast */

/* How a source's day is counted: YouTube's ends at midnight in
 * America/Los_Angeles, the others' at midnight UTC. */
enum enr_budget_clock { ENR_BUDGET_PACIFIC = 0, ENR_BUDGET_UTC };

/* The day containing now_ms (Unix ms): [*start_ms, *end_ms).  day_ms > 0
 * (a test build's compressed day only) cuts the time into days of that
 * length from origin_ms instead. */
void enr_budget_day(int clock, uint64_t day_ms, int64_t origin_ms, int64_t now_ms,
                    int64_t *start_ms, int64_t *end_ms);

/* How a source counts its days: its clock, and a test build's compressed
 * day (day_ms > 0, from origin_ms). */
typedef struct enr_budget_calendar {
    int clock;
    uint64_t day_ms;
    int64_t origin_ms;
} enr_budget_calendar;

/* The two clocks a take or a view reads: the wall (which says which day
 * it is) and CLOCK_BOOTTIME (which says how much time really passed: an
 * NTP or an operator's step does not move it), both in ms. */
typedef struct enr_budget_now {
    int64_t wall_ms, boot_ms;
} enr_budget_now;

/* Now, on both clocks. */
enr_budget_now enr_budget_clocks(void);

/* A wall clock within this of what CLOCK_BOOTTIME says since the day was
 * entered is believed (NTP's small steps); one further away has been
 * stepped and is not (docs/providers.md, "The day's budget"). */
#define ENR_BUDGET_STEP_TOLERANCE_MS 60000

/* The day in force (enr_budget_in_force): its span on the wall clock,
 * its length, how much of it passed (measured on CLOCK_BOOTTIME), its
 * key and the 24th of it now. */
typedef struct enr_budget_when {
    int64_t start, end;
    uint64_t len, elapsed, key;
    int64_t left_ms; /* until it ends, on CLOCK_BOOTTIME */
    unsigned bucket;
} enr_budget_when;

/* The pure rule of which day is in force, given the record a page keeps
 * of it (0: none yet; else the day's key in the top 24 bits and, in the
 * low 40, 1 + the CLOCK_BOOTTIME ms at which it ends, or 0 when unknown:
 * after a reboot, or a page of an earlier build).  Fills *w and returns
 * the record to keep (rec itself when nothing changed).  Never a day
 * before rec's; a new day only once the elapsed time says the day in
 * force ended (budget.c's top comment says why). */
uint64_t enr_budget_in_force(const enr_budget_calendar *cal, uint64_t rec, enr_budget_now now,
                             enr_budget_when *w);

/* Units the host may have spent by elapsed_ms into a day of day_ms: the
 * elapsed share of limit plus burst, at most limit. */
uint64_t enr_budget_allowed(uint64_t limit, uint64_t burst, uint64_t elapsed_ms, uint64_t day_ms);

/* Units asked for by the day's end at the current rate: asked so far,
 * plus the rate of the last two 24ths of the day (recent: the current
 * one's asked units over elapsed_in_cur_ms, the previous one's prev
 * over a whole 24th, prev_valid 0 in the day's first) times what is
 * left of the day. */
uint64_t enr_budget_forecast(uint64_t asked, uint64_t cur, uint64_t elapsed_in_cur_ms,
                             uint64_t prev, int prev_valid, uint64_t elapsed_ms, uint64_t day_ms);

/* What operators see of a source's day (enr_budget_view), one row each
 * of the table every surface is generated from (/status, /metrics, the
 * HTML page, `enrichd status`).  X(field, metric, help); pace is a ratio,
 * the others whole numbers. */
#define ENR_BUDGET_FIELDS(X)                                                                       \
    X(limit, "enrichd_budget_units", "The day's quota budget of the source, in its units.")        \
    X(spent, "enrichd_budget_spent_units", "Units the host spent today (the provider's day).")     \
    X(left, "enrichd_budget_left_units", "Units of today's budget not spent yet.")                 \
    X(allowed, "enrichd_budget_allowed_units",                                                     \
      "Units the pace allows by now: the day's elapsed share plus the burst.")                     \
    X(pace, "enrichd_budget_pace_ratio",                                                           \
      "Units spent over the day's elapsed share of the budget (1: on pace).")                      \
    X(forecast, "enrichd_budget_forecast_units",                                                   \
      "Units asked for by the day's end at the last hours' rate (spent or deferred); above the "   \
      "budget, it runs out before midnight.")                                                      \
    X(deferred_new, "enrichd_budget_deferred_new_calls",                                           \
      "Calls of new ids the pace deferred today.")                                                 \
    X(deferred_refresh, "enrichd_budget_deferred_refresh_calls",                                   \
      "Calls refreshing stale answers the pace deferred today.")                                   \
    X(reset_s, "enrichd_budget_reset_seconds", "Seconds until the day's budget starts again.")

enum {
#define ENR_BUDGET_ROW(field, metric, help) ENR_BUDGET_ROW_##field,
    ENR_BUDGET_FIELDS(ENR_BUDGET_ROW)
#undef ENR_BUDGET_ROW
        ENR_BUDGET_NFIELDS
};

typedef struct enr_budget_state {
    int on;                       /* the source has a budget */
    uint64_t burst;               /* units ahead of pace */
    uint64_t asked;               /* units asked today (spent + deferred) */
    int64_t reset_ms;             /* the day's end, Unix ms (now's wall + what is left of it) */
    int64_t day_end_ms;           /* the day in force's own end (its key for the fleet's leases) */
    uint64_t day_ms;              /* the day's length */
    double v[ENR_BUDGET_NFIELDS]; /* by row of ENR_BUDGET_FIELDS */
} enr_budget_state;

typedef struct enr_budget_row {
    const char *field, *metric, *help;
} enr_budget_row;
extern const enr_budget_row enr_budget_rows[ENR_BUDGET_NFIELDS];

/* Opens the host's budget (the master, before the first fork; the pages
 * are inherited): the file of c->budget_file (or, empty, the systemd
 * state directory's "budget", or else memory only) is found, trusted and
 * locked as every state file is (base/statefile.h), its page validated
 * (magic, version, layout, size): a page of ours that fails is replaced
 * by an empty one, the log saying why.  0, or -1 (logged): a budget_file
 * that cannot be had, or any budget file another daemon holds.  A second
 * call (a reload) only sets the limits anew. */
int enr_budget_open(const enr_config *c);

/* The limits of c, for every process (the master on a reload). */
void enr_budget_configure(const enr_config *c);

/* Days of day_ms from origin_ms (Unix ms) instead of real ones, for the
 * tests and the benchmark's compressed day (only the test build calls
 * it, from its hooks); before enr_budget_open.  0: real days. */
void enr_budget_compress_days(uint64_t day_ms, uint64_t origin_ms);

/* Takes units of source src's budget for one call at now
 * (enr_budget_clocks); refresh: the call only refreshes stale answers.
 * 1: spend them and make the call; 0: the pace refuses it (counted as
 * deferred).  A source without a budget, or no budget opened, always 1. */
int enr_budget_take(int src, unsigned units, int refresh, enr_budget_now now);

/* The day in force of source src at now; 0 and st->on 0 when it has none. */
int enr_budget_view(int src, enr_budget_now now, enr_budget_state *st);

/* The boot whose CLOCK_BOOTTIME the page's day ends count on: the
 * kernel's boot id (NULL, the default), or id for a test that plays a
 * reboot; before enr_budget_open. */
void enr_budget_boot_id(const char *id);

/* The key of source src's day in force at now, for enr_budget_refund:
 * read right after a take, it names the day the units were taken from. */
uint64_t enr_budget_day_key(int src, enr_budget_now now);

/* Gives back units taken from day key for a request that never left (its
 * connection was not set up in time): the provider did not count it.
 * Only while that day is still in force at now, and never below 0. */
void enr_budget_refund(int src, unsigned units, uint64_t key, enr_budget_now now);

/* Units one call of n ids costs src: its descriptor's units_per_call
 * (api.h; every API today counts a call, whatever its ids). */
unsigned enr_budget_cost(int src, size_t n);

/* The file in use ("" memory only), for the status page. */
const char *enr_budget_path(void);

#endif
