/*
 * upstream.c: the outbound enrichment client of one worker (docs/upstream.md).
 *
 * The connections, their TLS and the loop that drives transfers are
 * upconn.c's; making and unmaking the client (its URL, headers and
 * secret, an easy handle per call slot) is upstream_setup.c's, and the
 * state both files share is upstream_int.h.  This file plans a batch's
 * calls and reads their answers.
 *
 * A batch: cache lookups first (the key holds the source: one provider's
 * id from two sources never shares an entry); the distinct ids that
 * missed are grouped by provider, each provider's sent to its source
 * (the aggregator's protocol, or the provider's own API through its row
 * of api.h: URL, headers, reader, classifier), chunked to the source's
 * ids per call, capped at max_calls_per_batch calls per source, gated by
 * the source's breaker and pause (upsource.c), and every call of every
 * source run concurrently under ONE deadline
 * (min of upstream_timeout_ms and the caller's deadline).  A call still
 * running at the deadline is detached, not killed: its records keep
 * their local values in this batch, but the transfer (often a handshake
 * a batch could never wait for) goes on between batches and its answer
 * fills the cache; killing it would close the connection and make the
 * next batch start the same handshake again.  At most
 * upstream_max_connections calls are detached; a batch that needs the
 * room ends the oldest (fresh work first).  A call whose connection died
 * before any byte of the response is retried once, within the same
 * deadline.  Every call is counted once, by how it ended, and every
 * record that kept its local values is counted in the return value;
 * nothing is swallowed.  A call that the deadline left no time for is
 * counted (kind deadline) but is not the upstream's failure, so the
 * breaker never hears of it; nor does it of a detached call ended for
 * room before its request left (its connection still being set up: the
 * path's time ran out, not the provider's), whose budget units are given
 * back.
 *
 * A reply is hostile input: it is held only up to what its call can
 * legitimately need (enr_upstream_reply_cap(), checked on Content-Length
 * and while receiving by upstream_setup.c's callbacks) and read by the
 * bounded reader of upstream_reply.c; a larger one fails the call as
 * too_large, unread.
 * Name lookups run in libcurl's resolver thread, which a removed transfer
 * no longer waits for (CURLOPT_QUICK_EXIT), so a stalled resolver costs a
 * batch its deadline, not the lookup's time.
 *
 * Invariants: between batches only detached calls are attached to the
 * multi handle, and they hold copies of their ids (the batch is gone);
 * record posters are stored as offsets into b->text (appends may move
 * it); a want (a distinct provider+id that missed) is resolved to exactly
 * one of found/unknown/failed/skipped before the batch returns.
 */
#include "upstream/upstream.h"
#include "upstream/upstream_int.h"

#include <stdlib.h>
#include <string.h>

#include "upstream/breaker.h"
#include "upstream/cache.h"
#include "upstream/upconn.h"
#include "upstream/quota.h"
#include "upstream/upsecret.h"
#include "upstream/curlapi.h"
#include "base/log.h"
#include "upstream/upstream_reply.h"
#include "base/clock.h"
#include "base/hash.h"

typedef enr_upwant want;

#define UP_MAX_BODY ENR_REPLY_BODY_MAX /* no reply is larger, whatever the call asked */
#define UP_MAX_URL 8000                /* common server limit on a request line */
#define UP_RETRY_MIN_MS 2              /* no retry with less time than this left */
#define UP_PARAMS_MAX 256 /* an URL's parameters besides the ids, at most ("provider=xx&ids=") */

/* ---- per-batch scratch ---- */

