/*
 * statushtml.c: the status page for a browser and its history
 * (statushtml.h).
 *
 * The page renders from the document's model (statusmodel.h).
 *
 * Invariants: every string taken from the document is HTML-escaped
 * (request ids come from clients); the page references nothing outside
 * itself; a chart with fewer than two samples says so instead of drawing;
 * the history is written only by the status process's tick.
 */
#include "ops/statushtml.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/statusmodel.h"

#define CHART_W 320
#define CHART_H 80
#define STORE_ROW_MAX 768 /* the store's row: an address, a few numbers */

void enr_status_hist_add(enr_status_hist *h, const enr_scoreboard *sb, const enr_health *health,
                         uint64_t now_ms)
{
    enr_status_sample *x = &h->s[h->next];
    const enr_sb_slot *s;

    memset(x, 0, sizeof *x);
    x->at_ms = now_ms;
    x->completed = ENR_SB_TOTAL(sb, completed);
    x->p99_ms = health ? health->win.p99_ms : 0.0;
    /* Before the master's first verdict there is nothing to draw as one. */
    x->healthy = health == NULL || !health->published ? -1 : health->healthy;
    for (ENR_SB_EACH_SLOT(sb, i, s)) {
        if (!enr_sb_slot_serving(s))
            continue;
        x->live++;
        if (ENR_SB_GET(s->state) == ENR_WS_BUSY)
            x->busy++;
    }
    h->next = (h->next + 1) % ENR_STATUS_HIST_SAMPLES;
    if (h->n < ENR_STATUS_HIST_SAMPLES)
        h->n++;
}

/* The i-th oldest sample. */
static const enr_status_sample *at(const enr_status_hist *h, unsigned i)
{
    return &h->s[(h->next + ENR_STATUS_HIST_SAMPLES - h->n + i) % ENR_STATUS_HIST_SAMPLES];
}

static void esc(enr_buf *b, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<':
            enr_buf_lit(b, "&lt;");
            break;
        case '>':
            enr_buf_lit(b, "&gt;");
            break;
        case '&':
            enr_buf_lit(b, "&amp;");
            break;
        case '"':
            enr_buf_lit(b, "&quot;");
            break;
        case '\'':
            enr_buf_lit(b, "&#39;");
            break;
        default:
            enr_buf_putc(b, (unsigned char)*s < 0x20 ? '?' : *s);
        }
    }
}

/* A value of the model as the page shows it: "-" for none. */
static const char *dash(const char *v)
{
    return v ? v : "-";
}

/* One line chart of vals[0..n) (oldest first) scaled to its maximum. */
static void line_chart(enr_buf *b, const char *id, const char *title, const char *unit,
                       const double *vals, unsigned n)
{
    double max = 0.0;

    for (unsigned i = 0; i < n; i++)
        if (vals[i] > max)
            max = vals[i];
    enr_buf_printf(b, "<figure id=\"%s\"><figcaption>%s: <b>%.1f %s</b> now, max %.1f</figcaption>",
                   id, title, n ? vals[n - 1] : 0.0, unit, max);
    enr_buf_printf(b,
                   "<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" "
                   "aria-label=\"%s\"><rect width=\"%d\" height=\"%d\" class=\"bg\"/>",
                   CHART_W, CHART_H, CHART_W, CHART_H, title, CHART_W, CHART_H);
    if (n < 2) {
        enr_buf_printf(b, "<text x=\"8\" y=\"%d\">collecting samples</text>", CHART_H / 2);
    } else {
        if (max <= 0.0)
            max = 1.0;
        enr_buf_lit(b, "<polyline class=\"line\" points=\"");
        for (unsigned i = 0; i < n; i++)
            enr_buf_printf(b, "%s%.1f,%.1f", i ? " " : "",
                           (double)i * (CHART_W - 1) / (double)(n - 1),
                           (CHART_H - 2) - vals[i] / max * (CHART_H - 6));
        enr_buf_lit(b, "\"/>");
    }
    enr_buf_lit(b, "</svg></figure>\n");
}

