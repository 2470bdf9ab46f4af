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

#include "base/clock.h"

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
        w->state = W_UNKNOWN;
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
        w->state = W_FOUND;
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

int enr_up_store_idle(enr_upstream *u, int wait)
{
    int w = enr_store_idle(u->store, enr_mono_ms());

    return w >= 0 && (wait < 0 || w < wait) ? w : wait;
}

const enr_store_stats *enr_upstream_store_stats(const enr_upstream *u)
{
    return u != NULL && u->store != NULL ? enr_store_stats_of(u->store) : NULL;
}
