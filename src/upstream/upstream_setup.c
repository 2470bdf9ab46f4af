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
#include "base/secret.h"
#include "base/upstream_url.h"

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

/* A Content-Length over the cap refuses the reply before its body; a
 * Retry-After is kept for call_done (a 429 or 503 pauses the host). */
static size_t up_header(char *p, size_t size, size_t n, void *ud)
{
    static const char cl[] = "content-length:", ra[] = "retry-after:";
    enr_upcall *c = ud;
    size_t len = size * n, i = sizeof(cl) - 1;

    c->resp_bytes += len;
    if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) /* a new response: forget the last one's */
        c->has_retry_after = 0;
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
    c->lids = calloc(u->ids_per_call, sizeof(*c->lids));
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
static int base_url(enr_upstream *u, const char *url, char *err, size_t errlen)
{
    char why[256];
    int has_query;

    if (enr_upstream_url_check(url, &has_query, why, sizeof why) != 0) {
        snprintf(err, errlen, "upstream_url: %s", why);
        return -1;
    }
    enr_buf_append(&u->base, url, strlen(url));
    if (has_query)
        enr_buf_putc(&u->base, '&');
    else if (u->base.len && u->base.data[u->base.len - 1] != '?')
        enr_buf_putc(&u->base, '?');
    if (u->base.oom) {
        snprintf(err, errlen, "upstream_url: out of memory");
        return -1;
    }
    return 0;
}

/* What a call carries besides the ids (secret.h): the configured header
 * lines, and the secret in its header or as the query's first parameter
 * (after base_url).  The secret is copied into libcurl's header list or
 * u->base and into u->secret (to scrub messages), nowhere else. */
static int add_header(enr_upstream *u, const char *line)
{
    struct curl_slist *h = curl_slist_append(u->headers, line);

    if (h == NULL)
        return -1; /* u->headers is intact, freed with u */
    u->headers = h;
    return 0;
}

static int call_extras(enr_upstream *u, const enr_config *c, char *err, size_t errlen)
{
    char line[ENR_UP_HEADER_MAX + ENR_SECRET_MAX];
    int rc = -1;

    line[0] = '\0';
    if (add_header(u, "Accept: application/json") != 0)
        goto oom;
    for (unsigned i = 0; i < c->upstream_nheaders; i++)
        if (add_header(u, c->upstream_headers[i]) != 0)
            goto oom;
    if (c->upstream_secret.len == 0)
        return 0;
    u->secret = malloc(c->upstream_secret.len + 1);
    if (u->secret == NULL)
        goto oom;
    memcpy(u->secret, c->upstream_secret.bytes, c->upstream_secret.len + 1);
    u->secret_len = c->upstream_secret.len;
    if (c->upstream_secret_header[0] != '\0') {
        if (enr_secret_header_line(c->upstream_secret_header, u->secret, u->secret_len, line,
                                   sizeof line) != 0) {
            snprintf(err, errlen, "upstream_secret_header: the header does not fit");
            goto out;
        }
        if (add_header(u, line) != 0)
            goto oom;
    } else if (c->upstream_secret_query[0] != '\0') {
        snprintf(line, sizeof line, "%s=", c->upstream_secret_query);
        if (enr_secret_pct(u->secret, u->secret_len, line, sizeof line) != 0) {
            snprintf(err, errlen, "upstream_secret_query: the parameter does not fit");
            goto out;
        }
        enr_buf_append(&u->base, line, strlen(line));
        enr_buf_putc(&u->base, '&');
        if (u->base.oom)
            goto oom;
    }
    rc = 0;
    goto out;
oom:
    snprintf(err, errlen, "upstream: out of memory");
out:
    enr_secret_wipe(line, sizeof line);
    return rc;
}

void enr_upstream_share_quota(enr_upstream *u, enr_sb_quota *shared)
{
    if (u != NULL)
        enr_quota_init(&u->quota, shared, u->max_calls_per_s);
}

