/*
 * api.c: the table of sources (api.h) and what their rows share: the id
 * rule, the URL pieces, the outcome's helpers, a bounded reader of error
 * documents, the one classifier of the APIs' answers (their rows say where
 * their words are and what each stands for; the verdict's row of
 * base/upfail.h says how its pause's end is read), and the pause a
 * verdict puts on its source (its end, its log line's words).
 *
 * The UPSTREAM row is the aggregator protocol (docs/upstream.md), whose
 * descriptor is api_upstream.c's: a row like the others, first.
 *
 * Invariants: a row's parse, build_url and classify read only their
 * arguments; an outcome's reason is printable ASCII; a pause from a
 * provider's header ends at most ENR_RETRY_AFTER_MAX_S from now.
 */
#include "upstream/api.h"
#include "upstream/api_int.h"
#include "upstream/quota.h"
#include "upstream/reply_scan.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- the table ---- */

/* The aggregator first (it is no row of the list), then each row's. */
#define ENR_API_ROW(NAME, name, ...) &enr_api_##name,
static const enr_api *const rows[ENR_API_COUNT] = {&enr_api_upstream, ENR_SOURCE_LIST(ENR_API_ROW)};
#undef ENR_API_ROW

#define ENR_API_NAME(NAME, name, ...) #name,
static const char *const names[ENR_API_COUNT] = {"upstream", ENR_SOURCE_LIST(ENR_API_NAME)};
#undef ENR_API_NAME

#define ENR_API_NEEDS_SECRET 1
#define ENR_API_NEEDS_NOSECRET 0
#define ENR_API_SECRET(NAME, name, PROV, S, ...) ENR_API_NEEDS_##S,
static const int needs_secret[ENR_API_COUNT] = {0, ENR_SOURCE_LIST(ENR_API_SECRET)};
#undef ENR_API_SECRET

const enr_api *enr_api_get(int id)
{
    if (id < 0 || id >= ENR_API_COUNT)
        return NULL;
    /* The list is the home of a source's name and of whether it has a
     * secret (the keys that name it): a descriptor that says otherwise
     * is not served (and the unit test fails). */
    if (strcmp(rows[id]->name, names[id]) != 0 || rows[id]->needs_secret != needs_secret[id])
        return NULL;
    return rows[id];
}

size_t enr_api_item_cap(int src, size_t id_len)
{
    /* Out of range: the aggregator's, the smallest. */
    const enr_api *a = src >= 0 && src < ENR_API_COUNT ? rows[src] : &enr_api_upstream;

    if (a->item_cap != NULL)
        return a->item_cap(id_len);
    return (ENR_REPLY_BODY_MAX - ENR_REPLY_SLACK) / a->max_ids + 6 * id_len;
}

#define ENR_API_NOUN(NAME, name, PROV, S, word, noun, ...) noun,
const char *enr_api_secret_noun(int id)
{
    static const char *const noun[ENR_API_COUNT] = {"secret", ENR_SOURCE_LIST(ENR_API_NOUN)};

    return id < 0 || id >= ENR_API_COUNT ? "" : noun[id];
}
#undef ENR_API_NOUN

