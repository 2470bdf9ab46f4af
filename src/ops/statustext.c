/*
 * statustext.c: a status document as plain text for humans (statustext.h).
 *
 * Invariants: every string taken from the document goes through clean(),
 * which truncates it to the column's buffer and replaces C0 and C1
 * control characters and DEL by '?', so a hostile document cannot move
 * the cursor, retitle or otherwise drive the operator's terminal, nor fake
 * lines with embedded newlines; keys are truncated, never overflowed;
 * nesting is bounded by the parser (ENR_STATUS_DOC_MAX_DEPTH), so the
 * recursion in text_flat() is too.
 */
#include "ops/statustext.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/upcounters.h"
#include "upstream/budget.h"

#define KEY_MAX 128   /* a flattened key ("upstream.breaker.state") */
#define VALUE_MAX 512 /* one value on a line */

/* Copies s (NULL: "") into dst[cap], truncated, with control characters
 * replaced; returns dst. */
static const char *clean(char *dst, size_t cap, const char *s)
{
    size_t i = 0;

    if (s == NULL)
        s = "";
    for (; *s != '\0' && i + 1 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch < 0x20 || ch == 0x7f) {
            dst[i++] = '?';
        } else if (ch == 0xc2 && (unsigned char)s[1] >= 0x80 && (unsigned char)s[1] <= 0x9f) {
            dst[i++] = '?'; /* U+0080..U+009F: C1 controls (8-bit CSI among them) */
            s++;
        } else {
            dst[i++] = (char)ch;
        }
    }
    /* A cut inside a UTF-8 sequence would leave a partial character. */
    while (i > 0 && ((unsigned char)dst[i - 1] & 0xc0) == 0x80 && *s != '\0')
        i--;
    if (i > 0 && (unsigned char)dst[i - 1] >= 0xc0 && *s != '\0')
        i--;
    dst[i] = '\0';
    return dst;
}

static const char *jstr(json_object *o, const char *k, const char *dflt, char *dst, size_t cap)
{
    json_object *v;

    if (!json_object_object_get_ex(o, k, &v) || json_object_is_type(v, json_type_null))
        return clean(dst, cap, dflt);
    return clean(dst, cap, json_object_get_string(v));
}

/* key: value lines, nested objects flattened with dots. */
static void text_flat(enr_buf *b, const char *prefix, json_object *o)
{
    json_object_object_foreach(o, k, val)
    {
        char key[KEY_MAX], ck[KEY_MAX], label[KEY_MAX + 1], v[VALUE_MAX];
        if (strcmp(k, "processes") == 0 || strcmp(k, "empty_slots") == 0)
            continue;
        snprintf(key, sizeof key, "%s%s%s", prefix, prefix[0] ? "." : "", k);
        if (json_object_is_type(val, json_type_object)) {
            text_flat(b, key, val);
            continue;
        }
        snprintf(label, sizeof label, "%s:", clean(ck, sizeof ck, key));
        enr_buf_printf(b, "%-34s ", label);
        if (json_object_is_type(val, json_type_array)) {
            size_t n = json_object_array_length(val);
            for (size_t i = 0; i < n; i++)
                enr_buf_printf(
                    b, "%s%s", i ? ", " : "",
                    clean(v, sizeof v, json_object_get_string(json_object_array_get_idx(val, i))));
        } else {
            enr_buf_printf(b, "%s", clean(v, sizeof v, json_object_get_string(val)));
        }
        enr_buf_printf(b, "\n");
    }
}

/* "crash pid 12 req ID age MS", or "-" when the slot's worker never ended. */
static void last_exit_text(json_object *p, char *dst, size_t cap)
{
    json_object *last = NULL;
    char c[4][64];

    snprintf(dst, cap, "-");
    if (json_object_object_get_ex(p, "last_exit", &last) &&
        json_object_is_type(last, json_type_object) &&
        strcmp(jstr(last, "reason", "none", c[0], sizeof c[0]), "none") != 0) {
        const char *rid = jstr(last, "request_id", "", c[2], sizeof c[2]);
        snprintf(dst, cap, "%s pid %s%s%s%s%s", c[0], jstr(last, "pid", "?", c[1], sizeof c[1]),
                 *rid ? " req " : "", rid, *rid ? " age " : "",
                 *rid ? jstr(last, "request_age_ms", "0", c[3], 24) : "");
    }
}