enr_upstream *enr_upstream_new(const enr_config *c, enr_cache *cache, char *err, size_t errlen)
{
    enr_upstream *u;

    if (errlen)
        err[0] = '\0';
    if (c->upstream_url[0] == '\0')
        return NULL;
    if (enr_curl_load(err, errlen) != 0)
        return NULL;
    u = calloc(1, sizeof(*u));
    if (u == NULL) {
        snprintf(err, errlen, "upstream: out of memory");
        return NULL;
    }
    u->timeout_ms = c->upstream_timeout_ms;
    u->ids_per_call = c->ids_per_call ? c->ids_per_call : 1;
    u->ncalls_max = c->max_calls_per_batch ? c->max_calls_per_batch : 1;
    u->max_detached = c->upstream_max_connections ? c->upstream_max_connections : 1;
    u->nslots = u->ncalls_max + u->max_detached;
    u->call_bound_ms = (long)c->upstream_connect_timeout_ms + (long)c->upstream_timeout_ms;
    u->cache_ttl_s = c->cache_ttl_s;
    u->cache_neg_ttl_s = c->cache_negative_ttl_s;
    enr_breaker_init(&u->br, c->breaker_failures, c->breaker_cooldown_ms);
    enr_breaker_set_window(&u->br, c->breaker_window, c->breaker_failure_ratio);
    if (getrandom(&u->seed, sizeof(u->seed), GRND_NONBLOCK) != (ssize_t)sizeof(u->seed))
        u->seed = enr_mono_ms() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();

    if (base_url(u, c->upstream_url, err, errlen) != 0 || call_extras(u, c, err, errlen) != 0)
        goto fail;
    u->max_calls_per_s = c->upstream_max_calls_per_s;
    enr_quota_init(&u->quota, NULL, u->max_calls_per_s);
    u->cache = cache;
    u->calls = calloc(u->nslots, sizeof(*u->calls));
    u->batch = calloc(u->ncalls_max, sizeof(*u->batch));
    if (u->headers == NULL || u->calls == NULL || u->batch == NULL) {
        snprintf(err, errlen, "upstream: out of memory");
        goto fail;
    }
    {
        /* A warm-up asks for the URL every call starts with, its query
         * (a secret parameter included) but no ids. */
        size_t n = u->base.len;
        char *warm;
        while (n > 0 && (u->base.data[n - 1] == '&' || u->base.data[n - 1] == '?'))
            n--;
        warm = strndup(u->base.data, n);
        if (warm == NULL) {
            snprintf(err, errlen, "upstream: out of memory");
            goto fail;
        }
        u->conn = enr_upconn_new(c, u->headers, warm, err, errlen);
        enr_secret_wipe(warm, n);
        free(warm);
    }
    if (u->conn == NULL)
        goto fail;
    for (unsigned i = 0; i < u->nslots; i++)
        if (easy_setup(u, &u->calls[i]) != 0) {
            snprintf(err, errlen, "upstream: curl_easy_setopt failed");
            goto fail;
        }
    u->st.breaker_state = ENR_BREAKER_CLOSED;
    return u;
fail:
    enr_upstream_free(u);
    return NULL;
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
        if (c->url.data != NULL) /* may hold the secret (upstream_secret_query) */
            enr_secret_wipe(c->url.data, c->url.len);
        enr_buf_free(&c->url);
        enr_buf_free(&c->body);
        enr_buf_free(&c->idtext);
        free(c->lids);
    }
    /* After the easy handles: it closes the connections they left. */
    enr_upconn_free(u->conn);
    curl_slist_free_all(u->headers);
    if (u->base.data != NULL) /* it may hold the secret (upstream_secret_query) */
        enr_secret_wipe(u->base.data, u->base.len);
    enr_buf_free(&u->base);
    if (u->secret != NULL)
        enr_secret_wipe(u->secret, u->secret_len);
    free(u->secret);
    free(u->calls);
    free(u->batch);
    free(u->wants);
    free(u->rec_want);
    free(u->table);
    free(u->order);
    free(u->rids);
    enr_buf_free(&u->posters);
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