static void charts(enr_buf *b, const enr_status_hist *h)
{
    static double v[ENR_STATUS_HIST_SAMPLES];
    unsigned n = h->n > 1 ? h->n - 1 : 0, bad = 0, judged = 0;

    /* throughput: completed requests between consecutive samples */
    for (unsigned i = 0; i < n; i++) {
        const enr_status_sample *a = at(h, i), *z = at(h, i + 1);
        uint64_t dt = z->at_ms > a->at_ms ? z->at_ms - a->at_ms : 0;
        v[i] = dt && z->completed >= a->completed
                   ? (double)(z->completed - a->completed) * 1000.0 / (double)dt
                   : 0.0;
    }
    line_chart(b, "throughput", "Throughput", "req/s", v, n);
    for (unsigned i = 0; i < h->n; i++)
        v[i] = at(h, i)->p99_ms;
    line_chart(b, "latency", "Latency p99 (health window)", "ms", v, h->n);

    /* health: one bar per sample, green healthy, red not */
    for (unsigned i = 0; i < h->n; i++) {
        judged += at(h, i)->healthy >= 0;
        bad += at(h, i)->healthy == 0;
    }
    enr_buf_printf(b,
                   "<figure id=\"health\"><figcaption>Health: <b>%s</b> now, %u of %u samples "
                   "unhealthy</figcaption><svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                   "role=\"img\" aria-label=\"Health\"><rect width=\"%d\" height=\"%d\" "
                   "class=\"bg\"/>",
                   !h->n || at(h, h->n - 1)->healthy < 0 ? "no verdict yet"
                   : at(h, h->n - 1)->healthy            ? "healthy"
                                                         : "unhealthy",
                   bad, judged, CHART_W, CHART_H, CHART_W, CHART_H, CHART_W, CHART_H);
    /* One bar a sample across the width, as the lines spread theirs. */
    for (unsigned i = 0; i < h->n; i++) {
        double w = (double)CHART_W / (double)h->n;
        int hv = at(h, i)->healthy;
        enr_buf_printf(b, "<rect x=\"%.1f\" y=\"4\" width=\"%.1f\" height=\"%d\" class=\"%s\"/>",
                       (double)i * w, w > 1.5 ? w - 0.5 : w, CHART_H - 8,
                       hv < 0   ? "none"
                       : hv > 0 ? "ok"
                                : "bad");
    }
    enr_buf_lit(b, "</svg></figure>\n");
}

static void row(enr_buf *b, const char *k, const char *v)
{
    enr_buf_lit(b, "<tr><th>");
    esc(b, k);
    enr_buf_lit(b, "</th><td>");
    esc(b, v);
    enr_buf_lit(b, "</td></tr>\n");
}

/* The fleet's shared store in one row: its state (off without one),
 * where, its round trip, its errors and the units its leases hold. */
static void store_row(enr_buf *b, const enr_status_model *m)
{
    const enr_sm_store *st = &m->store;
    char v[STORE_ROW_MAX];
    size_t n;

    if (!m->has_store) {
        row(b, "shared store", enr_sm_store_states[ENR_SM_SS_off]);
        return;
    }
    n = (size_t)snprintf(v, sizeof v, "%s %s, round trip %s us, errors %s, timeouts %s, lease held",
                         dash(st->v[ENR_SM_S_state]), dash(st->v[ENR_SM_S_address]),
                         dash(st->row[ENR_STORE_ROW_rtt_us]), dash(st->row[ENR_STORE_ROW_errors]),
                         dash(st->row[ENR_STORE_ROW_timeouts]));
    for (unsigned i = 0; i < st->n_leases && n < sizeof v; i++)
        n += (size_t)snprintf(v + n, sizeof v - n, " %s %s", dash(st->lease[i].source),
                              dash(st->lease[i].units));
    if (st->n_leases == 0 && n < sizeof v)
        snprintf(v + n, sizeof v - n, " -");
    row(b, "shared store", v);
}

static void summary(enr_buf *b, const enr_status_model *m)
{
    static const unsigned char keys[] = {ENR_SM_P_state,         ENR_SM_P_generation,
                                         ENR_SM_P_start_since,   ENR_SM_P_accepted,
                                         ENR_SM_P_completed,     ENR_SM_P_lost,
                                         ENR_SM_P_listen_queue,  ENR_SM_P_max_listen_queue,
                                         ENR_SM_P_active,        ENR_SM_P_idle,
                                         ENR_SM_P_total,         ENR_SM_P_slow,
                                         ENR_SM_P_restarts_total};
    const char *reason = dash(m->health[ENR_SM_H_reason]);
    char v[160];

    enr_buf_lit(b, "<table class=\"kv\">\n");
    snprintf(v, sizeof v, "%s%s%s", dash(m->health[ENR_SM_H_status]),
             strcmp(reason, "-") ? ": " : "", strcmp(reason, "-") ? reason : "");
    row(b, "health", v);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        row(b, enr_sm_pool_keys[keys[i]], dash(m->pool[keys[i]]));
    snprintf(v, sizeof v, "2xx %s, 4xx %s, 5xx %s", dash(m->resp[ENR_SM_R_s2xx]),
             dash(m->resp[ENR_SM_R_s4xx]), dash(m->resp[ENR_SM_R_s5xx]));
    row(b, "responses", v);
    snprintf(v, sizeof v, "mean %s ms, p50 %s, p99 %s (since start), window p99 %s",
             dash(m->lat[ENR_SM_L_mean_ms]), dash(m->lat[ENR_SM_L_p50_ms]),
             dash(m->lat[ENR_SM_L_p99_ms]), dash(m->lat[ENR_SM_L_window_p99_ms]));
    row(b, "latency", v);
    if (m->pause_ms_left > 0) {
        /* Every call of the host stopped (quota.h): said, with its end. */
        snprintf(v, sizeof v,
                 "paused until %s (%" PRIu64 " s left): no provider calls; a HUP of the "
                 "master ends the pause",
                 dash(m->pause_until), (m->pause_ms_left + 999) / 1000);
        row(b, "upstream", v);
    } else {
        row(b, "upstream", "not paused");
    }
    store_row(b, m);
    enr_buf_lit(b, "</table>\n");
}

