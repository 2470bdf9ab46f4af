/*
 * upwarm.c: the connections one worker opens ahead of batches (upconn.h,
 * upconn_int.h), so that a batch, whose deadline covers one round trip,
 * never waits for a handshake.
 *
 * At start and whenever the upstream has closed one (every N requests,
 * in the incident this service exists for), a wave of warm-ups opens
 * fresh connections that stay in curl's cache for the next batch.  The
 * aggregator's warm-up is a HEAD of the configured URL.  An API's is a
 * TCP + TLS handshake and no request (YouTube counts every request
 * against the day's quota): the transfer is ended by its pre-request
 * callback once connected, and curl keeps a connection ended that way
 * only when it is multiplexed, so the APIs are spoken to over HTTP/2
 * (offered by ALPN), which also carries a batch's calls to one API on
 * one connection.
 *
 * An API that speaks HTTP/1.1 alone (an egress proxy terminating TLS, an
 * edge without h2) needs a connection per call of a batch, and curl
 * keeps none of those handshakes: a wave of them that all succeeded and
 * left no connection, or an answer over HTTP/1.1, says so.  Its warm-ups
 * are then HEADs of the origin's root with none of our headers (no key,
 * no token, no API method: nothing a provider counts against a quota),
 * and it keeps enr_upconn_warm_target()'s connections: one a call of a
 * batch and a spare.  An answer over HTTP/2 turns it back.
 *
 * Invariants: per origin, one wave at a time, of at most its target less
 * the connections open; a wave that left no more connections than it
 * found backs off (1 s doubling to 30 s) before the next.
 */
#include "upstream/upconn.h"
#include "upstream/upconn_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "base/clock.h"
#include "base/log.h"

#define UPCONN_WARM_BACKOFF_MIN_MS 1000
#define UPCONN_WARM_BACKOFF_MAX_MS 30000
/* An API's warm connections over HTTP/2: one carries the calls
 * (multiplexed), one is ready for when the API ends the first (nginx,
 * after keepalive_requests streams).  Over HTTP/1.1: enr_upconn_warm_target. */
#define UPCONN_API_WARM 2u

static size_t discard(char *ptr, size_t size, size_t n, void *ud)
{
    (void)ptr;
    (void)ud;
    return size * n;
}

/* An API's warm-up ends here, connected, before its request is written. */
static int no_request(void *ud, char *ip, char *local_ip, int port, int local_port)
{
    (void)ud;
    (void)ip;
    (void)local_ip;
    (void)port;
    (void)local_port;
    return CURL_PREREQFUNC_ABORT;
}

/* An API's warm-up as its origin needs it now: over HTTP/2 a handshake
 * ended before its request (no_request); over HTTP/1.1, where curl keeps
 * no connection ended that way, a HEAD of the origin's root with no
 * header of ours: no key, no token, no API method, so no provider counts
 * it against a quota (docs/upstream.md). */
static int warm_api_mode(enr_upconn *p, enr_upwarm *w)
{
    const enr_uporigin *o = &p->org[w->src];
    int head = o->h1 && o->root != NULL;

    if (curl_easy_setopt(w->easy, CURLOPT_URL,
                         head ? o->root : enr_config_source_url(p->cfg, w->src)) != CURLE_OK ||
        curl_easy_setopt(w->easy, CURLOPT_PREREQFUNCTION, head ? NULL : no_request) != CURLE_OK ||
        curl_easy_setopt(w->easy, CURLOPT_NOBODY, head ? 1L : 0L) != CURLE_OK)
        return -1;
    w->as_head = head;
    return 0;
}

