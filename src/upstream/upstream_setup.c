/*
 * upstream_setup.c: making and unmaking one worker's upstream client
 * (upstream.h), and its accessors.
 *
 * enr_upstream_new() decides once what every call starts with: the base
 * URL (checked again with the configuration's own check), the header
 * lines and the secret (in a header or the query's first parameter),
 * the breaker and the quota; and it sets up one easy handle per call
 * slot, each with the callbacks that hold a reply to its call's cap
 * (c->cap, set by upstream.c before each transfer): a reply is hostile
 * input, refused for its size unread.  A failed start frees what it
 * made and says why in err.
 *
 * Invariants: the secret is copied into libcurl's header list or
 * u->base, and into u->secret (to scrub libcurl's messages), nowhere
 * else; enr_upstream_free() wipes u->base, u->secret and the calls' URLs
 * before freeing them, and ends the easy handles before the connections
 * they left.
 */
#include "upstream/upstream.h"
#include "upstream/upstream_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "upstream/upsecret.h"
#include "upstream/upstream_url.h"
#include "engine/contract.h"

/* The configuration numbers providers as the engine does (base/sources.h,
 * below the engine): held to it here.  Sources are numbered by the one
 * list (api.h's ENR_API_* are ENR_SOURCE_*). */
_Static_assert(ENR_SOURCE_PROV_YT == ENR_PROV_YT && ENR_SOURCE_PROV_VM == ENR_PROV_VM &&
                   ENR_SOURCE_PROV_DM == ENR_PROV_DM && ENR_SOURCE_PROVIDERS == ENR_PROV_DM + 1,
               "config.h's providers are the engine's");

/* A reply is held whole until it is parsed, so its size is bounded by
 * what the call asked for (c->cap), never by what the upstream sends:
 * beyond it the transfer is aborted and the reply never read. */
static size_t up_write(char *p, size_t size, size_t n, void *ud)
{
    enr_upcall *c = ud;
    size_t len = size * n;

    c->resp_bytes += len;
    if (len > c->cap - c->body.len) {
        c->too_large = 1;
        return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
    }
    enr_buf_append(&c->body, p, len);
    return c->body.oom ? 0 : len;
}

/* The value of header line p[0..len) named name (lower case, with its
 * colon) into out, cut at its size, the line's end (CR LF) left out. */
static void keep_header(const char *p, size_t len, const char *name, char *out, size_t cap,
                        size_t *out_len)
{
    size_t n = strlen(name);

    if (len <= n || strncasecmp(p, name, n) != 0)
        return;
    p += n;
    len -= n;
    while (len > 0 && (p[len - 1] == '\r' || p[len - 1] == '\n'))
        len--;
    if (len > cap)
        len = cap;
    memcpy(out, p, len);
    *out_len = len;
}

/* A Content-Length over the cap refuses the reply before its body; a
 * Retry-After is kept for call_done (a 429 or 503 pauses the host). */
static size_t up_header(char *p, size_t size, size_t n, void *ud)
{
    static const char cl[] = "content-length:", ra[] = "retry-after:";
    enr_upcall *c = ud;
    const enr_api *api = enr_api_get(c->src); /* its rate limit's headers */
    size_t len = size * n, i = sizeof(cl) - 1;

    c->resp_bytes += len;
    if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) { /* a new response: forget the last one's */
        c->has_retry_after = 0;
        c->h_retry_after_len = c->h_remaining_len = c->h_reset_len = 0;
    }
    keep_header(p, len, "retry-after:", c->h_retry_after, sizeof c->h_retry_after,
                &c->h_retry_after_len);
    if (api->remaining_header != NULL)
        keep_header(p, len, api->remaining_header, c->h_remaining, sizeof c->h_remaining,
                    &c->h_remaining_len);
    if (api->reset_header != NULL)
        keep_header(p, len, api->reset_header, c->h_reset, sizeof c->h_reset, &c->h_reset_len);
    if (len > sizeof(ra) - 1 && strncasecmp(p, ra, sizeof(ra) - 1) == 0)
        c->has_retry_after = enr_retry_after_parse(p + sizeof(ra) - 1, len - (sizeof(ra) - 1),
                                                   (int64_t)time(NULL), &c->retry_after_s) == 0;
    if (len > i && strncasecmp(p, cl, i) == 0) {
        unsigned long long v = 0;
        while (i < len && (p[i] == ' ' || p[i] == '\t'))
            i++;
        for (; i < len && p[i] >= '0' && p[i] <= '9'; i++)
            v = v > (ULLONG_MAX - 9) / 10 ? ULLONG_MAX : v * 10 + (unsigned)(p[i] - '0');
        if (v > c->cap) {
            c->too_large = 1;
            return 0; /* aborts the transfer */
        }
    }
    return len;
}

