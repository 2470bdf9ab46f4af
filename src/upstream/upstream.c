/*
 * upstream.c: the outbound enrichment client of one worker
 * (docs/upstream.md): a batch, and its plan.
 *
 * The connections, their TLS and the loop that drives transfers are
 * upconn.c's; making and unmaking the client (its URL, headers and
 * secret, an easy handle per call slot) is upstream_setup.c's; running a
 * batch's calls under one deadline, and the calls that outlive it, is
 * uprun.c's; how a call ended (its answer read, its outcome counted) is
 * upanswer.c's.  The state these files share is upstream_int.h.
 *
 * A batch, in three steps (enr_upstream_enrich):
 * - lookup_batch(): the cache lookups first (the key holds the source:
 *   one provider's id from two sources never shares an entry); every
 *   record that missed becomes a want, one per distinct provider+id;
 * - send_misses(): the wants, grouped by provider, each provider's sent
 *   to its source (the aggregator's protocol, or the provider's own API
 *   through its row of api.h: URL, headers, reader, classifier), chunked
 *   to the source's ids per call, capped at max_calls_per_batch calls per
 *   source, gated by the source's breaker and pause (upsource.c), and
 *   every call run concurrently under ONE deadline (min of
 *   upstream_timeout_ms and the caller's deadline; uprun.c);
 * - the answers into the cache and the records (found, unknown), and a
 *   kept answer, or the local values, for every other record.
 * Every record that kept its local values is counted in the return
 * value; nothing is swallowed.
 *
 * An id goes on the wire percent-encoded to RFC 3986's unreserved bytes,
 * so no id can add a parameter, a path or a fragment; an id too long for
 * any request line (UP_MAX_URL) is never asked.
 *
 * Invariants: a want is resolved to exactly one of
 * found/unknown/failed/skipped before the batch returns; record posters
 * are stored as offsets into b->text (appends may move it).
 */
#include "upstream/upstream.h"
#include "upstream/upstream_int.h"

#include <stdlib.h>
#include <string.h>

#include "upstream/cache.h"
#include "upstream/upconn.h"
#include "upstream/upstream_reply.h"
#include "base/clock.h"
#include "base/hash.h"

#define UP_MAX_URL 8000 /* common server limit on a request line */

/* ---- per-batch scratch ---- */

static int scratch_reserve(enr_upstream *u, size_t n)
{
    size_t tcap = 16;

    if (n > UINT32_MAX / 4)
        return -1;
    if (n > u->rec_cap) {
        uint32_t *rw = realloc(u->rec_want, n * sizeof(*rw));
        enr_upwant *w;
        size_t *o;
        enr_reply_id *ri;
        if (rw == NULL)
            return -1;
        u->rec_want = rw;
        w = realloc(u->wants, n * sizeof(*w));
        if (w == NULL)
            return -1;
        u->wants = w;
        o = realloc(u->order, n * sizeof(*o));
        if (o == NULL)
            return -1;
        u->order = o;
        ri = realloc(u->rids, n * sizeof(*ri));
        if (ri == NULL)
            return -1;
        u->rids = ri;
        u->rec_cap = u->wants_cap = n;
    }
    while (tcap < 2 * n)
        tcap <<= 1;
    if (tcap > u->table_cap) {
        uint32_t *t = realloc(u->table, tcap * sizeof(*t));
        if (t == NULL)
            return -1;
        u->table = t;
        u->table_cap = tcap;
    }
    return 0;
}

/* The want slot of provider+key: *slot is where its index+1 is or goes. */
static uint32_t *want_slot(enr_upstream *u, const enr_batch *b, int provider, const char *key,
                           size_t len)
{
    size_t mask = u->table_cap - 1;
    size_t i = enr_hash_key(u->seed, provider, key, len) & mask;

    for (;; i = (i + 1) & mask) {
        uint32_t *s = &u->table[i];
        const enr_upwant *w;
        const enr_record *r;
        if (*s == 0)
            return s;
        w = &u->wants[*s - 1];
        r = &b->recs[w->rec];
        if (w->provider == provider && r->key_len == len &&
            memcmp(b->text.data + r->key_off, key, len) == 0)
            return s;
    }
}

/* ---- building calls ---- */

/* RFC 3986 unreserved: the only bytes of an id that go on the wire as
 * themselves, so no id can add a parameter, a path or a fragment. */
static int unreserved(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '.' || ch == '_' || ch == '~';
}

static size_t pct_len(const char *s, size_t n)
{
    size_t len = 0;

    for (size_t i = 0; i < n; i++)
        len += unreserved((unsigned char)s[i]) ? 1 : 3;
    return len;
}

/* What a call's URL takes besides its base and ids, at most (api.h). */
static size_t url_params(const enr_upsource *x)
{
    return x->api->url_params ? x->api->url_params : ENR_API_URL_PARAMS;
}

/* Assign wants to calls: by provider, each to its source's max_ids and
 * UP_MAX_URL per call, at most ncalls_max calls per source, each let
 * through by the source's breaker and pause.  Returns the number of
 * calls built. */
