/*
 * fuzz_upstream_reply.c: libFuzzer target on the upstream reply parser
 * (enr_upstream_reply_parse), without libcurl.
 *
 * Input: the ids the call asked for, comma-separated, up to the first LF;
 * the rest is the reply body.  Beyond "no crash, no leak, no sanitizer
 * report" on truncated or hostile JSON it checks docs/upstream.md on every
 * input: an accepted poster is https://, at most 2048 bytes, with no
 * control or space byte; an accepted duration is finite, in [0, 1e7) and
 * not -0; and, differentially against json-c's strict parser (the DOM
 * parser the streaming reader replaced): each id gets exactly the fields
 * of the FIRST item naming it, nothing when none does, and nothing at all
 * when the body is rejected; a body the reader accepts json-c accepts, and
 * one json-c accepts the reader accepts unless it holds one of json-c's
 * own liberties with numbers (RFC 8259 is the reader's syntax: "1.",
 * "-01", NaN, Infinity).  The same bytes give the same answer twice.
 *
 * scripts/fuzz.sh runs it with low -rss_limit_mb and -malloc_limit_mb:
 * a parser whose memory follows the reply (the json-c tree did, ~250
 * bytes per "{}") trips them on a flood of empty items.
 */
#include <json-c/json.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "fuzz_ids.h"
#include "upstream/upstream_reply.h"

#define MAX_IDS 64
#define DOC_POSTER_MAX 2048 /* docs/upstream.md, written again on purpose */
#define DOC_DURATION_LIMIT 1e7

#define ORACLE_MAX (1u << 20) /* json-c's tree is the oracle: only for inputs it can afford */

static enr_buf arena, arena2;

static void check_poster(const char *s, size_t n)
{
    if (n > DOC_POSTER_MAX || n < 9 || strncasecmp(s, "https://", 8) != 0)
        abort();
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= 0x20 || ch == 0x7f)
            abort();
    }
}

/* A poster any reading of docs/upstream.md accepts: https://, a host, then
 * only plain ASCII URL characters. */
static int plainly_good_poster(json_object *jp)
{
    const char *s;
    size_t n, host = 0, i = 8;

    if (!json_object_is_type(jp, json_type_string))
        return 0;
    s = json_object_get_string(jp);
    n = (size_t)json_object_get_string_len(jp);
    if (n > DOC_POSTER_MAX || n < 9 || strncmp(s, "https://", 8) != 0)
        return 0;
    for (; i < n && s[i] != '/'; i++)
        host++;
    if (host == 0)
        return 0;
    for (i = 8; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || strchr("./-_", s[i]) != NULL) ||
            s[i] == '\0')
            return 0;
    return 1;
}

static int plainly_good_duration(json_object *jd)
{
    double d;

    if (!json_object_is_type(jd, json_type_int) && !json_object_is_type(jd, json_type_double))
        return 0;
    d = json_object_get_double(jd);
    return isfinite(d) && d >= 0 && d < DOC_DURATION_LIMIT;
}

/* The first object item whose "id" is the string id, or NULL. */
static json_object *first_item(json_object *items, const char *id, size_t len)
{
    size_t n = json_object_array_length(items);

    for (size_t i = 0; i < n; i++) {
        json_object *it = json_object_array_get_idx(items, i), *jid;
        if (json_object_is_type(it, json_type_object) &&
            json_object_object_get_ex(it, "id", &jid) &&
            json_object_is_type(jid, json_type_string) &&
            (size_t)json_object_get_string_len(jid) == len &&
            memcmp(json_object_get_string(jid), id, len) == 0)
            return it;
    }
    return NULL;
}

/* json-c decodes a lone surrogate escape to U+FFFD; the reader keeps its
 * WTF-8 bytes, as the engine does for the id asked (upstream_reply.h).
 * Where the body has a surrogate escape, json-c's verdict on an id that
 * holds U+FFFD or a WTF-8 surrogate is not the reader's, and is not
 * compared; every other id is. */
static int lossy_for_json_c(const char *body, size_t blen, const char *id, size_t len)
{
    int esc = 0, odd = 0;

    for (size_t i = 0; i + 3 < blen && !esc; i++)
        if (body[i] == '\\' && body[i + 1] == 'u' && (body[i + 2] | 0x20) == 'd' &&
            strchr("89abcdefABCDEF", body[i + 3]) != NULL && body[i + 3] != '\0')
            esc = 1;
    for (size_t i = 0; i + 2 < len + 0u && !odd; i++) {
        const unsigned char *u = (const unsigned char *)id + i;
        odd = (u[0] == 0xef && u[1] == 0xbf && u[2] == 0xbd) || (u[0] == 0xed && u[1] >= 0xa0);
    }
    return esc && odd;
}

/* What a naive reading says about the body: its items array, or NULL when
 * it is not {"items":[...]} followed by nothing but white space. */
static json_object *naive_items(const char *body, size_t len, json_object **root)
{
    json_tokener *t = json_tokener_new();
    json_object *items = NULL;

    if (t == NULL)
        abort();
    json_tokener_set_flags(t, JSON_TOKENER_STRICT);
    *root = len ? json_tokener_parse_ex(t, body, (int)len) : NULL;
    if (*root != NULL && json_tokener_get_error(t) == json_tokener_success) {
        size_t end = json_tokener_get_parse_end(t);
        json_object *x;
        while (end < len &&
               (body[end] == ' ' || body[end] == '\t' || body[end] == '\r' || body[end] == '\n'))
            end++;
        if (end == len && json_object_is_type(*root, json_type_object) &&
            json_object_object_get_ex(*root, "items", &x) &&
            json_object_is_type(x, json_type_array))
            items = x;
    }
    json_tokener_free(t);
    return items;
}

