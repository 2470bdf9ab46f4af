/*
 * upstore.c: the client's side of the fleet's store (store_cache.h,
 * docs/fleet.md): a batch's ids that missed the host's cache, asked in
 * one MGET before any API call, and the store's connection kept in the
 * worker's idle time.
 *
 * The store is the second layer: what it answers resolves a want as an
 * API's answer would (found or unknown), is kept in the host's cache for
 * what is left of its lifetime, and is not written back.  A store that
 * is not usable (down, backing off, slow or far: enr_store_usable) is not
 * asked; a lookup that runs out of time leaves every want pending, asked
 * of its API as before.  Nothing here waits but enr_store_batch_get,
 * bounded by the batch's deadline and shared_store_timeout_ms.
 */
#include "upstream/upstream.h"
#include "upstream/upstream_int.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "upstream/budget.h"
#include "upstream/store_lease.h"

#define PAUSE_POLL_MS 1000 /* how often a worker reads the fleet's pauses */

typedef struct hit_ctx {
    enr_upstream *u;
    enr_batch *b;
} hit_ctx;

static void on_hit(void *ud, size_t k, const enr_cache_val *v)
{
    hit_ctx *x = ud;
    enr_upstream *u = x->u;
    enr_upwant *w = &u->wants[u->order[k]];
    const enr_record *r = &x->b->recs[w->rec];
    const char *key = x->b->text.data + r->key_off;

    /* The host keeps it first: the key points into b->text, which the
     * poster's append below may move. */
    enr_up_cache_keep(u, w->provider, w->src, key, r->key_len, v);
    if (v->negative) {
        w->state = ENR_UPW_UNKNOWN;
    } else {
        if (v->poster != NULL) {
            size_t off = x->b->text.len;
            enr_buf_append(&x->b->text, v->poster, v->poster_len);
            if (x->b->text.oom)
                return; /* stays pending: its API is asked */
            w->poster_off = off;
            w->poster_len = v->poster_len;
            w->has_poster = 1;
        }
        if (v->has_duration) {
            w->duration = v->duration;
            w->has_duration = 1;
        }
        w->state = ENR_UPW_FOUND;
    }
    w->shared = 1;
}

void enr_up_store_lookup(enr_upstream *u, enr_batch *b, uint64_t wall_ms, uint64_t dl)
{
    uint64_t now = enr_mono_ms(), until;
    hit_ctx x = {u, b};
    size_t n = 0;

    if (u->store == NULL || u->nwants == 0)
        return;
    if (!enr_store_usable(u->store, now)) {
        enr_store_stats_of(u->store)->skipped++;
        return;
    }
    enr_store_batch_reset(u->sbatch);
    for (size_t wi = 0; wi < u->nwants; wi++) {
        const enr_upwant *w = &u->wants[wi];
        const enr_record *r = &b->recs[w->rec];
        if (enr_store_batch_add(u->sbatch, enr_store_prefix(u->store), w->provider, w->src,
                                b->text.data + r->key_off, r->key_len) == 0)
            u->order[n++] = wi; /* the k-th key's want, until the calls are planned */
    }
    until = now + enr_store_timeout_ms(u->store);
    if (dl < until)
        until = dl;
    if (n > 0 && now < until)
        (void)enr_store_batch_get(u->store, u->sbatch, wall_ms, until, on_hit, &x);
}

void enr_up_store_flush(enr_upstream *u)
{
    enr_store_flush(u->store);
}

/* What the budget says of source src's day now, for its ledger; 0 when
 * it has no budget. */
static int lease_day(int src, enr_budget_now now, enr_lease_day *d)
{
    enr_budget_state st;
    int64_t elapsed;

    if (enr_api_get(src)->rate_paced || !enr_budget_view(src, now, &st))
        return 0;
    elapsed = (int64_t)st.day_ms - (st.reset_ms - now.wall_ms);
    d->src = src;
    d->end_ms = st.day_end_ms;
    d->limit = (uint64_t)st.v[ENR_BUDGET_ROW_limit];
    d->allowed =
        enr_budget_allowed(d->limit, st.burst, elapsed > 0 ? (uint64_t)elapsed : 0, st.day_ms);
    return 1;
}

/* ---- the fleet's pause: a spent quota seen by one host holds them all ---- */

