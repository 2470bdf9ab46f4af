/*
 * upstream_int.h: the state of one worker's upstream client, shared by
 * the files that make it and nobody else: upstream_setup.c (making and
 * unmaking the client: its URL, headers and secret, one easy handle per
 * call slot with the reply's bounds), upstream.c (a batch's plan: its
 * cache lookups, its wants grouped into calls, and their answers put
 * back), uprun.c (the calls run under one deadline, the calls that
 * outlive it), upanswer.c (how a call ended: its answer read, its outcome
 * counted), upsource.c (per source) and upstale.c (the cache).
 * upstream.h is the client's only public face; this header sits below it
 * (the files include both, upstream.h first), so it names the client by
 * its tag and holds the counters from upstream_stats.h.
 *
 * Invariants: calls has nslots slots, each with its easy handle and its
 * lids for ids_per_call ids from enr_upstream_new() on; a slot is in use
 * when active or detached, and ndetached <= max_detached, which leaves
 * ncalls_max slots free for a batch.  base, secret and every call's url
 * may hold the secret: each is wiped before it is freed.  A want is
 * resolved to exactly one of found/unknown/failed/skipped before its
 * batch returns.
 */
#ifndef ENR_UPSTREAM_INT_H
#define ENR_UPSTREAM_INT_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "upstream/curlapi.h"
#include "upstream/api.h"
#include "upstream/breaker.h"
#include "upstream/cache.h"
#include "upstream/quota.h"
#include "upstream/upconn.h"
#include "upstream/upstream_reply.h"
#include "upstream/upstream_stats.h"
#include "upstream/store.h"
#include "upstream/store_cache.h"

/* What became of a want in its batch. */
enum enr_upwant_state {
    ENR_UPW_PENDING = 0,
    ENR_UPW_FOUND,
    ENR_UPW_UNKNOWN,
    ENR_UPW_FAILED,
    ENR_UPW_SKIPPED
};

/* A distinct provider+id that a batch missed in the host's cache
 * (upstream.c makes them, the fleet's store (upstore.c) or a call's
 * answer resolves them), freed with the client. */
typedef struct enr_upwant {
    size_t rec;                    /* first record with this provider+key */
    size_t poster_off, poster_len; /* into b->text (appends may move it) */
    double duration;
    int call; /* index into calls, -1 when none */
    uint8_t provider, src, state, has_poster, has_duration;
    uint8_t live;   /* a live or upcoming broadcast: a short lifetime (upstale.c) */
    uint8_t stale;  /* the cache keeps an answer past its lifetime (upstale.c): a refresh */
    uint8_t shared; /* answered by the fleet's store: kept by the host, not written back */
} enr_upwant;

typedef struct enr_upcall {
    CURL *easy;
    enr_buf url, body;
    size_t resp_bytes; /* header + body bytes seen: 0 means "died before the reply" */
    size_t cap;        /* the largest reply this call can legitimately need */
    int too_large;     /* the reply was refused for its size, unread */
    size_t first, n;   /* its wants: u->order[first .. first+n) */
    int provider;
    int src; /* its source: enum enr_api_id */
    int active, retried;
    int refresh;            /* every id of it has a stale answer: a refresh (budget.h) */
    int began;              /* its transfer reached its request (pre-request callback) */
    unsigned units;         /* budget units taken for the transfer, not yet settled */
    uint64_t units_day;     /* the day they were taken from (its key) */
    int detached;           /* its batch has answered; the ids are in lids */
    uint64_t detached_ms;   /* when, to end the oldest first */
    uint64_t started_ms;    /* when its transfer (or its retry) started */
    enr_buf idtext;         /* a detached call's ids, back to back */
    enr_reply_id *lids;     /* ... and their places in idtext (ids_per_call) */
    int has_retry_after;    /* this reply's Retry-After, valid once its status line came */
    unsigned retry_after_s; /* quota.h */
    /* the headers the APIs' classifiers read (api.h), as received, cut
     * at their buffers' size; len 0: absent */
    char h_retry_after[64], h_remaining[24], h_reset[64];
    enr_api_outcome why; /* an API call: its classifier's verdict (api.h) */
    size_t h_retry_after_len, h_remaining_len, h_reset_len;
    char errbuf[CURL_ERROR_SIZE];
} enr_upcall;

