/*
 * replay_stats.c: turns enrich-replay's per-request records into numbers.
 *
 * Percentiles are nearest-rank on the exact sorted latencies of the
 * requests that got an HTTP response (transport errors are counted by
 * kind, not folded into the latency distribution: a refused connection
 * answers fast and would flatter the tail).
 */
#include "replay/replay_stats.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const enr_replay_err_names[ENR_RERR_COUNT] = {
    "none", "connect", "reset", "eof", "timeout", "protocol", "too_large",
};

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Latencies (µs) of target's answered requests, sorted; NULL if none. */
/* A 200 with a whole body that passed --check (if any). */
static int is_good(const enr_replay_rec *r)
{
    return r->err == ENR_RERR_NONE && r->status == 200 && !r->bad_body;
}

/* Latencies of the target's answers (good: of its good ones only). */
static uint32_t *sorted_lat_of(const enr_replay_rec *r, size_t n, unsigned target, size_t *m,
                               int good)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].target == target && r[i].err == ENR_RERR_NONE && (!good || is_good(&r[i])))
            k++;
    *m = k;
    if (k == 0)
        return NULL;
    uint32_t *v = malloc(k * sizeof *v);
    if (!v)
        return NULL;
    k = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].target == target && r[i].err == ENR_RERR_NONE && (!good || is_good(&r[i])))
            v[k++] = r[i].lat_us;
    qsort(v, k, sizeof *v, cmp_u32);
    return v;
}

static uint32_t *sorted_lat(const enr_replay_rec *r, size_t n, unsigned target, size_t *m)
{
    return sorted_lat_of(r, n, target, m, 0);
}

static double pct(const uint32_t *v, size_t m, double p)
{
    if (m == 0)
        return 0;
    size_t rank = (size_t)ceil(p / 100.0 * (double)m);
    if (rank < 1)
        rank = 1;
    if (rank > m)
        rank = m;
    return v[rank - 1];
}

void enr_replay_summarize(const enr_replay_rec *r, size_t n, unsigned target, double elapsed_s,
                          enr_replay_summary *s)
{
    const char *name = s->name;
    double cpu = s->cpu_ms_per_req;
    memset(s, 0, sizeof *s);
    s->name = name;
    s->cpu_ms_per_req = cpu;
    s->elapsed_s = elapsed_s;
    double sum = 0, bo = 0, bi = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].target != target)
            continue;
        s->count++;
        bo += r[i].bytes_out;
        bi += r[i].bytes_in;
        if (r[i].err != ENR_RERR_NONE) {
            s->errs[r[i].err]++;
            continue;
        }
        sum += r[i].lat_us;
        s->good += is_good(&r[i]);
        s->bad_body += r[i].bad_body;
        if (r[i].status >= 200 && r[i].status < 300)
            s->ok2xx++;
        else if (r[i].status >= 400 && r[i].status < 500)
            s->st4xx++;
        else if (r[i].status >= 500)
            s->st5xx++;
        else
            s->other++;
    }
    s->mb_out = bo / 1e6;
    s->mb_in = bi / 1e6;
    s->rps = elapsed_s > 0 ? (double)s->count / elapsed_s : 0;
    s->good_rps = elapsed_s > 0 ? (double)s->good / elapsed_s : 0;
    size_t m;
    uint32_t *v = sorted_lat_of(r, n, target, &m, 1);
    if (v) {
        s->good_p50 = pct(v, m, 50) / 1e3;
        s->good_p99 = pct(v, m, 99) / 1e3;
        s->good_p999 = pct(v, m, 99.9) / 1e3;
        s->good_max = v[m - 1] / 1e3;
        free(v);
    }
    v = sorted_lat(r, n, target, &m);
    if (v) {
        s->p50 = pct(v, m, 50) / 1e3;
        s->p90 = pct(v, m, 90) / 1e3;
        s->p95 = pct(v, m, 95) / 1e3;
        s->p99 = pct(v, m, 99) / 1e3;
        s->p999 = pct(v, m, 99.9) / 1e3;
        s->max = v[m - 1] / 1e3;
        s->mean = sum / (double)m / 1e3;
        free(v);
    }
    /* Client lag: due -> first byte written, for requests that did not wait
     * for a slot; it is the replayer's own scheduling error. */
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].target == target && !r[i].capped)
            k++;
    if (k) {
        uint32_t *w = malloc(k * sizeof *w);
        if (w) {
            k = 0;
            for (size_t i = 0; i < n; i++)
                if (r[i].target == target && !r[i].capped)
                    w[k++] = r[i].wait_us;
            qsort(w, k, sizeof *w, cmp_u32);
            s->lag_p50_us = pct(w, k, 50);
            s->lag_p99_us = pct(w, k, 99);
            free(w);
        }
    }
}