int enr_api_by_name(const char *name)
{
    for (int i = 0; name != NULL && i < ENR_API_COUNT; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

/* ---- pauses ---- */

/* The start of api's next day after now (its day_clock). */
static int64_t day_end(const enr_api *api, int64_t now)
{
    if (api != NULL && api->day_clock == ENR_API_DAY_PACIFIC)
        return enr_pacific_next_midnight(now);
    return (now / 86400 + 1) * 86400;
}

int64_t enr_api_day_end(int src, int64_t now)
{
    return day_end(enr_api_get(src), now);
}

int64_t enr_api_pause_until(int src, int why, int64_t until, unsigned retry_after_s, int64_t wall)
{
    const enr_up_fail_row *r;

    if (why < 0 || why >= ENR_UP_NFAILS)
        return until;
    r = &enr_up_fail_rows[why];
    if (r->ends == ENR_UP_END_RELOAD)
        return wall + r->pause_s; /* a reload (HUP) tries again at once */
    if (until > wall)
        return until;
    if (r->ends == ENR_UP_END_DAY)
        return enr_api_day_end(src, wall);
    if (r->ends == ENR_UP_END_RATE)
        return wall + (retry_after_s ? retry_after_s : r->pause_s);
    return until;
}

void enr_api_pause_said(int src, int why, const char *reason, char *out, size_t n)
{
    const enr_api *api = enr_api_get(src);
    const char *said = why >= 0 && why < ENR_UP_NFAILS ? enr_up_fail_rows[why].said : NULL;
    const char *noun = said != NULL ? strstr(said, "%s") : NULL;
    const char *title = api != NULL ? api->title : "";

    reason = reason != NULL && reason[0] ? reason : "-";
    if (said == NULL)
        snprintf(out, n, "%s %s: %s", title, enr_up_fail_name(why), reason);
    else if (noun == NULL)
        snprintf(out, n, "%s %s: %s", title, said, reason);
    else
        snprintf(out, n, "%s %.*s%s%s: %s", title, (int)(noun - said), said,
                 enr_api_secret_noun(src), noun + 2, reason);
}

/* ---- ids and URLs ---- */

int enr_api_id_ok(const char *id, size_t len, const char *forbid)
{
    if (len == 0 || len > ENR_API_ID_MAX || !enr_reply_id_askable(id, len))
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)id[i] < 0x20 || id[i] == 0x7f || strchr(forbid, id[i]) != NULL)
            return 0;
    return 1;
}

void enr_api_pct(enr_buf *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    static const char keep[] = "-._~"; /* with the letters and digits */

    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        int plain = (ch | 0x20) >= 'a' && (ch | 0x20) <= 'z';
        plain |= (ch >= '0' && ch <= '9') || (ch != 0 && strchr(keep, ch) != NULL);
        if (plain) {
            enr_buf_putc(o, (char)ch);
            continue;
        }
        enr_buf_putc(o, '%');
        enr_buf_putc(o, hex[ch >> 4]);
        enr_buf_putc(o, hex[ch & 15]);
    }
}

int enr_api_url_ids(enr_buf *url, const char *base, const char *path, const enr_reply_id *ids,
                    size_t n, size_t max, const char *prefix, const char *forbid)
{
    size_t start = url->len, blen = strlen(base);

    if (n == 0 || n > max)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!enr_api_id_ok(ids[i].id, ids[i].id_len, forbid))
            return -1;
    while (blen > 0 && base[blen - 1] == '/')
        blen--;
    enr_buf_append(url, base, blen);
    enr_buf_putc(url, '/');
    enr_buf_append(url, path, strlen(path));
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            enr_buf_putc(url, ',');
        enr_buf_append(url, prefix, strlen(prefix));
        enr_api_pct(url, ids[i].id, ids[i].id_len);
    }
    if (url->oom) {
        url->len = start;
        return -1;
    }
    return 0;
}

/* ---- outcomes ---- */

void enr_api_outcome_init(enr_api_outcome *o)
{
    o->verdict = ENR_API_V_OK;
    o->until = 0;
    o->remaining = -1;
    o->reason[0] = '\0';
}

void enr_api_set_reason(enr_api_outcome *o, const char *s, size_t n)
{
    size_t k = 0;

    for (size_t i = 0; i < n && k + 1 < sizeof o->reason; i++)
        if (s[i] >= 0x20 && s[i] < 0x7f)
            o->reason[k++] = s[i];
    o->reason[k] = '\0';
}

int enr_api_status_verdict(int status)
{
    if (status >= 200 && status < 300)
        return ENR_API_V_OK;
    if (status == 401 || status == 403)
        return ENR_UP_F_AUTH;
    if (status == 429)
        return ENR_UP_F_THROTTLED;
    if (status >= 300 && status < 500)
        return ENR_API_V_CONFIG;
    return ENR_UP_F_STATUS;
}

/* The kind api's word w stands for, -1 when it is none of its words. */
static int word_kind(const enr_api *api, const char *w)
{
    for (const enr_api_word *x = api->words; x != NULL && x->word != NULL; x++)
        if (strcmp(w, x->word) == 0)
            return x->kind;
    return -1;
}

/* The rows' paths are read as the error reader's fields' (api_int.h). */
_Static_assert(sizeof(((enr_api_field *)0)->path) == sizeof(((enr_api *)0)->message_at),
               "a row's path and a field's path hold as many keys");

/* The API's words in an error body, where its row says (api.h): the
 * reason kept in out, the kind they stand for returned (-1: none). */
