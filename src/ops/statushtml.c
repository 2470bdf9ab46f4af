/*
 * statushtml.c: the status page for a browser and its history
 * (statushtml.h).
 *
 * Invariants: every string taken from the document is HTML-escaped
 * (request ids come from clients); the page references nothing outside
 * itself; a chart with fewer than two samples says so instead of drawing;
 * the history is written only by the status process's tick.
 */
#include "ops/statushtml.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/upcounters.h"
#include "upstream/budget.h"

#define CHART_W 320
#define CHART_H 80

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

static const char *str_of(json_object *o, const char *k)
{
    json_object *v;

    if (o == NULL || !json_object_object_get_ex(o, k, &v) || json_object_is_type(v, json_type_null))
        return "-";
    return json_object_get_string(v);
}

static json_object *obj_of(json_object *o, const char *k)
{
    json_object *v;

    return o && json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_object)
               ? v
               : NULL;
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

static void summary(enr_buf *b, json_object *doc)
{
    static const char *const keys[] = {"state",          "generation",       "start since",
                                       "accepted conn",  "completed",        "lost",
                                       "listen queue",   "max listen queue", "active processes",
                                       "idle processes", "total processes",  "slow requests",
                                       "restarts_total"};
    json_object *health = obj_of(doc, "health"), *lat = obj_of(doc, "latency");
    json_object *resp = obj_of(doc, "responses"), *up = obj_of(doc, "upstream"), *o;
    uint64_t left;
    char v[160];

    enr_buf_lit(b, "<table class=\"kv\">\n");
    snprintf(v, sizeof v, "%s%s%s", str_of(health, "status"),
             strcmp(str_of(health, "reason"), "-") ? ": " : "",
             strcmp(str_of(health, "reason"), "-") ? str_of(health, "reason") : "");
    row(b, "health", v);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        row(b, keys[i], str_of(doc, keys[i]));
    snprintf(v, sizeof v, "2xx %s, 4xx %s, 5xx %s", str_of(resp, "2xx"), str_of(resp, "4xx"),
             str_of(resp, "5xx"));
    row(b, "responses", v);
    snprintf(v, sizeof v, "mean %s ms, p50 %s, p99 %s (since start), window p99 %s",
             str_of(lat, "mean_ms"), str_of(lat, "p50_ms"), str_of(lat, "p99_ms"),
             str_of(lat, "window_p99_ms"));
    row(b, "latency", v);
    left = up != NULL && json_object_object_get_ex(up, "pause_ms_left", &o)
               ? json_object_get_uint64(o)
               : 0;
    if (left > 0) {
        /* Every call of the host stopped (quota.h): said, with its end. */
        snprintf(v, sizeof v,
                 "paused until %s (%" PRIu64 " s left): no provider calls; a HUP of the "
                 "master ends the pause",
                 str_of(up, "pause_until"), (left + 999) / 1000);
        row(b, "upstream", v);
    } else {
        row(b, "upstream", "not paused");
    }
    enr_buf_lit(b, "</table>\n");
}

static void cell(enr_buf *b, const char *v)
{
    enr_buf_lit(b, "<td>");
    esc(b, v);
    enr_buf_lit(b, "</td>");
}

static void workers(enr_buf *b, json_object *doc)
{
    json_object *procs, *empty;

    enr_buf_lit(b, "<h2>Workers</h2>\n<table id=\"workers\"><tr><th>slot</th><th>pid</th>"
                   "<th>state</th><th>requests</th><th>RSS KiB</th><th>fds</th>"
                   "<th>request</th><th>last status</th><th>last ms</th><th>last CPU ms</th>"
                   "<th>RSS after</th><th>records in/out</th><th>last request id</th>"
                   "<th>last exit</th></tr>\n");
    if (json_object_object_get_ex(doc, "processes", &procs) &&
        json_object_is_type(procs, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(procs); i++) {
            json_object *p = json_object_array_get_idx(procs, i);
            json_object *l = obj_of(p, "last_request"), *x = obj_of(p, "last_exit");
            char io[64];
            if (!json_object_is_type(p, json_type_object))
                continue;
            enr_buf_printf(b, "<tr class=\"%s\">",
                           strcmp(str_of(p, "state"), "busy") == 0 ? "busy" : "w");
            cell(b, str_of(p, "slot"));
            cell(b, str_of(p, "pid"));
            cell(b, str_of(p, "state"));
            cell(b, str_of(p, "requests"));
            cell(b, str_of(p, "rss_kb"));
            cell(b, str_of(p, "fds"));
            cell(b, str_of(p, "request_id"));
            cell(b, str_of(l, "status"));
            cell(b, str_of(l, "duration_ms"));
            cell(b, str_of(l, "cpu_ms"));
            cell(b, str_of(l, "rss_kb"));
            snprintf(io, sizeof io, "%s/%s", str_of(l, "records_in"), str_of(l, "records_out"));
            cell(b, l ? io : "-");
            cell(b, str_of(l, "request_id"));
            cell(b, str_of(x, "reason"));
            enr_buf_lit(b, "</tr>\n");
        }
    }
    enr_buf_lit(b, "</table>\n");
    if (json_object_object_get_ex(doc, "empty_slots", &empty) &&
        json_object_is_type(empty, json_type_array) && json_object_array_length(empty) > 0) {
        enr_buf_lit(b, "<p>Empty slots:");
        for (size_t i = 0; i < json_object_array_length(empty); i++) {
            json_object *p = json_object_array_get_idx(empty, i);
            enr_buf_lit(b, " ");
            esc(b, str_of(p, "slot"));
            enr_buf_lit(b, " (last exit ");
            esc(b, str_of(obj_of(p, "last_exit"), "reason"));
            enr_buf_lit(b, ")");
        }
        enr_buf_lit(b, "</p>\n");
    }
}