static unsigned plan_calls(enr_upstream *u, const enr_batch *b, uint64_t now)
{
    unsigned ncalls = 0, slot = 0, per_src[ENR_API_COUNT] = {0};
    size_t norder = 0;
    int gate_closed[ENR_API_COUNT] = {0}; /* no more calls of the source this batch */

    for (int p = ENR_PROV_YT; p < ENR_SOURCE_PROVIDERS; p++) {
        int src = u->src_of[p];
        enr_upsource *x;
        enr_upcall *c = NULL;
        size_t url_len = 0; /* the call's URL as far as planned, at most */
        if (src < 0)
            continue;
        x = &u->src[src];
        /* Two passes: new ids, then refreshes of stale ones (budget.h). */
        for (size_t k = 0; k < 2 * u->nwants; k++) {
            size_t wi = k % u->nwants, idlen;
            enr_upwant *w = &u->wants[wi];
            const enr_record *r = &b->recs[w->rec];
            if (w->provider != p || w->stale != k / u->nwants || w->state != ENR_UPW_PENDING)
                continue; /* another provider's, the other pass's, or the fleet's store answered */
            idlen = pct_len(b->text.data + r->key_off, r->key_len);
            if (x->base.len + url_params(x) + 1 + idlen > UP_MAX_URL) {
                /* One id too long for any request line: it can never be
                 * asked, so it keeps its local values. */
                w->state = ENR_UPW_SKIPPED;
                continue;
            }
            if (c && (c->n >= x->max_ids || url_len + 1 + idlen > UP_MAX_URL))
                c = NULL; /* this call is full */
            if (c == NULL) {
                if (gate_closed[src] || per_src[src] >= u->ncalls_max ||
                    !enr_up_source_gate(u, src, now)) {
                    gate_closed[src] = 1;
                    w->state = ENR_UPW_SKIPPED;
                    continue;
                }
                per_src[src]++;
                while (u->calls[slot].active || u->calls[slot].detached)
                    slot++; /* ndetached <= max_detached leaves the batch's slots free */
                u->batch[ncalls++] = slot;
                c = &u->calls[slot++];
                c->first = norder;
                c->n = 0;
                c->provider = p;
                c->src = src;
                url_len = x->base.len + url_params(x);
            }
            url_len += 1 + idlen;
            w->call = (int)(c - u->calls);
            c->refresh = c->n ? c->refresh & w->stale : w->stale; /* no new id in it */
            u->order[norder++] = wi;
            c->n++;
        }
    }
    return ncalls;
}

/* A call's whole URL (upstream_int.h), by its source's row (api.h): an
 * id the API cannot be asked for is found one at a time, and its record
 * keeps its local values. */
int enr_up_call_url(enr_upstream *u, enr_upcall *c, const enr_batch *b)
{
    const enr_upsource *x = &u->src[c->src];
    const char *provider = enr_provider_name(c->provider);
    enr_reply_id *ids = u->rids;
    size_t k = 0;

    for (size_t i = 0; i < c->n; i++) {
        const enr_record *r = &b->recs[u->wants[u->order[c->first + i]].rec];
        memset(&ids[i], 0, sizeof ids[i]);
        ids[i].id = b->text.data + r->key_off;
        ids[i].id_len = r->key_len;
    }
    enr_buf_reset(&c->url);
    if (x->api->build_url(&c->url, x->base.data, provider, ids, c->n, x->secret, x->secret_len) ==
            0 &&
        !c->url.oom)
        return 0;
    /* One at a time: which ids cannot be asked. */
    for (size_t i = 0; i < c->n; i++) {
        size_t wi = u->order[c->first + i];
        enr_buf_reset(&c->url);
        if (x->api->build_url(&c->url, x->base.data, provider, &ids[i], 1, x->secret,
                              x->secret_len) != 0) {
            u->wants[wi].state = ENR_UPW_SKIPPED;
            u->wants[wi].call = -1;
            continue;
        }
        ids[k] = ids[i];
        u->order[c->first + k++] = wi;
    }
    c->n = k;
    enr_buf_reset(&c->url);
    if (k == 0 ||
        x->api->build_url(&c->url, x->base.data, provider, ids, c->n, x->secret, x->secret_len) !=
            0 ||
        c->url.oom)
        return -1;
    return 0;
}

/* ---- the batch ---- */

/* The batch's cache lookups: a record its source answers fresh is
 * enriched; every other record its source could be asked about points
 * at its want (rec_want), one per distinct provider+id (u->nwants). */