/* Does body hold, outside strings, a number or literal json-c's strict
 * mode takes and RFC 8259 does not ("1.", "1.e5", "-01", "00", "-.5",
 * NaN, Infinity)?  Then json-c accepting what the reader refuses is expected. */
static int json_c_liberty(const char *s, size_t n)
{
    int in_str = 0;

    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (in_str) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_str = 0;
            continue;
        }
        if (ch == '"') {
            in_str = 1;
        } else if (ch == 'N' || ch == 'I' || (ch == '-' && i + 1 < n && s[i + 1] == '.')) {
            return 1; /* NaN, Infinity, -.5 */
        } else if (ch >= '0' && ch <= '9') {
            size_t j = i;
            int lead_zero = ch == '0';
            while (j < n && s[j] >= '0' && s[j] <= '9')
                j++;
            if (lead_zero && j > i + 1)
                return 1; /* 00, 01 */
            if (j < n && s[j] == '.' && (j + 1 >= n || s[j + 1] < '0' || s[j + 1] > '9'))
                return 1; /* 1. and 1.e5 */
            i = j - 1;
            while (i + 1 < n &&
                   ((s[i + 1] >= '0' && s[i + 1] <= '9') || s[i + 1] == '.' || s[i + 1] == 'e' ||
                    s[i + 1] == 'E' || s[i + 1] == '+' || s[i + 1] == '-'))
                i++;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enr_reply_id ids[MAX_IDS], again[MAX_IDS];
    size_t n, blen;
    const char *body = fuzz_ids(data, size, ids, MAX_IDS, 0, &n, &blen);
    json_object *root = NULL, *items;
    int rc, rc2;

    enr_buf_reset(&arena);
    rc = enr_upstream_reply_parse(body, blen, ids, n, 0x5eed, &arena);
    if (rc != 0 && rc != -1)
        abort();
    if (rc != 0 && arena.len != 0)
        abort(); /* a rejected reply leaves the arena as it was */
    if (blen > ORACLE_MAX)
        return 0; /* the reader alone: its memory is the test */
    items = naive_items(body, blen, &root);
    if (rc == 0 && items == NULL)
        abort(); /* accepted what json-c refuses */
    if (rc != 0 && items != NULL && !json_c_liberty(body, blen))
        abort(); /* refused a body RFC 8259 and json-c accept */
    if (rc != 0)
        items = NULL; /* compare with what the reader decided: nothing */
    for (size_t i = 0; i < n; i++) {
        const enr_reply_id *r = &ids[i];
        json_object *it = rc == 0 ? first_item(items, r->id, r->id_len) : NULL, *jp, *jd;
        if (r->state > ENR_REPLY_FOUND)
            abort();
        if ((r->state == ENR_REPLY_FOUND) != (r->has_poster || r->has_duration))
            abort();
        if (rc == 0 && lossy_for_json_c(body, blen, r->id, r->id_len)) {
            if (r->has_poster)
                check_poster(arena.data + r->poster_off, r->poster_len);
            continue;
        }
        if ((it == NULL) != (r->state == ENR_REPLY_ABSENT))
            abort();
        if (r->has_poster) {
            if (r->poster_off + r->poster_len > arena.len)
                abort();
            check_poster(arena.data + r->poster_off, r->poster_len);
            if (!json_object_object_get_ex(it, "poster", &jp) ||
                !json_object_is_type(jp, json_type_string) ||
                (size_t)json_object_get_string_len(jp) != r->poster_len ||
                memcmp(json_object_get_string(jp), arena.data + r->poster_off, r->poster_len))
                abort();
        }
        /* and what is plainly good is never refused */
        if (it && !r->has_poster && json_object_object_get_ex(it, "poster", &jp) &&
            plainly_good_poster(jp))
            abort();
        if (it && !r->has_duration && json_object_object_get_ex(it, "duration", &jd) &&
            plainly_good_duration(jd))
            abort();
        if (r->has_duration) {
            if (!isfinite(r->duration) || r->duration < 0 || r->duration >= DOC_DURATION_LIMIT ||
                signbit(r->duration))
                abort();
            if (!json_object_object_get_ex(it, "duration", &jd) ||
                json_object_get_double(jd) != r->duration)
                abort();
        }
    }
    json_object_put(root);

    /* Same bytes, same answer (and a different seed changes nothing). */
    memcpy(again, ids, sizeof(ids[0]) * n);
    enr_buf_reset(&arena2);
    rc2 = enr_upstream_reply_parse(body, blen, again, n, 0x1234, &arena2);
    if (rc2 != rc)
        abort();
    for (size_t i = 0; i < n; i++)
        if (again[i].state != ids[i].state || again[i].has_poster != ids[i].has_poster ||
            again[i].has_duration != ids[i].has_duration ||
            (ids[i].has_duration && again[i].duration != ids[i].duration))
            abort();
    return 0;
}
