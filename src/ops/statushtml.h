/*
 * statushtml.h: GET /status?html, the pool on one page for a browser
 * (php-fpm's ?html), and the history its charts draw.
 *
 * The page is self-contained: no script, no external resource (styles
 * inline, charts as inline SVG drawn here), so it works from a host with
 * no network and under a Content-Security-Policy of default-src 'none'; it
 * refreshes itself (meta refresh).
 */
#ifndef ENR_STATUSHTML_H
#define ENR_STATUSHTML_H

#include <json-c/json.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/scoreboard.h"
#include "ops/health.h"

#define ENR_STATUS_HIST_SAMPLES 300 /* one a second: the last five minutes */
#define ENR_STATUS_HTML_REFRESH_S 2

typedef struct enr_status_sample {
    uint64_t at_ms;     /* CLOCK_MONOTONIC */
    uint64_t completed; /* requests answered since start (pool total) */
    double p99_ms;      /* the health window's */
    int healthy;        /* 1, 0, or -1 before the master's first verdict */
    unsigned busy, live;
} enr_status_sample;

/* A ring of samples kept by the status process (it starts empty with
 * each status process: a reload restarts the history). */
typedef struct enr_status_hist {
    enr_status_sample s[ENR_STATUS_HIST_SAMPLES];
    unsigned next, n;
} enr_status_hist;

/* Appends one sample of the scoreboard and the published verdict. */
void enr_status_hist_add(enr_status_hist *h, const enr_scoreboard *sb, const enr_health *health,
                         uint64_t now_ms);

/* Appends the page for doc (a /status?full document) and h to out. */
void enr_status_html(enr_buf *out, json_object *doc, const enr_status_hist *h);

#endif
