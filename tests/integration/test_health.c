/*
 * test_health.c: the windowed health judgement over a scoreboard built
 * by hand, and the listen-queue measurement on real sockets.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "upstream/api.h"
#include "upstream/breaker.h"
#include "upstream/quota.h"
#include "ops/health.h"
#include "base/sockdiag.h"
#include "t.h"
#include "t_config.h"

static enr_scoreboard sb;
static enr_config cfg;
static enr_health h;
static uint64_t clock_ms = 1000000;

static void reset(unsigned live)
{
    memset(&sb, 0, sizeof sb);
    memset(&h, 0, sizeof h);
    t_health_config(&cfg, 10);
    sb.nslots = 4;
    ENR_SB_SET(sb.pool.workers, 4);
    ENR_SB_SET(sb.pool.state, ENR_POOL_RUNNING);
    for (unsigned i = 0; i < live; i++) {
        ENR_SB_SET(sb.slot[i].pid, 1000 + i);
        ENR_SB_SET(sb.slot[i].state, ENR_WS_IDLE);
    }
}

/* n requests on slot 0 with the given status and latency bucket. */
static void traffic(unsigned n, int status, unsigned bucket, unsigned recs, unsigned degraded)
{
    enr_sb_slot *s = &sb.slot[0];
    ENR_SB_ADD(s->accepted, n);
    ENR_SB_ADD(s->completed, n);
    if (status >= 500)
        ENR_SB_ADD(s->status_5xx, n);
    else
        ENR_SB_ADD(s->status_2xx, n);
    ENR_SB_ADD(s->latency[bucket], n);
    ENR_SB_ADD(s->records_in, (uint64_t)n * recs);
    ENR_SB_ADD(s->records_out, (uint64_t)n * recs);
    ENR_SB_ADD(s->records_degraded, (uint64_t)n * degraded);
}

static int tick(void)
{
    clock_ms += 1000;
    return enr_health_observe(&h, &cfg, &sb, 0, clock_ms);
}

static void test_basics(void)
{
    reset(0);
    T_CHECK(tick() == 0, "no live worker must be unhealthy");
    T_CHECK(h.reasons & ENR_HR_NO_WORKER, "reason bits %x", h.reasons);
    T_CHECK(strstr(h.reason, "no live worker") != NULL, "reason %s", h.reason);

    reset(3);
    T_CHECK(tick() == 1, "idle pool is healthy: %s", h.reason);
    T_STREQ(h.reason, "ok");
    T_CHECK(h.win.live_workers == 3, "live %u", h.win.live_workers);

    ENR_SB_SET(sb.pool.crashloop, 1);
    T_CHECK(tick() == 0 && (h.reasons & ENR_HR_CRASHLOOP), "crash loop");
}

static void test_5xx_window(void)
{
    reset(2);
    tick();
    traffic(3, 500, 3, 10, 0); /* below ENR_HEALTH_MIN_REQUESTS: no verdict */
    T_CHECK(tick() == 1, "3 requests are too few to judge: %s", h.reason);
    traffic(20, 200, 3, 10, 0);
    traffic(5, 500, 3, 10, 0);
    T_CHECK(tick() == 0, "8/28 5xx must be unhealthy");
    T_CHECK(h.reasons == ENR_HR_5XX, "only 5xx: %x", h.reasons);
    T_CHECK(strstr(h.reason, "5xx ratio 0.29 > 0.05") != NULL, "reason %s", h.reason);
    T_CHECK(h.win.requests == 28 && h.win.s5xx == 8, "window %llu/%llu",
            (unsigned long long)h.win.s5xx, (unsigned long long)h.win.requests);
    /* Good traffic for longer than the window: the old errors age out. */
    for (int i = 0; i < 12; i++) {
        traffic(10, 200, 3, 10, 0);
        tick();
    }
    T_CHECK(h.healthy == 1, "recovered after the window: %s", h.reason);
    T_CHECK(h.win.s5xx == 0 && h.win.requests >= 100, "window 5xx %llu req %llu",
            (unsigned long long)h.win.s5xx, (unsigned long long)h.win.requests);
    T_CHECK(h.win.span_ms >= 10000 && h.win.span_ms <= 11000, "span %llu",
            (unsigned long long)h.win.span_ms);
}