static size_t nerrs(const enr_replay_summary *s)
{
    size_t e = 0;
    for (int k = 1; k < ENR_RERR_COUNT; k++)
        e += s->errs[k];
    return e;
}

/* The rows of the side-by-side table, in order. */
static double row_value(const enr_replay_summary *s, size_t row)
{
    switch (row) {
    case 0:
        return s->rps;
    case 1:
        return s->p50;
    case 2:
        return s->p95;
    case 3:
        return s->p99;
    case 4:
        return s->p999;
    case 5:
        return s->max;
    default:
        return s->mean;
    }
}

void enr_replay_print(FILE *f, const enr_replay_summary *s, size_t ns)
{
    for (size_t i = 0; i < ns; i++) {
        const enr_replay_summary *x = &s[i];
        fprintf(f, "target %s\n", x->name);
        fprintf(f, "  requests %zu in %.2f s = %.1f req/s; sent %.1f MB, received %.1f MB\n",
                x->count, x->elapsed_s, x->rps, x->mb_out, x->mb_in);
        fprintf(f, "  status 2xx %zu, 4xx %zu, 5xx %zu, other %zu; transport errors %zu", x->ok2xx,
                x->st4xx, x->st5xx, x->other, nerrs(x));
        for (int k = 1; k < ENR_RERR_COUNT; k++)
            if (x->errs[k])
                fprintf(f, " %s=%zu", enr_replay_err_names[k], x->errs[k]);
        fprintf(f,
                "\n  latency ms: p50 %.3f  p90 %.3f  p95 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  "
                "mean %.3f\n",
                x->p50, x->p90, x->p95, x->p99, x->p999, x->max, x->mean);
        fprintf(f,
                "  good (200, whole body%s) %zu = %.1f req/s, bad bodies %zu; their latency ms: "
                "p50 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n",
                x->bad_body ? ", checked" : "", x->good, x->good_rps, x->bad_body, x->good_p50,
                x->good_p99, x->good_p999, x->good_max);
        fprintf(f, "  client lag (due -> sent, not waiting for a slot) p50 %.0f us, p99 %.0f us\n",
                x->lag_p50_us, x->lag_p99_us);
        if (x->cpu_ms_per_req >= 0)
            fprintf(f, "  server CPU per request %.3f ms\n", x->cpu_ms_per_req);
    }
    if (ns < 2)
        return;
    fprintf(f, "\nside by side (ratio = target / %s)\n", s[0].name);
    fprintf(f, "%-10s", "metric");
    for (size_t i = 0; i < ns; i++)
        fprintf(f, " %16.16s", s[i].name);
    for (size_t i = 1; i < ns; i++)
        fprintf(f, " %10s", "ratio");
    fputc('\n', f);
    static const char *const rows[] = {"req/s",    "p50 ms", "p95 ms", "p99 ms",
                                       "p99.9 ms", "max ms", "mean ms"};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        fprintf(f, "%-10s", rows[r]);
        double base = row_value(&s[0], r);
        for (size_t i = 0; i < ns; i++)
            fprintf(f, " %16.3f", row_value(&s[i], r));
        for (size_t i = 1; i < ns; i++) {
            double v = row_value(&s[i], r);
            if (base > 0)
                fprintf(f, " %9.2fx", v / base);
            else
                fprintf(f, " %10s", "-");
        }
        fputc('\n', f);
    }
    fprintf(f, "%-10s", "errors");
    for (size_t i = 0; i < ns; i++)
        fprintf(f, " %16zu", nerrs(&s[i]) + s[i].st5xx);
    fprintf(f, "\n%-10s", "non-2xx");
    for (size_t i = 0; i < ns; i++)
        fprintf(f, " %16zu", s[i].count - s[i].ok2xx);
    fputc('\n', f);
}

