/*
 * bench-engine.c: engine time per batch (make bench-engine).
 *
 * Generates deterministic, realistic batches (multilingual titles, every
 * duration type, blocked lists, bulky fields nobody reads: descriptions,
 * tags, stats), then times enr_parse + enr_emit and, as the baseline of
 * the same run on the same bytes, a plain memchr pass.  Reported as µs per
 * batch, MB/s and the ratio to memchr, so a noisy machine still gives
 * comparable figures.  `--once big|small|none` runs a single warm batch,
 * for callgrind's instruction count (less that of `--once none`, the
 * warm-up alone).  `--once FILE` runs a batch of one's own (a payload of
 * a trace) twice, a warm-up of its own then the batch: half the
 * difference to `none` is one batch.
 *
 * `--trace FILE` times the payloads of a trace (scripts/gen-trace
 * --shape big: the batches `make bench` sends), each in turn, as the
 * bytes enrich-replay puts on the wire; `--once-trace FILE` runs them
 * all once after a warm-up pass over them all, and `--once-trace-none
 * FILE` the warm-up alone, for callgrind: the difference over the count
 * is one batch of the trace.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/clock.h"
#include "engine/engine.h"

#define BENCH_MIN_NS 300000000ull /* time each case for at least 0.3 s */

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static const char *const titles[] = {
    "Official Music Video - Never Gonna Give You Up",
    "東京の夜景 4K タイムラプス　（完全版）",
    "สอนทำอาหารไทย ต้มยำกุ้ง น้ำข้น",
    "방탄소년단 (BTS) 'Dynamite' Official MV",
    "Hướng dẫn nấu phở bò Hà Nội ngon chuẩn vị",
    "🔥 Top 10 goals of the season ⚽️🏆",
    "ＦＵＬＬ　ＷＩＤＴＨ　ｔｉｔｌｅ　①②③",
    "  spaced\u00a0\u00a0out\\ttitle\u2003with\u3000odd   white space  ",
    "Ελληνικά: ΟΔΥΣΣΕΥΣ και η Ιθάκη",
    "Live @ Wembley 1986 (Remastered) [HD]",
};
static const char *const durations[] = {"253",  "\"253\"",  "\" 17 \"", "null",        "\"0x1F\"",
                                        "12.5", "[\"61\"]", "true",     "\"PT4M13S\"", "0"};
static const char *const providers[] = {"yt", "yt", "yt", "vm", "dm", "yt", "vm", "xx"};

