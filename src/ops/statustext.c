/*
 * statustext.c: a status document as plain text for humans (statustext.h).
 * The tables and the --watch screen render from the document's model
 * (statusmodel.h); only the key: value listing walks the document
 * itself, since it shows every key whatever it is.
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
#include <stdlib.h>
#include <string.h>

#include "ops/statusmodel.h"

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

/* v cleaned, or dflt when the document has no value there. */
static const char *cv(const char *v, const char *dflt, char *dst, size_t cap)
{
    return clean(dst, cap, v ? v : dflt);
}

/* key: value lines, nested objects flattened with dots. */
static void text_flat(enr_buf *b, const char *prefix, json_object *o)
{
    json_object_object_foreach(o, k, val)
    {
        char key[KEY_MAX], ck[KEY_MAX], label[KEY_MAX + 1], v[VALUE_MAX];
        if (strcmp(k, ENR_SM_NAME(processes)) == 0 || strcmp(k, ENR_SM_NAME(empty_slots)) == 0)
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
static void last_exit_text(const enr_sm_proc *p, char *dst, size_t cap)
{
    const char *const *x = p->exit;
    char c[4][64];

    snprintf(dst, cap, "-");
    if (p->has_exit && strcmp(cv(x[ENR_SM_X_reason], "none", c[0], sizeof c[0]), "none") != 0) {
        const char *rid = cv(x[ENR_SM_X_request_id], "", c[2], sizeof c[2]);
        snprintf(dst, cap, "%s pid %s%s%s%s%s", c[0], cv(x[ENR_SM_X_pid], "?", c[1], sizeof c[1]),
                 *rid ? " req " : "", rid, *rid ? " age " : "",
                 *rid ? cv(x[ENR_SM_X_request_age_ms], "0", c[3], 24) : "");
    }
}

/* The last request of each worker, php-fpm's "last request" columns,
 * printed after the table (which keeps its columns for old readers).
 * Called with the header just printed; prints its own header first. */
static void last_table(enr_buf *b, const enr_status_model *m)
{
    int any = 0;

    for (size_t i = 0; i < m->n_procs; i++) {
        const enr_sm_proc *p = &m->proc[i];
        const char *const *l = p->last;
        char c[9][64];
        if (!p->has_last)
            continue;
        if (!any)
            enr_buf_printf(b, "\n%-4s %-8s %6s %10s %9s %10s %8s %8s  %s\n", "SLOT", "PID",
                           "STATUS", "LAST_MS", "CPU_MS", "RSS_AFTER", "REC_IN", "REC_OUT",
                           "LAST_REQUEST_ID");
        any = 1;
        enr_buf_printf(b, "%-4s %-8s %6s %10s %9s %10s %8s %8s  %s\n",
                       cv(p->v[ENR_SM_W_slot], "?", c[0], sizeof c[0]),
                       cv(l[ENR_SM_LR_pid], "-", c[1], sizeof c[1]),
                       cv(l[ENR_SM_LR_status], "-", c[2], sizeof c[2]),
                       cv(l[ENR_SM_LR_duration_ms], "-", c[3], sizeof c[3]),
                       cv(l[ENR_SM_LR_cpu_ms], "-", c[4], sizeof c[4]),
                       cv(l[ENR_SM_LR_rss_kb], "-", c[5], sizeof c[5]),
                       cv(l[ENR_SM_LR_records_in], "-", c[6], sizeof c[6]),
                       cv(l[ENR_SM_LR_records_out], "-", c[7], sizeof c[7]),
                       cv(l[ENR_SM_LR_request_id], "-", c[8], sizeof c[8]));
    }
}

/* The provider's pause, first and in words while it holds: every call
 * of the host stopped until then (statusdoc.c, quota.h). */
static void pause_line(enr_buf *b, const enr_status_model *m)
{
    char until[VALUE_MAX];

    if (m->pause_ms_left == 0)
        return;
    enr_buf_printf(b,
                   "upstream paused until %s (%" PRIu64 " s left): no provider calls; "
                   "a HUP of the master ends the pause\n",
                   cv(m->pause_until, "-", until, sizeof until), (m->pause_ms_left + 999) / 1000);
}

/* The fleet's shared store in one line: its state (off without one),
 * where, its round trip, its errors and the units its leases hold. */
static void store_line(enr_buf *b, const enr_status_model *m)
{
    const enr_sm_store *st = &m->store;
    char state[64], addr[VALUE_MAX], c[3][32], src[64];

    if (!m->has_store) {
        enr_buf_printf(b, "shared store: %s\n", enr_sm_store_states[ENR_SM_SS_off]);
        return;
    }
    enr_buf_printf(b, "shared store: %s %s, round trip %s us, errors %s, timeouts %s, lease held",
                   cv(st->v[ENR_SM_S_state], "-", state, sizeof state),
                   cv(st->v[ENR_SM_S_address], "-", addr, sizeof addr),
                   cv(st->row[ENR_STORE_ROW_rtt_us], "-", c[0], sizeof c[0]),
                   cv(st->row[ENR_STORE_ROW_errors], "-", c[1], sizeof c[1]),
                   cv(st->row[ENR_STORE_ROW_timeouts], "-", c[2], sizeof c[2]));
    for (unsigned i = 0; i < st->n_leases; i++)
        enr_buf_printf(b, " %s %s", clean(src, sizeof src, st->lease[i].source),
                       cv(st->lease[i].units, "-", c[0], sizeof c[0]));
    enr_buf_printf(b, "%s\n", st->n_leases ? "" : " -");
}

/* The workers' tables of a ?full document (nothing without one). */
static void tables(enr_buf *b, const enr_status_model *m)
{
    if (!m->has_procs)
        return;
    enr_buf_printf(b, "\n%-4s %-8s %-8s %8s %9s %8s %6s  %-24s %s\n", "SLOT", "PID", "STATE",
                   "REQS", "REQ_AGE", "RSS_KB", "FDS", "REQUEST_ID", "LAST_EXIT");
    for (size_t i = 0; i < m->n_procs; i++) {
        const char *const *v = m->proc[i].v;
        char age[32] = "-", lastexit[192], c[9][64];
        if (v[ENR_SM_W_request_age_ms])
            snprintf(age, sizeof age, "%sms", cv(v[ENR_SM_W_request_age_ms], "0", c[0], 24));
        last_exit_text(&m->proc[i], lastexit, sizeof lastexit);
        enr_buf_printf(b, "%-4s %-8s %-8s %8s %9s %8s %6s  %-24s %s\n",
                       cv(v[ENR_SM_W_slot], "?", c[0], sizeof c[0]),
                       cv(v[ENR_SM_W_pid], "-", c[1], sizeof c[1]),
                       cv(v[ENR_SM_W_state], "?", c[2], sizeof c[2]),
                       cv(v[ENR_SM_W_requests], "0", c[3], sizeof c[3]), age,
                       cv(v[ENR_SM_W_rss_kb], "-", c[4], sizeof c[4]),
                       cv(v[ENR_SM_W_fds], "-", c[5], sizeof c[5]),
                       cv(v[ENR_SM_W_request_id], "-", c[6], sizeof c[6]), lastexit);
    }
    last_table(b, m);
    if (m->n_empty > 0)
        enr_buf_printf(b, "\n");
    for (size_t i = 0; i < m->n_empty; i++) {
        char slot[64], lastexit[192];
        last_exit_text(&m->empty[i], lastexit, sizeof lastexit);
        enr_buf_printf(b, "slot %s: empty, last exit %s\n",
                       cv(m->empty[i].v[ENR_SM_W_slot], "?", slot, sizeof slot), lastexit);
    }
    /* The leak attribution, one sentence per live worker. */
    enr_buf_printf(b, "\n");
    for (size_t i = 0; i < m->n_procs; i++) {
        char slot[64], sum[VALUE_MAX];
        if (m->proc[i].has_fds)
            enr_buf_printf(b, "worker %s: %s\n",
                           cv(m->proc[i].v[ENR_SM_W_slot], "?", slot, sizeof slot),
                           cv(m->proc[i].fds_summary, "", sum, sizeof sum));
    }
}

/* The model of doc, or NULL (b marked short) when memory ran out. */
static enr_status_model *model_of(enr_buf *b, json_object *doc)
{
    enr_status_model *m = malloc(sizeof *m);

    if (m == NULL)
        b->oom = 1;
    else
        enr_status_model_read(m, doc);
    return m;
}

void enr_status_text(enr_buf *b, json_object *doc)
{
    enr_status_model *m;

    if (!json_object_is_type(doc, json_type_object) || (m = model_of(b, doc)) == NULL)
        return;
    pause_line(b, m);
    store_line(b, m);
    text_flat(b, "", doc);
    tables(b, m);
    free(m);
}

/* The upstream's sources side by side: one line per counter of the
 * table (base/upcounters.h), one column per source in use. */
static void sources_table(enr_buf *b, const enr_status_model *m)
{
    char k[KEY_MAX], v[VALUE_MAX];

    if (m->n_sources == 0)
        return;
    enr_buf_printf(b, "\n%-16s", "UPSTREAM");
    for (unsigned s = 0; s < m->n_sources; s++)
        enr_buf_printf(b, " %12s", clean(k, sizeof k, m->source[s].name));
    enr_buf_printf(b, "\n");
    for (unsigned r = 0; r < ENR_UP_NCOUNTERS; r++) {
        const enr_up_counter_row *row = &enr_up_counter_rows[r];
        enr_buf_printf(b, "%-16s", row->kind[0] ? row->kind : row->field);
        for (unsigned s = 0; s < m->n_sources; s++)
            enr_buf_printf(b, " %12s", cv(m->source[s].counter[r], "-", v, 13));
        enr_buf_printf(b, "\n");
    }
    for (unsigned s = 0; s < m->n_sources; s++) {
        const char *const *p = m->source[s].pause;
        char why[64], reason[64], until[64];
        if (strcmp(cv(p[ENR_SM_PA_paused], "false", why, sizeof why), "true") != 0)
            continue;
        enr_buf_printf(b, "%s paused: %s %s until %s\n", clean(k, sizeof k, m->source[s].name),
                       cv(p[ENR_SM_PA_why], "-", why, sizeof why),
                       cv(p[ENR_SM_PA_reason], "-", reason, sizeof reason),
                       cv(p[ENR_SM_PA_until], "-", until, sizeof until));
    }
    /* The day's budget of each source that has one (budget.h's rows). */
    for (unsigned s = 0; s < m->n_sources; s++) {
        const enr_sm_source *x = &m->source[s];
        char when[64], out[8];
        if (!x->has_budget)
            continue;
        enr_buf_printf(b, "%s budget:", clean(k, sizeof k, x->name));
        for (unsigned r = 0; r < ENR_BUDGET_NFIELDS; r++)
            enr_buf_printf(b, " %s %s", enr_budget_rows[r].field, cv(x->budget_row[r], "-", v, 24));
        enr_buf_printf(b, " resets %s%s\n", cv(x->budget[ENR_SM_B_resets], "-", when, sizeof when),
                       strcmp(cv(x->budget[ENR_SM_B_runs_out], "false", out, sizeof out), "true") ==
                               0
                           ? "  FORECAST: runs out before the day ends"
                           : "");
    }
}

/* One line of "key: value" pairs, for the screen: the rows idx[0..n) of
 * one of the model's tables. */
static void top_line(enr_buf *b, const char *const *keys, const char *const *vals,
                     const unsigned char *idx, size_t n)
{
    char k[KEY_MAX], v[VALUE_MAX];

    for (size_t i = 0; i < n; i++)
        enr_buf_printf(b, "%s%s: %s", i ? "   " : "", clean(k, sizeof k, keys[idx[i]]),
                       cv(vals[idx[i]], "-", v, sizeof v));
    enr_buf_printf(b, "\n");
}

#define N_OF(a) (sizeof a / sizeof a[0])

void enr_status_text_top(enr_buf *b, json_object *doc)
{
    static const unsigned char l1[] = {ENR_SM_P_state,       ENR_SM_P_generation,
                                       ENR_SM_P_start_since, ENR_SM_P_workers_configured,
                                       ENR_SM_P_active,      ENR_SM_P_idle};
    static const unsigned char l2[] = {
        ENR_SM_P_accepted,     ENR_SM_P_completed,        ENR_SM_P_in_flight, ENR_SM_P_lost,
        ENR_SM_P_listen_queue, ENR_SM_P_max_listen_queue, ENR_SM_P_slow};
    static const unsigned char l3[] = {ENR_SM_H_status, ENR_SM_H_reason};
    static const unsigned char l4[] = {ENR_SM_L_mean_ms, ENR_SM_L_p50_ms, ENR_SM_L_p99_ms,
                                       ENR_SM_L_window_p99_ms};
    static const unsigned char l5[] = {ENR_SM_R_s2xx, ENR_SM_R_s4xx, ENR_SM_R_s5xx};
    enr_status_model *m;

    if (!json_object_is_type(doc, json_type_object) || (m = model_of(b, doc)) == NULL)
        return;
    top_line(b, enr_sm_pool_keys, m->pool, l1, N_OF(l1));
    top_line(b, enr_sm_pool_keys, m->pool, l2, N_OF(l2));
    if (m->has_health) {
        enr_buf_printf(b, "health ");
        top_line(b, enr_sm_health_keys, m->health, l3, m->health_has_reason ? 2 : 1);
    }
    if (m->has_resp) {
        enr_buf_printf(b, "responses ");
        top_line(b, enr_sm_resp_keys, m->resp, l5, N_OF(l5));
    }
    if (m->has_lat) {
        enr_buf_printf(b, "latency ");
        top_line(b, enr_sm_lat_keys, m->lat, l4, N_OF(l4));
    }
    pause_line(b, m);
    store_line(b, m);
    sources_table(b, m);
    tables(b, m);
    free(m);
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