/* Bucket upper bounds 1, 2, 5 x 10^k µs, from 10 µs to 100 s. */
static double bucket_bound(int b)
{
    static const double m[3] = {1, 2, 5};
    return 10.0 * m[b % 3] * pow(10.0, b / 3);
}
#define NBUCKETS 22

void enr_replay_print_histogram(FILE *f, const enr_replay_rec *r, size_t n,
                                const enr_replay_summary *s, size_t ns)
{
    for (size_t t = 0; t < ns; t++) {
        size_t cnt[NBUCKETS + 1] = {0}, total = 0;
        for (size_t i = 0; i < n; i++) {
            if (r[i].target != t || r[i].err != ENR_RERR_NONE)
                continue;
            int b = 0;
            while (b < NBUCKETS && r[i].lat_us > bucket_bound(b))
                b++;
            cnt[b]++;
            total++;
        }
        fprintf(f, "\nlatency histogram, %s (%zu answered)\n", s[t].name, total);
        size_t peak = 1, cum = 0;
        for (int b = 0; b <= NBUCKETS; b++)
            if (cnt[b] > peak)
                peak = cnt[b];
        int first = 0, last = NBUCKETS;
        while (first < NBUCKETS && cnt[first] == 0)
            first++;
        while (last > first && cnt[last] == 0)
            last--;
        for (int b = first; b <= last; b++) {
            cum += cnt[b];
            char lbl[32];
            if (b == NBUCKETS)
                snprintf(lbl, sizeof lbl, ">%.0f ms", bucket_bound(NBUCKETS - 1) / 1e3);
            else if (bucket_bound(b) < 1000)
                snprintf(lbl, sizeof lbl, "<=%.0f us", bucket_bound(b));
            else
                snprintf(lbl, sizeof lbl, "<=%g ms", bucket_bound(b) / 1e3);
            int bar = (int)(50.0 * (double)cnt[b] / (double)peak + 0.5);
            fprintf(f, "  %12s %8zu %7.3f%% |", lbl, cnt[b],
                    total ? 100.0 * (double)cum / (double)total : 0);
            for (int k = 0; k < bar; k++)
                fputc('#', f);
            fputc('\n', f);
        }
    }
}

int enr_replay_write_plots(const char *prefix, const enr_replay_rec *r, size_t n,
                           const enr_replay_summary *s, size_t ns)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.cdf.dat", prefix);
    FILE *dat = fopen(path, "we");
    if (!dat)
        return -1;
    for (size_t t = 0; t < ns; t++) {
        size_t m;
        uint32_t *v = sorted_lat(r, n, (unsigned)t, &m);
        char hp[4096];
        snprintf(hp, sizeof hp, "%s.%zu.hgrm", prefix, t);
        FILE *h = fopen(hp, "we");
        if (!h) {
            int e = errno;
            free(v);
            fclose(dat);
            errno = e;
            return -1;
        }
        /* The HdrHistogram "percentile distribution" text: value, percentile,
         * count, 1/(1-percentile); readable by HdrHistogram's plotters. */
        fprintf(h, "# %s\n%12s %14s %10s %14s\n\n", s[t].name, "Value", "Percentile", "TotalCount",
                "1/(1-Percentile)");
        fprintf(dat, "# %s\n", s[t].name);
        if (v) {
            for (int k = 0; k <= 60; k++) {
                /* Halve the remaining tail at each step, like HdrHistogram. */
                double p = 1.0 - pow(0.5, k / 3.0);
                size_t rank = (size_t)ceil(p * (double)m);
                if (rank < 1)
                    rank = 1;
                if (rank > m)
                    break;
                fprintf(h, "%12.3f %14.12f %10zu %14.2f\n", v[rank - 1] / 1e3, p, rank,
                        p < 1 ? 1 / (1 - p) : INFINITY);
            }
            fprintf(h, "%12.3f %14.12f %10zu %14s\n", v[m - 1] / 1e3, 1.0, m, "inf");
            fprintf(h, "#[Mean = %.3f, Max = %.3f, Total count = %zu]\n", s[t].mean, s[t].max, m);
            size_t step = m > 4000 ? m / 4000 : 1;
            for (size_t i = 0; i < m; i += step)
                fprintf(dat, "%.3f %.6f\n", v[i] / 1e3, (double)(i + 1) / (double)m);
            fprintf(dat, "%.3f 1\n", v[m - 1] / 1e3);
        }
        fprintf(dat, "\n\n");
        free(v);
        if (fclose(h) != 0) {
            fclose(dat);
            return -1;
        }
    }
    if (fclose(dat) != 0)
        return -1;
    snprintf(path, sizeof path, "%s.gp", prefix);
    FILE *gp = fopen(path, "we");
    if (!gp)
        return -1;
    fprintf(gp, "set terminal svg size 900,560\nset output '%s.svg'\n", prefix);
    fprintf(gp, "set logscale x\nset xlabel 'latency (ms)'\nset ylabel 'fraction of requests'\n"
                "set key bottom right\nset grid\nplot ");
    for (size_t t = 0; t < ns; t++)
        fprintf(gp, "%s'%s.cdf.dat' index %zu with lines lw 2 title '%s'", t ? ", " : "", prefix, t,
                s[t].name);
    fprintf(gp, "\n");
    if (fclose(gp) != 0)
        return -1;
    if (access("/usr/bin/gnuplot", X_OK) == 0) {
        char cmd[8300];
        snprintf(cmd, sizeof cmd, "gnuplot '%s.gp'", prefix);
        if (system(cmd) != 0)
            fprintf(stderr, "enrich-replay: gnuplot failed on %s.gp\n", prefix);
    }
    return 0;
}