static int warm_setup(enr_upconn *p, enr_upwarm *w, int src)
{
    /* The whole warm-up, its request included, within the set-up bound
     * and one batch deadline. */
    long total = (long)p->cfg->upstream_connect_timeout_ms + (long)p->cfg->upstream_timeout_ms;

    w->src = src;
    w->easy = curl_easy_init();
    if (w->easy == NULL || enr_upconn_easy(p, w->easy) != 0 ||
        enr_upconn_source(p, w->easy, src) != 0 ||
        curl_easy_setopt(w->easy, CURLOPT_FRESH_CONNECT, 1L) != CURLE_OK ||
        curl_easy_setopt(w->easy, CURLOPT_TIMEOUT_MS, total) != CURLE_OK ||
        curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, discard) != CURLE_OK ||
        curl_easy_setopt(w->easy, CURLOPT_ERRORBUFFER, w->errbuf) != CURLE_OK)
        return -1;
    if (!p->org[src].head_warmed)
        return curl_easy_setopt(w->easy, CURLOPT_HTTPHEADER, NULL) != CURLE_OK
                   ? -1
                   : warm_api_mode(p, w);
    return curl_easy_setopt(w->easy, CURLOPT_URL, p->warm_url) != CURLE_OK ||
                   curl_easy_setopt(w->easy, CURLOPT_NOBODY, 1L) != CURLE_OK
               ? -1
               : 0;
}