static int scratch_reserve(enr_upstream *u, size_t n)
{
    size_t tcap = 16;

    if (n > UINT32_MAX / 4)
        return -1;
    if (n > u->rec_cap) {
        uint32_t *rw = realloc(u->rec_want, n * sizeof(*rw));
        want *w;
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
        const want *w;
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

static void pct_encode(enr_buf *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";

    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (unreserved(ch)) {
            enr_buf_putc(o, (char)ch);
        } else {
            char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            enr_buf_append(o, e, 3);
        }
    }
}

static size_t pct_len(const char *s, size_t n)
{
    size_t len = 0;

    for (size_t i = 0; i < n; i++)
        len += unreserved((unsigned char)s[i]) ? 1 : 3;
    return len;
}

static void call_begin_url(enr_upstream *u, enr_upcall *c, int provider)
{
    const enr_buf *base = &u->src[c->src].base;

    enr_buf_reset(&c->url);
    if (u->src[c->src].api != NULL)
        return; /* an API's URL is built whole when the call is (call_api_url) */
    enr_buf_append(&c->url, base->data, base->len);
    enr_buf_lit(&c->url, "provider=");
    enr_buf_append(&c->url, enr_provider_name(provider), strlen(enr_provider_name(provider)));
    enr_buf_lit(&c->url, "&ids=");
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
        size_t url_len = 0; /* the call's URL as far as planned (an API's: estimated) */
        if (src < 0)
            continue;
        x = &u->src[src];
        /* Two passes: new ids, then refreshes of stale ones (budget.h). */
        for (size_t k = 0; k < 2 * u->nwants; k++) {
            size_t wi = k % u->nwants, idlen;
            want *w = &u->wants[wi];
            const enr_record *r = &b->recs[w->rec];
            if (w->provider != p || w->stale != k / u->nwants || w->state != W_PENDING)
                continue; /* another provider's, the other pass's, or the fleet's store answered */
            idlen = pct_len(b->text.data + r->key_off, r->key_len);
            if (x->base.len + (x->api ? UP_PARAMS_MAX : sizeof("provider=xx&ids=") - 1) + idlen >
                UP_MAX_URL) {
                /* One id too long for any request line: it can never be
                 * asked, so it keeps its local values. */
                w->state = W_SKIPPED;
                continue;
            }
            if (c && (c->n >= x->max_ids || url_len + 1 + idlen > UP_MAX_URL))
                c = NULL; /* this call is full */
            if (c == NULL) {
                if (gate_closed[src] || per_src[src] >= u->ncalls_max ||
                    !enr_up_source_gate(u, src, now)) {
                    gate_closed[src] = 1;
                    w->state = W_SKIPPED;
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
                call_begin_url(u, c, p);
                url_len = x->api ? x->base.len + UP_PARAMS_MAX : c->url.len;
            }
            if (x->api == NULL) {
                if (c->n)
                    enr_buf_putc(&c->url, ',');
                pct_encode(&c->url, b->text.data + r->key_off, r->key_len);
                url_len = c->url.len;
            } else {
                url_len += 1 + idlen;
            }
            w->call = (int)(c - u->calls);
            c->refresh = c->n ? c->refresh & w->stale : w->stale; /* no new id in it */
            u->order[norder++] = wi;
            c->n++;
        }
    }
    return ncalls;
}

/* An API call's whole URL (api.h).  An id the API cannot be asked for
 * is left out of the call (its record keeps its local values); 0, or -1
 * when no id of the call is left. */
static int call_api_url(enr_upstream *u, enr_upcall *c, const enr_batch *b)
{
    const enr_upsource *x = &u->src[c->src];
    enr_reply_id *ids = u->rids;
    size_t k = 0;

    for (size_t i = 0; i < c->n; i++) {
        const enr_record *r = &b->recs[u->wants[u->order[c->first + i]].rec];
        memset(&ids[i], 0, sizeof ids[i]);
        ids[i].id = b->text.data + r->key_off;
        ids[i].id_len = r->key_len;
    }
    enr_buf_reset(&c->url);
    if (x->api->build_url(&c->url, x->base.data, ids, c->n, x->secret, x->secret_len) == 0 &&
        !c->url.oom)
        return 0;
    /* One at a time: which ids cannot be asked. */
    for (size_t i = 0; i < c->n; i++) {
        size_t wi = u->order[c->first + i];
        enr_buf_reset(&c->url);
        if (x->api->build_url(&c->url, x->base.data, &ids[i], 1, x->secret, x->secret_len) != 0) {
            u->wants[wi].state = W_SKIPPED;
            u->wants[wi].call = -1;
            continue;
        }
        ids[k] = ids[i];
        u->order[c->first + k++] = wi;
    }
    c->n = k;
    enr_buf_reset(&c->url);
    if (k == 0 ||
        x->api->build_url(&c->url, x->base.data, ids, c->n, x->secret, x->secret_len) != 0 ||
        c->url.oom)
        return -1;
    return 0;
}

/* ---- results ---- */

/* Counts a call that failed (kind: enum enr_up_fail), once, and tells
 * the breaker when its row says the kind is the provider's failure. */
static void count_failure(enr_upstream *u, enr_upcall *c, int kind, uint64_t now)
{
    enr_upsource *x = &u->src[c->src];
    char qerr[CURL_ERROR_SIZE + 8];
    int prev;

    (*enr_up_fail_counter(&u->st.src[c->src], kind))++;
    /* Debug only: failures are counted per kind for operators; this line
     * says why one call failed when someone is looking.  libcurl's text
     * may quote the URL, and with it the secret: scrubbed first. */
    enr_secret_scrub(c->errbuf, x->secret, x->secret_len);
    enr_log(ENR_LOG_DEBUG, "upstream call failed",
            "source=%s kind=%s ids=%zu retried=%d late=%d error=%s", x->title,
            enr_up_fail_name(kind), c->n, c->retried, c->detached,
            enr_log_quote(qerr, sizeof(qerr), c->errbuf));
    if (!enr_up_fail_rows[kind].breaker) {
        /* Says nothing about the upstream's health; a probe it held is
         * given back (a paused one: the pause holds every call). */
        enr_breaker_release(&x->br);
        return;
    }
    prev = enr_breaker_failure(&x->br, now);
    enr_up_breaker_note(u, c->src, prev, enr_up_fail_name(kind));
}

/* A call of the batch in hand failed: counted, its wants failed. */
static void call_failed(enr_upstream *u, enr_upcall *c, int kind, uint64_t now)
{
    count_failure(u, c, kind, now);
    for (size_t i = 0; i < c->n; i++)
        u->wants[u->order[c->first + i]].state = W_FAILED;
}

/* A 200 body of c's source, read by its reader (api.h, upstream_reply.h). */
static int parse_reply(const enr_upstream *u, const enr_upcall *c, enr_reply_id *ids,
                       enr_buf *arena)
{
    const enr_api *api = u->src[c->src].api;

    if (api != NULL)
        return api->parse(c->body.data, c->body.len, ids, c->n, u->seed, arena);
    return enr_upstream_reply_parse(c->body.data, c->body.len, ids, c->n, u->seed, arena);
}

/* Parse a 200 body; 0 and the call's wants resolved, or -1 (bad body).
 * The reply rules live in the readers; posters go into b->text. */
static int call_parse(enr_upstream *u, enr_upcall *c, enr_batch *b)
{
    enr_reply_id *ids = u->rids;

    for (size_t i = 0; i < c->n; i++) {
        const enr_record *r = &b->recs[u->wants[u->order[c->first + i]].rec];
        memset(&ids[i], 0, sizeof ids[i]);
        ids[i].id = b->text.data + r->key_off;
        ids[i].id_len = r->key_len;
    }
    /* The ids point into b->text, which may move when it grows, so the
     * posters go to a separate arena first and into b->text after. */
    enr_buf_reset(&u->posters);
    if (parse_reply(u, c, ids, &u->posters) != 0)
        return -1;
    for (size_t i = 0; i < c->n; i++) {
        want *w = &u->wants[u->order[c->first + i]];
        const enr_reply_id *r = &ids[i];
        if (r->has_poster) {
            size_t off = b->text.len;
            enr_buf_append(&b->text, u->posters.data + r->poster_off, r->poster_len);
            if (!b->text.oom) {
                w->poster_off = off;
                w->poster_len = r->poster_len;
                w->has_poster = 1;
            }
        }
        if (r->has_duration) {
            w->duration = r->duration;
            w->has_duration = 1;
        }
        w->live = r->live;
        w->state = (w->has_poster || w->has_duration) ? W_FOUND : W_UNKNOWN;
        if (w->state == W_FOUND)
            u->st.src[c->src].found++;
        else
            u->st.src[c->src].unknown++;
    }
    return 0;
}

/* A connection that died before any byte of the reply: the request may
 * never have reached the upstream (a kept-alive connection it had just
 * closed), so one more try on a fresh connection is safe for a GET. */
static int died_before_reply(const enr_upcall *c, CURLcode rc)
{
    return c->resp_bytes == 0 &&
           (rc == CURLE_GOT_NOTHING || rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR);
}

/* The cap of c's reply, from its ids and its source (enr_api_item_cap),
 * at most UP_MAX_BODY: enr_upstream_reply_cap() for the aggregator's. */
static size_t call_cap(const enr_upstream *u, const enr_upcall *c, const enr_batch *b)
{
    size_t cap = ENR_REPLY_SLACK;

    for (size_t i = 0; i < c->n && cap < UP_MAX_BODY; i++) {
        const enr_record *r = &b->recs[u->wants[u->order[c->first + i]].rec];
        cap += enr_api_item_cap(c->src, r->key_len);
    }
    return cap < UP_MAX_BODY ? cap : UP_MAX_BODY;
}

/* Did c's request leave (upconn.h)? */
static int request_left(const enr_upcall *c)
{
    return enr_upconn_request_left(c->easy, c->began);
}

static int call_start(enr_upstream *u, enr_upcall *c)
{
    /* The retry goes on a new connection: the pool may hold more
     * connections the upstream has already closed, and the one retry must
     * not be spent on another of them. */
    long fresh = c->retried ? 1L : 0L;

    if (!enr_up_budget_take(u, c))
        return -2; /* the day's budget (budget.h): not sent */
    enr_buf_reset(&c->body);
    c->resp_bytes = 0;
    c->too_large = 0;
    c->began = 0;
    c->errbuf[0] = '\0';
    if (c->url.oom) {
        enr_up_budget_settle(u, c, 0);
        return -1;
    }
    enr_buf_putc(&c->url, '\0');
    if (c->url.oom) {
        enr_up_budget_settle(u, c, 0);
        return -1;
    }
    c->url.len--; /* keep it a string without counting the NUL */
    if (curl_easy_setopt(c->easy, CURLOPT_URL, c->url.data) != CURLE_OK ||
        curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, u->src[c->src].headers) != CURLE_OK ||
        curl_easy_setopt(c->easy, CURLOPT_FRESH_CONNECT, fresh) != CURLE_OK ||
        enr_upconn_track_request(c->easy, &c->began) != 0 ||
        enr_upconn_source(u->conn, c->easy, c->src) != 0 || enr_upconn_add(u->conn, c->easy) != 0) {
        enr_up_budget_settle(u, c, 0); /* never started */
        return -1;
    }
    c->active = 1;
    c->started_ms = enr_mono_ms();
    return 0;
}