static int body_kind(const enr_api *api, const char *body, size_t len, enr_api_outcome *out)
{
    enr_api_field f[ENR_API_REASONS_MAX + 1]; /* the reasons, then the message */
    size_t n = 0, msg;
    int kind;

    memset(f, 0, sizeof f);
    while (n < ENR_API_REASONS_MAX && api->reason_at[n][0] != NULL) {
        memcpy(f[n].path, api->reason_at[n], sizeof f[n].path);
        n++;
    }
    if (n == 0)
        return -1;
    msg = n;
    memcpy(f[msg].path, api->message_at, sizeof f[msg].path);
    (void)enr_api_fields(body, len, f, api->message_at[0] != NULL ? n + 1 : n);
    for (size_t i = 0; i < n; i++)
        if (f[i].found && (kind = word_kind(api, f[i].text)) >= 0) {
            enr_api_set_reason(out, f[i].text, f[i].len);
            return kind;
        }
    for (const enr_api_message *m = api->messages; f[msg].found && m && m->prefix; m++)
        if (strncmp(f[msg].text, m->prefix, strlen(m->prefix)) == 0) {
            enr_api_set_reason(out, m->word, strlen(m->word));
            return word_kind(api, m->word);
        }
    /* No word of its own: the first found (else the last place's "") is
     * still the log's reason. */
    for (size_t i = 0; i < n; i++)
        if (f[i].found || i + 1 == n) {
            enr_api_set_reason(out, f[i].text, f[i].len);
            break;
        }
    return -1;
}

/* The end of the pause an answer asks for, as its kind's row says how
 * it is read (base/upfail.h: ends); 0 when none is given. */
static int64_t asked_until(const enr_api *api, unsigned ends, const enr_api_headers *h, int64_t now)
{
    int64_t until = 0;

    if (ends == ENR_UP_END_DAY)
        return day_end(api, now);
    if (ends != ENR_UP_END_RATE)
        return 0;
    if (api->reset_header != NULL && h != NULL)
        until = enr_api_reset_until(h->ratelimit_reset, h->ratelimit_reset_len, now);
    return until != 0 ? until : enr_api_retry_after(h, now);
}

void enr_api_classify(const enr_api *api, int status, const char *body, size_t len,
                      const enr_api_headers *h, int64_t now, enr_api_outcome *out)
{
    int kind;

    enr_api_outcome_init(out);
    if (api->remaining_header != NULL && h != NULL)
        out->remaining = enr_api_count(h->ratelimit_remaining, h->ratelimit_remaining_len);
    if (status >= 200 && status < 300)
        return;
    out->verdict = enr_api_status_verdict(
        api->slow_down_status != 0 && status == api->slow_down_status ? 429 : status);
    kind = body_kind(api, body, len, out);
    if (kind >= 0 && status < 500)
        out->verdict = kind; /* a 5xx is the provider's failure whatever it says */
    if (out->verdict < ENR_UP_NFAILS)
        out->until = asked_until(api, enr_up_fail_rows[out->verdict].ends, h, now);
}

int64_t enr_api_retry_after(const enr_api_headers *h, int64_t now)
{
    unsigned delay;

    if (h == NULL || h->retry_after == NULL ||
        enr_retry_after_parse(h->retry_after, h->retry_after_len, now, &delay) != 0)
        return 0;
    return now + delay;
}

/* v[0..n) without the white space around it. */
static void trim(const char **v, size_t *n)
{
    while (*n > 0 && (**v == ' ' || **v == '\t')) {
        (*v)++;
        (*n)--;
    }
    while (*n > 0 && strchr(" \t\r\n", (*v)[*n - 1]) != NULL)
        (*n)--;
}

/* All digits, at most 18 of them: the value, else -1. */
static int64_t digits(const char *v, size_t n)
{
    int64_t x = 0;

    if (n == 0 || n > 18)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        x = x * 10 + (v[i] - '0');
    }
    return x;
}

int64_t enr_api_reset_until(const char *v, size_t n, int64_t now)
{
    int64_t t = -1, x;
    unsigned delay;

    if (v == NULL)
        return 0;
    trim(&v, &n);
    if ((x = digits(v, n)) >= 0)
        t = x < 1000000000 ? now + x : x;
    else if (enr_api_iso_datetime(v, n, &x) == 0)
        t = x;
    else if (enr_retry_after_parse(v, n, now, &delay) == 0)
        t = now + delay;
    if (t < 0)
        return 0;
    if (t < now)
        return now;
    return t - now > ENR_RETRY_AFTER_MAX_S ? now + ENR_RETRY_AFTER_MAX_S : t;
}