/* scheme://host:port/ of url, nothing else of it (malloc'd), or NULL. */
static char *url_root(const char *url)
{
    CURLU *h = curl_url();
    char *out = NULL;

    if (h == NULL)
        return NULL;
    if (curl_url_set(h, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_set(h, CURLUPART_USER, NULL, 0) != CURLUE_OK ||
        curl_url_set(h, CURLUPART_PASSWORD, NULL, 0) != CURLUE_OK ||
        curl_url_set(h, CURLUPART_PATH, "/", 0) != CURLUE_OK ||
        curl_url_set(h, CURLUPART_QUERY, NULL, 0) != CURLUE_OK ||
        curl_url_set(h, CURLUPART_FRAGMENT, NULL, 0) != CURLUE_OK ||
        curl_url_get(h, CURLUPART_URL, &out, 0) != CURLUE_OK)
        out = NULL;
    curl_url_cleanup(h);
    return out;
}

unsigned enr_upconn_warm_target(unsigned warm_cfg, int h1, unsigned max_calls, unsigned max_conns)
{
    unsigned n;

    if (warm_cfg == 0)
        return 0;
    if (!h1)
        return warm_cfg < UPCONN_API_WARM ? warm_cfg : UPCONN_API_WARM;
    /* One connection a call, and one spare for the connection the API
     * ends (keepalive_requests) while its replacement is being made;
     * never past the connections the origin may have. */
    n = max_calls < UINT_MAX ? max_calls + 1 : max_calls;
    return n < max_conns ? n : max_conns;
}

/* The warm connections of each origin: upstream_warm_connections for
 * the aggregator (when it is a source); for an API in use, what
 * enr_upconn_warm_target says for HTTP/2 until the API is seen to speak
 * HTTP/1.1 alone, and handles for the HTTP/1.1 target. */
static void warm_counts(enr_upconn *p, const enr_config *c)
{
    for (int src = 0; src < ENR_API_COUNT; src++)
        if (p->org[src].head_warmed)
            p->org[src].nwarm = p->org[src].nslots = p->warm_url ? c->upstream_warm_connections : 0;
    for (int pr = 1; pr < ENR_SOURCE_PROVIDERS; pr++) {
        int a = c->sources[pr];
        if (a >= 0 && a < ENR_API_COUNT && !p->org[a].head_warmed) {
            enr_uporigin *o = &p->org[a];
            o->nwarm = enr_upconn_warm_target(c->upstream_warm_connections, 0,
                                              c->max_calls_per_batch, c->upstream_max_connections);
            o->nslots = enr_upconn_warm_target(c->upstream_warm_connections, 1,
                                               c->max_calls_per_batch, c->upstream_max_connections);
            if (o->nslots < o->nwarm)
                o->nslots = o->nwarm;
        }
    }
    p->nwarm = 0;
    for (int src = 0; src < ENR_API_COUNT; src++)
        p->nwarm += p->org[src].nslots;
}

/* What an API's origin speaks now: h1 (1, an answer over HTTP/1.1, or
 * handshakes curl did not keep) or HTTP/2 (0).  Its warm target follows;
 * a change starts the next wave at once. */
static void origin_speaks(enr_upconn *p, int src, int h1)
{
    enr_uporigin *o = &p->org[src];
    const enr_config *c = p->cfg;

    /* Over plain http (loopback, a test's: no key goes to another host in
     * clear) a cold connection costs TCP's round trip, not TLS's two: its
     * warm-ups stay what they were, and send nothing. */
    if (o->head_warmed || o->nslots == 0 || o->h1 == h1 || o->root == NULL)
        return;
    o->h1 = h1;
    o->nwarm = enr_upconn_warm_target(c->upstream_warm_connections, h1, c->max_calls_per_batch,
                                      c->upstream_max_connections);
    if (o->nwarm > o->nslots)
        o->nwarm = o->nslots;
    o->next_ms = 0;
    o->backoff_ms = UPCONN_WARM_BACKOFF_MIN_MS;
    enr_log(ENR_LOG_INFO, "upstream API connections", "source=%s http=%s warm=%u",
            enr_api_get(src)->name, h1 ? "1.1" : "2", o->nwarm);
}

void enr_upconn_answered(enr_upconn *p, CURL *e, int src)
{
    long v = 0;

    if (curl_easy_getinfo(e, CURLINFO_HTTP_VERSION, &v) != CURLE_OK || v == 0)
        return; /* no answer came */
    origin_speaks(p, src, v != CURL_HTTP_VERSION_2_0 && v != CURL_HTTP_VERSION_3);
}

static void warm_done(enr_upconn *p, enr_upwarm *w, CURLcode rc)
{
    enr_uporigin *o = &p->org[w->src];

    curl_multi_remove_handle(p->multi, w->easy);
    w->running = 0;
    o->running--;
    /* An API's warm-up ends connected, by its own callback (over
     * HTTP/1.1: answered, whatever the status of its HEAD). */
    if (!o->head_warmed && rc == CURLE_ABORTED_BY_CALLBACK)
        rc = CURLE_OK;
    if (rc != CURLE_OK) {
        /* Whatever went wrong, the next batch will meet it too and count
         * it; here it only spaces the warm-ups out. */
        enr_upconn_explain(p, w->easy, rc, w->errbuf);
        enr_log(ENR_LOG_DEBUG, "upstream warm-up failed", "code=%d backoff_ms=%u", (int)rc,
                o->backoff_ms);
        o->wave_failed = 1;
    }
    if (o->running > 0)
        return;
    /* Handshakes that all succeeded and left no connection: curl closed
     * them, as it does an HTTP/1.1 one ended before its request.  The
     * API speaks HTTP/1.1 alone (ALPN declined h2): warmed with HEADs. */
    if (!o->head_warmed && !o->wave_failed && !o->h1 && o->root != NULL && o->fds <= o->wave_fds) {
        origin_speaks(p, w->src, 1);
        return;
    }
    /* A wave that left no more connections than it found (failed, or an
     * upstream that closes after every answer) is not repeated at once. */
    if (o->wave_failed || o->fds <= o->wave_fds) {
        o->next_ms = enr_mono_ms() + o->backoff_ms;
        o->backoff_ms = o->backoff_ms * 2 > UPCONN_WARM_BACKOFF_MAX_MS ? UPCONN_WARM_BACKOFF_MAX_MS
                                                                       : o->backoff_ms * 2;
    } else {
        o->backoff_ms = UPCONN_WARM_BACKOFF_MIN_MS;
    }
}

/* Starts the wave origin src needs now; the wait before it may, or -1. */
static int maintain_origin(enr_upconn *p, int src, uint64_t now_ms)
{
    enr_uporigin *o = &p->org[src];
    unsigned want;

    if (o->nwarm == 0 || o->running > 0)
        return -1; /* one wave at a time: its end wakes the epoll set */
    if (now_ms < o->next_ms)
        return (int)(o->next_ms - now_ms);
    if (o->fds >= o->nwarm)
        return -1;
    want = o->nwarm - o->fds;
    o->wave_fds = o->fds;
    o->wave_failed = 0;
    for (unsigned i = 0; i < p->nwarm && want > 0; i++) {
        enr_upwarm *w = &p->warms[i];
        if (w->running || w->src != src)
            continue;
        if (!o->head_warmed && w->as_head != (o->h1 && o->root != NULL) && warm_api_mode(p, w) != 0)
            break;
        w->errbuf[0] = '\0';
        if (curl_multi_add_handle(p->multi, w->easy) != CURLM_OK)
            break;
        w->running = 1;
        o->running++;
        o->warmups++;
        want--;
    }
    return -1;
}

static int api_warming(const enr_upconn *p)
{
    for (int src = 0; src < ENR_API_COUNT; src++)
        if (!p->org[src].head_warmed && p->org[src].running > 0)
            return 1;
    return 0;
}

/* No transfer of the caller's runs before its first batch. */
static void none_done(void *ud, CURL *easy, CURLcode rc)
{
    (void)ud;
    (void)easy;
    (void)rc;
}

void enr_upconn_warm(enr_upconn *p, unsigned bound_ms)
{
    uint64_t now = enr_mono_ms(), dl = now + bound_ms;

    /* Maintained again after each wave: the first may find an API that
     * speaks HTTP/1.1 alone, whose HEADs then make its connections. */
    for (;;) {
        (void)enr_upconn_maintain(p, now);
        if (!api_warming(p) || (now = enr_mono_ms()) >= dl)
            break;
        enr_upconn_drive(p, (int)(dl - now), none_done, NULL);
        now = enr_mono_ms();
    }
}

int enr_upconn_maintain(enr_upconn *p, uint64_t now_ms)
{
    int wait = -1;

    for (int src = 0; src < ENR_API_COUNT; src++) {
        int w = maintain_origin(p, src, now_ms);
        if (w >= 0 && (wait < 0 || w < wait))
            wait = w;
    }
    return wait;
}

int enr_upconn_warm_init(enr_upconn *p, const enr_config *c, char *err, size_t errlen)
{
    unsigned k = 0;

    for (int src = 0; src < ENR_API_COUNT; src++) {
        p->org[src].backoff_ms = UPCONN_WARM_BACKOFF_MIN_MS;
        if (!p->org[src].head_warmed &&
            strncasecmp(enr_config_source_url(c, src), "https://", 8) == 0)
            p->org[src].root = url_root(enr_config_source_url(c, src));
    }
    warm_counts(p, c);
    if (p->nwarm == 0)
        return 0;
    p->warms = calloc(p->nwarm, sizeof *p->warms);
    if (p->warms == NULL) {
        snprintf(err, errlen, "upstream: out of memory");
        return -1;
    }
    for (int src = 0; src < ENR_API_COUNT; src++)
        for (unsigned i = 0; i < p->org[src].nslots; i++)
            if (warm_setup(p, &p->warms[k++], src) != 0) {
                snprintf(err, errlen, "upstream: curl_easy_setopt failed");
                return -1;
            }
    return 0;
}

void enr_upconn_warm_free(enr_upconn *p)
{
    for (unsigned i = 0; p->warms && i < p->nwarm; i++) {
        enr_upwarm *w = &p->warms[i];
        if (w->easy == NULL)
            continue;
        if (w->running)
            curl_multi_remove_handle(p->multi, w->easy);
        curl_easy_cleanup(w->easy);
    }
    free(p->warms);
    p->warms = NULL;
    for (int src = 0; src < ENR_API_COUNT; src++)
        if (p->org[src].root != NULL) {
            curl_free(p->org[src].root);
            p->org[src].root = NULL;
        }
}

int enr_upconn_warm_ended(enr_upconn *p, CURL *e, CURLcode rc)
{
    for (unsigned i = 0; i < p->nwarm; i++)
        if (p->warms[i].easy == e) {
            warm_done(p, &p->warms[i], rc);
            return 1;
        }
    return 0;
}