static void gen(enr_buf *b, int records, size_t target)
{
    size_t per = target / (size_t)records;

    enr_buf_putc(b, '[');
    for (int i = 0; i < records; i++) {
        size_t start = b->len;
        char tmp[256];

        if (i)
            enr_buf_putc(b, ',');
        snprintf(tmp, sizeof(tmp),
                 "{\"provider\":\"%s\",\"id\":\"%s%08llX\",\"title\":\"%s\",\"duration\":%s,"
                 "\"blocked\":[\"JP\",\"KR\"],\"stats\":{\"views\":%llu,\"likes\":%llu,"
                 "\"ratio\":0.%llu},\"tags\":[",
                 providers[next() % 8], (next() & 1) ? " AbC-" : "xY_",
                 (unsigned long long)(next() & 0xffffffff), titles[next() % 10],
                 durations[next() % 10], (unsigned long long)(next() % 100000000),
                 (unsigned long long)(next() % 1000000), (unsigned long long)(next() % 1000));
        enr_buf_append(b, tmp, strlen(tmp));
        for (int t = 0; t < 12; t++) {
            snprintf(tmp, sizeof(tmp), "%s\"tag%d-%s\"", t ? "," : "", t, titles[next() % 10]);
            enr_buf_append(b, tmp, strlen(tmp));
        }
        enr_buf_lit(b, "],\"description\":\"");
        while (b->len - start < per - 8) {
            const char *s = titles[next() % 10];

            enr_buf_append(b, s, strlen(s));
            enr_buf_lit(b, " \\n ");
        }
        enr_buf_lit(b, "\"}");
    }
    enr_buf_putc(b, ']');
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static volatile size_t sink;

static void bench(enr_engine *e, const char *name, const enr_buf *body)
{
    enr_batch batch = {0};
    enr_buf out = {0};
    enr_error err;
    uint64_t t0, n = 0, engine_ns, memchr_ns, best_ns = UINT64_MAX;

    if (enr_parse(e, body->data, body->len, 0, &batch, &err) < 0) {
        fprintf(stderr, "bench-engine: generated batch rejected: %s at %ld\n", err.msg, err.offset);
        exit(1);
    }
    t0 = now_ns();
    do {
        uint64_t t1 = now_ns(), d;

        enr_buf_reset(&out);
        enr_parse(e, body->data, body->len, 0, &batch, &err);
        enr_emit(e, &batch, enr_wall_ms, &out, &err);
        d = now_ns() - t1;
        if (d < best_ns)
            best_ns = d;
        n++;
    } while (now_ns() - t0 < BENCH_MIN_NS);
    engine_ns = (now_ns() - t0) / n;
    size_t records = batch.n;

    n = 0;
    t0 = now_ns();
    do {
        const char *p = body->data, *end = p + body->len;
        size_t c = 0;

        while ((p = memchr(p, '\x01', (size_t)(end - p))) != NULL) {
            c++;
            p++;
        }
        sink += c;
        n++;
    } while (now_ns() - t0 < BENCH_MIN_NS / 3);
    memchr_ns = (now_ns() - t0) / n;
    if (memchr_ns == 0)
        memchr_ns = 1;

    printf("%-22s %8zu B %4zu rec  engine %8.1f us  %7.1f MB/s  memchr %6.2f us  ratio %6.0fx\n",
           name, body->len, records, engine_ns / 1000.0, body->len / (engine_ns / 1000.0),
           memchr_ns / 1000.0, (double)engine_ns / (double)memchr_ns);
    /* The fastest single batch: what the code costs when nothing else on
     * a shared machine took the core meanwhile. */
    printf("%-22s %8s   %4s      best %8.1f us  %7.1f MB/s\n", "", "", "", best_ns / 1000.0,
           body->len / (best_ns / 1000.0));
    enr_batch_free(&batch);
    enr_buf_free(&out);
}

/* A batch from a file, for --once FILE. */
static int load(const char *path, enr_buf *b)
{
    char chunk[65536];
    size_t n;
    FILE *f = fopen(path, "rb");

    if (f == NULL)
        return -1;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        enr_buf_append(b, chunk, n);
    fclose(f);
    return b->oom ? -1 : 0;
}

#define TRACE_MAX 64 /* payloads read from a trace (make bench-engine: 20) */

/* The payloads of a trace, verbatim: each line is {"ts":N,"payload":P}
 * (gen-trace writes exactly that) and P runs to the line's last '}'.  A
 * payload that travels as a JSON string (a body that is not JSON) is
 * left out: it is not a batch. */
static size_t load_trace(const char *path, enr_buf *out, size_t max)
{
    static const char key[] = "\"payload\":";
    enr_buf all = {0};
    size_t n = 0;

    if (load(path, &all) != 0)
        return 0;
    for (const char *p = all.data, *end = p + all.len; p < end && n < max;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p)), *k, *last;

        if (eol == NULL)
            eol = end;
        k = memmem(p, (size_t)(eol - p), key, sizeof key - 1);
        last = eol;
        while (last > p && last[-1] != '}')
            last--;
        if (k != NULL && last > k + sizeof key) {
            const char *v = k + sizeof key - 1;

            while (*v == ' ')
                v++;
            if (*v == '[' || *v == '{')
                enr_buf_append(&out[n++], v, (size_t)(last - 1 - v));
        }
        p = eol + 1;
    }
    enr_buf_free(&all);
    return n;
}

/* Every payload of the trace in turn, for at least BENCH_MIN_NS: the
 * mean time per batch, and the best pass over them all. */
static void bench_trace(enr_engine *e, const char *path)
{
    static enr_buf body[TRACE_MAX];
    enr_batch batch = {0};
    enr_buf out = {0};
    enr_error err;
    size_t n = load_trace(path, body, TRACE_MAX), bytes = 0, records = 0, rejected = 0;
    uint64_t t0, passes = 0, best_ns = UINT64_MAX, total_ns;

    if (n == 0) {
        fprintf(stderr, "bench-engine: no batch in %s\n", path);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        bytes += body[i].len;
        if (enr_parse(e, body[i].data, body[i].len, 0, &batch, &err) < 0)
            rejected++;
        else
            records += batch.n;
    }
    t0 = now_ns();
    do {
        uint64_t t1 = now_ns(), d;

        for (size_t i = 0; i < n; i++) {
            enr_buf_reset(&out);
            if (enr_parse(e, body[i].data, body[i].len, 0, &batch, &err) == 0)
                enr_emit(e, &batch, enr_wall_ms, &out, &err);
        }
        d = now_ns() - t1;
        if (d < best_ns)
            best_ns = d;
        passes++;
    } while (now_ns() - t0 < BENCH_MIN_NS);
    total_ns = (now_ns() - t0) / passes;
    printf("trace %s: %zu batches (%zu rejected), %zu records kept per batch\n", path, n, rejected,
           records / n);
    printf("%-22s %8zu B %4zu rec  engine %8.1f us  %7.1f MB/s\n", "trace batch (mean)", bytes / n,
           records / n, total_ns / 1000.0 / (double)n, bytes / (total_ns / 1000.0));
    printf("%-22s %8s   %4s      best %8.1f us  %7.1f MB/s\n", "", "", "",
           best_ns / 1000.0 / (double)n, bytes / (best_ns / 1000.0));
    for (size_t i = 0; i < n; i++)
        enr_buf_free(&body[i]);
    enr_batch_free(&batch);
    enr_buf_free(&out);
}