/* How a transfer ended, as a failure kind, or -1 for a 200 to read. */
static int outcome(enr_upstream *u, enr_upcall *c, CURLcode rc, uint64_t now)
{
    long status = 0;
    int pause;

    enr_up_budget_settle(u, c, request_left(c));
    if (rc == CURLE_OK)
        enr_upconn_answered(u->conn, c->easy, c->src);
    if (c->too_large)
        return ENR_UP_F_TOO_LARGE;
    if (rc != CURLE_OK)
        return enr_upconn_fail_kind(rc);
    if (curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
        return ENR_UP_F_STATUS;
    if (u->src[c->src].api != NULL) {
        int v = enr_up_classify(u, c, status, now);
        if (v == ENR_API_V_OK)
            return status == 200 ? -1 : ENR_UP_F_STATUS;
        /* A pause the answer asks for, else the provider's failure
         * (a request refused as malformed too: logged below). */
        return v >= 0 && v < ENR_UP_NFAILS && enr_up_fail_rows[v].pause ? v : ENR_UP_F_STATUS;
    }
    pause = enr_api_upstream_pause((int)status, c->has_retry_after);
    if (pause >= 0)
        return pause;
    if (status != 200)
        return ENR_UP_F_STATUS;
    return -1;
}

/* A failed call, counted; a provider that asked for a pause gets it,
 * host-wide (quota.h). */
static void call_ended_badly(enr_upstream *u, enr_upcall *c, CURLcode rc, int kind, uint64_t now)
{
    if (u->src[c->src].api != NULL && enr_up_fail_rows[kind].pause) {
        enr_up_pause(u, c, kind, now);
    } else if (enr_up_fail_rows[kind].pause) {
        /* The aggregator's: its Retry-After, whatever else it says. */
        long status = 0;
        (void)curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
        enr_quota_pause(&u->src[c->src].quota, now, c->has_retry_after ? c->retry_after_s : 0,
                        status, kind);
    } else if (kind == ENR_UP_F_STATUS && u->src[c->src].api != NULL &&
               c->why.verdict == ENR_API_V_CONFIG) {
        enr_log(ENR_LOG_WARN, "the API refused the request as malformed", "source=%s reason=%s",
                u->src[c->src].api->name, c->why.reason[0] ? c->why.reason : "-");
    }
    enr_upconn_explain(u->conn, c->easy, rc, c->errbuf);
}

static void call_done(enr_upstream *u, enr_upcall *c, enr_batch *b, CURLcode rc, uint64_t now)
{
    int kind = outcome(u, c, rc, now), prev;

    if (kind < 0 && call_parse(u, c, b) != 0)
        kind = ENR_UP_F_BODY;
    if (kind >= 0) {
        call_ended_badly(u, c, rc, kind, now);
        call_failed(u, c, kind, now);
        return;
    }
    prev = enr_breaker_success(&u->src[c->src].br, now);
    enr_up_breaker_note(u, c->src, prev, "success");
}

/* ---- calls that outlive their batch ---- */

/* The batch is answering without c: its ids are copied out of the
 * batch's text, which the next request reuses, so the answer can still
 * fill the cache. */
static void detach(enr_upstream *u, enr_upcall *c, const enr_batch *b, uint64_t now)
{
    size_t off = 0;

    enr_buf_reset(&c->idtext);
    for (size_t i = 0; i < c->n; i++) {
        const enr_record *r = &b->recs[u->wants[u->order[c->first + i]].rec];
        enr_buf_append(&c->idtext, b->text.data + r->key_off, r->key_len);
    }
    for (size_t i = 0; i < c->n; i++) {
        const enr_record *r = &b->recs[u->wants[u->order[c->first + i]].rec];
        memset(&c->lids[i], 0, sizeof c->lids[i]);
        c->lids[i].id = c->idtext.oom ? "" : c->idtext.data + off;
        c->lids[i].id_len = c->idtext.oom ? 0 : r->key_len;
        off += r->key_len;
    }
    for (size_t i = 0; i < c->n; i++)
        u->wants[u->order[c->first + i]].state = W_FAILED;
    c->detached = 1;
    c->detached_ms = now;
    u->ndetached++;
    u->st.src[c->src].detached++;
}

static void undetach(enr_upstream *u, enr_upcall *c)
{
    c->detached = 0;
    u->ndetached--;
}

/* A detached call ended: its answer goes into the cache. */
static void late_done(enr_upstream *u, enr_upcall *c, CURLcode rc, uint64_t now)
{
    int kind = outcome(u, c, rc, now), prev;

    undetach(u, c);
    enr_buf_reset(&u->posters);
    if (kind < 0 && (c->idtext.oom || parse_reply(u, c, c->lids, &u->posters) != 0))
        kind = ENR_UP_F_BODY;
    if (kind >= 0) {
        call_ended_badly(u, c, rc, kind, now);
        count_failure(u, c, kind, now);
        return;
    }
    for (size_t i = 0; i < c->n; i++) {
        const enr_reply_id *r = &c->lids[i];
        enr_cache_val v = {0};
        int found = r->has_poster || r->has_duration;
        v.poster = r->has_poster ? u->posters.data + r->poster_off : NULL;
        v.poster_len = r->has_poster ? r->poster_len : 0;
        v.duration = r->duration;
        v.has_duration = r->has_duration;
        v.negative = !found;
        if (found)
            u->st.src[c->src].found++;
        else
            u->st.src[c->src].unknown++;
        enr_up_cache_store(u, c->provider, c->src, r->id, r->id_len, &v, r->live);
    }
    u->st.src[c->src].late++;
    prev = enr_breaker_success(&u->src[c->src].br, now);
    enr_up_breaker_note(u, c->src, prev, "success");
}

/* Room for a batch: at most max_detached calls outlive their batches; the
 * oldest go first, counted as what they are (no answer in time). */
static void make_room(enr_upstream *u, unsigned needed, uint64_t now)
{
    while (u->ndetached > 0 && u->ndetached + needed > u->max_detached) {
        enr_upcall *old = NULL;
        for (unsigned i = 0; i < u->nslots; i++)
            if (u->calls[i].detached && (old == NULL || u->calls[i].detached_ms < old->detached_ms))
                old = &u->calls[i];
        if (old == NULL)
            break; /* ndetached says otherwise: cannot happen */
        enr_upconn_remove(u->conn, old->easy);
        old->active = 0;
        undetach(u, old);
        /* Still setting its connection up: the room ran out, not the
         * provider (no breaker, and the units its request never used
         * given back). */
        enr_up_budget_settle(u, old, request_left(old));
        count_failure(u, old, request_left(old) ? ENR_UP_F_TIMEOUT : ENR_UP_F_DEADLINE, now);
    }
}

/* The call's time went on setting its connection up: its request not
 * yet sent, or sent after a set-up (DNS, TCP, TLS) that took more than
 * half of the time it had, leaving the upstream less than half a deadline
 * to answer.  Such a call is detached at the deadline, not killed, since
 * its connection is the next batch's.  A call the upstream had in time
 * and did not answer is the upstream's timeout, whatever its connection. */
static int setting_up(const enr_upcall *c, uint64_t now)
{
    curl_off_t setup_us = 0;

    if (!request_left(c))
        return 1;
    return curl_easy_getinfo(c->easy, CURLINFO_PRETRANSFER_TIME_T, &setup_us) == CURLE_OK &&
           (uint64_t)setup_us * 2 > (now - c->started_ms) * 1000u;
}

/* ---- driving transfers ---- */

typedef struct drive_ctx {
    enr_upstream *u;
    enr_batch *b;    /* NULL between batches */
    unsigned active; /* the batch's calls still running */
    uint64_t dl;
} drive_ctx;

static void on_done(void *ud, CURL *easy, CURLcode rc)
{
    drive_ctx *x = ud;
    enr_upstream *u = x->u;
    enr_upcall *c = NULL;
    uint64_t now = enr_mono_ms();

    if (curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&c) != CURLE_OK || c == NULL)
        return; /* not ours: cannot happen with one owner */
    enr_upconn_remove(u->conn, easy);
    c->active = 0;
    if (c->detached) {
        late_done(u, c, rc, now);
        return;
    }
    x->active--;
    if (died_before_reply(c, rc) && !c->retried && now + UP_RETRY_MIN_MS < x->dl) {
        enr_up_budget_settle(u, c, request_left(c));
        c->retried = 1;
        u->st.src[c->src].retries++;
        if (call_start(u, c) == 0) {
            x->active++;
            return;
        }
    }
    call_done(u, c, x->b, rc, now);
}

