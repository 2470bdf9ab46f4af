/*
 * upanswer.c: how one call of the upstream client ended (upstream_int.h):
 * its transfer's code and HTTP status made a failure kind (enum
 * enr_up_fail) or an answer to read, the answer read by its source's
 * reader into the call's wants (or, for a call that outlived its batch,
 * into the cache), and the outcome counted and told to the source's
 * breaker and pause.
 *
 * A reply is hostile input: it is held only up to what its call can
 * legitimately need (enr_upstream_reply_cap(), checked on Content-Length
 * and while receiving by upstream_setup.c's callbacks) and read by the
 * bounded reader of its source (upstream_reply.c, api_*.c); a larger one
 * fails the call as too_large, unread.
 *
 * Invariants: every call is counted once, by how it ended: found and
 * unknown per id, a failure per call by its kind; a kind whose row
 * (upfail.h) says the breaker does not count it (a deadline that left no
 * time, a budget spent) never reaches the breaker, and a probe it held
 * is given back.  A call's units of the day's budget are
 * settled, spent or given back, before its answer is read.
 */
#include "upstream/upstream.h"
#include "upstream/upstream_int.h"

#include <string.h>

#include "upstream/breaker.h"
#include "upstream/cache.h"
#include "upstream/upconn.h"
#include "upstream/quota.h"
#include "upstream/upsecret.h"
#include "upstream/curlapi.h"
#include "upstream/upstream_reply.h"
#include "base/log.h"

/* ---- counting ---- */

void enr_up_count_failure(enr_upstream *u, enr_upcall *c, int kind, uint64_t now)
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

void enr_up_call_failed(enr_upstream *u, enr_upcall *c, int kind, uint64_t now)
{
    enr_up_count_failure(u, c, kind, now);
    for (size_t i = 0; i < c->n; i++)
        u->wants[u->order[c->first + i]].state = ENR_UPW_FAILED;
}

/* ---- reading ---- */

/* A 200 body of c's source, read by its reader (api.h, upstream_reply.h). */
static int parse_reply(const enr_upstream *u, const enr_upcall *c, enr_reply_id *ids,
                       enr_buf *arena)
{
    return u->src[c->src].api->parse(c->body.data, c->body.len, ids, c->n, u->seed, arena);
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
        enr_upwant *w = &u->wants[u->order[c->first + i]];
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
        w->state = (w->has_poster || w->has_duration) ? ENR_UPW_FOUND : ENR_UPW_UNKNOWN;
        if (w->state == ENR_UPW_FOUND)
            u->st.src[c->src].found++;
        else
            u->st.src[c->src].unknown++;
    }
    return 0;
}

/* How a transfer ended, as a failure kind, or -1 for a 200 to read. */
static int outcome(enr_upstream *u, enr_upcall *c, CURLcode rc, uint64_t now)
{
    long status = 0;
    int v;

    enr_up_budget_settle(u, c, enr_up_request_left(c));
    if (rc == CURLE_OK)
        enr_upconn_answered(u->conn, c->easy, c->src);
    if (c->too_large)
        return ENR_UP_F_TOO_LARGE;
    if (rc != CURLE_OK)
        return enr_upconn_fail_kind(rc);
    if (curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
        return ENR_UP_F_STATUS;
    v = enr_up_classify(u, c, status, now);
    if (v == ENR_API_V_OK)
        return status == 200 ? -1 : ENR_UP_F_STATUS;
    /* A pause the answer asks for, else the provider's failure
     * (a request refused as malformed too: logged below). */
    return v >= 0 && v < ENR_UP_NFAILS && enr_up_fail_rows[v].pause ? v : ENR_UP_F_STATUS;
}

/* A failed call, counted; a provider that asked for a pause gets it,
 * host-wide (quota.h). */
static void call_ended_badly(enr_upstream *u, enr_upcall *c, CURLcode rc, int kind, uint64_t now)
{
    if (enr_up_fail_rows[kind].pause && !u->src[c->src].api->pause_by_status) {
        enr_up_pause(u, c, kind, now);
    } else if (enr_up_fail_rows[kind].pause) {
        /* The aggregator's (api.h): its Retry-After, whatever else it says. */
        long status = 0;
        (void)curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
        enr_quota_pause(&u->src[c->src].quota, now, c->has_retry_after ? c->retry_after_s : 0,
                        status, kind);
    } else if (kind == ENR_UP_F_STATUS && c->why.verdict == ENR_API_V_CONFIG) {
        enr_log(ENR_LOG_WARN, "the API refused the request as malformed", "source=%s reason=%s",
                u->src[c->src].api->name, c->why.reason[0] ? c->why.reason : "-");
    }
    enr_upconn_explain(u->conn, c->easy, rc, c->errbuf);
}

/* ---- the end of a call ---- */

void enr_up_call_done(enr_upstream *u, enr_upcall *c, enr_batch *b, CURLcode rc, uint64_t now)
{
    int kind = outcome(u, c, rc, now), prev;

    if (kind < 0 && call_parse(u, c, b) != 0)
        kind = ENR_UP_F_BODY;
    if (kind >= 0) {
        call_ended_badly(u, c, rc, kind, now);
        enr_up_call_failed(u, c, kind, now);
        return;
    }
    prev = enr_breaker_success(&u->src[c->src].br, now);
    enr_up_breaker_note(u, c->src, prev, "success");
}

void enr_up_late_done(enr_upstream *u, enr_upcall *c, CURLcode rc, uint64_t now)
{
    int kind = outcome(u, c, rc, now), prev;

    enr_buf_reset(&u->posters);
    if (kind < 0 && (c->idtext.oom || parse_reply(u, c, c->lids, &u->posters) != 0))
        kind = ENR_UP_F_BODY;
    if (kind >= 0) {
        call_ended_badly(u, c, rc, kind, now);
        enr_up_count_failure(u, c, kind, now);
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