static void test_degraded_and_p99(void)
{
    reset(2);
    tick();
    traffic(10, 200, 3, 50, 40);
    T_CHECK(tick() == 0 && h.reasons == ENR_HR_DEGRADED, "degraded 0.8: %s", h.reason);
    T_CHECK(h.win.ratio_degraded > 0.79 && h.win.ratio_degraded < 0.81, "ratio %f",
            h.win.ratio_degraded);

    reset(2);
    tick();
    /* 100 requests in (500,1000]: p99 interpolates to 995 ms, under 1000. */
    traffic(100, 200, 9, 1, 0);
    T_CHECK(tick() == 1, "p99 995 ms is healthy: %s", h.reason);
    T_CHECK(h.win.p99_ms > 994 && h.win.p99_ms < 996, "p99 %f", h.win.p99_ms);
    /* 5 more in (1000,2500] put the 99th percentile past 1 s. */
    traffic(5, 200, 10, 1, 0);
    T_CHECK(tick() == 0 && h.reasons == ENR_HR_P99, "p99 over: %s", h.reason);
    T_CHECK(h.win.p99_ms > 1000 && h.win.p99_ms <= 2500, "p99 %f", h.win.p99_ms);
    /* The +Inf bucket answers the last finite bound. */
    reset(2);
    tick();
    traffic(10, 200, ENR_SB_LAT_BUCKETS - 1, 1, 0);
    tick();
    T_CHECK(h.win.p99_ms == 10000, "p99 +Inf %f", h.win.p99_ms);
}

static void test_stall_and_breaker(void)
{
    reset(2);
    ENR_SB_SET(sb.slot[0].state, ENR_WS_BUSY);
    ENR_SB_SET(sb.slot[0].req_start_mono_ms, enr_mono_ms() - 60000);
    ENR_SB_ADD(sb.slot[0].accepted, 1);
    for (int i = 0; i < 5; i++)
        tick();
    T_CHECK(h.healthy == 1, "a window not yet covered cannot be stalled: %s", h.reason);
    for (int i = 0; i < 7; i++)
        tick();
    T_CHECK(h.healthy == 0 && (h.reasons & ENR_HR_STALLED), "stalled: %s", h.reason);
    T_CHECK(h.win.oldest_request_ms >= 60000, "oldest %llu",
            (unsigned long long)h.win.oldest_request_ms);
    traffic(1, 200, 3, 1, 0);
    T_CHECK(tick() == 1, "a completion ends the stall: %s", h.reason);

    /* Queue non-empty at both ends of the window with no completion. */
    reset(2);
    for (int i = 0; i < 12; i++) {
        clock_ms += 1000;
        enr_health_observe(&h, &cfg, &sb, 7, clock_ms);
    }
    T_CHECK(h.healthy == 0 && (h.reasons & ENR_HR_STALLED), "queue stall: %s", h.reason);

    reset(2);
    ENR_SB_SET(sb.slot[0].up_breaker_state[0], ENR_BREAKER_OPEN);
    ENR_SB_SET(sb.slot[1].up_breaker_state[0], ENR_BREAKER_OPEN);
    T_CHECK(tick() == 1, "breaker ignored without an upstream");
    strcpy(cfg.upstream_url, "http://127.0.0.1:9/");
    for (int p = 1; p < ENR_SOURCE_PROVIDERS; p++)
        cfg.sources[p] = 0; /* the aggregator (enr_config_sources would resolve so) */
    T_CHECK(tick() == 0 && h.reasons == ENR_HR_BREAKER, "all open: %s", h.reason);
    ENR_SB_SET(sb.slot[1].up_breaker_state[0], ENR_BREAKER_HALF_OPEN);
    T_CHECK(tick() == 1, "one half_open breaker is not all open: %s", h.reason);
    /* Per source: one provider's API down is not the pool's fault. */
    ENR_SB_SET(sb.slot[1].up_breaker_state[0], ENR_BREAKER_OPEN);
    cfg.sources[3] = 3; /* Dailymotion's own API, its breakers closed */
    T_CHECK(tick() == 1, "a source still closed: %s", h.reason);
    ENR_SB_SET(sb.slot[0].up_breaker_state[3], ENR_BREAKER_OPEN);
    ENR_SB_SET(sb.slot[1].up_breaker_state[3], ENR_BREAKER_OPEN);
    T_CHECK(tick() == 0 && h.reasons == ENR_HR_BREAKER, "every source open: %s", h.reason);
    for (int p = 1; p < ENR_SOURCE_PROVIDERS; p++)
        cfg.sources[p] = ENR_SOURCE_OFF;
    cfg.upstream_url[0] = '\0';
}