/* ---- set-up ---- */

static int easy_setup(enr_upstream *u, enr_upcall *c)
{
    CURL *e = curl_easy_init();

    c->easy = e;
    c->lids = calloc(u->max_ids, sizeof(*c->lids));
    if (e == NULL || c->lids == NULL)
        return -1;
    if (enr_upconn_easy(u->conn, e) != 0 || curl_easy_setopt(e, CURLOPT_PRIVATE, c) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, up_write) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_WRITEDATA, c) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, up_header) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_HEADERDATA, c) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, u->call_bound_ms) != CURLE_OK)
        return -1;
    return 0;
}

/* The configured URL decides scheme, host and path once; ids only ever
 * go into the query after it, percent-encoded.  The URL was checked by
 * the configuration with the same function (upstream_url.h); checking
 * again here keeps a client built from any other config honest. */
static int base_url(enr_upsource *x, const char *url, char *err, size_t errlen)
{
    char why[256];
    int has_query;

    if (enr_upstream_url_check(url, &has_query, why, sizeof why) != 0) {
        snprintf(err, errlen, "upstream_url: %s", why);
        return -1;
    }
    enr_buf_append(&x->base, url, strlen(url));
    if (has_query)
        enr_buf_putc(&x->base, '&');
    else if (x->base.len && x->base.data[x->base.len - 1] != '?')
        enr_buf_putc(&x->base, '?');
    if (x->base.oom) {
        snprintf(err, errlen, "upstream_url: out of memory");
        return -1;
    }
    return 0;
}

/* A failed allocation, in the one wording the worker logs; -1. */
static int no_memory(char *err, size_t errlen)
{
    snprintf(err, errlen, "upstream: out of memory");
    return -1;
}

/* What a call of a source whose wire is configured (the aggregator's,
 * api.h) carries besides its descriptor's (secret.h): the configured
 * header lines, after its own, and the secret in its header or as the
 * query's first parameter (after base_url).  The secret is copied into
 * libcurl's header list or u->base and into u->secret (to scrub
 * messages), nowhere else. */
static int add_header(enr_upsource *u, const char *line)
{
    struct curl_slist *h = curl_slist_append(u->headers, line);

    if (h == NULL)
        return -1; /* u->headers is intact, freed with u */
    u->headers = h;
    return 0;
}

static int call_extras(enr_upsource *u, const enr_config *c, char *err, size_t errlen)
{
    char line[ENR_UP_HEADER_MAX + ENR_SECRET_MAX];
    int rc = -1;

    for (unsigned i = 0; i < c->upstream_nheaders; i++)
        if (add_header(u, c->upstream_headers[i]) != 0)
            return no_memory(err, errlen);
    if (c->upstream_secret.len == 0)
        return 0;
    u->secret = malloc(c->upstream_secret.len + 1);
    if (u->secret == NULL)
        return no_memory(err, errlen);
    memcpy(u->secret, c->upstream_secret.bytes, c->upstream_secret.len + 1);
    u->secret_len = c->upstream_secret.len;
    line[0] = '\0';
    if (c->upstream_secret_header[0] != '\0') {
        if (enr_secret_header_line(c->upstream_secret_header, u->secret, u->secret_len, line,
                                   sizeof line) != 0)
            snprintf(err, errlen, "upstream_secret_header: the header does not fit");
        else
            rc = add_header(u, line) != 0 ? no_memory(err, errlen) : 0;
    } else if (c->upstream_secret_query[0] != '\0') {
        snprintf(line, sizeof line, "%s=", c->upstream_secret_query);
        if (enr_secret_pct(u->secret, u->secret_len, line, sizeof line) != 0) {
            snprintf(err, errlen, "upstream_secret_query: the parameter does not fit");
        } else {
            enr_buf_append(&u->base, line, strlen(line));
            enr_buf_putc(&u->base, '&');
            rc = u->base.oom ? no_memory(err, errlen) : 0;
        }
    } else {
        rc = 0;
    }
    enr_secret_wipe(line, sizeof line);
    return rc;
}