/* One source a provider's records are enriched from (config.h):
 * the aggregator protocol or a provider's own API.  Each has its base
 * URL, headers and secret, its breaker and its host-wide pause. */
typedef struct enr_upsource {
    int in_use;
    const enr_api *api; /* its row (api.h), the aggregator's too; NULL: not in use */
    const char *title;  /* for operators: "YouTube", "upstream" */
    enr_buf base;       /* its *_url, NUL after len; the aggregator's upstream_url + '?'
                         * or '&' (+ its secret parameter and '&') */
    struct curl_slist *headers;
    char *secret; /* may be NULL; wiped in free */
    size_t secret_len;
    size_t max_ids; /* per call */
    enr_breaker br;
    enr_quota quota;
} enr_upsource;

struct enr_upstream {
    enr_upconn *conn;
    enr_upcall *calls; /* nslots of them, each with its easy handle */
    unsigned nslots;   /* max_calls_per_batch for a batch + as many detached */
    unsigned *batch;   /* this batch's calls: slot indices */
    unsigned ncalls_max, max_detached, ndetached;
    enr_upsource src[ENR_API_COUNT];
    int src_of[ENR_SOURCE_PROVIDERS]; /* a provider's source, ENR_SOURCE_OFF: none */
    size_t max_ids;                   /* the largest of the sources' max_ids */
    enr_cache *cache;                 /* the host's, borrowed (cache.h); NULL: none */
    unsigned max_calls_per_s;
    enr_upstream_stats st; /* st.fds: the connections' descriptors (upconn) */
    unsigned timeout_ms, cache_neg_ttl_s, cache_live_ttl_s;
    unsigned ttl_s[ENR_API_COUNT]; /* an answer's lifetime, per source */
    unsigned max_stale_s;          /* served this long past it when none comes (upstale.c) */
    long call_bound_ms;            /* one transfer, detached or not: set-up + one deadline */
    uint64_t seed;

    /* per-batch scratch, grown to the largest batch and reused */
    enr_upwant *wants;
    size_t nwants, wants_cap;
    uint32_t *rec_want; /* per record: want index + 1, 0 none */
    size_t rec_cap;
    uint32_t *table; /* open addressing: want index + 1 */
    size_t table_cap;
    size_t *order;            /* wants in call order */
    enr_reply_id *rids;       /* one call's ids, for enr_upstream_reply_parse */
    enr_buf posters;          /* accepted posters of one reply, before b->text */
    enr_store *store;         /* the fleet's (store.h); NULL: none */
    enr_store_batch *sbatch;  /* its MGET's keys (store_cache.h) */
    uint64_t pause_polled_ms; /* the fleet's pauses last read (upstore.c) */
    uint64_t lease_told;      /* the store's connection that told the ledger (upstore.c) */
};

/* upstream.c: the batch's plan. */
/* A call's whole URL (api.h), into c->url.  An id the API cannot be
 * asked for is left out of the call (its want skipped); 0, or -1 when no
 * id of the call is left. */
int enr_up_call_url(enr_upstream *u, enr_upcall *c, const enr_batch *b);

/* uprun.c: the calls, under one deadline. */
/* Run the batch's ncalls planned calls (u->batch) until all are done or
 * dl (monotonic) passes; each of their wants is resolved when it returns,
 * a call still setting its connection up detached (its wants failed). */
void enr_up_run_calls(enr_upstream *u, enr_batch *b, unsigned ncalls, uint64_t dl);
/* Did c's request leave (upconn.h)? */
int enr_up_request_left(const enr_upcall *c);

/* upanswer.c: how a call ended. */
/* Counts a call that failed (kind: enum enr_up_fail), once, and tells
 * the breaker when its row says the kind is the provider's failure. */