static void cell(enr_buf *b, const char *v)
{
    enr_buf_lit(b, "<td>");
    esc(b, v);
    enr_buf_lit(b, "</td>");
}

static void worker_row(enr_buf *b, const enr_sm_proc *p)
{
    const char *const *v = p->v, *const *l = p->last;
    char io[64];

    enr_buf_printf(b, "<tr class=\"%s\">",
                   strcmp(dash(v[ENR_SM_W_state]), "busy") == 0 ? "busy" : "w");
    cell(b, dash(v[ENR_SM_W_slot]));
    cell(b, dash(v[ENR_SM_W_pid]));
    cell(b, dash(v[ENR_SM_W_state]));
    cell(b, dash(v[ENR_SM_W_requests]));
    cell(b, dash(v[ENR_SM_W_rss_kb]));
    cell(b, dash(v[ENR_SM_W_fds]));
    cell(b, dash(v[ENR_SM_W_request_id]));
    cell(b, dash(l[ENR_SM_LR_status]));
    cell(b, dash(l[ENR_SM_LR_duration_ms]));
    cell(b, dash(l[ENR_SM_LR_cpu_ms]));
    cell(b, dash(l[ENR_SM_LR_rss_kb]));
    snprintf(io, sizeof io, "%s/%s", dash(l[ENR_SM_LR_records_in]), dash(l[ENR_SM_LR_records_out]));
    cell(b, p->has_last ? io : "-");
    cell(b, dash(l[ENR_SM_LR_request_id]));
    cell(b, dash(p->exit[ENR_SM_X_reason]));
    enr_buf_lit(b, "</tr>\n");
}

static void workers(enr_buf *b, const enr_status_model *m)
{
    enr_buf_lit(b, "<h2>Workers</h2>\n<table id=\"workers\"><tr><th>slot</th><th>pid</th>"
                   "<th>state</th><th>requests</th><th>RSS KiB</th><th>fds</th>"
                   "<th>request</th><th>last status</th><th>last ms</th><th>last CPU ms</th>"
                   "<th>RSS after</th><th>records in/out</th><th>last request id</th>"
                   "<th>last exit</th></tr>\n");
    for (size_t i = 0; i < m->n_procs; i++)
        worker_row(b, &m->proc[i]);
    enr_buf_lit(b, "</table>\n");
    if (m->n_empty == 0)
        return;
    enr_buf_lit(b, "<p>Empty slots:");
    for (size_t i = 0; i < m->n_empty; i++) {
        enr_buf_lit(b, " ");
        esc(b, dash(m->empty[i].v[ENR_SM_W_slot]));
        enr_buf_lit(b, " (last exit ");
        esc(b, dash(m->empty[i].exit[ENR_SM_X_reason]));
        enr_buf_lit(b, ")");
    }
    enr_buf_lit(b, "</p>\n");
}

/* The upstream's sources, one row each, one column per counter of the
 * table (base/upcounters.h): a counter added there shows here. */