/* A rejected key or token is unhealthy in the log's words: the API's
 * title and what its secret is called (its row of base/sources.h). */
static void test_key_rejected(void)
{
    static const struct {
        int src;
        const char *said;
    } c[] = {{ENR_API_YOUTUBE, "YouTube rejected the API key: keyInvalid"},
             {ENR_API_VIMEO, "Vimeo rejected the access token: keyInvalid"}};

    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        enr_sb_quota *q = &sb.quota[c[i].src];
        reset(2);
        ENR_SB_SET(q->why, enr_up_fail_rows[ENR_UP_F_AUTH].pause);
        ENR_SB_SET(q->pause_until_ms, enr_mono_ms() + 60000);
        strcpy(q->reason, "keyInvalid");
        T_CHECK(tick() == 0 && (h.reasons & ENR_HR_AUTH) && strstr(h.reason, c[i].said) != NULL,
                "%s: %s", c[i].said, h.reason);
    }
    reset(2);
}

static void test_ring_step(void)
{
    reset(1);
    /* Calls faster than once a second are judged, not recorded. */
    for (int i = 0; i < 500; i++) {
        clock_ms += 10;
        enr_health_observe(&h, &cfg, &sb, 0, clock_ms);
    }
    T_CHECK(h.count <= 6, "ring grew to %u for 5 s of calls", h.count);
}

static void test_sample_writes_pool(void)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    char dir[] = "/tmp/enr-health-XXXXXX";
    int lfd, cl[3];

    reset(0);
    T_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(sun.sun_path, sizeof sun.sun_path, "%s/s.sock", dir);
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    T_CHECK(bind(lfd, (struct sockaddr *)&sun, sizeof sun) == 0 && listen(lfd, 16) == 0, "listen");
    for (int i = 0; i < 3; i++) {
        cl[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        T_CHECK(connect(cl[i], (struct sockaddr *)&sun, sizeof sun) == 0, "connect %d", i);
    }
    clock_ms += 1000;
    {
        enr_health r;
        T_CHECK(enr_health_read(&r, &sb) == -1 && !r.healthy, "nothing published yet: %s",
                r.reason);
        T_STREQ(r.reason, "no verdict yet");
    }
    T_CHECK(enr_health_sample(&h, &cfg, &sb, lfd, clock_ms) == 0, "no worker: unhealthy");
    {
        /* What the status process shows is what the master judged. */
        enr_health r;
        T_CHECK(enr_health_read(&r, &sb) == 0, "published verdict read back");
        T_CHECK(!r.healthy && r.reasons == ENR_HR_NO_WORKER && r.reasons == h.reasons,
                "same verdict and reasons: %u", r.reasons);
        T_STREQ(r.reason, h.reason);
        T_CHECK(r.win.listen_queue == 3 && r.win.span_ms == h.win.span_ms &&
                    r.win.live_workers == 0,
                "same window figures");
    }
    T_STREQ(h.reason, "no live worker");
    T_CHECK(ENR_SB_GET(sb.pool.listen_queue) == 3, "queue %llu",
            (unsigned long long)ENR_SB_GET(sb.pool.listen_queue));
    T_CHECK(ENR_SB_GET(sb.pool.listen_queue_max) == 3, "max");
    close(accept(lfd, NULL, NULL));
    ENR_SB_SET(sb.slot[0].pid, 42);
    ENR_SB_SET(sb.slot[0].state, ENR_WS_IDLE);
    sb.nslots = 1;
    clock_ms += 1000;
    T_CHECK(enr_health_sample(&h, &cfg, &sb, lfd, clock_ms) == 1, "healthy: %s", h.reason);
    {
        enr_health r;
        T_CHECK(enr_health_read(&r, &sb) == 0 && r.healthy && r.reasons == 0 &&
                    r.win.live_workers == 1 && r.win.ratio_5xx == h.win.ratio_5xx,
                "healthy verdict read back: %s", r.reason);
        T_STREQ(r.reason, "ok");
    }
    T_CHECK(ENR_SB_GET(sb.pool.listen_queue) == 2 && ENR_SB_GET(sb.pool.listen_queue_max) == 3,
            "queue 2, max 3");
    for (int i = 0; i < 3; i++)
        close(cl[i]);
    close(lfd);
    unlink(sun.sun_path);
    rmdir(dir);
}

