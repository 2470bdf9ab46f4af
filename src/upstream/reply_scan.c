/*
 * reply_scan.c: the pieces every reader of a provider's answer shares
 * (reply_scan.h): the poster and duration checks, the id table and the
 * shape of a reply (one root object holding an array of items), read
 * with base/jscan.c's scanner.
 *
 * The answer is hostile input: it is read in one pass, never as a tree.
 * Memory is O(ids asked + posters accepted): the id table, one candidate
 * id (no longer than the longest id asked, plus what the reader says its
 * ids carry around them), one candidate poster (ENR_REPLY_POSTER_MAX
 * bytes); nesting is bounded (ENR_REPLY_MAX_DEPTH), so is the recursion.
 *
 * Invariants: ids are matched through a table keyed by a seed, so the work
 * is linear in the answer whatever ids a hostile provider sends; an id
 * is decided by the first item naming it; a reply either resolves every
 * id or is rejected whole, the arena then as it was.  The scanner never
 * reads past end.
 */
#include "upstream/reply_scan.h"
#include "upstream/answer.h"
#include "base/hash.h"
#include "base/text.h"
#include "base/utf8.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- checks ---- */

/* Strict UTF-8, and no C1 control or Unicode white space either: the
 * length of the sequence at s[0..n), or 0 when it is not one of those. */
static size_t poster_char(const unsigned char *s, size_t n)
{
    int k = enr_utf8_seq(s, s + n);

    if (k <= 0 || (s[0] == 0xc2 && s[1] < 0xa0) || enr_ws_len(s, s + k) != 0)
        return 0;
    return (size_t)k;
}

int enr_reply_poster_ok(const char *s, size_t n)
{
    size_t i = 8, host = 0;

    if (n > ENR_REPLY_POSTER_MAX || n < 9 || strncasecmp(s, "https://", 8) != 0)
        return 0;
    for (; i < n && s[i] != '/' && s[i] != '?' && s[i] != '#'; i++)
        host++;
    if (host == 0)
        return 0;
    for (i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        size_t k = 1;
        if (ch <= 0x20 || ch == 0x7f)
            return 0;
        if (ch >= 0x80 && (k = poster_char((const unsigned char *)s + i, n - i)) == 0)
            return 0;
        i += k;
    }
    return 1;
}

int enr_reply_duration_ok(double v, double *out)
{
    if (!isfinite(v) || v < 0 || v >= ENR_REPLY_DURATION_LIMIT)
        return 0;
    *out = v == 0 ? 0 : v; /* -0 becomes 0 */
    return 1;
}

const char *enr_answer_check(const enr_cache_val *v)
{
    double d;

    if (v->negative)
        return v->poster != NULL || v->has_duration ? "an unknown id with values" : NULL;
    if (v->poster == NULL && !v->has_duration)
        return "no value";
    if (v->poster != NULL && !enr_reply_poster_ok(v->poster, v->poster_len))
        return "a poster that is not an https URL a provider could give";
    if (v->has_duration &&
        (!enr_reply_duration_ok(v->duration, &d) || signbit(v->duration) || d != v->duration))
        return "a runtime out of range";
    return NULL;
}

/* Every answer the reply gave, held to enr_answer_check: the fields
 * were checked one by one as they were read; this is the same judgement
 * a cache or a store's record gets, so the two cannot drift apart. */
static void answers_checked(enr_reply_id *ids, size_t n, const enr_buf *arena)
{
    for (size_t i = 0; i < n; i++) {
        enr_reply_id *id = &ids[i];
        enr_cache_val v = {0};
        if (id->state != ENR_REPLY_FOUND)
            continue;
        v.poster = id->has_poster ? arena->data + id->poster_off : NULL;
        v.poster_len = id->has_poster ? id->poster_len : 0;
        v.duration = id->duration;
        v.has_duration = id->has_duration;
        if (enr_answer_check(&v) != NULL) {
            id->has_poster = id->has_duration = 0;
            id->state = ENR_REPLY_EMPTY;
        }
    }
}

void enr_reply_reset(enr_reply_id *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ids[i].state = ENR_REPLY_ABSENT;
        ids[i].has_poster = ids[i].has_duration = ids[i].live = 0;
        ids[i].poster_off = ids[i].poster_len = 0;
        ids[i].duration = 0;
    }
}

/* ---- ids and the items' shape ---- */

/* Slot of id in the open-addressing table (index + 1, 0 empty). */
static uint32_t *id_slot(const enr_rscan *r, const char *s, size_t len)
{
    for (size_t i = enr_hash_key(r->seed, 0, s, len) & r->mask;; i = (i + 1) & r->mask) {
        uint32_t *slot = &r->table[i];
        if (*slot == 0)
            return slot;
        if (r->ids[*slot - 1].id_len == len && memcmp(r->ids[*slot - 1].id, s, len) == 0)
            return slot;
    }
}

enr_reply_id *enr_rscan_claim(enr_rscan *r, const char *s, size_t len)
{
    uint32_t *slot;

    if (len > r->idmax)
        return NULL;
    slot = id_slot(r, s, len);
    if (*slot == 0 || r->ids[*slot - 1].state != ENR_REPLY_ABSENT)
        return NULL; /* an id we did not ask for, or a duplicate */
    return &r->ids[*slot - 1];
}

void enr_rscan_poster(enr_rscan *r, enr_reply_id *id, const char *s, size_t len)
{
    size_t off = r->arena->len;

    if (!enr_reply_poster_ok(s, len) || r->arena->oom || enr_buf_reserve(r->arena, len) != 0)
        return;
    enr_buf_append(r->arena, s, len);
    id->poster_off = off;
    id->poster_len = len;
    id->has_poster = 1;
}

