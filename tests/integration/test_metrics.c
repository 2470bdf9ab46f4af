/*
 * test_metrics.c: the Prometheus exposition, the status document and
 * the descriptor attribution, on a scoreboard built by hand and on this
 * process's own real sockets.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/contract.h"
#include "upstream/api.h"
#include "upstream/breaker.h"
#include "upstream/cache.h"
#include "ops/metrics.h"
#include "ops/statushtml.h"
#include "ops/statustext.h"
#include "base/sockdiag.h"
#include "ops/statusdoc.h"
#include "t.h"
#include "t_config.h"

static enr_scoreboard sb;
static enr_config cfg;

static void fill(void)
{
    memset(&sb, 0, sizeof sb);
    t_health_config(&cfg, 30);
    sb.nslots = 3;
    ENR_SB_SET(sb.pool.workers, 3);
    ENR_SB_SET(sb.pool.state, ENR_POOL_RUNNING);
    ENR_SB_SET(sb.pool.start_ms, 1700000000123ull);
    ENR_SB_SET(sb.pool.exits[ENR_EXIT_CRASH], 2);
    ENR_SB_SET(sb.pool.exits[ENR_EXIT_MAX_REQUESTS], 5);
    ENR_SB_SET(sb.pool.exits[ENR_EXIT_STOP], 3); /* an end, not a restart */
    for (unsigned i = 0; i < 2; i++) {
        enr_sb_slot *s = &sb.slot[i];
        ENR_SB_SET(s->pid, 100 + i);
        ENR_SB_SET(s->state, i == 0 ? ENR_WS_BUSY : ENR_WS_IDLE);
        ENR_SB_SET(s->accepted, 10 + i);
        ENR_SB_SET(s->completed, 10);
        ENR_SB_SET(s->status_2xx, 9);
        ENR_SB_SET(s->status_5xx, 1);
        ENR_SB_SET(s->records_in, 100);
        ENR_SB_SET(s->records_out, 90);
        ENR_SB_SET(s->records_rejected, 10);
        ENR_SB_SET(s->latency[0], 4); /* <= 1 ms */
        ENR_SB_SET(s->latency[3], 5); /* <= 10 ms */
        ENR_SB_SET(s->latency[ENR_SB_LAT_BUCKETS - 1], 1);
        ENR_SB_SET(s->latency_us_sum, 2500000);
        ENR_SB_SET(s->up[ENR_API_UPSTREAM][ENR_UP_ROW_cache_hits], 3);
        ENR_SB_SET(s->up[ENR_API_UPSTREAM][ENR_UP_ROW_cache_misses], 1);
        ENR_SB_SET(s->rss_kb, 2048);
    }
    ENR_SB_SET(sb.slot[1].up_breaker_state[0], ENR_BREAKER_OPEN);
    ENR_SB_SET(sb.slot[0].req_start_ms, 1);
    ENR_SB_SET(sb.slot[0].req_start_mono_ms, 1);
    strcpy(sb.slot[0].req_id, "req-abc\xff\n");
    ENR_SB_SET(sb.slot[2].last_exit_reason, ENR_EXIT_FD);
    ENR_SB_SET(sb.slot[2].last_exit_pid, 77);
    strcpy(sb.slot[2].last_exit_req_id, "req-dead");
    ENR_SB_SET(sb.slot[2].last_exit_req_age_ms, 1234);
}

static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return 1;
    return 0;
}

/* Each family: HELP and TYPE once, before its samples; counters end in
 * _total; every sample name belongs to a declared family. */
#define LINT_FAMILIES 256 /* well above what /metrics declares */