static void sources(enr_buf *b, const enr_status_model *m)
{
    if (m->n_sources == 0)
        return;
    enr_buf_lit(b, "<h2>Upstream sources</h2>\n<table id=\"sources\"><tr><th>source</th>");
    for (unsigned r = 0; r < ENR_UP_NCOUNTERS; r++) {
        const enr_up_counter_row *row = &enr_up_counter_rows[r];
        enr_buf_lit(b, "<th>");
        esc(b, row->kind[0] ? row->kind : row->field);
        enr_buf_lit(b, "</th>");
    }
    enr_buf_lit(b, "<th>breakers open</th><th>pause</th></tr>\n");
    for (unsigned s = 0; s < m->n_sources; s++) {
        const enr_sm_source *one = &m->source[s];
        const char *const *pause = one->pause;
        char p[160];
        if (!one->is_object)
            continue;
        enr_buf_lit(b, "<tr>");
        cell(b, one->name);
        for (unsigned r = 0; r < ENR_UP_NCOUNTERS; r++)
            cell(b, dash(one->counter[r]));
        cell(b, dash(one->breakers_open));
        if (strcmp(dash(pause[ENR_SM_PA_paused]), "true") == 0)
            snprintf(p, sizeof p, "%s %s until %s", dash(pause[ENR_SM_PA_why]),
                     dash(pause[ENR_SM_PA_reason]), dash(pause[ENR_SM_PA_until]));
        else
            snprintf(p, sizeof p, "-");
        cell(b, p);
        enr_buf_lit(b, "</tr>\n");
    }
    enr_buf_lit(b, "</table>\n");
}

/* The day's budget of the sources that have one, one column per row of
 * its table (budget.h). */
static void budgets(enr_buf *b, const enr_status_model *m)
{
    int head = 0;

    for (unsigned s = 0; s < m->n_sources; s++) {
        const enr_sm_source *one = &m->source[s];
        if (!one->has_budget)
            continue;
        if (!head) {
            enr_buf_lit(b, "<h2>Daily budget</h2>\n<table id=\"budget\"><tr><th>source</th>");
            for (unsigned r = 0; r < ENR_BUDGET_NFIELDS; r++) {
                enr_buf_lit(b, "<th>");
                esc(b, enr_budget_rows[r].field);
                enr_buf_lit(b, "</th>");
            }
            enr_buf_lit(b, "<th>resets</th><th>forecast</th></tr>\n");
            head = 1;
        }
        enr_buf_lit(b, "<tr>");
        cell(b, one->name);
        for (unsigned r = 0; r < ENR_BUDGET_NFIELDS; r++)
            cell(b, dash(one->budget_row[r]));
        cell(b, dash(one->budget[ENR_SM_B_resets]));
        cell(b, strcmp(dash(one->budget[ENR_SM_B_runs_out]), "true") == 0
                    ? "runs out before the day ends"
                    : "lasts the day");
        enr_buf_lit(b, "</tr>\n");
    }
    if (head)
        enr_buf_lit(b, "</table>\n");
}

void enr_status_html(enr_buf *b, json_object *doc, const enr_status_hist *h)
{
    enr_status_model *m = malloc(sizeof *m);

    if (m == NULL) {
        b->oom = 1;
        return;
    }
    enr_status_model_read(m, doc);
    enr_buf_printf(b,
                   "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                   "<meta http-equiv=\"refresh\" content=\"%d\">"
                   "<title>enrichd status</title><style>"
                   "body{font:14px sans-serif;margin:1em;color:#222}"
                   "h1{font-size:18px}h2{font-size:16px}"
                   "figure{display:inline-block;vertical-align:top;margin:0 1em 1em 0}"
                   "figcaption{font-size:12px}"
                   ".bg{fill:#f4f4f4}.line{fill:none;stroke:#1f6fb2;stroke-width:1.5}"
                   ".ok{fill:#3a9d3a}.bad{fill:#d33}.none{fill:#bbb}"
                   "table{border-collapse:collapse;font-size:12px}"
                   "th,td{border:1px solid #ccc;padding:2px 6px;text-align:left}"
                   "tr.busy{background:#fff4d6}"
                   "</style></head><body>\n",
                   ENR_STATUS_HTML_REFRESH_S);
    enr_buf_lit(b, "<h1>enrichd: pool ");
    esc(b, dash(m->pool[ENR_SM_P_pool]));
    enr_buf_lit(b, ", ");
    esc(b, dash(m->health[ENR_SM_H_status]));
    enr_buf_lit(b, "</h1>\n<section id=\"charts\">\n");
    charts(b, h);
    enr_buf_lit(b, "</section>\n");
    summary(b, m);
    sources(b, m);
    budgets(b, m);
    workers(b, m);
    enr_buf_printf(b,
                   "<p><small>Refreshes every %d s; the charts span the last %u samples (one a "
                   "second, since the status process started). JSON: <a href=\"?full\">?full</a>, "
                   "text: <a href=\"?text&amp;full\">?text&amp;full</a>.</small></p>\n"
                   "</body></html>\n",
                   ENR_STATUS_HTML_REFRESH_S, h->n);
    free(m);
}
