/*
 * fuzz_config.c: libFuzzer target on the configuration parser
 * (enr_config_parse, the text half of enr_config_load).
 *
 * Beyond "no crash, no sanitizer report" it checks the parser's promises
 * on every input: an accepted config has every value inside the bounds
 * conf/enrichd.conf and config.c document and satisfies the cross-key
 * rules; a rejected one leaves the caller's config byte for byte as it
 * was (a bad file on HUP never replaces a good one) and says
 * "SOURCE:LINE: key: problem" with a line that exists.  The bounds are
 * written out again here on purpose: a typo in the key table must show.
 */
#include <arpa/inet.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "ops/confcheck.h"
#include "upstream/upstream_url.h"

#define SRC "fuzz.conf"

static void check_uint(unsigned v, unsigned lo, unsigned hi)
{
    if (v < lo || v > hi)
        abort();
}

static void check_str(const char *s, size_t cap)
{
    if (memchr(s, '\0', cap) == NULL)
        abort();
}

/* An accepted socket address: an absolute unix path that fits sun_path,
 * or ADDRESS:PORT with a literal IPv4 or [IPv6] address and a port of
 * 1..65535 in digits; loopback_only for the status socket. */
static void check_listen(const char *v, int loopback_only)
{
    char host[64];
    const char *colon, *h = v;
    size_t hl;
    unsigned long port = 0;
    unsigned char a[16];

    check_str(v, ENR_PATH_MAX);
    if (v[0] == '/') {
        if (strlen(v) >= 108) /* sun_path */
            abort();
        return;
    }
    if (v[0] == '[') {
        colon = strchr(v, ']');
        if (colon == NULL || colon[1] != ':')
            abort();
        h = v + 1;
        hl = (size_t)(colon - h);
        colon++;
    } else {
        colon = strrchr(v, ':');
        if (colon == NULL)
            abort();
        hl = (size_t)(colon - v);
    }
    if (hl == 0 || hl >= sizeof host)
        abort();
    memcpy(host, h, hl);
    host[hl] = '\0';
    if (inet_pton(v[0] == '[' ? AF_INET6 : AF_INET, host, a) != 1)
        abort();
    if (loopback_only &&
        (v[0] == '[' ? memcmp(a, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\1", 16) != 0 : a[0] != 127))
        abort();
    for (const char *p = colon + 1; *p; p++) {
        if (*p < '0' || *p > '9')
            abort();
        port = port * 10 + (unsigned long)(*p - '0');
        if (port > 65535)
            abort();
    }
    if (port == 0 || colon[1] == '\0')
        abort();
}

static void check_ratio(double d)
{
    if (!(d >= 0.0 && d <= 1.0))
        abort();
}

static void check_ok(const enr_config *c)
{
    check_listen(c->listen, 0);
    check_listen(c->status_listen, 1);
    if (strcmp(c->listen, c->status_listen) == 0)
        abort();
    if (c->listen_mode > 0777)
        abort();
    check_str(c->listen_group, sizeof c->listen_group);
    if (c->listen_backlog < 1 || c->listen_backlog > 65535)
        abort();
    check_uint(c->workers, 1, 256);
    check_uint(c->max_requests, 0, 100000000);
    check_uint(c->max_requests_jitter, 0, c->max_requests);
    check_uint(c->rss_soft_mb, 0, 65536);
    check_uint(c->rss_hard_mb, 0, 65536);
    if (c->rss_hard_mb && c->rss_soft_mb >= c->rss_hard_mb)
        abort();
    check_uint(c->fd_soft, 0, 1048576);
    check_uint(c->fd_hard, 0, 1048576);
    if (c->fd_hard && c->fd_soft >= c->fd_hard)
        abort();
    check_uint(c->request_timeout_ms, 100, 600000);
    check_uint(c->drain_timeout_ms, 1, 3600000);
    if (c->max_body_bytes < 1024 || c->max_body_bytes > (1ull << 30))
        abort();
    check_uint(c->max_records, 0, 10000000);
    if (c->max_output_bytes < 4096 || c->max_output_bytes > (1ull << 30))
        abort();
    check_uint(c->kill_grace_ms, 1, 600000);
    check_str(c->upstream_url, sizeof c->upstream_url);
    if (c->upstream_url[0] != '\0' && strncmp(c->upstream_url, "http://", 7) != 0 &&
        strncmp(c->upstream_url, "https://", 8) != 0)
        abort();
    check_uint(c->upstream_timeout_ms, 1, c->request_timeout_ms - 1);
    check_uint(c->ids_per_call, 1, 10000);
    check_uint(c->max_calls_per_batch, 1, 1000);
    check_uint(c->upstream_max_connections, 1, 1000);
    check_uint(c->cache_entries, 0, 100000000);
    if (c->cache_bytes > (1ull << 34))
        abort();
    if (c->upstream_url[0] != '\0' && c->rss_soft_mb &&
        c->cache_bytes >= (size_t)c->rss_soft_mb << 20)
        abort();
    check_uint(c->cache_ttl_s, 0, 31536000);
    check_uint(c->cache_negative_ttl_s, 0, 31536000);
    check_uint(c->cache_live_ttl_s, 0, 31536000);
    check_uint(c->breaker_failures, 1, 1000000);
    check_uint(c->breaker_cooldown_ms, 1, 3600000);
    check_uint(c->breaker_window, 0, 128);
    check_ratio(c->breaker_failure_ratio);
    if (c->breaker_window > 0 && !(c->breaker_failure_ratio > 0))
        abort(); /* the ratio rule would open on successes */
    check_uint(c->upstream_max_calls_per_s, 0, 1000000);
    check_uint(c->upstream_nheaders, 0, ENR_UP_HEADERS_MAX);
    for (unsigned i = 0; i < c->upstream_nheaders; i++) {
        const char *h = c->upstream_headers[i];
        if (strchr(h, ':') == NULL || strpbrk(h, "\r\n") != NULL || h[0] == ':')
            abort(); /* a header line that could split the request */
    }
    if (c->upstream_secret.bytes != NULL || c->upstream_secret.len != 0)
        abort(); /* parsing never reads a secret (the daemon does, config_cred.c) */
    if (c->upstream_secret_file[0] && c->upstream_secret_credential[0])
        abort(); /* one source */
    if ((c->upstream_secret_file[0] || c->upstream_secret_credential[0]) !=
        (c->upstream_secret_header[0] || c->upstream_secret_query[0]))
        abort(); /* a source exactly when a place is set */
    check_uint(c->slow_request_ms, 0, 3600000);
    check_uint(c->health_window_s, 1, 60);
    check_ratio(c->health_max_5xx_ratio);
    check_ratio(c->health_max_degraded_ratio);
    check_uint(c->health_max_p99_ms, 1, 3600000);
    check_uint(c->min_ready_workers, 0, c->workers);
    if (strcmp(c->source, SRC) != 0)
        abort();
}

/* "SOURCE:LINE: " with LINE a line of the input (0: the text as a whole),
 * or a line of the built-in defaults, which must never fail. */
static void check_err(const char *err, const uint8_t *data, size_t size)
{
    size_t lines = 1, n = strlen(SRC);
    unsigned long line = 0;
    const char *p;

    if (err[0] == '\0' || strncmp(err, SRC ":", n + 1) != 0)
        abort();
    p = err + n + 1;
    if (*p < '0' || *p > '9')
        abort();
    for (; *p >= '0' && *p <= '9'; p++)
        line = line * 10 + (unsigned long)(*p - '0');
    if (p[0] != ':' || p[1] != ' ' || p[2] == '\0')
        abort();
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    if (line > lines)
        abort();
}

/* -T: every line a key set names a line of the input, and the dump is a
 * configuration that reads back to one that dumps the same. */
static void check_dump(const enr_config *c, const uint8_t *data, size_t size)
{
    static char out1[1 << 16], out2[1 << 16];
    static enr_config again;
    char err[512];
    unsigned lines = 1;
    FILE *f;

    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    for (size_t i = 0; i < ENR_CONFIG_KEYS_MAX; i++)
        if (c->key_line[i] > lines)
            abort();
    memset(out1, 0, sizeof out1);
    memset(out2, 0, sizeof out2);
    if ((f = fmemopen(out1, sizeof out1 - 1, "w")) == NULL)
        abort();
    enr_config_dump(c, f);
    fclose(f);
    if (enr_config_parse(&again, out1, strlen(out1), SRC, err, sizeof err) != 0)
        abort();
    if ((f = fmemopen(out2, sizeof out2 - 1, "w")) == NULL)
        abort();
    enr_config_dump(&again, f);
    fclose(f);
    /* the values agree; only the comments (where from) differ */
    for (const char *a = out1, *b = out2; *a || *b;) {
        size_t la = strcspn(a, "#\n"), lb = strcspn(b, "#\n");
        if (la != lb || memcmp(a, b, la) != 0)
            abort();
        a += strcspn(a, "\n");
        b += strcspn(b, "\n");
        a += *a == '\n';
        b += *b == '\n';
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static enr_config c, before;
    char err[512];

    enr_config_set_url_check(enr_upstream_url_check); /* as the daemon does */
    memset(&c, 0xa5, sizeof c);
    memcpy(&before, &c, sizeof c);
    err[0] = '\0';
    {
        /* nginx's time syntax, from the same bytes: a time or -1 */
        long long ms = enr_nginx_time_ms((const char *)data, size);
        if (ms < -1)
            abort();
    }
    if (enr_config_parse(&c, (const char *)data, size, SRC, err, sizeof err) == 0) {
        check_ok(&c);
        check_dump(&c, data, size);
        return 0;
    }
    check_err(err, data, size);
    if (memcmp(&c, &before, sizeof c) != 0)
        abort();
    return 0;
}
