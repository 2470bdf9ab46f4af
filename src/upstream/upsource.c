/*
 * upsource.c: what the client does per source (upstream_int.h): its
 * breaker's transitions, the gate a call passes (breaker, then the
 * source's host-wide pause and rate), an API's answer classified
 * (api.h) and the pause it asks for, said to operators once.
 *
 * Invariants: a pause is set through quota.c only (host-wide, only ever
 * lengthened) and logged by the worker that set it, once; the words
 * logged are the API's own reason, printable ASCII (api.h), never a
 * secret; how long a pause holds, the level and words of its line are its
 * kind's row (base/upfail.h: a refused key until a reload, a day at most;
 * a spent quota until the API's next day).
 */
#include "upstream/upstream.h"
#include "upstream/upstream_int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "upstream/api.h"
#include "base/clock.h"
#include "upstream/breaker.h"
#include "upstream/budget.h"
#include "upstream/quota.h"

#define UP_RATE_LOW 5 /* a rate limit's calls left at which a source slows down */

/* ---- breaker transitions: logged once, counted ---- */

void enr_up_breaker_note(enr_upstream *u, int src, int prev, const char *why)
{
    enr_breaker *br = &u->src[src].br;

    if (prev == br->state)
        return;
    u->st.breaker_state[src] = br->state;
    if (br->state == ENR_BREAKER_OPEN)
        u->st.src[src].breaker_opens++;
    enr_log(br->state == ENR_BREAKER_CLOSED ? ENR_LOG_INFO : ENR_LOG_WARN,
            "upstream breaker transition", "source=%s from=%s to=%s reason=%s opens=%llu",
            u->src[src].title, enr_breaker_state_name(prev), enr_breaker_state_name(br->state), why,
            (unsigned long long)br->opens);
}

/* May source src make one more call now?  The breaker first, then the
 * source's host-wide pause and rate (quota.h).  A call refused is counted
 * once per batch by the kind the pause holds for; the rate's refusal, no
 * pause holding, as the provider's asking to slow down (base/upfail.h). */
int enr_up_source_gate(enr_upstream *u, int src, uint64_t now)
{
    enr_upsource *x = &u->src[src];
    int prev, why;

    if (!enr_breaker_allow(&x->br, now, &prev))
        return 0;
    if (enr_quota_take(&x->quota, now) != ENR_QUOTA_OK) {
        /* The rest of the batch's calls of this source are not made;
         * a probe granted is given back. */
        enr_breaker_release(&x->br);
        enr_up_breaker_note(u, src, prev, "cooldown");
        why = enr_quota_why(&x->quota, now);
        (*enr_up_fail_counter(&u->st.src[src],
                              why >= 0 ? why : enr_up_fail_of_end(ENR_UP_END_RATE)))++;
        return 0;
    }
    enr_up_breaker_note(u, src, prev, "cooldown");
    return 1;
}

/* A call's answer, as its source's classifier reads it (api.h): its verdict,
 * kept in c->why too, and the rate headers acted on at once (a
 * Remaining near 0 slows the source down before its 429 comes). */
int enr_up_classify(enr_upstream *u, enr_upcall *c, long status, uint64_t now)
{
    const enr_upsource *x = &u->src[c->src];
    enr_api_headers h = {c->h_retry_after_len ? c->h_retry_after : NULL,
                         c->h_retry_after_len,
                         c->h_remaining_len ? c->h_remaining : NULL,
                         c->h_remaining_len,
                         c->h_reset_len ? c->h_reset : NULL,
                         c->h_reset_len};
    int64_t wall = (int64_t)time(NULL);

    memset(&c->why, 0, sizeof c->why);
    c->why.remaining = -1;
    x->api->classify((int)status, c->body.data, c->body.len, &h, wall, &c->why);
    c->why.reason[sizeof c->why.reason - 1] = '\0';
    if (c->why.remaining >= 0 && c->why.remaining <= UP_RATE_LOW &&
        c->why.verdict == ENR_API_V_OK) {
        /* What is left of the window, spread over the calls left in it. */
        int64_t left_s = c->why.until > wall ? c->why.until - wall : 1;
        uint64_t gap_ms = (uint64_t)left_s * 1000u / (uint64_t)(c->why.remaining + 1);
        if (enr_quota_hold(&u->src[c->src].quota, now, gap_ms, enr_up_fail_of_end(ENR_UP_END_RATE),
                           wall + (int64_t)(gap_ms / 1000u), "ratelimit-remaining"))
            enr_log(ENR_LOG_INFO, "upstream slowing down: the rate limit is nearly spent",
                    "source=%s remaining=%ld pause_ms=%llu", x->title, c->why.remaining,
                    (unsigned long long)gap_ms);
    }
    return c->why.verdict;
}

/* An API's pause for why (a failure kind with a pause rank, base/upfail.h),
 * host-wide (quota.h), as long as the kind's row says, said once per
 * pause at the row's level in the words an operator acts on (api.h). */
void enr_up_pause(enr_upstream *u, enr_upcall *c, int why, uint64_t now)
{
    enr_upsource *x = &u->src[c->src];
    const enr_up_fail_row *r = &enr_up_fail_rows[why];
    int64_t wall = (int64_t)time(NULL);
    int64_t until = enr_api_pause_until(c->src, why, c->why.until,
                                        c->has_retry_after ? c->retry_after_s : 0, wall);
    char when[32], msg[160];
    struct tm tm;

    if (r->ends == ENR_UP_END_DAY)
        enr_up_store_pause(u, c->src, until); /* every host of the fleet (store.h) */
    if (!enr_quota_hold(&x->quota, now, (uint64_t)(until - wall) * 1000u, why, until,
                        c->why.reason))
        return; /* held already: its setter said so */
    gmtime_r(&(time_t){(time_t)until}, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    /* The reason is the API's own word, printable ASCII (api.h). */
    enr_api_pause_said(c->src, why, c->why.reason, msg, sizeof msg);
    enr_log(r->level, msg, "source=%s until=%s%s", x->api->name, when,
            r->ends == ENR_UP_END_RELOAD ? " retry=\"after a reload (HUP)\"" : "");
}

/* The day's budget (budget.h), asked before every request is sent (a
 * retry too: the provider counts it).  A source paced by its rate (the
 * aggregator protocol, api.h) has none. */
int enr_up_budget_take(enr_upstream *u, enr_upcall *c)
{
    unsigned units;
    enr_budget_now now = enr_budget_clocks();

    c->units = 0;
    if (u->src[c->src].api->rate_paced)
        return 1;
    units = enr_budget_cost(c->src, c->n);
    if (!enr_budget_take(c->src, units, c->refresh, now)) {
        if (c->refresh)
            u->st.src[c->src].refresh_deferred += c->n;
        return 0;
    }
    c->units = units;
    c->units_day = enr_budget_day_key(c->src, now);
    return 1;
}

/* Units are taken before the request goes (the pace must hold every
 * worker back at once), and the provider counts only what reached it:
 * a request that never left (its connection still being set up when its
 * batch, or the room for detached calls, ran out) gives them back. */
void enr_up_budget_settle(enr_upstream *u, enr_upcall *c, int sent)
{
    if (c->units == 0)
        return;
    if (sent)
        u->st.src[c->src].quota_units += c->units;
    else
        enr_budget_refund(c->src, c->units, c->units_day, enr_budget_clocks());
    c->units = 0;
}