long enr_api_count(const char *v, size_t n)
{
    int64_t x;

    if (v == NULL)
        return -1;
    trim(&v, &n);
    x = digits(v, n);
    return x < 0 || x > 1000000000 ? -1 : (long)x;
}

/* ---- error documents ---- */

#define FIELD_DEPTH 5

typedef struct walk {
    enr_jscan s;
    enr_api_field *f;
    size_t nf;
    char keys[FIELD_DEPTH][ENR_JSCAN_KEY_MAX + 1]; /* the path to the value being read */
} walk;

/* The fields whose path is keys[0..depth) and not found yet get the text
 * of the value at s->p, a string or a number. */
static void take(walk *w, int depth, const unsigned char *at, size_t numlen)
{
    for (size_t i = 0; i < w->nf; i++) {
        enr_api_field *f = &w->f[i];
        int k = 0;
        if (f->found)
            continue;
        while (k < depth && f->path[k] != NULL && strcmp(f->path[k], w->keys[k]) == 0)
            k++;
        if (k != depth || f->path[k] != NULL)
            continue;
        if (numlen > 0) {
            f->len = numlen < sizeof f->text ? numlen : sizeof f->text - 1;
            memcpy(f->text, at, f->len);
        } else {
            enr_jscan s;
            enr_jscan_init(&s, at, (size_t)(w->s.end - at), w->s.max_depth, 0);
            if (enr_jscan_string(&s, f->text, sizeof f->text - 1, &f->len) != 0)
                continue;
            if (f->len > sizeof f->text - 1)
                f->len = sizeof f->text - 1;
        }
        f->text[f->len] = '\0';
        f->found = 1;
    }
}

/* One value at s->p whose path is keys[0..depth). */
static int walk_value(walk *w, int depth)
{
    const unsigned char *at = w->s.p;
    int more, key;

    if (enr_jscan_at(&w->s, '{') || enr_jscan_at(&w->s, '[')) {
        unsigned char close = *w->s.p == '{' ? '}' : ']';
        if (depth >= FIELD_DEPTH)
            return enr_jscan_skip(&w->s, depth + 1);
        for (more = enr_jscan_open(&w->s, depth + 1); more == 1;
             more = enr_jscan_next(&w->s, close)) {
            if (close == ']') {
                strcpy(w->keys[depth], "[]");
            } else {
                enr_jscan k = w->s;
                size_t len;
                if (enr_jscan_key(&w->s, NULL, 0, &key) != 0)
                    return -1;
                (void)enr_jscan_string(&k, w->keys[depth], ENR_JSCAN_KEY_MAX, &len);
                w->keys[depth][len <= ENR_JSCAN_KEY_MAX ? len : 0] = '\0';
            }
            if (walk_value(w, depth + 1) != 0)
                return -1;
        }
        return more;
    }
    if (enr_jscan_skip(&w->s, depth + 1) != 0)
        return -1;
    if (*at == '"' || *at == '-' || (*at >= '0' && *at <= '9'))
        take(w, depth, at, *at == '"' ? 0 : (size_t)(w->s.p - at));
    return 0;
}

int enr_api_fields(const char *body, size_t len, enr_api_field *f, size_t nf)
{
    walk w;

    memset(&w, 0, sizeof w);
    for (size_t i = 0; i < nf; i++) {
        f[i].found = 0;
        f[i].len = 0;
        f[i].text[0] = '\0';
    }
    if (body == NULL || len == 0)
        return -1;
    enr_jscan_init(&w.s, body, len, ENR_REPLY_MAX_DEPTH, 0);
    w.f = f;
    w.nf = nf;
    enr_jscan_ws(&w.s);
    if (w.s.p >= w.s.end || walk_value(&w, 0) != 0)
        return -1;
    enr_jscan_ws(&w.s);
    return w.s.p == w.s.end ? 0 : -1;
}

int enr_api_field_is(const enr_api_field *f, const char *word)
{
    return f->found && strcmp(f->text, word) == 0;
}