static void lint(const char *text)
{
    char fam[LINT_FAMILIES][96];
    char types[LINT_FAMILIES][16];
    int nf = 0, bad = 0;
    const char *p = text;

    while (*p) {
        const char *e = strchr(p, '\n');
        char line[512], name[96];
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n >= sizeof line)
            n = sizeof line - 1;
        memcpy(line, p, n);
        line[n] = '\0';
        if (sscanf(line, "# TYPE %95s %15s", name,
                   types[nf < LINT_FAMILIES ? nf : LINT_FAMILIES - 1]) == 2) {
            for (int i = 0; i < nf; i++)
                if (strcmp(fam[i], name) == 0)
                    bad++, printf("duplicate family %s\n", name);
            if (nf < LINT_FAMILIES)
                strcpy(fam[nf++], name);
            else
                bad++, printf("more families than the lint holds: %s\n", name);
            if (strcmp(types[nf - 1], "counter") == 0 && strstr(name, "_total") == NULL)
                bad++, printf("counter without _total: %s\n", name);
            if (strcmp(types[nf - 1], "counter") != 0 && strlen(name) > 6 &&
                strcmp(name + strlen(name) - 6, "_total") == 0)
                bad++, printf("_total that is no counter: %s\n", name);
            if (strncmp(name, "enrichd_", 8) != 0)
                bad++, printf("no prefix: %s\n", name);
        } else if (line[0] != '#' && line[0]) {
            int ok = 0;
            sscanf(line, "%95[a-z0-9_]", name);
            for (int i = 0; i < nf && !ok; i++) {
                size_t fl = strlen(fam[i]);
                ok = strncmp(name, fam[i], fl) == 0 &&
                     (name[fl] == '\0' || strcmp(name + fl, "_bucket") == 0 ||
                      strcmp(name + fl, "_sum") == 0 || strcmp(name + fl, "_count") == 0);
            }
            if (!ok)
                bad++, printf("sample without family: %s\n", line);
        }
        p = e ? e + 1 : p + n;
    }
    T_CHECK(bad == 0, "%d lint problems", bad);
    T_CHECK(nf > 30, "only %d families", nf);
}

/* Debian's promtool, when installed, is the judge of the format (the
 * integration tests require it; here it is a second opinion). */
static void promtool(const char *text)
{
    FILE *f;
    int rc;

    if (access("/usr/bin/promtool", X_OK) != 0) {
        printf("note: /usr/bin/promtool absent, format checked by lint() only\n");
        return;
    }
    f = popen("/usr/bin/promtool check metrics", "w");
    T_CHECK(f != NULL, "popen promtool");
    if (f == NULL)
        return;
    fputs(text, f);
    rc = pclose(f);
    T_CHECK(rc == 0, "promtool check metrics exit %d", rc);
}