int enr_rscan_string_at(const enr_rscan *r, const unsigned char *at, char *out, size_t cap,
                        size_t *len, int *faithful)
{
    enr_jscan s;

    *len = 0;
    *faithful = 0;
    if (at == NULL)
        return -1;
    enr_jscan_init(&s, at, (size_t)(r->j.end - at), ENR_REPLY_MAX_DEPTH, 0);
    if (enr_jscan_string(&s, out, cap, len) != 0)
        return -1;
    *faithful = s.lone == 0;
    return 0;
}

int enr_rscan_poster_at(enr_rscan *r, enr_reply_id *id, const unsigned char *at)
{
    size_t len;
    int faithful;

    if (enr_rscan_string_at(r, at, r->poster, sizeof r->poster, &len, &faithful) != 0 ||
        len > sizeof r->poster)
        return 0;
    enr_rscan_poster(r, id, r->poster, len);
    return id->has_poster;
}

void enr_rscan_runtime(enr_reply_id *id, double d)
{
    if (d > 0 && enr_reply_duration_ok(d, &id->duration))
        id->has_duration = 1;
}

void enr_rscan_seconds_at(enr_reply_id *id, const unsigned char *num)
{
    /* The number is followed by a delimiter the reader has checked, so
     * strtod stops at its end inside the body. */
    if (num != NULL)
        enr_rscan_runtime(id, strtod((const char *)num, NULL));
}

enr_reply_id *enr_rscan_claim_at(enr_rscan *r, const unsigned char *at)
{
    size_t len;
    int faithful;

    if (enr_rscan_string_at(r, at, r->idbuf, r->idmax, &len, &faithful) != 0 || !faithful)
        return NULL;
    return enr_rscan_claim(r, r->idbuf, len);
}

void enr_rscan_settle(enr_reply_id *id)
{
    /* An item with nothing usable tells no more than absence, but it
     * still decides the id: a later duplicate is ignored. */
    id->state = (id->has_poster || id->has_duration) ? ENR_REPLY_FOUND : ENR_REPLY_EMPTY;
}

static int read_element(void *ctx, int depth)
{
    enr_rscan *r = ctx;

    return enr_jscan_at(&r->j, '{') ? r->item(r, depth) : enr_jscan_skip(&r->j, depth);
}

/* The root object; 0 when its last spec->array member is an array (or,
 * when it may be, there is none). */
static int read_root(enr_rscan *r, const enr_rscan_spec *spec)
{
    const char *const names[] = {spec->array};
    int more, key, seen = 0, array_ok = 0;

    enr_jscan_ws(&r->j);
    if (!enr_jscan_at(&r->j, '{'))
        return -1;
    for (more = enr_jscan_open(&r->j, 1); more == 1; more = enr_jscan_next(&r->j, '}')) {
        if (enr_jscan_key(&r->j, names, 1, &key) != 0)
            return -1;
        if (key != 0) {
            if (enr_jscan_skip(&r->j, 2) != 0)
                return -1;
            continue;
        }
        /* A later array replaces an earlier one. */
        enr_reply_reset(r->ids, r->n);
        r->arena->len = r->arena_start;
        seen = 1;
        array_ok = enr_jscan_at(&r->j, '[');
        if (enr_jscan_array(&r->j, 2, read_element, r) != 0)
            return -1;
    }
    if (more != 0)
        return -1;
    enr_jscan_ws(&r->j);
    return r->j.p == r->j.end && (array_ok || (!seen && spec->array_optional)) ? 0 : -1;
}

int enr_rscan_parse(const char *body, size_t len, enr_reply_id *ids, size_t n, uint64_t seed,
                    enr_buf *arena, const enr_rscan_spec *spec)
{
    enr_rscan *r;
    size_t tcap = 16;
    int rc = -1;

    enr_reply_reset(ids, n);
    if (len == 0 || len > INT_MAX || n > UINT32_MAX / 4)
        return -1;
    while (tcap < 2 * n)
        tcap <<= 1;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return -1;
    r->arena_start = arena->len;
    r->table = calloc(tcap, sizeof(*r->table));
    for (size_t i = 0; i < n; i++)
        if (ids[i].id_len > r->idmax)
            r->idmax = ids[i].id_len;
    r->idextra = spec->idextra;
    r->item = spec->item;
    r->idbuf = malloc(r->idmax + r->idextra + 1);
    if (r->table == NULL || r->idbuf == NULL)
        goto out;
    enr_jscan_init(&r->j, body, len, ENR_REPLY_MAX_DEPTH, 0);
    r->ids = ids;
    r->n = n;
    r->mask = tcap - 1;
    r->seed = seed;
    r->arena = arena;
    for (size_t i = 0; i < n; i++) {
        uint32_t *slot;
        if (spec->matchable != NULL && !spec->matchable(ids[i].id, ids[i].id_len))
            continue;
        slot = id_slot(r, ids[i].id, ids[i].id_len);
        if (*slot == 0)
            *slot = (uint32_t)(i + 1); /* a duplicate id keeps its first index */
    }
    rc = read_root(r, spec);
    if (rc == 0)
        answers_checked(ids, n, arena);
out:
    if (rc != 0) {
        enr_reply_reset(ids, n);
        arena->len = r->arena_start;
    }
    free(r->table);
    free(r->idbuf);
    free(r);
    return rc;
}