int enr_replay_write_tsv(const char *path, const enr_replay_rec *r, size_t n,
                         const enr_replay_summary *s)
{
    FILE *f = fopen(path, "we");
    if (!f)
        return -1;
    fprintf(f, "t_due_s\tjob\ttarget\tstatus\tlatency_us\twait_us\tbytes_out\tbytes_in\terror"
               "\tbad_body\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%.6f\t%u\t%s\t%u\t%u\t%u\t%u\t%u\t%s\t%u\n", r[i].t_sched, r[i].job,
                s[r[i].target].name, r[i].status, r[i].lat_us, r[i].wait_us, r[i].bytes_out,
                r[i].bytes_in, r[i].err ? enr_replay_err_names[r[i].err] : "", r[i].bad_body);
    return fclose(f);
}

int enr_replay_write_json(const char *path, const enr_replay_summary *s, size_t ns,
                          const char *mode, double client_cpu_us)
{
    FILE *f = fopen(path, "we");
    if (!f)
        return -1;
    fprintf(f, "[");
    for (size_t i = 0; i < ns; i++) {
        const enr_replay_summary *x = &s[i];
        fprintf(f,
                "%s\n{\"target\":\"%s\",\"mode\":\"%s\",\"count\":%zu,\"ok\":%zu,\"s4xx\":%zu,"
                "\"s5xx\":%zu,\"errors\":%zu,\"elapsed_s\":%.4f,\"rps\":%.3f,\"p50\":%.4f,"
                "\"p90\":%.4f,\"p95\":%.4f,\"p99\":%.4f,\"p999\":%.4f,\"max\":%.4f,\"mean\":%.4f,"
                "\"lag_p50_us\":%.1f,\"lag_p99_us\":%.1f,\"mb_out\":%.3f,\"mb_in\":%.3f,"
                "\"client_cpu_us\":%.2f,\"good\":%zu,\"bad_body\":%zu,\"good_rps\":%.3f,"
                "\"good_p50\":%.4f,\"good_p99\":%.4f,\"good_p999\":%.4f,\"good_max\":%.4f}",
                i ? "," : "", x->name, mode, x->count, x->ok2xx, x->st4xx, x->st5xx, nerrs(x),
                x->elapsed_s, x->rps, x->p50, x->p90, x->p95, x->p99, x->p999, x->max, x->mean,
                x->lag_p50_us, x->lag_p99_us, x->mb_out, x->mb_in, client_cpu_us, x->good,
                x->bad_body, x->good_rps, x->good_p50, x->good_p99, x->good_p999, x->good_max);
    }
    fprintf(f, "\n]\n");
    return fclose(f);
}