/* --once-trace[-none]: a warm-up pass over the trace, then (unless none)
 * one more; lazily built tables belong to the warm-up. */
static int once_trace(enr_engine *e, const char *path, int run)
{
    static enr_buf body[TRACE_MAX];
    enr_batch batch = {0};
    enr_buf out = {0};
    enr_error err;
    size_t n = load_trace(path, body, TRACE_MAX);

    if (n == 0) {
        fprintf(stderr, "bench-engine: no batch in %s\n", path);
        return 1;
    }
    for (int pass = 0; pass < 1 + run; pass++)
        for (size_t i = 0; i < n; i++) {
            enr_buf_reset(&out);
            if (enr_parse(e, body[i].data, body[i].len, 0, &batch, &err) == 0)
                enr_emit(e, &batch, enr_wall_ms, &out, &err);
        }
    printf("batches %zu\n", n);
    for (size_t i = 0; i < n; i++)
        enr_buf_free(&body[i]);
    enr_batch_free(&batch);
    enr_buf_free(&out);
    return 0;
}

int main(int argc, char **argv)
{
    enr_engine *e;
    enr_buf big = {0}, small = {0}, file = {0};

    if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: bench-engine                    time the generated batches\n"
               "       bench-engine --once big|small|none|FILE\n"
               "       bench-engine --trace FILE | --once-trace FILE | --once-trace-none FILE\n"
               "       bench-engine --dump big|small   print a generated batch\n");
        return 0;
    }
    e = enr_engine_new();
    if (e == NULL) {
        fprintf(stderr, "bench-engine: engine init failed\n");
        return 1;
    }
    if (argc == 3 && strncmp(argv[1], "--once-trace", 12) == 0) {
        int r = once_trace(e, argv[2], strcmp(argv[1], "--once-trace") == 0);

        enr_engine_free(e);
        return r;
    }
    if (argc == 3 && strcmp(argv[1], "--trace") == 0) {
        bench_trace(e, argv[2]);
        enr_engine_free(e);
        return 0;
    }
    gen(&big, 200, 400 * 1024);
    gen(&small, 50, 80 * 1024);
    if (argc == 3 && strcmp(argv[1], "--once") == 0) {
        const char *which = argv[2];
        const enr_buf *b = strcmp(which, "small") == 0 ? &small : &big;
        enr_batch batch = {0};
        enr_buf out = {0};
        enr_error err;

        if (strcmp(which, "small") != 0 && strcmp(which, "big") != 0 &&
            strcmp(which, "none") != 0) {
            if (load(which, &file) != 0) {
                fprintf(stderr, "bench-engine: cannot read %s\n", which);
                return 1;
            }
            b = &file;
            /* Its own warm-up first: lazily built tables belong to it. */
            enr_parse(e, file.data, file.len, 0, &batch, &err);
            enr_emit(e, &batch, enr_wall_ms, &out, &err);
            enr_buf_reset(&out);
        }
        /* A warm-up on the big batch always runs; "none" stops there, so
         * callgrind's difference between a case and "none" is exactly one
         * warm batch. */
        enr_parse(e, big.data, big.len, 0, &batch, &err);
        enr_emit(e, &batch, enr_wall_ms, &out, &err);
        if (strcmp(argv[2], "none") != 0) {
            enr_buf_reset(&out);
            enr_parse(e, b->data, b->len, 0, &batch, &err);
            enr_emit(e, &batch, enr_wall_ms, &out, &err);
        }
        enr_batch_free(&batch);
        enr_buf_free(&out);
        enr_buf_free(&file);
        enr_buf_free(&big);
        enr_buf_free(&small);
        enr_engine_free(e);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--dump") == 0) {
        const enr_buf *b = strcmp(argv[2], "small") == 0 ? &small : &big;

        fwrite(b->data, 1, b->len, stdout);
        enr_buf_free(&big);
        enr_buf_free(&small);
        enr_engine_free(e);
        return 0;
    }
    printf("engine: parse + normalize + hash + print, per batch (memchr: one pass, same bytes)\n");
    bench(e, "200 records ~400 KB", &big);
    bench(e, "50 records ~80 KB", &small);
    enr_engine_free(e);
    enr_buf_free(&big);
    enr_buf_free(&small);
    return 0;
}
