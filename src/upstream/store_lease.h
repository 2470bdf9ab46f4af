/*
 * store_lease.h: the fleet's one day's quota (docs/fleet.md, "The day's
 * quota"): a host spends only units it holds in a lease taken from a
 * ledger in the shared store, while a store is configured.
 *
 * The ledger is one Redis hash per source and provider's day (the
 * prefix, "q:", the source's name and the day's end in Unix ms), a field
 * per host: the units granted to it that day; it lives two days.  A
 * lease is taken by one Lua script (EVAL), atomically: the host's own
 * count is raised to what the host knows it holds (a store restarted
 * empty learns every host's day back, so no unit is granted twice), then
 * min(ask, allowed - taken) is granted, where allowed is the day's pace
 * for the fleet (the elapsed share of the budget plus the burst, at
 * most the budget) and taken the sum over the hosts.  Units not spent
 * are given back when the host stops.
 *
 * The host's side is one page shared by its processes (mapped by the
 * master before the first fork, beside the budget's): per source, the
 * units held and granted today (each a day-keyed word, as budget.c's),
 * the units spent while the store was lost, a refill's claim (one worker
 * at a time asks, in its idle time, never on a batch) and when a worker
 * last saw the store.
 *
 * The store lost (no worker has seen it for ENR_LEASE_LOST_MS): the host
 * spends what it holds, then at most ONE more lease a day of its own
 * (the local share), which it reports when the store is back.  So the
 * fleet never spends more than the budget plus hosts x one lease in a
 * day, whatever the store does: each host's units beyond the ledger's
 * grants are at most a lease.
 */
#ifndef ENR_STORE_LEASE_H
#define ENR_STORE_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/config.h"
#include "upstream/store.h"

#define ENR_LEASE_SHARE 100           /* budget_lease_units 0: the day's budget / this */
#define ENR_LEASE_CLAIM_MS 2000       /* a refill asked and not answered: another may ask */
#define ENR_LEASE_LOST_MS 3000        /* no worker saw the store this long: lost */
#define ENR_LEASE_TTL_S (2u * 86400u) /* a day's ledger is kept two days */
#define ENR_LEASE_GIVE_BACK_MS 500    /* a stopping worker's wait to give units back */

/* The pure parts, for the unit tests. */
/* The units a take grants: min(ask, allowed - taken), 0 when taken has
 * reached allowed (the script's arithmetic, in C). */
uint64_t enr_lease_grant(uint64_t taken, uint64_t allowed, uint64_t ask);
/* A lease's units: budget_lease_units, or 0: 1 % of the day's budget (at
 * least 1). */
uint64_t enr_lease_units(unsigned configured, uint64_t limit);
/* The ledger's key of source src's day ending at day_end_ms. */
int enr_lease_key(enr_buf *out, const char *prefix, int src, int64_t day_end_ms);

/* The master, before the first fork (from enr_budget_open); again on a
 * reload (enr_budget_configure): the lease size, on while shared_store
 * is set.  0, or -1 (logged). */
int enr_lease_open(const enr_config *c);
void enr_lease_configure(const enr_config *c);

/* budget.c, for one call of units of source src (its day's budget
 * limit) on the day ending at day_end_ms: 1 when they are the host's to spend (taken from its
 * lease, or the local share while the store is lost, or no lease in use); 0: wait for a lease.
 * enr_lease_refund gives them back when the pace then refuses the call. */
int enr_lease_spend(int src, unsigned units, uint64_t limit, int64_t day_end_ms);
void enr_lease_refund(int src, unsigned units, int64_t day_end_ms);

/* What a worker knows of a source's day (budget.h's view), for the
 * ledger: its end, its budget and what the fleet may have taken by now
 * (the day's pace for the whole budget). */
typedef struct enr_lease_day {
    int src;
    int64_t end_ms;
    uint64_t limit, allowed;
} enr_lease_day;

/* A worker's idle time, with its store s: notes the store seen, and
 * takes a lease for the source of d when the units the host holds fell
 * under half of one (the reply, read later, adds what was granted);
 * fresh: the connection's first, which tells the ledger what the host
 * holds. */
void enr_lease_tend(enr_store *s, const enr_lease_day *d, int fresh);
/* A worker stopping (the pool drains): every unit the host holds of d's
 * source given back to the day's ledger, waiting ENR_LEASE_GIVE_BACK_MS
 * at most; no worker takes a lease for ENR_LEASE_CLAIM_MS after (a
 * reload's new workers wait that long for theirs). */
void enr_lease_give_back(enr_store *s, const enr_lease_day *d);
/* A worker whose store is ready: the store is seen (not lost). */
void enr_lease_seen(void);

/* What the host holds of source src's day ending at day_end_ms, for
 * /metrics. */
uint64_t enr_lease_held(int src, int64_t day_end_ms);

#endif