static void lookup_batch(enr_upstream *u, enr_batch *b, uint64_t wall, size_t *degraded)
{
    memset(u->table, 0, u->table_cap * sizeof(*u->table));
    u->nwants = 0;
    for (size_t i = 0; i < b->n; i++) {
        enr_record *r = &b->recs[i];
        const char *key = b->text.data + r->key_off;
        uint32_t *slot;
        int src, found;

        u->rec_want[i] = 0;
        if (r->provider == ENR_PROV_NONE || r->provider >= ENR_SOURCE_PROVIDERS || r->key_len == 0)
            continue; /* nothing the upstream could be asked about */
        src = u->src_of[r->provider];
        if (src < 0)
            continue; /* its source is off: its local values are the answer */
        if (!enr_reply_id_askable(key, r->key_len))
            continue; /* no answer could name it unchanged (upstream_reply.h) */
        found = enr_up_lookup(u, b, r, src, wall, degraded);
        if (found == ENR_CACHE_FRESH)
            continue;
        slot = want_slot(u, b, r->provider, key, r->key_len);
        if (*slot == 0) {
            enr_upwant *w = &u->wants[u->nwants];
            memset(w, 0, sizeof(*w));
            w->rec = i;
            w->provider = r->provider;
            w->src = (uint8_t)src;
            w->call = -1;
            w->stale = found == ENR_CACHE_STALE;
            *slot = (uint32_t)++u->nwants;
        }
        u->rec_want[i] = *slot;
    }
}

/* The batch's cache misses (its wants) asked of the fleet's store, then
 * those it did not answer sent to their sources: planned into calls and
 * run under one deadline (now + upstream_timeout_ms, at most
 * deadline_ms).  Every want is resolved when it returns. */
static void send_misses(enr_upstream *u, enr_batch *b, uint64_t now, uint64_t wall,
                        uint64_t deadline_ms)
{
    uint64_t dl = now + u->timeout_ms;
    unsigned ncalls;

    if (deadline_ms < dl)
        dl = deadline_ms;
    enr_up_store_lookup(u, b, wall, dl);
    /* Planned even when the deadline has passed, so the calls that could
     * not be made are counted (kind deadline) instead of vanishing. */
    ncalls = plan_calls(u, b, now);
    for (size_t wi = 0; wi < u->nwants; wi++)
        if (u->wants[wi].call < 0 && u->wants[wi].state == ENR_UPW_PENDING)
            u->wants[wi].state = ENR_UPW_SKIPPED;
    if (ncalls)
        enr_up_run_calls(u, b, ncalls, dl);
}

/* The batch's answers into the cache (and the fleet's store, which the
 * batch does not wait for): found ones, and unknown ids as negative
 * answers; those the store gave are the host's already. */
static void store_answers(enr_upstream *u, const enr_batch *b)
{
    for (size_t wi = 0; wi < u->nwants; wi++) {
        const enr_upwant *w = &u->wants[wi];
        const enr_record *r = &b->recs[w->rec];
        enr_cache_val v = {0};
        if (w->shared)
            continue; /* kept by the host already, with the store's lifetime */
        if (w->state == ENR_UPW_FOUND) {
            v.poster = w->has_poster ? b->text.data + w->poster_off : NULL;
            v.poster_len = w->poster_len;
            v.duration = w->duration;
            v.has_duration = w->has_duration;
            enr_up_cache_store(u, w->provider, w->src, b->text.data + r->key_off, r->key_len, &v,
                               w->live);
        } else if (w->state == ENR_UPW_UNKNOWN) {
            v.negative = 1;
            enr_up_cache_store(u, w->provider, w->src, b->text.data + r->key_off, r->key_len, &v,
                               0);
        }
    }
    enr_up_store_flush(u);
}

/* Every record that wanted an answer gets its want's; one whose want
 * brought none, a kept answer if any.  Returns the records that kept
 * their local values. */
static size_t fill_records(enr_upstream *u, enr_batch *b, uint64_t wall)
{
    size_t degraded = 0;

    for (size_t i = 0; i < b->n; i++) {
        enr_record *r = &b->recs[i];
        const enr_upwant *w;
        if (u->rec_want[i] == 0)
            continue;
        w = &u->wants[u->rec_want[i] - 1];
        switch (w->state) {
        case ENR_UPW_FOUND:
            if (w->has_poster) {
                r->poster_off = w->poster_off;
                r->poster_len = w->poster_len;
            }
            if (w->has_duration && r->duration == 0)
                r->duration = w->duration;
            break;
        case ENR_UPW_UNKNOWN:
            break;
        default: /* failed, skipped (breaker, cap, deadline): a kept answer, if any */
            degraded += enr_up_stale_serve(u, b, r, w->src, wall);
            break;
        }
    }
    return degraded;
}

size_t enr_upstream_enrich(enr_upstream *u, enr_batch *b, uint64_t deadline_ms)
{
    uint64_t now = enr_mono_ms(), wall = enr_wall_ms();
    size_t degraded = 0;

    if (u == NULL || b->n == 0)
        return 0;
    if (scratch_reserve(u, b->n) != 0)
        return b->n; /* no memory: every record keeps its local values */
    lookup_batch(u, b, wall, &degraded);
    u->st.fds = enr_upconn_fds(u->conn);
    if (u->nwants == 0)
        return degraded;
    send_misses(u, b, now, wall, deadline_ms);
    u->st.fds = enr_upconn_fds(u->conn);
    store_answers(u, b);
    return degraded + fill_records(u, b, wall);
}
