/*
 * upstream_reply.c: one upstream reply to the poster/duration of each id
 * the call asked for (upstream_reply.h, UPSTREAM.md "Response").
 *
 * Invariants: an accepted poster is an absolute https:// URL with a host,
 * at most ENR_REPLY_POSTER_MAX bytes, strict UTF-8 with no control
 * character and no white space (ASCII or Unicode); an accepted duration
 * is finite, 0 <= d < ENR_REPLY_DURATION_LIMIT, and never -0.  A reply
 * either resolves every id or is rejected whole; the JSON tree is freed
 * on every path.  Ids are matched through a seeded table, so the work is
 * linear in the reply whatever ids a hostile upstream sends.
 */
#include "upstream_reply.h"
#include "hash.h"

#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int poster_ok(const char *s, size_t n)
{
    size_t i = 8, host = 0;

    if (n > ENR_REPLY_POSTER_MAX || n < 9 || strncasecmp(s, "https://", 8) != 0)
        return 0;
    for (; i < n && s[i] != '/' && s[i] != '?' && s[i] != '#'; i++)
        host++;
    if (host == 0)
        return 0;
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= 0x20 || ch == 0x7f)
            return 0;
        if (ch >= 0x80) {
            /* Strict UTF-8 (no surrogates, no overlongs), and no C1
             * control or Unicode white space either. */
            uint32_t cp;
            size_t k, need = ch >= 0xf0 ? 3 : ch >= 0xe0 ? 2 : ch >= 0xc2 ? 1 : 0;
            if (need == 0 || ch > 0xf4 || i + need >= n)
                return 0;
            cp = ch & (0x3f >> need);
            for (k = 1; k <= need; k++) {
                unsigned char cc = (unsigned char)s[i + k];
                if ((cc & 0xc0) != 0x80)
                    return 0;
                cp = (cp << 6) | (cc & 0x3f);
            }
            if ((need == 2 && cp < 0x800) || (need == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
                (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0xa0) || cp == 0x1680 ||
                (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
                cp == 0x205f || cp == 0x3000 || cp == 0xfeff)
                return 0;
            i += need;
        }
    }
    return 1;
}

static int duration_ok(json_object *d, double *out)
{
    double v;

    if (!json_object_is_type(d, json_type_int) && !json_object_is_type(d, json_type_double))
        return 0;
    v = json_object_get_double(d);
    if (!isfinite(v) || v < 0 || v >= ENR_REPLY_DURATION_LIMIT)
        return 0;
    *out = v == 0 ? 0 : v; /* -0 becomes 0 */
    return 1;
}

/* Slot of id in the open-addressing table (index + 1, 0 empty). */
static uint32_t *id_slot(uint32_t *table, size_t mask, uint64_t seed, const enr_reply_id *ids,
                         const char *s, size_t len)
{
    for (size_t i = enr_hash_key(seed, 0, s, len) & mask;; i = (i + 1) & mask) {
        uint32_t *slot = &table[i];
        if (*slot == 0)
            return slot;
        if (ids[*slot - 1].id_len == len && memcmp(ids[*slot - 1].id, s, len) == 0)
            return slot;
    }
}

static void reset_ids(enr_reply_id *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ids[i].state = ENR_REPLY_ABSENT;
        ids[i].has_poster = ids[i].has_duration = 0;
        ids[i].poster_off = ids[i].poster_len = 0;
        ids[i].duration = 0;
    }
}

/* One item naming a requested id that is still undecided. */
static void take_item(json_object *it, enr_reply_id *r, enr_buf *arena)
{
    json_object *jp, *jd;
    double d;

    if (json_object_object_get_ex(it, "poster", &jp) && json_object_is_type(jp, json_type_string) &&
        poster_ok(json_object_get_string(jp), (size_t)json_object_get_string_len(jp))) {
        size_t plen = (size_t)json_object_get_string_len(jp);
        size_t off = arena->len;
        enr_buf_append(arena, json_object_get_string(jp), plen);
        if (!arena->oom) {
            r->poster_off = off;
            r->poster_len = plen;
            r->has_poster = 1;
        }
    }
    if (json_object_object_get_ex(it, "duration", &jd) && duration_ok(jd, &d)) {
        r->duration = d;
        r->has_duration = 1;
    }
    /* An item with nothing usable tells no more than absence, but it
     * still decides the id: a later duplicate is ignored. */
    r->state = (r->has_poster || r->has_duration) ? ENR_REPLY_FOUND : ENR_REPLY_EMPTY;
}

int enr_upstream_reply_parse(struct json_tokener *tok, const char *body, size_t len,
                             enr_reply_id *ids, size_t n, uint64_t seed, enr_buf *arena)
{
    json_object *root, *items;
    uint32_t *table;
    size_t end, nitems, tcap = 16;
    int rc = -1;

    reset_ids(ids, n);
    if (len == 0 || len > INT_MAX || n > UINT32_MAX / 4)
        return -1;
    while (tcap < 2 * n)
        tcap <<= 1;
    table = calloc(tcap, sizeof(*table));
    if (table == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        uint32_t *slot = id_slot(table, tcap - 1, seed, ids, ids[i].id, ids[i].id_len);
        if (*slot == 0)
            *slot = (uint32_t)(i + 1); /* a duplicate id keeps its first index */
    }

    json_tokener_reset(tok);
    root = json_tokener_parse_ex(tok, body, (int)len);
    if (root == NULL || json_tokener_get_error(tok) != json_tokener_success)
        goto out;
    for (end = json_tokener_get_parse_end(tok); end < len; end++)
        if (memchr(" \t\r\n", body[end], 4) == NULL)
            goto out;
    if (!json_object_is_type(root, json_type_object) ||
        !json_object_object_get_ex(root, "items", &items) ||
        !json_object_is_type(items, json_type_array))
        goto out;
    nitems = json_object_array_length(items);
    for (size_t i = 0; i < nitems; i++) {
        json_object *it = json_object_array_get_idx(items, i), *jid;
        uint32_t *slot;
        if (!json_object_is_type(it, json_type_object) ||
            !json_object_object_get_ex(it, "id", &jid) ||
            !json_object_is_type(jid, json_type_string))
            continue; /* not an item we can use: ignored, like extra fields */
        slot = id_slot(table, tcap - 1, seed, ids, json_object_get_string(jid),
                       (size_t)json_object_get_string_len(jid));
        if (*slot == 0 || ids[*slot - 1].state != ENR_REPLY_ABSENT)
            continue; /* an id we did not ask for, or a duplicate */
        take_item(it, &ids[*slot - 1], arena);
    }
    rc = 0;
out:
    if (rc != 0)
        reset_ids(ids, n);
    json_object_put(root);
    free(table);
    return rc;
}