void enr_up_count_failure(enr_upstream *u, enr_upcall *c, int kind, uint64_t now);
/* A call of the batch in hand failed: counted, its wants failed. */
void enr_up_call_failed(enr_upstream *u, enr_upcall *c, int kind, uint64_t now);
/* A call of the batch in hand ended (rc: its transfer's code): its
 * answer read into its wants, or it failed, counted either way. */
void enr_up_call_done(enr_upstream *u, enr_upcall *c, enr_batch *b, CURLcode rc, uint64_t now);
/* A detached call ended (no longer counted detached): its answer goes
 * into the cache, or it failed, counted either way. */
void enr_up_late_done(enr_upstream *u, enr_upcall *c, CURLcode rc, uint64_t now);

/* upsource.c: per source. */
/* A breaker transition of source src (from prev), logged once, counted. */
void enr_up_breaker_note(enr_upstream *u, int src, int prev, const char *why);
/* May source src make one more call now (breaker, pause, rate)?  A call
 * the pause refuses is counted by why it holds. */
int enr_up_source_gate(enr_upstream *u, int src, uint64_t now);
/* A call's answer of HTTP status: its verdict (enum enr_api_verdict),
 * kept in c->why; the rate it reports may slow the source down. */
int enr_up_classify(enr_upstream *u, enr_upcall *c, long status, uint64_t now);
/* The pause c's answer asks for (why: a kind of enum enr_up_fail with a
 * pause rank), host-wide. */
void enr_up_pause(enr_upstream *u, enr_upcall *c, int why, uint64_t now);
/* May c be sent now, as the day's budget of its source says (budget.h)?
 * 1: its units are taken (c->units); 0: the pace defers it. */
int enr_up_budget_take(enr_upstream *u, enr_upcall *c);
/* c's transfer has ended (or been removed): the units it took are spent
 * (counted) when sent says its request left, else given back. */
void enr_up_budget_settle(enr_upstream *u, enr_upcall *c, int sent);

/* upstore.c: the fleet's store, as the client uses it (store_cache.h). */
/* The wants still pending after the host's cache, asked of the store in
 * one MGET until dl at most (when it is usable): those it answers are
 * resolved (shared) and kept by the host for their lifetime. */
void enr_up_store_lookup(enr_upstream *u, enr_batch *b, uint64_t wall_ms, uint64_t dl);
/* The SETs a batch queued, written without waiting. */
void enr_up_store_flush(enr_upstream *u);
/* Idle time: the store's connection and replies, the day's leases
 * (store_lease.h) and the fleet's pauses; the wait, at most wait. */
int enr_up_store_idle(enr_upstream *u, int wait);
/* A spent quota (until_wall_s its end), for every host of the fleet. */
void enr_up_store_pause(enr_upstream *u, int src, int64_t until_wall_s);

/* upstale.c: the cache, as the client uses it. */
/* Record r's lookup (source src, wall-clock now): ENR_CACHE_FRESH and r
 * enriched (a hit), else a miss (ENR_CACHE_STALE: an answer past its
 * lifetime is kept, for enr_up_stale_serve), counted. */
int enr_up_lookup(enr_upstream *u, enr_batch *b, enr_record *r, int src, uint64_t wall_ms,
                  size_t *degraded);
/* Record r, which its provider did not answer (failed, skipped, a budget
 * spent: any reason): its kept answer, counted stale, and 0; or 1 when
 * none is kept (it keeps its local values: degraded). */
size_t enr_up_stale_serve(enr_upstream *u, enr_batch *b, enr_record *r, int src, uint64_t wall_ms);
/* An answer into the cache, for its source's lifetime (a negative one:
 * cache_negative_ttl_s; one about a live or upcoming broadcast, live:
 * cache_live_ttl_s, at most the source's). */
void enr_up_cache_store(enr_upstream *u, int provider, int src, const char *key, size_t key_len,
                        const enr_cache_val *v, int live);
/* An answer the fleet's store gave, kept for the rest of its lifetime
 * (v->expires_ms), not written back. */
void enr_up_cache_keep(enr_upstream *u, int provider, int src, const char *key, size_t key_len,
                       const enr_cache_val *v);

#endif