void enr_upstream_share_quota(enr_upstream *u, enr_sb_quota shared[ENR_UP_SOURCES])
{
    if (u == NULL)
        return;
    for (int i = 0; i < ENR_API_COUNT; i++)
        enr_quota_init(&u->src[i].quota, &shared[i],
                       enr_api_get(i)->rate_paced ? u->max_calls_per_s : 0);
}

static int keep_secret(enr_upsource *x, const char *secret, size_t len)
{
    if (len == 0)
        return 0;
    x->secret = malloc(len + 1);
    if (x->secret == NULL)
        return -1;
    memcpy(x->secret, secret, len);
    x->secret[len] = '\0';
    x->secret_len = len;
    return 0;
}

/* The API's own header lines (its secret's among them) into x's list,
 * and Accept where the API names none; -1: out of memory.  The lines
 * are wiped once copied. */
static int api_headers(enr_upsource *x)
{
    enr_buf h = {0};
    int rc = 0, accept = 0;

    x->api->headers(&h, x->secret, x->secret_len);
    for (size_t o = 0; rc == 0 && !h.oom && o < h.len;) {
        const char *line = h.data + o;
        size_t n = strnlen(line, h.len - o);
        if (n > 0 && o + n < h.len) {
            accept |= strncasecmp(line, "Accept:", 7) == 0;
            rc = add_header(x, line);
        }
        o += n + 1;
    }
    if (rc == 0 && (h.oom || (!accept && add_header(x, "Accept: application/json") != 0)))
        rc = -1;
    if (h.data != NULL)
        enr_secret_wipe(h.data, h.len);
    enr_buf_free(&h);
    return rc;
}

/* A source whose wire is configured (the aggregator's, api.h): its URL
 * checked and followed by '?' or '&', its descriptor's header lines,
 * then the configured ones and its secret (upstream_secret_*). */
static int configured_source(enr_upsource *x, const enr_config *c, char *err, size_t errlen)
{
    if (base_url(x, c->upstream_url, err, errlen) != 0)
        return -1;
    if (api_headers(x) != 0)
        return no_memory(err, errlen);
    if (call_extras(x, c, err, errlen) != 0)
        return -1;
    /* The builder takes the base as a C string (below). */
    enr_buf_putc(&x->base, '\0');
    x->base.len--;
    return x->base.oom ? no_memory(err, errlen) : 0;
}

/* A source: its descriptor (api.h), its base URL as configured (the row
 * builds the rest), its header lines, its secret (the key or the token). */
static int api_source(enr_upsource *x, const enr_config *c, int api, char *err, size_t errlen)
{
    const char *url = enr_config_source_url(c, api);

    x->api = enr_api_get(api);
    if (x->api == NULL) {
        snprintf(err, errlen, "upstream: source %d unknown", api);
        return -1;
    }
    x->title = x->api->title;
    x->max_ids = x->api->max_ids ? x->api->max_ids : c->ids_per_call ? c->ids_per_call : 1;
    if (x->api->wire_configured)
        return configured_source(x, c, err, errlen);
    /* The builders take the base as a C string: its NUL is kept past len
     * (a reused buffer held a longer URL after a reload). */
    enr_buf_append(&x->base, url, strlen(url) + 1);
    x->base.len--;
    if (x->base.oom)
        return no_memory(err, errlen);
    if (keep_secret(x, c->api[api].secret.bytes, c->api[api].secret.len) != 0)
        return no_memory(err, errlen);
    if (x->api->needs_secret && x->secret == NULL) {
        snprintf(err, errlen, "%s: no %s", x->api->name, enr_api_secret_noun(api));
        return -1;
    }
    return api_headers(x) != 0 ? no_memory(err, errlen) : 0;
}