/* The last request of each worker, php-fpm's "last request" columns,
 * printed after the table (which keeps its columns for old readers).
 * Called with the header just printed; prints its own header first. */
static void last_table(enr_buf *b, json_object *procs)
{
    int any = 0;

    for (size_t i = 0; i < json_object_array_length(procs); i++) {
        json_object *p = json_object_array_get_idx(procs, i), *l;
        char c[9][64];
        if (!json_object_is_type(p, json_type_object) ||
            !json_object_object_get_ex(p, "last_request", &l) ||
            !json_object_is_type(l, json_type_object))
            continue;
        if (!any)
            enr_buf_printf(b, "\n%-4s %-8s %6s %10s %9s %10s %8s %8s  %s\n", "SLOT", "PID",
                           "STATUS", "LAST_MS", "CPU_MS", "RSS_AFTER", "REC_IN", "REC_OUT",
                           "LAST_REQUEST_ID");
        any = 1;
        enr_buf_printf(
            b, "%-4s %-8s %6s %10s %9s %10s %8s %8s  %s\n", jstr(p, "slot", "?", c[0], sizeof c[0]),
            jstr(l, "pid", "-", c[1], sizeof c[1]), jstr(l, "status", "-", c[2], sizeof c[2]),
            jstr(l, "duration_ms", "-", c[3], sizeof c[3]),
            jstr(l, "cpu_ms", "-", c[4], sizeof c[4]), jstr(l, "rss_kb", "-", c[5], sizeof c[5]),
            jstr(l, "records_in", "-", c[6], sizeof c[6]),
            jstr(l, "records_out", "-", c[7], sizeof c[7]),
            jstr(l, "request_id", "-", c[8], sizeof c[8]));
    }
}

static void tables(enr_buf *b, json_object *doc);

/* The provider's pause, first and in words while it holds: every call
 * of the host stopped until then (statusdoc.c, quota.h). */
static void pause_line(enr_buf *b, json_object *doc)
{
    json_object *up, *left;
    char until[VALUE_MAX];

    if (!json_object_object_get_ex(doc, "upstream", &up) ||
        !json_object_is_type(up, json_type_object) ||
        !json_object_object_get_ex(up, "pause_ms_left", &left) || json_object_get_uint64(left) == 0)
        return;
    enr_buf_printf(b,
                   "upstream paused until %s (%" PRIu64 " s left): no provider calls; "
                   "a HUP of the master ends the pause\n",
                   jstr(up, "pause_until", "-", until, sizeof until),
                   (json_object_get_uint64(left) + 999) / 1000);
}

void enr_status_text(enr_buf *b, json_object *doc)
{
    if (!json_object_is_type(doc, json_type_object))
        return;
    pause_line(b, doc);
    text_flat(b, "", doc);
    tables(b, doc);
}

/* The upstream's sources side by side: one line per counter of the
 * table (base/upcounters.h), one column per source in use. */
