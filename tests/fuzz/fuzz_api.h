/*
 * fuzz_api.h: the body of the libFuzzer targets on the readers and
 * classifiers of the providers' own APIs (fuzz_api_youtube.c,
 * fuzz_api_vimeo.c, fuzz_api_dailymotion.c each define FUZZ_API, the
 * row, and one of FUZZ_YOUTUBE, FUZZ_VIMEO, FUZZ_DAILYMOTION, for the
 * API's rules below, then include this).
 *
 * Input: the ids the call asked for, comma-separated, up to the first LF;
 * the rest is the answer's body.  Beyond "no crash, no leak, no sanitizer
 * report" it checks on every input the contract of api.h: rc 0 or -1, a
 * refused body leaves every id absent and the arena as it was; a poster
 * passes the checks, a runtime is in (0, 1e7); an id no answer can name
 * faithfully is never matched; the same bytes under another seed give
 * the same answer.  And, differentially against json-c's tree (the DOM
 * a reader of the API's docs would write): a body the reader accepts
 * json-c accepts, and for each asked id (but those holding U+FFFD, which
 * json-c also makes of a lone surrogate) the reader found exactly the
 * first item naming it, with the poster and runtime the API's rules pick
 * from that item.  The classifier reads the same body under a status
 * taken from the input's length: its verdict is one of the list, its
 * reason printable ASCII, its pause within a day and an hour.
 */
#include <json-c/json.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "fuzz_ids.h"
#include "upstream/api.h"
#include "upstream/api_int.h"
#include "upstream/reply_scan.h"

#define MAX_IDS 64
#define NOW 1700000000
#define ORACLE_MAX (1u << 20)

static enr_buf arena, arena2;

/* What the API's rules pick from one item of json-c's tree. */
typedef struct pick {
    const char *poster;
    size_t poster_len;
    double duration; /* 0: none */
    int live;        /* YouTube: a live or upcoming broadcast */
    int skip;        /* the oracle cannot say (json-c saturated a number) */
} pick;

