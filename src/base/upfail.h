/*
 * upfail.h: how an upstream call ends when it brings no answer, ONE
 * table (ENR_UP_FAILS) from which every list and surface is generated:
 * the kinds the client counts (upstream.c), the counters of
 * base/upcounters.h (so the scoreboard, /status, /metrics, the HTML page
 * and `enrichd status`), the words of the log, the reasons a source's
 * pause holds for (quota.h, the scoreboard's enr_sb_quota.why), which
 * kinds the breaker hears of, and the list in docs/upstream.md
 * (scripts/failkinds.py).  In base/ because the scoreboard, which every
 * layer reads, holds the counters and the pause's reason.
 *
 * Invariants: the order of the rows is the order of every surface (the
 * counters' order, which dashboards and the scoreboard's layout know);
 * no code decides anything by a row's position, only by its columns;
 * the pause ranks are 0 or distinct, 1 up (the scoreboard stores the
 * rank, and a stronger pause is never replaced by a weaker one as long).
 */
#ifndef ENR_UPFAIL_H
#define ENR_UPFAIL_H

#include <stddef.h>
#include <stdint.h>

#define ENR_THROTTLE_DEFAULT_S 1  /* a 429 without a usable Retry-After, or Retry-After: 0 */
#define ENR_UP_AUTH_PAUSE_S 86400 /* a refused key: no call for this long, or until a reload */

/* How a source's pause ends (the column ends below). */
enum enr_up_end {
    ENR_UP_END_NONE = 0, /* the kind is no pause */
    /* When the provider's rate limit allows: the end its classifier read
     * (api.h: the API's rate-limit reset header when it has one, else
     * Retry-After); none, or one passed: Retry-After's seconds, else
     * pause_s.  The kind whose pause ends so is also the one a call held
     * back by the host's own rate, or by a rate limit nearly spent,
     * counts as. */
    ENR_UP_END_RATE,
    /* The start of the API's next day (its day_clock, api.h); the fleet
     * shares such a pause (the store). */
    ENR_UP_END_DAY,
    /* A reload (HUP), pause_s at most, whatever the provider says. */
    ENR_UP_END_RELOAD
};

/* X(A, id, field, word, pause, breaker, degraded, ends, pause_s, level, said, help):
 *   id       ENR_UP_F_<id>, the kind in the code;
 *   field    its counter in enr_up_counters (base/upcounters.h): the
 *            metric's sample {kind="word"} of enrichd_upstream_failures_total;
 *   word     its word everywhere: the metric's kind label, the key under
 *            /status's "failures", the log's kind= and the breaker's reason=;
 *   pause    0, or the source's pause this kind stands for (quota.h), by
 *            strength: the word is then /status's pause.why and the label
 *            why= of enrichd_upstream_paused;
 *   breaker  1: the provider's failure, fed to the source's breaker; 0: it
 *            says nothing of the provider's health (a probe it held is
 *            given back);
 *   degraded 1: the call's records keep their local values (or a kept
 *            answer, counted stale), counted in X-Enrich-Degraded;
 *   ends     how such a pause ends, enum enr_up_end (NONE: no pause);
 *   pause_s  its length when the provider gives none (RATE), or its
 *            longest (RELOAD); 0 otherwise;
 *   level    the level of the log line saying such a pause began
 *            (ENR_LOG_<level>, base/log.h; DEBUG for a kind that is no
 *            pause: only its call's debug line says it);
 *   said     that line's words after the source's title, a %s in them the
 *            source's secret's name ("API key"); NULL: the kind's word;
 *   help     what it means, for operators (docs/upstream.md's list).
 * A is the caller's, handed to X first (ENR_UP_FAILS_WITH). */