static void sources_table(enr_buf *b, json_object *doc)
{
    json_object *up, *srcs;
    char k[KEY_MAX], v[VALUE_MAX];

    if (!json_object_object_get_ex(doc, "upstream", &up) ||
        !json_object_object_get_ex(up, "sources", &srcs) ||
        !json_object_is_type(srcs, json_type_object) || json_object_object_length(srcs) == 0)
        return;
    enr_buf_printf(b, "\n%-16s", "UPSTREAM");
    json_object_object_foreach(srcs, name, one)
    {
        (void)one;
        enr_buf_printf(b, " %12s", clean(k, sizeof k, name));
    }
    enr_buf_printf(b, "\n");
    for (unsigned r = 0; r < ENR_UP_NCOUNTERS; r++) {
        const enr_up_counter_row *row = &enr_up_counter_rows[r];
        enr_buf_printf(b, "%-16s", row->kind[0] ? row->kind : row->field);
        json_object_object_foreach(srcs, n2, o2)
        {
            json_object *f = NULL;
            (void)n2;
            if (row->kind[0] && json_object_object_get_ex(o2, "failures", &f))
                o2 = f;
            enr_buf_printf(b, " %12s", jstr(o2, row->kind[0] ? row->kind : row->field, "-", v, 13));
        }
        enr_buf_printf(b, "\n");
    }
    json_object_object_foreach(srcs, n3, o3)
    {
        json_object *p;
        char why[64], reason[64], until[64];
        if (!json_object_object_get_ex(o3, "pause", &p) ||
            strcmp(jstr(p, "paused", "false", why, sizeof why), "true") != 0)
            continue;
        enr_buf_printf(b, "%s paused: %s %s until %s\n", clean(k, sizeof k, n3),
                       jstr(p, "why", "-", why, sizeof why),
                       jstr(p, "reason", "-", reason, sizeof reason),
                       jstr(p, "until", "-", until, sizeof until));
    }
    /* The day's budget of each source that has one (budget.h's rows). */
    json_object_object_foreach(srcs, n4, o4)
    {
        json_object *bd;
        char when[64], out[8];
        if (!json_object_object_get_ex(o4, "budget", &bd))
            continue;
        enr_buf_printf(b, "%s budget:", clean(k, sizeof k, n4));
        for (unsigned r = 0; r < ENR_BUDGET_NFIELDS; r++)
            enr_buf_printf(b, " %s %s", enr_budget_rows[r].field,
                           jstr(bd, enr_budget_rows[r].field, "-", v, 24));
        enr_buf_printf(b, " resets %s%s\n", jstr(bd, "resets", "-", when, sizeof when),
                       strcmp(jstr(bd, "runs_out", "false", out, sizeof out), "true") == 0
                           ? "  FORECAST: runs out before the day ends"
                           : "");
    }
}

/* One line of top-level numbers, "key: value" pairs, for the screen. */
static void top_line(enr_buf *b, json_object *o, const char *const *keys, size_t n)
{
    char k[KEY_MAX], v[VALUE_MAX];

    for (size_t i = 0; i < n; i++)
        enr_buf_printf(b, "%s%s: %s", i ? "   " : "", clean(k, sizeof k, keys[i]),
                       jstr(o, keys[i], "-", v, sizeof v));
    enr_buf_printf(b, "\n");
}

void enr_status_text_top(enr_buf *b, json_object *doc)
{
    static const char *const l1[] = {
        "state",         "generation", "start since", "workers_configured", "active processes",
        "idle processes"};
    static const char *const l2[] = {"accepted conn", "completed",        "in_flight",    "lost",
                                     "listen queue",  "max listen queue", "slow requests"};
    static const char *const l3[] = {"status", "reason"};
    static const char *const l4[] = {"mean_ms", "p50_ms", "p99_ms", "window_p99_ms"};
    static const char *const l5[] = {"2xx", "4xx", "5xx"};
    json_object *o;

    if (!json_object_is_type(doc, json_type_object))
        return;
    top_line(b, doc, l1, sizeof l1 / sizeof l1[0]);
    top_line(b, doc, l2, sizeof l2 / sizeof l2[0]);
    if (json_object_object_get_ex(doc, "health", &o) && json_object_is_type(o, json_type_object)) {
        enr_buf_printf(b, "health ");
        top_line(b, o, l3, json_object_object_get_ex(o, "reason", NULL) ? 2 : 1);
    }
    if (json_object_object_get_ex(doc, "responses", &o) &&
        json_object_is_type(o, json_type_object)) {
        enr_buf_printf(b, "responses ");
        top_line(b, o, l5, sizeof l5 / sizeof l5[0]);
    }
    if (json_object_object_get_ex(doc, "latency", &o) && json_object_is_type(o, json_type_object)) {
        enr_buf_printf(b, "latency ");
        top_line(b, o, l4, sizeof l4 / sizeof l4[0]);
    }
    pause_line(b, doc);
    sources_table(b, doc);
    tables(b, doc);
}