/* Run the planned calls until all are done or the deadline passes. */
static void run_calls(enr_upstream *u, enr_batch *b, unsigned ncalls, uint64_t dl)
{
    drive_ctx x = {.u = u, .b = b, .active = 0, .dl = dl};
    uint64_t now = enr_mono_ms();
    int rc;

    make_room(u, ncalls, now);
    for (unsigned i = 0; i < ncalls; i++) {
        enr_upcall *c = &u->calls[u->batch[i]];
        c->retried = 0;
        c->cap = call_cap(u, c, b);
        if (now >= dl) {
            /* No time left (planning took it, or the caller's deadline
             * had passed): not the upstream's failure. */
            call_failed(u, c, ENR_UP_F_DEADLINE, now);
            continue;
        }
        if (u->src[c->src].api != NULL && call_api_url(u, c, b) != 0) {
            /* No id of it can be asked: nothing to call, nothing failed
             * (its records are counted as skipped). */
            enr_breaker_release(&u->src[c->src].br);
            continue;
        }
        if ((rc = call_start(u, c)) == -2) {
            call_failed(u, c, ENR_UP_F_BUDGET, now); /* not sent: not counted as a call */
            continue;
        }
        u->st.src[c->src].calls++;
        u->st.src[c->src].ids_asked += c->n;
        if (rc != 0) {
            call_failed(u, c, ENR_UP_F_CONNECT, now);
            continue;
        }
        x.active++;
    }
    while (x.active > 0 && (now = enr_mono_ms()) < dl)
        enr_upconn_drive(u->conn, (int)(dl - now), on_done, &x);
    /* Past the deadline.  A call still setting its connection up goes on
     * without the batch: the handshake is the next batch's connection.  A
     * call the upstream has and did not answer in time is a timeout, the
     * breaker's business; removing it closes its connection, so nothing
     * lingers. */
    now = enr_mono_ms();
    for (unsigned i = 0; i < ncalls; i++) {
        enr_upcall *c = &u->calls[u->batch[i]];
        if (!c->active || c->detached)
            continue;
        if (setting_up(c, now)) {
            detach(u, c, b, now);
            continue;
        }
        enr_upconn_remove(u->conn, c->easy);
        c->active = 0;
        enr_up_budget_settle(u, c, 1); /* setting_up(): its request left */
        call_failed(u, c, ENR_UP_F_TIMEOUT, now);
    }
    make_room(u, 0, now);
}