/* The sources the configuration uses, each set up once. */
static int sources_setup(enr_upstream *u, const enr_config *c, char *err, size_t errlen)
{
    for (int p = 0; p < ENR_SOURCE_PROVIDERS; p++)
        u->src_of[p] = p == ENR_PROV_NONE ? ENR_SOURCE_OFF : c->sources[p];
    for (int p = ENR_PROV_YT; p < ENR_SOURCE_PROVIDERS; p++) {
        int a = u->src_of[p];
        enr_upsource *x;
        if (a < 0 || a >= ENR_API_COUNT)
            continue;
        x = &u->src[a];
        if (x->in_use)
            continue;
        x->in_use = 1;
        enr_breaker_init(&x->br, c->breaker_failures, c->breaker_cooldown_ms);
        enr_breaker_set_window(&x->br, c->breaker_window, c->breaker_failure_ratio);
        u->st.breaker_state[a] = ENR_BREAKER_CLOSED;
        if (api_source(x, c, a, err, errlen) != 0)
            return -1;
        if (x->max_ids > u->max_ids)
            u->max_ids = x->max_ids;
    }
    for (int i = 0; i < ENR_API_COUNT; i++)
        enr_quota_init(&u->src[i].quota, NULL, enr_api_get(i)->rate_paced ? u->max_calls_per_s : 0);
    return 0;
}

/* The source in use whose connections a HEAD of its URL warms (api.h:
 * the aggregator's, the one such), or NULL.  The providers' APIs get no
 * warm-up request: YouTube counts every request against the day's quota. */
static const enr_upsource *head_warmed(const enr_upstream *u)
{
    for (int i = 0; i < ENR_API_COUNT; i++)
        if (u->src[i].in_use && u->src[i].api->head_warmed)
            return &u->src[i];
    return NULL;
}

/* What a warm-up asks for: its URL with the query every call carries (a
 * secret parameter included) but no ids; NULL when x is none. */
static char *warm_url(const enr_upsource *x)
{
    size_t n;

    if (x == NULL)
        return NULL;
    n = x->base.len;
    while (n > 0 && (x->base.data[n - 1] == '&' || x->base.data[n - 1] == '?'))
        n--;
    return strndup(x->base.data, n);
}

void enr_upstream_warm(enr_upstream *u)
{
    enr_upconn_warm(u->conn, ENR_UPSTREAM_WARM_WAIT_MS);
    u->st.fds = enr_upconn_fds(u->conn);
}