/* Liveness apart from health: provider faults (5xx, degraded, slow)
 * leave it live; waiting work that does not move, or no worker, for
 * liveness_timeout_ms does not. */
static void test_liveness(void)
{
    reset(2);
    cfg.liveness_timeout_ms = 5000;
    for (int i = 0; i < 20; i++) {
        traffic(10, 503, 12, 5, 5); /* all 5xx, all degraded, p99 past the bound */
        tick();
    }
    T_CHECK(h.healthy == 0 && (h.reasons & ENR_HR_5XX) && (h.reasons & ENR_HR_DEGRADED) &&
                (h.reasons & ENR_HR_P99),
            "a sick provider is unhealthy: %s", h.reason);
    T_CHECK(h.liveness.live == 1, "... and still live: %s", h.liveness.reason);
    T_STREQ(h.liveness.reason, "ok");

    /* Idle: nothing waits, nothing moves: live however long. */
    reset(2);
    cfg.liveness_timeout_ms = 5000;
    for (int i = 0; i < 20; i++)
        tick();
    T_CHECK(h.liveness.live == 1 && h.liveness.stuck_ms == 0, "idle is live: %s",
            h.liveness.reason);

    /* A queue that does not move (since the last sample that saw none). */
    for (int i = 0; i < 3; i++) {
        clock_ms += 1000;
        enr_health_observe(&h, &cfg, &sb, 9, clock_ms);
    }
    T_CHECK(h.liveness.live == 1 && h.liveness.stuck_ms == 3000,
            "queued 3 s of 5: still live (stuck %llu)", (unsigned long long)h.liveness.stuck_ms);
    clock_ms += 2000;
    enr_health_observe(&h, &cfg, &sb, 9, clock_ms);
    T_CHECK(h.liveness.live == 0 && strstr(h.liveness.reason, "unmoved") != NULL,
            "queued 5 s unmoved: not live: %s", h.liveness.reason);
    /* One request taken is movement. */
    ENR_SB_ADD(sb.slot[1].accepted, 1);
    clock_ms += 1000;
    enr_health_observe(&h, &cfg, &sb, 9, clock_ms);
    T_CHECK(h.liveness.live == 1, "a request taken: live again: %s", h.liveness.reason);

    /* A busy worker that never finishes, nothing queued behind it. */
    ENR_SB_SET(sb.slot[0].state, ENR_WS_BUSY);
    for (int i = 0; i < 6; i++)
        tick();
    T_CHECK(h.liveness.live == 0, "busy 6 s without finishing: not live: %s", h.liveness.reason);
    traffic(1, 200, 3, 1, 0);
    T_CHECK((tick(), h.liveness.live == 1), "it finished: live: %s", h.liveness.reason);

    /* No worker at all. */
    reset(2);
    cfg.liveness_timeout_ms = 5000;
    tick();
    ENR_SB_SET(sb.slot[0].state, ENR_WS_EMPTY);
    ENR_SB_SET(sb.slot[1].state, ENR_WS_STARTING);
    for (int i = 0; i < 4; i++)
        tick();
    T_CHECK(h.liveness.live == 1 && (h.reasons & ENR_HR_NO_WORKER),
            "4 s without a worker: unhealthy, still live: %s", h.liveness.reason);
    tick();
    T_CHECK(h.liveness.live == 0 && strstr(h.liveness.reason, "no live worker") != NULL,
            "5 s without a worker: not live: %s", h.liveness.reason);
    ENR_SB_SET(sb.slot[1].state, ENR_WS_IDLE);
    T_CHECK((tick(), h.liveness.live == 1), "a worker again: live: %s", h.liveness.reason);

    /* Published and read back, as the status process shows it. */
    {
        enr_health r;
        reset(0);
        cfg.liveness_timeout_ms = 1000;
        clock_ms += 1000;
        enr_health_sample(&h, &cfg, &sb, -1, clock_ms);
        clock_ms += 2000;
        enr_health_sample(&h, &cfg, &sb, -1, clock_ms);
        T_CHECK(enr_health_read(&r, &sb) == 0 && r.liveness.live == 0 &&
                    strcmp(r.liveness.reason, h.liveness.reason) == 0,
                "liveness read back: %s", r.liveness.reason);
    }
}

int main(void)
{
    test_basics();
    test_5xx_window();
    test_degraded_and_p99();
    test_stall_and_breaker();
    test_key_rejected();
    test_ring_step();
    test_sample_writes_pool();
    test_liveness();
    T_DONE();
}