int enr_upstream_idle(enr_upstream *u)
{
    drive_ctx x = {.u = u, .b = NULL, .active = 0, .dl = 0};

    enr_upconn_drive(u->conn, 0, on_done, &x);
    u->st.fds = enr_upconn_fds(u->conn);
    for (int src = 0; src < ENR_API_COUNT; src++)
        u->st.src[src].warmups = enr_upconn_warmups(u->conn, src);
    return enr_up_store_idle(u, enr_upconn_maintain(u->conn, enr_mono_ms()));
}

int enr_upstream_fd(const enr_upstream *u)
{
    return enr_upconn_fd(u->conn);
}

/* The batch's answers into the cache (and the fleet's store, which the
 * batch does not wait for): found ones for their lifetime, unknown ids as
 * misses; those the store gave are the host's already. */
static void answers_keep(enr_upstream *u, const enr_batch *b)
{
    for (size_t wi = 0; wi < u->nwants; wi++) {
        want *w = &u->wants[wi];
        const enr_record *r = &b->recs[w->rec];
        enr_cache_val v = {0};
        if (w->shared)
            continue; /* kept by the host already, with the store's lifetime */
        if (w->state == W_FOUND) {
            v.poster = w->has_poster ? b->text.data + w->poster_off : NULL;
            v.poster_len = w->poster_len;
            v.duration = w->duration;
            v.has_duration = w->has_duration;
            enr_up_cache_store(u, w->provider, w->src, b->text.data + r->key_off, r->key_len, &v,
                               w->live);
        } else if (w->state == W_UNKNOWN) {
            v.negative = 1;
            enr_up_cache_store(u, w->provider, w->src, b->text.data + r->key_off, r->key_len, &v,
                               0);
        }
    }
    enr_up_store_flush(u);
}