enr_upstream *enr_upstream_new(const enr_config *c, enr_cache *cache, char *err, size_t errlen)
{
    enr_upstream *u;
    const enr_upsource *hx;
    char *warm;

    if (errlen)
        err[0] = '\0';
    if (!enr_config_enriches(c))
        return NULL;
    if (enr_curl_load(err, errlen) != 0)
        return NULL;
    u = calloc(1, sizeof(*u));
    if (u == NULL) {
        no_memory(err, errlen);
        return NULL;
    }
    u->timeout_ms = c->upstream_timeout_ms;
    u->ncalls_max = c->max_calls_per_batch ? c->max_calls_per_batch : 1;
    u->max_detached = c->upstream_max_connections ? c->upstream_max_connections : 1;
    /* max_calls_per_batch counts per source. */
    u->nslots = u->ncalls_max * ENR_API_COUNT + u->max_detached;
    u->call_bound_ms = (long)c->upstream_connect_timeout_ms + (long)c->upstream_timeout_ms;
    for (int i = 0; i < ENR_API_COUNT; i++)
        u->ttl_s[i] = enr_config_source_ttl(c, i);
    u->max_stale_s = c->cache_max_stale_s;
    u->cache_neg_ttl_s = c->cache_negative_ttl_s;
    u->cache_live_ttl_s = c->cache_live_ttl_s;
    u->max_calls_per_s = c->upstream_max_calls_per_s;
    if (getrandom(&u->seed, sizeof(u->seed), GRND_NONBLOCK) != (ssize_t)sizeof(u->seed))
        u->seed = enr_mono_ms() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();

    if (sources_setup(u, c, err, errlen) != 0)
        goto fail;
    u->cache = cache;
    /* The fleet's store, when one is set: connected in idle time. */
    u->store = enr_store_new(c, err, errlen);
    if (u->store == NULL && err[0] != '\0')
        goto fail;
    if (u->store != NULL && (u->sbatch = enr_store_batch_new()) == NULL) {
        no_memory(err, errlen);
        goto fail;
    }
    u->calls = calloc(u->nslots, sizeof(*u->calls));
    u->batch = calloc(u->ncalls_max * ENR_API_COUNT, sizeof(*u->batch));
    if (u->calls == NULL || u->batch == NULL) {
        no_memory(err, errlen);
        goto fail;
    }
    hx = head_warmed(u);
    warm = warm_url(hx);
    if (hx != NULL && warm == NULL) {
        no_memory(err, errlen);
        goto fail;
    }
    u->conn = enr_upconn_new(c, hx != NULL ? hx->headers : NULL, warm, err, errlen);
    if (warm != NULL) {
        enr_secret_wipe(warm, strlen(warm));
        free(warm);
    }
    if (u->conn == NULL)
        goto fail;
    for (unsigned i = 0; i < u->nslots; i++)
        if (easy_setup(u, &u->calls[i]) != 0) {
            snprintf(err, errlen, "upstream: curl_easy_setopt failed");
            goto fail;
        }
    return u;
fail:
    enr_upstream_free(u);
    return NULL;
}

static void source_free(enr_upsource *x)
{
    curl_slist_free_all(x->headers); /* an API's may hold the token */
    if (x->base.data != NULL)        /* it may hold the secret (upstream_secret_query) */
        enr_secret_wipe(x->base.data, x->base.len);
    enr_buf_free(&x->base);
    if (x->secret != NULL)
        enr_secret_wipe(x->secret, x->secret_len);
    free(x->secret);
}

void enr_upstream_free(enr_upstream *u)
{
    if (u == NULL)
        return;
    for (unsigned i = 0; u->calls && i < u->nslots; i++) {
        enr_upcall *c = &u->calls[i];
        if (c->easy) {
            if (c->active)
                enr_upconn_remove(u->conn, c->easy);
            curl_easy_cleanup(c->easy);
        }
        if (c->url.data != NULL) /* may hold the secret (a query parameter) */
            enr_secret_wipe(c->url.data, c->url.len);
        enr_buf_free(&c->url);
        enr_buf_free(&c->body);
        enr_buf_free(&c->idtext);
        free(c->lids);
    }
    /* After the easy handles: it closes the connections they left. */
    enr_upconn_free(u->conn);
    for (int i = 0; i < ENR_API_COUNT; i++)
        source_free(&u->src[i]);
    free(u->calls);
    free(u->batch);
    free(u->wants);
    free(u->rec_want);
    free(u->table);
    free(u->order);
    free(u->rids);
    enr_buf_free(&u->posters);
    enr_store_free(u->store);
    enr_store_batch_free(u->sbatch);
    free(u);
}

unsigned enr_upstream_fds(const enr_upstream *u)
{
    return u ? enr_upconn_fds(u->conn) : 0;
}

const enr_upstream_stats *enr_upstream_stats_of(const enr_upstream *u)
{
    return &u->st;
}
