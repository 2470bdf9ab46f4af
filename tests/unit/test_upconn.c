/*
 * test_upconn.c: the decisions of a worker's connections (upconn.h) that
 * do not need a provider: how many connections an API's origin keeps
 * warm, over HTTP/2 and over HTTP/1.1 alone; and what a call ended for
 * want of time while its connection was still being set up is (the
 * path's, not the provider's: counted `deadline`, never fed to the
 * breaker), against a listener that never completes a connection.
 */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "engine/engine.h"
#include "t.h"
#include "t_batch.h"
#include "t_config.h"
#include "t_curl.h"
#include "upstream/api.h"
#include "upstream/breaker.h"
#include "upstream/cache.h"
#include "upstream/curlapi.h"
#include "upstream/upconn.h"
#include "upstream/upstream.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

typedef struct {
    enr_config c;
    enr_batch b;
    enr_cache *cache;
    enr_upstream *u;
} fixture;

#define G(field) ((unsigned long)enr_upstream_stats_of(f.u)->src[ENR_API_UPSTREAM].field)
#define G_BREAKER() ((unsigned long)enr_upstream_stats_of(f.u)->breaker_state[ENR_API_UPSTREAM])

/* How many connections an API's origin keeps warm: over HTTP/2 the
 * calls share one (two, one spare); over HTTP/1.1 one a call of a batch
 * and a spare, within upstream_max_connections; none when warm-ups are off. */
static void test_warm_target(void)
{
    static const struct {
        unsigned warm, h1, calls, conns, want;
    } cases[] = {
        {4, 0, 4, 4, 2},  /* the shipped defaults, HTTP/2 */
        {1, 0, 4, 4, 1},  /* fewer asked */
        {4, 1, 4, 4, 4},  /* the shipped defaults, HTTP/1.1: 4 calls, 4 connections */
        {4, 1, 2, 8, 3},  /* two calls and a spare */
        {1, 1, 4, 4, 4},  /* a batch's calls, whatever upstream_warm_connections */
        {4, 1, 1, 1, 1},  /* never past the connections allowed */
        {4, 1, 10, 6, 6}, /* ... */
        {0, 1, 4, 4, 0},  /* warm-ups off */
        {0, 0, 4, 4, 0},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned got =
            enr_upconn_warm_target(cases[i].warm, (int)cases[i].h1, cases[i].calls, cases[i].conns);
        T_CHECK(got == cases[i].want, "warm target (warm %u, %s, calls %u, conns %u): %u, not %u",
                cases[i].warm, cases[i].h1 ? "HTTP/1.1" : "HTTP/2", cases[i].calls, cases[i].conns,
                got, cases[i].want);
    }
}

/* A listener whose accept queue is full and never read: the kernel drops
 * every further SYN, so a connection to it stays being set up.  fds[0]
 * the listener, fds[1..2] what fills its queue; the port, or -1. */
static int stalled_listener(int fds[3])
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;

    fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fds[0] < 0 || bind(fds[0], (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(fds[0], 0) != 0 || getsockname(fds[0], (struct sockaddr *)&a, &alen) != 0)
        return -1;
    for (int i = 1; i < 3; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fds[i] < 0)
            return -1;
        (void)connect(fds[i], (struct sockaddr *)&a, sizeof a); /* in progress, or queued */
    }
    sleep_ms(50);
    return ntohs(a.sin_port);
}

/* Calls whose connections are still being set up when their batch ends
 * are detached; when a later batch needs their room they are ended.  Not
 * one of them reached the upstream: ended for want of time on the path,
 * they are counted `deadline`, never `timeout`, and the breaker does not
 * hear of them (a breaker of 2 would open at the second batch). */
static void test_setup_stall(void)
{
    fixture f;
    int fds[3] = {-1, -1, -1}, port = stalled_listener(fds);
    char id[32], err[256] = "x";

    T_CHECK(port > 0, "a listener that takes no connection");
    memset(&f, 0, sizeof f);
    t_default_config(&f.c);
    snprintf(f.c.upstream_url, sizeof f.c.upstream_url, "http://127.0.0.1:%d/v1/meta", port);
    for (int p = ENR_PROV_YT; p <= ENR_PROV_DM; p++)
        f.c.sources[p] = ENR_API_UPSTREAM; /* what the parser resolves for upstream_url */
    f.c.upstream_timeout_ms = 100;
    f.c.upstream_warm_connections = 0;
    f.c.breaker_failures = 2;
    f.c.breaker_window = 0;
    f.cache = enr_cache_new(f.c.cache_entries, f.c.cache_bytes);
    f.u = enr_upstream_new(&f.c, f.cache, err, sizeof err);
    T_CHECK(f.u != NULL && err[0] == '\0', "enr_upstream_new: %s", err);
    if (f.u == NULL)
        return;
    for (int i = 0; i < 4; i++) {
        clear(&f.b);
        for (int p = ENR_PROV_YT; p <= ENR_PROV_DM; p++) {
            snprintf(id, sizeof id, "stall%d-%d", i, p);
            add_rec(&f.b, p, id, 0);
        }
        T_CHECK(enr_upstream_enrich(f.u, &f.b, now_ms() + 10000) == 3 && poster_is(&f.b, 0, ""),
                "stalled set-up, batch %d: its records degraded, their local values kept", i);
    }
    T_CHECK(G(calls) == 12 && G(detached) == 12, "12 calls, each detached setting up: %lu, %lu",
            G(calls), G(detached));
    T_CHECK(G(skip_deadline) >= 6 && G(fail_timeout) == 0 && G(fail_connect) == 0,
            "the ones ended for room counted deadline (%lu), not timeout (%lu) nor connect (%lu)",
            G(skip_deadline), G(fail_timeout), G(fail_connect));
    T_CHECK(G_BREAKER() == ENR_BREAKER_CLOSED && G(breaker_opens) == 0,
            "the breaker did not hear of them: opens %lu", G(breaker_opens));
    enr_upstream_free(f.u);
    enr_cache_free(f.cache);
    enr_batch_free(&f.b);
    for (int i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

int main(void)
{
    if (t_curl_start() != 0)
        return 1;
    test_warm_target();
    test_setup_stall();
    curl_global_cleanup();
    T_DONE();
}