/* The upstream's sources, one row each, one column per counter of the
 * table (base/upcounters.h): a counter added there shows here. */
static void sources(enr_buf *b, json_object *doc)
{
    json_object *srcs = obj_of(obj_of(doc, "upstream"), "sources");

    if (srcs == NULL || json_object_object_length(srcs) == 0)
        return;
    enr_buf_lit(b, "<h2>Upstream sources</h2>\n<table id=\"sources\"><tr><th>source</th>");
    for (unsigned r = 0; r < ENR_UP_NCOUNTERS; r++) {
        const enr_up_counter_row *row = &enr_up_counter_rows[r];
        enr_buf_lit(b, "<th>");
        esc(b, row->kind[0] ? row->kind : row->field);
        enr_buf_lit(b, "</th>");
    }
    enr_buf_lit(b, "<th>breakers open</th><th>pause</th></tr>\n");
    json_object_object_foreach(srcs, name, one)
    {
        json_object *pause = obj_of(one, "pause");
        char p[160];
        if (!json_object_is_type(one, json_type_object))
            continue;
        enr_buf_lit(b, "<tr>");
        cell(b, name);
        for (unsigned r = 0; r < ENR_UP_NCOUNTERS; r++) {
            const enr_up_counter_row *row = &enr_up_counter_rows[r];
            cell(b, row->kind[0] ? str_of(obj_of(one, "failures"), row->kind)
                                 : str_of(one, row->field));
        }
        cell(b, str_of(obj_of(one, "breakers"), "open"));
        if (strcmp(str_of(pause, "paused"), "true") == 0)
            snprintf(p, sizeof p, "%s %s until %s", str_of(pause, "why"), str_of(pause, "reason"),
                     str_of(pause, "until"));
        else
            snprintf(p, sizeof p, "-");
        cell(b, p);
        enr_buf_lit(b, "</tr>\n");
    }
    enr_buf_lit(b, "</table>\n");
}

/* The day's budget of the sources that have one, one column per row of
 * its table (budget.h). */
static void budgets(enr_buf *b, json_object *doc)
{
    json_object *srcs = obj_of(obj_of(doc, "upstream"), "sources");
    int head = 0;

    if (srcs == NULL)
        return;
    json_object_object_foreach(srcs, name, one)
    {
        json_object *bd = obj_of(one, "budget");
        if (bd == NULL)
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
        cell(b, name);
        for (unsigned r = 0; r < ENR_BUDGET_NFIELDS; r++)
            cell(b, str_of(bd, enr_budget_rows[r].field));
        cell(b, str_of(bd, "resets"));
        cell(b, strcmp(str_of(bd, "runs_out"), "true") == 0 ? "runs out before the day ends"
                                                            : "lasts the day");
        enr_buf_lit(b, "</tr>\n");
    }
    if (head)
        enr_buf_lit(b, "</table>\n");
}

void enr_status_html(enr_buf *b, json_object *doc, const enr_status_hist *h)
{
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
    esc(b, str_of(doc, "pool"));
    enr_buf_lit(b, ", ");
    esc(b, str_of(obj_of(doc, "health"), "status"));
    enr_buf_lit(b, "</h1>\n<section id=\"charts\">\n");
    charts(b, h);
    enr_buf_lit(b, "</section>\n");
    summary(b, doc);
    sources(b, doc);
    budgets(b, doc);
    workers(b, doc);
    enr_buf_printf(b,
                   "<p><small>Refreshes every %d s; the charts span the last %u samples (one a "
                   "second, since the status process started). JSON: <a href=\"?full\">?full</a>, "
                   "text: <a href=\"?text&amp;full\">?text&amp;full</a>.</small></p>\n"
                   "</body></html>\n",
                   ENR_STATUS_HTML_REFRESH_S, h->n);
}