static json_object *member(json_object *o, const char *key)
{
    json_object *v = NULL;

    if (o == NULL || !json_object_is_type(o, json_type_object) ||
        !json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

static int str_is(json_object *v)
{
    return v != NULL && json_object_is_type(v, json_type_string);
}

/* A number as the reader's strtod reads it; 0 when not a number, and
 * skip set when json-c saturated it. */
static double num(json_object *v, int *is_num, int *skip)
{
    *is_num = 0;
    if (v != NULL && json_object_is_type(v, json_type_double)) {
        *is_num = 1;
        return json_object_get_double(v);
    }
    if (v != NULL && json_object_is_type(v, json_type_int)) {
        int64_t x = json_object_get_int64(v);
        *is_num = 1;
        if (x == INT64_MAX || x == INT64_MIN)
            *skip = 1;
        return (double)x;
    }
    return 0;
}

/* A poster candidate: 1 when v is a string the poster checks pass. */
static int candidate(json_object *v, pick *p)
{
    if (!str_is(v) ||
        !enr_reply_poster_ok(json_object_get_string(v), (size_t)json_object_get_string_len(v)))
        return 0;
    p->poster = json_object_get_string(v);
    p->poster_len = (size_t)json_object_get_string_len(v);
    return 1;
}

static double seconds_ok(double d)
{
    return isfinite(d) && d > 0 && d < ENR_REPLY_DURATION_LIMIT ? d : 0;
}

#if defined(FUZZ_YOUTUBE)
#define FORBID ","
#define ARRAY "items"
#define OPTIONAL 1
/* The widest thumbnail whose url passes the checks: a given positive
 * width, else the name's (an unknown name without one is no candidate);
 * of equal widths the higher known name, a known before an unknown, the
 * unknown first listed; the first 8 unknown names (of at most 31 bytes)
 * alone.  json-c keeps a repeated key where it first was, its last value. */
static void thumbs(json_object *th, pick *p)
{
    static const char *const known[] = {"default", "medium", "high", "standard",
                                        "maxres",  "fhd",    "qhd",  "uhd"};
    static const double named[] = {120, 320, 480, 640, 1280, 1920, 2560, 3840};
    json_object *url[16] = {0};
    double w[16] = {0};
    size_t nother = 0;
    int is_num;

    if (th == NULL || !json_object_is_type(th, json_type_object))
        return;
    json_object_object_foreach(th, key, val)
    {
        size_t len = strlen(key), slot = 16;
        double given;
        for (size_t i = 0; i < 8; i++)
            if (strcmp(key, known[i]) == 0)
                slot = 7 - i; /* uhd first */
        if (slot == 16 && (len > ENR_JSCAN_KEY_MAX || nother == 8))
            continue;
        if (slot == 16)
            slot = 8 + nother++;
        url[slot] = member(val, "url");
        given = num(member(val, "width"), &is_num, &p->skip);
        w[slot] = is_num && given > 0 && isfinite(given) ? given : slot < 8 ? named[7 - slot] : 0;
    }
    for (;;) {
        size_t best = 16;
        for (size_t i = 0; i < 16; i++)
            if (url[i] != NULL && w[i] > 0 && (best == 16 || w[i] > w[best]))
                best = i;
        if (best == 16 || candidate(url[best], p))
            return;
        url[best] = NULL;
    }
}

static void rules(json_object *it, pick *p)
{
    json_object *sn = member(it, "snippet");
    json_object *d = member(member(it, "contentDetails"), "duration");
    json_object *live = member(sn, "liveBroadcastContent");
    double s;

    thumbs(member(sn, "thumbnails"), p);
    if (str_is(d) && enr_iso8601_duration(json_object_get_string(d),
                                          (size_t)json_object_get_string_len(d), &s) == 0)
        p->duration = seconds_ok(s);
    p->live = str_is(live) && ((json_object_get_string_len(live) == 4 &&
                                memcmp(json_object_get_string(live), "live", 4) == 0) ||
                               (json_object_get_string_len(live) == 8 &&
                                memcmp(json_object_get_string(live), "upcoming", 8) == 0));
}

static int names(json_object *it, const char *id, size_t len)
{
    json_object *v = member(it, "id");
    return str_is(v) && (size_t)json_object_get_string_len(v) == len &&
           memcmp(json_object_get_string(v), id, len) == 0;
}
#elif defined(FUZZ_VIMEO)
#define FORBID ",/:"
#define ARRAY "data"
#define OPTIONAL 0
static void rules(json_object *it, pick *p)
{
    json_object *sizes = member(member(it, "pictures"), "sizes");
    double best = 0;
    int is_num;

    if (sizes != NULL && json_object_is_type(sizes, json_type_array))
        for (size_t i = 0; i < json_object_array_length(sizes); i++) {
            json_object *sz = json_object_array_get_idx(sizes, i);
            pick c = *p;
            double w = num(member(sz, "width"), &is_num, &p->skip);
            if (is_num && (p->poster == NULL || w > best) && candidate(member(sz, "link"), &c)) {
                *p = c;
                best = w;
            }
        }
    p->duration = seconds_ok(num(member(it, "duration"), &is_num, &p->skip));
}

static int names(json_object *it, const char *id, size_t len)
{
    json_object *v = member(it, "uri");
    const char *s;
    size_t n;

    if (!str_is(v))
        return 0;
    s = json_object_get_string(v);
    n = (size_t)json_object_get_string_len(v);
    if (n < 8 + len || memcmp(s, "/videos/", 8) != 0 || memcmp(s + 8, id, len) != 0)
        return 0;
    return n == 8 + len || s[8 + len] == ':';
}

/* json-c writes U+FFFD for a lone surrogate escape, so a uri holding one
 * may stand for an escape the reader refuses (an unfaithful string names
 * no id) or for the character itself, which it takes: either is right. */
static int ambiguous(json_object *it)
{
    json_object *v = member(it, "uri");
    return str_is(v) && memmem(json_object_get_string(v), (size_t)json_object_get_string_len(v),
                               "\xef\xbf\xbd", 3) != NULL;
}
#elif defined(FUZZ_DAILYMOTION)
#define FORBID ","
#define ARRAY "list"
#define OPTIONAL 0
static void rules(json_object *it, pick *p)
{
    static const char *const ranks[] = {"thumbnail_1080_url", "thumbnail_720_url",
                                        "thumbnail_480_url", "thumbnail_url"};
    int is_num;

    json_object *mode = member(it, "mode");

    for (int i = 0; i < 4; i++)
        if (candidate(member(it, ranks[i]), p))
            break;
    p->duration = seconds_ok(num(member(it, "duration"), &is_num, &p->skip));
    p->live = str_is(mode) && json_object_get_string_len(mode) == 4 &&
              memcmp(json_object_get_string(mode), "live", 4) == 0;
}

static int names(json_object *it, const char *id, size_t len)
{
    json_object *v = member(it, "id");
    return str_is(v) && (size_t)json_object_get_string_len(v) == len &&
           memcmp(json_object_get_string(v), id, len) == 0;
}
#else
#error "define FUZZ_YOUTUBE, FUZZ_VIMEO or FUZZ_DAILYMOTION"
#endif
#ifndef FUZZ_VIMEO
/* An item's name is the whole id, and ids holding U+FFFD are not checked. */
static int ambiguous(json_object *it)
{
    (void)it;
    return 0;
}
#endif

/* json-c's reading: the root, and in *items its array (NULL when absent),
 * or NULL when the body is not one JSON object followed by white space. */
static json_object *tree(const char *body, size_t len, json_object **items)
{
    json_tokener *t = json_tokener_new();
    json_object *root;

    if (t == NULL)
        abort();
    json_tokener_set_flags(t, JSON_TOKENER_STRICT);
    root = len ? json_tokener_parse_ex(t, body, (int)len) : NULL;
    *items = NULL;
    if (root != NULL && json_tokener_get_error(t) == json_tokener_success) {
        size_t end = json_tokener_get_parse_end(t);
        while (end < len && strchr(" \t\r\n", body[end]) != NULL && body[end] != '\0')
            end++;
        if (end != len || !json_object_is_type(root, json_type_object)) {
            json_object_put(root);
            root = NULL;
        } else {
            *items = member(root, ARRAY);
        }
    } else if (root != NULL) {
        json_object_put(root);
        root = NULL;
    }
    json_tokener_free(t);
    return root;
}

static void check_outcome(const char *body, size_t len)
{
    static const int statuses[] = {200, 400, 401, 403, 404, 429, 500, 503, 302};
    enr_api_headers h = {.retry_after = body,
                         .retry_after_len = len < 40 ? len : 40,
                         .ratelimit_reset = body,
                         .ratelimit_reset_len = len < 40 ? len : 40,
                         .ratelimit_remaining = body,
                         .ratelimit_remaining_len = len < 12 ? len : 12};
    enr_api_outcome o;
    int status = statuses[len % (sizeof statuses / sizeof statuses[0])];

    enr_api_get(FUZZ_API)->classify(status, body, len, &h, NOW, &o);
    if (o.verdict != ENR_API_V_OK && o.verdict != ENR_API_V_CONFIG &&
        o.verdict != ENR_UP_F_STATUS &&
        (o.verdict < 0 || o.verdict >= ENR_UP_NFAILS || enr_up_fail_rows[o.verdict].pause == 0))
        abort();
    if ((status == 200) != (o.verdict == ENR_API_V_OK))
        abort();
    if (o.until != 0 && (o.until < NOW || o.until > NOW + 86400 + 3600))
        abort();
    if (strlen(o.reason) >= sizeof o.reason)
        abort();
    for (const char *c = o.reason; *c; c++)
        if (*c < 0x20 || *c > 0x7e)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enr_reply_id ids[MAX_IDS], again[MAX_IDS];
    size_t n, blen;
    const char *body = fuzz_ids(data, size, ids, MAX_IDS, 1, &n, &blen);
    json_object *root, *items;
    int rc;

    check_outcome(body, blen);
    enr_buf_reset(&arena);
    rc = enr_api_get(FUZZ_API)->parse(body, blen, ids, n, 0x5eed, &arena);
    if (rc != 0 && rc != -1)
        abort();
    for (size_t i = 0; i < n; i++) {
        const enr_reply_id *r = &ids[i];
        if (r->state > ENR_REPLY_FOUND ||
            (r->state == ENR_REPLY_FOUND) != (r->has_poster || r->has_duration))
            abort();
        if (rc != 0 && r->state != ENR_REPLY_ABSENT)
            abort();
        if (r->state != ENR_REPLY_ABSENT && !enr_api_id_ok(r->id, r->id_len, FORBID))
            abort(); /* matched an id no answer can name faithfully */
        if (r->has_poster && (r->poster_off + r->poster_len > arena.len ||
                              !enr_reply_poster_ok(arena.data + r->poster_off, r->poster_len)))
            abort();
        if (r->has_duration && !(r->duration > 0 && r->duration < ENR_REPLY_DURATION_LIMIT))
            abort();
        if (r->live && r->state == ENR_REPLY_ABSENT)
            abort(); /* only an item can say it is live */
    }
    if (rc != 0 && arena.len != 0)
        abort();

    /* same bytes, another seed: the same answer */
    memcpy(again, ids, sizeof(ids[0]) * n);
    enr_buf_reset(&arena2);
    if (enr_api_get(FUZZ_API)->parse(body, blen, again, n, 0x1234, &arena2) != rc)
        abort();
    for (size_t i = 0; i < n; i++)
        if (again[i].state != ids[i].state || again[i].has_poster != ids[i].has_poster ||
            again[i].has_duration != ids[i].has_duration || again[i].live != ids[i].live ||
            (ids[i].has_duration && again[i].duration != ids[i].duration) ||
            (ids[i].has_poster &&
             (again[i].poster_len != ids[i].poster_len ||
              memcmp(arena.data + ids[i].poster_off, arena2.data + again[i].poster_off,
                     ids[i].poster_len) != 0)))
            abort();

    if (blen > ORACLE_MAX)
        return 0;
    root = tree(body, blen, &items);
    if (rc == 0 && root == NULL)
        abort(); /* accepted what json-c refuses */
    if (rc == 0 && items == NULL && !OPTIONAL)
        abort();
    if (rc == 0 && items != NULL && !json_object_is_type(items, json_type_array))
        abort();
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const enr_reply_id *r = &ids[i];
        json_object *it = NULL;
        pick want = {0};
        if (!enr_api_id_ok(r->id, r->id_len, FORBID) ||
            memmem(r->id, r->id_len, "\xef\xbf\xbd", 3) != NULL)
            continue;
        for (size_t k = 0; items != NULL && k < json_object_array_length(items); k++) {
            json_object *x = json_object_array_get_idx(items, k);
            if (json_object_is_type(x, json_type_object) && names(x, r->id, r->id_len)) {
                it = x;
                break;
            }
        }
        if (it != NULL && ambiguous(it))
            continue;
        if ((it == NULL) != (r->state == ENR_REPLY_ABSENT))
            abort();
        if (it == NULL)
            continue;
        rules(it, &want);
        if (want.skip)
            continue;
        if ((want.poster != NULL) != r->has_poster ||
            (want.poster != NULL &&
             (want.poster_len != r->poster_len ||
              memcmp(want.poster, arena.data + r->poster_off, r->poster_len) != 0)))
            abort();
        if ((want.duration > 0) != r->has_duration ||
            (r->has_duration && want.duration != r->duration))
            abort();
        if (want.live != r->live)
            abort();
    }
    json_object_put(root);
    return 0;
}