/* ---- the batch ---- */

size_t enr_upstream_enrich(enr_upstream *u, enr_batch *b, uint64_t deadline_ms)
{
    uint64_t now = enr_mono_ms(), dl, wall = enr_wall_ms();
    size_t degraded = 0;
    unsigned ncalls;

    if (u == NULL || b->n == 0)
        return 0;
    if (scratch_reserve(u, b->n) != 0)
        return b->n; /* no memory: every record keeps its local values */
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
        found = enr_up_lookup(u, b, r, src, wall, &degraded);
        if (found == ENR_CACHE_FRESH)
            continue;
        slot = want_slot(u, b, r->provider, key, r->key_len);
        if (*slot == 0) {
            want *w = &u->wants[u->nwants];
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
    u->st.fds = enr_upconn_fds(u->conn);
    if (u->nwants == 0)
        return degraded;

    dl = now + u->timeout_ms;
    if (deadline_ms < dl)
        dl = deadline_ms;
    /* Planned even when the deadline has passed, so the calls that could
     * not be made are counted (kind deadline) instead of vanishing. */
    enr_up_store_lookup(u, b, wall, dl);
    ncalls = plan_calls(u, b, now);
    for (size_t wi = 0; wi < u->nwants; wi++)
        if (u->wants[wi].call < 0 && u->wants[wi].state == W_PENDING)
            u->wants[wi].state = W_SKIPPED;
    if (ncalls)
        run_calls(u, b, ncalls, dl);
    u->st.fds = enr_upconn_fds(u->conn);

    answers_keep(u, b);
    for (size_t i = 0; i < b->n; i++) {
        enr_record *r = &b->recs[i];
        const want *w;
        if (u->rec_want[i] == 0)
            continue;
        w = &u->wants[u->rec_want[i] - 1];
        switch (w->state) {
        case W_FOUND:
            if (w->has_poster) {
                r->poster_off = w->poster_off;
                r->poster_len = w->poster_len;
            }
            if (w->has_duration && r->duration == 0)
                r->duration = w->duration;
            break;
        case W_UNKNOWN:
            break;
        default: /* failed, skipped (breaker, cap, deadline): a kept answer, if any */
            degraded += enr_up_stale_serve(u, b, r, w->src, wall);
            break;
        }
    }
    return degraded;
}
