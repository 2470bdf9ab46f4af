/*
 * replay_stats.h: per-request records of enrich-replay and what is
 * reported from them (summaries, side-by-side table, histograms, TSV).
 *
 * Latencies are exact (every request is kept, percentiles come from the
 * sorted values, nearest-rank); the log histogram is only a display.
 */
#ifndef ENR_REPLAY_STATS_H
#define ENR_REPLAY_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum enr_replay_err {
    ENR_RERR_NONE = 0,
    ENR_RERR_CONNECT,   /* connect() failed or refused */
    ENR_RERR_RESET,     /* ECONNRESET / EPIPE while talking */
    ENR_RERR_EOF,       /* peer closed before the response was complete */
    ENR_RERR_TIMEOUT,   /* no complete response within --timeout */
    ENR_RERR_PROTOCOL,  /* unparseable response */
    ENR_RERR_TOO_LARGE, /* an answer longer than --max-answer-bytes */
    ENR_RERR_COUNT
};

extern const char *const enr_replay_err_names[ENR_RERR_COUNT];

typedef struct enr_replay_rec {
    double t_sched; /* seconds since the run started: when it was due */
    uint32_t job;   /* trace entry */
    uint16_t target;
    uint16_t status;  /* 0 when a transport error happened */
    uint32_t lat_us;  /* due -> response complete */
    uint32_t wait_us; /* due -> first byte written (queueing + client lag) */
    uint32_t bytes_out, bytes_in;
    uint8_t err;
    uint8_t capped;   /* waited for a free slot (--concurrency) */
    uint8_t bad_body; /* a 200 whose body failed --check */
} enr_replay_rec;

typedef struct enr_replay_summary {
    const char *name;
    size_t count, ok2xx, st4xx, st5xx, other;
    size_t errs[ENR_RERR_COUNT];
    /* good: a 200 with a whole body (and, with --check, the expected
     * one); its rate and percentiles count nothing else. */
    size_t good, bad_body;
    double good_rps, good_p50, good_p99, good_p999, good_max; /* milliseconds */
    double elapsed_s, rps;
    double mb_out, mb_in;
    double p50, p90, p95, p99, p999, max, mean; /* milliseconds */
    double lag_p50_us, lag_p99_us;              /* client lag, uncapped requests */
    double cpu_ms_per_req;                      /* of the target's pids, or -1 */
} enr_replay_summary;

/* Summarize the records of one target. */
void enr_replay_summarize(const enr_replay_rec *r, size_t n, unsigned target, double elapsed_s,
                          enr_replay_summary *s);

/* Per-target block and, with two targets or more, the side-by-side table
 * (ratios against the first target). */
void enr_replay_print(FILE *f, const enr_replay_summary *s, size_t ns);

/* The log histogram (1-2-5 style buckets, bars) of every target. */
void enr_replay_print_histogram(FILE *f, const enr_replay_rec *r, size_t n,
                                const enr_replay_summary *s, size_t ns);

/* HdrHistogram-style percentile distributions PREFIX.NAME.hgrm, a CDF
 * data file PREFIX.cdf.dat and gnuplot script PREFIX.gp; runs gnuplot
 * (PREFIX.svg) when it is installed.  Returns 0, or -1 with errno. */
int enr_replay_write_plots(const char *prefix, const enr_replay_rec *r, size_t n,
                           const enr_replay_summary *s, size_t ns);

int enr_replay_write_tsv(const char *path, const enr_replay_rec *r, size_t n,
                         const enr_replay_summary *s);

/* A JSON array of the summaries (for scripts/bench.py); client_cpu_us is
 * the replayer's own CPU time per request of the run. */
int enr_replay_write_json(const char *path, const enr_replay_summary *s, size_t ns,
                          const char *mode, double client_cpu_us);

#endif