static void test_metrics(void)
{
    enr_buf b = {0};
    enr_health h = {0};
    enr_status_view x = {0};
    enr_pool_seen seen = {0};
    enr_pool_snap ps;

    memset(&sb, 0, sizeof sb);
    fill();
    sb.nslots = 0; /* a first sample with nothing done yet */
    enr_health_observe(&h, &cfg, &sb, 4, 1000);
    sb.nslots = 3;
    enr_health_observe(&h, &cfg, &sb, 4, 2000);
    seen.have_queue = 1;
    seen.listen_queue = 4;
    seen.listen_queue_limit = 511;
    enr_pool_snap_take(&ps, &sb, &seen);
    x.c = &cfg;
    x.sb = &sb;
    x.pool = &ps;
    x.health = &h;
    {
        /* the host's cache: read from its mapping, not summed over slots */
        enr_cache_val cv = {0};
        x.cache = enr_cache_new(100, 1 << 20);
        cv.negative = 1;
        enr_cache_put((enr_cache *)x.cache, 1, "a", 1, &cv, 1000);
        enr_cache_put((enr_cache *)x.cache, 2, "b", 1, &cv, 1000);
    }
    enr_metrics_render(&b, &x);
    enr_cache_free((enr_cache *)x.cache);
    enr_buf_putc(&b, '\0');
    T_CHECK(!b.oom, "oom");
    T_CHECK(has_line(b.data, "enrichd_requests_accepted_total 21"), "accepted");
    T_CHECK(has_line(b.data, "enrichd_requests_completed_total 20"), "completed");
    T_CHECK(has_line(b.data, "enrichd_requests_in_flight 1"), "in flight");
    T_CHECK(has_line(b.data, "enrichd_requests_lost_total 0"), "lost");
    T_CHECK(strstr(b.data, "# TYPE enrichd_requests_lost_total counter\n") != NULL,
            "lost is a counter");
    T_CHECK(has_line(b.data, "enrichd_build_info{version=\"" ENR_VERSION "\"} 1"), "build info");
    {
        /* a counter never seen going down: the floor holds */
        enr_buf b2 = {0};
        enr_pool_snap ps2;
        json_object *doc, *val;
        seen.lost_shown = 5;
        enr_pool_snap_take(&ps2, &sb, &seen);
        x.pool = &ps2;
        x.cache = NULL;
        enr_metrics_render(&b2, &x);
        enr_buf_putc(&b2, '\0');
        T_CHECK(has_line(b2.data, "enrichd_requests_lost_total 5") && seen.lost_shown == 5,
                "lost never goes down");
        /* /status shows the same reading: one home for lost */
        doc = enr_status_doc(&x, 0);
        T_CHECK(json_object_object_get_ex(doc, "lost", &val) && json_object_get_uint64(val) == 5,
                "/status's lost is the snapshot's, floored alike");
        json_object_put(doc);
        enr_buf_free(&b2);
        x.pool = &ps;
    }
    T_CHECK(has_line(b.data, "enrichd_records_in_total 200"), "records in");
    T_CHECK(has_line(b.data, "enrichd_records_rejected_total 20"), "rejected");
    T_CHECK(has_line(b.data, "enrichd_responses_total{code=\"5xx\"} 2"), "5xx");
    T_CHECK(has_line(b.data, "enrichd_request_duration_seconds_bucket{le=\"0.001\"} 8"), "le 1ms");
    T_CHECK(has_line(b.data, "enrichd_request_duration_seconds_bucket{le=\"0.005\"} 8"), "le 5ms");
    T_CHECK(has_line(b.data, "enrichd_request_duration_seconds_bucket{le=\"0.01\"} 18"), "le 10ms");
    T_CHECK(has_line(b.data, "enrichd_request_duration_seconds_bucket{le=\"10\"} 18"), "le 10s");
    T_CHECK(has_line(b.data, "enrichd_request_duration_seconds_bucket{le=\"+Inf\"} 20"), "+Inf");
    T_CHECK(has_line(b.data, "enrichd_request_duration_seconds_count 20"), "count");
    T_CHECK(has_line(b.data, "enrichd_request_duration_seconds_sum 5"), "sum");
    T_CHECK(has_line(b.data, "enrichd_worker_exits_total{reason=\"crash\"} 2"), "exits crash");
    T_CHECK(has_line(b.data, "enrichd_worker_exits_total{reason=\"stop\"} 3"), "exits stop");
    T_CHECK(has_line(b.data, "enrichd_listen_queue_connections 4"), "queue");
    T_CHECK(has_line(b.data, "enrichd_listen_queue_limit_connections 511"), "queue limit");
    T_CHECK(has_line(b.data, "enrichd_workers{state=\"busy\"} 1"), "busy");
    T_CHECK(has_line(b.data, "enrichd_workers{state=\"idle\"} 1"), "idle");
    T_CHECK(has_line(b.data, "enrichd_upstream_breakers{state=\"open\"} 1"), "breaker open");
    T_CHECK(has_line(b.data, "enrichd_upstream_cache_hit_ratio 0.75"), "hit ratio");
    T_CHECK(has_line(b.data, "enrichd_upstream_cache_entries 2"), "cache entries, host-wide");
    T_CHECK(has_line(b.data, "enrichd_upstream_cache_size_bytes 1048576"), "cache size");
    T_CHECK(has_line(b.data, "enrichd_upstream_cache_evictions_total 0"), "cache evictions");
    T_CHECK(has_line(b.data, "enrichd_worker_resident_memory_bytes{slot=\"0\"} 2097152"), "rss");
    T_CHECK(has_line(b.data, "enrichd_worker_up{slot=\"2\"} 0"), "empty slot");
    T_CHECK(has_line(b.data, "enrichd_start_time_seconds 1700000000.123"), "start time");
    T_CHECK(has_line(b.data, "enrichd_unhealthy{reason=\"5xx_ratio\"} 1"),
            "unhealthy 5xx? healthy=%d %s", h.healthy, h.reason);
    lint(b.data);
    promtool(b.data);
    enr_buf_free(&b);
}