static void pause_key(enr_upstream *u, int src, enr_buf *k)
{
    enr_buf_reset(k);
    enr_buf_append(k, enr_store_prefix(u->store), strlen(enr_store_prefix(u->store)));
    enr_buf_lit(k, "p:");
    enr_buf_append(k, enr_config_source_names[src], strlen(enr_config_source_names[src]));
}

void enr_up_store_pause(enr_upstream *u, int src, int64_t until_wall_s)
{
    int64_t now = (int64_t)(enr_wall_ms() / 1000);
    char until[24], ttl[24];
    const char *argv[5];
    size_t lens[5];
    enr_buf k = {0};

    if (u->store == NULL || until_wall_s <= now)
        return;
    pause_key(u, src, &k);
    snprintf(until, sizeof until, "%" PRId64, until_wall_s);
    snprintf(ttl, sizeof ttl, "%" PRId64, until_wall_s - now);
    argv[0] = "SET", argv[1] = k.data, argv[2] = until, argv[3] = "EX", argv[4] = ttl;
    for (int i = 0; i < 5; i++)
        lens[i] = i == 1 ? k.len : strlen(argv[i]);
    if (!k.oom)
        (void)enr_store_send(u->store, 5, argv, lens, ENR_STORE_REPLY_SMALL, NULL, NULL, 0);
    enr_store_flush(u->store);
    enr_buf_free(&k);
}

static void paused(void *ud, const redisReply *r, uint64_t src)
{
    enr_upstream *u = ud;
    int64_t now = (int64_t)(enr_wall_ms() / 1000), until;
    char *end;

    if (r == NULL || r->type != REDIS_REPLY_STRING || r->len == 0 || r->len > 20)
        return; /* none, or not ours to believe */
    until = strtoll(r->str, &end, 10);
    /* A pause ends by the provider's next day: never more than 26 hours. */
    if (*end != '\0' || until <= now || until - now > 26 * 3600)
        return;
    (void)enr_quota_hold(&u->src[src].quota, enr_mono_ms(), (uint64_t)(until - now) * 1000u,
                         ENR_UP_F_QUOTA, until, "the fleet's pause");
}

static void pauses_poll(enr_upstream *u, uint64_t now)
{
    enr_buf k = {0};

    if (now - u->pause_polled_ms < PAUSE_POLL_MS || !enr_store_ready(u->store))
        return;
    u->pause_polled_ms = now;
    for (int src = 0; src < ENR_API_COUNT; src++) {
        const char *argv[2] = {"GET", NULL};
        size_t lens[2] = {3, 0};
        if (!u->src[src].in_use || u->src[src].api->rate_paced)
            continue; /* no day's quota: no pause of it to share (api.h) */
        pause_key(u, src, &k);
        argv[1] = k.data;
        lens[1] = k.len;
        if (!k.oom)
            (void)enr_store_send(u->store, 2, argv, lens, 64, paused, u, (uint64_t)src);
    }
    enr_buf_free(&k);
}

int enr_up_store_idle(enr_upstream *u, int wait)
{
    uint64_t now = enr_mono_ms();
    enr_budget_now clocks = enr_budget_clocks();
    enr_lease_day d;
    int w;

    if (u->store == NULL)
        return wait;
    w = enr_store_idle(u->store, now);
    if (enr_store_ready(u->store)) {
        uint64_t conn = enr_store_stats_of(u->store)->connects;
        enr_lease_seen();
        for (int src = 0; src < ENR_API_COUNT; src++)
            if (u->src[src].in_use && lease_day(src, clocks, &d))
                enr_lease_tend(u->store, &d, conn != u->lease_told);
        u->lease_told = conn;
        pauses_poll(u, now);
        enr_store_flush(u->store);
    }
    return w >= 0 && (wait < 0 || w < wait) ? w : wait;
}

void enr_upstream_stop(enr_upstream *u)
{
    enr_budget_now clocks = enr_budget_clocks();
    enr_lease_day d;

    if (u == NULL || u->store == NULL)
        return;
    for (int src = 0; src < ENR_API_COUNT; src++)
        if (u->src[src].in_use && lease_day(src, clocks, &d))
            enr_lease_give_back(u->store, &d);
}

const enr_store_stats *enr_upstream_store_stats(const enr_upstream *u)
{
    return u != NULL && u->store != NULL ? enr_store_stats_of(u->store) : NULL;
}