/* The workers' tables of a ?full document (nothing without one). */
static void tables(enr_buf *b, json_object *doc)
{
    json_object *procs, *empty;

    if (!json_object_object_get_ex(doc, "processes", &procs) ||
        !json_object_is_type(procs, json_type_array))
        return;
    enr_buf_printf(b, "\n%-4s %-8s %-8s %8s %9s %8s %6s  %-24s %s\n", "SLOT", "PID", "STATE",
                   "REQS", "REQ_AGE", "RSS_KB", "FDS", "REQUEST_ID", "LAST_EXIT");

    for (size_t i = 0; i < json_object_array_length(procs); i++) {
        json_object *p = json_object_array_get_idx(procs, i);
        char age[32] = "-", lastexit[192], c[9][64];
        if (!json_object_is_type(p, json_type_object))
            continue;
        if (json_object_object_get_ex(p, "request_age_ms", NULL))
            snprintf(age, sizeof age, "%sms", jstr(p, "request_age_ms", "0", c[0], 24));
        last_exit_text(p, lastexit, sizeof lastexit);
        enr_buf_printf(
            b, "%-4s %-8s %-8s %8s %9s %8s %6s  %-24s %s\n",
            jstr(p, "slot", "?", c[0], sizeof c[0]), jstr(p, "pid", "-", c[1], sizeof c[1]),
            jstr(p, "state", "?", c[2], sizeof c[2]), jstr(p, "requests", "0", c[3], sizeof c[3]),
            age, jstr(p, "rss_kb", "-", c[4], sizeof c[4]), jstr(p, "fds", "-", c[5], sizeof c[5]),
            jstr(p, "request_id", "-", c[6], sizeof c[6]), lastexit);
    }
    last_table(b, procs);
    if (json_object_object_get_ex(doc, "empty_slots", &empty) &&
        json_object_is_type(empty, json_type_array) && json_object_array_length(empty) > 0) {
        enr_buf_printf(b, "\n");
        for (size_t i = 0; i < json_object_array_length(empty); i++) {
            json_object *p = json_object_array_get_idx(empty, i);
            char slot[64], lastexit[192];
            if (!json_object_is_type(p, json_type_object))
                continue;
            last_exit_text(p, lastexit, sizeof lastexit);
            enr_buf_printf(b, "slot %s: empty, last exit %s\n",
                           jstr(p, "slot", "?", slot, sizeof slot), lastexit);
        }
    }
    /* The leak attribution, one sentence per live worker. */
    enr_buf_printf(b, "\n");
    for (size_t i = 0; i < json_object_array_length(procs); i++) {
        json_object *p = json_object_array_get_idx(procs, i), *k;
        char slot[64], sum[VALUE_MAX];
        if (json_object_is_type(p, json_type_object) &&
            json_object_object_get_ex(p, "fds_by_kind", &k) &&
            json_object_is_type(k, json_type_object))
            enr_buf_printf(b, "worker %s: %s\n", jstr(p, "slot", "?", slot, sizeof slot),
                           jstr(k, "summary", "", sum, sizeof sum));
    }
}

int enr_status_text_parse(enr_buf *out, const char *body, size_t len)
{
    return enr_status_text_parse_as(out, body, len, enr_status_text);
}

int enr_status_text_parse_as(enr_buf *out, const char *body, size_t len,
                             void (*render)(enr_buf *out, json_object *doc))
{
    json_tokener *tok;
    json_object *doc;
    int rc = -1;

    if (len > ENR_STATUS_DOC_MAX_BYTES || len > (size_t)INT_MAX)
        return -1;
    tok = json_tokener_new_ex(ENR_STATUS_DOC_MAX_DEPTH);
    if (tok == NULL)
        return -1;
    doc = json_tokener_parse_ex(tok, body, (int)len);
    /* One whole object: a document cut short, or followed by bytes, is not one. */
    if (doc != NULL && json_tokener_get_error(tok) == json_tokener_success &&
        json_object_is_type(doc, json_type_object)) {
        size_t used = json_tokener_get_parse_end(tok);
        while (used < len && strchr(" \t\r\n", body[used]) != NULL && body[used] != '\0')
            used++;
        if (used == len) {
            render(out, doc);
            rc = 0;
        }
    }
    json_object_put(doc);
    json_tokener_free(tok);
    return rc;
}