#define ENR_UP_FAILS_WITH(X, A)                                                                    \
    X(A, TIMEOUT, fail_timeout, "timeout", 0, 1, 1, NONE, 0, DEBUG, NULL,                          \
      "no answer within the batch's deadline")                                                     \
    X(A, CONNECT, fail_connect, "connect", 0, 1, 1, NONE, 0, DEBUG, NULL,                          \
      "no connection (DNS, TCP, reset)")                                                           \
    X(A, STATUS, fail_status, "status", 0, 1, 1, NONE, 0, DEBUG, NULL,                             \
      "an error status the others do not explain")                                                 \
    X(A, BODY, fail_body, "body", 0, 1, 1, NONE, 0, DEBUG, NULL,                                   \
      "an answer not of the API's shape")                                                          \
    X(A, TOO_LARGE, fail_too_large, "too_large", 0, 1, 1, NONE, 0, DEBUG, NULL,                    \
      "an answer larger than its call needs")                                                      \
    X(A, DEADLINE, skip_deadline, "deadline", 0, 0, 1, NONE, 0, DEBUG, NULL,                       \
      "not made: no time left in the batch")                                                       \
    X(A, TLS, fail_tls, "tls", 0, 1, 1, NONE, 0, DEBUG, NULL,                                      \
      "TLS handshake or verification failed")                                                      \
    X(A, THROTTLED, fail_throttled, "throttled", 1, 0, 1, RATE, ENR_THROTTLE_DEFAULT_S, WARN,      \
      NULL,                                                                                        \
      "answered 429 (or 503 with Retry-After), or not made: the provider's pause or the rate")     \
    X(A, QUOTA, fail_quota, "quota", 2, 0, 1, DAY, 0, ERROR, "quota spent",                        \
      "the day's quota spent, or not made until it is back")                                       \
    X(A, AUTH, fail_auth, "auth", 3, 0, 1, RELOAD, ENR_UP_AUTH_PAUSE_S, ERROR, "rejected the %s",  \
      "the key or token rejected, or not made until a reload (HUP)")                               \
    X(A, BUDGET, skip_budget, "budget", 0, 0, 1, NONE, 0, DEBUG, NULL,                             \
      "not made: the day's budget is paced (its records keep stale or local values)")

/* The table for a caller's X(id, field, ...); ENR_UP_FAILS_WITH hands
 * each row A first as well, for a table built from this one
 * (base/upcounters.h). */
#define ENR_UP_FAIL_PASS(X, ...) X(__VA_ARGS__)
#define ENR_UP_FAILS(X) ENR_UP_FAILS_WITH(ENR_UP_FAIL_PASS, X)

enum enr_up_fail {
#define ENR_UP_FAIL_ENUM(id, field, word, pause, breaker, degraded, ends, pause_s, level, said,    \
                         help)                                                                     \
    ENR_UP_F_##id,
    ENR_UP_FAILS(ENR_UP_FAIL_ENUM)
#undef ENR_UP_FAIL_ENUM
        ENR_UP_NFAILS
};

/* The table as data, for the code and surfaces that loop over it. */
typedef struct enr_up_fail_row {
    const char *field, *word, *help;
    unsigned pause;    /* 0, or the pause's rank */
    unsigned breaker;  /* 1: fed to the breaker */
    unsigned degraded; /* 1: its records count as degraded */
    unsigned ends;     /* enum enr_up_end */
    unsigned pause_s;  /* the pause's length when none is given, or its longest */
    int level;         /* enum enr_log_level of the line saying the pause began */
    const char *said;  /* that line's words after the title (%s: the secret's name) */
} enr_up_fail_row;
extern const enr_up_fail_row enr_up_fail_rows[ENR_UP_NFAILS];

/* The word of kind ("unknown" out of range). */
const char *enr_up_fail_name(int kind);

/* The kind whose pause ends by ends (enum enr_up_end), or -1. */
int enr_up_fail_of_end(unsigned ends);

/* The kind a pause of rank stands for, or -1 (0: no pause, or unknown). */
int enr_up_fail_of_pause(uint64_t rank);

/* The pause's word on every surface: "none" for 0, the kind's word for
 * a rank of the table, "unknown" for anything else. */
const char *enr_up_pause_name(uint64_t rank);

/* The pause reasons' words in the table's order, ", " between them, into
 * out[0..n) (a metric's help text says what its label may be). */
void enr_up_pause_words(char *out, size_t n);

#endif
