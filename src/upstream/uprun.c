/*
 * uprun.c: a batch's calls run (upstream_int.h), every call of every
 * source concurrently under ONE deadline, and the calls that outlive
 * their batch.
 *
 * A call still running at the deadline is detached, not killed, when it
 * is still setting its connection up: its records keep their local
 * values in this batch, but the transfer (often a handshake a batch could
 * never wait for) goes on between batches and its answer fills the cache;
 * killing it would close the connection and make the next batch start the
 * same handshake again.  At most upstream_max_connections calls are
 * detached; a batch that needs the room ends the oldest (fresh work
 * first).  A call whose connection died before any byte of the response
 * is retried once, within the same deadline, on a fresh connection.  A
 * call that the deadline left no time for is counted (kind deadline) but
 * is not the upstream's failure, so the breaker never hears of it; nor
 * does it of a detached call ended for room before its request left (its
 * connection still being set up: the path's time ran out, not the
 * provider's), whose budget units are given back.
 *
 * Name lookups run in libcurl's resolver thread, which a removed transfer
 * no longer waits for (CURLOPT_QUICK_EXIT), so a stalled resolver costs a
 * batch its deadline, not the lookup's time.
 *
 * Invariants: between batches only detached calls are attached to the
 * multi handle, and they hold copies of their ids (the batch is gone);
 * ndetached <= max_detached whenever a batch returns; a call's budget units are settled
 * (upsource.c) once per transfer, whichever way it ends.
 */
#include "upstream/upstream.h"
#include "upstream/upstream_int.h"

#include <string.h>

#include "upstream/breaker.h"
#include "upstream/upconn.h"
#include "upstream/curlapi.h"
#include "upstream/upstream_reply.h"
#include "base/clock.h"

#define UP_MAX_BODY ENR_REPLY_BODY_MAX /* no reply is larger, whatever the call asked */
#define UP_RETRY_MIN_MS 2              /* no retry with less time than this left */

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

int enr_up_request_left(const enr_upcall *c)
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
        u->wants[u->order[c->first + i]].state = ENR_UPW_FAILED;
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
        enr_up_budget_settle(u, old, enr_up_request_left(old));
        enr_up_count_failure(u, old,
                             enr_up_request_left(old) ? ENR_UP_F_TIMEOUT : ENR_UP_F_DEADLINE, now);
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

    if (!enr_up_request_left(c))
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
        undetach(u, c);
        enr_up_late_done(u, c, rc, now);
        return;
    }
    x->active--;
    if (died_before_reply(c, rc) && !c->retried && now + UP_RETRY_MIN_MS < x->dl) {
        enr_up_budget_settle(u, c, enr_up_request_left(c));
        c->retried = 1;
        u->st.src[c->src].retries++;
        if (call_start(u, c) == 0) {
            x->active++;
            return;
        }
    }
    enr_up_call_done(u, c, x->b, rc, now);
}

void enr_up_run_calls(enr_upstream *u, enr_batch *b, unsigned ncalls, uint64_t dl)
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
            enr_up_call_failed(u, c, ENR_UP_F_DEADLINE, now);
            continue;
        }
        if (enr_up_call_url(u, c, b) != 0) {
            /* No id of it can be asked: nothing to call, nothing failed
             * (its records are counted as skipped). */
            enr_breaker_release(&u->src[c->src].br);
            continue;
        }
        if ((rc = call_start(u, c)) == -2) {
            enr_up_call_failed(u, c, ENR_UP_F_BUDGET, now); /* not sent: not counted as a call */
            continue;
        }
        u->st.src[c->src].calls++;
        u->st.src[c->src].ids_asked += c->n;
        if (rc != 0) {
            enr_up_call_failed(u, c, ENR_UP_F_CONNECT, now);
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
        enr_up_call_failed(u, c, ENR_UP_F_TIMEOUT, now);
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