static void test_status_doc(void)
{
    enr_health h = {0};
    enr_status_view v = {0};
    enr_fd_kinds fds[3] = {{0}};
    int ok[3] = {1, 1, 0};
    json_object *doc, *val, *procs;
    enr_buf text = {0};

    fill();
    enr_health_observe(&h, &cfg, &sb, 0, 1000);
    fds[0].total = 812;
    fds[0].tcp_socks = fds[0].close_wait = 790;
    fds[0].n_top_close_wait = 1;
    strcpy(fds[0].top_close_wait[0].addr, "10.0.0.5:443");
    fds[0].top_close_wait[0].n = 790;
    v.c = &cfg;
    v.sb = &sb;
    v.health = &h;
    v.fds = fds;
    v.fds_ok = ok;
    doc = enr_status_doc(&v, 1);
    T_CHECK(json_object_object_get_ex(doc, "accepted conn", &val) &&
                json_object_get_uint64(val) == 21,
            "accepted conn");
    T_CHECK(json_object_object_get_ex(doc, "active processes", &val) &&
                json_object_get_int(val) == 1,
            "active");
    T_CHECK(json_object_object_get_ex(doc, "idle processes", &val) && json_object_get_int(val) == 1,
            "idle");
    T_CHECK(json_object_object_get_ex(doc, "in_flight", &val) && json_object_get_int(val) == 1,
            "in flight");
    T_CHECK(json_object_object_get_ex(doc, "restarts_total", &val) && json_object_get_int(val) == 7,
            "restarts");
    T_CHECK(json_object_object_get_ex(doc, "processes", &procs) &&
                json_object_array_length(procs) == 2,
            "processes: the live workers only");
    for (size_t i = 0; i < json_object_array_length(procs); i++)
        T_CHECK(json_object_get_int(
                    json_object_object_get(json_object_array_get_idx(procs, i), "pid")) > 0,
                "no process listed with pid 0");
    {
        json_object *up, *cache, *e;
        T_CHECK(json_object_object_get_ex(doc, "upstream", &up) &&
                    json_object_object_get_ex(up, "cache", &cache) &&
                    json_object_object_get_ex(cache, "entries", &e) && json_object_get_int(e) == 0,
                "upstream.cache reported (no cache: zeros)");
    }
    val = json_object_array_get_idx(procs, 0);
    T_STREQ(json_object_get_string(json_object_object_get(val, "request_id")), "req-abc??");
    T_STREQ(json_object_get_string(json_object_object_get(val, "state")), "busy");
    val = json_object_object_get(json_object_object_get(val, "fds_by_kind"), "summary");
    T_STREQ(val ? json_object_get_string(val) : "",
            "812 fds, 790 TCP CLOSE_WAIT to 10.0.0.5:443, 0 unix, 0 files, 0 pipes");
    T_CHECK(json_object_object_get_ex(doc, "empty_slots", &procs) &&
                json_object_array_length(procs) == 1,
            "the empty slot apart");
    T_CHECK(!json_object_object_get_ex(json_object_array_get_idx(procs, 0), "pid", NULL),
            "an empty slot has no pid");
    val = json_object_object_get(json_object_array_get_idx(procs, 0), "last_exit");
    T_STREQ(json_object_get_string(json_object_object_get(val, "reason")), "fd");
    T_STREQ(json_object_get_string(json_object_object_get(val, "request_id")), "req-dead");
    T_CHECK(json_object_get_int(json_object_object_get(val, "request_age_ms")) == 1234, "exit age");

    enr_status_text(&text, doc);
    enr_buf_putc(&text, '\0');
    T_CHECK(strstr(text.data, "accepted conn:") != NULL, "text has php-fpm keys");
    T_CHECK(strstr(text.data, "upstream.breakers.open:") != NULL, "text flattens");
    T_CHECK(strstr(text.data, "worker 0: 812 fds, 790 TCP CLOSE_WAIT to 10.0.0.5:443") != NULL,
            "text leak line:\n%s", text.data);
    T_CHECK(strstr(text.data, "fd pid 77 req req-dead age 1234") != NULL, "text last exit");
    enr_buf_free(&text);
    json_object_put(doc);
}

