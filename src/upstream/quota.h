/*
 * quota.h: the provider's quota as every worker of the host sees it
 * (docs/upstream.md, "Quotas"): the pause a provider asks for with 429 /
 * 503 and Retry-After, and the optional host-wide upstream_max_calls_per_s.
 *
 * Both live in the scoreboard's enr_sb_quota (shared memory the master
 * maps before the first fork), so a pause one worker hears of stops the
 * calls of all of them, and the rate holds for the host, not per worker.
 * Without a scoreboard (unit tests, a client on its own) the same state
 * lives in the enr_quota itself.
 */
#ifndef ENR_QUOTA_H
#define ENR_QUOTA_H

#include <stddef.h>
#include <stdint.h>

#include "base/scoreboard.h"
#include "base/upfail.h"

#define ENR_RETRY_AFTER_MAX_S 3600 /* the longest pause a provider can impose */
#define ENR_QUOTA_BURST_DIV 10     /* the bucket holds a tenth of a second of calls (at least 1) */

/* Parses the field value of a Retry-After header (RFC 9110 10.2.3) at
 * p[0..n), white space around it allowed: delay-seconds, or an HTTP-date
 * in any of its three forms (IMF-fixdate, RFC 850, asctime).  *delay_s
 * is the wait from now_wall_s (Unix seconds): 0 for a date passed,
 * at most ENR_RETRY_AFTER_MAX_S.  0, or -1 when p is not such a value. */
int enr_retry_after_parse(const char *p, size_t n, int64_t now_wall_s, unsigned *delay_s);

typedef struct enr_quota {
    enr_sb_quota *sh;     /* the host's (scoreboard) or &own */
    enr_sb_quota own;     /* used when there is no scoreboard */
    uint64_t interval_us; /* 1e6 / upstream_max_calls_per_s; 0: no rate limit */
    uint64_t burst_us;    /* how far ahead of now the bucket may be booked */
} enr_quota;

enum enr_quota_verdict { ENR_QUOTA_OK = 0, ENR_QUOTA_PAUSED, ENR_QUOTA_RATE };

/* shared NULL: a quota of this process alone.  max_calls_per_s 0: no
 * rate limit, only the provider's pauses. */
void enr_quota_init(enr_quota *q, enr_sb_quota *shared, unsigned max_calls_per_s);

/* May one call go out at now_ms (CLOCK_MONOTONIC)?  ENR_QUOTA_OK takes
 * one token of the rate limit; PAUSED (the provider's pause holds) and
 * RATE (the bucket is empty) take nothing. */
int enr_quota_take(enr_quota *q, uint64_t now_ms);
/* The same at now_us on the bucket's clock (CLOCK_MONOTONIC in us, as
 * enr_mono_us() reads it): the bucket as a pure function of the time
 * given, for the tests. */
int enr_quota_take_at(enr_quota *q, uint64_t now_ms, uint64_t now_us);

/* The provider answered status, a call that ended as why (a kind of
 * enum enr_up_fail with a pause rank: base/upfail.h), with a wait of
 * delay_s (Retry-After, clamped to 1..ENR_RETRY_AFTER_MAX_S): no call
 * from any worker before now_ms + delay.  A pause is only ever
 * lengthened; the worker that lengthens it logs it in the kind's word
 * (once per pause, not once per call). */
void enr_quota_pause(enr_quota *q, uint64_t now_ms, unsigned delay_s, long status, int why);

/* Why a source's pause holds is a failure kind with a pause rank
 * (base/upfail.h: the provider asked to slow down, its day's quota is
 * spent, or it refused the key); enr_sb_quota.why stores the rank, whose
 * word enr_up_pause_name() gives.  A stronger reason is never replaced
 * by a weaker one of the same length. */

/* A pause of delay_ms from now_ms for why (a kind of enum enr_up_fail with
 * a pause rank; another holds nothing), ending at until_wall_s on the wall
 * clock (for operators), with the provider's word reason (NULL: none; kept
 * printable ASCII).  No clamp: a spent quota holds until midnight Pacific
 * time.  Only ever lengthened; 1 when this call began or lengthened the
 * pause (its caller says so in the log), 0 when one as long held already. */
int enr_quota_hold(enr_quota *q, uint64_t now_ms, uint64_t delay_ms, int why, int64_t until_wall_s,
                   const char *reason);

/* Why the pause holding at now_ms holds (its kind, enum enr_up_fail), or
 * -1 when none does. */
int enr_quota_why(const enr_quota *q, uint64_t now_ms);

/* A reload (HUP): the pauses for a refused key end (the new
 * configuration may hold a new key); the quota's and the rate's hold. */
void enr_quota_clear_auth(enr_sb_quota q[ENR_UP_SOURCES]);

/* End of the pause (CLOCK_MONOTONIC ms), 0 or past when there is none. */
uint64_t enr_quota_paused_until(const enr_quota *q);

/* The operator's way out of a pause (the master, on HUP): no pause from
 * now on, for every worker; the cache and the rate bucket are kept.  The
 * next call asks the provider, and a provider still throttling pauses
 * the host again.  Returns the ms the pause had left (0: none). */
uint64_t enr_quota_resume(enr_sb_quota *sh, uint64_t now_ms);

#endif