/* A real CLOSE_WAIT: the server side closes, the client side does not. */
static void test_fd_attribution(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), cl[3], sv, p[2], sp[2];
    char err[128], want[64];
    enr_sockdiag_snap *snap;
    enr_fd_kinds k;
    unsigned q = 99, lim = 0;

    T_CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 8) == 0, "listen");
    T_CHECK(getsockname(lfd, (struct sockaddr *)&a, &al) == 0, "getsockname");
    for (int i = 0; i < 3; i++) {
        cl[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        T_CHECK(connect(cl[i], (struct sockaddr *)&a, sizeof a) == 0, "connect");
    }
    T_CHECK(enr_sockdiag_listen_queue(lfd, &q, &lim) == 0 && q == 3 && lim == 8, "tcp queue %u/%u",
            q, lim);
    for (int i = 0; i < 3; i++) {
        sv = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        T_CHECK(sv >= 0, "accept");
        close(sv);
    }
    enr_fd_kinds k0;
    T_CHECK(enr_sockdiag_fds(NULL, getpid(), &k0) == 0, "fds without snapshot");
    T_CHECK(pipe2(p, O_CLOEXEC) == 0 && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0,
            "pipe");
    usleep(50000); /* let the FINs land */
    snap = enr_sockdiag_snap_take(err, sizeof err);
    T_CHECK(snap != NULL, "snapshot: %s", err);
    T_CHECK(enr_sockdiag_fds(snap, getpid(), &k) == 0, "fds of self");
    T_CHECK(k.close_wait == 3, "close_wait %u", k.close_wait);
    T_CHECK(k.tcp_state[TCP_LISTEN] == 1, "listen %u", k.tcp_state[10]);
    T_CHECK(k.pipes == k0.pipes + 2 && k.unix_socks >= 2, "pipes %u unix %u", k.pipes,
            k.unix_socks);
    snprintf(want, sizeof want, "127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
    T_CHECK(k.n_top_close_wait == 1, "top peers %u", k.n_top_close_wait);
    T_STREQ(k.top_close_wait[0].addr, want);
    T_CHECK(k.files + k.pipes + k.unix_socks + k.tcp_socks + k.other_socks + k.other == k.total,
            "kinds add up");
    T_CHECK(enr_sockdiag_fds(snap, 999999999, &k) == -1, "absent pid");
    enr_sockdiag_snap_free(snap);
    for (int i = 0; i < 3; i++)
        close(cl[i]);
    close(lfd);
    close(p[0]);
    close(p[1]);
    close(sp[0]);
    close(sp[1]);
}

/* Every counter of the upstream table (upstream_stats.h), for every
 * source, on every surface: /metrics, /status, the HTML page and the
 * text of `enrichd status`.  Each (source, counter) gets a value of its
 * own, so a surface that skips or swaps one fails here. */
static void test_counter_table_everywhere(void)
{
    static const char *const src_names[] = {"upstream", "youtube", "vimeo", "dailymotion"};
    enr_buf m = {0}, html = {0}, text = {0};
    enr_status_view v = {0};
    enr_status_hist hist;
    json_object *doc, *up, *srcs;
    char want[256];

    fill();
    memset(sb.slot[0].up, 0, sizeof sb.slot[0].up);
    memset(sb.slot[1].up, 0, sizeof sb.slot[1].up);
    for (unsigned src = 0; src < ENR_UP_SOURCES; src++)
        for (unsigned r = 0; r < ENR_UP_NCOUNTERS; r++)
            ENR_SB_SET(sb.slot[2].up[src][r], 70000 + src * 1000 + r * 10);
    v.c = &cfg;
    v.sb = &sb;
    memset(&hist, 0, sizeof hist);
    /* Two configurations: Dailymotion from the aggregator, then from its
     * own API; YouTube and Vimeo from theirs. */
    for (int dm = 0; dm < 2; dm++) {
        json_object *d;
        cfg.sources[ENR_PROV_YT] = ENR_API_YOUTUBE;
        cfg.sources[ENR_PROV_VM] = ENR_API_VIMEO;
        cfg.sources[ENR_PROV_DM] = dm ? ENR_API_DAILYMOTION : ENR_API_UPSTREAM;
        enr_metrics_render(&m, &v);
        d = enr_status_doc(&v, 0);
        enr_status_html(&html, d, &hist);
        enr_status_text_top(&text, d);
        if (dm)
            doc = d;
        else
            json_object_put(d);
    }
    T_CHECK(!m.oom && !html.oom && !text.oom, "rendered");
    /* upstream.sources holds YouTube, Vimeo, Dailymotion now; the
     * aggregator's numbers stay at upstream[.failures] */
    T_CHECK(json_object_object_get_ex(doc, "upstream", &up) &&
                json_object_object_get_ex(up, "sources", &srcs),
            "upstream.sources in /status");
    for (unsigned src = 0; src < ENR_UP_SOURCES; src++) {
        json_object *one = NULL, *val = NULL, *where;
        T_CHECK(src == ENR_API_UPSTREAM || json_object_object_get_ex(srcs, src_names[src], &one),
                "/status has source %s", src_names[src]);
        for (unsigned r = 0; r < ENR_UP_NCOUNTERS; r++) {
            const enr_up_counter_row *row = &enr_up_counter_rows[r];
            uint64_t n = 70000 + src * 1000 + r * 10;
            const char *key = row->kind[0] ? row->kind : row->field;
            /* /metrics: the aggregator's without a source label */
            if (src == ENR_API_UPSTREAM && row->kind[0])
                snprintf(want, sizeof want, "%s{kind=\"%s\"} %llu", row->metric, row->kind,
                         (unsigned long long)n);
            else if (row->kind[0])
                snprintf(want, sizeof want, "%s{kind=\"%s\",source=\"%s\"} %llu", row->metric,
                         row->kind, src_names[src], (unsigned long long)n);
            else if (src == ENR_API_UPSTREAM)
                snprintf(want, sizeof want, "%s %llu", row->metric, (unsigned long long)n);
            else
                snprintf(want, sizeof want, "%s{source=\"%s\"} %llu", row->metric, src_names[src],
                         (unsigned long long)n);
            T_CHECK(has_line(m.data, want), "/metrics lacks %s", want);
            /* /status: upstream.sources.SRC[.failures].KEY, and for the
             * aggregator the same at upstream[.failures].KEY */
            where = one;
            if (row->kind[0] && one && !json_object_object_get_ex(one, "failures", &where))
                where = NULL;
            T_CHECK(src == ENR_API_UPSTREAM ||
                        (where && json_object_object_get_ex(where, key, &val) &&
                         json_object_get_uint64(val) == n),
                    "/status sources.%s lacks %s", src_names[src], key);
            if (src == ENR_API_UPSTREAM) {
                where = up;
                if (row->kind[0] && !json_object_object_get_ex(up, "failures", &where))
                    where = NULL;
                T_CHECK(where && json_object_object_get_ex(where, key, &val) &&
                            json_object_get_uint64(val) == n,
                        "/status upstream lacks %s (the key dashboards know)", key);
            }
            snprintf(want, sizeof want, "<td>%llu</td>", (unsigned long long)n);
            T_CHECK(strstr(html.data, want) != NULL, "the HTML page lacks %s of %s", key,
                    src_names[src]);
            snprintf(want, sizeof want, " %llu", (unsigned long long)n);
            T_CHECK(strstr(text.data, want) != NULL, "enrichd status lacks %s of %s", key,
                    src_names[src]);
        }
    }
    json_object_put(doc);
    enr_buf_free(&m);
    enr_buf_free(&html);
    enr_buf_free(&text);
}

/* Every row of the pool's counter table reaches /metrics with its own
 * value (summed over the slots), and /status shows the same reading. */
static void test_pool_table_everywhere(void)
{
    enr_status_view v = {0};
    enr_buf m = {0};
    char want[160];

    fill();
    for (unsigned i = 0; i < ENR_PC_COUNT; i++) {
        size_t off = enr_pool_counter_defs[i].off;
        ENR_SB_SET(*(enr_sb_u64 *)((char *)&sb.slot[0] + off), 50000 + i * 10);
        ENR_SB_SET(*(enr_sb_u64 *)((char *)&sb.slot[1] + off), 1);
    }
    v.c = &cfg;
    v.sb = &sb;
    enr_metrics_render(&m, &v);
    enr_buf_putc(&m, '\0');
    for (unsigned i = 0; i < ENR_PC_COUNT; i++) {
        snprintf(want, sizeof want, "%s %u", enr_pool_counter_defs[i].metric, 50001 + i * 10);
        T_CHECK(has_line(m.data, want), "/metrics has %s", want);
    }
    enr_buf_free(&m);
}

/* Every row of the cache's table (cache.h) on /metrics with its TYPE and
 * on /status with the same reading, for a cache in memory and one in a
 * file; only the file says where it lives. */
static void test_cache_table_everywhere(void)
{
    static const uint8_t id[ENR_CACHE_ID_BYTES] = {1};
    char dir[] = "/tmp/enr-metrics-XXXXXX", path[64], want[256];
    const char *why;
    enr_cache_val val = {.poster = "https://i.example/p.jpg", .poster_len = 23};

    T_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/cache", dir);
    for (int file = 0; file < 2; file++) {
        enr_cache *c =
            file ? enr_cache_open(path, 64, 1 << 20, id, &why) : enr_cache_new(64, 1 << 20);
        enr_status_view v = {0};
        enr_cache_stats st;
        enr_buf m = {0};
        json_object *doc, *up = NULL, *k = NULL, *x;

        T_CHECK(c != NULL, "cache %d made", file);
        if (c == NULL)
            continue;
        T_CHECK(enr_cache_put(c, 0, "abc", 3, &val, 4102444800000ull) == 0, "put");
        fill(); /* a fresh configuration: the file's path set again */
        snprintf(cfg.cache_file, sizeof cfg.cache_file, "%s", path);
        v.c = &cfg;
        v.sb = &sb;
        v.cache = c;
        enr_cache_stats_of(c, &st);
        T_CHECK(st.entries == 1 && st.persistent == (uint64_t)file,
                "stats: %llu entries, persistent %llu", (unsigned long long)st.entries,
                (unsigned long long)st.persistent);
        enr_metrics_render(&m, &v);
        enr_buf_putc(&m, '\0');
        doc = enr_status_doc(&v, 0);
        T_CHECK(json_object_object_get_ex(doc, "upstream", &up) &&
                    json_object_object_get_ex(up, "cache", &k),
                "/status has upstream.cache");
#define ROW(f, metric, type, help)                                                                 \
    snprintf(want, sizeof want, "# TYPE %s %s", metric, type);                                     \
    T_CHECK(has_line(m.data, want), "/metrics lacks %s", want);                                    \
    snprintf(want, sizeof want, "%s %llu", metric, (unsigned long long)st.f);                      \
    T_CHECK(has_line(m.data, want), "/metrics lacks %s", want);                                    \
    T_CHECK(k &&json_object_object_get_ex(k, #f, &x) && json_object_get_uint64(x) == st.f,         \
            "/status upstream.cache lacks %s = %llu", #f, (unsigned long long)st.f);
        ENR_CACHE_STATS(ROW)
#undef ROW
        T_CHECK(k && json_object_object_get_ex(k, "file", &x) == file &&
                    (!file || strcmp(json_object_get_string(x), path) == 0),
                "/status upstream.cache.file only for the file (%d)", file);
        json_object_put(doc);
        enr_buf_free(&m);
        enr_cache_free(c);
    }
    unlink(path);
    rmdir(dir);
    cfg.cache_file[0] = '\0';
}

int main(void)
{
    test_cache_table_everywhere();
    test_pool_table_everywhere();
    test_counter_table_everywhere();
    test_metrics();
    test_status_doc();
    test_fd_attribution();
    T_DONE();
}
